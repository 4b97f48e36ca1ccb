"""Copy-on-write deletion of rows: a data file with deleted rows is rewritten without them (and with
replacement rows, e.g. updated ones), on a small thread pool."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ..actions import AddFile
from ..schema import arrow_values
from ..schema.conform import cast_batch
from .internal_columns import ROW

if TYPE_CHECKING:
    from ..table_features.row_rules import WriterFeatures


def rows_at(content: pa.Table, rows: np.ndarray) -> pa.Table:
    """The rows of a file's ``content`` (as ``read_file`` gives it: ascending ``ROW``) at the file row
    indexes ``rows`` (ascending, each present)."""
    return content.take(arrow_values.from_numpy(np.searchsorted(arrow_values.to_numpy(content.column(ROW)), rows)))


@dataclass
class NewValues:
    """Updated rows given by their new values: the file's rows being deleted (or those of them at the
    file row indexes ``at``, ascending; the others are only deleted), with ``columns`` (one row per
    updated row, in the same ascending order) in place of theirs. A rewrite builds them from the file
    it reads anyway, so an update need not read the file first."""

    columns: pa.Table
    at: np.ndarray | None = None

    def rows(self, content: pa.Table, rows: np.ndarray) -> pa.Table:
        """The updated rows, from the file's ``content`` and the deleted file row indexes ``rows``."""
        out = rows_at(content, rows if self.at is None else self.at)
        for name in self.columns.column_names:
            out = out.set_column(out.schema.get_field_index(name), self.columns.field(name), self.columns.column(name))  # (cast on writing)
        return out


def _filtered(schema: pa.Schema, columns: list[pa.ChunkedArray], mask: pa.Array) -> pa.Table:
    """A table's rows where ``mask`` is true, from its ``schema`` and ``columns``, which it filters one at
    a time, letting go of each column once its copy is made: when no one else holds the table, a file's
    rows and their filtered copy are never both held whole."""
    for i in range(len(columns)):
        columns[i] = columns[i].filter(mask)
    return pa.Table.from_arrays(columns, schema=schema)


def table_rows(batch: pa.RecordBatch, schema: pa.Schema, features: WriterFeatures | None = None) -> pa.RecordBatch:
    """``batch`` cast to the table's ``schema``, without the internal columns (row positions) it carries."""
    keep = [n for n in batch.schema.names if n in schema.names]
    if len(keep) != batch.num_columns:
        batch = batch.select(keep)
    return cast_batch(batch, schema, features.computed if features is not None else ())


class CopyOnWrite:
    """Deletes rows of a data file by rewriting the file without them (the table's other files stay).

    Each rewrite (read the file unless the caller has it, drop the rows, write the rest) is a task on
    the operation's pool (``op.pool``, which also reads files) with its own writer, so files are
    rewritten in parallel; at most ``2 * workers`` rewrites are in flight, which bounds memory.
    """

    readded = 0  # files re-added with a new deletion vector (merge-on-read only)
    dv_metrics: dict[str, int] = {}

    def __init__(self, op: "RowLevelOperation"):
        self.op = op
        self.copied_rows = 0
        self._pending: list[Future] = []
        self._adds: list[AddFile] = []

    @property
    def workers(self) -> int:
        """The operation's pool size (a worker of a distributed operation may set its own)."""
        return self.op.threads

    def delete_rows(self, add: AddFile, rows: np.ndarray, content: pa.Table | None = None, num_rows: int | None = None,
                    replacement: pa.Table | NewValues | None = None, known: pa.Table | None = None) -> None:
        """Mark the rows at file row indexes ``rows`` of ``add`` deleted. ``content``: the file's rows as
        read (table columns and ``ROW``), when the caller has them; ``num_rows``: the file's row count;
        ``replacement``: new rows (e.g. the updated versions of these rows) to write with the file's
        remaining rows (a deletion-vector implementation writes them to new files instead), or their
        ``NewValues``."""
        if len(rows) == 0:
            return
        self.op.remove(add)
        if num_rows is not None and len(rows) >= num_rows and replacement is None:
            return  # every row goes: nothing to copy
        while len(self._pending) >= 2 * self.workers:
            self._collect(self._pending.pop(0))
        self._pending.append(self.op.pool.submit(self._rewrite, add, rows, content, num_rows, replacement, known))

    def _rewrite(self, add: AddFile, rows: np.ndarray, content: pa.Table | None, num_rows: int | None,
                 replacement: pa.Table | NewValues | None, known: pa.Table | None = None) -> tuple[list[AddFile], int]:
        if isinstance(replacement, NewValues):
            if content is None:
                content = self.op.complete(add, known)
            replacement = replacement.rows(content, rows)
        if num_rows is not None and len(rows) >= num_rows:
            kept = None
        else:
            if content is None:
                content = self.op.complete(add, known)
            index = arrow_values.to_numpy(content.column(ROW))  # ascending file row indexes
            mask = np.ones(content.num_rows, dtype=bool)
            if len(index) and index[0] == 0 and index[-1] == len(index) - 1:
                mask[rows] = False  # every row of the file is here (no deletion vector): indexes are positions
            else:
                at = np.searchsorted(index, rows)
                mask[at[(at < len(index)) & (index[np.minimum(at, len(index) - 1)] == rows)]] = False
            del index
            schema, columns = content.schema, content.columns
            content = None
            kept = _filtered(schema, columns, arrow_values.from_numpy(mask))  # (a boolean filter copies faster than a take of indexes)
        parts = [t for t in (kept, replacement) if t is not None and t.num_rows]
        if not parts:
            return [], 0
        writer = self.op.new_writer(like=add)
        features = self.op.features
        try:
            for t in parts:
                for batch in t.to_batches():
                    if t is replacement and features is not None:  # new rows; the kept ones are copies
                        rows = features.apply(table_rows(batch, self.op.schema, features))
                    else:
                        rows = table_rows(batch, self.op.schema)
                    writer.write(self.op.materialized(rows, batch, copied=t is not replacement))
            return writer.finish(), kept.num_rows if kept is not None else 0
        except BaseException:
            writer.abort()
            raise

    def _collect(self, future: Future) -> None:
        adds, copied = future.result()
        self._adds.extend(adds)
        self.copied_rows += copied

    def finish(self) -> list[AddFile]:
        """Wait for every rewrite; the new files."""
        while self._pending:
            self._collect(self._pending.pop(0))
        return list(self._adds)

    def abort(self) -> list[AddFile]:
        """Stop: wait for running rewrites and return every file written (for the caller to delete)."""
        for f in self._pending:
            f.cancel()
        for f in self._pending:
            try:
                self._collect(f)
            except BaseException:
                pass
        self._pending = []
        return list(self._adds)

    def discard(self) -> None:
        """Nothing beyond the new files (which the caller deletes)."""


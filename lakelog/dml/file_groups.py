"""Candidate files' rows in bounded groups, each row with its file (``FILE``, an index into the
operation's candidate files) and its position in that file (``ROW``): what a row-level operation
evaluates predicates and joins on before it knows which files change."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa

from ..actions import AddFile
from ..schema import arrow_values
from ..schema.partition_values import parse_partition_value
from ..log.snapshot import Snapshot
from ..expressions.sql import Engine
from .internal_columns import FILE, ROW
from .exact_predicate import filter_table
from .predicate import Predicate


@dataclass
class Group:
    """Rows of a bounded group of files: ``table`` has the requested columns plus FILE and ROW."""

    files: list[AddFile]
    first: int  # FILE index of files[0]
    table: pa.Table
    counts: list[int]  # rows per file

    def rows_of(self, fi: int, with_file: bool = False) -> pa.Table:
        """The rows of file ``fi`` (a FILE index in this group), without ``FILE`` unless ``with_file``."""
        k = fi - self.first
        start = sum(self.counts[:k])
        rows = self.table.slice(start, self.counts[k])
        return rows if with_file else rows.drop_columns([FILE])

    def _masked(self, mask: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
        rows = arrow_values.to_numpy(self.table.column(ROW))
        start = 0
        for k, n in enumerate(self.counts):
            hit = np.flatnonzero(mask[start : start + n])
            if len(hit):
                yield self.first + k, rows[start + hit]
            start += n

    def selected(self, engine: Engine, predicate: Predicate) -> Iterator[tuple[int, np.ndarray]]:
        """(FILE index, ascending file row indexes) of the rows the predicate selects, per file."""
        expression = predicate.expression if predicate.expression is not None else predicate.exact_for(self.table.schema)
        if predicate.everything:
            hit = self.table.select([FILE, ROW])
        elif expression is not None:
            hit = filter_table(self.table, expression, [FILE, ROW])
        else:
            # The positions of the selected rows, not a mask read in result order: the engine may
            # return rows in any order (an IN list is a join), so only a carried position is trusted.
            yield from self._masked(engine.mask(self.table, predicate.sql, f"cannot evaluate the predicate {predicate.sql!r}"))
            return
        if hit.num_rows == 0:
            return
        files, rows = arrow_values.to_numpy(hit.column(FILE)), arrow_values.to_numpy(hit.column(ROW))
        order = np.lexsort((rows, files))
        files, rows = files[order], rows[order]
        cuts = np.flatnonzero(np.diff(files)) + 1
        for chunk_f, chunk_r in zip(np.split(files, cuts), np.split(rows, cuts)):
            yield int(chunk_f[0]), chunk_r


def with_file_index(tables: list[pa.Table], indexes) -> list[pa.Table]:
    """Each of ``tables`` (one file's rows) with its FILE index (from ``indexes``) as a column."""
    return [t.append_column(FILE, arrow_values.from_numpy(np.full(t.num_rows, i, dtype=np.int32))) for i, t in zip(indexes, tables)]


def split_by_file(table: pa.Table) -> dict[int, pa.Table]:
    """Rows of ``table`` per value of its FILE column."""
    if table.num_rows == 0:
        return {}
    table = table.sort_by(FILE)
    fs = table.column(FILE).to_numpy().astype(np.int64)
    cuts = [0, *(np.flatnonzero(np.diff(fs)) + 1).tolist(), len(fs)]
    return {int(fs[a]): table.slice(a, b - a) for a, b in zip(cuts, cuts[1:])}


def partition_table(snapshot: Snapshot, files: list[AddFile]) -> pa.Table:
    """One row per file: its typed partition values and its FILE index (for partition-only predicates)."""
    cols = {}
    for c in snapshot.partition_columns:
        t = snapshot.schema.field(c).type
        key = snapshot.column_mapping.physical_name(c)
        cols[c] = pa.array([parse_partition_value(a.partition_values.get(key), t) for a in files], t)
    cols[FILE] = pa.array(np.arange(len(files), dtype=np.int64))
    return pa.table(cols)

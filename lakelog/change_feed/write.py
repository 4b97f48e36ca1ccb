"""Recording the rows a row-level operation changes as change data files (``cdc`` actions under
``_change_data/``), for tables with the change data feed on.

Delta's rule for readers: a commit with ``cdc`` actions is read from them alone; otherwise its adds are
inserts and its removes deletes. A row-level operation rewrites files (copying unchanged rows), so every
row it changes goes into change files: ``delete``, ``update_preimage``/``update_postimage`` and
``insert`` (merge inserts, and the rows of a predicate or dynamic partition overwrite), partitioned as
the table and with the table's column mapping.
"""

from __future__ import annotations

import pyarrow as pa

from ..actions import AddCDCFile
from ..schema.conform import cast_batch
from ..write.files import DataWriter
from .read import CHANGE_TYPE

KINDS = ("insert", "delete", "update_preimage", "update_postimage")


class ChangeRecorder:
    """Collects one operation's changed rows into change data files; ``finish`` returns their actions."""

    def __init__(self, storage, schema: pa.Schema, partition_columns: list[str], column_mapping=None):
        self.storage, self.schema, self.partition_columns, self.column_mapping = storage, schema, partition_columns, column_mapping
        self._writer: DataWriter | None = None
        self.counts = dict.fromkeys(KINDS, 0)

    def _new_writer(self) -> DataWriter:
        schema = self.schema.append(pa.field(CHANGE_TYPE, pa.string()))
        return DataWriter(self.storage, schema, self.partition_columns, 0, "cdc", column_mapping=self.column_mapping,
                          directory="_change_data", extra_columns=(CHANGE_TYPE,))

    def record(self, rows: pa.Table | pa.RecordBatch, kind: str) -> None:
        """Record ``rows`` (the table's columns; others are ignored) as changes of ``kind``."""
        if rows.num_rows == 0:
            return
        if self._writer is None:
            self._writer = self._new_writer()
        table = rows if isinstance(rows, pa.Table) else pa.Table.from_batches([rows])
        table = table.select([n for n in table.schema.names if n in self.schema.names])
        for batch in table.to_batches():
            b = cast_batch(batch, self.schema)
            self._writer.write(pa.RecordBatch.from_arrays([*b.columns, pa.array([kind] * b.num_rows, pa.string())],
                                                          schema=b.schema.append(pa.field(CHANGE_TYPE, pa.string()))))
        self.counts[kind] += table.num_rows

    def finish(self) -> list[AddCDCFile]:
        if self._writer is None:
            return []
        adds = self._writer.finish()
        self._writer = None
        return [AddCDCFile(a.path, a.partition_values, a.size) for a in adds]

    def abort(self) -> None:
        if self._writer is not None:
            self._writer.abort()
            self._writer = None

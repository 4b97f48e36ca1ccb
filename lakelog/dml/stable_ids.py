"""Row tracking in row-level changes: rows keep their stable row ids when a rewrite copies or updates
them, and their row commit versions when it copies them, through the table's materialized columns
(``lakelog.table_features.row_tracking``). Rows read for a rewrite carry ``ROW_ID``/``ROW_VERSION``; rows written get
the materialized columns from them (null for new rows: their fresh ids are their stable ones)."""

from __future__ import annotations

import pyarrow as pa

from ..table_features import row_tracking
from ..table_features.row_tracking import writer_schema
from ..actions import AddFile
from .internal_columns import ROW, ROW_ID, ROW_VERSION

_INT64 = pa.int64()


def with_stable_ids(table: pa.Table, add: AddFile, stored: pa.Table | None, materialized: tuple[str, str]) -> pa.Table:
    """``table`` (a whole file's rows with their ``ROW``, before its deletion vector applies) with each
    row's stable id and commit version; ``stored``: the file's materialized columns (those it has)."""
    ids, versions = row_tracking.row_ids(add, table.column(ROW), stored, materialized)
    return table.append_column(ROW_ID, ids).append_column(ROW_VERSION, versions)


def materialize(rows: pa.RecordBatch, source: pa.RecordBatch | pa.Table, materialized: tuple[str, str], copied: bool) -> pa.RecordBatch:
    """``rows`` (in the table's columns) plus the materialized columns: the stable ids ``source`` carries
    (none for new rows), and for rows ``copied`` unchanged their commit versions (an updated row takes the
    commit's version: null)."""
    n = rows.num_rows
    names = source.schema.names
    ids = source.column(ROW_ID) if ROW_ID in names else pa.nulls(n, _INT64)
    versions = source.column(ROW_VERSION) if copied and ROW_VERSION in names else pa.nulls(n, _INT64)
    arrays = list(rows.columns) + [_array(ids), _array(versions)]
    return pa.RecordBatch.from_arrays(arrays, schema=writer_schema(rows.schema, materialized))


def _array(values) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values

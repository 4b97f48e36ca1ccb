"""The data a caller hands to a write or a merge (a pyarrow Table, RecordBatch or RecordBatchReader, anything with
an Arrow C stream, a pandas DataFrame) as one Arrow schema and a stream of record batches."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..errors import InvalidArgumentTypeError, SchemaMismatchError


def _from_pandas(df: Any) -> pa.Table:
    """A pandas DataFrame as Arrow: named index levels become columns (after the others, as pyarrow and
    deltalake place them); unnamed ones (a default RangeIndex, a filtered frame's row labels) are dropped."""
    if not hasattr(df, "index") or not hasattr(df, "columns"):
        raise InvalidArgumentTypeError(f"cannot write a pandas {type(df).__name__}; pass a DataFrame (e.g. series.to_frame())")
    named = [n for n in df.index.names if n is not None]
    try:
        t = pa.Table.from_pandas(df, preserve_index=bool(named))
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError) as e:
        raise SchemaMismatchError(f"the DataFrame cannot be converted to Arrow: {e}") from None
    if named:
        meta = t.schema.pandas_metadata or {}
        index_fields = {c for c in meta.get("index_columns", []) if isinstance(c, str)}
        unnamed = []
        for c in meta.get("columns", []):
            if c.get("field_name") not in index_fields:
                continue
            if c.get("name") is None:
                unnamed.append(c["field_name"])
            elif c["field_name"] != str(c["name"]):  # pyarrow renames a level that shares a column's name
                raise SchemaMismatchError(
                    f"the DataFrame's index level {c['name']!r} has the name of one of its columns; "
                    "rename the level, or drop the index with df.reset_index(drop=True)"
                )
        if unnamed:
            t = t.drop_columns(unnamed)
    return t.replace_schema_metadata(None)


def to_arrow_stream(data: Any) -> tuple[pa.Schema, Any]:
    """Accept pyarrow Table/RecordBatch/RecordBatchReader or pandas DataFrame; return (schema, batch iterator)."""
    if isinstance(data, pa.Table):
        return data.schema, iter(data.to_batches())
    if isinstance(data, pa.RecordBatch):
        return data.schema, iter([data])
    if isinstance(data, pa.RecordBatchReader):
        return data.schema, iter(data)
    mod = type(data).__module__
    if mod.startswith("pandas"):
        t = _from_pandas(data)
        return t.schema, iter(t.to_batches())
    if hasattr(data, "__arrow_c_stream__"):
        r = pa.RecordBatchReader.from_stream(data)
        return r.schema, iter(r)
    raise InvalidArgumentTypeError(f"cannot write data of type {type(data).__name__}; pass a pyarrow Table, RecordBatch, RecordBatchReader or pandas DataFrame")

"""Column mapping (Delta's ``columnMapping`` feature): logical column names vs. the names in files.

With ``delta.columnMapping.mode`` = ``name`` or ``id``, every struct field of the schema (nested ones
included) carries ``delta.columnMapping.physicalName`` and ``delta.columnMapping.id`` in its metadata.
Data files name their columns by physical name; in ``id`` mode they are found by Parquet field id
(pyarrow's ``PARQUET:field_id`` field metadata) instead. Partition values and per-file stats are keyed
by physical names; ``metaData.partitionColumns`` and everything a user sees use logical names. Renaming
a column changes only its logical name, so files written before a rename are still found.

``FileColumns`` turns the columns read from one Parquet file into the table's logical columns:
fields are matched by physical name, field id or (no column mapping) name, recursively through
structs, list elements and map keys and values; a field a file lacks reads as nulls; each value is
cast to the table's type, which is how files written before a type widening (``lakelog.type_widening``)
are read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from .errors import CorruptLogError, IncompatibleDataFileError

PHYSICAL_NAME = "delta.columnMapping.physicalName"
FIELD_ID = "delta.columnMapping.id"
PARQUET_FIELD_ID = b"PARQUET:field_id"
MODES = ("none", "name", "id")


def field_id(f: pa.Field) -> int | None:
    """The Parquet field id pyarrow reports for a file's field (None without one)."""
    meta = f.metadata
    if not meta or PARQUET_FIELD_ID not in meta:
        return None
    try:
        return int(meta[PARQUET_FIELD_ID])
    except ValueError:
        return None


@dataclass
class ColumnMapping:
    """How a table's logical columns are found in its files. Plain data, so it travels to Spark tasks."""

    mode: str  # none | name | id
    schema_string: str
    _fields: list[dict] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, metadata: Any, mode: str) -> "ColumnMapping":
        """The mapping of a ``metaData`` action under ``mode`` (the table's ``delta.columnMapping.mode``)."""
        if mode not in MODES:
            raise CorruptLogError(f"column mapping mode {mode!r} is not one of {MODES}")
        return cls(mode, metadata.schema_string)

    @property
    def active(self) -> bool:
        return self.mode != "none"

    @property
    def fields(self) -> list[dict]:
        """The schema's top-level Delta fields (JSON objects, metadata included)."""
        if self._fields is None:
            try:
                self._fields = orjson.loads(self.schema_string)["fields"]
            except (orjson.JSONDecodeError, KeyError, TypeError) as e:
                raise CorruptLogError(f"metaData.schemaString is not a valid Delta schema ({e})") from None
        return self._fields

    def delta_field(self, name: str) -> dict:
        for f in self.fields:
            if f.get("name") == name:
                return f
        raise KeyError(name)

    def physical_name(self, name: str) -> str:
        """The physical name of the top-level column ``name`` (its own name without column mapping)."""
        if not self.active:
            return name
        return physical_name(self.delta_field(name))

    def logical_partition_values(self, values: dict[str, str | None], partition_columns: list[str]) -> dict[str, str | None]:
        """``add.partitionValues`` (keyed by physical names) keyed by the logical partition column names."""
        if not self.active:
            return values
        out = {}
        for c in partition_columns:
            key = self.physical_name(c)
            if key in values:
                out[c] = values[key]
        return out

    def stats_key(self, name: str) -> str:
        """The key of the top-level column ``name`` in ``minValues``/``maxValues``/``nullCount``."""
        return self.physical_name(name)

    def file_columns(self, file_schema: pa.Schema, names: list[str], path: str) -> "FileColumns":
        """How to read the logical columns ``names`` from a file with ``file_schema``."""
        return FileColumns(self, file_schema, names, path)


def physical_name(f: dict) -> str:
    meta = f.get("metadata") or {}
    name = meta.get(PHYSICAL_NAME)
    return name if isinstance(name, str) and name else f["name"]


def _mapped_id(f: dict) -> int | None:
    v = (f.get("metadata") or {}).get(FIELD_ID)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _match(file_fields: list[pa.Field], f: dict, mode: str) -> int | None:
    """The index of the file field holding the Delta field ``f`` (None: the file lacks it)."""
    if mode == "id":
        want = _mapped_id(f)
        if want is None:
            raise CorruptLogError(f"column {f.get('name')!r} has no {FIELD_ID} in a table with column mapping mode 'id'")
        for i, ff in enumerate(file_fields):
            if field_id(ff) == want:
                return i
        return None
    want = physical_name(f) if mode == "name" else f["name"]
    for i, ff in enumerate(file_fields):
        if ff.name == want:
            return i
    return None


class FileColumns:
    """The logical columns of one data file: which of its top-level columns to read, and how to turn
    them into the table's columns (``convert``)."""

    def __init__(self, mapping: ColumnMapping, file_schema: pa.Schema, names: list[str], path: str):
        self.mapping, self.path = mapping, path
        self.names = names
        file_fields = list(file_schema)
        if mapping.mode == "id" and names and not any(field_id(f) is not None for f in file_fields):
            raise IncompatibleDataFileError(
                f"data file {path!r} has no Parquet field ids, but the table maps columns by id (column mapping mode "
                "'id'); its columns cannot be identified. Rewrite it with the engine that wrote the table",
                [path],
            )
        self.sources: dict[str, int | None] = {}
        for name in names:
            df = mapping.delta_field(name) if mapping.active else {"name": name}
            self.sources[name] = _match(file_fields, df, mapping.mode)
        self.file_fields = file_fields

    @property
    def to_read(self) -> list[str]:
        """The file's top-level column names to read."""
        return [self.file_fields[i].name for i in self.sources.values() if i is not None]

    def convert(self, data: pa.Table, schema: pa.Schema) -> list[pa.ChunkedArray]:
        """The logical columns (``names``, typed as in ``schema``) from ``data``, the file's ``to_read`` columns."""
        out = []
        n = data.num_rows
        for name in self.names:
            target = schema.field(name).type
            i = self.sources[name]
            if i is None:
                out.append(pa.chunked_array([pa.nulls(n, target)], target))
                continue
            col = data.column(self.file_fields[i].name)
            dtype = self.mapping.delta_field(name)["type"] if self.mapping.active else None
            try:
                chunks = [_convert(c, dtype, target, self.mapping.mode) for c in col.chunks]
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, _Mismatch) as e:
                raise IncompatibleDataFileError(
                    f"data file {self.path!r} stores column {name!r} as {col.type}, which cannot be read as the table's "
                    f"type {target} ({e})",
                    [self.path],
                ) from None
            out.append(pa.chunked_array(chunks, target))
        return out


class _Mismatch(Exception):
    pass


def _rebased(arr: pa.Array, *children: pa.Array) -> tuple[pa.Array, list[pa.Array]]:
    """Offsets of a (possibly sliced) list or map array starting at 0, and the children they index."""
    offsets = arr.offsets
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    return pc.subtract(offsets, pa.scalar(start, offsets.type)), [c.slice(start, end - start) for c in children]


def _convert(arr: pa.Array, dtype: Any, target: pa.DataType, mode: str) -> pa.Array:
    """``arr`` (as stored in a file) as an array of ``target``; ``dtype`` is the Delta type (the JSON
    of the schema, with column mapping metadata), or None to match nested fields by name."""
    if pa.types.is_struct(target):
        if not pa.types.is_struct(arr.type):
            raise _Mismatch(f"expected a struct, found {arr.type}")
        file_fields = [arr.type.field(i) for i in range(arr.type.num_fields)]
        children = arr.flatten()
        delta_fields = dtype["fields"] if isinstance(dtype, dict) else [{"name": target.field(i).name} for i in range(target.num_fields)]
        out = []
        for df, tf in zip(delta_fields, (target.field(i) for i in range(target.num_fields))):
            j = _match(file_fields, df, mode if isinstance(dtype, dict) else "none")
            out.append(pa.nulls(len(arr), tf.type) if j is None else _convert(children[j], df.get("type"), tf.type, mode))
        return pa.StructArray.from_arrays(out, fields=[target.field(i) for i in range(target.num_fields)], mask=arr.is_null() if arr.null_count else None)
    if pa.types.is_list(target) or pa.types.is_large_list(target):
        if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
            raise _Mismatch(f"expected a list, found {arr.type}")
        element = dtype.get("elementType") if isinstance(dtype, dict) else None
        offsets, (values,) = _rebased(arr, arr.values)
        values = _convert(values, element, target.value_type, mode)
        cls = pa.LargeListArray if pa.types.is_large_list(target) else pa.ListArray
        offsets = offsets.cast(pa.int64() if pa.types.is_large_list(target) else pa.int32())
        return cls.from_arrays(offsets, values, type=target, mask=arr.is_null() if arr.null_count else None)
    if pa.types.is_map(target):
        if not pa.types.is_map(arr.type):
            raise _Mismatch(f"expected a map, found {arr.type}")
        kt = dtype.get("keyType") if isinstance(dtype, dict) else None
        vt = dtype.get("valueType") if isinstance(dtype, dict) else None
        offsets, (keys, items) = _rebased(arr, arr.keys, arr.items)
        keys = _convert(keys, kt, target.key_type, mode)
        items = _convert(items, vt, target.item_type, mode)
        return pa.MapArray.from_arrays(offsets, keys, items, type=target, mask=arr.is_null() if arr.null_count else None)
    if arr.type == target:
        return arr
    if pa.types.is_nested(arr.type):
        raise _Mismatch(f"expected {target}, found {arr.type}")
    return arr.cast(target)

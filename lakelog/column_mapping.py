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

import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from . import collations
from .errors import CorruptLogError, IncompatibleDataFileError, InvalidTablePropertyError
from .schema import VARIANT_METADATA, VARIANT_STORAGE, is_variant_field

PHYSICAL_NAME = "delta.columnMapping.physicalName"
FIELD_ID = "delta.columnMapping.id"
PARQUET_FIELD_ID = b"PARQUET:field_id"
NESTED_IDS = "delta.columnMapping.nested.ids"  # ids of array elements and map keys/values (IcebergCompatV2)
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
        if target == VARIANT_STORAGE and "typed_value" in arr.type.names:
            from .variant_columns import unshred

            return unshred(arr)  # a shredded variant, reassembled into its binaries
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


# ---------------------------------------------------------------- writing

MAX_COLUMN_ID = "delta.columnMapping.maxColumnId"


def _child_types(dtype: Any) -> list[tuple[str, Any]]:
    """(key, nested type) pairs under a Delta type that may hold struct fields."""
    if not isinstance(dtype, dict):
        return []
    if dtype.get("type") == "array":
        return [("elementType", dtype.get("elementType"))]
    if dtype.get("type") == "map":
        return [("keyType", dtype.get("keyType")), ("valueType", dtype.get("valueType"))]
    return []


def _fields_of(dtype: Any) -> list[dict] | None:
    return dtype.get("fields") if isinstance(dtype, dict) and dtype.get("type") == "struct" else None


def _max_id(fields: list[dict]) -> int:
    top = 0
    for f in fields:
        top = max(top, _mapped_id(f) or 0)
        top = max(top, _max_id_type(f.get("type")))
    return top


def _max_id_type(dtype: Any) -> int:
    sub = _fields_of(dtype)
    if sub is not None:
        return _max_id(sub)
    return max((_max_id_type(t) for _, t in _child_types(dtype)), default=0)


def mapped_schema_string(schema_json: dict, sources: list[str | None], max_id: int) -> tuple[str, int]:
    """``schema_json`` (a Delta struct type without column mapping metadata) with it, and the new
    ``delta.columnMapping.maxColumnId``.

    A field keeps the metadata of the same-named field (at the same place) in the first of ``sources``
    (schema strings) that has one, under its own (its collations are its own); a kept field without a physical name or id gets its logical name as
    physical name and a new id (as Delta does when column mapping is enabled on an existing table: the
    files already name the column so). A new field gets a new id and the physical name ``col-<uuid>``,
    so it can never pick up the values of a dropped or renamed column.
    """
    parsed = [orjson.loads(s)["fields"] for s in sources if s]
    counter = [max(max_id, *(_max_id(p) for p in parsed))] if parsed else [max_id]

    def next_id() -> int:
        counter[0] += 1
        return counter[0]

    def walk_type(dtype: Any, olds: list[Any]) -> Any:
        sub = _fields_of(dtype)
        if sub is not None:
            return {**dtype, "fields": walk(sub, [_fields_of(o) or [] for o in olds])}
        out = dict(dtype) if isinstance(dtype, dict) else dtype
        for key, t in _child_types(dtype):
            out[key] = walk_type(t, [o.get(key) for o in olds if isinstance(o, dict)])
        return out

    def walk(fields: list[dict], olds: list[list[dict]]) -> list[dict]:
        out = []
        for f in fields:
            matches = [o for old in olds for o in old if o.get("name") == f["name"]]
            # The field's own metadata wins: its collations (__COLLATIONS) are the schema's, kept or new.
            meta = {k: v for k, v in (matches[0].get("metadata") or {}).items() if k != collations.METADATA_KEY} if matches else {}
            meta.update(f.get("metadata") or {})
            if not matches:
                meta[PHYSICAL_NAME] = f"col-{uuid.uuid4()}"
            elif not meta.get(PHYSICAL_NAME):
                meta[PHYSICAL_NAME] = f["name"]
            if _mapped_id({"metadata": meta}) is None:
                meta[FIELD_ID] = next_id()
            out.append({**f, "type": walk_type(f["type"], [m.get("type") for m in matches]), "metadata": meta})
        return out

    fields = walk(schema_json["fields"], parsed)
    return orjson.dumps({**schema_json, "fields": fields}).decode(), counter[0]


def physical_schema(schema_string: str, logical: pa.Schema) -> pa.Schema:
    """The Arrow schema data files are written with: physical names, and Parquet field ids (Spark
    writes them in both modes; array elements and map keys and values get theirs from
    ``delta.columnMapping.nested.ids`` when the schema has them), for the columns of ``logical`` (a
    subset of the table's, same types)."""
    by_name = {f["name"]: f for f in orjson.loads(schema_string)["fields"]}

    def id_meta(i: Any, f: pa.Field | None = None) -> dict | None:
        meta = {PARQUET_FIELD_ID: str(i).encode()} if isinstance(i, int) and not isinstance(i, bool) else None
        if f is not None and is_variant_field(f):  # (kept: the stats see one variant column)
            meta = {**(meta or {}), **VARIANT_METADATA}
        return meta

    def field_of(f: pa.Field, df: dict) -> pa.Field:
        nested = (df.get("metadata") or {}).get(NESTED_IDS)
        ids = (nested if isinstance(nested, dict) else {}, physical_name(df))
        return pa.field(physical_name(df), type_of(f.type, df.get("type"), ids), f.nullable, metadata=id_meta(_mapped_id(df), f))

    def type_of(t: pa.DataType, dtype: Any, ids: tuple[dict, str]) -> pa.DataType:
        # Array elements and map keys and values carry the ids of their nearest struct field's
        # delta.columnMapping.nested.ids (keyed "<physical name>.element", ".key", ".value", nested on).
        nested, path = ids
        if pa.types.is_struct(t):
            subs = {d["name"]: d for d in _fields_of(dtype) or []}
            return pa.struct([field_of(t.field(i), subs.get(t.field(i).name, {"name": t.field(i).name})) for i in range(t.num_fields)])
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            vf, key = t.value_field, f"{path}.element"
            elem = pa.field(vf.name, type_of(vf.type, dtype.get("elementType") if isinstance(dtype, dict) else None, (nested, key)), vf.nullable,
                            metadata=id_meta(nested.get(key), vf))
            return pa.large_list(elem) if pa.types.is_large_list(t) else pa.list_(elem)
        if pa.types.is_map(t):
            kt = type_of(t.key_type, dtype.get("keyType") if isinstance(dtype, dict) else None, (nested, f"{path}.key"))
            it = type_of(t.item_type, dtype.get("valueType") if isinstance(dtype, dict) else None, (nested, f"{path}.value"))
            return pa.map_(pa.field(t.key_field.name, kt, False, metadata=id_meta(nested.get(f"{path}.key"))),
                           pa.field(t.item_field.name, it, t.item_field.nullable, metadata=id_meta(nested.get(f"{path}.value"), t.item_field)), t.keys_sorted)
        return t

    return pa.schema([field_of(f, by_name[f.name]) for f in logical])


def to_physical(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` (logical columns) under the physical ``schema``: a zero-copy relabelling."""
    return pa.RecordBatch.from_arrays([c.view(f.type) for c, f in zip(batch.columns, schema)], schema=schema)


def check_mode_change(old: str, new: str) -> None:
    """Refuse a change of ``delta.columnMapping.mode`` Delta does not allow on an existing table: only
    none -> name (existing columns keep their names as physical names; no data is rewritten)."""
    if old == new or (old == "none" and new == "name"):
        return
    why = (
        "column mapping cannot be turned off once on (data files name columns by physical name)"
        if new == "none"
        else "an existing table can only go from none to name (id mode needs field ids in every file, so only new tables get it)"
        if old == "none"
        else "the mode of a table that has column mapping cannot change"
    )
    raise InvalidTablePropertyError(
        f"table property delta.columnMapping.mode cannot change from {old!r} to {new!r}: {why}",
        key="delta.columnMapping.mode",
        value=new,
    )

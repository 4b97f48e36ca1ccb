"""Fitting data to a table's schema: schema merge, safe casts and nullability, nested types included.

Store assignment follows Spark's ANSI rules restricted to casts that can never lose a value (the
widenings of Delta's type widening): integer widening (byte -> short -> int -> long), float ->
double, byte/short/int -> double, date -> timestamp_ntz, decimal(p,s) -> decimal(p',s') when
p'-s' >= p-s and s' >= s, and integers to decimals with room for every value (byte 3, short 5,
int 10, long 20 integer digits). They apply at any depth inside structs, lists and maps. An Arrow
``null`` column (all values null, Delta ``void``) fits any column. Anything else is a
``SchemaMismatchError`` naming the column path (``a.b``, ``a.element``, ``m.key``, ``m.value``) and
both types (the error's ``path``, ``data_type`` and ``table_type``). Update and merge values meet their columns by this same rule
(``lakelog.assignment_types``).

Struct fields are matched by name, in any order; fields the data lacks are filled with nulls when
the table allows them. ``schema_mode="merge"`` also adds fields the table lacks (as nullable, at any
depth, inside lists and maps too) and gives a ``void`` column the data's type; it never changes the
type of an existing column (that needs Delta's typeWidening feature), except that it stores integers
in a double column, checking that each value is exact (|v| <= 2**53).
"""

from __future__ import annotations

from typing import Collection

import pyarrow as pa
import pyarrow.compute as pc

from . import collations, geospatial
from .errors import SchemaMismatchError
from .schema import canonical_type, check_column_names, delta_type_string, is_variant_field, variant_field

_INT_DIGITS = {8: 3, 16: 5, 32: 10, 64: 20}  # decimal integer digits every value of a signed int fits in


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) or pa.types.is_list_view(t) or pa.types.is_large_list_view(t)


def safe_widening(src: pa.DataType, dst: pa.DataType) -> bool:
    """Whether every value of primitive type ``src`` (canonical) is stored exactly as ``dst``."""
    if src == dst:
        return True
    if pa.types.is_integer(src) and pa.types.is_signed_integer(dst):
        return src.bit_width < dst.bit_width
    if pa.types.is_float32(src) and pa.types.is_float64(dst):
        return True
    if pa.types.is_integer(src) and pa.types.is_float64(dst):
        return src.bit_width <= 32
    if pa.types.is_date32(src) and pa.types.is_timestamp(dst) and dst.tz is None:
        return True
    if pa.types.is_decimal(dst):
        if pa.types.is_decimal(src):
            return dst.precision - dst.scale >= src.precision - src.scale and dst.scale >= src.scale
        if pa.types.is_integer(src):
            return dst.precision - dst.scale >= _INT_DIGITS[src.bit_width]
    return False


def _mismatch(path: str, data: pa.DataType, table: pa.DataType, hint: str) -> SchemaMismatchError:
    return SchemaMismatchError(
        f"column {path!r} has type {delta_type_string(data)} in the data but {delta_type_string(table)} in the table; {hint}",
        path=path, data_type=data, table_type=table,
    )


_CAST_HINT = "cast the data to the table's type (only lossless widenings are applied), or overwrite with schema_mode='overwrite'"


def merge_type(table: pa.DataType, data: pa.DataType, path: str, merge: bool, types: bool = True) -> pa.DataType:
    """The column type after storing data of type ``data`` in a column of type ``table``.

    Equal to ``table`` unless ``merge`` adds struct fields or types a ``void`` column; raises
    SchemaMismatchError when the data cannot be stored without loss. ``types=False``: only adds (no
    type is checked; the Spark paths check values by Spark's store assignment).
    """
    if pa.types.is_dictionary(data):
        data = data.value_type
    if pa.types.is_null(data):
        return table
    if pa.types.is_null(table):
        if merge:
            return _new_type(data, path)
        raise _mismatch(path, data, table, "the table column is void (it has only ever held nulls); pass schema_mode='merge' to give it the data's type")
    shaped = (pa.types.is_struct(table) and pa.types.is_struct(data)) or (pa.types.is_list(table) and _is_list(data)) or (
        pa.types.is_map(table) and pa.types.is_map(data))
    if not types and not shaped:
        return table
    if pa.types.is_struct(table):
        if not pa.types.is_struct(data):
            raise _mismatch(path, data, table, _CAST_HINT)
        fields = merge_fields(list(table), [data.field(i) for i in range(data.num_fields)], path + ".", merge, types)
        return pa.struct(fields)
    if pa.types.is_list(table):
        if not _is_list(data):
            raise _mismatch(path, data, table, _CAST_HINT)
        if is_variant_field(table.value_field):
            return table  # (any data is made a variant when stored: see lakelog.variant_columns)
        element = merge_type(table.value_type, data.value_type, f"{path}.element", merge, types)
        return pa.list_(table.value_field.with_type(element))
    if pa.types.is_map(table):
        if not pa.types.is_map(data):
            raise _mismatch(path, data, table, _CAST_HINT)
        key = merge_type(table.key_type, data.key_type, f"{path}.key", merge, types)
        item = table.item_type if is_variant_field(table.item_field) else merge_type(table.item_type, data.item_type, f"{path}.value", merge, types)
        return pa.map_(table.key_field.with_type(key), table.item_field.with_type(item))
    if geospatial.is_geo(table):
        if geospatial.stores_as(data, table):
            return table
        raise _mismatch(path, data, table, "geometry and geography columns take WKB as binary or as the column's geoarrow.wkb type")
    try:
        src = canonical_type(data)
    except SchemaMismatchError:
        raise _mismatch(path, data, table, "the data's type has no Delta equivalent; cast it to the table's type") from None
    if pa.types.is_integer(src) and pa.types.is_float64(table) and not safe_widening(src, table):
        # long -> double only for the integers a double holds exactly (|v| <= 2**53), checked value by value
        # when stored: what a pandas column that gained a missing value needs, never a rounded number.
        if merge:
            return table
        raise _mismatch(path, data, table, "pass schema_mode='merge' to store the integers as double (a value beyond +-2**53, which "
                        "a double cannot hold exactly, is refused, never rounded), or cast the data to the table's type")
    if pa.types.is_nested(src) or not safe_widening(src, table):
        hint = _CAST_HINT if not merge else "schema_mode='merge' adds columns and fields but does not change a column's type; cast the data to the table's type"
        raise _mismatch(path, data, table, hint)
    return table


def _new_type(t: pa.DataType, path: str) -> pa.DataType:
    try:
        return canonical_type(t)
    except SchemaMismatchError as e:
        raise SchemaMismatchError(f"column {path!r}: {e}") from None


_NS_HINT = (
    "Delta timestamps are microseconds, and lakelog never rounds or truncates a value: truncate them first "
    "(pyarrow.compute.floor_temporal(column, unit='microsecond'), or pandas' Series.dt.floor('us'))"
)


def _microsecond_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_timestamp(t) and t.unit == "ns":
        return pa.timestamp("us", t.tz)
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_microsecond_type(t.field(i).type)) for i in range(t.num_fields)])
    if _is_list(t):
        return pa.list_(t.value_field.with_type(_microsecond_type(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(_microsecond_type(t.key_type)), t.item_field.with_type(_microsecond_type(t.item_type)))
    return t


def to_microseconds(table: pa.Table, what: str) -> pa.Table:
    """``table`` with its nanosecond timestamps (at any depth) as microseconds, exactly: a value with a
    sub-microsecond part is a ``SchemaMismatchError`` naming the column, as ``write_table`` refuses it."""
    cols = []
    for name, col in zip(table.column_names, table.columns):
        t = _microsecond_type(col.type)
        if t != col.type:
            try:
                col = col.cast(t, safe=True)
            except pa.ArrowInvalid as e:
                raise SchemaMismatchError(f"column {name!r} of the {what} has timestamps with nanoseconds ({e}). {_NS_HINT}") from None
        cols.append(col)
    return pa.Table.from_arrays(cols, schema=pa.schema([f.with_type(c.type) for f, c in zip(table.schema, cols)]))  # (field metadata kept)


def added_to(table: pa.DataType, data: pa.Field, path: str) -> pa.DataType:
    """``table`` once values of field ``data`` are stored in it with schema evolution that changes no
    type: the struct fields ``data`` has and it lacks added (nullable, at any depth, in lists and maps
    too), or, for a ``void`` column, ``data``'s type."""
    return merge_type(table, data.type, path, True, types=False)


def added_fields(table: pa.DataType, data: pa.DataType, path: str) -> list[str]:
    """Paths (``s.b``, ``l.element.c``, ``m.value.d``) of the struct fields, at any depth, that ``data``
    has and ``table`` lacks (names compared ignoring case)."""
    if pa.types.is_struct(table) and pa.types.is_struct(data):
        fields = {table.field(i).name.lower(): table.field(i) for i in range(table.num_fields)}
        out = []
        for i in range(data.num_fields):
            f = data.field(i)
            existing = fields.get(f.name.lower())
            out.extend([f"{path}.{f.name}"] if existing is None else added_fields(existing.type, f.type, f"{path}.{f.name}"))
        return out
    if _is_list(table) and _is_list(data):
        return added_fields(table.value_type, data.value_type, f"{path}.element")
    if pa.types.is_map(table) and pa.types.is_map(data):
        return added_fields(table.key_type, data.key_type, f"{path}.key") + added_fields(table.item_type, data.item_type, f"{path}.value")
    return []


def merge_fields(table: list[pa.Field], data: list[pa.Field], prefix: str, merge: bool, types: bool = True) -> list[pa.Field]:
    """Merge the fields of a struct (or, with ``prefix`` "", of a schema); see ``merge_type``."""
    by_lower = {f.name.lower(): f for f in table}
    merged = {f.name: f for f in table}
    added: list[pa.Field] = []
    where = f"the table's struct {prefix[:-1]!r}" if prefix else "the table"
    for f in data:
        existing = by_lower.get(f.name.lower())
        path = prefix + f.name
        if existing is None:
            if not merge:
                names = [t.name for t in table]
                raise SchemaMismatchError(f"column {path!r} is not in {where} (fields: {names}); pass schema_mode='merge' to add it")
            added.append(variant_field(f.name) if is_variant_field(f) else collations.keep(pa.field(f.name, _new_type(f.type, path), True), f))
            continue
        if existing.name != f.name and types:
            raise SchemaMismatchError(f"column {path!r} differs in case from the table's column {prefix + existing.name!r}; rename it")
        if is_variant_field(existing):
            continue  # any data is made a variant when stored (see lakelog.variant_columns)
        merged[existing.name] = existing.with_type(merge_type(existing.type, f.type, path, merge, types))
        if pa.types.is_null(existing.type) and merge:
            merged[existing.name] = collations.keep(merged[existing.name], f)  # (a void column takes the data's type, collations included)
    present = {f.name.lower() for f in data}
    for f in table:
        if f.name.lower() not in present and not f.nullable and types:
            raise SchemaMismatchError(f"the data lacks column {prefix + f.name!r}, which is not nullable in the table")
    if added:
        check_column_names(pa.schema(list(merged.values()) + added), mapped=True)  # characters: the caller knows the mapping
    return list(merged.values()) + added


def merge_schema(table: pa.Schema, data: pa.Schema, merge: bool) -> pa.Schema:
    """The table schema after a write of ``data`` (see module doc); raises SchemaMismatchError."""
    return pa.schema(merge_fields(list(table), list(data), "", merge))


# ---------------------------------------------------------------- casting data


def _has_required_children(t: pa.DataType) -> bool:
    """Whether a non-nullable field sits anywhere below ``t`` (so nulls there must be looked for)."""
    if pa.types.is_struct(t):
        return any(not t.field(i).nullable or _has_required_children(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t):
        return not t.value_field.nullable or _has_required_children(t.value_type)
    if pa.types.is_map(t):
        return not t.item_field.nullable or _has_required_children(t.key_type) or _has_required_children(t.item_type)
    return False


def _zero(t: pa.DataType):
    """A placeholder value of type ``t`` (stored under a null parent, where no reader sees it)."""
    if pa.types.is_struct(t):
        return {f.name: None if f.nullable else _zero(f.type) for f in t}
    if pa.types.is_list(t) or pa.types.is_map(t):
        return []
    if pa.types.is_string(t):
        return ""
    if pa.types.is_binary(t):
        return b""
    if pa.types.is_boolean(t):
        return False
    return 0  # numbers, decimals, dates and timestamps


def _placeholders(arr: pa.Array, t: pa.DataType) -> pa.Array:
    """``arr`` with its nulls replaced by placeholders. Parquet refuses a null in a non-nullable field
    even under a null parent, so the nulls a required field holds there are replaced."""
    return pc.if_else(arr.is_null(), pa.repeat(pa.scalar(_zero(t), t), len(arr)), arr)


def all_null(t: pa.DataType, n: int) -> pa.Array:
    """``n`` nulls of type ``t`` that Parquet accepts (required nested fields hold placeholders)."""
    if pa.types.is_struct(t) and _has_required_children(t):
        children = [all_null(f.type, n) if f.nullable else pa.repeat(pa.scalar(_zero(f.type), f.type), n) for f in t]
        return pa.StructArray.from_arrays(children, fields=list(t), mask=pa.repeat(pa.scalar(True), n))
    return pa.nulls(n, t)


def _null_error(path: str, n: int) -> SchemaMismatchError:
    return SchemaMismatchError(f"column {path!r} is not nullable in the table but the data has {n} null value(s) there")


def _entries(arr: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(values of the valid rows, in order; each row's length with nulls as 0) of a list or map array."""
    if pa.types.is_map(arr.type):
        entries = pa.StructArray.from_arrays([arr.keys, arr.items], names=["key", "value"])
        offsets = pc.add(arr.offsets, 0)  # unsliced, for from_arrays
        arr = pa.ListArray.from_arrays(offsets, entries, mask=arr.is_null() if arr.null_count else None)
    lengths = pc.fill_null(pc.list_value_length(arr), 0)
    return arr.flatten(), lengths


def _offsets(lengths: pa.Array) -> pa.Array:
    ends = pc.cumulative_sum(lengths.cast(pa.int64()))
    offsets = pa.concat_arrays([pa.array([0], pa.int64()), ends])
    try:
        return offsets.cast(pa.int32())
    except pa.ArrowInvalid:
        raise SchemaMismatchError("a list or map column holds more than 2**31 values in one batch; write smaller batches") from None


def conform_array(arr: pa.Array, t: pa.DataType, path: str, variant: bool = False) -> pa.Array:
    """``arr`` as type ``t``: struct fields matched by name (missing ones null), safe casts at every
    depth, and nulls refused where ``t`` has non-nullable nested fields. Top-level nullability is the
    caller's. ``variant``: ``t`` is a variant field's (``lakelog.variant_columns.to_variant``)."""
    if variant:
        from .variant_columns import to_variant

        return to_variant(arr, path)
    if isinstance(arr, pa.ChunkedArray):
        return pa.chunked_array([conform_array(c, t, path) for c in arr.chunks], t)
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if geospatial.is_geo(t) and not pa.types.is_null(arr.type):
        return geospatial.as_geo(arr, t, path)  # (also when already of type t: every WKB value is checked)
    if arr.type == t and not _has_required_children(t):
        return arr
    if pa.types.is_null(arr.type):
        return all_null(t, len(arr))
    mask = arr.is_null() if arr.null_count else None
    if pa.types.is_struct(t):
        if not pa.types.is_struct(arr.type):
            raise _mismatch(path, arr.type, t, _CAST_HINT)
        extra = {arr.type.field(i).name for i in range(arr.type.num_fields)} - set(t.names)
        if extra:
            raise SchemaMismatchError(f"column {path!r} has field(s) {sorted(extra)} that the table's struct lacks; pass schema_mode='merge' to add them")
        children = []
        for f in t:
            idx = arr.type.get_field_index(f.name)
            child = conform_array(arr.field(idx), f.type, f"{path}.{f.name}", is_variant_field(f)) if idx >= 0 else all_null(f.type, len(arr))
            if not f.nullable and child.null_count:
                n = child.null_count if mask is None else pc.and_(child.is_null(), arr.is_valid()).true_count
                if n:
                    raise _null_error(f"{path}.{f.name}", n)
                child = _placeholders(child, f.type)  # the nulls are all under null parents
            children.append(child)
        return pa.StructArray.from_arrays(children, fields=list(t), mask=mask)
    if pa.types.is_list(t) or pa.types.is_map(t):
        if (pa.types.is_map(t) and not pa.types.is_map(arr.type)) or (pa.types.is_list(t) and not _is_list(arr.type)):
            raise _mismatch(path, arr.type, t, _CAST_HINT)
        values, lengths = _entries(arr)
        offsets = _offsets(lengths)
        if pa.types.is_list(t):
            values = conform_array(values, t.value_type, f"{path}.element", is_variant_field(t.value_field))
            if not t.value_field.nullable and values.null_count:
                raise _null_error(f"{path}.element", values.null_count)
            return pa.ListArray.from_arrays(offsets, values, type=t, mask=mask)
        keys = conform_array(values.field(0), t.key_type, f"{path}.key")
        items = conform_array(values.field(1), t.item_type, f"{path}.value", is_variant_field(t.item_field))
        if keys.null_count:
            raise _null_error(f"{path}.key", keys.null_count)
        if not t.item_field.nullable and items.null_count:
            raise _null_error(f"{path}.value", items.null_count)
        return pa.MapArray.from_arrays(offsets, keys, items, type=t, mask=mask)
    try:
        return arr.cast(t, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        if pa.types.is_timestamp(arr.type) and arr.type.unit == "ns":
            raise SchemaMismatchError(f"column {path!r} has timestamps with nanoseconds ({e}). {_NS_HINT}") from None
        raise SchemaMismatchError(f"column {path!r} cannot be stored as {delta_type_string(t)}: {e}") from None


def cast_batch(batch: pa.RecordBatch, target: pa.Schema, computed: Collection[str] = ()) -> pa.RecordBatch:
    """``batch`` as ``target`` (columns by name; missing ones null), checking nullability at every depth
    (not of ``computed`` columns: the writer's features fill them, then check)."""
    extra = set(batch.schema.names) - set(target.names)
    if extra:
        raise SchemaMismatchError(f"the data has column(s) {sorted(extra)} that the table lacks; pass schema_mode='merge' to add them")
    cols = []
    for f in target:
        idx = batch.schema.get_field_index(f.name)
        col = conform_array(batch.column(idx), f.type, f.name, is_variant_field(f)) if idx >= 0 else all_null(f.type, batch.num_rows)
        if not f.nullable and col.null_count and f.name not in computed:
            raise _null_error(f.name, col.null_count)
        cols.append(col)
    return pa.RecordBatch.from_arrays(cols, schema=target)

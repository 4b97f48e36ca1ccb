"""Reassembly of shredded Variant columns (parquet-format VariantShredding.md) into (metadata, value).

A shredded column is a struct with ``metadata``, an optional ``value`` and a ``typed_value`` that is a
primitive, a struct of shredded fields (each a struct of optional ``value``/``typed_value``) or a list
of such elements. Values are rebuilt as Spark's ShreddingUtils.rebuild does, with a fresh dictionary
per row: shredded object fields in schema order, then the fields kept in ``value``; integers at their
smallest width, decimals by their own precision; values only in ``value`` re-encoded
(Spark's appendVariant). So a reassembled row is byte-identical to what Spark reads from the file.
"""

from __future__ import annotations

import pyarrow as pa

from ..errors import VariantError
from . import codec as c

_MISSING = object()

# the unshredded layout, in Spark's field order
VARIANT_ARROW_TYPE = pa.struct([pa.field("value", pa.binary(), nullable=False),
                                pa.field("metadata", pa.binary(), nullable=False)])


def combine(arr) -> pa.Array:
    """One Array of an Array or ChunkedArray."""
    if isinstance(arr, pa.ChunkedArray):
        return arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    return arr


def _py(arr: pa.Array) -> list:
    """Python values of an Arrow array, temporal types as their integer counts (no datetime range
    limits, nanoseconds kept), nested structs as dicts and lists as lists."""
    t = arr.type
    if isinstance(t, pa.ExtensionType):
        return _py(arr.storage)
    if pa.types.is_struct(t):
        cols = {t.field(i).name: _py(arr.field(i)) for i in range(t.num_fields)}
        valid = arr.is_valid().to_pylist()
        return [{k: col[i] for k, col in cols.items()} if ok else None for i, ok in enumerate(valid)]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        flat = _py(arr.values)  # the whole child; offsets are absolute even for a slice
        offs = arr.offsets.to_pylist()
        valid = arr.is_valid().to_pylist()
        return [flat[offs[i]:offs[i + 1]] if ok else None for i, ok in enumerate(valid)]
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t):
        return arr.cast(pa.int64() if t.bit_width == 64 else pa.int32()).to_pylist()
    return arr.to_pylist()


def _micros(n: int, unit: str) -> int:
    return {"s": n * 1_000_000, "ms": n * 1000, "us": n}[unit]


def _primitive(x, t: pa.DataType) -> bytes:
    if isinstance(t, pa.ExtensionType):
        t = t.storage_type
    if pa.types.is_boolean(t):
        return c.primitive(c.TRUE if x else c.FALSE)
    if pa.types.is_integer(t):
        return c.int_value(x)
    if pa.types.is_float32(t):
        return c.float_value(x)
    if pa.types.is_float64(t):
        return c.double_value(x)
    if pa.types.is_decimal(t):
        return c.decimal_value(c.unscaled(x, t.scale), t.scale)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return c.string_value(c.utf8(x))
    if pa.types.is_fixed_size_binary(t) and t.byte_width == 16:
        return c.primitive(c.UUID, x)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return c.binary_value(x)
    if pa.types.is_date32(t):
        return c.primitive(c.DATE, x.to_bytes(4, "little", signed=True))
    if pa.types.is_timestamp(t):
        if t.unit == "ns":
            return c.primitive(c.TIMESTAMP_NANOS if t.tz else c.TIMESTAMP_NTZ_NANOS, x.to_bytes(8, "little", signed=True))
        return c.primitive(c.TIMESTAMP if t.tz else c.TIMESTAMP_NTZ, _micros(x, t.unit).to_bytes(8, "little", signed=True))
    if pa.types.is_time64(t) and t.unit == "us":
        return c.primitive(c.TIME_NTZ, x.to_bytes(8, "little", signed=True))
    raise VariantError(f"Shredded typed_value of Arrow type {t} has no Variant type "
                       "(VariantShredding.md lists the allowed Parquet types).")


def _field_types(t: pa.DataType) -> tuple[pa.DataType | None, bool]:
    """(typed_value type, has value) of a shredded group type."""
    if not pa.types.is_struct(t):
        raise VariantError(f"A shredded field or element must be a struct of value/typed_value, not {t}.")
    i = t.get_field_index("typed_value")
    return (t.field(i).type if i >= 0 else None), t.get_field_index("value") >= 0


def _rebuild(b: c.VariantBuilder, keys: list[str], value, typed, ttype: pa.DataType | None):
    """The value bytes of one (value, typed_value) pair, or _MISSING when both are null."""
    if typed is not None and ttype is not None:
        if pa.types.is_struct(ttype):
            fields, names = [], set()
            for f in ttype:
                names.add(f.name)
                sub = typed.get(f.name)
                if sub is None:
                    raise VariantError(f"Shredded object field {f.name!r} is a null group; it must be required.")
                sub_t, _ = _field_types(f.type)
                if sub.get("value") is None and sub.get("typed_value") is None:
                    continue  # the field does not exist in this object
                kid = b.add_key(f.name)
                fields.append((f.name, kid, _rebuild(b, keys, sub.get("value"), sub.get("typed_value"), sub_t)))
            if value is not None:
                v = bytes(value)
                c._need(v, 1)
                if v[0] & 3 != c.OBJECT:
                    raise VariantError("A partially shredded object's value is not an object; the column is malformed.")
                for k, p in c.object_fields(v, 0, keys):
                    if k in names:
                        raise VariantError(f"Object key {k!r} is both shredded and in value; the column is malformed.")
                    kid = b.add_key(k)
                    fields.append((k, kid, c.append_variant(b, v, p, keys)))
            return b.object_value(fields)
        if pa.types.is_list(ttype) or pa.types.is_large_list(ttype):
            elem_t, _ = _field_types(ttype.value_type)
            out = []
            for e in typed:
                if e is None:
                    raise VariantError("A shredded array element is a null group; elements must be required.")
                item = _rebuild(b, keys, e.get("value"), e.get("typed_value"), elem_t)
                if item is _MISSING:
                    raise VariantError("A shredded array element has neither value nor typed_value; "
                                       "array elements cannot be missing.")
                out.append(item)
            return b.array_value(out)
        return _primitive(typed, ttype)
    if value is not None:
        return c.append_variant(b, bytes(value), 0, keys)
    return _MISSING


def unshred(arr) -> pa.StructArray:
    """A shredded Variant column (struct with ``metadata``, ``value`` and/or ``typed_value``) as the
    unshredded struct<value, metadata> (``VARIANT_ARROW_TYPE``). Null rows stay null; a non-null row
    with neither value nor typed_value is the Variant null (as the spec asks of readers)."""
    arr = combine(arr)
    t = arr.type
    if not pa.types.is_struct(t) or t.get_field_index("metadata") < 0:
        raise VariantError(f"Expected a shredded Variant struct with a metadata field, not {t}.")
    ttype, has_value = _field_types(t)
    metas = arr.field("metadata").to_pylist()
    values = arr.field("value").to_pylist() if has_value else [None] * len(arr)
    typed = _py(arr.field("typed_value")) if ttype is not None else [None] * len(arr)
    valid = arr.is_valid().to_pylist()
    out_v, out_m = [], []
    for ok, m, v, tv in zip(valid, metas, values, typed):
        if not ok:
            out_v.append(c.NULL_VALUE)
            out_m.append(c.EMPTY_METADATA)
            continue
        if m is None:
            raise VariantError("A non-null shredded Variant row has no metadata; the column is malformed.")
        b = c.VariantBuilder()
        built = _rebuild(b, c.read_metadata(m), v, tv, ttype)
        out_v.append(c.NULL_VALUE if built is _MISSING else built)
        out_m.append(b.metadata())
    return pa.StructArray.from_arrays([pa.array(out_v, pa.binary()), pa.array(out_m, pa.binary())],
                                      fields=list(VARIANT_ARROW_TYPE), mask=pa.array([not ok for ok in valid]))

"""Variant columns as Arrow arrays: struct<value: binary not null, metadata: binary not null>, the
field order and nullability Spark writes to Parquet (fields are always read by name).

A SQL NULL row is a null struct; the Variant null (JSON ``null``) is a non-null struct holding the
null value (``VARIANT_NULL`` in Python rows).
"""

from __future__ import annotations

import pyarrow as pa

from ..errors import VariantError
from . import codec as c
from .json_text import parse_json, to_json
from .shredding import VARIANT_ARROW_TYPE, unshred
from .shredding import combine as _combine

__all__ = ["VARIANT_ARROW_TYPE", "from_json_array", "from_python", "to_json_array", "to_python"]


def _struct(pairs: list[tuple[bytes, bytes] | None]) -> pa.StructArray:
    mask = pa.array([p is None for p in pairs], pa.bool_())
    values = pa.array([c.NULL_VALUE if p is None else p[1] for p in pairs], pa.binary())
    metas = pa.array([c.EMPTY_METADATA if p is None else p[0] for p in pairs], pa.binary())
    return pa.StructArray.from_arrays([values, metas], fields=list(VARIANT_ARROW_TYPE), mask=mask)


def from_json_array(arr) -> pa.StructArray:
    """Variant column of a string array (Spark's ``parse_json`` per row; null strings stay null)."""
    arr = _combine(arr)
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type) or pa.types.is_string_view(arr.type)):
        raise VariantError(f"from_json_array takes a string array, not {arr.type}.")
    return _struct([None if s is None else parse_json(s) for s in arr.to_pylist()])


def from_python(values: list) -> pa.StructArray:
    """Variant column of Python objects (see ``encode``): ``None`` is a SQL NULL row, ``VARIANT_NULL``
    the Variant null."""
    return _struct([None if v is None else c.encode(v) for v in values])


def _rows(struct_arr) -> list[tuple[bytes, bytes] | None]:
    arr = _combine(struct_arr)
    if not pa.types.is_struct(arr.type) or arr.type.get_field_index("metadata") < 0:
        raise VariantError(f"Expected a Variant struct<metadata, value[, typed_value]> array, not {arr.type}.")
    if arr.type.get_field_index("typed_value") >= 0:
        arr = unshred(arr)
    if arr.type.get_field_index("value") < 0:
        raise VariantError(f"A Variant struct needs a 'value' (or 'typed_value') field; got {arr.type}.")
    valid = arr.is_valid().to_pylist()
    values = arr.field("value").to_pylist()
    metas = arr.field("metadata").to_pylist()
    out = []
    for ok, v, m in zip(valid, values, metas):
        if not ok:
            out.append(None)
        elif v is None or m is None:
            raise VariantError("A non-null Variant row has a null value or metadata; the column is malformed.")
        else:
            out.append((m, v))
    return out


def to_json_array(struct_arr) -> pa.StringArray:
    """JSON text per row as Spark's ``to_json`` (UTC); null rows stay null. Shredded columns are
    reassembled first."""
    return pa.array([None if r is None else to_json(*r) for r in _rows(struct_arr)], pa.string())


def to_python(struct_arr) -> list:
    """Python objects per row (see ``decode``); null rows are ``None``, Variant nulls ``VARIANT_NULL``."""
    out = []
    for r in _rows(struct_arr):
        if r is None:
            out.append(None)
        else:
            obj = c.decode(*r)
            out.append(c.VARIANT_NULL if obj is None else obj)
    return out

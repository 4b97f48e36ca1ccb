"""Per-file column statistics (Delta's ``stats`` JSON) from a written file's Parquet footer."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from ..schema.partition_values import format_timestamp
from ..schema.types import is_variant_field


STRING_STATS_PREFIX = 32


def _stat_value(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        return format_timestamp(v)
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return orjson.Fragment(format(v, "f").encode())  # exact digits, as a JSON number
    return v


def _has_minmax(t: pa.DataType) -> bool:
    return (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_decimal(t)
        or pa.types.is_string(t)
        or pa.types.is_boolean(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
    )


def _string_upper_bound(s: str) -> str | None:
    """A string of at most STRING_STATS_PREFIX characters that is >= ``s`` (None if there is none)."""
    if len(s) <= STRING_STATS_PREFIX:
        return s
    for i in range(STRING_STATS_PREFIX - 1, -1, -1):
        c = ord(s[i]) + 1
        if 0xD800 <= c <= 0xDFFF:
            c = 0xE000  # no surrogates in UTF-8
        if c <= 0x10FFFF:
            return s[:i] + chr(c)
    return None


def _leaves(schema: pa.Schema) -> list[tuple[tuple[str, ...], pa.DataType | None, int]]:
    """Stats columns in file order: (path, type, index of its first Parquet leaf column); type None for
    leaves under a list or map. A variant is one stats column (a null count, as Delta writes: no min/max)
    over its two binaries, whose leaves' null counts are the variant's."""
    out: list[tuple[tuple[str, ...], pa.DataType | None, int]] = []
    j = 0

    def walk(path: tuple[str, ...], f: pa.Field, in_collection: bool) -> None:
        nonlocal j
        t = f.type
        if is_variant_field(f):
            out.append((path, None if in_collection else t, j))
            j += t.num_fields
        elif pa.types.is_struct(t):
            for i in range(t.num_fields):
                walk(path + (t.field(i).name,), t.field(i), in_collection)
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            walk(path, t.value_field, True)
        elif pa.types.is_map(t):
            walk(path, t.key_field, True)
            walk(path, t.item_field, True)
        else:
            out.append((path, None if in_collection else t, j))
            j += 1

    for f in schema:
        walk((f.name,), f, False)
    return out


def stats_from_parquet_metadata(schema: pa.Schema, metadata: pq.FileMetaData, max_indexed_cols: int = 32,
                                always: frozenset[str] = frozenset()) -> str:
    """Delta ``stats`` JSON (numRecords, minValues, maxValues, nullCount) from a Parquet footer.

    Only the first ``max_indexed_cols`` eligible leaf columns (``delta.dataSkippingNumIndexedCols``;
    -1 = all) get stats, and the top-level columns ``always`` names (clustering columns, which Delta
    requires stats for); list and map contents get none. A bound is left out when some row group lacks
    it, when it is infinite, or when no upper bound fits in 32 characters.
    """
    mins: dict = {}
    maxs: dict = {}
    nulls: dict = {}

    def put(d: dict, path: tuple[str, ...], v: Any) -> None:
        for name in path[:-1]:
            d = d.setdefault(name, {})
        d[path[-1]] = v

    leaves = _leaves(schema)
    indexed = 0
    for path, t, j in leaves:
        if t is None:
            continue
        if max_indexed_cols >= 0 and indexed >= max_indexed_cols:
            if path[0] not in always:
                continue
        else:
            indexed += 1
        lo = hi = None
        null_count, bounds_known = 0, _has_minmax(t)
        for r in range(metadata.num_row_groups):
            rg = metadata.row_group(r)
            st = rg.column(j).statistics
            if st is None or not st.has_null_count:
                null_count, bounds_known = None, False
                break
            null_count += st.null_count
            if st.null_count == rg.num_rows:
                continue  # all null: no values to bound
            if not st.has_min_max:
                bounds_known = False
                continue
            try:
                st_min, st_max = st.min, st.max
            except (OverflowError, ValueError):  # a date or timestamp beyond Python's years 1..9999
                bounds_known = False
                continue
            lo = st_min if lo is None else min(lo, st_min)
            hi = st_max if hi is None else max(hi, st_max)
        if null_count is None:
            continue
        put(nulls, path, null_count)
        if not bounds_known or lo is None:
            continue
        if isinstance(lo, str):
            lo, hi = lo[:STRING_STATS_PREFIX], _string_upper_bound(hi)
        if isinstance(lo, float) and math.isinf(lo):
            lo = None
        if isinstance(hi, float) and math.isinf(hi):
            hi = None
        if lo is not None:
            put(mins, path, _stat_value(lo))
        if hi is not None:
            put(maxs, path, _stat_value(hi))
    return orjson.dumps({"numRecords": metadata.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}).decode()

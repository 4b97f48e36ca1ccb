"""Delta values in Iceberg's forms: partition values (typed, as manifests hold them) and per-file stats
(record count, null counts, and lower/upper bounds in Iceberg's single-value binary serialization)."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import struct
from typing import Any

import orjson

from ..schema.partition_values import parse_date, timestamp_micros
from .schema import IcebergColumn

_EPOCH_DAY = dt.date(1970, 1, 1)
_DECIMAL = "decimal("


def partition_value(s: str | None, col: IcebergColumn) -> Any:
    """A Delta partition value string as the Iceberg identity partition holds it (dates as days,
    timestamps as microseconds); None for null."""
    if s is None or s == "":
        return None
    t = col.delta_type
    if t in ("byte", "short", "integer", "long"):
        return int(s)
    if t in ("float", "double"):
        return float(s)
    if t == "boolean":
        return s.lower() == "true"
    if t == "date":
        return (parse_date(s) - _EPOCH_DAY).days
    if t in ("timestamp", "timestamp_ntz"):
        return timestamp_micros(s, t == "timestamp")
    if t == "binary":
        return s.encode("latin-1")
    if isinstance(t, str) and t.startswith(_DECIMAL):
        return decimal.Decimal(s)
    return s


def serialize(v: Any, iceberg_type: str) -> bytes:
    """Iceberg's single-value binary serialization of ``v`` (dates as days, timestamps as microseconds,
    decimals as ``Decimal``)."""
    t = iceberg_type
    if t in ("int", "date"):
        return struct.pack("<i", v)
    if t in ("long", "timestamp", "timestamptz"):
        return struct.pack("<q", v)
    if t == "float":
        return struct.pack("<f", v)
    if t == "double":
        return struct.pack("<d", v)
    if t == "boolean":
        return b"\x01" if v else b"\x00"
    if t == "string":
        return v.encode("utf-8")
    if t.startswith("decimal("):
        return unscaled_bytes(v, int(t[8:-1].split(",")[1]))
    return bytes(v)


def unscaled_bytes(d: decimal.Decimal, scale: int, size: int | None = None) -> bytes:
    """A decimal's unscaled value, big-endian two's complement (minimal, or ``size`` bytes)."""
    n = int(d.scaleb(scale).to_integral_value())
    return n.to_bytes(size or (n.bit_length() + 8) // 8, "big", signed=True)


def decimal_from_bytes(b: bytes, scale: int) -> decimal.Decimal:
    return decimal.Decimal(int.from_bytes(b, "big", signed=True)).scaleb(-scale)


def _bound(v: Any, col: IcebergColumn, upper: bool) -> bytes | None:
    """Iceberg's binary form of a Delta stats value; None when it cannot be a bound (then none is written)."""
    t = col.delta_type
    try:
        if t in ("byte", "short", "integer"):
            return struct.pack("<i", v) if isinstance(v, int) and not isinstance(v, bool) else None
        if t == "long":
            return struct.pack("<q", v) if isinstance(v, int) and not isinstance(v, bool) else None
        if t in ("float", "double"):
            if not isinstance(v, (int, float)) or isinstance(v, bool) or math.isnan(v) or math.isinf(v):
                return None
            return struct.pack("<f" if t == "float" else "<d", float(v))
        if t == "boolean":
            return (b"\x01" if v else b"\x00") if isinstance(v, bool) else None
        if t == "string":
            return v.encode("utf-8") if isinstance(v, str) else None
        if t == "date":
            return struct.pack("<i", (parse_date(v) - _EPOCH_DAY).days)
        if t in ("timestamp", "timestamp_ntz"):
            micros = timestamp_micros(v, t == "timestamp")
            frac = v.rsplit(".", 1)[1] if "." in v else ""
            digits = len(frac.rstrip("Z").split("+")[0].split("-")[0])
            if upper and digits < 6:
                # Writers that keep milliseconds (Spark) truncate the maximum: widen it to stay an upper bound.
                micros += 10 ** (6 - digits) - 1
            return struct.pack("<q", micros)
        if isinstance(t, str) and t.startswith(_DECIMAL):
            scale = int(t[len(_DECIMAL):-1].split(",")[1])
            d = decimal.Decimal(str(v)) if not isinstance(v, decimal.Decimal) else v
            unscaled = d.scaleb(scale)
            if unscaled != unscaled.to_integral_value():
                return None
            return unscaled_bytes(d, scale)
    except (ValueError, TypeError, OverflowError, AttributeError, decimal.InvalidOperation, struct.error):
        return None
    return None


def file_metrics(stats: str | None, columns: list[IcebergColumn]) -> dict[str, Any]:
    """``record_count`` (None when the stats lack it), ``null_value_counts``, ``lower_bounds`` and
    ``upper_bounds`` (by field id) from a Delta ``stats`` JSON; columns inside lists and maps get none."""
    try:
        d = orjson.loads(stats) if stats else {}
    except orjson.JSONDecodeError:
        d = {}
    if not isinstance(d, dict):
        d = {}
    n = d.get("numRecords")
    out: dict[str, Any] = {
        "record_count": n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else None,
        "null_value_counts": {}, "lower_bounds": {}, "upper_bounds": {},
    }

    def walk(cols: list[IcebergColumn], nulls: Any, mins: Any, maxs: Any) -> None:
        for c in cols:
            nv, lo, hi = (x.get(c.physical) if isinstance(x, dict) else None for x in (nulls, mins, maxs))
            if c.children:
                walk(c.children, nv, lo, hi)
                continue
            if isinstance(c.delta_type, dict):
                continue
            if isinstance(nv, int) and not isinstance(nv, bool) and nv >= 0:
                out["null_value_counts"][c.id] = nv
            if lo is not None and (b := _bound(lo, c, False)) is not None:
                out["lower_bounds"][c.id] = b
            if hi is not None and (b := _bound(hi, c, True)) is not None:
                out["upper_bounds"][c.id] = b

    walk(columns, d.get("nullCount"), d.get("minValues"), d.get("maxValues"))
    return out

"""The canonical JSON form of rows that ``tests/data/expected/*.json`` use (see ``tests/data/README.md``),
so that a read of a test table can be compared exactly with its expected rows."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
from pathlib import Path

import pyarrow as pa

DATA = Path(__file__).parent / "data"


def expected(name: str) -> dict:
    return json.loads((DATA / "expected" / f"{name}.json").read_text())


def _value(v, t: pa.DataType):
    if v is None:
        return None
    if pa.types.is_struct(t):
        return {t.field(i).name: _value(v.get(t.field(i).name), t.field(i).type) for i in range(t.num_fields)}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [_value(x, t.value_type) for x in v]
    if pa.types.is_map(t):
        pairs = [[_value(k, t.key_type), _value(x, t.item_type)] for k, x in v]
        return {"$map": sorted(pairs, key=lambda p: json.dumps(p, sort_keys=True))}
    if pa.types.is_floating(t):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return float(v)
    if pa.types.is_decimal(t):
        return str(v.quantize(decimal.Decimal(1).scaleb(-t.scale)))
    if pa.types.is_timestamp(t):
        if t.tz is not None:
            return v.astimezone(dt.timezone.utc).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
        return v.isoformat(timespec="microseconds")
    if pa.types.is_date(t):
        return v.isoformat()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or getattr(t, "extension_name", None) == "geoarrow.wkb":
        return {"$binary": bytes(v).hex()}  # (geometry/geography values: their WKB)
    return v


def canonical_rows(table: pa.Table) -> list[dict]:
    """``table``'s rows in the canonical form, sorted as the expected files sort them."""
    types = {f.name: f.type for f in table.schema}
    rows = [{k: _value(v, types[k]) for k, v in r.items()} for r in table.to_pylist()]
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))


def table_path(name: str) -> str:
    return str(DATA / name)

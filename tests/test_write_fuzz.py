"""Round trip of the write paths over random schemas and values (hypothesis).

Every example writes random data (every type lakelog stores, nested structs, lists and maps, any
nullability; nulls, NaN, -0.0, infinities, each type's extremes, years 1 and 9999, unicode and empty
strings) through ``write_table``, from Arrow or pandas, partitioned or not, then appends data of
losslessly narrower types and, with ``schema_mode="merge"``, data with a new column and a new struct
field. After every write lakelog must read back exactly the model's rows, and deltalake the same.

The default run is short and seeded; set LAKELOG_FUZZ_EXAMPLES for a longer one.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import os
import shutil
import tempfile

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakelog

deltalake = pytest.importorskip("deltalake")

EXAMPLES = int(os.environ.get("LAKELOG_FUZZ_EXAMPLES", "30"))
UTC = dt.timezone.utc

# ---------------------------------------------------------------- types

_INTS = {pa.int8(): 8, pa.int16(): 16, pa.int32(): 32, pa.int64(): 64}
_UINTS = {pa.uint8(): 8, pa.uint16(): 16, pa.uint32(): 32}
_PRIMITIVES = [
    *_INTS, *_UINTS, pa.float32(), pa.float64(), pa.bool_(), pa.string(), pa.large_string(), pa.binary(), pa.large_binary(),
    pa.date32(), pa.timestamp("us", "UTC"), pa.timestamp("us"), pa.timestamp("ms", "UTC"), pa.timestamp("ns"),
]
# Types lakelog can partition by (a partition column holds one primitive value per file).
_PARTITIONABLE = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float64(), pa.bool_(), pa.string(), pa.binary(), pa.date32(),
                  pa.timestamp("us", "UTC"), pa.timestamp("us")]


@st.composite
def decimal_types(draw):
    p = draw(st.integers(1, 38))
    return pa.decimal128(p, draw(st.integers(0, p)))


def primitive_types():
    return st.one_of(st.sampled_from(_PRIMITIVES), decimal_types())


_NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyzé_0123456789", min_size=1, max_size=6)


def _unique(names):
    seen, out = set(), []
    for n in names:
        if n.lower() not in seen:
            seen.add(n.lower())
            out.append(n)
    return out


@st.composite
def data_types(draw, depth=2):
    if depth == 0 or draw(st.integers(0, 3)) > 0:
        return draw(primitive_types())
    kind = draw(st.sampled_from(["struct", "list", "map"]))
    if kind == "struct":
        names = _unique(draw(st.lists(_NAMES, min_size=1, max_size=3)))
        return pa.struct([pa.field(n, draw(data_types(depth - 1)), draw(st.booleans())) for n in names])
    if kind == "list":
        return pa.list_(pa.field("element", draw(data_types(depth - 1)), draw(st.booleans())))
    key = draw(st.sampled_from([pa.string(), pa.int32(), pa.date32()]))
    return pa.map_(key, pa.field("value", draw(data_types(depth - 1)), draw(st.booleans())))


# ---------------------------------------------------------------- values

def _int_values(bits: int, signed: bool = True):
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    return st.one_of(st.sampled_from([lo, hi, 0, -1 if signed else 1, 1]), st.integers(lo, hi))


def _decimal_values(t: pa.Decimal128Type):
    top = 10**t.precision - 1
    exact = decimal.Context(prec=80)  # the default context would round 38 digits to 28
    return st.one_of(st.sampled_from([top, -top, 0, 1]), st.integers(-top, top)).map(lambda i: decimal.Decimal(i).scaleb(-t.scale, exact))


_MIN_TS, _MAX_TS = dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)


def _timestamp_values(t: pa.TimestampType):
    edges = [_MIN_TS, _MAX_TS, dt.datetime(1970, 1, 1), dt.datetime(1969, 12, 31, 23, 59, 59, 999999)]
    if t.unit == "ns":  # nanosecond timestamps reach 1677-09-21 .. 2262-04-11
        lo, hi = dt.datetime(1677, 9, 22), dt.datetime(2262, 4, 10)
        edges = [lo, hi, dt.datetime(1970, 1, 1)]
    else:
        lo, hi = _MIN_TS, _MAX_TS
    s = st.one_of(st.sampled_from(edges), st.datetimes(lo, hi))
    if t.unit == "ms":
        s = s.map(lambda v: v.replace(microsecond=v.microsecond // 1000 * 1000))
    if t.tz is not None:
        s = s.map(lambda v: v.replace(tzinfo=UTC))
    return s


def values(t: pa.DataType, nullable: bool = True):
    """Values of type ``t``; None only where ``nullable``."""
    if pa.types.is_struct(t):
        fields = [t.field(i) for i in range(t.num_fields)]
        s = st.fixed_dictionaries({f.name: values(f.type, f.nullable) for f in fields})
    elif pa.types.is_list(t):
        s = st.lists(values(t.value_type, t.value_field.nullable), max_size=3)
    elif pa.types.is_map(t):
        s = st.lists(st.tuples(values(t.key_type, False), values(t.item_type, t.item_field.nullable)), max_size=3, unique_by=lambda kv: kv[0])
    elif t in _INTS:
        s = _int_values(_INTS[t])
    elif t in _UINTS:
        s = _int_values(_UINTS[t], signed=False)
    elif pa.types.is_floating(t):
        width = 32 if pa.types.is_float32(t) else 64
        s = st.one_of(st.sampled_from([0.0, -0.0, math.nan, math.inf, -math.inf]), st.floats(width=width))
    elif pa.types.is_boolean(t):
        s = st.booleans()
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        s = st.one_of(st.sampled_from(["", "a b", "ünï©ødé 🦆", "x" * 40, "\x00", "=%/"]), st.text(max_size=12))
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
        s = st.one_of(st.sampled_from([b"", b"\x00\xff"]), st.binary(max_size=12))
    elif pa.types.is_date32(t):
        s = st.one_of(st.sampled_from([dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(1970, 1, 1)]), st.dates())
    elif pa.types.is_timestamp(t):
        s = _timestamp_values(t)
    elif pa.types.is_decimal(t):
        s = _decimal_values(t)
    else:
        raise AssertionError(t)
    return st.one_of(st.none(), s) if nullable else s


# ---------------------------------------------------------------- lossless narrowings (for appends)

def narrower(draw, t: pa.DataType) -> pa.DataType:
    """A type whose values all store exactly as ``t`` (possibly ``t`` itself); struct fields may be
    reordered, and nullable ones left out."""
    if pa.types.is_struct(t):
        # fields in any order; nullable ones may be missing (they read as null)
        fields = [t.field(i).with_type(narrower(draw, t.field(i).type)) for i in range(t.num_fields)]
        kept = [f for f in fields if not f.nullable or draw(st.integers(0, 3)) > 0] or fields[:1]
        return pa.struct(draw(st.permutations(kept)))
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(narrower(draw, t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(narrower(draw, t.key_type)), t.item_field.with_type(narrower(draw, t.item_type)))
    options = [t]
    if t in _INTS:
        options += [i for i, b in _INTS.items() if b < _INTS[t]] + [u for u, b in _UINTS.items() if b < _INTS[t]]
    elif pa.types.is_float64(t):
        options += [pa.float32(), pa.int8(), pa.int16(), pa.int32()]
    elif pa.types.is_timestamp(t) and t.tz is None and t.unit == "us":
        options += [pa.date32()]
    elif pa.types.is_decimal(t):
        ip, s = t.precision - t.scale, t.scale
        options += [pa.decimal128(max(1, a + b), b) for a in range(0, ip + 1) for b in range(0, s + 1) if a + b >= 1][:20]
        options += [i for i, digits in {pa.int8(): 3, pa.int16(): 5, pa.int32(): 10, pa.int64(): 20}.items() if ip >= digits]
    elif pa.types.is_string(t):
        options += [pa.large_string()]
    return draw(st.sampled_from(options))


# ---------------------------------------------------------------- the model

def _norm(v):
    """A comparable form: floats by repr (NaN, -0.0 and inf are told apart), containers recursively."""
    if isinstance(v, float):
        return ("float", repr(v))
    if isinstance(v, dict):
        return tuple(sorted((k, _norm(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_norm(x) for x in v)
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(UTC)
    return v


def _rows(rows: list[dict]) -> list:
    return sorted((_norm(r) for r in rows), key=repr)


def _as_stored(table: pa.Table, schema: pa.Schema, partition_columns: list[str]) -> list[dict]:
    """The rows of ``table`` as the table stores them: cast to the table's types; an empty string
    partition value means null (the protocol's rule)."""
    rows = table.cast(schema).to_pylist() if table.num_rows else []
    for r in rows:
        for c in partition_columns:
            if r[c] in ("", b""):
                r[c] = None
    return rows


def _check(path: str, expected: list[dict], schema: pa.Schema) -> None:
    t = lakelog.Table(path)
    assert t.schema == schema
    got = t.to_pyarrow()
    assert got.schema == schema
    assert _rows(got.to_pylist()) == _rows(expected)
    theirs = deltalake.DeltaTable(path).to_pyarrow_table()
    assert sorted(theirs.column_names) == sorted(schema.names)
    assert _rows(theirs.to_pylist()) == _rows(expected)


def _partition_values(f: pa.Field):
    s = values(f.type, f.nullable)
    if pa.types.is_binary(f.type):
        # Bytes from 0x80 are one character each in lakelog's partition values (the protocol's escaped
        # form); Spark and deltalake read such a value as UTF-8 text, so they disagree there: ASCII only.
        s = s.map(lambda b: b if b is None else bytes(x & 0x7F for x in b))
    if not f.nullable:
        # An empty partition value means null; in a non-nullable column it is refused (tested apart).
        s = s.filter(lambda v: v not in ("", b""))
    return s


def _row(schema: pa.Schema, partition_by: list[str]):
    return st.fixed_dictionaries({f.name: _partition_values(f) if f.name in partition_by else values(f.type, f.nullable) for f in schema})


@st.composite
def scenarios(draw):
    names = _unique(draw(st.lists(_NAMES, min_size=1, max_size=5)))
    fields = [pa.field(n, draw(data_types()), draw(st.booleans())) for n in names]
    partition_by = []
    if draw(st.booleans()):
        name = draw(_NAMES.filter(lambda n: n.lower() not in {f.name.lower() for f in fields}))
        fields.append(pa.field(name, draw(st.sampled_from(_PARTITIONABLE)), draw(st.booleans())))
        partition_by = [name]
    schema = pa.schema(fields)
    n = draw(st.integers(0, 6))
    rows = draw(st.lists(_row(schema, partition_by), min_size=n, max_size=n))
    first = pa.Table.from_pylist(rows, schema=schema)
    # an append with losslessly narrower types (same columns, any order)
    narrow = pa.schema([f.with_type(narrower(draw, f.type)) for f in schema if f.name not in partition_by]
                       + [f for f in schema if f.name in partition_by])
    narrow = pa.schema(draw(st.permutations(list(narrow))))
    n2 = draw(st.integers(0, 4))
    rows2 = draw(st.lists(_row(narrow, partition_by), min_size=n2, max_size=n2))
    second = pa.Table.from_pylist(rows2, schema=narrow)
    # a merge adding a nullable column (and a field inside the first struct column, if any)
    new_col = draw(_NAMES.filter(lambda n: n.lower() not in {f.name.lower() for f in schema}))
    new_type = draw(data_types(depth=1))
    new_field = draw(_NAMES)
    return {
        "first": first, "partition_by": partition_by, "pandas": draw(st.booleans()), "index": draw(st.booleans()),
        "second": second, "new_col": pa.field(new_col, new_type), "new_field": new_field,
        "rows3": draw(st.integers(0, 3)),
    }


def _as_pandas(table: pa.Table, index: str | None) -> pd.DataFrame:
    # ArrowDtype columns keep every Arrow type exactly through pandas (nested ones included)
    df = table.to_pandas(types_mapper=pd.ArrowDtype)
    return df.set_index(index) if index else df


@settings(max_examples=EXAMPLES, deadline=None, derandomize="LAKELOG_FUZZ_EXAMPLES" not in os.environ, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(sc=scenarios(), data=st.data())
def test_write_round_trip(sc, data):
    root = tempfile.mkdtemp(prefix="lakelog-wfuzz-")
    path = os.path.join(root, "t")
    try:
        first, parts = sc["first"], sc["partition_by"]
        index = None
        if sc["pandas"]:
            # a named index is written as a column after the others
            candidates = [f.name for f in first.schema if f.name not in parts and not pa.types.is_nested(f.type)]
            index = candidates[0] if sc["index"] and candidates and len(first.schema) > 1 else None
            written = _as_pandas(first, index)
            order = [n for n in first.column_names if n != index] + ([index] if index else [])
            first = first.select(order)
        else:
            written = first
        lakelog.write_table(path, written, partition_by=parts or None)
        schema = lakelog.Table(path).schema
        assert schema.names == first.column_names
        expected = _as_stored(first, schema, parts)
        _check(path, expected, schema)

        # append: narrower types, columns in another order
        second = sc["second"]
        lakelog.write_table(path, _as_pandas(second, None) if sc["pandas"] else second)
        expected += _as_stored(second.select(schema.names), schema, parts)
        _check(path, expected, schema)

        # merge: a new column, and a new field in the first struct column
        structs = [f for f in schema if pa.types.is_struct(f.type) and f.name not in parts]
        fields = list(schema)
        if structs and sc["new_field"].lower() not in {x.lower() for x in structs[0].type.names}:
            s = structs[0]
            grown = pa.struct(list(s.type) + [pa.field(sc["new_field"], pa.int32())])
            fields[schema.get_field_index(s.name)] = s.with_type(grown)
        new_col = sc["new_col"]
        third_schema = pa.schema(fields + [new_col])
        n3 = sc["rows3"]
        rows3 = data.draw(st.lists(_row(third_schema, parts), min_size=n3, max_size=n3))
        third = pa.Table.from_pylist(rows3, schema=third_schema)
        lakelog.write_table(path, third, schema_mode="merge")
        merged = lakelog.Table(path).schema
        assert merged.names == schema.names + [new_col.name]
        for r in expected:
            r[new_col.name] = None
            if structs and merged.field(structs[0].name).type != schema.field(structs[0].name).type and r[structs[0].name] is not None:
                r[structs[0].name][sc["new_field"]] = None
        expected += _as_stored(third, merged, parts)
        _check(path, expected, merged)
        # time travel still gives the first version exactly
        assert _rows(lakelog.read_table(path, version=0).to_pylist()) == _rows(_as_stored(first, schema, parts))
    finally:
        shutil.rmtree(root, ignore_errors=True)

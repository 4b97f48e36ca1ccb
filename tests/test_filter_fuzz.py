"""Filter fuzzing: random tables (every primitive type, a struct; nulls, NaN, +-0.0, +-inf, each type's
extremes, years 1 and 9999, unicode, empty strings; random partition columns; several commits so stats
prune) and random filters (DNF tuples and pyarrow expressions, on data and partition columns).

lakelog's filtered read must equal an independent evaluation of the same filter on the rows written:
a small SQL three-valued-logic model in Python for DNF tuples (lakelog's documented semantics), and
pyarrow compute on the in-memory table for expressions. deltalake's filtered read of the same table is
compared with pyarrow's evaluation of the filter (its semantics) where deltalake is correct.

The default run is short and seeded; LAKELOG_FUZZ_EXAMPLES=<n> runs n random examples.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import os
import shutil
import tempfile

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakelog
from lakelog.errors import InvalidFilterError
from lakelog.expressions.sql import Engine, filters_to_sql

deltalake = pytest.importorskip("deltalake")

UTC = dt.timezone.utc
NAN, INF = float("nan"), float("inf")
F32_MAX = 3.4028234663852886e38
EXAMPLES = int(os.environ.get("LAKELOG_FUZZ_EXAMPLES", "0") or 0)
FUZZ = settings(
    max_examples=EXAMPLES or 40,
    deadline=None,
    derandomize=not EXAMPLES,  # the default run is the same every time
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# ---------------------------------------------------------------- values

def _ints(bits: int):
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return st.sampled_from([lo, hi, 0, -1, 1]) | st.integers(lo, hi)


def _decimals(p: int, s: int):
    # From integers and strings: decimal arithmetic (and hypothesis' decimals) round to 28 digits.
    top = 10**p - 1
    as_decimal = lambda n: decimal.Decimal(f"{n}E-{s}")  # noqa: E731
    return st.sampled_from([top, -top, 1, 0]).map(as_decimal) | st.integers(-top, top).map(as_decimal)


DAY_EDGES = [dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999), dt.datetime(1970, 1, 1),
             dt.datetime(1969, 12, 31, 23, 59, 59, 999999), dt.datetime(999, 12, 31, 23, 59, 59), dt.datetime(1000, 1, 1)]
STRINGS = ["", "a", "A", "é", "\U0010ffff", "a" * 40, "a" * 31 + "b", "z\x00"]

TYPES = {
    "int8": (pa.int8(), _ints(8)),
    "int16": (pa.int16(), _ints(16)),
    "int32": (pa.int32(), _ints(32)),
    "int64": (pa.int64(), _ints(64)),
    "float32": (pa.float32(), st.sampled_from([NAN, 0.0, -0.0, INF, -INF, 1.5, -1.5, F32_MAX, -F32_MAX]) | st.floats(width=32)),
    "float64": (pa.float64(), st.sampled_from([NAN, 0.0, -0.0, INF, -INF, 1.5, -1.5, 1.7976931348623157e308, 5e-324]) | st.floats()),
    "bool": (pa.bool_(), st.booleans()),
    "string": (pa.string(), st.sampled_from(STRINGS) | st.text(max_size=4)),
    "binary": (pa.binary(), st.sampled_from([b"", b"\x00", b"\xff\xff", b"a"]) | st.binary(max_size=3)),
    "date": (pa.date32(), st.sampled_from([d.date() for d in DAY_EDGES]) | st.dates()),
    "timestamp_ntz": (pa.timestamp("us"), st.sampled_from(DAY_EDGES) | st.datetimes()),
    "timestamp": (pa.timestamp("us", tz="UTC"), (st.sampled_from(DAY_EDGES) | st.datetimes()).map(lambda v: v.replace(tzinfo=UTC))),
    "decimal(5,2)": (pa.decimal128(5, 2), _decimals(5, 2)),
    "decimal(15,15)": (pa.decimal128(15, 15), _decimals(15, 15)),
    "decimal(38,6)": (pa.decimal128(38, 6), _decimals(38, 6)),
}
PARTITIONABLE = [k for k in TYPES if k != "binary"]  # deltalake cannot read binary partition values back


def _canon(v):
    """A comparable, exact stand-in for a value (NaN and -0.0 distinct from everything else)."""
    if isinstance(v, float):
        return ("float", repr(v))
    if isinstance(v, dict):
        return tuple(sorted((k, _canon(x)) for k, x in v.items()))
    return v


def _ids(t: pa.Table) -> list[int]:
    return sorted(t.column("id").to_pylist())


# ---------------------------------------------------------------- tables

@st.composite
def tables(draw):
    """(columns: {name: kind}, pools: {name: values}, partition columns, commits: [pa.Table])."""
    kinds = draw(st.lists(st.sampled_from(sorted(TYPES)), min_size=1, max_size=4))
    columns = {f"c{i}_{k.replace('(', '').replace(')', '').replace(',', '_')}": k for i, k in enumerate(kinds)}
    # Values come from a small pool per column, so equality filters and collisions are frequent.
    pools = {c: draw(st.lists(TYPES[k][1], min_size=1, max_size=4)) for c, k in columns.items()}
    part_candidates = [c for c, k in columns.items() if k in PARTITIONABLE]
    partition_by = draw(st.lists(st.sampled_from(part_candidates), max_size=2, unique=True)) if part_candidates else []
    with_struct = draw(st.booleans())
    fields = [pa.field("id", pa.int64())] + [pa.field(c, TYPES[k][0]) for c, k in columns.items()]
    if with_struct:
        fields.append(pa.field("st", pa.struct([("x", pa.float64()), ("y", pa.int32())])))
    schema = pa.schema(fields)
    commits, n = [], 0
    for _ in range(draw(st.integers(1, 3))):
        rows = draw(st.integers(0, 8))
        data = {"id": list(range(n, n + rows))}
        for c in columns:
            data[c] = [draw(st.none() | st.sampled_from(pools[c])) for _ in range(rows)]
        if with_struct:
            data["st"] = [draw(st.none() | st.fixed_dictionaries({"x": st.sampled_from([NAN, -0.0, 1.0]) | st.none(), "y": st.integers(-3, 3) | st.none()}))
                          for _ in range(rows)]
        commits.append(pa.table(data, schema=schema))
        n += rows
    return columns, pools, partition_by, commits


def _written(commits: list[pa.Table], columns: dict, partition_by: list[str]) -> pa.Table:
    """What the table holds: the commits' rows, with '' partition values read back as null (Delta's rule)."""
    t = pa.concat_tables(commits)
    for c in partition_by:
        if columns[c] == "string":
            col = t.column(c)
            t = t.set_column(t.schema.get_field_index(c), c, pc.if_else(pc.equal(col, ""), pa.scalar(None, col.type), col))
    return t


# ---------------------------------------------------------------- filters

OPS = ["=", "!=", "<", "<=", ">", ">=", "in", "not in"]


def _term(draw, columns, pools):
    c = draw(st.sampled_from(sorted(columns)))
    op = draw(st.sampled_from(OPS))
    lit = lambda: draw(st.sampled_from(pools[c]) | TYPES[columns[c]][1])  # noqa: E731
    if op in ("in", "not in"):
        value = [draw(st.none()) if draw(st.integers(0, 5)) == 0 else lit() for _ in range(draw(st.integers(0, 3)))]
    else:
        value = None if draw(st.integers(0, 12)) == 0 else lit()
    return (c, op, value)


@st.composite
def dnf_filters(draw, columns, pools):
    conjunctions = [[_term(draw, columns, pools) for _ in range(draw(st.integers(1, 3)))] for _ in range(draw(st.integers(1, 2)))]
    return conjunctions[0] if len(conjunctions) == 1 and draw(st.booleans()) else conjunctions


def _spark_key(v):
    return (1, 0.0) if isinstance(v, float) and math.isnan(v) else (0, v) if isinstance(v, float) else v


def _sql_term(v, op, lit) -> bool:
    """lakelog's DNF semantics, written independently: SQL three-valued logic, Spark's float order."""
    if v is None:
        return False
    if op in ("in", "not in"):
        hit = any(x is not None and _spark_key(v) == _spark_key(x) for x in lit)
        return hit if op == "in" else (not hit and None not in lit)
    if lit is None:
        return False
    a, b = _spark_key(v), _spark_key(lit)
    return {"=": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def _sql_model(rows: list[dict], filters) -> list[int]:
    dnf = [filters] if isinstance(filters[0], tuple) else filters
    return sorted(r["id"] for r in rows if any(all(_sql_term(r[c], op, lit) for c, op, lit in conj) for conj in dnf))


@st.composite
def expressions(draw, columns, pools, with_struct: bool, depth: int = 0):
    """A pyarrow expression and the columns it reads."""
    if depth < 2 and draw(st.integers(0, 2)) == 0:
        kind = draw(st.sampled_from(["and", "or", "not"]))
        a, ca = draw(expressions(columns, pools, with_struct, depth + 1))
        if kind == "not":
            return ~a, ca
        b, cb = draw(expressions(columns, pools, with_struct, depth + 1))
        return (a & b if kind == "and" else a | b), ca | cb
    if with_struct and draw(st.integers(0, 5)) == 0:
        x = pc.field("st", "x")
        return draw(st.sampled_from([x.is_nan(), x == 0.0, x.is_null(), pc.field("st", "y") >= 0, pc.field("st").is_null()])), {"st"}
    c = draw(st.sampled_from(sorted(columns)))
    t = TYPES[columns[c]][0]
    f = pc.field(c)
    lit = pa.scalar(draw(st.sampled_from(pools[c]) | TYPES[columns[c]][1]), t)
    leaf = draw(st.sampled_from(["cmp", "cmp", "cmp", "is_null", "is_valid", "isin"] + (["is_nan"] if pa.types.is_floating(t) else [])))
    if leaf == "cmp":
        op = draw(st.sampled_from(["==", "!=", "<", "<=", ">", ">="]))
        e = {"==": f == lit, "!=": f != lit, "<": f < lit, "<=": f <= lit, ">": f > lit, ">=": f >= lit}[op]
    elif leaf == "isin":
        e = f.isin(pa.array(draw(st.lists(st.sampled_from(pools[c]), max_size=3)), t))
    else:
        e = getattr(f, leaf)()
    return e, {c}


# ---------------------------------------------------------------- the test

def _deltalake_unreliable(columns: dict, used: set[str], partition_by: list[str]) -> bool:
    """deltalake's filtered reads that are known to be wrong, so not compared:
    - float data columns: it hands pyarrow the filter, whose Parquet footer pruning drops NaN and
      signed-zero rows (the bug lakelog works around);
    - a negative decimal partition value with a fractional part: deltalake mangles it ('-1.5' is read
      as '-1.-50' and fails; it cannot write one either)."""
    if any(columns[c].startswith("decimal") for c in partition_by):
        return True
    for c in used:
        kind = columns.get(c)
        if c in partition_by:
            continue
        if c == "st" or kind in ("float32", "float64"):
            return True
    return False


@FUZZ
@given(data=st.data(), table=tables())
def test_filtered_reads_equal_in_memory_evaluation(data, table):
    columns, pools, partition_by, commits = table
    root = tempfile.mkdtemp(prefix="lakelog-fuzz-")
    try:
        path = os.path.join(root, "t")
        for i, t in enumerate(commits):
            lakelog.write_table(path, t, partition_by=partition_by if i == 0 else None)
        written = _written(commits, columns, partition_by)
        rows = written.to_pylist()
        full = lakelog.read_table(path)
        assert sorted((_canon(r) for r in full.to_pylist()), key=repr) == sorted((_canon(r) for r in rows), key=repr)
        dl = deltalake.DeltaTable(path)
        with_struct = "st" in written.column_names
        engine = Engine()
        relation = engine.register(written)

        for _ in range(6):
            filters = data.draw(dnf_filters(columns, pools), label="dnf")
            expected = _sql_model(rows, filters)
            assert _ids(lakelog.read_table(path, filters=filters)) == expected, filters
            # The SQL translation (what delete, update and merge evaluate) in DuckDB: the same rows.
            assert _ids(engine.query(f"SELECT id FROM {relation} WHERE {filters_to_sql(filters)}", "fuzz")) == expected, filters
            assert _ids(lakelog.Table(path).to_pyarrow(columns=["id"], filters=filters)) == expected, filters
            used = {c for conj in ([filters] if isinstance(filters[0], tuple) else filters) for c, _, _ in conj}
            if _deltalake_unreliable(columns, used, partition_by):
                continue
            # deltalake's DNF semantics are pyarrow's (a NULL in an IN list matches null, NOT IN keeps nulls):
            # compare its read with pyarrow's evaluation of the same DNF on the rows written.
            try:
                as_pyarrow = pq.filters_to_expression(filters)
                dl_expected = _ids(written.filter(as_pyarrow))
            except (pa.ArrowException, TypeError, ValueError):
                continue  # pyarrow cannot even evaluate it (e.g. an empty IN list)
            assert _ids(dl.to_pyarrow_table(filters=filters)) == dl_expected, ("deltalake", filters)

        for _ in range(6):
            expr, used = data.draw(expressions(columns, pools, with_struct), label="expression")
            try:
                expected = _ids(written.filter(expr))
            except (pa.ArrowException, TypeError):
                with pytest.raises(InvalidFilterError):
                    lakelog.read_table(path, filters=expr)
                continue
            assert _ids(lakelog.read_table(path, filters=expr)) == expected, str(expr)
            assert _ids(lakelog.Table(path).to_pyarrow(columns=["id"], filters=expr)) == expected, str(expr)
            if not _deltalake_unreliable(columns, used, partition_by):
                assert _ids(dl.to_pyarrow_dataset().to_table(filter=expr)) == expected, ("deltalake", str(expr))
    finally:
        shutil.rmtree(root, ignore_errors=True)

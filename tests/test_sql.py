"""lakelog.expressions.sql: predicate validation, DNF filters as SQL, and the soundness of file pruning.

Pruning property: for random tables (one row per file, so every file can be skipped) and random
predicates over every column type, including literals that do not fit the column exactly, every file
that holds a row DuckDB selects is a candidate. The pruning expression may keep more files, never fewer.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
import shutil
import tempfile

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakelog
from lakelog.dml.rewrite import RowLevelOperation, compile_predicate
from lakelog.errors import PredicateError
from lakelog.expressions.sql_skipping import prune_expression
from lakelog.expressions.sql import Engine, filters_to_sql, parse_expression
from lakelog.storage import Storage

FUZZ = int(os.environ.get("LAKELOG_FUZZ_EXAMPLES", "0"))
SCHEMA = pa.schema([
    ("i", pa.int32()), ("s", pa.string()), ("d", pa.date32()), ("ts", pa.timestamp("us", tz="UTC")),
    ("n", pa.decimal128(10, 2)), ("f", pa.float64()), ("b", pa.bool_()), ("p", pa.string()),
])


def test_parse_expression_refuses_more_than_one_expression():
    assert parse_expression("a = 1 and b like 'x%'")["type"] == "CONJUNCTION_AND"
    for text in ["1; select 2", "a) from t where (1", "*", "x in (select 1)", "exists (select 1)", "$1 = a", "count(*) over ()"]:
        with pytest.raises(PredicateError):
            parse_expression(text)
    with pytest.raises(PredicateError, match="must be SQL text"):
        parse_expression(42)


def test_filters_to_sql_follows_three_valued_logic():
    con = duckdb.connect()
    con.register("t", pa.table({"x": [1, 2, None], "s": ["a", None, "c"]}))

    def count(filters):
        return con.execute(f"SELECT count(*) FROM t WHERE {filters_to_sql(filters)}").fetchall()[0][0]

    assert count([("x", "not in", [1])]) == 1  # NULL x is not selected
    assert count([("x", "!=", 1)]) == 1
    assert count([("x", "in", [])]) == 0
    assert count([("x", "not in", [])]) == 2  # a null never satisfies a DNF term, not even "not in []"
    assert count([[("x", "=", 1)], [("s", "=", "c")]]) == 2
    assert count([("s", "=", "it's")]) == 0
    with pytest.raises(PredicateError, match="operator"):
        filters_to_sql([("x", "~", 1)])


def test_literal_values_only_when_exact():
    eng = Engine()
    lit = lambda text, t: eng.literal(parse_expression(text), t)  # noqa: E731
    assert lit("3", pa.int32()).as_py() == 3
    assert lit("1.5", pa.int32()) is None  # int = 1.5 is compared as decimals: not translated
    assert lit("1.25", pa.decimal128(10, 2)).as_py() == decimal.Decimal("1.25")
    assert lit("1.234", pa.decimal128(10, 2)) is None
    assert lit("'2026-01-02'", pa.date32()).as_py() == dt.date(2026, 1, 2)
    assert lit("DATE '2026-01-02'", pa.date32()).as_py() == dt.date(2026, 1, 2)
    assert lit("TIMESTAMP '2026-01-02 03:04:05'", pa.timestamp("us", tz="UTC")).as_py() == dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    assert lit("'2026-01-02 03:04:05+02'", pa.timestamp("us", tz="UTC")).as_py() == dt.datetime(2026, 1, 2, 1, 4, 5, tzinfo=dt.timezone.utc)
    assert lit("'x'", pa.int64()) is None and lit("3", pa.string()) is None
    eng.close()


def test_untranslatable_parts_relax_to_true():
    eng = Engine()
    schema = pa.schema([("x", pa.int64()), ("y", pa.int64()), ("f", pa.float64())])
    prune = lambda text: prune_expression(parse_expression(text), schema, eng)  # noqa: E731
    assert prune("x > y") is None
    assert prune("f > 1") is None  # floats are never used
    assert str(prune("x > 3 and y + 1 > 2")) == "(x > 3)"
    assert prune("x > 3 or y + 1 > 2") is None
    assert prune("not (x > 3 and y + 1 > 2)") is None  # NOT needs an exact child
    assert str(prune("not (x > 3)")) == "invert((x > 3))"
    eng.close()


# ---------------------------------------------------------------- pruning soundness

values = st.fixed_dictionaries({
    "i": st.one_of(st.none(), st.integers(-3, 3)),
    "s": st.one_of(st.none(), st.sampled_from(["", "a", "ab", "b", "\u00e9", "a" * 40])),
    "d": st.one_of(st.none(), st.dates(dt.date(2026, 1, 1), dt.date(2026, 1, 4))),
    "ts": st.one_of(st.none(), st.datetimes(dt.datetime(2026, 1, 1), dt.datetime(2026, 1, 2), timezones=st.just(dt.timezone.utc))),
    "n": st.one_of(st.none(), st.decimals(-2, 2, places=2, allow_nan=False, allow_infinity=False)),
    "f": st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.5, float("nan"), float("inf")])),
    "b": st.one_of(st.none(), st.booleans()),
    "p": st.one_of(st.none(), st.sampled_from(["a", "b"])),
})

LITERALS = {
    "i": ["0", "1", "-2", "1.5", "'1'", "NULL", "3000000000"],
    "s": ["'a'", "'ab'", "''", "'b'", "'\u00e9'", "'" + "a" * 40 + "'", "1"],
    "d": ["'2026-01-02'", "DATE '2026-01-03'", "TIMESTAMP '2026-01-02 12:00:00'", "'2026-01-02 00:00:00'"],
    "ts": ["'2026-01-01 12:00:00'", "TIMESTAMP '2026-01-01 06:00:00'", "'2026-01-01 12:00:00+05'", "DATE '2026-01-02'"],
    "n": ["1", "0.5", "1.234", "-1.25", "1e0"],
    "f": ["0", "1.5", "'NaN'::double", "-0.0"],
    "b": ["true", "false"],
    "p": ["'a'", "'b'"],
}


@st.composite
def atom(draw):
    col = draw(st.sampled_from(SCHEMA.names))
    kind = draw(st.sampled_from(["cmp", "cmp", "in", "between", "null", "like", "flip"]))
    lit = lambda: draw(st.sampled_from(LITERALS[col]))  # noqa: E731
    if kind == "cmp":
        return f"{col} {draw(st.sampled_from(['=', '<>', '<', '<=', '>', '>=']))} {lit()}"
    if kind == "flip":
        return f"{lit()} {draw(st.sampled_from(['=', '<', '>=']))} {col}"
    if kind == "in":
        return f"{col} {draw(st.sampled_from(['in', 'not in']))} ({', '.join(draw(st.lists(st.sampled_from(LITERALS[col] + ['NULL']), min_size=1, max_size=3)))})"
    if kind == "between":
        return f"{col} between {lit()} and {lit()}"
    if kind == "like" and col == "s":
        return f"s like '{draw(st.sampled_from(['a', 'ab', '', 'a_']))}%'"
    return f"{col} is {draw(st.sampled_from(['', 'not ']))}null"


predicate_text = st.recursive(
    atom(),
    lambda inner: st.one_of(
        st.builds(lambda a, b: f"({a}) and ({b})", inner, inner),
        st.builds(lambda a, b: f"({a}) or ({b})", inner, inner),
        st.builds(lambda a: f"not ({a})", inner),
    ),
    max_leaves=4,
)


@settings(max_examples=FUZZ or 40, deadline=None, derandomize=not FUZZ, suppress_health_check=list(HealthCheck))
@given(rows=st.lists(values, min_size=1, max_size=6), predicates=st.lists(predicate_text, min_size=1, max_size=6))
def test_pruning_never_skips_a_file_holding_a_selected_row(rows, predicates):
    tmp = tempfile.mkdtemp(prefix="lakelog-prune-")
    try:
        path = os.path.join(tmp, "t")
        for r in rows:  # one row per file
            lakelog.write_table(path, pa.Table.from_pylist([r], schema=SCHEMA), partition_by=["p"])
        con = duckdb.connect()
        con.execute("SET TimeZone = 'UTC'")
        op = RowLevelOperation(Storage(path))
        by_id = {}
        for add in op.snapshot.files.values():
            by_id[add.path] = op.read_file(add)
        for text in predicates:
            try:
                pred = compile_predicate(text, op.schema, op.engine)
            except PredicateError:
                continue  # e.g. a type error DuckDB finds while binding
            kept = {a.path for a in op.candidates(pred.prune)}
            for path_, content in by_id.items():
                con.register("f", content)
                try:
                    hit = con.execute(f"SELECT count(*) FROM f WHERE {text}").fetchall()[0][0]
                except duckdb.Error:
                    continue  # a conversion error on this row's value: no file would be written
                assert not hit or path_ in kept, (text, content.to_pylist(), str(pred.prune))
        op.abort()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

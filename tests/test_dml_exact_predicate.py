"""Simple SQL predicates of row-level changes evaluated by pyarrow (``lakelog.dml.exact_predicate``):
the same rows as the SQL engine selects, for many predicates over awkward values."""

import math
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakelog
from lakelog.errors import PredicateError
from lakelog.dml.exact_predicate import exact_expression
from lakelog.dml.predicate import compile_predicate, select_positions
from lakelog.expressions.sql import Engine, parse_expression

DOUBLES = [None, math.nan, -math.nan, 0.0, -0.0, 0.01, 0.009999999999999998, 0.010000000000000002, 1.0, -1.0, 2.5, -2.5,
           1e300, -1e300, math.inf, -math.inf, 9007199254740992.0, 9007199254740993.0, 5e-324, 0.1, 0.30000000000000004, 3.0]
INTS = [None, 0, 1, -1, 2, 3, 127, -128, 300, 2**31 - 1, -(2**31), 2**53, 2**53 + 1, 2**63 - 1, -(2**63)]


def _table(n: int = 400, seed: int = 3) -> pa.Table:
    rnd = random.Random(seed)
    ints = [rnd.choice(INTS) for _ in range(n)]

    def fit(bits):
        t = {8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[bits]
        return pa.array([v if v is None or -(2 ** (bits - 1)) <= v < 2 ** (bits - 1) else 1 for v in ints], t)

    return pa.table({
        "x": pa.array([rnd.choice(DOUBLES) for _ in range(n)], pa.float64()),
        "y": pa.array([rnd.choice(DOUBLES) for _ in range(n)], pa.float64()),
        "i8": fit(8), "i16": fit(16), "i32": fit(32), "i64": fit(64),
        "s": pa.array([rnd.choice([None, "a", "b"]) for _ in range(n)]),
    })


LITERALS = ["0", "1", "-1", "0.01", "-0.01", "2.5", "-0.0", "0.0", "3", "300", "127", "-128", "2147483647", "9007199254740992",
            "9007199254740993", "9223372036854775807", "-9223372036854775808", "1e-2", "0.1", "0.30000000000000004",
            "123456789012345", "1.00000000000000000001", "99999999999999999999999"]
OPS = ["<", "<=", ">", ">=", "=", "<>", "!="]
COLUMNS = ["x", "y", "i8", "i16", "i32", "i64", "X", '"i64"']


def _predicates(count: int, seed: int):
    rnd = random.Random(seed)

    def atom():
        k = rnd.random()
        col = rnd.choice(COLUMNS)
        if k < 0.15:
            return f"{col} IS {'NOT ' if rnd.random() < 0.5 else ''}NULL"
        lit = rnd.choice(LITERALS)
        return f"{lit} {rnd.choice(OPS)} {col}" if k < 0.3 else f"{col} {rnd.choice(OPS)} {lit}"

    def expr(depth):
        if depth == 0 or rnd.random() < 0.4:
            return atom()
        k = rnd.random()
        if k < 0.2:
            return f"NOT ({expr(depth - 1)})"
        return f"({expr(depth - 1)}) {'AND' if k < 0.6 else 'OR'} ({expr(depth - 1)})"

    return [expr(3) for _ in range(count)]


def test_exact_predicates_select_what_the_engine_selects():
    table = _table()
    engine = Engine()
    translated = 0
    try:
        for text in _predicates(250, seed=11) + ["x < 0.01", "x > 0.5", "x >= 2.5", "NOT (x <= 1)", "x <> 0", "i8 < 300", "i8 >= -129"]:
            exact = exact_expression(parse_expression(text), table.schema)
            try:
                expected = engine.positions(table, text, text)
            except PredicateError:
                assert exact is None, text  # (what the engine refuses is never evaluated by pyarrow)
                continue
            if exact is None:
                continue
            translated += 1
            got = select_positions(engine, compile_predicate(text, table.schema, engine), table)
            assert got.tolist() == expected.tolist(), text
    finally:
        engine.close()
    assert translated > 100  # (most of them are simple enough)


@pytest.mark.parametrize("text", [
    "s = 'a'",  # strings: collations, casts
    "i64 < 2.5",  # an integer column against a fraction: compared as DECIMAL
    "x < 1.00000000000000000001",  # more digits than a double holds
    "x < 99999999999999999999999",  # beyond 2**53
    "abs(x) < 1",  # functions
    "x + 1 < 2",
    "x < y",  # two columns
    "x IN (1, 2)",
    "x BETWEEN 0 AND 1",
    "1 < 2",
])
def test_what_is_not_simple_is_left_to_the_engine(text):
    assert exact_expression(parse_expression(text), _table(10).schema) is None


def test_delete_and_update_with_nan_and_null_as_the_engine(tmp_path):
    # NaN sorts above every number in SQL: x > 0.5 deletes the NaN rows too, and NULL is never selected.
    path = str(tmp_path / "t")
    xs = [0.1, math.nan, None, 0.7, -0.0, 0.5, math.inf]
    lakelog.write_table(path, pa.table({"id": pa.array(range(len(xs)), pa.int64()), "x": pa.array(xs, pa.float64())}))
    t = lakelog.Table(path)
    assert t.delete("x > 0.5")["num_deleted_rows"] == 3
    assert sorted(t.to_pyarrow().column("id").to_pylist()) == [0, 2, 4, 5]
    assert t.update({"x": "1"}, "NOT (x >= 0.5)")["num_updated_rows"] == 2  # 0.1 and -0.0; NULL stays
    rows = dict(zip(*[t.to_pyarrow().column(c).to_pylist() for c in ("id", "x")]))
    assert rows == {0: 1.0, 2: None, 4: 1.0, 5: 0.5}


def test_stats_pruning_of_simple_predicates_keeps_every_file_with_a_selected_row(tmp_path):
    """Files skipped by the DNF form of a simple predicate (``prune_filters``, decided over the stats of
    every file at once) hold no row the engine selects; they are the ones the dataset path skips."""
    from lakelog.dml.rewrite import RowLevelOperation

    path = str(tmp_path / "t")
    rnd = random.Random(4)
    for k in range(8):
        lo = k * 10 - 40
        lakelog.write_table(path, pa.table({
            "i64": pa.array([None if rnd.random() < 0.1 else lo + rnd.randrange(10) for _ in range(20)], pa.int64()),
            "i8": pa.array([None if k == 3 else rnd.randrange(-128, 128) // (k + 1) for _ in range(20)], pa.int8()),
            "x": pa.array([rnd.choice(DOUBLES) for _ in range(20)], pa.float64()),
            "y": pa.array([rnd.choice(DOUBLES) for _ in range(20)], pa.float64()),
            "i16": pa.array([lo * 10 + rnd.randrange(100) for _ in range(20)], pa.int16()),
            "i32": pa.array([rnd.choice([0, 1, 2, 3]) * k for _ in range(20)], pa.int32()),
        }))
    t = lakelog.Table(path)
    engine = Engine()
    contents = {a.path: pq.read_table(t.storage.join(a.relative_path)) for a in t.snapshot.files.values()}
    pruned = 0
    try:
        for text in _predicates(120, seed=9) + ["i64 < -35", "NOT (i64 >= -35)", "i8 = 300", "i64 > 5 AND i64 < 17"]:
            op = RowLevelOperation(t.storage)
            try:
                pred = compile_predicate(text, op.schema, op.engine)
                if pred.prune_filters is None:
                    continue
                kept = {a.path for a in op.candidates(pred.prune, pred.prune_filters)}
                by_dataset = {a.path for a in op.candidates(pred.prune)}
            finally:
                op.close()
            assert kept == by_dataset, text
            for name, content in contents.items():
                if len(engine.positions(content, text, text)):
                    assert name in kept, (text, name)
            pruned += len(kept) < 8
    finally:
        engine.close()
    assert pruned > 8

"""Simple update values computed by pyarrow (``lakelog.dml.exact_values``): the same rows, types and
file statistics as the engine computes, and everything less simple left to the engine."""

import importlib
import json

import pyarrow as pa
import pytest

import lakelog
from lakelog.dml.exact_values import exact_values
from lakelog.errors import ConstraintViolationError
from lakelog.expressions.sql import parse_expression

update_module = importlib.import_module("lakelog.dml.update")  # (lakelog.dml.update is also a function)

I8, I16, I32, I64 = (2**7, 2**15, 2**31, 2**63)


def _table() -> pa.Table:
    n = 8
    return pa.table({
        "id": pa.array(range(n), pa.int64()),
        "i8": pa.array([1, None, -3, 4, 5, 6, 7, 8], pa.int8()),
        "i16": pa.array([1, 2, None, 4, 5, 6, 7, 8], pa.int16()),
        "i32": pa.array([1, 2, 3, None, 5, 6, 7, 8], pa.int32()),
        "i64": pa.array([1, 2, 3, 4, None, 6, 7, 8], pa.int64()),
        "d": pa.array([0.5, None, 1.5, -2.0, 3.0, 0.25, 9.0, 1.0], pa.float64()),
        "s": pa.array(["a", "b", None, "", "c", "d", "e", "f"], pa.string()),
        "b": pa.array([True, False, None, True, False, True, False, True], pa.bool_()),
        "d2": pa.array([None, -0.0, 7.25, 1e300, None, 2.0, 3.0, -1.0], pa.float64()),
        "s2": pa.array(["", None, "ü", "x", None, "", "y", "z"], pa.string()),
        "b2": pa.array([None, True, False, None, True, None, True, False], pa.bool_()),
        "j64": pa.array([None, -(2**63), 2**63 - 1, 0, None, 5, 6, 7], pa.int64()),
    })


ACCEPTED = [
    {"i8": str(I8 - 1), "i16": str(-I16), "i32": str(I32 - 1), "i64": str(-I64), "d": "0.1", "s": "''", "b": "TRUE"},
    {"i8": str(-I8), "i16": str(I16 - 1), "i32": str(-I32), "i64": str(I64 - 1), "d": "-0.0", "s": "'naïve ✓ 𝄞'", "b": "false"},
    {"d": "123456789012345", "s": "'it''s'", "i64": "-0", "i8": "0"},
    {"d": "-1234567890.12345", "s": "E'a\\nb'"},
    {"d": "0.000000000000001", "i16": "-1"},
    {"d": "9007199254740992"},
    {"d": "-9007199254740992", "s": "'updated'"},
    {"d": "-5"},
    {"d": "0.30000000000000004"[:17]},
    {"d": "d2", "s": "s2", "b": "b2", "i64": "j64"},
    {"D": "D2", "s": '"S2"', "i8": "3"},
]


def _spy(monkeypatch) -> list:
    seen = []

    def spy(trees, schema):
        out = real(trees, schema)
        seen.append(out)
        return out

    real = update_module.exact_values
    monkeypatch.setattr(update_module, "exact_values", spy)
    return seen


def _updated(path, updates: dict, predicate: str | None) -> tuple[pa.Table, list]:
    lakelog.write_table(path, _table())
    t = lakelog.Table(path)
    t.update(updates, predicate)
    rows = t.to_pyarrow().sort_by("id")
    stats = sorted(
        (json.dumps({k: v for k, v in json.loads(a.stats).items()}, sort_keys=True) for a in t.snapshot.files.values()),
    )
    return rows, stats


@pytest.mark.parametrize("updates", ACCEPTED)
@pytest.mark.parametrize("predicate", ["i64 IS NULL OR id % 2 = 0"])
def test_simple_values_as_the_engine_computes_them(tmp_path, monkeypatch, updates, predicate):
    seen = _spy(monkeypatch)
    fast, fast_stats = _updated(str(tmp_path / "fast"), updates, predicate)
    assert seen and seen[-1] is not None, updates  # (computed by pyarrow)
    monkeypatch.setattr(update_module, "exact_values", lambda trees, schema: None)
    slow, slow_stats = _updated(str(tmp_path / "slow"), updates, predicate)
    assert fast.schema == slow.schema
    assert fast.equals(slow), (updates, fast.to_pydict(), slow.to_pydict())
    for col in ("d", "d2"):  # (equals() does not tell 0.0 from -0.0)
        assert [str(v) for v in fast.column(col).to_pylist()] == [str(v) for v in slow.column(col).to_pylist()]
    assert fast_stats == slow_stats


@pytest.mark.parametrize("text,column", [
    ("NULL", "s"), ("NULL", "i64"), ("CAST(1 AS BIGINT)", "i64"), ("i64 + 1", "i64"), ("'x' || s", "s"), ("abs(d)", "d"),
    (str(I8), "i8"), (str(-I8 - 1), "i8"), (str(I16), "i16"), (str(I32), "i32"), (str(I64), "i64"), (str(-I64 - 1), "i64"),
    ("2.5", "i64"), ("'5'", "i64"), ("5", "s"), ("'true'", "b"), ("1", "b"), ("TRUE", "s"), ("0.5", "s"),
    ("1e5", "d"), ("1.0000000000000001", "d"), ("0.0000000000000000001", "d"), ("9007199254740993", "d"),
    ("-9007199254740993", "d"), ("'0.1'", "d"),
    ("i32", "i64"), ("d", "s"), ("s", "b"), ("f", "d"), ("c", "s"), ("s", "c"), ("'x'", "c"), ("1", "f"), ("t.s", "s"),
    ("'2020-01-01'", "dt"), ("1", "dec"),
])
def test_what_is_not_simple_is_left_to_the_engine(text, column):
    schema = _table().schema.append(pa.field("f", pa.float32())).append(
        pa.field("c", pa.string(), metadata={"__CHAR_VARCHAR_TYPE_STRING": "x", "collation": "ICU.de"})).append(
        pa.field("dt", pa.date32())).append(pa.field("dec", pa.decimal128(10, 2)))
    assert exact_values({column: parse_expression(text)}, schema) is None
    assert exact_values({"s": parse_expression("'ok'")}, schema) is not None


def test_a_simple_value_beside_one_that_is_not_goes_to_the_engine(tmp_path, monkeypatch):
    seen = _spy(monkeypatch)
    path = str(tmp_path / "t")
    rows, _ = _updated(path, {"s": "'x'", "i64": "i64 + 1", "d": "NULL"}, "id < 2")
    assert seen == [None]
    assert rows.column("s").to_pylist()[:3] == ["x", "x", None]
    assert rows.column("i64").to_pylist()[:3] == [2, 3, 3]
    assert rows.column("d").to_pylist()[:3] == [None, None, 1.5]


def test_constraints_and_generated_columns_apply_to_simple_values(tmp_path, monkeypatch):
    seen = _spy(monkeypatch)
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": pa.array([1, 2], pa.int64()), "s": ["a", "b"]}),
                        generated_columns={"n": "length(s)"})
    t = lakelog.Table(path)
    t.add_constraint({"short": "length(s) < 3"})
    with pytest.raises(ConstraintViolationError):
        t.update({"s": "'toolong'"}, "id = 1")
    assert sorted(t.to_pyarrow().column("s").to_pylist()) == ["a", "b"]
    t.update({"s": "'ab'"}, "id = 1")
    rows = t.to_pyarrow().sort_by("id")
    assert rows.column("s").to_pylist() == ["ab", "b"] and rows.column("n").to_pylist() == [2, 1]
    assert len(seen) == 2 and all(v is not None for v in seen)

"""Read filters: every malformed filter is a typed error quoting it, and DNF terms follow SQL
three-valued logic (null never satisfies a term; NULL in a list) and Spark's float ordering."""

from __future__ import annotations

import datetime as dt
import decimal
import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakelog
from lakelog.errors import InvalidFilterError, LakelogError, SchemaMismatchError
from lakelog.expressions.filters import NEGATED_OP, compile_filter, term_expression, term_mask

UTC = dt.timezone.utc
SCHEMA = pa.schema(
    [
        ("i", pa.int32()),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("b", pa.bool_()),
        ("bin", pa.binary()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("tn", pa.timestamp("us")),
        ("dec", pa.decimal128(5, 2)),
        ("st", pa.struct([("x", pa.int64())])),
    ]
)


@pytest.mark.parametrize(
    "filters,message",
    [
        ("i > 3", "neither DNF tuples"),
        ([("i", ">")], "not a \\(column, op, value\\) tuple"),
        ([("missing", "=", 1)], "column 'missing' is not in the table"),
        ([(1, "=", 1)], "column 1 is not in the table"),
        ([("i", "~", 1)], "unknown operator '~'"),
        ([("i", None, 1)], "unknown operator None"),
        ([("i", "=", "3")], "value '3' \\(str\\) cannot be compared with a column of type int32"),
        ([("i", "=", 1.5)], "pass an int"),
        ([("i", "=", True)], "pass an int"),
        ([("i", "=", 2**70)], "64-bit range"),
        ([("f", "<", "1.0")], "pass a float or an int"),
        ([("s", "=", 5)], "pass a str"),
        ([("b", "=", 1)], "pass True or False"),
        ([("bin", "=", "x")], "pass bytes"),
        ([("d", "=", dt.datetime(2020, 1, 1))], "datetime.date"),
        ([("d", "=", "yesterday")], "not an ISO-8601 value"),
        ([("tn", "=", dt.datetime(2020, 1, 1, tzinfo=UTC))], "naive datetime"),
        ([("ts", "=", 5)], "datetime.datetime"),
        ([("dec", "=", "1.5")], "decimal.Decimal"),
        ([("dec", "=", decimal.Decimal("NaN"))], "finite number"),
        ([("st", "=", {"x": 1})], "nested type"),
        ([("i", "in", 3)], "takes a list of values"),
        ([("s", "in", "abc")], "takes a list of values"),
        ([("i", "in", [1, "2"])], "value '2'"),
        ([[("i", "=", 1)], []], "malformed"),
        ([[("i", "=", 1)], ("i", "=", 2)], "malformed"),
        (pc.field("missing") > 1, "cannot be applied"),
        (pc.field("s") > 1, "cannot be applied"),
        (pc.field("i"), "cannot be applied"),
    ],
)
def test_malformed_filters_are_typed_errors_quoting_the_filter(table_path, filters, message):
    lakelog.write_table(table_path, SCHEMA.empty_table())
    with pytest.raises(InvalidFilterError, match=message) as info:
        lakelog.read_table(table_path, filters=filters)
    assert isinstance(info.value, (SchemaMismatchError, LakelogError, ValueError))
    with pytest.raises(InvalidFilterError):
        lakelog.Table(table_path).files(filters=filters)


ROWS = pa.table(
    {
        "id": pa.array(range(5), pa.int64()),
        "x": pa.array([1, 2, None, 3, 1], pa.int64()),
        "f": pa.array([0.0, -0.0, float("nan"), None, 1.5], pa.float64()),
        "s": pa.array(["a", None, "", "b", "é"], pa.string()),
    }
)


@pytest.mark.parametrize(
    "filters,expected",
    [
        ([("x", "=", None)], []),  # x = NULL is never true
        ([("x", "!=", None)], []),
        ([("x", "<", None)], []),
        ([("x", "!=", 1)], [1, 3]),  # a null is not != 1
        ([("x", "in", [1, None])], [0, 4]),  # NULL in the list matches nothing
        ([("x", "in", [None])], []),
        ([("x", "in", [])], []),
        ([("x", "not in", [1])], [1, 3]),
        ([("x", "not in", [1, None])], []),  # x NOT IN (1, NULL) is never true
        ([("x", "not in", [])], [0, 1, 3, 4]),
        ([("s", "not in", ["a", ""])], [3, 4]),
        ([("s", "<", "b")], [0, 2]),
        ([("f", "=", 0.0)], [0, 1]),  # -0.0 = 0.0
        ([("f", "in", [-0.0])], [0, 1]),
        ([("f", "=", float("nan"))], [2]),  # NaN = NaN
        ([("f", ">", 1.0)], [2, 4]),  # NaN is larger than every other value
        ([("f", "<", float("nan"))], [0, 1, 4]),
        ([("f", "<=", float("nan"))], [0, 1, 2, 4]),
        ([("f", ">", float("nan"))], []),
        ([("f", "!=", float("nan"))], [0, 1, 4]),
        ([("f", "not in", [0.0, float("nan")])], [4]),
        ([("x", "IN", [2, 3])], [1, 3]),  # operators are case-insensitive
        ([("x", "==", 2)], [1]),
        ([("x", "=", 2**40)], []),  # beyond the column's type: compared as int64
        ([("x", "<", 2**40)], [0, 1, 3, 4]),
        ([[("x", "=", 1)], [("s", "=", "b")]], [0, 3, 4]),
    ],
)
def test_dnf_terms_follow_sql_three_valued_logic(table_path, filters, expected):
    lakelog.write_table(table_path, ROWS)
    assert sorted(lakelog.read_table(table_path, filters=filters).column("id").to_pylist()) == expected


def test_negated_terms_are_false_exactly_where_the_term_is_false():
    """term(op) and term(NEGATED_OP[op]) never both hold, and on non-null values exactly one does."""
    values = {"x": [1, 2, 3], "f": [0.0, -0.0, float("nan"), 1.5, float("inf")], "s": ["", "a", "é"]}
    for col, lits in values.items():
        t = ROWS.schema.field(col).type
        for lit in lits:
            for op in ("=", "!=", "<", "<=", ">", ">="):
                pos = ROWS.filter(term_expression(col, op, lit, t)).column("id").to_pylist()
                neg = ROWS.filter(term_expression(col, NEGATED_OP[op], lit, t)).column("id").to_pylist()
                non_null = [i for i, v in enumerate(ROWS.column(col).to_pylist()) if v is not None]
                assert sorted(pos + neg) == non_null, (col, op, lit)
            pos = ROWS.filter(term_expression(col, "in", [lit], t)).column("id").to_pylist()
            neg = ROWS.filter(term_expression(col, "not in", [lit], t)).column("id").to_pylist()
            assert sorted(pos + neg) == [i for i, v in enumerate(ROWS.column(col).to_pylist()) if v is not None]


def test_filter_values_in_accepted_forms(table_path):
    t = pa.table(
        {
            "id": [0, 1],
            "d": pa.array([dt.date(2020, 1, 1), dt.date(2021, 1, 1)], pa.date32()),
            "ts": pa.array([dt.datetime(2020, 1, 1, tzinfo=UTC), dt.datetime(2021, 1, 1, tzinfo=UTC)], pa.timestamp("us", tz="UTC")),
            "dec": pa.array([decimal.Decimal("1.25"), decimal.Decimal("2.50")], pa.decimal128(5, 2)),
            "f": pa.array([1.0, 2.0], pa.float32()),
        }
    )
    lakelog.write_table(table_path, t)

    def ids(filters):
        return sorted(lakelog.read_table(table_path, filters=filters).column("id").to_pylist())

    assert ids([("d", "=", "2020-01-01")]) == [0]  # ISO strings for dates and timestamps
    assert ids([("ts", ">=", "2021-01-01T00:00:00Z")]) == [1]
    assert ids([("ts", "<", dt.datetime(2020, 6, 1))]) == [0]  # naive means UTC
    assert ids([("ts", "<", dt.date(2020, 6, 1))]) == [0]  # a date is its midnight
    assert ids([("dec", "=", 2.5)]) == [1]
    assert ids([("dec", "=", decimal.Decimal("1.251"))]) == []  # more digits than the column: equals nothing
    assert ids([("dec", "<", decimal.Decimal("1.251"))]) == [0]
    assert ids([("dec", "in", [decimal.Decimal("1.251"), 3])]) == []
    assert ids([("dec", ">", decimal.Decimal("123456789.5"))]) == []
    assert ids([("f", "=", 2)]) == [1]
    assert ids([("f", "in", [0.1, 1.0])]) == [0]  # 0.1 is no float32 value


def test_compiled_filter_hands_the_scanner_no_float_data_terms():
    schema = pa.schema([("i", pa.int64()), ("f", pa.float64()), ("p", pa.float64())])
    c = compile_filter([("i", ">", 1), ("f", "=", 1.5)], schema, ["p"])
    assert c.recheck and c.scan.equals(pc.field("i") > pa.scalar(1, pa.int64())) and set(c.columns) == {"i", "f"}
    c = compile_filter([("i", ">", 1), ("p", "=", 1.5)], schema, ["p"])  # partition floats have no footer stats
    assert not c.recheck
    c = compile_filter([[("i", ">", 1)], [("f", "=", 1.5)]], schema, ["p"])
    assert c.scan is None  # a disjunct the scanner cannot see
    c = compile_filter(pc.field("f") > 1, schema, ["p"])
    assert c.scan is None and c.columns == ("f",)
    c = compile_filter(pc.field("i") > 1, schema, ["p"])
    assert not c.recheck
    assert compile_filter([], schema) is None and compile_filter(None, schema) is None


# ---------------------------------------------------------------- term_mask: the expression's kernels over values

COLUMN_VALUES = {
    pa.int32(): [None, -5, 0, 3, 2**31 - 1],
    pa.float64(): [None, float("nan"), -0.0, 0.0, 1.5, -math.inf],
    pa.float32(): [None, float("nan"), 0.0, 0.1, 3.0],
    pa.string(): [None, "", "a", "b%", "zz"],
    pa.date32(): [None, dt.date(2024, 1, 1), dt.date(1970, 1, 1)],
    pa.timestamp("us", "UTC"): [None, dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc), dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.timezone.utc)],
    pa.bool_(): [None, True, False],
}
LITERALS = {
    pa.int32(): [None, 0, 3, -5, 2**40, 3.0],
    pa.float64(): [None, float("nan"), 0.0, -0.0, 1.5, 2],
    pa.float32(): [None, float("nan"), 0.1, 3, -0.0],
    pa.string(): [None, "", "a", "b%"],
    pa.date32(): [None, dt.date(2024, 1, 1), "1970-01-01"],
    pa.timestamp("us", "UTC"): [None, dt.datetime(2024, 1, 1), "1970-01-01T00:00:01+00:00"],
    pa.bool_(): [None, True, False],
}


@pytest.mark.parametrize("t", list(COLUMN_VALUES), ids=str)
def test_term_mask_is_the_expression(t):
    values = pa.array(COLUMN_VALUES[t], t)
    table = pa.table({"c": values, "__row": pa.array(range(len(values)), pa.int64())})
    lits = LITERALS[t]
    for op in NEGATED_OP:
        for value in ([lits, lits[1:], lits[2:3], []] if op in ("in", "not in") else lits):
            try:
                e = term_expression("c", op, value, t)
            except InvalidFilterError:
                continue
            want = np.zeros(len(values), bool)
            want[table.filter(e).column("__row").to_pylist()] = True
            assert term_mask(values, op, value, t).tolist() == want.tolist(), (t, op, value)

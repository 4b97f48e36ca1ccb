"""Table expressions (CHECK constraints, invariants, generated columns, defaults) mean what Spark means by
them, on every lakelog write path: lakelog.spark_expressions end to end, without Spark (the values are
Spark's own, as tests/test_spark_expressions_diff.py checks against Spark for every supported entry)."""

import datetime as dt
import json
import os
import re

import deltalake
import pyarrow as pa
import pytest

import lakelog
from lakelog.errors import (
    ConstraintViolationError,
    ExpressionEvaluationError,
    PredicateError,
    UnsupportedExpressionError,
    UnsupportedFeatureError,
)

SATURDAY, SUNDAY = dt.date(2024, 1, 6), dt.date(2024, 1, 7)
SPEC = os.path.join(os.path.dirname(__file__), "..", "specs", "spark-expressions.md")


def _rows(path):
    return sorted(lakelog.Table(str(path)).to_pyarrow().to_pylist(), key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _table_as_spark_writes_it(path, fields, configuration=None, protocol=None):
    """A table whose log is written as Spark writes it, with Spark SQL in its metadata."""
    os.makedirs(os.path.join(path, "_delta_log"))
    actions = [
        {"commitInfo": {"timestamp": 1700000000000, "operation": "CREATE TABLE", "operationParameters": {}}},
        {"protocol": protocol or {"minReaderVersion": 1, "minWriterVersion": 4}},
        {"metaData": {"id": "0c2b4a8e-0000-4000-8000-0000000000e1", "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps({"type": "struct", "fields": fields}), "partitionColumns": [],
                      "configuration": configuration or {}, "createdTime": 1700000000000}},
    ]
    with open(os.path.join(path, "_delta_log", f"{0:020d}.json"), "w") as f:
        f.write("\n".join(json.dumps(a) for a in actions) + "\n")


def _field(name, type_, **metadata):
    return {"name": name, "type": type_, "nullable": True, "metadata": metadata}


def test_a_check_on_dayofweek_refuses_saturday_as_spark_counts_days(tmp_path):
    # Spark: dayofweek is 1 (Sunday) to 7 (Saturday); DuckDB's own is 0-6, which let Saturday through
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"d": pa.array([SUNDAY], pa.date32())}))
    t = lakelog.Table(path)
    t.add_constraint({"no_saturday": "dayofweek(d) <> 7"})
    with pytest.raises(ConstraintViolationError, match="no_saturday") as e:
        lakelog.write_table(path, pa.table({"d": pa.array([SUNDAY, SATURDAY], pa.date32())}))
    assert e.value.row == {"d": SATURDAY}
    with pytest.raises(ConstraintViolationError, match="no_saturday"):
        t.update({"d": "CAST(d - INTERVAL 1 DAY AS DATE)"})  # Sunday -> Saturday
    assert t.version == 1 and _rows(path) == [{"d": SUNDAY}]
    lakelog.write_table(path, pa.table({"d": pa.array([dt.date(2024, 1, 5)], pa.date32())}))  # a Friday is fine
    assert len(_rows(path)) == 2


def test_generated_columns_store_the_values_spark_computes(tmp_path):
    path = str(tmp_path / "t")
    generated = {
        "dow": "dayofweek(d)",                # Sunday = 1 (DuckDB: 0)
        "head": "substring(s, 0, 2)",         # position 0 counts as 1 (DuckDB: 1 character)
        "loud": "upper(s)",                   # ß is SS (DuckDB: ẞ)
        "half": "i / 2",                      # always fractional (double)
        "stamp": "CAST(ts AS STRING)",        # no trailing zeros, no zone (DuckDB: '... 10:00:00+00')
        "even": "bround(x, 0)",               # HALF_EVEN (DuckDB has no bround)
        "pos": "instr(s, 'e')",
    }
    ts = pa.array([dt.datetime(2024, 1, 6, 10, 0, 0, 120000)], pa.timestamp("us", tz="UTC"))
    data = pa.table({"d": pa.array([SATURDAY], pa.date32()), "s": ["straße"], "i": pa.array([5], pa.int32()), "ts": ts, "x": [2.5]})
    lakelog.write_table(path, data, generated_columns=generated)
    (row,) = _rows(path)
    assert {k: row[k] for k in generated} == {"dow": 7, "head": "st", "loud": "STRASSE", "half": 2.5, "stamp": "2024-01-06 10:00:00.12",
                                              "even": 2.0, "pos": 6}
    schema = lakelog.Table(path).to_pyarrow().schema
    assert schema.field("dow").type == pa.int32() and schema.field("half").type == pa.float64()  # Spark's result types
    # a given value must equal Spark's: DuckDB's dayofweek (6) is refused
    with pytest.raises(lakelog.errors.GeneratedColumnError, match="dow"):
        lakelog.write_table(path, data.append_column("dow", pa.array([6], pa.int32())))
    # deltalake reads what lakelog computed
    assert deltalake.DeltaTable(path).to_pyarrow_table().column("dow").to_pylist() == [7]


def test_an_expression_spark_fails_on_fails_the_write(tmp_path):
    # Spark in ANSI mode (its default) fails a write whose CHECK or generation expression raises for a row
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"x": pa.array([1], pa.int32())}))
    t = lakelog.Table(path)
    t.add_constraint({"next_positive": "x + 1 > 0"})  # DuckDB alone rewrites this as x > -1 and never overflows
    with pytest.raises(ExpressionEvaluationError, match=r"CHECK constraint next_positive .*x=2147483647.*ARITHMETIC_OVERFLOW") as e:
        lakelog.write_table(path, pa.table({"x": pa.array([5, 2**31 - 1], pa.int32())}))
    assert isinstance(e.value, ConstraintViolationError) and e.value.row == {"x": 2**31 - 1} and e.value.constraint == "next_positive"
    assert t.version == 1 and _rows(path) == [{"x": 1}]

    path = str(tmp_path / "g")
    lakelog.write_table(path, pa.table({"x": pa.array([1], pa.int32())}), generated_columns={"y": "x * 1000", "z": "100 div x"})
    with pytest.raises(ExpressionEvaluationError, match=r"generated column 'y' .*x=3000000.*ARITHMETIC_OVERFLOW"):
        lakelog.write_table(path, pa.table({"x": pa.array([3_000_000], pa.int32())}))  # x * 1000 overflows int
    with pytest.raises(ExpressionEvaluationError, match=r"generated column 'z' .*x=0.*DIVIDE_BY_ZERO"):
        lakelog.write_table(path, pa.table({"x": pa.array([2, 0], pa.int32())}))
    assert _rows(path) == [{"x": 1, "y": 1000, "z": 100}]


def test_an_unsupported_function_in_a_table_is_refused_by_name_on_write_and_reading_still_works(tmp_path):
    path = str(tmp_path / "t")
    _table_as_spark_writes_it(path, [_field("id", "long"), _field("h", "long", **{"delta.generationExpression": "xxhash64(id)"})],
                              configuration={"delta.constraints.pos": "id > 0"})
    # a table Spark wrote rows into: give it a data file of its own
    first = str(tmp_path / "first")
    lakelog.write_table(first, pa.table({"id": pa.array([1], pa.int64()), "h": pa.array([-7], pa.int64())}))
    (add,) = lakelog.Table(first).snapshot.files.values()
    os.replace(os.path.join(first, add.relative_path), os.path.join(path, add.relative_path))
    with open(os.path.join(path, "_delta_log", f"{1:020d}.json"), "w") as f:
        f.write(json.dumps({"add": {"path": add.path, "partitionValues": {}, "size": add.size, "modificationTime": 1700000000000,
                                    "dataChange": True}}) + "\n")
    assert _rows(path) == [{"id": 1, "h": -7}]  # reading is unaffected
    for write in (lambda: lakelog.write_table(path, pa.table({"id": pa.array([2], pa.int64())})),
                  lambda: lakelog.Table(path).update({"id": "id + 1"})):
        with pytest.raises(UnsupportedExpressionError, match=r"xxhash64\(\)") as e:
            write()
        assert isinstance(e.value, PredicateError) and isinstance(e.value, UnsupportedFeatureError)
        assert "generation expression of column 'h'" in str(e.value) and e.value.construct == "function xxhash64()"
    lakelog.Table(path).delete("id = 1")  # DELETE writes no new rows: allowed, as in Delta
    assert _rows(path) == []


def test_add_constraint_refuses_what_lakelog_cannot_evaluate_and_non_deterministic_functions(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"x": [1.0], "s": ["a"], "d": pa.array([SUNDAY], pa.date32())}))
    t = lakelog.Table(path)
    for expr, named in [("exp(x) > 0", "function exp()"), ("d < current_date()", "current_date()"),
                        ("CAST(x AS DECIMAL(10,2)) > 0", "CAST from double to decimal"), ("s RLIKE 'a'", "RLIKE"),
                        ("hash(s) <> 0", "function hash()")]:
        with pytest.raises(UnsupportedExpressionError, match=re.escape(named)):
            t.add_constraint({"c": expr})
    with pytest.raises(PredicateError, match="unknown column 'nope'"):
        t.add_constraint({"c": "nope > 1"})
    assert t.version == 0


def test_column_defaults_may_read_the_time_of_the_write(tmp_path):
    path = str(tmp_path / "t")
    fields = [_field("id", "long"), _field("at", "date", CURRENT_DEFAULT="current_date()"),
              _field("tag", "string", CURRENT_DEFAULT="concat('v', 1 + 1)")]
    _table_as_spark_writes_it(path, fields, protocol={"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["allowColumnDefaults"]})
    before = dt.datetime.now(dt.timezone.utc).date()
    lakelog.write_table(path, pa.table({"id": pa.array([1], pa.int64())}))
    (row,) = _rows(path)
    assert row["tag"] == "v2" and before <= row["at"] <= dt.datetime.now(dt.timezone.utc).date()


def test_the_spec_lists_exactly_the_supported_table():
    from lakelog.spark_expressions.spec import render

    with open(SPEC, encoding="utf-8") as f:
        assert f.read() == render(), "specs/spark-expressions.md is stale: run python -m lakelog.spark_expressions.spec > specs/spark-expressions.md"

"""Spark writes into an existing table: Spark's safe (ANSI store-assignment) widenings append, cast to
the table's types; lossy ones are refused with the column and both types named. deltalake reads the result."""

import datetime as dt
import decimal

import deltalake
import pyarrow as pa
import pytest

import lakelog


# (table type, Spark expression for the appended value, value read back)
SAFE = [
    pytest.param(pa.decimal128(23, 1), "0.5", decimal.Decimal("0.5"), id="decimal-literal-into-decimal(23,1)"),
    pytest.param(pa.decimal128(12, 4), "cast(7.25 as decimal(5,2))", decimal.Decimal("7.2500"), id="decimal(5,2)-into-decimal(12,4)"),
    pytest.param(pa.int64(), "cast(7 as int)", 7, id="int-into-bigint"),
    pytest.param(pa.int64(), "cast(7 as smallint)", 7, id="smallint-into-bigint"),
    pytest.param(pa.int32(), "cast(7 as tinyint)", 7, id="tinyint-into-int"),
    pytest.param(pa.int16(), "cast(7 as tinyint)", 7, id="tinyint-into-smallint"),
    pytest.param(pa.float64(), "cast(1.5 as float)", 1.5, id="float-into-double"),
    pytest.param(pa.float64(), "cast(7 as int)", 7.0, id="int-into-double"),
    pytest.param(pa.decimal128(12, 2), "cast(7 as int)", decimal.Decimal("7.00"), id="int-into-decimal(12,2)"),
    pytest.param(pa.timestamp("us"), "date'2026-01-02'", dt.datetime(2026, 1, 2), id="date-into-timestamp_ntz"),
]

LOSSY = [  # (table type, Spark expression, the two types as the error names them)
    pytest.param(pa.int32(), "cast(7 as bigint)", "integer", "long", id="bigint-into-int"),
    pytest.param(pa.float32(), "cast(1.5 as double)", "float", "double", id="double-into-float"),
    pytest.param(pa.decimal128(5, 2), "cast(1.5 as decimal(10,2))", "decimal(5,2)", "decimal(10,2)", id="decimal-precision-lost"),
    pytest.param(pa.decimal128(10, 2), "cast(1.5 as decimal(10,3))", "decimal(10,2)", "decimal(10,3)", id="decimal-scale-lost"),
    pytest.param(pa.decimal128(10, 2), "cast(7 as bigint)", "decimal(10,2)", "long", id="bigint-into-small-decimal"),
    pytest.param(pa.int64(), "cast(1.5 as double)", "long", "double", id="double-into-bigint"),
    pytest.param(pa.float64(), "cast(7 as bigint)", "double", "long", id="bigint-into-double"),
    pytest.param(pa.decimal128(5, 2), "cast(7 as int)", "decimal(5,2)", "integer", id="int-into-narrow-decimal"),
    pytest.param(pa.date32(), "timestamp_ntz'2026-01-02 03:04:05'", "date", "timestamp_ntz", id="timestamp_ntz-into-date"),
]


def _table(path, t: pa.DataType) -> None:
    lakelog.write_table(path, pa.table({"id": pa.array([100], pa.int64()), "p": ["a"], "x": pa.array([None], t)}), partition_by=["p"])


@pytest.mark.parametrize("table_type, expr, value", SAFE)
def test_safe_widening_appends_and_deltalake_reads_it(spark, table_path, table_type, expr, value):
    _table(table_path, table_type)
    spark.range(5).selectExpr("id", "'z' as p", f"{expr} as x").write.format("lakelog").mode("append").save(table_path)
    t = lakelog.Table(table_path)
    assert t.version == 1 and t.schema.field("x").type == table_type  # the table keeps its type
    got = deltalake.DeltaTable(table_path).to_pyarrow_table()
    assert got.schema.field("x").type == table_type
    assert sorted(r["id"] for r in got.to_pylist() if r["x"] == value) == [0, 1, 2, 3, 4]
    assert sorted(r.id for r in spark.read.format("lakelog").load(table_path).filter("p = 'z'").collect()) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("table_type, expr, table_name, data_name", LOSSY)
def test_lossy_narrowing_is_refused(spark, table_path, table_type, expr, table_name, data_name):
    _table(table_path, table_type)
    with pytest.raises(Exception, match="SchemaMismatch") as e:
        spark.range(5).selectExpr("id", "'z' as p", f"{expr} as x").write.format("lakelog").mode("append").save(table_path)
    assert f"column 'x' has type {data_name} in the data but {table_name} in the table" in str(e.value)
    assert lakelog.Table(table_path).version == 0  # nothing committed

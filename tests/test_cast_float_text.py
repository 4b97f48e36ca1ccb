"""CAST of a double or float to a string in a table's expressions (generated columns, CHECK constraints):
Java's Double.toString / Float.toString as Spark on Java 17 (tests/test_spark_expressions_diff.py compares
it with Spark itself); deltalake reads the values written."""

from __future__ import annotations

import deltalake
import pyarrow as pa
import pytest

import lakelog
from lakelog.errors import ConstraintViolationError


def test_generated_columns_and_constraints_cast_doubles_and_floats_to_strings(tmp_path):
    path = str(tmp_path / "t")
    d = [1e7, 9999999.0, 0.001, 9.999999999999998e-4, -0.0, float("nan"), float("-inf"), 5e-324, 2e23, 123.0, None]
    f = [1e7, 9999999.0, 0.001, 1e-4, -0.0, float("nan"), float("inf"), 1.4e-45, 0.1, 3.4028234663852886e38, None]
    lakelog.write_table(path, pa.table({"d": pa.array(d, pa.float64()), "f": pa.array(f, pa.float32())}),
                        generated_columns={"ds": "CAST(d AS STRING)", "fs": "CAST(f AS STRING)", "c": "concat(d, '|', f)"})
    rows = lakelog.read_table(path).to_pylist()
    assert [r["ds"] for r in rows] == ["1.0E7", "9999999.0", "0.001", "9.999999999999998E-4", "-0.0", "NaN", "-Infinity",
                                       "4.9E-324", "1.9999999999999998E23", "123.0", None]
    assert [r["fs"] for r in rows] == ["1.0E7", "9999999.0", "0.001", "1.0E-4", "-0.0", "NaN", "Infinity", "1.4E-45", "0.1",
                                       "3.4028235E38", None]
    assert rows[2]["c"] == "0.001|0.001" and rows[-1]["c"] is None
    peer = pa.table(deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path)).execute("SELECT ds, fs FROM t").read_all())
    assert sorted(map(str, peer.column("ds").to_pylist())) == sorted(map(str, (r["ds"] for r in rows)))
    with pytest.raises(ConstraintViolationError, match="finite"):
        lakelog.Table(path).add_constraint({"finite": "CAST(d AS STRING) NOT IN ('NaN', 'Infinity', '-Infinity')"})
    lakelog.Table(path).delete("d IS NULL OR isnan(d) OR isinf(d)")
    lakelog.Table(path).add_constraint({"finite": "CAST(d AS STRING) NOT IN ('NaN', 'Infinity', '-Infinity')"})
    version = lakelog.Table(path).version
    with pytest.raises(ConstraintViolationError, match="finite"):
        lakelog.write_table(path, pa.table({"d": pa.array([float("inf")], pa.float64()), "f": pa.array([1.0], pa.float32())}))
    assert lakelog.Table(path).version == version

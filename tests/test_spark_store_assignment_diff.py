"""Differential test of Spark's store assignment on the Spark paths (spark_ext/assignments.py) against Spark
itself: for a grid of value types x column types x edge values (overflow, NaN and infinities into
integers, decimal rounding and precision loss, negative zero, NULL), the same INSERT runs through
``spark_ext.sql`` on a lakelog table and through Spark on a Parquet table (Spark's own
``TableOutputResolver``), and ``LakelogTable.update`` assigns the same values. Both must store the same
values, or fail with the same Spark error class (``INCOMPATIBLE_DATA_FOR_TABLE.*`` before any job,
``CAST_OVERFLOW_IN_TABLE_INSERT`` from the job); a failed lakelog statement commits nothing.

``make test`` runs every column type against a seeded sample of value types; ``LAKELOG_SPARK_DIFF_FULL=1``
runs the whole grid."""

from __future__ import annotations

import math
import os
import random
import re

import pyarrow as pa
import pytest

import lakelog
from lakelog.errors import SchemaMismatchError

from spark_ext import LakelogTable, sql

FULL = os.environ.get("LAKELOG_SPARK_DIFF_FULL") == "1"

TARGETS = ["tinyint", "int", "bigint", "float", "double", "decimal(5,2)", "decimal(38,10)", "string", "boolean", "date",
           "timestamp", "timestamp_ntz", "binary"]

# value type -> edge values (Spark SQL literals of that type)
VALUES: dict[str, list[str]] = {
    "tinyint": ["-128Y", "127Y", "0Y"],
    "int": ["0", "-1", "127", "128", "-129", "32768", "2147483647", "-2147483648"],
    "bigint": ["0L", "-1L", "2147483648L", "9223372036854775807L", "-9223372036854775808L", "99999L"],
    "double": ["2.5D", "-2.5D", "-0.0D", "0.005D", "999.995D", "1e300D", "-1e-300D", "CAST('NaN' AS DOUBLE)",
               "CAST('Infinity' AS DOUBLE)", "CAST('-Infinity' AS DOUBLE)", "127.9D", "-128.9D"],
    "float": ["1.5F", "-0.0F", "3.4e38F", "CAST('NaN' AS FLOAT)", "0.1F"],
    "decimal(2,1)": ["-1.0", "9.9", "0.5", "-0.5"],
    "decimal(20,4)": ["CAST(123.4567 AS DECIMAL(20,4))", "CAST(999.9950 AS DECIMAL(20,4))", "CAST(-0.0050 AS DECIMAL(20,4))",
                      "CAST(1234567890123456.7891 AS DECIMAL(20,4))", "CAST(0.0049 AS DECIMAL(20,4))"],
    "string": ["'5'", "'x'", "'2026-01-02'", "'true'", "''"],
    "boolean": ["true", "false"],
    "date": ["DATE'2026-01-02'", "DATE'1969-12-31'"],
    "timestamp": ["TIMESTAMP'2026-01-02 03:04:05.678901 UTC'", "TIMESTAMP'1969-12-31 23:59:59.999999 UTC'"],
    "timestamp_ntz": ["TIMESTAMP_NTZ'2026-01-02 03:04:05.678901'", "TIMESTAMP_NTZ'1969-12-31 23:59:59.5'"],
    "binary": ["X'4142'", "X''"],
}
SAMPLE = 6  # value types per run of make test (every column type each time)


def _pairs(seed: int) -> list[tuple[str, str]]:
    sources = list(VALUES) if FULL else random.Random(seed).sample(list(VALUES), SAMPLE)
    return [(s, t) for s in sources for t in TARGETS]


def _condition(e: BaseException) -> str:
    """The Spark error class an operation failed with (lakelog's refusals name Spark's in brackets)."""
    if isinstance(e, SchemaMismatchError):
        found = re.search(r"\[(INCOMPATIBLE_DATA_FOR_TABLE\.[A-Z_]+)\]", str(e))
        assert found, f"a refusal without Spark's error class: {e}"
        return found.group(1)
    get = getattr(e, "getCondition", None)
    assert get is not None and get(), f"not a Spark error: {type(e).__name__}: {e}"
    return get()


def _key(v):
    if isinstance(v, float):  # (NaN equals NaN, -0.0 differs from 0.0)
        return ("float", "nan" if math.isnan(v) else repr(v))
    if isinstance(v, (bytes, bytearray)):
        return ("bytes", bytes(v))
    return (type(v).__name__, v)


def _outcome(run, read) -> tuple:
    """("ok", stored values) or ("error", Spark's error class)."""
    try:
        run()
    except Exception as e:  # noqa: BLE001 - each side's error is compared
        return ("error", _condition(e))
    return ("ok", sorted(_key(r[0]) for r in read()))


def _name(target: str) -> str:
    return re.sub(r"\W", "_", target)


class Sides:
    """A Parquet table Spark inserts into and a lakelog table spark_ext.sql inserts into, per column type."""

    def __init__(self, spark, tmp_path):
        self.spark, self.tmp, self.made = spark, tmp_path, set()

    def paths(self, target: str) -> tuple[str, str]:
        name = _name(target)
        native, ours = str(self.tmp / f"native_{name}"), str(self.tmp / f"lakelog_{name}")
        if target not in self.made:
            self.spark.sql(f"CREATE TABLE store_diff_{name} (x {target}) USING parquet LOCATION '{native}'")
            empty = self.spark.createDataFrame([], f"x {target}")
            empty.write.format("lakelog").mode("overwrite").save(ours)
            self.made.add(target)
        return native, ours

    def insert(self, target: str, values: list[str], rows: str = "x") -> tuple[tuple, tuple]:
        native, ours = self.paths(target)
        name = _name(target)
        query = " UNION ALL ".join(f"SELECT {v} AS x" for v in values)
        before = lakelog.Table(ours).version
        spark_side = _outcome(lambda: self.spark.sql(f"INSERT OVERWRITE store_diff_{name} {query}").collect(),
                              lambda: self.spark.read.parquet(native).collect())
        ours_side = _outcome(lambda: sql(self.spark, f"INSERT OVERWRITE lakelog.`{ours}` {query}"),
                             lambda: self.spark.read.format("lakelog").load(ours).collect())
        if ours_side[0] == "error":
            assert lakelog.Table(ours).version == before, "a failed INSERT committed"
        return spark_side, ours_side

    def drop(self):
        for t in self.made:
            self.spark.sql(f"DROP TABLE IF EXISTS store_diff_{_name(t)}")


@pytest.fixture
def sides(spark, tmp_path):
    s = Sides(spark, tmp_path)
    yield s
    s.drop()


@pytest.mark.parametrize("seed", [20260102] if not FULL else [0])
def test_spark_sql_insert_stores_what_spark_stores(spark, sides, seed):
    """Each (value type, column type): all its edge values in one INSERT; where either side fails, each
    value on its own. Same stored values, or the same error class."""
    differ = []
    for source, target in _pairs(seed):
        values = VALUES[source]
        spark_side, ours_side = sides.insert(target, values)
        if spark_side == ours_side and spark_side[0] == "ok":
            continue
        for v in values if spark_side != ours_side or spark_side[0] == "error" else []:
            one = sides.insert(target, [v])
            if one[0] != one[1]:
                differ.append(f"{v} ({source}) into {target}: Spark {one[0]}, lakelog {one[1]}")
        if spark_side[0] != ours_side[0] or (spark_side[0] == "error" and spark_side != ours_side):
            differ.append(f"{source} into {target}, all values: Spark {spark_side}, lakelog {ours_side}")
    assert not differ, "\n".join(differ)


UPDATE_CASES = [  # (column type, value, Spark INSERT's outcome as the reference)
    ("bigint", "2.5"), ("bigint", "-2.5D"), ("int", "2147483648L"), ("tinyint", "CAST('NaN' AS DOUBLE)"), ("decimal(5,2)", "999.995D"),
    ("decimal(5,2)", "-0.005"), ("double", "-1.0"), ("float", "1e300D"), ("string", "DATE'2026-01-02'"), ("date", "TIMESTAMP'2026-01-02 23:00:00 UTC'"),
    ("bigint", "'5'"), ("boolean", "1"), ("timestamp_ntz", "DATE'2026-01-02'"), ("double", "CAST(NULL AS STRING)"),
]


@pytest.mark.parametrize("target, value", UPDATE_CASES)
def test_lakelog_table_update_stores_what_spark_inserts(spark, sides, tmp_path, target, value):
    """Spark resolves an update's value as an insert's (``TableOutputResolver.resolveUpdate``): the same rule."""
    native, _ = sides.paths(target)
    name = _name(target)
    want = _outcome(lambda: spark.sql(f"INSERT OVERWRITE store_diff_{name} SELECT {value} AS x").collect(),
                    lambda: spark.read.parquet(native).collect())
    path = str(tmp_path / "updated")
    lakelog.write_table(path, pa.table({"id": [1, 2]}))
    spark.sql(f"SELECT id, CAST(NULL AS {target}) AS x FROM range(1, 3)").write.format("lakelog").mode("overwrite").option(
        "overwriteSchema", "true").save(path)
    before = lakelog.Table(path).version
    got = _outcome(lambda: LakelogTable.forPath(spark, path).update("id = 1", {"x": value}),
                   lambda: spark.read.format("lakelog").load(path).where("id = 1").select("x").collect())
    assert got == want
    if got[0] == "error":
        assert lakelog.Table(path).version == before

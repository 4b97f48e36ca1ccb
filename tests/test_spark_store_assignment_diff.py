"""Differential test of Spark's store assignment on the Spark paths (spark_ext/schema/assignments.py) against Spark
itself: for a grid of value types x column types x edge values (overflow, NaN and infinities into
integers, decimal rounding and precision loss, negative zero, NULL), the same INSERT runs through
``spark_ext.sql`` on a lakelog table and through Spark on a Parquet table (Spark's own
``TableOutputResolver``), and ``LakelogTable.update`` assigns the same values. Both must store the same
values, or fail with the same Spark error class (``INCOMPATIBLE_DATA_FOR_TABLE.*`` before any job,
``CAST_OVERFLOW_IN_TABLE_INSERT`` from the job); a failed lakelog statement commits nothing.

``make test`` runs every column type against a seeded sample of value types; ``LAKELOG_SPARK_DIFF_FULL=1``
runs the whole grid."""

from __future__ import annotations

import datetime as dt
import math
import os
import random
import re

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

import lakelog
from lakelog.errors import SchemaMismatchError

from pyspark.sql.pandas.types import to_arrow_schema

from spark_ext import LakelogTable, register, sql

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
SAMPLE = 4  # value types per run of make test (every column type each time)


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
    if isinstance(v, (dict, list)):  # (structs, arrays, maps as lists of pairs)
        return (type(v).__name__, repr(v))
    if isinstance(v, dt.datetime) and v.tzinfo is not None:  # (an instant: as UTC, as Spark's Parquet files keep them)
        v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return (type(v).__name__, v)


def _values(table: pa.Table, column: str) -> list:
    col = table.column(column)
    if pa.types.is_timestamp(col.type):
        col = col.cast(pa.timestamp("us", col.type.tz))
    return col.to_pylist()


def _outcome(run, read) -> tuple:
    """("ok", stored values) or ("error", Spark's error class)."""
    try:
        run()
    except Exception as e:  # noqa: BLE001 - each side's error is compared
        return ("error", _condition(e))
    return ("ok", sorted(_key(v) for v in read()))


def _analysis(outcome: tuple) -> bool:
    """Whether an outcome is a refusal of the type (before any job)."""
    return outcome[0] == "error" and outcome[1].startswith("INCOMPATIBLE_DATA_FOR_TABLE")


def _name(target: str) -> str:
    return re.sub(r"\W", "_", target)


def _rows(values: list[str]) -> str:
    """A query of one column ``x`` holding ``values`` (one partition: one write task)."""
    return f"SELECT x FROM VALUES {', '.join(f'({v})' for v in values)} AS t(x)"


def _empty_table(spark, path: str, ddl: str) -> None:
    """A lakelog table of Spark columns ``ddl`` (made by lakelog, not a Spark job)."""
    lakelog.write_table(path, to_arrow_schema(spark.createDataFrame([], ddl).schema, timezone="UTC").empty_table())


class Sides:
    """A Parquet table Spark inserts into and a lakelog table spark_ext.sql inserts into, per column type."""

    def __init__(self, spark, tmp_path):
        register(spark)
        self.spark, self.tmp, self.made = spark, tmp_path, set()

    def paths(self, target: str) -> tuple[str, str]:
        native, ours = str(self.tmp / f"native_{_name(target)}"), str(self.tmp / f"lakelog_{_name(target)}")
        if target not in self.made:
            self.spark.sql(f"CREATE TABLE store_diff_{_name(target)} (x {target}) USING parquet LOCATION '{native}'")
            _empty_table(self.spark, ours, f"x {target}")
            self.made.add(target)
        return native, ours

    def spark_insert(self, target: str, values: list[str]) -> tuple:
        native, _ = self.paths(target)
        query = _rows(values)
        return _outcome(lambda: self.spark.sql(f"INSERT OVERWRITE store_diff_{_name(target)} {query}").collect(),
                        lambda: _values(ds.dataset(native, format="parquet").to_table(), "x"))

    def lakelog_insert(self, target: str, values: list[str]) -> tuple:
        _, ours = self.paths(target)
        query = _rows(values)
        before = lakelog.Table(ours).version
        out = _outcome(lambda: sql(self.spark, f"INSERT OVERWRITE lakelog.`{ours}` {query}"),
                       lambda: _values(lakelog.read_table(ours), "x"))
        if out[0] == "error":
            assert lakelog.Table(ours).version == before, "a failed INSERT committed"
        return out

    def drop(self):
        for t in self.made:
            self.spark.sql(f"DROP TABLE IF EXISTS store_diff_{_name(t)}")


@pytest.fixture
def sides(spark, tmp_path):
    s = Sides(spark, tmp_path)
    yield s
    s.drop()


@pytest.mark.parametrize("seed", [20260102] if not FULL else [0])
def test_spark_sql_insert_stores_what_spark_stores(spark, sides, tmp_path, seed):
    """Per value type: Spark inserts all its edge values into each column type (each value alone where the
    job fails). lakelog must refuse the types Spark refuses (same class), fail on the values Spark fails
    on (same class: the first of each column type, or all with LAKELOG_SPARK_DIFF_FULL), and store the
    others as Spark does: all of them in one INSERT into a table with a column per column type, each row
    giving one column its value."""
    differ = []
    sources = list(VALUES) if FULL else random.Random(seed).sample(list(VALUES), SAMPLE)
    for source in sources:
        values = VALUES[source]
        stored: dict[str, tuple[list[str], tuple]] = {}
        for target in TARGETS:
            theirs = sides.spark_insert(target, values)
            if _analysis(theirs):
                ours = sides.lakelog_insert(target, values)  # (refused before any job)
                if ours != theirs:
                    differ.append(f"{source} into {target}: Spark {theirs}, lakelog {ours}")
                continue
            if theirs[0] == "ok":
                stored[target] = (values, theirs)
                continue
            each = {v: sides.spark_insert(target, [v]) for v in values}
            ok = [v for v in values if each[v][0] == "ok"]
            if ok:
                stored[target] = (ok, sides.spark_insert(target, ok))
            failing = [v for v in values if each[v][0] == "error"]
            for v in failing if FULL else failing[:1]:
                ours = sides.lakelog_insert(target, [v])
                if ours != each[v]:
                    differ.append(f"{v} ({source}) into {target}: Spark {each[v]}, lakelog {ours}")
        if not stored:
            continue
        targets = list(stored)
        wide = str(tmp_path / f"wide_{_name(source)}")
        _empty_table(spark, wide, ", ".join(["cell int"] + [f"c{j} {t}" for j, t in enumerate(targets)]))
        rows, cells = [], {}
        for j, t in enumerate(targets):
            for v in stored[t][0]:
                cells.setdefault(j, []).append(len(rows))
                rows.append(f"({len(rows)}, " + ", ".join(v if k == j else f"CAST(NULL AS {source})" for k in range(len(targets))) + ")")
        names = ", ".join(["cell"] + [f"c{j}" for j in range(len(targets))])
        sql(spark, f"INSERT INTO lakelog.`{wide}` SELECT * FROM VALUES {', '.join(rows)} AS t({names})")
        got = lakelog.read_table(wide)
        cell = got.column("cell").to_pylist()
        for j, t in enumerate(targets):
            mine = sorted(_key(v) for c, v in zip(cell, _values(got, f"c{j}")) if c in cells[j])
            if ("ok", mine) != stored[t][1]:
                differ.append(f"{stored[t][0]} ({source}) into {t}: Spark stores {stored[t][1][1]}, lakelog {mine}")
    assert not differ, "\n".join(differ)


NESTED = {  # column type -> values: struct fields by position, elements converted one by one
    "struct<a:int,b:string>": ["named_struct('x', 1L, 'y', 'q')", "named_struct('b', 2, 'a', 'r')", "CAST(NULL AS STRUCT<p: INT, q: STRING>)",
                               "named_struct('a', 2.5D, 'b', DATE'2026-01-02')", "named_struct('a', 3000000000L, 'b', 's')",
                               "named_struct('a', 1)", "named_struct('a', 'x', 'b', 's')", "named_struct('a', 1, 'b', 's', 'c', 2)"],
    "array<tinyint>": ["array(1, 2)", "array(1L, NULL, 200L)", "array(2.5D, -0.0D)", "array('1')", "CAST(NULL AS ARRAY<INT>)"],
    "map<string,decimal(5,2)>": ["map('k', 2.555D)", "map('k', 1)", "map(1, 1.5)", "map('k', 12345.678D)", "map('k', '1')"],
    "struct<s:struct<x:bigint,y:double>,l:array<struct<z:int>>>": [
        "named_struct('s', named_struct('p', 1, 'q', 2), 'l', array(named_struct('w', 3.7D)))",
        "named_struct('s', named_struct('p', 1, 'q', 2), 'l', array(named_struct('w', 3e10D)))",
        "named_struct('s', CAST(NULL AS STRUCT<x: INT, y: INT>), 'l', CAST(NULL AS ARRAY<STRUCT<z: BIGINT>>))"],
}


def test_spark_sql_insert_converts_nested_values_as_spark(spark, sides):
    """Structs (fields by position), arrays and maps: each value alone, Spark's INSERT against lakelog's."""
    differ = []
    for target, values in NESTED.items():
        for v in values:
            theirs, ours = sides.spark_insert(target, [v]), sides.lakelog_insert(target, [v])
            if theirs != ours:
                differ.append(f"{v} into {target}: Spark {theirs}, lakelog {ours}")
    assert not differ, "\n".join(differ)


UPDATE_CASES = [  # (column type, value): what LakelogTable.update stores, against what Spark's INSERT stores
    ("bigint", "2.5"), ("bigint", "-2.5D"), ("int", "2147483648L"), ("tinyint", "CAST('NaN' AS DOUBLE)"), ("decimal(5,2)", "999.995D"),
    ("decimal(5,2)", "-0.005"), ("double", "-1.0"), ("float", "1e300D"), ("string", "DATE'2026-01-02'"),
    ("date", "TIMESTAMP'2026-01-02 23:00:00 UTC'"), ("bigint", "'5'"), ("boolean", "1"), ("timestamp_ntz", "DATE'2026-01-02'"),
    ("double", "CAST(NULL AS STRING)"), ("decimal(38,10)", "1e30D"), ("smallint", "CAST(40000.5 AS DECIMAL(6,1))"),
]


def test_lakelog_table_update_stores_what_spark_inserts(spark, sides, tmp_path):
    """Spark resolves an update's value as an insert's (``TableOutputResolver.resolveUpdate``): the same
    rule. The values Spark stores are set in one update of a table with a column per case; each other
    one is set alone and must fail as Spark does, committing nothing."""
    want = [sides.spark_insert(t, [v]) for t, v in UPDATE_CASES]
    path = str(tmp_path / "updated")
    _empty_table(spark, path, ", ".join(["id bigint"] + [f"c{i} {t}" for i, (t, _) in enumerate(UPDATE_CASES)]))
    lakelog.write_table(path, pa.table({"id": [1, 2]}), mode="append")
    table = LakelogTable.forPath(spark, path)
    stored = [i for i, w in enumerate(want) if w[0] == "ok"]
    table.update("id = 1", {f"c{i}": UPDATE_CASES[i][1] for i in stored})
    rows = {r["id"]: r for r in lakelog.read_table(path).to_pylist()}
    differ = [f"{UPDATE_CASES[i]}: Spark {want[i]}, lakelog {rows[1][f'c{i}']!r}" for i in stored
              if ("ok", [_key(_values(pa.table({"v": [rows[1][f'c{i}']]}), "v")[0])]) != want[i]]
    assert all(v is None for k, v in rows[2].items() if k != "id")  # (the condition holds for row 1 only)
    version = lakelog.Table(path).version
    for i, w in enumerate(want):
        if w[0] == "error":
            got = _outcome(lambda: table.update("id = 1", {f"c{i}": UPDATE_CASES[i][1]}), lambda: [])
            if got != w:
                differ.append(f"{UPDATE_CASES[i]}: Spark {w}, lakelog {got}")
    assert lakelog.Table(path).version == version  # (no failed update committed)
    assert not differ, "\n".join(differ)

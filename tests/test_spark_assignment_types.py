"""LakelogTable update and merge values meet their column by write_table's rule, as lakelog.Table's do.

Spark's cast stored a double's truncation in a bigint column (2.5 -> 2, -1.5 -> -1) and matched
struct fields by position (named_struct('b', 100, 'a', 5) stored a = 100), and a merge with schema
evolution could not add a nested field.
"""

import deltalake
import pyarrow as pa
import pytest

import lakelog
from lakelog.errors import SchemaMismatchError

from spark_ext import LakelogTable

AB = pa.struct([("a", pa.int64()), ("b", pa.int64())])


def _rows(path: str) -> list[dict]:
    return sorted(lakelog.read_table(path).to_pylist(), key=lambda r: r["id"])


def test_spark_update_values_fit_their_column(spark, table_path):
    lakelog.write_table(table_path, pa.table({"id": [1, 2], "s": pa.array([{"a": 1, "b": 10}, {"a": 2, "b": 20}], AB),
                                              "x": [10, 20], "h": pa.array([1, 2], pa.int16())}))
    t = LakelogTable.forPath(spark, table_path)
    with pytest.raises(SchemaMismatchError, match=r"type decimal\(24,2\), which column 'x' of type long cannot store.*CAST"):
        t.update("id = 1", {"x": "x * 1.25"})
    with pytest.raises(SchemaMismatchError, match=r"\['s.c'\].*no schema evolution"):
        t.update("id = 1", {"s": "named_struct('a', 5, 'b', 6, 'c', 7)"})
    with pytest.raises(SchemaMismatchError, match="literal 2.5"):
        t.update("id = 1", {"x": "2.5"})
    assert lakelog.Table(table_path).version == 0
    t.update("id = 1", {"s": "named_struct('b', 100, 'a', 5)", "h": "7", "x": "cast(floor(x * 1.25) as bigint)"})
    assert _rows(table_path) == [{"id": 1, "s": {"a": 5, "b": 100}, "x": 12, "h": 7}, {"id": 2, "s": {"a": 2, "b": 20}, "x": 20, "h": 2}]


def test_spark_merge_values_fit_their_column(spark, table_path):
    lakelog.write_table(table_path, pa.table({
        "id": [1, 2], "x": [10, 20], "s": pa.array([{"a": 1, "b": 10}, {"a": 2, "b": 20}], AB),
        "l": pa.array([[{"c": 1}], None], pa.list_(pa.struct([("c", pa.int64())]))),
    }))
    t = LakelogTable.forPath(spark, table_path)
    floats = spark.createDataFrame([(1, 2.5), (3, -1.5)], "id long, x double")
    for clauses in (lambda m: m.whenMatchedUpdate(set={"x": "s.x"}), lambda m: m.whenNotMatchedInsert(values={"id": "s.id", "x": "s.x"})):
        with pytest.raises(SchemaMismatchError, match="type double, which column 'x' of type long cannot store"):
            clauses(t.alias("t").merge(floats.alias("s"), "t.id = s.id")).execute()
    # Struct fields by name: b, a in the source is a, b in the table.
    swapped = spark.createDataFrame([(1, (9, 8))], "id long, s struct<b:long, a:long>")
    t.alias("t").merge(swapped.alias("s"), "t.id = s.id").whenMatchedUpdate(set={"s": "s.s"}).execute()
    assert _rows(table_path)[0]["s"] == {"a": 8, "b": 9}
    # A nested field the table lacks: refused, or added with schema evolution (depth 2, and in a list of structs).
    deeper = spark.createDataFrame([(1, 7, (1, 2, (3, "deep")), [(4, True)]), (3, 9, (5, 6, (7, "new")), [])],
                                   "id long, x long, s struct<a:long, b:long, n:struct<y:long, z:string>>, l array<struct<c:long, d:boolean>>")
    with pytest.raises(SchemaMismatchError, match=r"\['s.n'\].*withSchemaEvolution"):
        t.alias("t").merge(deeper.alias("s"), "t.id = s.id").whenMatchedUpdateAll().execute()
    (t.alias("t").merge(deeper.alias("s"), "t.id = s.id").withSchemaEvolution()
     .whenMatchedUpdateAll().whenNotMatchedInsert(values={"id": "s.id", "l": "s.l"}).execute())
    expected = [
        {"id": 1, "x": 7, "s": {"a": 1, "b": 2, "n": {"y": 3, "z": "deep"}}, "l": [{"c": 4, "d": True}]},
        {"id": 2, "x": 20, "s": {"a": 2, "b": 20, "n": None}, "l": None},
        {"id": 3, "x": None, "s": None, "l": []},
    ]
    assert _rows(table_path) == expected
    assert sorted(deltalake.DeltaTable(table_path).to_pyarrow_table().to_pylist(), key=lambda r: r["id"]) == expected


def test_spark_sql_insert_values_fit_their_column(spark, table_path):
    """spark_ext.sql's INSERT cast with Spark's cast: 2.5 went into a bigint as 2, and struct fields by position."""
    from spark_ext import sql

    lakelog.write_table(table_path, pa.table({"id": [1], "x": [10], "s": pa.array([{"a": 1, "b": 10}], AB)}))
    ref = f"lakelog.`{table_path}`"
    with pytest.raises(SchemaMismatchError, match=r"INSERT INTO: the literal x \(VALUES\) .* column 'x'.*CAST\(\.\.\. AS bigint\)"):
        sql(spark, f"INSERT INTO {ref} VALUES (2, 2.5, named_struct('a', 2, 'b', 20))")
    with pytest.raises(SchemaMismatchError, match="type double, which column 'x' of type long"):
        sql(spark, f"INSERT INTO {ref} SELECT 2 AS id, CAST(id AS double) / 2 AS x, named_struct('a', 2, 'b', 20) AS s FROM range(3)")
    assert lakelog.Table(table_path).version == 0
    sql(spark, f"INSERT INTO {ref} VALUES (2, 3.0, named_struct('b', 20, 'a', 2)), (3, NULL, NULL)")  # exact literals; fields by name
    assert _rows(table_path) == [{"id": 1, "x": 10, "s": {"a": 1, "b": 10}}, {"id": 2, "x": 3, "s": {"a": 2, "b": 20}},
                                 {"id": 3, "x": None, "s": None}]

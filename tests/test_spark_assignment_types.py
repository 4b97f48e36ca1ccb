"""LakelogTable update and merge values and spark_ext.sql's INSERT, UPDATE and MERGE meet their column by
Spark's store assignment (spark_ext/schema/assignments.py), as Delta on Spark stores them: numbers convert to
numbers (a DECIMAL(2,1) literal into a DOUBLE column, 2.5 into a BIGINT is 2), out of range is Spark's
CAST_OVERFLOW_IN_TABLE_INSERT with nothing committed, a string into a number or a variant is refused
with the expression to write, and struct fields go by name in updates and merges (by position in an
INSERT). tests/test_spark_store_assignment_diff.py compares the rule with Spark's own INSERT."""

import deltalake
import pandas as pd
import pyarrow as pa
import pytest

import lakelog
from lakelog.errors import SchemaMismatchError, UnsupportedFeatureError

from spark_ext import LakelogTable, sql

AB = pa.struct([("a", pa.int64()), ("b", pa.int64())])


def _rows(path: str) -> list[dict]:
    return sorted(lakelog.read_table(path).to_pylist(), key=lambda r: r["id"])


def _condition(e: BaseException) -> str | None:
    """The Spark error class of ``e`` (a pyspark exception)."""
    get = getattr(e, "getCondition", None) or getattr(e, "getErrorClass", None)
    return get() if get is not None else None


def test_issue_merge_of_a_decimal_literal_into_a_double_column(spark, table_path):
    """The regression: -1.0 is DECIMAL(2,1) in Spark SQL, which the strict rule refused for a DOUBLE column."""
    lakelog.write_table(table_path, pa.table({"id": [5, 6], "x": [1.0, 2.0]}))
    ref = f"lakelog.`{table_path}`"
    sql(spark, f"MERGE INTO {ref} t USING (SELECT 5L AS id, -1.0 AS x) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET * "
               "WHEN NOT MATCHED THEN INSERT *")
    sql(spark, f"MERGE INTO {ref} t USING (SELECT 7L AS id, 0.25 AS x) s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *")
    sql(spark, f"UPDATE {ref} SET x = 2.5 WHERE id = 6")
    sql(spark, f"INSERT INTO {ref} VALUES (8, 1.5), (9, 7)")
    assert _rows(table_path) == [{"id": 5, "x": -1.0}, {"id": 6, "x": 2.5}, {"id": 7, "x": 0.25}, {"id": 8, "x": 1.5}, {"id": 9, "x": 7.0}]


def test_spark_update_values_meet_their_column_by_spark_store_assignment(spark, table_path):
    lakelog.write_table(table_path, pa.table({"id": [1, 2], "s": pa.array([{"a": 1, "b": 10}, {"a": 2, "b": 20}], AB),
                                              "x": [10, 20], "h": pa.array([1, 2], pa.int16())}))
    t = LakelogTable.forPath(spark, table_path)
    with pytest.raises(SchemaMismatchError, match=r"EXTRA_STRUCT_FIELDS.*\['c'\]"):
        t.update("id = 1", {"s": "named_struct('a', 5, 'b', 6, 'c', 7)"})
    with pytest.raises(SchemaMismatchError, match=r"CANNOT_FIND_DATA.*lacks field 'b'"):
        t.update("id = 1", {"s": "named_struct('a', 5)"})
    with pytest.raises(SchemaMismatchError, match=r"CANNOT_SAFELY_CAST.*'x'.*string to bigint.*CAST\(\('7'\) AS bigint\)"):
        t.update("id = 1", {"x": "'7'"})
    with pytest.raises(Exception) as overflow:  # (Spark's error, from the job; nothing is committed)
        t.update("id = 2", {"h": "70000"})
    assert _condition(overflow.value) == "CAST_OVERFLOW_IN_TABLE_INSERT" and "`h`" in str(overflow.value)
    assert lakelog.Table(table_path).version == 0
    # Spark's ANSI cast: a decimal truncates into a bigint; struct fields by name.
    t.update("id = 1", {"s": "named_struct('b', 100, 'a', 5)", "h": "7", "x": "x * 1.25"})
    t.update("id = 2", {"x": "-2.5", "h": "cast(-1.9 as double)", "s": "named_struct('A', 2, 'B', 21)"})  # (names as the column's)
    assert _rows(table_path) == [{"id": 1, "s": {"a": 5, "b": 100}, "x": 12, "h": 7}, {"id": 2, "s": {"a": 2, "b": 21}, "x": -2, "h": -1}]
    # Spark's rule whatever spark.sql.ansi.enabled says: out of range still fails rather than store NULL.
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        with pytest.raises(Exception) as overflow:
            t.update("id = 1", {"x": "cast('NaN' as double)"})
        assert _condition(overflow.value) == "CAST_OVERFLOW_IN_TABLE_INSERT"
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")
    assert lakelog.Table(table_path).version == 2


def test_spark_store_assignment_policy_strict_and_legacy(spark, table_path):
    lakelog.write_table(table_path, pa.table({"id": [1], "x": [10], "d": [1.0]}))
    t = LakelogTable.forPath(spark, table_path)
    spark.conf.set("spark.sql.storeAssignmentPolicy", "STRICT")
    try:
        with pytest.raises(SchemaMismatchError, match=r"storeAssignmentPolicy=STRICT.*decimal\(2,1\) to bigint"):
            t.update({"x": "2.5"})
        t.update({"x": "cast(3 as int)", "d": "cast(4 as int)"})  # (widenings)
        spark.conf.set("spark.sql.storeAssignmentPolicy", "LEGACY")
        with pytest.raises(UnsupportedFeatureError, match="LEGACY"):
            t.update({"x": "1"})
    finally:
        spark.conf.unset("spark.sql.storeAssignmentPolicy")
    assert _rows(table_path) == [{"id": 1, "x": 3, "d": 4.0}]


def test_spark_merge_values_meet_their_column(spark, table_path):
    lakelog.write_table(table_path, pa.table({
        "id": [1, 2], "x": [10, 20], "s": pa.array([{"a": 1, "b": 10}, {"a": 2, "b": 20}], AB),
        "l": pa.array([[{"c": 1}], None], pa.list_(pa.struct([("c", pa.int64())]))),
    }))
    t = LakelogTable.forPath(spark, table_path)
    floats = spark.createDataFrame([(1, 2.5), (3, -1.5)], "id long, x double")
    t.alias("t").merge(floats.alias("s"), "t.id = s.id").whenMatchedUpdate(set={"x": "s.x"}).whenNotMatchedInsert(
        values={"id": "s.id", "x": "s.x"}).execute()
    assert [(r["id"], r["x"]) for r in _rows(table_path)] == [(1, 2), (2, 20), (3, -1)]  # (truncated, as Spark casts)
    huge = spark.createDataFrame([(2, 1e30)], "id long, x double")
    with pytest.raises(Exception) as overflow:
        t.alias("t").merge(huge.alias("s"), "t.id = s.id").whenMatchedUpdate(set={"x": "s.x"}).execute()
    assert _condition(overflow.value) == "CAST_OVERFLOW_IN_TABLE_INSERT"
    texts = spark.createDataFrame([(2, "5")], "id long, x string")
    with pytest.raises(SchemaMismatchError, match=r"CANNOT_SAFELY_CAST.*'s.x'.*string to bigint"):
        t.alias("t").merge(texts.alias("s"), "t.id = s.id").whenMatchedUpdate(set={"x": "s.x"}).execute()
    assert lakelog.Table(table_path).version == 1
    # Struct fields by name: b, a in the source is a, b in the table.
    swapped = spark.createDataFrame([(1, (9, 8))], "id long, s struct<b:long, a:long>")
    t.alias("t").merge(swapped.alias("s"), "t.id = s.id").whenMatchedUpdate(set={"s": "s.s"}).execute()
    assert _rows(table_path)[0]["s"] == {"a": 8, "b": 9}
    # A nested field the table lacks: refused, or added with schema evolution (depth 2, and in a list of structs).
    deeper = spark.createDataFrame([(1, 7, (1, 2, (3, "deep")), [(4, True)]), (3, 9, (5, 6, (7, "new")), [])],
                                   "id long, x long, s struct<a:long, b:long, n:struct<y:long, z:string>>, l array<struct<c:long, d:boolean>>")
    with pytest.raises(SchemaMismatchError, match=r"EXTRA_STRUCT_FIELDS.*\['n'\].*withSchemaEvolution"):
        t.alias("t").merge(deeper.alias("s"), "t.id = s.id").whenMatchedUpdateAll().execute()
    t.alias("t").merge(deeper.alias("s"), "t.id = s.id").withSchemaEvolution().whenMatchedUpdateAll().execute()
    expected = [
        {"id": 1, "x": 7, "s": {"a": 1, "b": 2, "n": {"y": 3, "z": "deep"}}, "l": [{"c": 4, "d": True}]},
        {"id": 2, "x": 20, "s": {"a": 2, "b": 20, "n": None}, "l": None},
        {"id": 3, "x": 9, "s": {"a": 5, "b": 6, "n": {"y": 7, "z": "new"}}, "l": []},  # (inserted by the first merge)
    ]
    assert _rows(table_path) == expected
    assert sorted(deltalake.DeltaTable(table_path).to_pyarrow_table().to_pylist(), key=lambda r: r["id"]) == expected


def test_spark_sql_insert_meets_columns_by_position_as_spark_inserts(spark, table_path):
    lakelog.write_table(table_path, pa.table({"id": [1], "x": [10], "s": pa.array([{"a": 1, "b": 10}], AB)}))
    ref = f"lakelog.`{table_path}`"
    # (spark_ext.sql is spark.sql on the tests' session: Spark's own analysis refuses these)
    with pytest.raises(Exception) as missing:
        sql(spark, f"INSERT INTO {ref} VALUES (2, 3, named_struct('a', 2))")
    assert _condition(missing.value) == "INCOMPATIBLE_DATA_FOR_TABLE.STRUCT_MISSING_FIELDS"
    with pytest.raises(Exception) as text:
        sql(spark, f"INSERT INTO {ref} VALUES (2, '3', named_struct('a', 2, 'b', 20))")
    assert _condition(text.value) == "INCOMPATIBLE_DATA_FOR_TABLE.CANNOT_SAFELY_CAST" and "`x`" in str(text.value)
    with pytest.raises(Exception) as overflow:
        sql(spark, f"INSERT INTO {ref} SELECT 2 AS id, 1e300 AS x, named_struct('a', 2, 'b', 20) AS s")
    assert _condition(overflow.value) == "CAST_OVERFLOW_IN_TABLE_INSERT"
    assert lakelog.Table(table_path).version == 0
    # By position: named_struct('b', 20, 'a', 2) is a = 20, b = 2, as Spark stores it; BY NAME goes by name.
    sql(spark, f"INSERT INTO {ref} VALUES (2, 2.5, named_struct('b', 20, 'a', 2)), (3, NULL, NULL)")
    sql(spark, f"INSERT INTO {ref} BY NAME SELECT named_struct('b', 40, 'a', 4) AS s, 4 AS id, 99.99 AS x")
    assert _rows(table_path) == [{"id": 1, "x": 10, "s": {"a": 1, "b": 10}}, {"id": 2, "x": 2, "s": {"a": 20, "b": 2}},
                                 {"id": 3, "x": None, "s": None}, {"id": 4, "x": 99, "s": {"a": 4, "b": 40}}]


def test_spark_sql_static_partition_value_is_text_cast_to_the_column(spark, table_path):
    """Spark's parser keeps a PARTITION value as text and casts it to the column's type."""
    lakelog.write_table(table_path, pa.table({"id": [1], "p": pa.array([1], pa.int32())}), partition_by="p")
    ref = f"lakelog.`{table_path}`"
    sql(spark, f"INSERT INTO {ref} PARTITION (p = '7') VALUES (2)")
    sql(spark, f"INSERT INTO {ref} PARTITION (p = -3) VALUES (3)")
    with pytest.raises(Exception) as invalid:
        sql(spark, f"INSERT INTO {ref} PARTITION (p = 'x') VALUES (4)")
    assert _condition(invalid.value) == "CAST_INVALID_INPUT"
    assert [(r["id"], r["p"]) for r in _rows(table_path)] == [(1, 1), (2, 7), (3, -3)]


# ---------------------------------------------------------------- VARIANT through SQL


def _variant_table(path: str) -> None:
    lakelog.write_table(path, lakelog.with_variants(pd.DataFrame({"id": [1], "v": [{"a": 1}]}), ["v"]))


def test_spark_sql_writes_parse_json_values_with_spark_bytes(spark, table_path):
    """sqlglot wrote parse_json(x) back as the bare x, so a JSON string reached the variant column."""
    _variant_table(table_path)
    ref = f"lakelog.`{table_path}`"
    sql(spark, f"INSERT INTO {ref} VALUES (2, parse_json('[2]'))")
    sql(spark, f"INSERT INTO {ref} SELECT 3, parse_json('{{\"b\": 1.5, \"a\": [true, null]}}')")
    sql(spark, f"UPDATE {ref} SET v = parse_json('[1]') WHERE id = 1")
    source = f"(SELECT 4L AS id, '{{\"k\": \"v\"}}' AS j UNION ALL SELECT 2L, '-0.0')"
    sql(spark, f"MERGE INTO {ref} t USING {source} s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = parse_json(s.j) "
               "WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, parse_json(s.j))")
    sql(spark, f"INSERT INTO {ref} SELECT 5, to_variant_object(named_struct('x', 1, 'y', array(1, 2)))")
    sql(spark, f"INSERT INTO {ref} SELECT 6, try_parse_json('not json')")
    sql(spark, f"INSERT INTO {ref} SELECT 7, CAST(7.5 AS VARIANT)")
    expected = {1: "parse_json('[1]')", 2: "parse_json('-0.0')", 3: "parse_json('{\"b\": 1.5, \"a\": [true, null]}')",
                4: "parse_json('{\"k\": \"v\"}')", 5: "to_variant_object(named_struct('x', 1, 'y', array(1, 2)))",
                6: "try_parse_json('not json')", 7: "CAST(7.5 AS VARIANT)"}
    # Spark's own bytes: the same expressions evaluated by Spark.
    rows = spark.sql(" UNION ALL ".join(f"SELECT {i}L AS id, {e} AS v" for i, e in expected.items())).collect()
    want = {r.id: None if r.v is None else {"value": bytes(r.v.value), "metadata": bytes(r.v.metadata)} for r in rows}
    got = {r["id"]: r["v"] for r in lakelog.read_table(table_path).to_pylist()}
    assert got == want and got[6] is None and got[1] is not None


def test_spark_string_into_a_variant_column_advises_parse_json(spark, table_path):
    _variant_table(table_path)
    ref = f"lakelog.`{table_path}`"
    statements = [
        f"INSERT INTO {ref} VALUES (2, '[2]')",
        f"UPDATE {ref} SET v = '[1]'",
        f"MERGE INTO {ref} t USING (SELECT 1L AS id, '[4]' AS j) s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.j",
        f"MERGE INTO {ref} t USING (SELECT 9L AS id, '[4]' AS j) s ON t.id = s.id WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, s.j)",
    ]
    # (spark_ext.sql is spark.sql on the tests' session: Spark's analysis refuses the INSERT, lakelog's the rest)
    with pytest.raises(Exception) as e:
        sql(spark, statements[0])
    assert _condition(e.value) == "INCOMPATIBLE_DATA_FOR_TABLE.CANNOT_SAFELY_CAST" and "VARIANT" in str(e.value)
    for stmt in statements[1:]:
        with pytest.raises(SchemaMismatchError, match=r"of type variant cannot store the string.*write parse_json\("):
            sql(spark, stmt)
    t = LakelogTable.forPath(spark, table_path)
    with pytest.raises(SchemaMismatchError, match=r"write parse_json\("):
        t.alias("t").merge(spark.createDataFrame([(1, "[4]")], "id long, v string").alias("s"), "t.id = s.id").whenMatchedUpdateAll().execute()
    with pytest.raises(SchemaMismatchError, match=r"write to_variant_object\("):
        t.update({"v": "named_struct('a', 1)"})
    assert lakelog.Table(table_path).version == 0


def test_spark_sql_keeps_the_functions_sqlglot_rewrites(spark, table_path):
    """Statements spark_ext.sql rewrites are written back by sqlglot, whose Spark generator turned
    parse_json(x) into x, collate(x, 'UTF8_LCASE') into x COLLATE 'UTF8_LCASE' (not Spark SQL) and
    -128Y into -CAST(128 AS TINYINT)."""
    lakelog.write_table(table_path, pa.table({"id": [1, 2], "s": ["Ab", "cd"]}))
    ref = f"lakelog.`{table_path}`"
    got = sql(spark, f"SELECT id, collate(s, 'UTF8_LCASE') = 'AB' AS same, to_json(parse_json('[1, 2.5]')) AS j FROM {ref} ORDER BY id")
    (json,) = spark.sql("SELECT to_json(parse_json('[1, 2.5]'))").first()
    assert [tuple(r) for r in got.collect()] == [(1, True, json), (2, False, json)]
    sql(spark, f"INSERT INTO {ref} SELECT 3, collate('Ef', 'UTF8_LCASE')")
    assert _rows(table_path)[2] == {"id": 3, "s": "Ef"}
    # -9223372036854775808L is a literal; sqlglot wrote it as -CAST(9223372036854775808 AS BIGINT), which overflows.
    sql(spark, f"INSERT INTO {ref} VALUES (-9223372036854775808L, 'min'), (-128Y, 'byte')")
    assert [r["id"] for r in _rows(table_path)][:2] == [-2**63, -128]

"""spark_ext.sql: Delta's SQL on lakelog tables (MERGE INTO, UPDATE, DELETE, INSERT, time travel,
table_changes, DESCRIBE HISTORY/DETAIL, RESTORE, OPTIMIZE, VACUUM), checked against the same statements
run by DuckDB on a model table, and against the Python API."""

from __future__ import annotations

import datetime
import json

import deltalake
import duckdb
import pyarrow as pa
import pytest

import lakelog
from spark_ext import sql
from tests.spark_session import PLAIN

# spark_ext.sql's own machinery, which runs statements on sessions built without spark_ext.configure (on one
# built with it, spark_ext.sql is spark.sql: tests/test_spark_catalog*.py): test_spark_sql_plain.py runs
# this module on such a session, in a process of its own.
pytestmark = pytest.mark.skipif(not PLAIN, reason="runs in test_spark_sql_plain.py's plain session")
from spark_ext.sql import SqlError

ROWS = pa.table({"id": pa.array([1, 2, 3, 4, 5, 6], pa.int64()), "x": pa.array([10, 20, None, 40, 50, 60], pa.int64()),
                 "s": ["a", "b", "c", "d", "e", "f"]})
SOURCE = pa.table({"id": pa.array([2, 3, 6, 7, 8], pa.int64()), "x": pa.array([200, 300, 600, 700, None], pa.int64()),
                   "s": ["B", "C", "F", "G", "H"]})


def _rows(table: pa.Table) -> list[tuple]:
    return sorted(tuple(r.values()) for r in table.to_pylist())


def _model():
    con = duckdb.connect()
    con.register("rows_in", ROWS)
    con.register("src_in", SOURCE)
    con.sql("CREATE TABLE t AS SELECT * FROM rows_in")
    con.sql("CREATE TABLE src AS SELECT * FROM src_in")
    return con


@pytest.fixture
def table(spark, tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, ROWS)
    # (not from pandas, which makes x a double: a double into the long column is refused, as write_table refuses it)
    spark.createDataFrame(SOURCE.to_pylist(), "id long, x long, s string").createOrReplaceTempView("src")
    return path


def test_row_level_statements_match_a_duckdb_model(spark, table):
    ref = f"lakelog.`{table}`"
    con = _model()
    statements = [
        ("UPDATE {t} SET x = x + 1, s = upper(s) WHERE x > 15", "UPDATE t SET x = x + 1, s = upper(s) WHERE x > 15"),
        ("DELETE FROM {t} WHERE id = 5 OR x IS NULL", "DELETE FROM t WHERE id = 5 OR x IS NULL"),
        ("MERGE INTO {t} AS t USING src AS src ON t.id = src.id "
         "WHEN MATCHED AND src.x > 250 THEN UPDATE SET x = src.x, s = src.s "
         "WHEN MATCHED THEN DELETE "
         "WHEN NOT MATCHED AND src.x IS NOT NULL THEN INSERT (id, x, s) VALUES (src.id, src.x, src.s) "
         "WHEN NOT MATCHED BY SOURCE AND t.id = 1 THEN UPDATE SET x = -1 "
         "WHEN NOT MATCHED BY SOURCE THEN DELETE", None),
    ]
    for ours, theirs in statements:
        result = sql(spark, ours.format(t=ref)).collect()
        con.sql(theirs if theirs is not None else ours.format(t="t"))
        assert result and result[0]["num_affected_rows"] >= 1
        assert _rows(lakelog.read_table(table)) == sorted(con.sql("SELECT * FROM t").fetchall()), ours
    assert [h["operation"] for h in lakelog.Table(table).history()][:3] == ["MERGE", "DELETE", "UPDATE"]


def test_merge_insert_star_and_update_star(spark, table):
    sql(spark, f"MERGE INTO lakelog.`{table}` AS t USING (SELECT * FROM src WHERE id > 2) AS u ON t.id = u.id "
               "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    con = _model()
    con.sql("MERGE INTO t USING (SELECT * FROM src WHERE id > 2) AS u ON t.id = u.id "
            "WHEN MATCHED THEN UPDATE SET x = u.x, s = u.s WHEN NOT MATCHED THEN INSERT VALUES (u.id, u.x, u.s)")
    assert _rows(lakelog.read_table(table)) == sorted(con.sql("SELECT * FROM t").fetchall())


def test_statements_on_a_generated_always_identity_column_are_refused(spark, tmp_path):
    from lakelog.errors import IdentityColumnError

    path = str(tmp_path / "i")
    lakelog.write_table(path, pa.table({"s": ["a", "b"]}), identity_columns=["id"])
    spark.createDataFrame(SOURCE.to_pandas()).createOrReplaceTempView("src")
    ref = f"lakelog.`{path}`"
    for statement in (f"UPDATE {ref} SET id = id + 1",
                      f"MERGE INTO {ref} AS t USING src ON t.s = src.s WHEN MATCHED THEN UPDATE SET id = src.id",
                      f"MERGE INTO {ref} AS t USING src ON t.s = src.s WHEN NOT MATCHED THEN INSERT (s, id) VALUES (src.s, src.id)",
                      f"MERGE INTO {ref} AS t USING (SELECT s, id FROM src) AS u ON t.s = u.s WHEN NOT MATCHED THEN INSERT *"):
        with pytest.raises(IdentityColumnError):
            sql(spark, statement)
    with pytest.raises(Exception, match="DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED"):
        sql(spark, f"INSERT INTO {ref} VALUES ('c', 7)")
    assert lakelog.Table(path).version == 0
    sql(spark, f"INSERT INTO {ref} (s) VALUES ('c')")
    sql(spark, f"MERGE INTO {ref} AS t USING src ON t.s = src.s WHEN NOT MATCHED THEN INSERT (s) VALUES (src.s)")
    ids = sorted(r["id"] for r in lakelog.read_table(path).to_pylist())
    assert ids[:2] == [1, 2] and len(ids) == len(set(ids)) == 3 + SOURCE.num_rows  # (Spark tasks' values: beyond 2, not dense)


def test_catalog_table_created_using_lakelog_takes_insert_select_and_time_travel(spark, tmp_path, table):  # (table: the src view)
    path = str(tmp_path / "c")
    lakelog.write_table(path, ROWS)
    sql(spark, "DROP TABLE IF EXISTS sales")
    sql(spark, f"CREATE TABLE sales USING lakelog LOCATION '{path}'")
    try:
        assert sql(spark, "SELECT count(*) AS n FROM sales").collect()[0]["n"] == 6
        sql(spark, "INSERT INTO sales VALUES (9, 90, 'i'), (10, NULL, 'j')")
        sql(spark, "INSERT INTO sales (id, x, s) SELECT id + 100, x, s FROM src WHERE id = 2")
        now = lakelog.read_table(path)
        assert _rows(now) == sorted(_rows(ROWS) + [(9, 90, "i"), (10, None, "j"), (102, 200, "B")])
        old = sql(spark, "SELECT * FROM sales VERSION AS OF 0 WHERE id > 2").toPandas()
        assert sorted(old["id"]) == [3, 4, 5, 6]
        joined = sql(spark, f"SELECT a.id FROM sales a JOIN lakelog.`{path}` VERSION AS OF 1 b ON a.id = b.id").count()
        assert joined == 8
        sql(spark, "UPDATE sales SET s = 'z' WHERE id = 9")
        assert lakelog.read_table(path, filters=[("id", "=", 9)]).column("s").to_pylist() == ["z"]
        sql(spark, "INSERT OVERWRITE sales SELECT * FROM src")
        assert _rows(lakelog.read_table(path)) == _rows(SOURCE)
    finally:
        sql(spark, "DROP TABLE IF EXISTS sales")


def test_utility_statements(spark, table):
    ref = f"lakelog.`{table}`"
    sql(spark, f"DELETE FROM {ref} WHERE id = 1")
    sql(spark, f"UPDATE {ref} SET x = 0 WHERE id = 2")
    history = sql(spark, f"DESCRIBE HISTORY {ref}").collect()
    assert [r["version"] for r in history] == [2, 1, 0] and history[0]["operation"] == "UPDATE"
    detail = sql(spark, f"DESCRIBE DETAIL {ref}").collect()[0]
    assert detail["version"] == 2 and detail["format"] == "delta"
    ts = sql(spark, f"SELECT * FROM {ref} TIMESTAMP AS OF '{history[1]['timestamp'].isoformat()}'")
    assert _rows(pa.Table.from_pandas(ts.toPandas(), preserve_index=False)) == _rows(lakelog.read_table(table, version=1))
    sql(spark, f"RESTORE TABLE {ref} TO VERSION AS OF 0")
    assert _rows(lakelog.read_table(table)) == _rows(ROWS)
    assert sql(spark, f"OPTIMIZE {ref}").collect()[0]["path"]
    sql(spark, f"OPTIMIZE {ref} ZORDER BY (x, id)")
    assert _rows(lakelog.read_table(table)) == _rows(ROWS)
    assert sql(spark, f"VACUUM {ref} RETAIN 168 HOURS DRY RUN").count() == 0


def test_optimize_where_compacts_only_the_partitions_it_names(spark, tmp_path):
    path = str(tmp_path / "p")
    for i in range(3):
        lakelog.write_table(path, pa.table({"id": [i, i + 10], "day": ["a", "b"]}), partition_by=["day"])
    sql(spark, f"OPTIMIZE lakelog.`{path}` WHERE day = 'a'")
    files = lakelog.Table(path).files()
    assert sum(1 for f in files if f.startswith("day=a/")) == 1 and sum(1 for f in files if f.startswith("day=b/")) == 3
    sql(spark, f"OPTIMIZE lakelog.`{path}`\n  WHERE day IN ('a', 'b') ZORDER BY (id)")
    assert len(lakelog.Table(path).files()) == 2
    assert sorted(lakelog.read_table(path).column("id").to_pylist()) == [0, 1, 2, 10, 11, 12]
    with pytest.raises(SqlError, match="literals"):
        sql(spark, f"OPTIMIZE lakelog.`{path}` WHERE day = upper(day)")


def test_table_changes(spark, tmp_path):
    path = str(tmp_path / "f")
    lakelog.write_table(path, ROWS, configuration={"delta.enableChangeDataFeed": "true"})
    lakelog.Table(path).update({"x": "0"}, "id = 2")
    got = sql(spark, f"SELECT id, x, _change_type FROM table_changes('lakelog.`{path}`', 1) ORDER BY _change_type").collect()
    assert [(r["id"], r["x"], r["_change_type"]) for r in got] == [(2, 0, "update_postimage"), (2, 20, "update_preimage")]
    expected = lakelog.Table(path).changes(0, 1).num_rows
    assert sql(spark, f"SELECT * FROM table_changes('lakelog.`{path}`', 0, 1)").count() == expected


def test_other_statements_pass_through_and_errors_say_where(spark, table):
    assert sql(spark, "SELECT 1 + 1 AS two").collect()[0]["two"] == 2
    with pytest.raises(SqlError, match="line 1, column"):
        sql(spark, f"RESTORE TABLE lakelog.`{table}` TO VERSION 1")
    with pytest.raises(SqlError, match="not a lakelog table"):
        sql(spark, "DELETE FROM src WHERE id = 1")
    with pytest.raises(SqlError, match="one statement"):
        sql(spark, "SELECT 1; SELECT 2")
    with pytest.raises(SqlError, match="line 1"):
        sql(spark, "MERGE INTO lakelog.`x` USING")


# ---------------------------------------------------------------- clauses that were ignored or misread

def _fields(path: str) -> dict[str, dict]:
    return {f["name"]: f for f in json.loads(lakelog.Table(path).metadata.schema_string)["fields"]}


def test_create_table_partitioned_by_and_tblproperties_are_the_tables(spark, tmp_path, table):
    path, ctas = str(tmp_path / "p"), str(tmp_path / "c")
    sql(spark, "DROP TABLE IF EXISTS parts")
    try:
        sql(spark, f"CREATE TABLE parts (id BIGINT, p STRING) USING lakelog PARTITIONED BY (p) LOCATION '{path}' "
                   "TBLPROPERTIES ('delta.appendOnly' = 'true', team = 'ops')")
        t = lakelog.Table(path)
        assert t.partition_columns == ["p"] and t.metadata.configuration == {"delta.appendOnly": "true", "team": "ops"}
        dt = deltalake.DeltaTable(path)
        assert dt.metadata().partition_columns == ["p"] and dt.metadata().configuration["team"] == "ops"
    finally:
        sql(spark, "DROP TABLE IF EXISTS parts")
    sql(spark, f"CREATE TABLE lakelog.`{ctas}` USING lakelog PARTITIONED BY (p) TBLPROPERTIES (delta.enableChangeDataFeed = true) "
               "AS SELECT id, x, s AS p FROM src")
    t = lakelog.Table(ctas)
    assert t.partition_columns == ["p"] and t.metadata.configuration == {"delta.enableChangeDataFeed": "true"} and t.version == 0
    assert _rows(lakelog.read_table(ctas)) == _rows(SOURCE.rename_columns(["id", "x", "p"]))


def test_insert_replace_where_replaces_the_rows_it_selects(spark, table):
    sql(spark, f"INSERT INTO lakelog.`{table}` REPLACE WHERE id >= 5 SELECT id, x, upper(s) AS s FROM src WHERE id >= 6")
    con = _model()
    con.sql("DELETE FROM t WHERE id >= 5")
    con.sql("INSERT INTO t SELECT id, x, upper(s) FROM src WHERE id >= 6")
    assert _rows(lakelog.read_table(table)) == sorted(con.sql("SELECT * FROM t").fetchall())
    assert lakelog.Table(table).history(1)[0]["operationParameters"] == {"mode": "Overwrite", "predicate": "id >= 5"}
    with pytest.raises(Exception, match="REPLACE WHERE|predicate"):  # every row written must satisfy the predicate
        sql(spark, f"INSERT INTO lakelog.`{table}` REPLACE WHERE id >= 5 SELECT 1 AS id, 1 AS x, 'z' AS s")
    assert _rows(lakelog.read_table(table)) == sorted(con.sql("SELECT * FROM t").fetchall())


def test_insert_by_name_matches_columns_by_name(spark, tmp_path):
    path = str(tmp_path / "n")
    lakelog.write_table(path, pa.table({"a": pa.array([1], pa.int64()), "b": pa.array([2], pa.int64())}))
    sql(spark, f"INSERT INTO lakelog.`{path}` BY NAME SELECT 20 AS b, 10 AS a")
    assert sorted(lakelog.read_table(path).to_pylist(), key=lambda r: r["a"]) == [{"a": 1, "b": 2}, {"a": 10, "b": 20}]
    with pytest.raises(SqlError, match="no column 'c'"):
        sql(spark, f"INSERT INTO lakelog.`{path}` BY NAME SELECT 1 AS c")


def test_update_sets_the_struct_field_it_names(spark, tmp_path):
    path = str(tmp_path / "s")
    st = pa.struct([("a", pa.int64()), ("b", pa.string())])
    lakelog.write_table(path, pa.table({"id": [1, 2, 3], "a": [7, 8, 9], "s": pa.array([{"a": 1, "b": "x"}, {"a": 2, "b": "y"}, None], st)}))
    sql(spark, f"UPDATE lakelog.`{path}` SET s.a = 42 WHERE id <> 2")
    assert sorted(lakelog.read_table(path).to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "a": 7, "s": {"a": 42, "b": "x"}},
        {"id": 2, "a": 8, "s": {"a": 2, "b": "y"}},
        {"id": 3, "a": 9, "s": {"a": 42, "b": None}},  # (as Delta: a NULL struct gets the assigned field, the others NULL)
    ]


def test_alter_table_set_tblproperties_changes_the_tables_properties(spark, tmp_path):
    path = str(tmp_path / "a")
    lakelog.write_table(path, ROWS)
    sql(spark, "DROP TABLE IF EXISTS props")
    sql(spark, f"CREATE TABLE props USING lakelog LOCATION '{path}'")
    try:
        sql(spark, "ALTER TABLE props SET TBLPROPERTIES ('team' = 'ops', 'delta.logRetentionDuration' = 'interval 60 days')")
        assert lakelog.Table(path).metadata.configuration == {"team": "ops", "delta.logRetentionDuration": "interval 60 days"}
        assert lakelog.Table(path).history(1)[0]["operation"] == "SET TBLPROPERTIES"
        assert {r["key"]: r["value"] for r in sql(spark, "SHOW TBLPROPERTIES props").collect()}["team"] == "ops"
    finally:
        sql(spark, "DROP TABLE IF EXISTS props")


def test_delete_and_update_with_a_target_alias(spark, table):
    ref = f"lakelog.`{table}`"
    sql(spark, f"DELETE FROM {ref} AS e WHERE e.id = 1")
    sql(spark, f"UPDATE {ref} e SET e.x = e.x * 2, s = concat(e.s, '!') WHERE e.id IN (2, 3)")
    con = _model()
    con.sql("DELETE FROM t WHERE id = 1")
    con.sql("UPDATE t SET x = x * 2, s = concat(s, '!') WHERE id IN (2, 3)")
    assert _rows(lakelog.read_table(table)) == sorted(con.sql("SELECT * FROM t").fetchall())


def test_insert_with_a_static_partition(spark, tmp_path):
    path = str(tmp_path / "sp")
    lakelog.write_table(path, pa.table({"id": pa.array([1], pa.int64()), "p": ["a"]}), partition_by="p")
    sql(spark, f"INSERT INTO lakelog.`{path}` PARTITION (p='b') VALUES (2), (3)")
    assert sorted(lakelog.read_table(path).to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "p": "a"}, {"id": 2, "p": "b"}, {"id": 3, "p": "b"}]
    assert {f.split("/")[0] for f in lakelog.Table(path).files()} == {"p=a", "p=b"}


def test_create_table_column_default_generated_and_identity(spark, tmp_path):
    path = str(tmp_path / "g")
    sql(spark, "DROP TABLE IF EXISTS gen")
    try:
        sql(spark, "CREATE TABLE gen (id BIGINT GENERATED ALWAYS AS IDENTITY (START WITH 10 INCREMENT BY 5), ts TIMESTAMP, "
                   "day DATE GENERATED ALWAYS AS (CAST(ts AS DATE)), status STRING NOT NULL DEFAULT 'new') "
                   f"USING lakelog LOCATION '{path}'")
        fields = _fields(path)
        assert list(fields) == ["id", "ts", "day", "status"]
        assert fields["day"]["metadata"]["delta.generationExpression"] == "CAST(ts AS DATE)"
        assert fields["status"]["metadata"]["CURRENT_DEFAULT"] == "'new'" and fields["status"]["nullable"] is False
        assert {k: fields["id"]["metadata"][k] for k in ("delta.identity.start", "delta.identity.step", "delta.identity.allowExplicitInsert")} == \
            {"delta.identity.start": 10, "delta.identity.step": 5, "delta.identity.allowExplicitInsert": False}
        lakelog.write_table(path, pa.table({"ts": pa.array([datetime.datetime(2024, 5, 6, 7, 8)], pa.timestamp("us", "UTC"))}))
        assert lakelog.read_table(path).to_pylist() == [
            {"id": 10, "ts": datetime.datetime(2024, 5, 6, 7, 8, tzinfo=datetime.timezone.utc), "day": datetime.date(2024, 5, 6), "status": "new"}]
    finally:
        sql(spark, "DROP TABLE IF EXISTS gen")

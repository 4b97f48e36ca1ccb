"""What lakelog tables in Spark's catalog do not support is refused by name, with an error class
(``getCondition()``), and changes nothing: no table in the catalog, no files, no commit, and never a run
as plain Parquet. And ``spark_ext.configure``'s own refusals: another ``spark_catalog`` and Spark Connect."""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakelog
from lakelog.errors import InvalidArgumentError, LakelogError, UnsupportedFeatureError

from tests.catalog_peers import condition, exists, location, refused, unique, version_of

# The Spark tests share one xdist worker (one JVM at a time on the machine).
pytestmark = pytest.mark.xdist_group("spark")

# {t} is an existing lakelog table (at {tpath}), {n} a new name, {pq} a directory of plain Parquet files,
# {pqt} a Parquet table in the catalog, {elsewhere} a path with nothing there.
REFUSED = {
    "convert_to_delta": "CONVERT TO DELTA parquet.`{pq}`",
    "generate_manifest": "GENERATE symlink_format_manifest FOR TABLE {t}",
    "reorg": "REORG TABLE {t} APPLY (PURGE)",
    "table_comment": "CREATE TABLE {n} (a INT) USING lakelog COMMENT 'about'",
    "column_comment": "CREATE TABLE {n} (a INT COMMENT 'about') USING lakelog",
    "options": "CREATE TABLE {n} (a INT) USING lakelog OPTIONS ('foo' = 'bar')",
    "bucketing": "CREATE TABLE {n} (a INT, b INT) USING lakelog CLUSTERED BY (a) INTO 4 BUCKETS",
    "bucket_transform": "CREATE TABLE {n} (a INT, b INT) USING lakelog PARTITIONED BY (bucket(4, a))",
    "ctas_comment": "CREATE TABLE {n} USING lakelog COMMENT 'about' AS SELECT 1 AS a",
    "alter_column_comment": "ALTER TABLE {t} ALTER COLUMN a COMMENT 'about'",
    "add_column_first": "ALTER TABLE {t} ADD COLUMNS (z INT FIRST)",
    "add_column_after": "ALTER TABLE {t} ADD COLUMNS (z INT AFTER a)",
    "add_column_comment": "ALTER TABLE {t} ADD COLUMNS (z INT COMMENT 'about')",
    "alter_column_first": "ALTER TABLE {t} ALTER COLUMN b FIRST",
    "alter_column_after": "ALTER TABLE {t} ALTER COLUMN a AFTER b",
    "comment_on_table": "COMMENT ON TABLE {t} IS 'about'",
    "comment_property": "ALTER TABLE {t} SET TBLPROPERTIES ('comment' = 'about')",
    "set_not_null": "ALTER TABLE {t} ALTER COLUMN a SET NOT NULL",
    "drop_by_path": "DROP TABLE lakelog.`{tpath}`",
    "read_parquet_dir_as_lakelog": "SELECT * FROM lakelog.`{pq}`",
    "insert_parquet_dir_as_lakelog": "INSERT INTO lakelog.`{pq}` VALUES (1, 2)",
    "replace_at_another_location": "CREATE OR REPLACE TABLE {t} (a INT, b INT) USING lakelog LOCATION '{elsewhere}'",
    "replace_a_parquet_table": "CREATE OR REPLACE TABLE {pqt} (a INT, b INT) USING lakelog",
    "table_changes_arguments": "SELECT * FROM table_changes('{t}')",
    "table_changes_of_parquet": "SELECT * FROM table_changes('{pqt}', 0)",
    "history_of_parquet": "DESCRIBE HISTORY {pqt}",
}

WITHOUT_CLASS: dict[str, str] = {}


@pytest.fixture
def setting(spark, tmp_path):
    table = unique("refuse")
    spark.sql(f"CREATE TABLE {table} (a INT, b INT) USING lakelog")
    spark.sql(f"INSERT INTO {table} VALUES (1, 2)")
    pq_dir = tmp_path / "plain"
    pq_dir.mkdir()
    pq.write_table(pa.table({"a": pa.array([1], pa.int32()), "b": pa.array([2], pa.int32())}), str(pq_dir / "part-0.parquet"))
    pqt = unique("parquet")
    spark.sql(f"CREATE TABLE {pqt} (a INT, b INT) USING parquet")
    return {"t": table, "n": unique("new"), "pq": str(pq_dir), "tpath": location(spark, table), "pqt": pqt,
            "elsewhere": str(tmp_path / "elsewhere")}


@pytest.mark.parametrize("case", [pytest.param(k, marks=pytest.mark.xfail(strict=True, reason=WITHOUT_CLASS[k]))
                                  if k in WITHOUT_CLASS else k for k in REFUSED])
def test_refused_by_name_with_an_error_class_and_nothing_changes(spark, setting, case):
    statement = REFUSED[case].format(**setting)
    table_path = setting["tpath"]
    before = version_of(table_path)
    pq_files = sorted(os.listdir(setting["pq"]))
    cond, message = refused(spark, statement)
    assert not spark.catalog.tableExists(setting["n"])
    assert not os.path.exists(os.path.join(os.path.dirname(table_path), setting["n"]))
    assert version_of(table_path) == before
    assert sorted(os.listdir(setting["pq"])) == pq_files and not exists(setting["pq"])
    assert not os.path.exists(setting["elsewhere"])
    assert spark.table(setting["pqt"]).columns == ["a", "b"]
    assert cond is not None, message


def test_unsupported_statements_name_what_is_refused(spark, setting):
    checks = {
        "CONVERT TO DELTA": REFUSED["convert_to_delta"], "GENERATE": REFUSED["generate_manifest"], "REORG": REFUSED["reorg"],
        "COMMENT": REFUSED["table_comment"], "FIRST": REFUSED["add_column_first"], "bucket": REFUSED["bucketing"],
    }
    for word, statement in checks.items():
        cond, message = refused(spark, statement.format(**setting))
        assert word.lower() in message.lower(), (statement, message)
        assert "LAKELOG_" in message, message


def test_a_plain_parquet_directory_is_not_read_as_a_table(spark, setting):
    cond, message = refused(spark, REFUSED["read_parquet_dir_as_lakelog"].format(**setting))
    assert cond == "LAKELOG_TABLE_NOT_FOUND", message


def test_truncate_is_refused_or_empties_the_table_in_a_commit(spark, setting):
    """TRUNCATE TABLE (Delta runs it as a delete of every row): never a change outside the log."""
    table, path = setting["t"], setting["tpath"]
    before = version_of(path)
    try:
        spark.sql(f"TRUNCATE TABLE {table}").collect()
    except Exception as e:  # noqa: BLE001
        assert e.getCondition() is not None
        assert version_of(path) == before and len(lakelog.Table(path).to_pyarrow()) == 1
    else:
        assert version_of(path) == before + 1 and len(lakelog.Table(path).to_pyarrow()) == 0


def test_dataframe_writers_refuse_bucketing_and_transforms_by_class(spark):
    from pyspark.sql.functions import partitioning

    df = spark.createDataFrame([(1, dt.date(2024, 1, 1))], "id long, d date")
    bucketed, yearly = unique("bucketed"), unique("yearly")
    for name, write in ((bucketed, lambda: df.write.format("lakelog").bucketBy(4, "id").saveAsTable(bucketed)),
                        (yearly, lambda: df.writeTo(yearly).using("lakelog").partitionedBy(partitioning.years("d")).create())):
        cond, message = condition(write)
        assert not spark.catalog.tableExists(name)
        assert cond is not None, message


# ---------------------------------------------------------------- spark_ext.configure

def test_configure_keeps_the_users_extensions_and_jars():
    from pyspark.sql import SparkSession

    import spark_ext

    builder = SparkSession.builder.config("spark.sql.extensions", "com.example.UserExtension") \
        .config("spark.jars", "/opt/user/one.jar,/opt/user/two.jar")
    assert spark_ext.configure(builder) is builder
    extensions = builder._options["spark.sql.extensions"].split(",")
    jars = builder._options["spark.jars"].split(",")
    assert extensions[0] == "com.example.UserExtension" and len(extensions) == 2 and "lakelog" in extensions[1].lower()
    assert jars[:2] == ["/opt/user/one.jar", "/opt/user/two.jar"] and len(jars) == 3
    # Configuring twice adds nothing twice.
    spark_ext.configure(builder)
    assert builder._options["spark.sql.extensions"].split(",") == extensions
    assert builder._options["spark.jars"].split(",") == jars


def test_configure_refuses_another_session_catalog_and_spark_connect():
    from pyspark.sql import SparkSession

    import spark_ext

    builder = SparkSession.builder.config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
    with pytest.raises(InvalidArgumentError, match="spark_catalog"):
        spark_ext.configure(builder)
    with pytest.raises(UnsupportedFeatureError, match="Spark Connect"):
        spark_ext.configure(SparkSession.builder.remote("sc://localhost:15002"))
    with pytest.raises(UnsupportedFeatureError, match="Spark Connect"):
        spark_ext.configure(SparkSession.builder.config("spark.api.mode", "connect"))
    with pytest.raises(LakelogError):
        spark_ext.configure(object())


def test_the_sessions_configuration(spark):
    extensions = spark.conf.get("spark.sql.extensions")
    assert "org.apache.spark.sql.lakelog.LakelogSparkSessionExtension" in extensions.split(",")
    assert spark.conf.get("spark.sql.catalog.spark_catalog") == "org.apache.spark.sql.lakelog.LakelogCatalog"
    # format("lakelog") by path keeps working beside the catalog.
    cond, _ = condition(lambda: spark.read.format("lakelog").load("/nonexistent/lakelog/table").collect())
    assert cond is not None

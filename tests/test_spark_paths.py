"""Relative table paths on the Spark paths name what Spark's own file sources name: the path against the
driver JVM's working directory, resolved on the driver (tests/test_spark_cluster.py runs them where
executors have working directories of their own)."""

import os

import deltalake
import pytest

import lakelog
import spark_ext
from spark_ext import LakelogTable
from spark_ext.cluster.paths import absolute_path, driver_cwd


@pytest.mark.parametrize(
    "path, expected",
    [
        ("events", "/w d/events"),
        ("./a/../events/", "/w d/events"),
        ("/abs/events", "/abs/events"),
        ("file:events", "file:///w%20d/events"),  # Hadoop reads a relative file URL against the working directory
        ("file:my%20t", "file:///w%20d/my%20t"),  # lakelog decodes a file URL's path once, as any other
        ("local:events", "file:///w%20d/events"),
        ("file:/abs/t", "file:/abs/t"),
        ("file:///abs/t", "file:///abs/t"),
        ("s3://bucket/events", "s3://bucket/events"),
        ("memory://events", "memory://events"),
        ("simplecache::s3://bucket/t", "simplecache::s3://bucket/t"),
    ],
)
def test_absolute_path(path, expected):
    assert absolute_path(path, "/w d") == expected


def test_home_expands_as_in_lakelogs_api(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert absolute_path("~/events", "/elsewhere") == str(tmp_path / "events")


def test_relative_paths_resolve_against_the_driver_jvms_directory(spark, tmp_path, monkeypatch):
    """The Python process changed directory after the JVM started: every entry point still names the
    place Spark's own sources name (the JVM's working directory), not the Python process's."""
    spark_ext.register(spark)
    jvm_cwd = driver_cwd(spark)
    assert jvm_cwd == spark._jvm.java.lang.System.getProperty("user.dir")
    target = tmp_path / "t"
    rel = os.path.relpath(target, jvm_cwd)  # relative to the JVM's directory
    python_cwd = tmp_path / "py"
    python_cwd.mkdir()
    monkeypatch.chdir(python_cwd)  # where the relative path names nothing

    spark.range(4).selectExpr("id", "cast(id % 2 as string) as p").write.format("lakelog").partitionBy("p").save(rel)
    assert lakelog.Table(str(target)).partition_columns == ["p"]
    assert spark.read.format("lakelog").load(rel).count() == 4
    assert spark.read.format("lakelog").load("file:" + rel).count() == 4
    assert spark.read.format("text").load(os.path.join(rel, "_delta_log")).count() > 0  # Spark's own source agrees

    assert spark_ext.read(spark, rel).count() == 4
    t = LakelogTable.forPath(spark, rel)
    assert t.path == str(target) and LakelogTable.isLakelogTable(spark, rel)
    t.delete("id = 0")
    assert spark_ext.sql(spark, f"SELECT count(*) FROM lakelog.`{rel}`").collect()[0][0] == 3
    spark_ext.sql(spark, f"INSERT INTO lakelog.`{rel}` VALUES (9, '1')")
    spark_ext.sql(spark, f"CREATE TABLE rel_located USING lakelog LOCATION '{target}'")
    try:
        assert sorted(r.id for r in spark_ext.sql(spark, "SELECT id FROM rel_located").collect()) == [1, 2, 3, 9]
        assert spark_ext.sql(spark, f"DESCRIBE HISTORY '{rel}'").count() == 3
    finally:
        spark_ext.sql(spark, "DROP TABLE rel_located")
    # A relative LOCATION in CREATE TABLE follows Spark's rule for every table: under the database's location.
    spark.sql("CREATE TABLE rel_new (id BIGINT) USING lakelog LOCATION 'rel_new_dir'")
    spark.sql("CREATE TABLE rel_pq (id BIGINT) USING parquet LOCATION 'rel_pq_dir'")
    try:
        spark.sql("INSERT INTO rel_new VALUES (7)")
        new_location = spark.sql("DESCRIBE DETAIL rel_new").first()["location"]
        pq_location = spark.sql("DESCRIBE TABLE EXTENDED rel_pq").where("col_name = 'Location'").first()["data_type"]
        assert os.path.dirname(new_location.removeprefix("file:")) == os.path.dirname(pq_location.removeprefix("file:"))
        assert lakelog.Table(new_location).to_pyarrow()["id"].to_pylist() == [7]
        assert [r.id for r in spark.table("rel_new").collect()] == [7]
    finally:
        spark.sql("DROP TABLE rel_new")
        spark.sql("DROP TABLE rel_pq")
    assert sorted(deltalake.DeltaTable(str(target)).to_pyarrow_table()["id"].to_pylist()) == [1, 2, 3, 9]
    assert os.listdir(python_cwd) == []

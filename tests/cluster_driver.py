"""A driver on the standalone cluster of tests/spark_cluster.py, run by test_spark_cluster.py as a user
runs one (the venv's python, not activated) from a fresh directory: every table is named by a path
relative to that directory, as ``.save("events")``.

Usage: python cluster_driver.py MASTER_URL STEP [STEP ...]. Runs the steps in order, each on the
tables the earlier ones left, and prints one JSON line: {step: what it saw, or {"error": ...}}.
"""

import json
import os
import sys
import time
import traceback

from pyspark.sql import SparkSession

import spark_ext
from spark_ext import LakelogTable
from tests.spark_cluster import EXECUTOR_MEMORY

ROWS = 20  # ids 0..19 in two partitions p = '0' / '1'


def rows(df) -> list:
    return sorted(list(r) for r in df.collect())


def write(spark):
    df = spark.range(0, ROWS, 1, 2).selectExpr("id", "cast(id % 2 as string) as p", "id * 10 as v")  # a task per executor core
    df.write.format("lakelog").partitionBy("p").save("events")
    return rows(spark.read.format("lakelog").load("events").select("id", "p", "v"))


def merge(spark):
    src = spark.range(15, 25).selectExpr("id", "cast(id % 2 as string) as p", "id * 100 as v")
    t = LakelogTable.forPath(spark, "events")
    t.alias("t").merge(src.alias("s"), "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    return rows(t.toDF().select("id", "p", "v"))


def sql_insert(spark):
    spark_ext.sql(spark, "INSERT INTO lakelog.`events` VALUES (100, '0', 1), (101, '1', 2)")
    return rows(spark_ext.sql(spark, "SELECT id, p, v FROM lakelog.`events` WHERE id >= 100"))


def reads(spark):
    def lake():  # (a DataFrameReader keeps the options set on it)
        return spark.read.format("lakelog")

    return {
        "filtered": rows(lake().load("events").filter("p = '1' and id < 10").select("id")),
        "pushed": rows(lake().option("filterPushdown", "true").load("events").filter("p = '1' and id < 10").select("id")),
        "v0": lake().option("versionAsOf", 0).load("events").count(),
        "file_url": lake().load("file:events").count(),  # Hadoop's relative file URL
        "native": rows(spark_ext.read(spark, "events").filter("p = '1' and id < 10").select("id")),
        "native_v0": spark_ext.read(spark, "events", version=0).count(),
    }


def _drain(query):
    query.awaitTermination(600)
    if query.exception() is not None:
        raise query.exception()


def stream(spark):
    def copy():
        _drain(spark.readStream.format("lakelog").option("maxFilesPerTrigger", 3).load("events")
               .writeStream.format("lakelog").option("checkpointLocation", "checkpoints/copy").trigger(availableNow=True).start("copy"))

    copy()
    spark.range(200, 204).selectExpr("id", "cast(id % 2 as string) as p", "id as v").write.format("lakelog").mode("append").save("events")
    copy()  # a restart: only the new version's rows
    return rows(spark.read.format("lakelog").load("copy").select("id"))


def change_feed(spark):
    df = spark.range(6).selectExpr("id", "cast(id as string) as s")
    df.write.format("lakelog").option("tableProperties", json.dumps({"delta.enableChangeDataFeed": "true"})).save("feed")
    t = LakelogTable.forPath(spark, "feed")
    t.update("id = 1", {"s": "'one'"})
    t.delete("id = 2")
    feed = spark.read.format("lakelog").option("readChangeFeed", "true").option("startingVersion", 0).load("feed")
    _drain(spark.readStream.format("lakelog").option("readChangeFeed", "true").option("startingVersion", 0).load("feed")
           .writeStream.format("lakelog").option("checkpointLocation", "checkpoints/feed").trigger(availableNow=True).start("feed_copy"))
    cols = ("id", "s", "_change_type", "_commit_version")
    return {"batch": rows(feed.select(*cols)), "stream": rows(spark.read.format("lakelog").load("feed_copy").select(*cols))}


def sql(spark):
    q = lambda text: spark_ext.sql(spark, text)  # noqa: E731
    q("CREATE TABLE named (id BIGINT, s STRING) USING lakelog LOCATION 'named'")
    q("INSERT INTO named VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    q("UPDATE named SET s = 'z' WHERE id = 2")
    q("DELETE FROM lakelog.`named` WHERE id = 1")
    q("MERGE INTO lakelog.`named` t USING (SELECT 4L AS id, 'd' AS s) s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *")
    q("CREATE TABLE lakelog.`ctas` AS SELECT id, s FROM named WHERE id > 2")
    return {
        "named": rows(q("SELECT id, s FROM named")),
        "ctas": rows(q("SELECT id, s FROM lakelog.`ctas`")),
        "history": q("DESCRIBE HISTORY 'named'").count(),
        "time_travel": rows(q("SELECT id FROM lakelog.`events` VERSION AS OF 0 WHERE id < 3")),
    }


def chdir(spark):
    """After the driver's Python changes directory, relative paths still name what Spark's file
    sources name: the JVM's working directory."""
    os.makedirs("elsewhere")
    os.chdir("elsewhere")
    try:
        out = {
            "table": LakelogTable.forPath(spark, "events").toDF().count(),
            "sql": q_count(spark, "SELECT count(*) FROM lakelog.`events`"),
            "native": spark_ext.read(spark, "events").count(),
            "load": spark.read.format("lakelog").load("events").count(),
            "spark_text": spark.read.format("text").load("events/_delta_log").count() > 0,  # Spark's own file source
        }
        spark.range(3).write.format("lakelog").save("after_chdir")
        LakelogTable.forPath(spark, "after_chdir").delete("id = 0")
        return out
    finally:
        os.chdir("..")


def q_count(spark, text):
    return spark_ext.sql(spark, text).collect()[0][0]


STEPS = {"write": write, "merge": merge, "sql_insert": sql_insert, "reads": reads, "stream": stream, "change_feed": change_feed,
         "sql": sql, "chdir": chdir}


def main(master: str, steps: list[str]) -> None:
    started = time.perf_counter()
    conf = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1", "spark.executor.memory": EXECUTOR_MEMORY,
            "spark.executor.cores": "1", "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2", "spark.sql.session.timeZone": "UTC"}
    spark = SparkSession.builder.master(master).appName("lakelog-cluster-test").config(map=conf).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark_ext.register(spark)
    out: dict = {"cwd": os.getcwd(), "seconds": {"start": round(time.perf_counter() - started, 1)}}
    for step in steps:
        t = time.perf_counter()
        try:
            out[step] = STEPS[step](spark)
        except Exception as e:  # noqa: BLE001 - reported per step; the test says which failed
            out[step] = {"error": f"{type(e).__name__}: {str(e)[:1500]}", "trace": traceback.format_exc()[-3000:]}
        out["seconds"][step] = round(time.perf_counter() - t, 1)
    spark.stop()
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])

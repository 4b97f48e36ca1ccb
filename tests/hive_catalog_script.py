"""A user's Spark script on the Hive metastore (embedded Derby in the working directory), run as users run
it: ``python hive_catalog_script.py first|second EXTERNAL_PATH USER_JAR``. The first run creates lakelog
tables (managed and external, in two databases) and writes them; the second, a new process, finds them by
name and reads and changes them. Prints one JSON line of what it saw."""

import json
import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import spark_ext


def session(user_jar: str) -> SparkSession:
    builder = (SparkSession.builder.master("local[2]").appName("hive-user-script")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.warehouse.dir", os.path.abspath("warehouse"))
               # The user's own extension and jar, set before lakelog's: both must stay.
               .config("spark.sql.extensions", "userext.MarkerExtension")
               .config("spark.jars", user_jar)
               .enableHiveSupport())
    spark = spark_ext.configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def rows(df) -> list:
    return sorted([list(r) for r in df.collect()], key=repr)


def first(spark, external: str) -> dict:
    out = {
        "extensions": spark.conf.get("spark.sql.extensions"),
        "jars": spark.sparkContext.getConf().get("spark.jars"),
        "catalog": spark.conf.get("spark.sql.catalogImplementation"),
        "marker": spark.sql("SELECT user_marker()").first()[0],
        "worker_python": spark.range(1).select(F.udf(lambda _: sys.executable, "string")("id")).first()[0],
    }
    spark.sql("CREATE TABLE events (id BIGINT, p STRING, x DOUBLE) USING lakelog PARTITIONED BY (p) "
              "TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')")
    spark.sql("INSERT INTO events VALUES (1, 'a', 1.0), (2, 'b', 2.0), (3, 'a', 3.0)")
    spark.sql(f"CREATE TABLE ext (id BIGINT, s STRING) USING lakelog LOCATION '{external}'")
    spark.sql("INSERT INTO ext VALUES (1, 'one')")
    spark.sql("CREATE DATABASE sales")
    spark.createDataFrame([(10, "x")], "order_id long, item string").write.format("lakelog").saveAsTable("sales.orders")
    spark.sql("CREATE TABLE plain (id INT) USING parquet")
    spark.sql("INSERT INTO plain VALUES (7)")
    out["events_location"] = spark.sql("DESCRIBE DETAIL events").first()["location"]
    out["orders_location"] = spark.sql("DESCRIBE DETAIL sales.orders").first()["location"]
    return out


def second(spark, external: str) -> dict:
    out = {
        "marker": spark.sql("SELECT user_marker()").first()[0],
        "tables": sorted(r.tableName for r in spark.sql("SHOW TABLES").collect()),
        "sales_tables": sorted(r.tableName for r in spark.sql("SHOW TABLES IN sales").collect()),
        "provider": {r.col_name: r.data_type for r in spark.sql("DESCRIBE TABLE EXTENDED events").collect()}.get("Provider"),
        "events": rows(spark.table("events")),
        "ext": rows(spark.sql("SELECT * FROM ext")),  # (with the rows Python appended between the runs)
        "orders": rows(spark.table("sales.orders")),
        "plain": rows(spark.table("plain")),
    }
    out["update"] = list(spark.sql("UPDATE events SET x = x * 10 WHERE p = 'a'").first())
    spark.createDataFrame([(2, "b", 20.0), (4, "b", 4.0)], "id long, p string, x double").createOrReplaceTempView("updates")
    out["merge"] = list(spark.sql("MERGE INTO events t USING updates s ON t.id = s.id "
                                  "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *").first())
    out["delete"] = list(spark.sql("DELETE FROM ext WHERE id = 1").first())
    spark.sql("INSERT INTO sales.orders VALUES (11, 'y')")
    spark.sql("ALTER TABLE sales.orders ADD COLUMNS (qty INT)")
    spark.sql("INSERT INTO sales.orders VALUES (12, 'z', 3)")
    out["events_after"] = rows(spark.table("events"))
    out["events_v1"] = rows(spark.sql("SELECT * FROM events VERSION AS OF 1"))
    out["history"] = [[r.version, r.operation] for r in spark.sql("DESCRIBE HISTORY events").collect()]
    out["changes"] = rows(spark.sql("SELECT id, _change_type, _commit_version FROM table_changes('events', 2)"))
    out["orders_columns"] = spark.table("sales.orders").columns
    spark.sql("DROP TABLE ext")
    spark.sql("DROP TABLE sales.orders")
    out["tables_after_drop"] = sorted(r.tableName for r in spark.sql("SHOW TABLES").collect() if not r.isTemporary)
    return out


if __name__ == "__main__":
    step, external, user_jar = sys.argv[1:4]
    spark = session(user_jar)
    try:
        result = {"first": first, "second": second}[step](spark, external)
    finally:
        spark.stop()
    print(json.dumps(result))

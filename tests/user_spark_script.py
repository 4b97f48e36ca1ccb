"""Run by test_spark_user_script.py as a user runs a script: ``.venv/bin/python user_spark_script.py``
with the environment not activated (PATH's python3 is another interpreter, no PYSPARK_PYTHON), a
SparkSession started before lakelog is imported, then ``register``. Prints one JSON line of results."""

import json
import os
import sys

from pyspark.sql import SparkSession

spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")

import spark_ext  # noqa: E402 - after the session, as in a notebook
from spark_ext import LakelogTable  # noqa: E402

spark_ext.register(spark)
path = os.path.join(sys.argv[1], "t")
out = {}
df = spark.range(10).selectExpr("id", "cast(id % 2 as string) as p", "id * 2 as v")
df.write.format("lakelog").partitionBy("p").save(path)  # no mode: ErrorIfExists, as Delta's default
try:
    df.write.format("lakelog").save(path)
    out["second_save"] = "written"
except Exception as e:  # noqa: BLE001
    out["second_save"] = "TableExistsError" if "TableExistsError" in str(e) else str(e)[:500]
df.write.format("lakelog").mode("ignore").save(path)
out["count"] = spark.read.format("lakelog").load(path).count()
src = spark.range(5, 15).selectExpr("id", "cast(id % 2 as string) as p", "id * 3 as v")
t = LakelogTable.forPath(spark, path)
t.alias("t").merge(src.alias("s"), "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
t.delete("id = 0")
rows = spark.read.format("lakelog").load(path).collect()
out["rows"] = sorted((r.id, r.p, r.v) for r in rows)
import lakelog  # noqa: E402

out["partition_columns"] = lakelog.Table(path).partition_columns
out["worker_python"] = spark.sparkContext.pythonExec
# A table with deletion vectors through Spark's own Parquet scan, then again after a session restart
# (a new SparkContext in the same JVM needs the deletion-vector format's jar again).
import pyarrow as pa  # noqa: E402

dv = os.path.join(sys.argv[1], "dv")
lakelog.write_table(dv, pa.table({"id": list(range(100))}), configuration={"delta.enableDeletionVectors": "true"})
lakelog.Table(dv).delete("id % 3 = 0")
out["dv_rows"] = sorted(r.id for r in spark_ext.read(spark, dv).collect())
spark.stop()
spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
out["dv_rows_after_restart"] = sorted(r.id for r in spark_ext.read(spark, dv).collect())
spark.stop()
print(json.dumps(out))

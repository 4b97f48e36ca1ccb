"""Run as a script by test_spark_bare.py: format("lakelog") in a SparkSession that was never told about
lakelog (no register call, no settings), as a user who only installed the package would start one.

Usage: python bare_spark_job.py WORKDIR. Prints one JSON line of results; any failure raises.
"""

import json
import os
import sys

from pyspark.sql import SparkSession


def main(work: str) -> None:
    spark = SparkSession.builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    table, copy, ck = (os.path.join(work, n) for n in ("table", "copy", "ck"))
    out: dict = {"pushdown_setting": spark.conf.get("spark.sql.python.filterPushdown.enabled")}

    df = spark.range(100).selectExpr("id", "cast(id % 3 as string) as p", "id * 0.5 as x")
    df.write.format("lakelog").option("partitionBy", "p").mode("append").save(table)
    spark.range(100, 120).selectExpr("id", "'9' as p", "id * 0.5 as x").write.format("lakelog").mode("append").save(table)

    read = spark.read.format("lakelog").load(table)
    out["count"] = read.count()
    out["filtered"] = sorted(r.id for r in read.filter("p = '1' and id < 20").collect())
    # Asking for pushdown where the session cannot push: Spark filters, the read works.
    pushed = spark.read.format("lakelog").option("filterPushdown", "true").load(table).filter("p = '1' and id < 20")
    out["filtered_pushdown_option"] = sorted(r.id for r in pushed.collect())
    out["v0"] = spark.read.format("lakelog").option("versionAsOf", 0).load(table).count()

    q = (
        spark.readStream.format("lakelog").load(table)
        .writeStream.format("lakelog").option("checkpointLocation", ck).trigger(availableNow=True).start(copy)
    )
    q.awaitTermination(300)
    if q.exception():
        raise q.exception()
    out["streamed"] = sorted(r.id for r in spark.read.format("lakelog").load(copy).collect())
    spark.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])

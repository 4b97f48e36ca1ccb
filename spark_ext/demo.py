"""The main job: a PySpark pipeline writes lakelog tables, then pandas reads them back.

1. A Structured Streaming job ingests order files into ``orders`` (partitioned by day), one commit per
   micro-batch. It is "crashed" after a table commit that Spark did not record, and restarted: Spark
   replays that batch, and lakelog's txn action makes the replay commit nothing (exactly once).
2. A batch job aggregates ``orders`` into ``daily_totals`` (overwrite), appends late corrections to
   ``orders`` and rebuilds ``daily_totals``.
3. pandas reads the committed snapshots, and older versions by number and by timestamp.

Run with ``make demo``; prints what it verified and exits non-zero when a check fails.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

OUT = os.path.abspath(os.environ.get("LAKELOG_DEMO_DIR", "demo_output"))
BATCH_ROWS = 500


def _spark():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import spark_ext

    log4j = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")  # errors only
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("lakelog-demo")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark_ext.register(spark)
    return spark


def _write_order_files(input_dir: str, first: int, count: int) -> None:
    os.makedirs(input_dir, exist_ok=True)
    for b in range(first, first + count):
        tmp = os.path.join(input_dir, f".orders-{b:03d}.tmp")
        with open(tmp, "w") as f:
            for i in range(b * BATCH_ROWS, (b + 1) * BATCH_ROWS):
                f.write(json.dumps({"order_id": i, "day": f"2026-11-{1 + i % 5:02d}", "customer": f"c{i % 37}", "amount": round(5 + (i % 100) * 0.75, 2)}) + "\n")
        os.replace(tmp, os.path.join(input_dir, f"orders-{b:03d}.json"))  # the file source sees whole files only


def _ingest(spark, input_dir: str, orders: str, checkpoint: str) -> None:
    stream = (
        spark.readStream.schema("order_id long, day string, customer string, amount double")
        .option("maxFilesPerTrigger", 1)
        .json(input_dir)
        .selectExpr("order_id", "to_date(day) as day", "customer", "amount")
    )
    q = (
        stream.writeStream.format("lakelog")
        .option("checkpointLocation", checkpoint)
        .option("partitionBy", "day")
        .outputMode("append")
        .trigger(availableNow=True)
        .start(orders)
    )
    q.awaitTermination()
    if q.exception():
        raise q.exception()


def main() -> int:
    import datetime

    import lakelog

    shutil.rmtree(OUT, ignore_errors=True)
    input_dir, checkpoint = os.path.join(OUT, "input"), os.path.join(OUT, "checkpoints", "orders")
    orders, totals = os.path.join(OUT, "orders"), os.path.join(OUT, "daily_totals")
    checks: list[bool] = []

    def check(what: str, ok: bool) -> None:
        checks.append(ok)
        print(f"  [{'ok' if ok else 'FAILED'}] {what}")

    spark = _spark()
    print(f"lakelog {lakelog.__version__} demo on Spark {spark.version} ({spark.sparkContext.master}), writing under {OUT}\n")

    print("1. streaming ingest, a crash, a restart")
    _write_order_files(input_dir, 0, 3)
    _ingest(spark, input_dir, orders, checkpoint)
    after_first = lakelog.Table(orders).version
    check(f"three micro-batches became versions 0..{after_first}", after_first == 2)
    # The crash: the table commit of batch 2 landed, but Spark never recorded the batch as done.
    for name in ("2", ".2.crc"):
        os.remove(os.path.join(checkpoint, "commits", name))
    _write_order_files(input_dir, 3, 2)
    _ingest(spark, input_dir, orders, checkpoint)
    t = lakelog.Table(orders)
    ids = t.to_pyarrow(columns=["order_id"]).column("order_id").to_pylist()
    check("Spark replayed batch 2 after the restart", os.path.exists(os.path.join(checkpoint, "commits", "2")))
    check("the replay committed nothing: batches 3 and 4 are versions 3 and 4", t.version == 4)
    check(f"every one of the {5 * BATCH_ROWS} orders is in the table exactly once", sorted(ids) == list(range(5 * BATCH_ROWS)))

    print("\n2. batch jobs")
    daily = "select day, count(*) as orders, round(sum(amount), 2) as revenue from orders group by day"
    spark.read.format("lakelog").load(orders).createOrReplaceTempView("orders")
    spark.sql(daily).write.format("lakelog").mode("overwrite").save(totals)
    corrections = spark.createDataFrame(
        [(10_000 + i, f"2026-11-0{1 + i % 2}", "c-late", 100.0) for i in range(20)], "order_id long, day string, customer string, amount double"
    ).selectExpr("order_id", "to_date(day) as day", "customer", "amount")
    corrections.write.format("lakelog").mode("append").save(orders)
    spark.read.format("lakelog").load(orders).createOrReplaceTempView("orders")
    spark.sql(daily).write.format("lakelog").mode("overwrite").save(totals)
    late = spark.read.format("lakelog").option("filterPushdown", "true").load(orders).filter("customer = 'c-late' and day = date'2026-11-01'").count()
    check("Spark reads the appended corrections back, with pushed-down filters", late == 10)
    check("daily_totals was rebuilt by an overwrite (version 1)", lakelog.Table(totals).version == 1)

    print("\n3. pandas reads the committed snapshots")
    now = lakelog.Table(orders).to_pandas()
    totals_now = lakelog.read_table(totals).to_pandas().sort_values("day")
    totals_before = lakelog.read_table(totals, version=0).to_pandas().sort_values("day")
    print(totals_now.to_string(index=False))
    check(f"orders at version {lakelog.Table(orders).version} has {len(now)} rows", len(now) == 5 * BATCH_ROWS + 20)
    check("daily_totals now counts the corrections", int(totals_now["orders"].sum()) == len(now))
    check("time travel: daily_totals version 0 predates the corrections", int(totals_before["orders"].sum()) == 5 * BATCH_ROWS)
    hist = lakelog.Table(orders).history()
    v2_time = next(h["timestamp"] for h in hist if h["version"] == 2)
    old = lakelog.Table(orders, timestamp=v2_time).to_pandas()
    check("time travel by timestamp: the version committed then had three batches", len(old) == 3 * BATCH_ROWS)
    day1 = lakelog.Table(orders).files(filters=[("day", "=", datetime.date(2026, 11, 1))])
    check("a day filter prunes to that day's partition directory", bool(day1) and all(f.startswith("day=2026-11-01/") for f in day1))
    print("\n   history of orders (newest first):")
    for h in hist:
        print(f"   v{h['version']}  {h['timestamp']:%H:%M:%S}  {h['operation']:<17} {h['operationParameters']}")

    spark.stop()
    print(f"\n{sum(checks)} of {len(checks)} checks passed")
    return 0 if all(checks) else 1


if __name__ == "__main__":
    sys.exit(main())

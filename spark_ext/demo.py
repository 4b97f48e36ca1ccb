"""The main job: a PySpark pipeline writes lakelog tables, then pandas reads them back.

1. A Structured Streaming job ingests order files into ``orders`` (partitioned by day), one commit per
   micro-batch. It is "crashed" after a table commit that Spark did not record, and restarted: Spark
   replays that batch, and lakelog's txn action makes the replay commit nothing (exactly once).
2. A batch job aggregates ``orders`` into ``daily_totals`` (overwrite), appends late corrections to
   ``orders`` and rebuilds ``daily_totals``.
3. pandas reads the committed snapshots, and older versions by number and by timestamp.
4. Change data capture: a stream of inserts, updates and deletes is upserted into ``customers`` with
   ``foreachBatch`` + ``LakelogTable.merge`` (idempotent: txnAppId + the batch id). The job dies right
   after one batch's merge committed and before Spark recorded the batch, and is restarted: Spark
   replays that batch, which commits nothing. The final table equals the source of truth, and time
   travel shows the table before the changes.

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


CDC_FILES, CDC_CHANGES, CDC_CRASH_BATCH = 6, 120, 2


def _write_changes(input_dir: str, initial: dict[int, dict]) -> dict[int, dict]:
    """Change files (full after-images with op and seq, several changes per key in a file) and the state
    they lead to when applied in order: the source of truth."""
    import random

    rng = random.Random(17)
    truth = {k: dict(v) for k, v in initial.items()}
    next_key, seq = max(initial) + 1, 0
    os.makedirs(input_dir, exist_ok=True)
    for b in range(CDC_FILES):
        lines = []
        for _ in range(CDC_CHANGES):
            seq += 1
            r = rng.random()
            if r < 0.3 or not truth:
                key, op = next_key, "insert"
                next_key += 1
            else:
                key = rng.choice(sorted(truth))
                op = "update" if r < 0.8 else "delete"
            row = {"id": key, "name": f"customer-{key}", "tier": rng.choice(["bronze", "silver", "gold"]), "balance": round(rng.uniform(0, 500), 2)}
            if op == "delete":
                row = dict(truth[key])
                del truth[key]
            else:
                truth[key] = dict(row)
            lines.append(json.dumps({**row, "op": op, "seq": seq}))
        tmp = os.path.join(input_dir, f".changes-{b:03d}.tmp")
        with open(tmp, "w") as f:
            f.write("\n".join(lines) + "\n")
        final = os.path.join(input_dir, f"changes-{b:03d}.json")
        os.replace(tmp, final)
        # The file source orders files by modification time: make it the order they were written in.
        os.utime(final, (1_700_000_000 + b, 1_700_000_000 + b))
    return truth


def _cdc(spark, input_dir: str, customers: str, checkpoint: str, crash_after: int | None) -> None:
    """Upsert the change stream into ``customers``; raise after the merge of batch ``crash_after``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from spark_ext import LakelogTable

    def upsert(batch, batch_id: int) -> None:
        latest = Window.partitionBy("id").orderBy(F.col("seq").desc())
        changes = batch.withColumn("rank", F.row_number().over(latest)).where("rank = 1").drop("rank")  # last change per key
        (LakelogTable.forPath(spark, customers).alias("t")
         .merge(changes.alias("s"), "t.id = s.id")
         .whenMatchedDelete("s.op = 'delete'")
         .whenMatchedUpdateAll()
         .whenNotMatchedInsertAll("s.op != 'delete'")
         .execute(txnAppId="customers-cdc", txnVersion=batch_id))
        if batch_id == crash_after:
            raise RuntimeError(f"the job dies after batch {batch_id}'s merge committed")

    q = (
        spark.readStream.schema("id long, name string, tier string, balance double, op string, seq long")
        .option("maxFilesPerTrigger", 1)
        .json(input_dir)
        .writeStream.foreachBatch(upsert)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    try:
        q.awaitTermination()
    except Exception:
        if crash_after is None:
            raise
        print(f"   the query died as planned after batch {crash_after}")


def _follow(spark, source: str, target: str, checkpoint: str) -> None:
    """Stream ``source``'s change data feed into ``target`` (id, tier): per version, deletes delete, the
    rest upsert; idempotent per (batch, version) through the merge's txn."""
    from pyspark.sql import functions as F

    from spark_ext import LakelogTable

    def apply(batch, batch_id: int) -> None:
        versions = sorted(r[0] for r in batch.select("_commit_version").distinct().collect())
        for v in versions:  # in commit order; at most one change per key and version after dropping pre-images
            changes = batch.where((F.col("_commit_version") == v) & (F.col("_change_type") != "update_preimage"))
            target_table = LakelogTable.forPath(spark, target) if os.path.exists(os.path.join(target, "_delta_log")) else None
            if target_table is None:  # the first batch creates the table from the initial rows
                changes.select("id", "tier").write.format("lakelog").mode("append").save(target)
                continue
            (target_table.alias("t").merge(changes.alias("s"), "t.id = s.id")
             .whenMatchedDelete("s._change_type = 'delete'")
             .whenMatchedUpdate(set={"tier": "s.tier"})
             .whenNotMatchedInsert("s._change_type != 'delete'", values={"id": "s.id", "tier": "s.tier"})
             .execute(txnAppId="customer-tiers", txnVersion=batch_id * 100_000 + v))

    q = (spark.readStream.format("lakelog").option("readChangeFeed", "true").option("startingVersion", 0).load(source)
         .writeStream.foreachBatch(apply).option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    q.awaitTermination()


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

    print("\n4. change data capture: foreachBatch + merge, a crash, a restart")
    import pyarrow as pa

    import spark_ext

    customers, changes_dir = os.path.join(OUT, "customers"), os.path.join(OUT, "input", "changes")
    cdc_checkpoint = os.path.join(OUT, "checkpoints", "customers")
    initial = {k: {"id": k, "name": f"customer-{k}", "tier": "bronze", "balance": 100.0} for k in range(200)}
    lakelog.write_table(customers, pa.Table.from_pylist(list(initial.values()), schema=pa.schema(
        [("id", pa.int64()), ("name", pa.string()), ("tier", pa.string()), ("balance", pa.float64())])),
        configuration={"delta.enableChangeDataFeed": "true"})  # downstream tables follow its changes (step 5)
    truth = _write_changes(changes_dir, initial)
    spark.sparkContext.setLogLevel("OFF")  # the planned crash would print Spark's stack traces
    try:
        _cdc(spark, changes_dir, customers, cdc_checkpoint, crash_after=CDC_CRASH_BATCH)
    finally:
        spark.sparkContext.setLogLevel("ERROR")
    crashed_at = lakelog.Table(customers).version
    check(f"the job died after batch {CDC_CRASH_BATCH}'s merge (version {crashed_at}) before Spark recorded it",
          crashed_at == CDC_CRASH_BATCH + 1 and not os.path.exists(os.path.join(cdc_checkpoint, "commits", str(CDC_CRASH_BATCH))))
    _cdc(spark, changes_dir, customers, cdc_checkpoint, crash_after=None)
    final = lakelog.Table(customers)
    merges = [h for h in final.history() if h["operation"] == "MERGE"]
    check(f"after the restart Spark replayed batch {CDC_CRASH_BATCH}, which committed nothing: {CDC_FILES} merges in all",
          os.path.exists(os.path.join(cdc_checkpoint, "commits", str(CDC_FILES - 1))) and len(merges) == CDC_FILES and final.version == CDC_FILES)
    got = {r["id"]: r for r in final.to_pyarrow().to_pylist()}
    check(f"customers equals the source of truth ({len(truth)} rows after {CDC_FILES * CDC_CHANGES} changes)", got == truth)
    before = {r["id"]: r.asDict() for r in spark_ext.read(spark, customers, version=0).collect()}
    check("time travel (spark_ext.read, version=0): the table before the changes", before == initial)
    m = merges[0]["operationMetrics"]
    print(f"   last merge: {m['numTargetRowsInserted']} inserted, {m['numTargetRowsUpdated']} updated, {m['numTargetRowsDeleted']} deleted, "
          f"{m['numTargetFilesRemoved']} file(s) rewritten")

    print("\n5. change data feed: a downstream table kept in sync from customers' changes")
    tiers = os.path.join(OUT, "customer_tiers")
    _follow(spark, customers, tiers, os.path.join(OUT, "checkpoints", "customer_tiers"))
    feed = lakelog.Table(customers).changes(1)
    kinds = sorted(set(feed.column("_change_type").to_pylist()))
    check(f"customers' change feed holds {feed.num_rows} changed rows of versions 1..{final.version} ({', '.join(kinds)})",
          set(kinds) <= {"insert", "delete", "update_preimage", "update_postimage"} and feed.num_rows > 0)
    synced = {r["id"]: r["tier"] for r in lakelog.Table(tiers).to_pyarrow().to_pylist()}
    check("customer_tiers, fed only by the change feed, equals customers' (id, tier)", synced == {k: r["tier"] for k, r in got.items()})

    spark.stop()
    print(f"\n{sum(checks)} of {len(checks)} checks passed")
    return 0 if all(checks) else 1


if __name__ == "__main__":
    sys.exit(main())

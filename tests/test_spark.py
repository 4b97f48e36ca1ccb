"""format("lakelog") on a real local Spark session: batch, time travel, pushdown, streaming, retries."""

import datetime as dt
import os
import shutil
import sys
import time

import deltalake
import pyarrow as pa
import pytest

import lakelog

from pyspark.sql import functions as F


def _rows(df, *cols):
    return sorted(tuple(r[c] for c in cols) for r in df.collect())


def _sample(spark, n=200, start=0):
    return spark.range(start, start + n).selectExpr(
        "id",
        "cast(id % 4 as string) as p",
        "cast(id % 7 as int) as k",
        "concat('name-', cast(id as string)) as name",
        "cast(id as double) / 8 as x",
        "date_add(date'2026-01-01', cast(id % 5 as int)) as d",
        "timestamp'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id) as ts",
        "cast(id as decimal(12, 2)) as amount",
        "if(id % 10 = 0, null, id * 2) as maybe",
    )


def test_batch_append_overwrite_partitioned_round_trip(spark, table_path):
    df = _sample(spark)
    df.write.format("lakelog").option("partitionBy", "p").mode("append").save(table_path)
    _sample(spark, 50, 200).write.format("lakelog").mode("append").save(table_path)
    t = lakelog.Table(table_path)
    assert t.version == 1 and t.partition_columns == ["p"]
    assert all(f.startswith("p=") for f in t.files())
    got = spark.read.format("lakelog").load(table_path)
    assert got.count() == 250
    assert _rows(got, "id", "p", "k", "maybe") == _rows(_sample(spark, 250), "id", "p", "k", "maybe")
    # lakelog and deltalake read what Spark wrote
    expected_ids = list(range(250))
    assert sorted(lakelog.read_table(table_path).column("id").to_pylist()) == expected_ids
    dl = deltalake.DeltaTable(table_path).to_pyarrow_table()
    assert sorted(dl.column("id").to_pylist()) == expected_ids
    assert dl.schema.field("ts").type == pa.timestamp("us", tz="UTC")

    _sample(spark, 10).write.format("lakelog").mode("overwrite").save(table_path)
    assert spark.read.format("lakelog").load(table_path).count() == 10
    assert spark.read.format("lakelog").option("versionAsOf", 1).load(table_path).count() == 250
    hist = lakelog.Table(table_path).history()
    assert hist[0]["operationParameters"]["mode"] == "Overwrite" and len(hist) == 3


def test_merge_schema_and_mismatch(spark, table_path):
    spark.range(3).selectExpr("id", "'a' as s").write.format("lakelog").mode("append").save(table_path)
    wider = spark.range(3, 5).selectExpr("id", "'b' as s", "id * 10 as extra")
    with pytest.raises(Exception, match="schema_mode='merge'|SchemaMismatch"):
        wider.write.format("lakelog").mode("append").save(table_path)
    assert lakelog.Table(table_path).version == 0
    wider.write.format("lakelog").option("mergeSchema", "true").mode("append").save(table_path)
    got = spark.read.format("lakelog").load(table_path)
    assert got.columns == ["id", "s", "extra"]
    assert _rows(got, "id", "extra") == [(0, None), (1, None), (2, None), (3, 30), (4, 40)]


def test_spark_reads_lakelog_and_deltalake_tables(spark, tmp_path):
    lk = str(tmp_path / "lk")
    data = pa.table({"id": [1, 2, 3], "p": ["a", "b", None], "t": pa.array([dt.datetime(2026, 1, 1)] * 3, pa.timestamp("us"))})
    lakelog.write_table(lk, data, partition_by=["p"])
    got = spark.read.format("lakelog").load(lk)
    assert _rows(got, "id", "p") == [(1, "a"), (2, "b"), (3, None)]
    assert dict(got.dtypes)["t"] == "timestamp_ntz"
    dlp = str(tmp_path / "dl")
    deltalake.write_deltalake(dlp, pa.table({"id": [1, 2], "s": ["x", "y"]}))
    deltalake.write_deltalake(dlp, pa.table({"id": [3], "s": ["z"]}), mode="append")
    assert _rows(spark.read.format("lakelog").load(dlp), "id", "s") == [(1, "x"), (2, "y"), (3, "z")]
    assert spark.read.format("lakelog").option("versionAsOf", "0").load(dlp).count() == 2


def test_time_travel_options(spark, table_path):
    for i in range(3):
        lakelog.write_table(table_path, pa.table({"id": [i]}))
        f = os.path.join(table_path, "_delta_log", f"{i:020d}.json")
        when = dt.datetime(2026, 3, 1, 12, i, tzinfo=dt.timezone.utc).timestamp()
        os.utime(f, (when, when))
    read = lambda **o: sorted(r.id for r in spark.read.format("lakelog").options(**o).load(table_path).collect())  # noqa: E731
    assert read(versionAsOf="1") == [0, 1]
    assert read(timestampAsOf="2026-03-01T12:01:30Z") == [0, 1]
    assert read(timestampAsOf="2026-03-01 12:02:00") == [0, 1, 2]
    with pytest.raises(Exception, match="before the earliest"):
        read(timestampAsOf="2026-03-01T11:00:00Z")
    # Unreadable options are lakelog's typed errors, not a Python ValueError from int("1.9").
    with pytest.raises(Exception, match="InvalidVersionError.*versionAsOf must be a table version"):
        read(versionAsOf="1.9")
    with pytest.raises(Exception, match="InvalidTimestampError.*ISO-8601"):
        read(timestampAsOf="yesterday")


FILTERS = [
    "p = '1'",
    "p in ('0', '3') and id > 100",
    "id between 20 and 40",
    "k >= 5 or p = '2'",
    "name like 'name-1%'",
    "name like '%9'",
    "name like '%-12%'",
    "maybe is null",
    "maybe is not null and maybe < 30",
    "not (k = 3)",
    "d = date'2026-01-03'",
    "amount > 150.5",
    "x > 20.0",
    "ts > timestamp'2026-01-01 00:01:00'",
    "k in (1, null)",
    "p <=> '1'",
]


@pytest.fixture(scope="module")
def filter_table(spark, tmp_path_factory):
    """Four appends of 50 rows partitioned by p: several files per partition, so both partition and
    stats pruning have something to skip. Built here, so any test using it runs alone (``-k``)."""
    path = str(tmp_path_factory.mktemp("filters") / "t")
    for i in range(4):
        _sample(spark, 50, i * 50).repartition(1).write.format("lakelog").option("partitionBy", "p").mode("append").save(path)
    return path


@pytest.mark.parametrize("expr", FILTERS)
def test_filters_give_exactly_sparks_rows(spark, filter_table, expr):
    df = spark.read.format("lakelog").option("filterPushdown", "true").load(filter_table)
    pushed = df.filter(expr)
    reference = spark.createDataFrame(df.toPandas()).filter(expr)  # same rows, filtered by Spark alone
    cols = ["id", "p", "k", "maybe"]
    assert _rows(pushed, *cols) == _rows(reference, *cols)


def test_pruning_reads_fewer_files(spark, filter_table):
    base = spark.read.format("lakelog").option("maxPartitionBytes", "1").option("filterPushdown", "true").load(filter_table)
    all_parts = base.rdd.getNumPartitions()
    assert all_parts == len(lakelog.Table(filter_table).files()) == 16
    assert base.filter("p = '1'").rdd.getNumPartitions() == 4
    assert base.filter("id < 10").rdd.getNumPartitions() == 4  # stats: only the first write's 4 files hold ids < 50
    assert base.filter("p = '1' and id >= 150").rdd.getNumPartitions() == 1


def test_task_retry_leaves_no_duplicates_or_orphans(spark, table_path, tmp_path):
    """The first attempt of every task fails after its writer has opened (and filled) its file; the
    retries succeed. The failed attempts' files are deleted and no row is written twice."""
    from pyspark import cloudpickle

    import tests.flaky_sink as flaky_sink

    cloudpickle.register_pickle_by_value(flaky_sink)
    spark.dataSource.register(flaky_sink.FailFirstAttemptLakelog)
    markers = tmp_path / "markers"
    markers.mkdir()
    df = spark.range(0, 200, numPartitions=4)
    df.write.format("lakelog_fail_first_attempt").option("markerDir", str(markers)).mode("append").save(table_path)

    # Every task's first attempt failed while its file existed on disk.
    opened = {m.name: m.read_text().split() for m in markers.iterdir()}
    assert sorted(opened) == [f"task-{i}" for i in range(4)]
    assert all(len(files) == 1 for files in opened.values()), opened
    on_disk = sorted(os.path.relpath(os.path.join(d, f), table_path) for d, _, fs in os.walk(table_path) for f in fs if f.endswith(".parquet") and "_delta_log" not in d)
    assert not any("-a0-" in f for f in on_disk), on_disk  # the failed attempts' files are gone
    assert on_disk == sorted(lakelog.Table(table_path).files())  # no orphans
    got = sorted(r.id for r in spark.read.format("lakelog").load(table_path).collect())
    assert got == list(range(200))  # every row exactly once
    assert lakelog.Table(table_path).version == 0


def test_batch_write_options(spark, tmp_path):
    """txnAppId/txnVersion (a replayed job commits once), userMetadata, overwriteSchema and storage.<key>."""
    path = str(tmp_path / "t")

    def write(df, mode="append", **options):
        df.write.format("lakelog").options(**options).mode(mode).save(path)

    first = spark.range(3).selectExpr("id", "'a' as s")
    write(first, txnAppId="nightly", txnVersion="1", userMetadata="run 1")
    write(first, txnAppId="nightly", txnVersion="1", userMetadata="run 1 again")  # a replay: skipped
    t = lakelog.Table(path)
    assert t.version == 0 and t.to_pyarrow().num_rows == 3
    assert t.snapshot.txns["nightly"].version == 1
    write(spark.range(3, 5).selectExpr("id", "'b' as s"), txnAppId="nightly", txnVersion="2", userMetadata="run 2")
    t = lakelog.Table(path)
    assert t.version == 1 and sorted(t.to_pyarrow().column("id").to_pylist()) == [0, 1, 2, 3, 4]
    assert [h.get("userMetadata") for h in t.history()] == ["run 2", "run 1"]

    other = spark.range(2).selectExpr("cast(id as string) as k")
    with pytest.raises(Exception, match="SchemaMismatch|schema_mode"):
        write(other, mode="overwrite")
    assert lakelog.Table(path).version == 1
    write(other, mode="overwrite", overwriteSchema="true")
    t = lakelog.Table(path)
    assert t.version == 2 and t.schema.names == ["k"] and sorted(t.to_pyarrow().column("k").to_pylist()) == ["0", "1"]

    # storage.<key> options reach fsspec: here fsspec's dir:// filesystem rooted at tmp_path, which
    # needs lakelog.single_writer (it has no atomic put-if-absent).
    storage = {"storage.path": str(tmp_path), "storage.target_protocol": "file"}
    with pytest.raises(Exception, match="single_writer"):
        first.write.format("lakelog").options(**storage).mode("append").save("dir://via-dir")
    first.write.format("lakelog").options(**storage, **{"storage.lakelog.single_writer": "true"}).mode("append").save("dir://via-dir")
    assert sorted(lakelog.read_table(str(tmp_path / "via-dir")).column("id").to_pylist()) == [0, 1, 2]
    back = spark.read.format("lakelog").options(**storage).load("dir://via-dir")
    assert _rows(back, "id", "s") == [(0, "a"), (1, "a"), (2, "a")]


def _write_input_files(input_dir, start_batch, n_batches, rows=20):
    os.makedirs(input_dir, exist_ok=True)
    for b in range(start_batch, start_batch + n_batches):
        ids = list(range(b * rows, (b + 1) * rows))
        tmp = os.path.join(input_dir, f".b{b:04d}.json.tmp")
        with open(tmp, "w") as f:
            f.writelines(f'{{"id": {i}, "batch": {b}}}\n' for i in ids)
        os.replace(tmp, os.path.join(input_dir, f"b{b:04d}.json"))


def _run_stream(spark, input_dir, table_path, ck, fmt="lakelog", **opts):
    src = spark.readStream.schema("id long, batch long").option("maxFilesPerTrigger", 1).json(input_dir)
    w = src.writeStream.format(fmt).option("checkpointLocation", ck).outputMode("append")
    for k, v in opts.items():
        w = w.option(k, v)
    q = w.trigger(availableNow=True).start(table_path)
    q.awaitTermination(240)
    if q.exception():
        raise q.exception()


def test_streaming_sink_exactly_once_across_replay(spark, tmp_path):
    input_dir, table, ck = str(tmp_path / "in"), str(tmp_path / "table"), str(tmp_path / "ck")
    _write_input_files(input_dir, 0, 3)
    _run_stream(spark, input_dir, table, ck)
    t = lakelog.Table(table)
    assert t.version == 2
    assert sorted(t.to_pyarrow().column("id").to_pylist()) == list(range(60))
    app_ids = list(t.snapshot.txns)
    assert len(app_ids) == 1 and t.snapshot.txns[app_ids[0]].version == 2

    # Crash after the table commit but before Spark recorded the batch: Spark re-runs batch 2.
    os.remove(os.path.join(ck, "commits", "2"))
    os.remove(os.path.join(ck, "commits", ".2.crc"))
    _write_input_files(input_dir, 3, 2)
    _run_stream(spark, input_dir, table, ck)
    t = lakelog.Table(table)
    ids = t.to_pyarrow().column("id").to_pylist()
    assert sorted(ids) == list(range(100)), "every input row exactly once"
    assert os.path.exists(os.path.join(ck, "commits", "2"))  # the batch was really replayed
    assert t.version == 4  # the replayed batch committed nothing
    assert [h["operationParameters"].get("epochId") for h in t.history()][:2] == ["4", "3"]



def test_streaming_commit_failure_then_restart(spark, tmp_path):
    from pyspark import cloudpickle

    import tests.flaky_sink as flaky_sink

    cloudpickle.register_pickle_by_value(flaky_sink)
    spark.dataSource.register(flaky_sink.FlakyLakelog)
    input_dir, table, ck = str(tmp_path / "in"), str(tmp_path / "table"), str(tmp_path / "ck")
    marker = str(tmp_path / "fail-batch-1")
    open(marker, "w").close()
    _write_input_files(input_dir, 0, 3)
    with pytest.raises(Exception, match="injected commit failure"):
        _run_stream(spark, input_dir, table, ck, fmt="lakelog_flaky", failMarker=marker, failBatch="1")
    assert lakelog.Table(table).version == 0  # batch 0 only
    _run_stream(spark, input_dir, table, ck, fmt="lakelog_flaky", failMarker=marker, failBatch="1")
    ids = lakelog.read_table(table).column("id").to_pylist()
    assert sorted(ids) == list(range(60))


def test_streaming_sink_app_id_options(spark, tmp_path):
    input_dir = str(tmp_path / "in")
    _write_input_files(input_dir, 0, 2)
    for option, value in (("txnAppId", "my-app"), ("queryId", "query-7")):
        table = str(tmp_path / option)
        _run_stream(spark, input_dir, table, str(tmp_path / f"ck-{option}"), **{option: value})
        t = lakelog.Table(table)
        assert list(t.snapshot.txns) == [value] and t.snapshot.txns[value].version == 1
        assert sorted(t.to_pyarrow().column("id").to_pylist()) == list(range(40))


def test_streaming_source_fails_on_changes_unless_skip_change_commits(spark, tmp_path):
    src = str(tmp_path / "src")
    lakelog.write_table(src, pa.table({"id": [1, 2]}))  # v0
    lakelog.write_table(src, pa.table({"id": [3]}), mode="overwrite")  # v1 removes data
    lakelog.write_table(src, pa.table({"id": [4]}))  # v2

    def run(name, **options):
        reader = spark.readStream.format("lakelog").option("startingVersion", "0")
        for k, v in options.items():
            reader = reader.option(k, v)
        q = reader.load(src).writeStream.format("memory").queryName(name).trigger(availableNow=True).start()
        try:
            q.awaitTermination(240)
        finally:
            q.stop()
        return sorted(r.id for r in spark.sql(f"select id from {name}").collect())

    with pytest.raises(Exception, match="skipChangeCommits"):
        run("changes_fail")
    # Skipped whole: neither its removes nor its adds are emitted.
    assert run("changes_skipped", skipChangeCommits="true") == [1, 2, 4]


def test_streaming_complete_mode_overwrites(spark, tmp_path):
    input_dir, table, ck = str(tmp_path / "in"), str(tmp_path / "table"), str(tmp_path / "ck")
    _write_input_files(input_dir, 0, 2)
    src = spark.readStream.schema("id long, batch long").option("maxFilesPerTrigger", 1).json(input_dir)
    agg = src.groupBy("batch").agg(F.count("*").alias("n"))
    q = agg.writeStream.format("lakelog").option("checkpointLocation", ck).outputMode("complete").trigger(availableNow=True).start(table)
    q.awaitTermination(240)
    assert q.exception() is None
    got = sorted(tuple(r.values()) for r in lakelog.read_table(table).to_pylist())
    assert got == [(0, 20), (1, 20)]
    assert lakelog.read_table(table, version=0).num_rows == 1


def test_streaming_source_emits_new_versions(spark, tmp_path):
    src_table, out_table, ck = str(tmp_path / "src"), str(tmp_path / "out"), str(tmp_path / "ck")
    lakelog.write_table(src_table, pa.table({"id": [1, 2]}))
    lakelog.write_table(src_table, pa.table({"id": [3]}))

    def run():
        q = (
            spark.readStream.format("lakelog").load(src_table)
            .writeStream.format("lakelog").option("checkpointLocation", ck).trigger(availableNow=True).start(out_table)
        )
        q.awaitTermination(240)
        assert q.exception() is None

    run()
    assert sorted(lakelog.read_table(out_table).column("id").to_pylist()) == [1, 2, 3]
    lakelog.write_table(src_table, pa.table({"id": [4, 5]}))
    t = lakelog.Table(src_table)
    # a compaction-like commit (dataChange=false) emits nothing
    from lakelog.transaction import Transaction

    adds = list(t.snapshot.files.values())
    Transaction(t.storage, t.snapshot, "OPTIMIZE").commit([adds[0].remove(data_change=False), _rewritten(src_table, adds[0])])
    run()
    assert sorted(lakelog.read_table(out_table).column("id").to_pylist()) == [1, 2, 3, 4, 5]
    # startingVersion reads changes from that version on
    q = spark.readStream.format("lakelog").option("startingVersion", "2").load(src_table).writeStream.format("memory").queryName("from_v2").trigger(availableNow=True).start()
    q.awaitTermination(240)
    assert sorted(r.id for r in spark.sql("select id from from_v2").collect()) == [4, 5]


def _rewritten(table_path, add):
    """The add of a copy of ``add``'s file under a new name, dataChange=false: what a compaction commits
    (a commit may not remove and add the same path)."""
    import shutil
    from dataclasses import replace

    new = "rewritten-" + add.relative_path
    shutil.copyfile(os.path.join(table_path, add.relative_path), os.path.join(table_path, new))
    return replace(add, path=new, data_change=False)


def test_streaming_source_rate_limit_exactly_once_across_restart(spark, tmp_path):
    src, out, ck = str(tmp_path / "src"), str(tmp_path / "out"), str(tmp_path / "ck")
    for v in range(50):  # a 50-commit backlog, one 10-row file per commit
        lakelog.write_table(src, pa.table({"id": pa.array(range(v * 10, v * 10 + 10), pa.int64())}))

    def query(trigger):
        return (
            spark.readStream.format("lakelog").option("maxFilesPerTrigger", 3).load(src)
            .writeStream.format("lakelog").option("checkpointLocation", ck).trigger(**trigger).start(out)
        )

    q = query({"processingTime": "1 second"})
    deadline = time.time() + 300
    while (q.lastProgress or {}).get("batchId", -1) < 3:
        assert q.exception() is None and time.time() < deadline
        time.sleep(0.2)
    q.stop()  # stopped in the middle of the backlog, possibly inside a batch
    done = lakelog.Table(out).version + 1
    assert 4 <= done < 17
    q = query({"availableNow": True})
    q.awaitTermination(300)
    assert q.exception() is None
    t = lakelog.Table(out)
    assert sorted(t.to_pyarrow().column("id").to_pylist()) == list(range(500))  # every row exactly once
    counts = [lakelog.read_table(out, version=v).num_rows for v in range(t.version + 1)]
    added = [b - a for a, b in zip([0] + counts, counts)]
    assert max(added) <= 30 and len(added) == 17  # 50 files, at most 3 per micro-batch


# ---------------------------------------------------------------- pushed filters vs Spark's own evaluation

UTC = dt.timezone.utc
F32 = [pa.scalar(v, pa.float32()).as_py() for v in (0.1, -0.0, 2.5)]  # float32 values, as Spark sends them
NAN, INF = float("nan"), float("inf")
D = __import__("decimal").Decimal
# Cycled per column with different lengths, so the values combine; nulls everywhere, NaN, -0.0, +-inf,
# type minima and maxima, years 1 and 9999, unicode and empty strings.
PUSH_VALUES = {
    "i": (pa.int32(), [None, 0, 1, 2, 3, -(2**31), 2**31 - 1]),
    "x": (pa.float64(), [None, 0.0, -0.0, NAN, 1.5, INF, -INF, -1.0]),
    "f": (pa.float32(), [None, F32[0], F32[1], NAN, F32[2]]),
    "s": (pa.string(), [None, "", "a", "ab", "b", "é", "a%b", "zz"]),
    "d": (pa.date32(), [None, dt.date(1, 1, 1), dt.date(999, 12, 31), dt.date(1970, 1, 1), dt.date(9999, 12, 31)]),
    "ts": (pa.timestamp("us", tz="UTC"), [None, dt.datetime(1, 1, 1, tzinfo=UTC), dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
                                          dt.datetime(2000, 1, 1, tzinfo=UTC), dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)]),
    "tn": (pa.timestamp("us"), [None, dt.datetime(1, 1, 1), dt.datetime(999, 12, 31, 23, 59, 59), dt.datetime(2000, 1, 1, 0, 0, 0, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)]),
    "dec": (pa.decimal128(10, 2), [None, D("0.00"), D("1.50"), D("-2.25"), D("99999999.99")]),
    "b": (pa.bool_(), [None, True, False]),
    "bin": (pa.binary(), [None, b"", b"\x00", b"\x01\xff"]),
    "p": (pa.string(), [None, "a", "b"]),  # partition column
    "q": (pa.float64(), [None, 0.0, -0.0, NAN, 1.5]),  # partition column
}
PUSH_ROWS = 45


def _push_table() -> pa.Table:
    cols = {"id": pa.array(range(PUSH_ROWS), pa.int64())}
    for c, (t, vals) in PUSH_VALUES.items():
        cols[c] = pa.array([vals[i % len(vals)] for i in range(PUSH_ROWS)], t)
    return pa.table(cols)


def _sql_literal(v, t: pa.DataType) -> str:
    if v is None:
        return "NULL"
    if pa.types.is_boolean(t):
        return "TRUE" if v else "FALSE"
    if pa.types.is_floating(t):
        text = "NaN" if v != v else ("Infinity" if v == INF else "-Infinity" if v == -INF else repr(v))
        return f"CAST('{text}' AS {'FLOAT' if pa.types.is_float32(t) else 'DOUBLE'})"
    if pa.types.is_integer(t):
        return f"CAST({v} AS INT)"
    if pa.types.is_decimal(t):
        return f"CAST('{v}' AS DECIMAL({t.precision},{t.scale}))"
    if pa.types.is_string(t):
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if pa.types.is_binary(t):
        return f"X'{v.hex()}'"
    if pa.types.is_date(t):
        return f"DATE'{v.isoformat()}'"
    if pa.types.is_timestamp(t):
        text = v.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
        return f"TIMESTAMP'{text}'" if t.tz else f"TIMESTAMP_NTZ'{text}'"
    raise AssertionError(t)


def _filter_sql(f) -> str:
    from pyspark.sql.datasource import (
        EqualNullSafe, EqualTo, GreaterThan, GreaterThanOrEqual, In, IsNotNull, IsNull, LessThan, LessThanOrEqual, Not,
        StringContains, StringEndsWith, StringStartsWith,
    )

    if isinstance(f, Not):
        return f"NOT ({_filter_sql(f.child)})"
    c = f.attribute[0]
    t = PUSH_VALUES[c][0]
    if isinstance(f, IsNull):
        return f"{c} IS NULL"
    if isinstance(f, IsNotNull):
        return f"{c} IS NOT NULL"
    if isinstance(f, In):
        return f"{c} IN ({', '.join(_sql_literal(v, t) for v in f.value)})"
    fn = {StringStartsWith: "startswith", StringEndsWith: "endswith", StringContains: "contains"}.get(type(f))
    if fn:
        return f"{fn}({c}, {_sql_literal(f.value, t)})"
    op = {EqualTo: "=", EqualNullSafe: "<=>", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<", LessThanOrEqual: "<="}[type(f)]
    return f"{c} {op} {_sql_literal(f.value, t)}"


def _push_matrix() -> list:
    """Every filter shape Spark pushes to a Python data source (each also under NOT), on every column type."""
    from pyspark.sql.datasource import (
        EqualNullSafe, EqualTo, GreaterThan, GreaterThanOrEqual, In, IsNotNull, IsNull, LessThan, LessThanOrEqual, Not,
        StringContains, StringEndsWith, StringStartsWith,
    )

    out = []
    for c, (t, vals) in PUSH_VALUES.items():
        a = (c,)
        lits = [v for v in vals if v is not None]
        lits = [lits[len(lits) // 2], lits[-1]] + [v for v in lits if isinstance(v, float) and (v != v or v == 0.0)][:2]
        for v in lits:
            out += [cls(a, v) for cls in (EqualTo, EqualNullSafe, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)]
        out += [In(a, tuple(lits[:2])), In(a, (lits[0], None)), In(a, (None,)), EqualNullSafe(a, None), IsNull(a), IsNotNull(a)]
        if pa.types.is_string(t):
            out += [StringStartsWith(a, "a"), StringEndsWith(a, "b"), StringContains(a, ""), StringContains(a, "%"), StringStartsWith(a, "é")]
    out += [Not(f) for f in out]
    out += [Not(Not(In(("i",), (1, None)))), Not(Not(EqualTo(("x",), NAN)))]
    return out


@pytest.fixture(scope="module")
def push_tables(spark, tmp_path_factory):
    """The same rows as a lakelog table (partitioned by p and q: 15 files whose stats prune) and as
    one plain Parquet file that Spark reads natively, for Spark's own evaluation."""
    import pyarrow.parquet as pq

    root = tmp_path_factory.mktemp("push")
    data = _push_table()
    path = str(root / "lakelog")
    lakelog.write_table(path, data, partition_by=["p", "q"])
    ref_file = str(root / "reference.parquet")
    pq.write_table(data, ref_file)
    return path, spark.read.parquet(ref_file)


def _spark_truth(reference, sqls: list[str]) -> list[list[int]]:
    """For each SQL predicate, the ids of the rows where Spark evaluates it to TRUE (one job for all)."""
    rows = reference.select("id", *[F.expr(s).alias(f"c{k}") for k, s in enumerate(sqls)]).collect()
    return [sorted(r["id"] for r in rows if r[f"c{k}"] is True) for k in range(len(sqls))]


def test_every_pushed_filter_shape_matches_spark_evaluation(spark, push_tables):
    """Each filter Spark can push (and its NOT) is accepted, and the rows read are exactly those where Spark's
    own evaluation of it is TRUE: nulls, NaN, -0.0, extremes, on data and partition columns."""
    from spark_ext.datasource.source import LakelogDataSource

    path, reference = push_tables
    matrix = _push_matrix()
    truth = _spark_truth(reference, [_filter_sql(f) for f in matrix])
    source = LakelogDataSource({"path": path, "filterPushdown": "true"})
    schema = source.schema()
    mismatches = []
    for f, expected in zip(matrix, truth):
        reader = source.reader(schema)
        assert list(reader.pushFilters([f])) == [], f"not pushed: {f}"
        got = sorted(i for part in reader.partitions() for b in reader.read(part) for i in b.column("id").to_pylist())
        if got != expected:
            mismatches.append((_filter_sql(f), got, expected))
    assert not mismatches, f"{len(mismatches)} of {len(matrix)} pushed filters differ from Spark: {mismatches[:5]}"
    assert len(matrix) > 400


# SQL filters Spark pushes to the source (checked: no Filter remains in the plan) and ones it keeps.
SPARK_SQL_FILTERS = [
    ("i not in (1, 2)", True),
    ("i not in (1, null)", True),
    ("not (i <=> 1)", True),
    ("x not in (0.0, 1.5)", True),
    ("not (x < cast('NaN' as double))", True),
    ("not (s like 'a%')", True),
    ("ts < timestamp'1000-01-01 00:00:00'", True),
    ("not (tn > timestamp_ntz'2000-01-01 00:00:00')", True),
    ("not (p = 'a')", True),
    ("q = -0.0", True),
    ("not (i = 1 or s = 'a') and p <=> 'b'", True),
    ("q is null or i > 2", False),  # Spark does not push OR
]


def test_spark_filters_read_through_the_source_match_spark(spark, push_tables):
    """End to end through Spark's planner: the rows equal Spark's own evaluation on the same data."""
    path, reference = push_tables
    truth = _spark_truth(reference, [s for s, _ in SPARK_SQL_FILTERS])
    for (sql, pushed), expected in zip(SPARK_SQL_FILTERS, truth):
        # loaded per query: see test_pushdown_is_opt_in_because_spark_reuses_pushed_read_plans
        q = spark.read.format("lakelog").option("filterPushdown", "true").load(path).filter(sql)
        plan = q._jdf.queryExecution().optimizedPlan().toString()
        assert ("Filter" not in plan) == pushed, (sql, plan)
        assert sorted(r.id for r in q.select("id").collect()) == expected, sql


def _reuse_after_pushdown(spark, path, **options) -> int:
    df = spark.read.format("lakelog").options(**options).load(path)
    assert df.filter("id < 3").count() == 3
    return df.count()  # a later query on the same DataFrame, without a pushable filter


def test_pushdown_is_opt_in_because_spark_reuses_pushed_read_plans(spark, table_path):
    """By default no filter is pushed, so a DataFrame reused after a filtered query still reads every row."""
    lakelog.write_table(table_path, pa.table({"id": list(range(10))}))
    assert _reuse_after_pushdown(spark, table_path) == 10
    df = spark.read.format("lakelog").load(table_path).filter("id < 3")
    assert "Filter" in df._jdf.queryExecution().optimizedPlan().toString()  # Spark applies the filter itself


@pytest.mark.xfail(strict=True, reason="Spark 4.1-4.3 reuse the pushed scan's read plan for the next scan of the relation")
def test_spark_keeps_pushed_read_plans_per_scan(spark, table_path):
    """Passes once Spark keeps read plans per scan: then filterPushdown can be on by default."""
    lakelog.write_table(table_path, pa.table({"id": list(range(10))}))
    assert _reuse_after_pushdown(spark, table_path, filterPushdown="true") == 10


def test_txn_options_are_parsed_as_integers(spark, table_path):
    df = spark.range(3)

    def write(version):
        df.write.format("lakelog").mode("append").option("txnAppId", "job").option("txnVersion", version).save(table_path)

    write("10")
    write("9")  # an older batch replayed: skipped
    write("10")
    assert lakelog.Table(table_path).version == 0 and lakelog.read_table(table_path).num_rows == 3
    write("11")
    assert lakelog.read_table(table_path).num_rows == 6
    with pytest.raises(Exception, match="txnVersion must be an integer"):
        write("1.7")
    with pytest.raises(Exception, match="txnAppId and txnVersion go together"):
        df.write.format("lakelog").mode("append").option("txnVersion", "12").save(table_path)
    assert lakelog.Table(table_path).version == 1
    assert lakelog.Table(table_path).snapshot.txns["job"].version == 11


def test_void_column_and_nested_merge_from_spark(spark, table_path):
    spark.range(2).selectExpr("id", "null as v", "named_struct('a', id) as s").write.format("lakelog").mode("append").save(table_path)
    t = lakelog.Table(table_path)
    assert t.schema.field("v").type == pa.null()
    # mergeSchema gives the void column a type and adds a struct field
    (spark.range(2, 3).selectExpr("id", "'x' as v", "named_struct('a', id, 'b', 'new') as s")
     .write.format("lakelog").mode("append").option("mergeSchema", "true").save(table_path))
    t = lakelog.Table(table_path)
    assert t.schema.field("v").type == pa.string()
    assert t.schema.field("s").type == pa.struct([pa.field("a", pa.int64(), False), ("b", pa.string())])
    rows = _rows(spark.read.format("lakelog").load(table_path), "id", "v", "s")
    assert [(i, v, (s.a, s.b)) for i, v, s in rows] == [(0, None, (0, None)), (1, None, (1, None)), (2, "x", (2, "new"))]

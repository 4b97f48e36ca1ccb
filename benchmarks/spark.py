"""Spark reads and writes of lakelog tables against Spark's own Parquet source on the same files, same
session, as ratios. Both read paths are measured: format("lakelog") (Python Data Source API) and
spark_ext.read (Spark's Parquet source over the snapshot's files). Then row-level changes on Spark
(``spark_ext.LakelogTable``) against the Python row-level path (``lakelog.Table``) on the same table:
``rows`` rows in 100 files (benchmarks/dml.py's table), delete of the 1% of rows with ``x < 0.01``
(every file holds some), an update of the same rows (``s = 'updated'``), and an upsert of ``rows // 100`` source rows (1% of them matching keys
spread over the table, the rest inserted), on a table without deletion vectors (copy-on-write: touched
files are rewritten) and on the same rows in a table created with ``delta.enableDeletionVectors=true``
(merge-on-read: touched files get a deletion vector, only updated and inserted rows are written).
Each run starts from a fresh copy of the table. On the copy-on-write table each operation is also
measured, in the same interleaved runs, against its floor: what Spark itself (no Delta) does to
rewrite exactly the files the operation rewrites (``spark.read.parquet`` of them, the same filter or
new values, ``write.parquet``; see ``floors``). A Spark session's master is fixed when it starts:
``--masters local[1],local[2]`` runs the benchmark once per master, each in its own process. Then
``spark_ext.read`` of a table whose deletion vectors delete 10% of the rows (benchmarks/dv_tables.py's
table: 8 files, one DV each) against the same live rows in a table without deletion vectors.

Then a table by name on a session from ``spark_ext.configure`` (``run_by_name``): ``spark.table`` against
``spark_ext.read`` and Parquet, and ``spark.sql`` UPDATE/DELETE/MERGE against ``LakelogTable``.

Run: python -m benchmarks.spark [--rows N] [--runs K] [--dml-only | --dml-cow-only | --dml-dv-only | --dv-only | --by-name-only]
[--master local[1] | --masters local[1],local[2]] [--json]. Prints a table; returns the rows for the suite.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile


from benchmarks.timing import median_times


def _session(master: str = "local[2]"):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import spark_ext

    builder = (
        SparkSession.builder.master(master)
        .appName("lakelog-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", tempfile.mkdtemp(prefix="lakelog-bench-warehouse-"))
    )
    spark = spark_ext.configure(builder).getOrCreate()  # (tables by name too: run_by_name)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run_dml(spark, tmp: str, rows: int, runs: int, deletion_vectors: bool = False) -> list[dict]:
    """Delete, update and merge through ``LakelogTable`` (on Spark) against ``lakelog.Table`` (Python);
    ``deletion_vectors``: on a table with deletion vectors enabled (both paths merge-on-read). On a
    copy-on-write table also against each operation's floor (``floors``), interleaved in the same runs."""
    import pyarrow.parquet as pq

    import lakelog
    from benchmarks import dml
    from spark_ext import LakelogTable

    kind = "dv" if deletion_vectors else "cow"
    base, work, src_path = os.path.join(tmp, f"dml-base-{kind}"), os.path.join(tmp, f"dml-work-{kind}"), os.path.join(tmp, f"dml-source-{kind}.parquet")
    floor_out = os.path.join(tmp, f"dml-floor-{kind}")
    dml.build(base, rows, deletion_vectors=deletion_vectors)
    dml.source(src_path, rows, rows // 100)
    src_arrow = pq.read_table(src_path)
    src_spark = spark.read.parquet(src_path)

    def fresh() -> None:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(floor_out, ignore_errors=True)
        dml.copy_table(base, work)

    def spark_merge():
        t = LakelogTable.forPath(spark, work).alias("target")
        return t.merge(src_spark.alias("source"), "target.id = source.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()

    def python_merge():
        return lakelog.Table(work).merge(src_arrow, "target.id = source.id").when_matched_update_all().when_not_matched_insert_all().execute()

    ops = {
        "delete": (lambda: LakelogTable.forPath(spark, work).delete("x < 0.01"), lambda: lakelog.Table(work).delete("x < 0.01"),
                   f"delete 1% of {rows:,} rows"),
        "update": (lambda: LakelogTable.forPath(spark, work).update("x < 0.01", {"s": "'updated'"}),
                   lambda: lakelog.Table(work).update({"s": "'updated'"}, "x < 0.01"), f"update 1% of {rows:,} rows"),
        "merge": (spark_merge, python_merge, f"merge {rows // 100:,} source rows into {rows:,}"),
    }
    out = []
    on = ", deletion vectors" if deletion_vectors else ""
    for op, (on_spark, on_python, name) in ops.items():
        row = {"name": f"{name}{on}: LakelogTable on Spark", "op": op, "peer": "lakelog.Table (Python)"}
        if deletion_vectors:
            row["lakelog_s"], row["peer_s"] = median_times([on_spark, on_python], runs, setup=fresh)
        else:
            fresh()
            on_spark()
            rewritten = rewritten_files(work)  # (the same every run: each starts from a fresh copy)
            floor = floors(spark, op, rewritten, src_spark, floor_out)
            row["lakelog_s"], row["floor_s"], row["peer_s"] = median_times([on_spark, floor, on_python], runs, setup=fresh)
            row["files"] = len(rewritten)
        out.append(row)
    return out


def run_by_name(spark, tmp: str, rows: int, runs: int) -> list[dict]:
    """A table by name (``spark.table``/``spark.sql`` on a session from ``spark_ext.configure``) against
    ``spark_ext.read`` and Spark's Parquet source on the table's own files (the three reads interleaved), then
    UPDATE/DELETE/MERGE through ``spark.sql`` against the same changes through ``LakelogTable``, each run
    on a fresh copy of benchmarks/dml.py's table."""
    import spark_ext
    from benchmarks import dml
    from spark_ext import LakelogTable

    df = spark.range(rows, numPartitions=4).selectExpr(
        "id", "cast(id % 16 as string) as g", "id * 0.5 as x", "concat('user-', cast(id % 1000 as string)) as name")
    lk_path = os.path.join(tmp, "name-lk")
    df.write.format("lakelog").option("partitionBy", "g").save(lk_path)
    pq_path = lk_path  # (Spark's Parquet source on the same files: its partition discovery skips _delta_log)
    spark.sql(f"CREATE TABLE bench_by_name USING lakelog LOCATION '{lk_path}'")
    readers = {"by name": lambda: spark.table("bench_by_name"), "spark_ext.read": lambda: spark_ext.read(spark, lk_path),
               "parquet": lambda: spark.read.parquet(pq_path)}
    agg = ["count(*) as n", "sum(x) as sx", "count(distinct name) as names"]
    queries = [(f"read + aggregate {rows:,} rows", lambda d: d.selectExpr(*agg).collect()),
               ("scan all columns (noop sink)", lambda d: d.write.format("noop").mode("overwrite").save()),
               ("selective read (id < 1000)", lambda d: d.filter("id < 1000").count()),
               ("one partition (g = '3')", lambda d: d.filter("g = '3'").selectExpr("sum(x)").collect())]
    out = []
    for name, query in queries:
        by_name, native, pq = median_times([lambda r=r: query(r()) for r in readers.values()], runs)
        out.append({"name": f"{name}: by name", "lakelog_s": by_name, "peer": "spark parquet", "peer_s": pq})
        out.append({"name": f"{name}: by name vs spark_ext.read", "lakelog_s": by_name, "peer": "spark_ext.read", "peer_s": native})

    base, work, src_path = os.path.join(tmp, "name-dml-base"), os.path.join(tmp, "name-dml-work"), os.path.join(tmp, "name-dml-source.parquet")
    dml.build(base, rows)
    dml.source(src_path, rows, rows // 100)
    spark.read.parquet(src_path).createOrReplaceTempView("bench_source")
    dml.copy_table(base, work)
    spark.sql(f"CREATE TABLE bench_dml USING lakelog LOCATION '{work}'")

    def fresh() -> None:
        shutil.rmtree(work, ignore_errors=True)
        dml.copy_table(base, work)

    def table_merge():
        t = LakelogTable.forPath(spark, work).alias("target")
        return t.merge(spark.table("bench_source").alias("source"), "target.id = source.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()

    ops = [("delete 1%", lambda: spark.sql("DELETE FROM bench_dml WHERE x < 0.01"), lambda: LakelogTable.forPath(spark, work).delete("x < 0.01")),
           ("update 1%", lambda: spark.sql("UPDATE bench_dml SET s = 'updated' WHERE x < 0.01"),
            lambda: LakelogTable.forPath(spark, work).update("x < 0.01", {"s": "'updated'"})),
           (f"merge {rows // 100:,} source rows", lambda: spark.sql(
               "MERGE INTO bench_dml target USING bench_source source ON target.id = source.id "
               "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"), table_merge)]
    for name, by_sql, by_table in ops:
        sql_s, table_s = median_times([by_sql, by_table], runs, setup=fresh)
        out.append({"name": f"{name} of {rows:,} rows: spark.sql by name", "lakelog_s": sql_s, "peer": "LakelogTable", "peer_s": table_s})
    return out


def rewritten_files(path: str) -> list[str]:
    """The data files (absolute paths) the latest commit of the table at ``path`` removed."""
    import orjson

    log = os.path.join(path, "_delta_log")
    last = max(f for f in os.listdir(log) if f.endswith(".json") and f[:20].isdigit())
    with open(os.path.join(log, last), "rb") as f:
        removed = [orjson.loads(line)["remove"]["path"] for line in f if line.startswith(b'{"remove"')]
    return [os.path.join(path, p) for p in removed]


def floors(spark, op: str, files: list[str], source, out: str):
    """What Spark itself (no Delta) does to rewrite ``files`` as ``op`` does: ``spark.read.parquet`` of
    them, the same filter or values, ``write.parquet``. delete: the rows that stay; update: every row,
    ``s`` a CASE of the condition; merge (update all matched, insert the rest): each target row joined
    with the source (broadcast: 20k rows), the source's values where it matched, plus the source rows
    matching no target row. The floor is kept as low as Spark allows: the schema is given (no footer
    read to infer it), and the files are listed on the driver, not by the Spark job that listing more
    than ``spark.sql.sources.parallelPartitionDiscovery.threshold`` (32) paths starts (on 2 cores
    under load it took seconds for 100 files)."""
    from pyspark.sql import functions as F

    cols = ["id", "grp", "x", "s", "day"]
    schema = spark.read.parquet(files[0]).schema
    listing = "spark.sql.sources.parallelPartitionDiscovery.threshold"

    def run():
        before = spark.conf.get(listing)
        spark.conf.set(listing, str(len(files) + 1))
        try:
            t = spark.read.schema(schema).parquet(*files)
        finally:
            spark.conf.set(listing, before)
        if op == "delete":
            df = t.where("NOT coalesce(x < 0.01, false)")
        elif op == "update":
            df = t.select(*[F.expr("CASE WHEN x < 0.01 THEN 'updated' ELSE s END").alias(c) if c == "s" else F.col(c) for c in cols])
        else:
            src = source.alias("src")
            joined = t.alias("tgt").join(F.broadcast(src), F.col("tgt.id") == F.col("src.id"), "left")
            updated = joined.select(*[F.when(F.col("src.id").isNotNull(), F.col(f"src.{c}")).otherwise(F.col(f"tgt.{c}")).alias(c) for c in cols])
            inserted = source.join(t.select("id"), "id", "left_anti").select(*cols)
            df = updated.unionByName(inserted)
        df.write.parquet(out)

    return run


def run_dv(spark, tmp: str, rows: int, runs: int) -> list[dict]:
    """spark_ext.read of a table with 10% of its rows deleted by deletion vectors against the same live
    rows without deletion vectors (both built by benchmarks.dv_tables)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    import spark_ext
    from benchmarks import dv_tables

    ids = pa.array(range(rows), pa.int64())
    data = pa.table({"id": ids, "x": pc.divide(pc.cast(ids, pa.float64()), 7.0), "name": pc.binary_join_element_wise("user-", pc.cast(ids, pa.string()), "")})
    dv_path, plain_path, live = dv_tables.build(os.path.join(tmp, "dv"), data)
    assert spark_ext.read(spark, dv_path).count() == live
    queries = [  # (name, query of a DataFrame)
        ("aggregate (count, sum)", lambda df: df.selectExpr("count(*)", "sum(x)").collect()),
        ("scan all columns (noop sink)", lambda df: df.write.format("noop").mode("overwrite").save()),
        ("selective read (id < 1000)", lambda df: df.filter("id < 1000").count()),
    ]
    out = []

    def add(name: str, dv, plain) -> None:
        dv_s, plain_s = median_times([dv, plain], runs)
        out.append({"name": f"spark_ext.read {rows:,} rows, 10% deleted by DVs: {name}", "lakelog_s": dv_s,
                    "peer": "same live rows, no DVs", "peer_s": plain_s})

    add("build the DataFrame", lambda: spark_ext.read(spark, dv_path), lambda: spark_ext.read(spark, plain_path))
    for name, query in queries:  # each query on a DataFrame built for it
        add(name, lambda q=query: q(spark_ext.read(spark, dv_path)), lambda q=query: q(spark_ext.read(spark, plain_path)))
    frames = [spark_ext.read(spark, p) for p in (dv_path, plain_path)]
    for name, query in queries:  # the same on DataFrames built once (a job that queries a table several times)
        add(f"{name}, DataFrame built once", lambda q=query: q(frames[0]), lambda q=query: q(frames[1]))
    return out


def run(rows: int = 2_000_000, runs: int = 3, dml_only: bool = False, dv_only: bool = False, dml_dv_only: bool = False,
        master: str = "local[2]", dml_cow_only: bool = False, by_name_only: bool = False) -> list[dict]:
    spark = _session(master)
    tmp = tempfile.mkdtemp(prefix="lakelog-bench-")
    if dml_only or dv_only or dml_dv_only or dml_cow_only or by_name_only:
        if by_name_only:
            results = run_by_name(spark, tmp, rows, runs)
        elif dml_dv_only:
            results = run_dml(spark, tmp, rows, runs, deletion_vectors=True)
        elif dml_cow_only:
            results = run_dml(spark, tmp, rows, runs)
        elif dml_only:
            results = run_dml(spark, tmp, rows, runs) + run_dml(spark, tmp, rows, runs, deletion_vectors=True)
        else:
            results = run_dv(spark, tmp, rows, runs)
        spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        for r in results:
            r["ratio"] = r["lakelog_s"] / r["peer_s"]
        return results
    df = spark.range(rows, numPartitions=4).selectExpr(
        "id", "cast(id % 16 as string) as g", "id * 0.5 as x", "concat('user-', cast(id % 1000 as string)) as name"
    ).cache()
    df.count()
    n = {"i": 0}

    def target(kind: str) -> str:
        n["i"] += 1
        return os.path.join(tmp, f"{kind}-{n['i']}")

    results = []
    w_lk, w_pq = median_times(
        [lambda: df.write.format("lakelog").mode("append").save(target("lk")), lambda: df.write.mode("overwrite").parquet(target("pq"))], runs
    )
    results.append({"name": f"spark write {rows:,} rows", "lakelog_s": w_lk, "peer": "spark parquet", "peer_s": w_pq})

    pq_path, lk_path = os.path.join(tmp, "read-pq"), os.path.join(tmp, "read-lk")
    df.write.parquet(pq_path)
    df.write.format("lakelog").mode("append").save(lk_path)
    import spark_ext

    readers = {
        # filterPushdown: fine here, as every query loads its own DataFrame (see README.md, Spark)
        "format('lakelog')": lambda: spark.read.format("lakelog").option("filterPushdown", "true").load(lk_path),
        "spark_ext.read": lambda: spark_ext.read(spark, lk_path),
        "parquet": lambda: spark.read.parquet(pq_path),
    }
    agg = ["count(*) as n", "sum(x) as sx", "count(distinct name) as names"]
    queries = [
        (f"spark read + aggregate {rows:,} rows", lambda d: d.selectExpr(*agg).collect()),
        # Every column, so the comparison does not hinge on column pruning (Python data sources get none).
        ("spark scan all columns (noop sink)", lambda d: d.write.format("noop").mode("overwrite").save()),
        ("spark selective read (id < 1000)", lambda d: d.filter("id < 1000").count()),
    ]
    for name, query in queries:
        ds_s, native_s, pq_s = median_times([lambda r=r: query(r()) for r in readers.values()], runs)
        results.append({"name": f"{name}: format('lakelog')", "lakelog_s": ds_s, "peer": "spark parquet", "peer_s": pq_s})
        results.append({"name": f"{name}: spark_ext.read", "lakelog_s": native_s, "peer": "spark parquet", "peer_s": pq_s})
    results.extend(run_dml(spark, tmp, rows, runs))
    results.extend(run_dml(spark, tmp, rows, runs, deletion_vectors=True))
    results.extend(run_dv(spark, tmp, rows, runs))
    results.extend(run_by_name(spark, tmp, rows, runs))
    spark.stop()
    shutil.rmtree(tmp, ignore_errors=True)
    for r in results:
        r["ratio"] = r["lakelog_s"] / r["peer_s"]
    return results


def _print(results: list[dict], master: str) -> None:
    for r in results:
        floor = f"  floor {r['floor_s']:7.3f}s  ratio {r['lakelog_s'] / r['floor_s']:.2f}x" if "floor_s" in r else ""
        print(f"[{master}] {r['name']:<58} lakelog {r['lakelog_s']:7.3f}s{floor}  {r['peer']} {r['peer_s']:7.3f}s  ratio {r['ratio']:.2f}x")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dml-only", action="store_true", help="only delete, update and merge on Spark vs the Python path (and, copy-on-write, vs Spark's floor)")
    ap.add_argument("--dml-cow-only", action="store_true", help="only copy-on-write delete, update and merge: Spark vs Spark's floor vs the Python path")
    ap.add_argument("--dml-dv-only", action="store_true", help="only delete, update and merge on a deletion-vector table, Spark vs the Python path")
    ap.add_argument("--dv-only", action="store_true", help="only spark_ext.read with deletion vectors vs without")
    ap.add_argument("--by-name-only", action="store_true",
                    help="only tables by name: spark.table vs spark_ext.read vs parquet, and spark.sql DML vs LakelogTable")
    ap.add_argument("--master", default="local[2]", help="Spark master: local[1] against local[2] shows how the distributed path scales")
    ap.add_argument("--masters", default=None,
                    help="comma-separated masters (e.g. local[1],local[2]): one fresh process (one Spark session) per master, in turn")
    ap.add_argument("--json", action="store_true", help="print the results as one JSON list")
    args = ap.parse_args(argv)
    if args.masters:
        import json
        import subprocess

        flags = [f for f, on in (("--dml-only", args.dml_only), ("--dml-cow-only", args.dml_cow_only), ("--dml-dv-only", args.dml_dv_only),
                                 ("--dv-only", args.dv_only), ("--by-name-only", args.by_name_only)) if on]
        for master in args.masters.split(","):
            done = subprocess.run([sys.executable, "-m", "benchmarks.spark", "--rows", str(args.rows), "--runs", str(args.runs), "--master", master,
                                   "--json", *flags], check=True, stdout=subprocess.PIPE, text=True)
            _print(json.loads(done.stdout.strip().splitlines()[-1]), master)
        return
    results = run(args.rows, args.runs, args.dml_only, args.dv_only, args.dml_dv_only, args.master, args.dml_cow_only, args.by_name_only)
    if args.json:
        import json

        print(json.dumps(results))
    else:
        _print(results, args.master)


if __name__ == "__main__":
    main()

"""lakelog against its peers, measured side by side in one run, reported as ratios.

Workloads (each compared with what users would otherwise pick):
1. write 1M rows, mixed types, unpartitioned and partitioned: raw pyarrow.parquet.write_table (the floor)
   and deltalake.write_deltalake;
2. read the latest snapshot, full and with a selective filter: pyarrow.dataset over the same files and
   deltalake's to_pyarrow_table;
3. snapshot load (open the table, list its files): 100k files across 1,000 commits with checkpoints,
   and 10k commits without a checkpoint: deltalake;
4. checkpoint creation for 100k files: deltalake create_checkpoint;
5. small-append commits per second on local disk (no peer: the target is absolute);
6. Spark format("lakelog") against Spark's Parquet source (with --spark);
7. row-level changes (merge, delete copy-on-write and with deletion vectors) against deltalake, time and peak memory (benchmarks/dml.py);
8. scale: a million-file log (200k with --quick), cold start and filtered planning against deltalake, each
   contender a fresh process, time and peak memory (benchmarks/scale.py; ``--files 10000000`` there for 10M);
9. Azure and GCS on their emulators against deltalake (benchmarks/cloud_stores.py).

Times are medians of several runs (machines here are noisy: read the ratios, not the seconds).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import tempfile
import time
import uuid

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

import lakelog
import lakelog.schema.types
from benchmarks.data import mixed_table
from benchmarks.timing import machine as timing_machine
from benchmarks.timing import median_times
from lakelog.actions import AddFile, CommitInfo, Metadata, Protocol, serialize_actions

from benchmarks.timing import median_times  # noqa: E402  (re-exported)

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "latest.json")
RUN_INFO = os.path.join(os.path.dirname(RESULTS), "latest-run.json")  # machine and time of latest.json


class Suite:
    def __init__(self, quick: bool):
        self.quick = quick
        self.runs = 3 if quick else 5
        self.tmp = tempfile.mkdtemp(prefix="lakelog-bench-")
        self.results: list[dict] = []

    def path(self, name: str) -> str:
        return os.path.join(self.tmp, f"{name}-{uuid.uuid4().hex[:8]}")

    def add(self, name: str, lakelog_s: float, peer: str, peer_s: float) -> None:
        r = {"name": name, "lakelog_s": round(lakelog_s, 6), "peer": peer, "peer_s": round(peer_s, 6), "ratio": round(lakelog_s / peer_s, 3)}
        self.results.append(r)
        print(f"  {name:<44} lakelog {lakelog_s:8.3f}s   {peer:<28} {peer_s:8.3f}s   ratio {r['ratio']:.2f}x", flush=True)

    # ------------------------------------------------------------ 1. writes
    def writes(self) -> None:
        import deltalake

        rows = 200_000 if self.quick else 1_000_000
        data = mixed_table(rows)
        print(f"1. write {rows:,} rows")
        for partitioned in (False, True):
            part = ["cat"] if partitioned else None
            label = "partitioned by cat (16)" if partitioned else "unpartitioned"
            if partitioned:
                raw_fn = lambda: pq.write_to_dataset(data, self.path("w-pq"), partition_cols=part)  # noqa: E731
            else:
                raw_fn = lambda: (os.makedirs(p := self.path("w-pq")), pq.write_table(data, os.path.join(p, "f.parquet")))  # noqa: E731
            lk, raw, dl = median_times(
                [
                    lambda: lakelog.write_table(self.path("w-lk"), data, partition_by=part),
                    raw_fn,
                    lambda: deltalake.write_deltalake(self.path("w-dl"), data, partition_by=part),
                ],
                self.runs,
            )
            self.add(f"write {label}", lk, "pyarrow.parquet (floor)", raw)
            self.add(f"write {label}", lk, "deltalake.write_deltalake", dl)

    # ------------------------------------------------------------ 2. reads
    def reads(self) -> None:
        import deltalake

        rows = 200_000 if self.quick else 1_000_000
        data = mixed_table(rows)
        path = self.path("read")
        for i in range(8):  # eight files, so there is something to prune
            lakelog.write_table(path, data.slice(i * rows // 8, rows // 8))
        files = [os.path.join(path, f) for f in lakelog.Table(path).files()]
        print(f"2. read {rows:,} rows in {len(files)} files")
        flt = pc.field("id") < 1000
        lk, pads, dl = median_times(
            [
                lambda: lakelog.read_table(path),
                lambda: ds.dataset(files, format="parquet").to_table(),
                lambda: deltalake.DeltaTable(path).to_pyarrow_table(),
            ],
            self.runs,
        )
        self.add("read full snapshot", lk, "pyarrow.dataset", pads)
        self.add("read full snapshot", lk, "deltalake", dl)
        lk, pads, dl = median_times(
            [
                lambda: lakelog.read_table(path, filters=flt),
                lambda: ds.dataset(files, format="parquet").to_table(filter=flt),
                lambda: deltalake.DeltaTable(path).to_pyarrow_dataset().to_table(filter=flt),
            ],
            self.runs,
        )
        self.add("read selective (id < 1000)", lk, "pyarrow.dataset", pads)
        self.add("read selective (id < 1000)", lk, "deltalake", dl)

    # ------------------------------------------------------------ 3./4. large logs
    def synthetic_log(self, commits: int, files_per_commit: int, checkpoint_every: int | None) -> str:
        """A table whose log names files that are never opened (snapshot load reads only the log)."""
        path = self.path("log")
        log = os.path.join(path, "_delta_log")
        os.makedirs(log)
        schema = pa.schema([("id", pa.int64()), ("part", pa.string())])
        meta = Metadata(id=str(uuid.uuid4()), schema_string=lakelog.schema.types.schema_to_string(schema), partition_columns=["part"],
                        configuration={"delta.checkpointInterval": str(checkpoint_every or 1_000_000)}, created_time=0)
        stats = orjson.dumps({"numRecords": 10, "minValues": {"id": 0}, "maxValues": {"id": 9}, "nullCount": {"id": 0}}).decode()
        for v in range(commits):
            actions = [CommitInfo({"timestamp": v, "operation": "WRITE"})]
            if v == 0:
                actions += [Protocol(1, 2), meta]
            actions += [
                AddFile(f"part={v % 50}/part-{v:05d}-{i:05d}-{uuid.uuid4()}.snappy.parquet", {"part": str(v % 50)}, 1000, v, True, stats)
                for i in range(files_per_commit)
            ]
            with open(os.path.join(log, f"{v:020d}.json"), "wb") as f:
                f.write(serialize_actions(actions))
        if checkpoint_every:
            last = (commits - 1) // checkpoint_every * checkpoint_every
            lakelog.Table(path, version=last).checkpoint()
        return path

    def snapshots(self) -> None:
        import deltalake

        big_commits, per = (200, 100) if self.quick else (1000, 100)
        print(f"3. snapshot load: {big_commits * per:,} files in {big_commits:,} commits with checkpoints")
        path = self.synthetic_log(big_commits, per, checkpoint_every=10)
        lk, dl = median_times([lambda: len(lakelog.Table(path).files()), lambda: len(deltalake.DeltaTable(path).file_uris())], self.runs)
        self.add(f"snapshot load {big_commits * per // 1000}k files (checkpoint)", lk, "deltalake", dl)

        n = 2_000 if self.quick else 10_000
        print(f"   snapshot load: {n:,} commits, no checkpoint")
        path = self.synthetic_log(n, 1, checkpoint_every=None)
        lk, dl = median_times([lambda: len(lakelog.Table(path).files()), lambda: len(deltalake.DeltaTable(path).file_uris())], self.runs)
        self.add(f"snapshot load {n // 1000}k commits (no checkpoint)", lk, "deltalake", dl)

        files = big_commits * per
        print(f"4. checkpoint creation for {files:,} files")
        path = self.synthetic_log(big_commits, per, checkpoint_every=None)
        cp = os.path.join(path, "_delta_log", f"{big_commits - 1:020d}.checkpoint.parquet")
        last = os.path.join(path, "_delta_log", "_last_checkpoint")

        def clear() -> None:
            for f in (cp, last):
                if os.path.exists(f):
                    os.remove(f)

        table = lakelog.Table(path)
        dlt = deltalake.DeltaTable(path)
        lk, dl = median_times([table.checkpoint, dlt.create_checkpoint], self.runs, setup=clear)
        self.add(f"checkpoint {files // 1000}k files", lk, "deltalake create_checkpoint", dl)

    # ------------------------------------------------------------ 5. commit rate
    def commits(self) -> None:
        n = 100 if self.quick else 300
        path = self.path("commits")
        lakelog.write_table(path, pa.table({"id": [0]}))
        small = pa.table({"id": [1]})
        t0 = time.perf_counter()
        for _ in range(n):
            lakelog.write_table(path, small)
        took = time.perf_counter() - t0
        per_s = n / took
        print(f"5. small appends: {per_s:.0f} commits/s on local disk (target >= 50)")
        self.results.append({"name": "small-append commits per second (local)", "lakelog_s": round(took / n, 6), "peer": "target 50/s", "peer_s": 0.02, "ratio": round((took / n) / 0.02, 3)})

    # ------------------------------------------------------------ 7. row-level changes
    def dml(self) -> None:
        from benchmarks import dml

        self.results.extend(dml.run(quick=self.quick, runs=3))

    def change_feed(self) -> None:
        from benchmarks import change_feed

        self.results.extend(change_feed.run(quick=self.quick, runs=3))

    # ------------------------------------------------------------ 9. Azure and GCS (emulators)
    def cloud_stores(self) -> None:
        from benchmarks import cloud_stores

        print("9. Azure (Azurite) and GCS (fake-gcs-server): lakelog vs deltalake on the same emulator")
        self.results.extend(cloud_stores.run(quick=self.quick, runs=self.runs))

    # ------------------------------------------------------------ 8. scale
    def scale(self) -> None:
        from benchmarks import scale

        files = 200_000 if self.quick else 1_000_000
        # One run per contender: at 1M files lakelog's filtered planning takes minutes per child.
        for r in scale.run(files=files, runs=1):
            self.results.append({**r, "name": f"scale {scale.label(files)} files: {r['name']}"})

    # ------------------------------------------------------------ 6. spark
    def spark(self) -> None:
        from benchmarks import spark as spark_bench

        print("6. Spark format('lakelog') and spark_ext.read vs Spark parquet; LakelogTable delete/merge vs the Python path")
        for r in spark_bench.run(rows=500_000 if self.quick else 2_000_000, runs=self.runs):
            self.add(r["name"], r["lakelog_s"], r["peer"], r["peer_s"])

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def machine() -> str:
    return timing_machine(f", pyarrow {pa.__version__}")


def run(quick: bool = False, spark: bool = False) -> list[dict]:
    import deltalake

    s = Suite(quick)
    print(f"lakelog {lakelog.__version__} vs deltalake {deltalake.__version__} on {machine()}{' (quick)' if quick else ''}")
    try:
        s.writes()
        s.reads()
        s.snapshots()
        s.commits()
        s.dml()
        s.change_feed()
        s.scale()
        s.cloud_stores()
        if spark:
            s.spark()
    finally:
        s.close()
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "wb") as f:
        f.write(orjson.dumps(s.results, option=orjson.OPT_INDENT_2))
    with open(RUN_INFO, "wb") as f:
        when = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        f.write(orjson.dumps({"machine": machine(), "when": when, "quick": quick, "deltalake": deltalake.__version__}, option=orjson.OPT_INDENT_2))
    print(f"wrote {RESULTS}")
    return s.results

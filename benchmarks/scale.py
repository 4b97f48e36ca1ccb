"""Scale: million-file logs, cold start and memory, lakelog against deltalake, each run a fresh process.

The table (built once per parameter set and cached, see ``table_dir``): ``--files`` add actions (1M by
default) in ``--commits`` JSON commits (1,000), ``--partitions`` partitions (50) of a string column
``part``, stats on every file (``numRecords`` and min/max/null counts of id, value, name, ts), a classic
checkpoint at the last of those commits (version 999) and 10 JSON commits after it, each adding
``files / commits / 10`` files and removing as many checkpointed ones (so the table keeps ``--files``
live files). Only the log exists: no data file is ever opened. It is written directly (orjson lines,
a pyarrow ``ParquetWriter`` streaming the checkpoint's row groups), not through either engine.

Workloads, each contender in a fresh subprocess (``python -m benchmarks.scale --child ...``):

* ``import``: ``python -c "import lakelog"`` against ``python -c "import deltalake"`` (process wall time);
* ``load``: open the latest snapshot and list its files (``Table(p).files()`` against
  ``DeltaTable(p).file_uris()``), timed after the imports;
* ``checkpoint``: open, then write a checkpoint from the 1,000 JSON commits (a hard-linked copy of
  commits 0..999 without the checkpoint; ``Table.checkpoint()`` against ``create_checkpoint()``);
* ``checkpoint-tail``: open, then write a checkpoint of the table as it stands (its checkpoint at
  version 999 and the 10 commits after it: how a table that checkpoints every few commits gets its
  next one), on a copy whose files are hard links;
* ``plan``: filtered scan planning after the table is open, for a filter on a data column with stats
  (``id`` in a range covering 1% of the files) and on the partition column (one of the 50 values):
  ``Table.files(filters)`` against ``DeltaTable.file_uris(file_pruning_predicate=filters)``, and
  ``Table.to_pyarrow_dataset(filters)`` against ``DeltaTable.to_pyarrow_dataset(file_pruning_predicate=filters)``,
  both followed by ``get_fragments(filter=...)`` (the fragments a scan would read);
* ``describe``: ``lakelog describe PATH`` on a 3-commit table, process wall time (the peer is a
  deltalake script printing the same facts).

Children run with bytecode caches (``PYTHONDONTWRITEBYTECODE`` is dropped and one untimed child imports everything
first), as an installed package runs. Peak memory is the child's peak resident set size as the kernel counts it: ``VmHWM`` of
/proc/self/status, which the child reads as its last act (exact, no sampling gaps, no extra tool).
Not ``ru_maxrss`` from ``wait4``/``RUSAGE_CHILDREN``: Linux carries the parent's peak into the child
across ``exec``, so every child would report at least this runner's own RSS. While a child runs, a watchdog reads its current RSS from /proc and kills it above ``--mem-cap-gib``
(the machine is shared) or after ``--timeout`` seconds; such a run is reported as killed.

    python -m benchmarks.scale                    # 1M files, 3 runs per contender
    python -m benchmarks.scale --files 10000000 --runs 1
    python -m benchmarks.scale --only load,import
    python -m benchmarks.scale --profile load     # cProfile (CPU time) of lakelog's child, top entries
    python -m benchmarks.scale --profile-memory   # tracemalloc + Arrow pool after a lakelog load

Results: ``results/scale-<files>.json`` (and rows for ``results/latest.json`` when run by ``make bench``).
Top-level imports here are the standard library only, so a child's imports are the engine's own.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from benchmarks.timing import machine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
GEN_VERSION = 1  # bump when the generated table changes: cached tables are keyed by it
AFTER_CHECKPOINT = 10  # JSON commits after the checkpoint
ENGINES = ("lakelog", "deltalake")
ALL_OPS = ("import", "describe", "load", "checkpoint", "checkpoint-tail", "plan")
BASE_MS = 1_700_000_000_000


# ---------------------------------------------------------------- the synthetic table

def cache_root() -> str:
    return os.environ.get("LAKELOG_BENCH_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "lakelog-benchmarks")


def table_dir(files: int, commits: int, partitions: int) -> str:
    return os.path.join(cache_root(), f"scale-{files}f-{commits}c-{partitions}p-g{GEN_VERSION}")


def _schema_string() -> str:
    fields = [("id", "long"), ("value", "double"), ("name", "string"), ("ts", "timestamp"), ("part", "string")]
    return json.dumps({"type": "struct", "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in fields]},
                      separators=(",", ":"))


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


class _Files:
    """The add actions of the table: file ``g`` (0-based, in commit order) holds ids ``g*1000 .. g*1000+999``."""

    def __init__(self, partitions: int):
        self.partitions = partitions
        self.parts = [f"p{k:02d}" for k in range(partitions)]

    def columns(self, first: int, count: int, version: int) -> tuple[list, list, list, list, list]:
        """paths, partition values, sizes, modification times, stats of files first..first+count-1."""
        ts_lo, ts_hi = _iso(BASE_MS + version * 60_000), _iso(BASE_MS + version * 60_000 + 59_999)
        mtime = BASE_MS + version * 60_000
        paths, parts, sizes, mtimes, stats = [], [], [], [], []
        for g in range(first, first + count):
            part = self.parts[g % self.partitions]
            paths.append(f"part={part}/part-{version:05d}-{g:010d}-7c3d0f8e-{g % 65536:04x}-4b1a-9e2d-{g:012x}.c000.snappy.parquet")
            parts.append(part)
            sizes.append(1_000_000 + (g * 7919) % 100_000)
            mtimes.append(mtime)
            lo = g * 1000
            v = (g % 997) / 10
            stats.append(
                f'{{"numRecords":1000,"minValues":{{"id":{lo},"value":{v},"name":"n{g:010d}","ts":"{ts_lo}"}},'
                f'"maxValues":{{"id":{lo + 999},"value":{v + 50.5},"name":"n{g:010d}zz","ts":"{ts_hi}"}},'
                f'"nullCount":{{"id":0,"value":0,"name":0,"ts":0}}}}'
            )
        return paths, parts, sizes, mtimes, stats


def _add_lines(cols: tuple, data_change: bool = True) -> list[bytes]:
    import orjson

    paths, parts, sizes, mtimes, stats = cols
    return [
        orjson.dumps({"add": {"path": p, "partitionValues": {"part": pv}, "size": s, "modificationTime": m, "dataChange": data_change, "stats": st}})
        for p, pv, s, m, st in zip(paths, parts, sizes, mtimes, stats)
    ]


def _checkpoint_schema():
    import pyarrow as pa

    smap = pa.map_(pa.string(), pa.string())
    return pa.schema([
        ("txn", pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])),
        ("add", pa.struct([("path", pa.string()), ("partitionValues", smap), ("size", pa.int64()), ("modificationTime", pa.int64()),
                           ("dataChange", pa.bool_()), ("stats", pa.string()), ("tags", smap)])),
        ("remove", pa.struct([("path", pa.string()), ("deletionTimestamp", pa.int64()), ("dataChange", pa.bool_()),
                              ("extendedFileMetadata", pa.bool_()), ("partitionValues", smap), ("size", pa.int64())])),
        ("metaData", pa.struct([("id", pa.string()), ("name", pa.string()), ("description", pa.string()),
                                ("format", pa.struct([("provider", pa.string()), ("options", smap)])), ("schemaString", pa.string()),
                                ("partitionColumns", pa.list_(pa.string())), ("configuration", smap), ("createdTime", pa.int64())])),
        ("protocol", pa.struct([("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32()),
                                ("readerFeatures", pa.list_(pa.string())), ("writerFeatures", pa.list_(pa.string()))])),
    ])


def _checkpoint_adds(schema, cols: tuple):
    """One row group of checkpoint add rows (every other column null)."""
    import numpy as np
    import pyarrow as pa

    paths, parts, sizes, mtimes, stats = cols
    n = len(paths)
    add_type = schema.field("add").type
    pv = pa.MapArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int32)), pa.array(["part"] * n), pa.array(parts))
    adds = pa.StructArray.from_arrays(
        [pa.array(paths, pa.string()), pv, pa.array(sizes, pa.int64()), pa.array(mtimes, pa.int64()),
         pa.array(np.zeros(n, dtype=bool)), pa.array(stats, pa.string()), pa.nulls(n, add_type.field("tags").type)],
        fields=list(add_type),
    )
    return pa.table({f.name: adds if f.name == "add" else pa.nulls(n, f.type) for f in schema}, schema=schema)


def build(path: str, files: int, commits: int, partitions: int) -> dict:
    """Write the table at ``path`` (see the module docstring); returns its description."""
    import orjson
    import pyarrow as pa
    import pyarrow.parquet as pq

    if files % commits:
        raise SystemExit(f"--files ({files}) must be a multiple of --commits ({commits})")
    per = files // commits
    extra = max(1, per // AFTER_CHECKPOINT)
    log = os.path.join(path, "_delta_log")
    os.makedirs(log)
    gen = _Files(partitions)
    meta = {"metaData": {"id": "5c1e8d3a-0000-4000-8000-00000000beef", "format": {"provider": "parquet", "options": {}},
                         "schemaString": _schema_string(), "partitionColumns": ["part"],
                         "configuration": {"delta.checkpointInterval": str(commits)}, "createdTime": BASE_MS}}
    protocol = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
    schema = _checkpoint_schema()
    cp_version = commits - 1
    cp_path = os.path.join(log, f"{cp_version:020d}.checkpoint.parquet")
    # Row groups of about 100k adds, written as they are produced: the generator's memory stays bounded at 10M files.
    group = max(1, 100_000 // per)
    head = {"protocol": [protocol["protocol"]], "metaData": [meta["metaData"]]}
    rows = 0
    with pq.ParquetWriter(cp_path + ".tmp", schema, compression="snappy") as writer:
        for kind in ("protocol", "metaData"):
            writer.write_table(pa.table({f.name: pa.array(head[kind], f.type) if f.name == kind else pa.nulls(1, f.type) for f in schema}, schema=schema))
            rows += 1
        pending: list[tuple] = []
        for v in range(commits):
            cols = gen.columns(v * per, per, v)
            lines = [orjson.dumps({"commitInfo": {"timestamp": BASE_MS + v * 60_000, "operation": "WRITE", "operationParameters": {"mode": "Append"}}})]
            if v == 0:
                lines += [orjson.dumps(protocol), orjson.dumps(meta)]
            lines += _add_lines(cols)
            with open(os.path.join(log, f"{v:020d}.json"), "wb") as f:
                f.write(b"\n".join(lines) + b"\n")
            pending.append(cols)
            if len(pending) == group or v == commits - 1:
                merged = tuple(sum((list(c[i]) for c in pending), []) for i in range(5))
                writer.write_table(_checkpoint_adds(schema, merged))
                rows += len(merged[0])
                pending = []
    os.rename(cp_path + ".tmp", cp_path)
    with open(os.path.join(log, "_last_checkpoint"), "wb") as f:
        f.write(orjson.dumps({"version": cp_version, "size": rows, "sizeInBytes": os.path.getsize(cp_path), "numOfAddFiles": files}))
    for k in range(AFTER_CHECKPOINT):
        v = commits + k
        removed = gen.columns(k * extra, extra, k * extra // per)  # checkpointed files, oldest first
        added = gen.columns(files + k * extra, extra, v)
        lines = [orjson.dumps({"commitInfo": {"timestamp": BASE_MS + v * 60_000, "operation": "WRITE", "operationParameters": {"mode": "Append"}}})]
        lines += [
            orjson.dumps({"remove": {"path": p, "deletionTimestamp": BASE_MS + v * 60_000, "dataChange": True, "extendedFileMetadata": True,
                                     "partitionValues": {"part": pv}, "size": s}})
            for p, pv, s in zip(removed[0], removed[1], removed[2])
        ]
        lines += _add_lines(added)
        with open(os.path.join(log, f"{v:020d}.json"), "wb") as f:
            f.write(b"\n".join(lines) + b"\n")
    return {"files": files, "commits": commits, "partitions": partitions, "checkpoint": cp_version,
            "after_checkpoint": AFTER_CHECKPOINT, "per_commit": per, "changed_per_later_commit": extra}


def ensure_table(files: int, commits: int, partitions: int) -> tuple[str, dict]:
    """The cached table for these parameters, built when missing (a ``READY`` file marks a complete one)."""
    path = table_dir(files, commits, partitions)
    ready = os.path.join(path, "READY")
    if os.path.exists(ready):
        with open(ready) as f:
            return os.path.join(path, "table"), json.load(f)
    shutil.rmtree(path, ignore_errors=True)
    print(f"building the {files:,}-file table in {path} (cached for later runs) ...", flush=True)
    t0 = time.perf_counter()
    info = build(os.path.join(path, "table"), files, commits, partitions)
    # The checkpoint workload's source: commits 0..999 only, hard-linked (never modified).
    src, dst = os.path.join(path, "table", "_delta_log"), os.path.join(path, "json-only", "_delta_log")
    os.makedirs(dst)
    for v in range(commits):
        os.link(os.path.join(src, f"{v:020d}.json"), os.path.join(dst, f"{v:020d}.json"))
    info["build_s"] = round(time.perf_counter() - t0, 1)
    info["log_bytes"] = sum(os.path.getsize(os.path.join(src, n)) for n in os.listdir(src))
    with open(ready, "w") as f:
        json.dump(info, f)
    print(f"  built in {info['build_s']} s ({info['log_bytes'] / 2**20:,.0f} MiB of log)", flush=True)
    return os.path.join(path, "table"), info


def json_only_copy(files: int, commits: int, partitions: int, dst: str) -> str:
    """A fresh table holding only commits 0..commits-1 (hard links), for one checkpoint run."""
    src = os.path.join(table_dir(files, commits, partitions), "json-only", "_delta_log")
    os.makedirs(os.path.join(dst, "_delta_log"))
    for name in os.listdir(src):
        os.link(os.path.join(src, name), os.path.join(dst, "_delta_log", name))
    return dst


def table_copy(files: int, commits: int, partitions: int, dst: str) -> str:
    """A fresh copy (hard links) of the whole table: its checkpoint and the commits after it."""
    src = os.path.join(table_dir(files, commits, partitions), "table", "_delta_log")
    os.makedirs(os.path.join(dst, "_delta_log"))
    for name in os.listdir(src):
        if os.path.isfile(os.path.join(src, name)):
            os.link(os.path.join(src, name), os.path.join(dst, "_delta_log", name))
    return dst


def small_table(path: str) -> str:
    """A 3-commit partitioned table for ``describe`` (written by deltalake: the peer of the run)."""
    import pyarrow as pa
    from deltalake import write_deltalake

    for k in range(3):
        write_deltalake(path, pa.table({"id": pa.array([k, k + 10], pa.int64()), "name": ["a", "b"], "part": [f"p{k}", f"p{k}"]}),
                        partition_by=["part"], mode="append")
    return path


def filters(files: int) -> dict[str, list[tuple]]:
    """The planning filters: ``id`` over 1% of the files (a data column with stats), one partition of 50."""
    lo = files // 2 * 1000
    return {"data": [("id", ">=", lo), ("id", "<", lo + files // 100 * 1000)], "partition": [("part", "=", "p07")]}


# ---------------------------------------------------------------- the child process

def _expression(flt: list):
    import pyarrow.compute as pc

    expr = None
    for col, op, val in flt:
        f = pc.field(col)
        e = {">=": f >= val, "<": f < val, "=": f == val}[op]
        expr = e if expr is None else expr & e
    return expr


_PEAK = "print('{\"peak_mb\": %d}' % (int([x for x in open('/proc/self/status') if x.startswith('VmHWM:')][0].split()[1]) // 1024))"


def peak_mb() -> float:
    """This process's peak RSS (MiB): VmHWM, the high-water mark of its own address space."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024


def child(spec: dict) -> dict:
    op, engine, path = spec["op"], spec["engine"], spec["path"]
    prof = None
    if spec.get("profile"):
        import cProfile

        # CPU time, not wall time: on a shared machine a child waits for a core for much of its wall time.
        prof = cProfile.Profile(time.process_time)
        prof.enable()
    t0 = time.perf_counter()
    if engine == "lakelog":
        import lakelog
    else:
        import deltalake
    out: dict = {"import_s": time.perf_counter() - t0}
    flt = [tuple(f) for f in spec.get("filter") or []]
    t1 = time.perf_counter()
    if op == "load":
        c1 = time.process_time()
        n = len(lakelog.Table(path).files()) if engine == "lakelog" else len(deltalake.DeltaTable(path).file_uris())
        out["seconds"] = time.perf_counter() - t1
        # CPU time of every thread: steadier than wall time on a shared machine (deltalake's reader is multithreaded).
        out["load_cpu_s"] = time.process_time() - c1
    elif op in ("checkpoint", "checkpoint-tail"):
        t = lakelog.Table(path) if engine == "lakelog" else deltalake.DeltaTable(path)
        out["open_s"] = time.perf_counter() - t1
        t2 = time.perf_counter()
        t.checkpoint() if engine == "lakelog" else t.create_checkpoint()
        out["write_s"] = time.perf_counter() - t2
        out["seconds"] = time.perf_counter() - t1
        n = len([x for x in os.listdir(os.path.join(path, "_delta_log")) if x.endswith(".checkpoint.parquet")])
    elif op in ("plan-files", "plan-dataset"):
        t = lakelog.Table(path) if engine == "lakelog" else deltalake.DeltaTable(path)
        out["open_s"] = time.perf_counter() - t1
        t2 = time.perf_counter()
        if op == "plan-files":
            n = len(t.files(flt)) if engine == "lakelog" else len(t.file_uris(file_pruning_predicate=flt))
        else:
            d = t.to_pyarrow_dataset(flt) if engine == "lakelog" else t.to_pyarrow_dataset(file_pruning_predicate=flt)
            n = len(list(d.get_fragments(filter=_expression(flt))))
        out["seconds"] = time.perf_counter() - t2
    else:
        raise SystemExit(f"unknown child op {op!r}")
    out["count"] = n
    out["peak_mb"] = peak_mb()
    if prof is not None:
        import io
        import pstats

        prof.disable()
        for key in ("cumulative", "tottime"):
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats(key).print_stats(spec.get("top", 30))
            out[f"profile_{key}"] = s.getvalue()
    return out


def memory_child(spec: dict) -> dict:
    """After a lakelog load: RSS, the Arrow pool, and the Python allocations tracemalloc traced, by line."""
    import tracemalloc

    import pyarrow as pa

    import lakelog

    def rss() -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    before = rss()
    tracemalloc.start(1)
    t = lakelog.Table(spec["path"])
    paths = t.files()
    snap = tracemalloc.take_snapshot()
    traced, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    after = rss()
    stats = snap.statistics("lineno")
    n = len(paths)
    top = [{"where": f"{s.traceback[0].filename.replace(ROOT + os.sep, '')}:{s.traceback[0].lineno}", "mib": round(s.size / 2**20, 1),
            "bytes_per_file": round(s.size / n), "blocks": s.count} for s in stats[:15]]
    return {"files": n, "rss_before_load_mib": round(before), "rss_after_load_mib": round(after),
            "arrow_pool_mib": round(pa.total_allocated_bytes() / 2**20), "python_traced_mib": round(traced / 2**20),
            "python_traced_peak_mib": round(peak / 2**20), "top": top}


# ---------------------------------------------------------------- running children

def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    # Children read and write bytecode caches, as an installed package has them (deltalake's are in site-packages):
    # without them every cold start would also compile lakelog's sources.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def warm_up() -> None:
    """One untimed child that imports everything a measured child may import, so bytecode caches exist."""
    code = "import lakelog, lakelog.cli, lakelog.read.scan, lakelog.expressions.sql, deltalake, pyarrow.dataset, benchmarks.scale"
    subprocess.run([sys.executable, "-c", code], env=_env(), cwd=ROOT, check=True, capture_output=True)


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def spawn(argv: list[str], timeout: float, mem_cap_gib: float) -> dict:
    """Run ``argv``; return its wall time, CPU time, exit status and what its last stdout line (JSON) says."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdout=out, stderr=err, env=_env(), cwd=ROOT)
        done = threading.Event()
        killed: list[str] = []

        def watch() -> None:
            cap = mem_cap_gib * 2**20
            while not done.wait(0.1):
                if _rss_kib(p.pid) > cap:
                    killed.append(f"killed above {mem_cap_gib:g} GiB RSS")
                elif time.perf_counter() - t0 > timeout:
                    killed.append(f"killed after {timeout:g} s")
                else:
                    continue
                p.kill()
                return

        w = threading.Thread(target=watch, daemon=True)
        w.start()
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        done.set()
        w.join()
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    r = {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "rc": p.returncode}
    if killed:
        r["killed"] = killed[0]
    elif p.returncode != 0:
        r["error"] = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit {p.returncode}"
    else:
        last = stdout.strip().splitlines()[-1] if stdout.strip() else "{}"
        try:
            r.update(json.loads(last))
        except ValueError:
            pass
    return r


def _child_argv(spec: dict) -> list[str]:
    return [sys.executable, "-m", "benchmarks.scale", "--child", json.dumps(spec)]


_DESCRIBE_PEER = """
import sys
from deltalake import DeltaTable
t = DeltaTable(sys.argv[1])
m, p = t.metadata(), t.protocol()
adds = t.get_add_actions(flatten=True)
print(t.version(), m.id, m.partition_columns, m.configuration, p.min_reader_version, p.min_writer_version, t.schema().to_json())
print(len(adds), sum(adds.column("size_bytes").to_pylist()), t.history(1)[0].get("operation"))
"""


# ---------------------------------------------------------------- the comparison

def _median(rs: list[dict], key: str) -> float | None:
    vals = [r[key] for r in rs if key in r and not r.get("killed") and not r.get("error")]
    return statistics.median(vals) if vals else None


def _fmt_s(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}s"


def _fmt_mb(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f} MiB"


class Run:
    def __init__(self, files: int, commits: int, partitions: int, runs: int, timeout: float, mem_cap_gib: float):
        self.files, self.commits, self.partitions, self.runs = files, commits, partitions, runs
        self.timeout, self.mem_cap_gib = timeout, mem_cap_gib
        self.rows: list[dict] = []
        self.tmp = tempfile.mkdtemp(prefix="lakelog-bench-scale-")

    def spawn(self, argv: list[str]) -> dict:
        return spawn(argv, self.timeout, self.mem_cap_gib)

    def compare(self, name: str, make_argv, time_key: str, prepare=None, extra_keys: tuple[str, ...] = ()) -> dict:
        """Interleaved runs (lakelog, deltalake, lakelog, ...); medians of time and peak RSS."""
        results: dict[str, list[dict]] = {e: [] for e in ENGINES}
        for i in range(self.runs):
            for engine in ENGINES:
                target = prepare(engine, i) if prepare else None
                r = self.spawn(make_argv(engine, target))
                results[engine].append(r)
                if target and target.startswith(self.tmp):
                    shutil.rmtree(target, ignore_errors=True)
        lk, dl = results["lakelog"], results["deltalake"]
        lk_s, dl_s = _median(lk, time_key), _median(dl, time_key)
        lk_mb, dl_mb = _median(lk, "peak_mb"), _median(dl, "peak_mb")
        row = {"name": name, "files": self.files, "lakelog_s": lk_s and round(lk_s, 4), "peer": "deltalake", "peer_s": dl_s and round(dl_s, 4),
               "ratio": round(lk_s / dl_s, 3) if lk_s and dl_s else None,
               "lakelog_peak_mb": lk_mb and round(lk_mb), "peer_peak_mb": dl_mb and round(dl_mb),
               "memory_ratio": round(lk_mb / dl_mb, 3) if lk_mb and dl_mb else None}
        for k in ("count", *extra_keys):
            for engine, rs in results.items():
                v = _median(rs, k)
                if v is not None:
                    row[f"{'lakelog' if engine == 'lakelog' else 'peer'}_{k}"] = round(v, 4) if isinstance(v, float) else v
        problems = {e: r.get("killed") or r.get("error") for e, rs in results.items() for r in rs if r.get("killed") or r.get("error")}
        counts = {r["count"] for rs in results.values() for r in rs if "count" in r}
        if len(counts) > 1:  # not the same work: the figures would compare nothing
            problems["count"] = f"lakelog and deltalake disagree on the number of files: {sorted(counts)}"
        if problems:
            row["problems"] = problems
        self.rows.append(row)
        mem = f", {row['memory_ratio']}x memory" if row["memory_ratio"] is not None else ""
        ratio = f"{row['ratio']:.2f}x time{mem}" if row["ratio"] is not None else "no ratio"
        print(f"  {name:<52} lakelog {_fmt_s(lk_s):>9} {_fmt_mb(lk_mb):>10}   deltalake {_fmt_s(dl_s):>9} {_fmt_mb(dl_mb):>10}   {ratio}"
              + (f"   {problems}" if problems else ""), flush=True)
        return row

    def cold_start(self) -> None:
        print("cold start (process wall time, fresh interpreter)", flush=True)
        # CPU time (user + system) too: on a loaded machine a short process's wall time is mostly waiting for a core.
        self.compare("import", lambda e, _: [sys.executable, "-c", f"import {e}\n{_PEAK}"], "wall_s", extra_keys=("cpu_s",))
        small = small_table(os.path.join(self.tmp, "small"))

        def argv(engine: str, _) -> list[str]:
            if engine == "lakelog":
                return [sys.executable, "-c", f"import sys\nfrom lakelog.cli import main\nrc = main(['describe', sys.argv[1]])\n{_PEAK}\nsys.exit(rc)", small]
            return [sys.executable, "-c", _DESCRIBE_PEER + _PEAK, small]

        self.compare("describe a small table (lakelog describe PATH)", argv, "wall_s", extra_keys=("cpu_s",))

    def load(self, path: str) -> None:
        print(f"snapshot load + list files ({self.files:,} files; time after imports)", flush=True)
        self.compare("snapshot load + list files", lambda e, _: _child_argv({"op": "load", "engine": e, "path": path}), "seconds",
                     extra_keys=("import_s", "wall_s", "load_cpu_s"))
        r = self.rows[-1]
        if r.get("lakelog_load_cpu_s") and r.get("peer_load_cpu_s"):
            print(f"  {'  CPU time of the load (all threads)':<52} lakelog {_fmt_s(r['lakelog_load_cpu_s']):>9}            deltalake "
                  f"{_fmt_s(r['peer_load_cpu_s']):>9}              {r['lakelog_load_cpu_s'] / r['peer_load_cpu_s']:.2f}x", flush=True)

    def checkpoint(self) -> None:
        print(f"checkpoint from {self.commits:,} JSON commits (open + write)", flush=True)

        def prepare(engine: str, i: int) -> str:
            return json_only_copy(self.files, self.commits, self.partitions, os.path.join(self.tmp, f"cp-{engine}-{i}"))

        self.compare(f"write a checkpoint from {self.commits:,} JSON commits", lambda e, p: _child_argv({"op": "checkpoint", "engine": e, "path": p}),
                     "seconds", prepare=prepare, extra_keys=("open_s", "write_s"))

    def checkpoint_tail(self) -> None:
        print(f"checkpoint of the table as it stands (checkpoint at {self.commits - 1} + {AFTER_CHECKPOINT} commits; open + write)", flush=True)

        def prepare(engine: str, i: int) -> str:
            return table_copy(self.files, self.commits, self.partitions, os.path.join(self.tmp, f"cpt-{engine}-{i}"))

        self.compare(f"write the next checkpoint (checkpoint + {AFTER_CHECKPOINT} commits)",
                     lambda e, p: _child_argv({"op": "checkpoint-tail", "engine": e, "path": p}),
                     "seconds", prepare=prepare, extra_keys=("open_s", "write_s"))

    def plan(self, path: str) -> None:
        print("filtered scan planning (after the table is open)", flush=True)
        for kind, flt in filters(self.files).items():
            for op, api in (("plan-files", "files / file_uris"), ("plan-dataset", "to_pyarrow_dataset + get_fragments")):
                self.compare(f"plan, {kind} filter: {api}", lambda e, _: _child_argv({"op": op, "engine": e, "path": path, "filter": flt}),
                             "seconds", extra_keys=("open_s",))

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def label(files: int) -> str:
    return f"{files // 1_000_000}M" if files % 1_000_000 == 0 else f"{files // 1000}k" if files % 1000 == 0 else str(files)


def run(files: int = 1_000_000, commits: int = 1000, partitions: int = 50, runs: int = 3, only: tuple[str, ...] = ALL_OPS,
        timeout: float = 3600, mem_cap_gib: float | None = None, write: bool = True) -> list[dict]:
    """Every selected workload; writes ``results/scale-<files>.json``; returns the result rows."""
    if mem_cap_gib is None:
        mem_cap_gib = _default_cap()
    path, info = ensure_table(files, commits, partitions) if set(only) - {"import", "describe"} else (None, {})
    warm_up()
    r = Run(files, commits, partitions, runs, timeout, mem_cap_gib)
    load_before = os.getloadavg()
    started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    print(f"8. scale: {files:,} files, {runs} run(s) per contender, fresh processes; load average {load_before[0]:.2f}", flush=True)
    try:
        if "import" in only or "describe" in only:
            r.cold_start()
        if "load" in only:
            r.load(path)
        if "checkpoint" in only:
            r.checkpoint()
        if "checkpoint-tail" in only:
            r.checkpoint_tail()
        if "plan" in only:
            r.plan(path)
    finally:
        r.close()
    if write:
        os.makedirs(RESULTS_DIR, exist_ok=True)
        out = os.path.join(RESULTS_DIR, f"scale-{label(files)}.json")
        import deltalake  # noqa: F401  (its version, for the record)

        with open(out, "w") as f:
            json.dump({"machine": machine(), "when": started, "table": info, "runs": runs, "deltalake": deltalake.__version__,
                       "load_average_before": [round(x, 2) for x in load_before],
                       "load_average_after": [round(x, 2) for x in os.getloadavg()], "rows": r.rows}, f, indent=2)
        print(f"wrote {out}", flush=True)
    return r.rows


def _default_cap() -> float:
    """Kill a child above this RSS: the machine is shared; leave 2 GiB for everyone else."""
    try:
        with open("/proc/meminfo") as f:
            avail = next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:"))
        return max(1.0, avail / 2**20 - 2)
    except (OSError, StopIteration):
        return 16.0


def profile(files: int, commits: int, partitions: int, op: str, top: int) -> None:
    path, _ = ensure_table(files, commits, partitions)
    tmp = tempfile.mkdtemp(prefix="lakelog-bench-scale-")
    try:
        if op == "checkpoint":
            path = json_only_copy(files, commits, partitions, os.path.join(tmp, "cp"))
        elif op == "checkpoint-tail":
            path = table_copy(files, commits, partitions, os.path.join(tmp, "cpt"))
        spec = {"op": op, "engine": "lakelog", "path": path, "profile": True, "top": top}
        if op.startswith("plan"):
            spec["filter"] = filters(files)["data"]
        r = spawn(_child_argv(spec), 7200, _default_cap())
        for key in ("profile_tottime", "profile_cumulative"):
            print(r.get(key, r))
        print({k: v for k, v in r.items() if not k.startswith("profile")})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] in ("--child", "--memory-child"):
        spec = json.loads(sys.argv[2])
        result = child(spec) if sys.argv[1] == "--child" else memory_child(spec)
        print(json.dumps(result), flush=True)
        os._exit(0)  # deltalake's native runtime can abort the interpreter at shutdown
    ap = argparse.ArgumentParser(prog="python -m benchmarks.scale", description="million-file logs and cold start, against deltalake")
    ap.add_argument("--files", type=int, default=1_000_000, help="add actions before the checkpoint (default 1M)")
    ap.add_argument("--commits", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=50)
    ap.add_argument("--runs", type=int, default=3, help="runs per contender (medians)")
    ap.add_argument("--only", default=",".join(ALL_OPS), help=f"comma-separated subset of {','.join(ALL_OPS)}")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds before a child is killed")
    ap.add_argument("--mem-cap-gib", type=float, default=None, help="RSS above which a child is killed (default: available memory - 2 GiB)")
    ap.add_argument("--profile", choices=("load", "checkpoint", "checkpoint-tail", "plan-files", "plan-dataset"), help="cProfile lakelog's child instead")
    ap.add_argument("--profile-memory", action="store_true", help="tracemalloc and the Arrow pool after a lakelog load")
    ap.add_argument("--top", type=int, default=30)
    a = ap.parse_args()
    if a.profile:
        profile(a.files, a.commits, a.partitions, a.profile, a.top)
    elif a.profile_memory:
        p, _ = ensure_table(a.files, a.commits, a.partitions)
        print(json.dumps(spawn([sys.executable, "-m", "benchmarks.scale", "--memory-child", json.dumps({"path": p})], 7200, _default_cap()), indent=2))
    else:
        ops = tuple(o.strip() for o in a.only.split(",") if o.strip())
        unknown = set(ops) - set(ALL_OPS)
        if unknown:
            raise SystemExit(f"--only: unknown workload(s) {sorted(unknown)}; choose from {', '.join(ALL_OPS)}")
        run(a.files, a.commits, a.partitions, a.runs, ops, a.timeout, a.mem_cap_gib)
    sys.stdout.flush()
    os._exit(0)

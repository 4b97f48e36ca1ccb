"""Row-level changes against deltalake: merge (upsert) and delete, time and peak memory, as ratios.

Workloads (both engines start from the same Delta table of ``rows`` rows in 100 files, columns id,
grp, x, s, day):

* merge: ``source_rows`` source rows (100k; 1% of them match existing keys, spread over the whole
  table, the rest are new keys) on ``target.id = source.id``, update all matched, insert all others;
* delete: the 1% of rows with ``x < 0.01`` (x is uniform, so every file holds some), copy-on-write;
* delete with deletion vectors: the same delete, lakelog on the same rows in a table created with
  ``delta.enableDeletionVectors=true`` (merge-on-read: no data file is rewritten), deltalake (which
  writes no deletion vectors) copy-on-write as above.

Every run is a fresh subprocess on a fresh copy of the table (data files hard-linked, the log copied),
so each engine pays its imports and table open outside the timed part and memory is its own: the
child reports the operation's wall time and its peak RSS increase over the RSS just before it
(``ru_maxrss`` minus the resident size after imports, table open and reading the source).

Run alone: ``python -m benchmarks.dml [--quick]`` (1M rows, 10k source rows); ``make bench`` runs it too.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = 100


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def build(path: str, rows: int, deletion_vectors: bool = False) -> None:
    """The shared starting table: ``rows`` rows in FILES files, even ids 0, 2, 4, ... in order (the same
    rows every time); ``deletion_vectors``: created with ``delta.enableDeletionVectors=true``."""
    import numpy as np
    import pyarrow as pa

    import lakelog

    rng = np.random.default_rng(7)
    per = rows // FILES
    for i in range(FILES):
        ids = np.arange(i * per, (i + 1) * per, dtype=np.int64) * 2
        data = pa.table({
            "id": ids,
            "grp": pa.array([f"g{k % 16}" for k in range(per)]),
            "x": rng.random(per),
            "s": pa.array([f"name-{k % 5000}" for k in range(per)]),
            "day": pa.array(np.full(per, 20000 + i % 30, dtype=np.int32)).cast(pa.date32()),
        })
        config = {"delta.checkpointInterval": "1000", **({"delta.enableDeletionVectors": "true"} if deletion_vectors else {})}
        lakelog.write_table(path, data, configuration=config if i == 0 else None)


def source(path: str, rows: int, source_rows: int) -> None:
    """Source rows: 1% with existing (even) ids chosen across the table, 99% new (odd) ids."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(11)
    matching = source_rows // 100
    existing = rng.choice(rows, size=matching, replace=False).astype(np.int64) * 2
    new = rng.choice(rows, size=source_rows - matching, replace=False).astype(np.int64) * 2 + 1
    ids = np.concatenate([existing, new])
    n = len(ids)
    pq.write_table(pa.table({
        "id": ids, "grp": pa.array(["new"] * n), "x": rng.random(n), "s": pa.array([f"src-{k}" for k in range(n)]),
        "day": pa.array(np.full(n, 20100, dtype=np.int32)).cast(pa.date32()),
    }), path)


def copy_table(src: str, dst: str) -> None:
    """Data files hard-linked (never modified by either engine), the log copied."""
    os.makedirs(dst)
    for name in os.listdir(src):
        s, d = os.path.join(src, name), os.path.join(dst, name)
        if name == "_delta_log":
            shutil.copytree(s, d)
        elif os.path.isfile(s):
            os.link(s, d)


# ---------------------------------------------------------------- the child process

def child(engine: str, op: str, path: str, source_path: str) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if engine == "lakelog":
        import lakelog

        t = lakelog.Table(path)
        # Load the engine before timing, as deltalake's is: DuckDB's Python binding imports pandas
        # the first time it is handed an Arrow table (a once-per-process cost of about 0.7 s).
        import lakelog.sql

        lakelog.sql.Engine().register(pa.table({"warm": [1]}))
    else:
        from deltalake import DeltaTable

        t = DeltaTable(path)
    src = pq.read_table(source_path) if op == "merge" else None
    before = _rss_mb()
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    if op in ("delete", "delete-dv"):
        m = t.delete("x < 0.01")
        touched = m["num_deleted_rows"]
    elif engine == "lakelog":
        m = t.merge(src, "target.id = source.id").when_matched_update_all().when_not_matched_insert_all().execute()
        touched = m["num_target_rows_updated"] + m["num_target_rows_inserted"]
    else:
        m = (t.merge(src, "target.id = source.id", source_alias="source", target_alias="target")
             .when_matched_update_all().when_not_matched_insert_all().execute())
        touched = m["num_target_rows_updated"] + m["num_target_rows_inserted"]
    seconds = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    peak = cpu1.ru_maxrss / 1024
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {"seconds": seconds, "cpu_s": cpu, "peak_mb": max(0.0, peak - before), "rows": touched}


def _run_child(engine: str, op: str, path: str, source_path: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-m", "benchmarks.dml", "--child", engine, op, path, source_path],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=3600)
    if r.returncode != 0:
        raise RuntimeError(f"{engine} {op} failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- the comparison

def run(quick: bool = False, runs: int | None = None, add=None) -> list[dict]:
    """Both workloads, interleaved runs; returns suite result rows (``add(name, lk_s, peer, peer_s)``)."""
    rows, source_rows = (1_000_000, 10_000) if quick else (10_000_000, 100_000)
    runs = runs or 3
    tmp = tempfile.mkdtemp(prefix="lakelog-bench-dml-")
    out = []
    try:
        base = os.path.join(tmp, "base")
        print(f"7. row-level changes: {rows:,}-row table in {FILES} files, merge of {source_rows:,} source rows, delete of 1%", flush=True)
        build(base, rows)
        base_dv = os.path.join(tmp, "base-dv")
        build(base_dv, rows, deletion_vectors=True)
        src = os.path.join(tmp, "source.parquet")
        source(src, rows, source_rows)
        for op in ("merge", "delete", "delete-dv"):
            results: dict[str, list[dict]] = {"lakelog": [], "deltalake": []}
            for i in range(runs):
                for engine in ("lakelog", "deltalake"):
                    path = os.path.join(tmp, f"{op}-{engine}-{i}")
                    copy_table(base_dv if op == "delete-dv" and engine == "lakelog" else base, path)
                    results[engine].append(_run_child(engine, op, path, src))
                    shutil.rmtree(path, ignore_errors=True)
            assert len({r["rows"] for rs in results.values() for r in rs}) == 1, results  # same work
            lk_s = statistics.median(r["seconds"] for r in results["lakelog"])
            dl_s = statistics.median(r["seconds"] for r in results["deltalake"])
            lk_mb = statistics.median(r["peak_mb"] for r in results["lakelog"])
            dl_mb = statistics.median(r["peak_mb"] for r in results["deltalake"])
            name = {"merge": f"merge {source_rows // 1000}k into {rows // 1_000_000}M (1% match)",
                    "delete": f"delete 1% of {rows // 1_000_000}M rows",
                    "delete-dv": f"delete 1% of {rows // 1_000_000}M rows, deletion vectors"}[op]
            row = {"name": name, "lakelog_s": round(lk_s, 4), "peer": "deltalake (copy-on-write)", "peer_s": round(dl_s, 4),
                   "ratio": round(lk_s / dl_s, 3), "lakelog_peak_mb": round(lk_mb), "peer_peak_mb": round(dl_mb),
                   "memory_ratio": round(lk_mb / dl_mb, 3) if dl_mb else None}
            out.append(row)
            print(f"  {name:<44} lakelog {lk_s:8.3f}s {lk_mb:7.0f} MiB   deltalake {dl_s:8.3f}s {dl_mb:7.0f} MiB   "
                  f"ratio {row['ratio']:.2f}x time, {row['memory_ratio']}x memory", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child(*sys.argv[2:6])), flush=True)
        sys.stdout.flush()
        os._exit(0)  # deltalake's runtime can abort the interpreter at shutdown
    ap = argparse.ArgumentParser(prog="python -m benchmarks.dml")
    ap.add_argument("--quick", action="store_true", help="1M rows and 10k source rows")
    ap.add_argument("--runs", type=int, default=None)
    a = ap.parse_args()
    run(quick=a.quick, runs=a.runs)
    sys.stdout.flush()
    os._exit(0)

"""Row-level changes against deltalake: time and peak memory, as ratios (issue: DML at delta-rs speed).

Workloads (both engines start from the same Delta table of ``rows`` rows in 100 files of ids in order,
columns id, grp, x, s, day):

* merge: ``source_rows`` source rows (100k; 1% of them match existing keys spread over the whole table,
  the rest are new keys) on ``target.id = source.id``, update all matched, insert all others;
* merge-clustered: the same, with the matching keys all in one file's id range;
* delete 1% (``x < 0.01``: x is uniform, so every file holds some) and delete 50% (``x < 0.5``);
* update 1%: ``s = 'updated'`` where ``x < 0.01``;
* delete with deletion vectors: the 1% delete, lakelog on a copy of the same table (the same files)
  with ``delta.enableDeletionVectors=true`` set (merge-on-read), deltalake copy-on-write as above; after
  each delete (and the copy-on-write one) the whole table is read back in the same process, afresh;
* upsert one row (``--upsert-rows N``, 50M in the issue): a 1-row merge into an N-row table.

Every run is a fresh subprocess on a fresh copy of the table (data files hard-linked, the log copied),
measured two ways, each engine interleaved with the other:

* the operation alone: each engine pays its imports and table open outside the timed part (lakelog
  also loads its SQL engine first, as deltalake's is loaded by its import, and reads the live files,
  which ``Table(path)`` leaves to first use and ``DeltaTable(path)`` reads when it opens) and memory is its own: the
  child reports the operation's wall time and its peak resident memory above the resident size just
  before it (``VmHWM`` minus ``VmRSS`` from ``/proc/self/status``: ``ru_maxrss`` survives ``exec`` and can
  report the parent's peak);
* the whole script, as a user's script pays it: the wall time of the fresh process from its start to its
  end (interpreter start, ``import``, table open, reading a merge's source with pyarrow, the operation),
  and its whole peak resident memory (``VmHWM``).

Run alone: ``python -m benchmarks.dml [--rows N] [--quick] [--ops merge,delete,...] [--upsert-rows N]
[--arrow-pool jemalloc] [--modes op,script]`` (default 4M rows; ``--quick`` 1M rows, 10k source rows;
``--arrow-pool``: Arrow's default memory pool in the children, as ``ARROW_DEFAULT_MEMORY_POOL`` sets it;
``--modes``: the operation alone, the whole script, or both, the default); ``make bench`` runs it too.
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


def _status_mb(key: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def _rss_mb() -> float:
    return _status_mb("VmRSS")


def _reset_peak() -> None:
    """Start VmHWM afresh from the current resident size (Linux >= 4.0: writing 5 to clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass  # (then the peak includes the set-up before the operation, never less than the truth)


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


def source(path: str, rows: int, source_rows: int, clustered: bool = False) -> None:
    """Source rows: 1% with existing (even) ids chosen across the table (``clustered``: within one
    file's id range), 99% new (odd) ids."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(11)
    matching = min(source_rows // 100, rows // FILES) if clustered else source_rows // 100
    if source_rows == 1:
        matching = 1  # the 1-row upsert updates a row in the middle of the table
        existing = np.array([rows // 2 * 2], dtype=np.int64)
    elif clustered:
        first = (FILES // 2) * (rows // FILES)
        existing = (first + rng.choice(rows // FILES, size=matching, replace=False)).astype(np.int64) * 2
    else:
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

def child(engine: str, op: str, path: str, source_path: str, mode: str = "op") -> dict:
    """One run; ``mode`` "op": the operation alone, measured here; "script": what a script does (nothing
    loaded beforehand), timed by the parent from process start to exit."""
    if engine == "lakelog":
        import lakelog

        t = lakelog.Table(path)
        if mode == "op":
            # Load the engine before timing, as deltalake's is: pyarrow imports pandas the first time it
            # builds an array, and so does DuckDB's Python binding when handed an Arrow table (together
            # about 1 s once per process, paid by the whole script).
            import pyarrow as pa

            import lakelog.expressions.sql

            lakelog.expressions.sql.Engine().register(pa.table({"warm": [1]}))
            # The live files, which Table(path) reads on first use (deltalake's DeltaTable(path) reads them when opened).
            t.files()
    elif engine == "deltalake":
        from deltalake import DeltaTable

        t = DeltaTable(path)
    else:  # "pyarrow": the floor of a copy-on-write delete or update, no table log at all
        import pyarrow.compute  # noqa: F401
        import pyarrow.parquet  # noqa: F401

        t = None
    if op.startswith("merge") or op == "upsert-1":
        import pyarrow.parquet as pq

        src = pq.read_table(source_path)
    else:
        src = None
    before = _rss_mb()
    _reset_peak()
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    if engine == "pyarrow":
        touched = _pyarrow_rewrite(path, op)
    elif op in ("delete", "delete-dv", "delete-50"):
        m = t.delete("x < 0.5" if op == "delete-50" else "x < 0.01")
        touched = m["num_deleted_rows"]
    elif op == "update":
        if engine == "lakelog":
            m = t.update({"s": "'updated'"}, "x < 0.01")
        else:
            m = t.update(updates={"s": "'updated'"}, predicate="x < 0.01")
        touched = m["num_updated_rows"]
    elif engine == "lakelog":
        m = t.merge(src, "target.id = source.id").when_matched_update_all().when_not_matched_insert_all().execute()
        touched = m["num_target_rows_updated"] + m["num_target_rows_inserted"]
    else:
        m = (t.merge(src, "target.id = source.id", source_alias="source", target_alias="target")
             .when_matched_update_all().when_not_matched_insert_all().execute())
        touched = m["num_target_rows_updated"] + m["num_target_rows_inserted"]
    seconds = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    peak = _status_mb("VmHWM")
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    out = {"seconds": seconds, "cpu_s": cpu, "peak_mb": max(0.0, peak - before), "process_peak_mb": peak, "rows": touched}
    if engine == "lakelog":  # live bytes at their peak in Arrow's pool (since start-up), beside the resident peak
        import pyarrow as pa

        out["arrow_peak_mb"] = pa.default_memory_pool().max_memory() / 2**20
    if mode == "op" and op in ("delete", "delete-dv") and engine != "pyarrow":
        # What the delete left costs its readers: the whole table read back, opened afresh (deletion
        # vectors applied by lakelog; deltalake reads its own copy-on-write result).
        t0 = time.perf_counter()
        if engine == "lakelog":
            n = lakelog.Table(path).to_pyarrow().num_rows
        else:
            n = DeltaTable(path).to_pyarrow_table().num_rows
        out["read_s"], out["read_rows"] = time.perf_counter() - t0, n
    return out


def _pyarrow_rewrite(path: str, op: str) -> int:
    """What a copy-on-write delete or update costs pyarrow alone: each data file read once (every column),
    filtered or given its new values, written beside it with the source's dictionary choice per column
    (as lakelog's rewrite keeps it), on two threads; no stats, no log."""
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    limit = 0.5 if op == "delete-50" else 0.01

    def one(name: str) -> int:
        f = pq.ParquetFile(os.path.join(path, name))
        rg = f.metadata.row_group(0)
        dictionary = [rg.column(i).path_in_schema for i in range(rg.num_columns) if any("DICTIONARY" in e for e in rg.column(i).encodings)]
        t = f.read()
        hit = pc.fill_null(pc.less(t["x"], limit), False)
        n = pc.sum(hit).as_py() or 0
        if not n:
            return 0
        if op == "update":
            i = t.schema.get_field_index("s")
            t = t.set_column(i, t.schema.field(i), pc.if_else(hit, pa.scalar("updated", t.schema.field(i).type), t["s"]))
        else:
            t = t.filter(pc.invert(hit))
        pq.write_table(t, os.path.join(path, "rewritten-" + name), use_dictionary=dictionary)
        return n

    names = sorted(n for n in os.listdir(path) if n.endswith(".parquet"))
    with ThreadPoolExecutor(2) as pool:
        return sum(pool.map(one, names))


def _run_child(engine: str, op: str, path: str, source_path: str, arrow_pool: str | None = None, mode: str = "op") -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    if arrow_pool:  # (read once, when pyarrow is imported)
        env["ARROW_DEFAULT_MEMORY_POOL"] = arrow_pool
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "benchmarks.dml", "--child", engine, op, path, source_path, mode],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=3600)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{engine} {op} failed: {r.stderr[-2000:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    if mode == "script":  # the whole process, as a script pays it
        out["seconds"], out["peak_mb"] = wall, out["process_peak_mb"]
    return out


# ---------------------------------------------------------------- the comparison

OPS = ("merge", "merge-clustered", "delete", "delete-50", "update", "delete-dv")
MODES = ("op", "script")
NAMES = {"merge": "merge {k}k into {m}M (1% match, spread)", "merge-clustered": "merge {k}k into {m}M (1% match, one file)",
         "delete": "delete 1% of {m}M rows", "delete-50": "delete 50% of {m}M rows", "update": "update 1% of {m}M rows",
         "delete-dv": "delete 1% of {m}M rows, deletion vectors", "upsert-1": "upsert 1 row into {m}M rows"}


def run(quick: bool = False, runs: int | None = None, add=None, rows: int | None = None, ops=OPS, upsert_rows: int | None = None,
        arrow_pool: str | None = None, modes=MODES, floor: bool = False) -> list[dict]:
    """The workloads, interleaved runs; returns suite result rows. ``arrow_pool``: Arrow's default memory
    pool in every child (``ARROW_DEFAULT_MEMORY_POOL``: jemalloc, mimalloc or system; None: pyarrow's default);
    ``modes``: "op" (the operation alone) and/or "script" (the whole fresh process); ``floor``: also pyarrow
    alone doing a delete's or update's per-file rewrite (``_pyarrow_rewrite``), interleaved with the two."""
    import compileall

    # The children import lakelog's modules as an installed package would: from compiled bytecode (pip
    # compiles on install; a checkout run with PYTHONDONTWRITEBYTECODE recompiles every module it imports).
    compileall.compile_dir(os.path.join(ROOT, "lakelog"), quiet=1)
    rows = rows or (1_000_000 if quick else 4_000_000)
    source_rows = 10_000 if quick else 100_000
    runs = runs or 3
    tmp = tempfile.mkdtemp(prefix="lakelog-bench-dml-")
    out = []
    try:
        base = os.path.join(tmp, "base")
        print(f"7. row-level changes: {rows:,}-row table in {FILES} files, merges of {source_rows:,} source rows, "
              f"deletes and updates" + (f"; Arrow's memory pool: {arrow_pool}" if arrow_pool else ""), flush=True)
        plan = [(op, rows) for op in ops] + ([("upsert-1", upsert_rows)] if upsert_rows else [])
        bases: dict[tuple, str] = {}
        for op, n in plan:
            key = (n, op == "delete-dv")
            if key not in bases:
                bases[key] = os.path.join(tmp, f"base-{n}-{'dv' if key[1] else 'cow'}")
                if key[1]:  # the copy-on-write table with deletion vectors turned on: the same files and rows
                    cow = bases.setdefault((n, False), os.path.join(tmp, f"base-{n}-cow"))
                    if not os.path.exists(cow):
                        build(cow, n)
                    copy_table(cow, bases[key])
                    import lakelog

                    lakelog.Table(bases[key]).set_properties({"delta.enableDeletionVectors": "true"})
                else:
                    build(bases[key], n)
        for op, n in plan:
            src = os.path.join(tmp, f"source-{op}.parquet")
            if op.startswith("merge") or op == "upsert-1":
                source(src, n, 1 if op == "upsert-1" else source_rows, clustered=op == "merge-clustered")
            engines = ("lakelog", "deltalake") + (("pyarrow",) if floor and op in ("delete", "delete-50", "update") else ())
            results = {(m, e): [] for m in modes for e in engines}
            for i in range(runs):
                for mode in modes:
                    for engine in engines:
                        path = os.path.join(tmp, f"{op}-{engine}-{i}")
                        copy_table(bases[(n, op == "delete-dv" and engine == "lakelog")], path)
                        results[(mode, engine)].append(_run_child(engine, op, path, src, arrow_pool, mode))
                        shutil.rmtree(path, ignore_errors=True)
            assert len({r["rows"] for rs in results.values() for r in rs}) == 1, results  # same work
            for mode in modes:
                lk, dl = results[(mode, "lakelog")], results[(mode, "deltalake")]
                lk_s = statistics.median(r["seconds"] for r in lk)
                dl_s = statistics.median(r["seconds"] for r in dl)
                lk_mb = statistics.median(r["peak_mb"] for r in lk)
                dl_mb = statistics.median(r["peak_mb"] for r in dl)
                name = (NAMES[op].format(k=source_rows // 1000, m=n // 1_000_000) + (", whole script" if mode == "script" else "")
                        + (f" ({arrow_pool})" if arrow_pool else ""))
                row = {"name": name, "lakelog_s": round(lk_s, 4), "peer": "deltalake (copy-on-write)", "peer_s": round(dl_s, 4),
                       "ratio": round(lk_s / dl_s, 3), "lakelog_peak_mb": round(lk_mb), "peer_peak_mb": round(dl_mb),
                       "memory_ratio": round(lk_mb / dl_mb, 3) if dl_mb else None,
                       "lakelog_arrow_peak_mb": round(statistics.median(r["arrow_peak_mb"] for r in lk))}
                out.append(row)
                print(f"  {name:<62} lakelog {lk_s:7.3f}s {lk_mb:6.0f} MiB   deltalake {dl_s:7.3f}s {dl_mb:6.0f} MiB   "
                      f"ratio {row['ratio']:.2f}x time, {row['memory_ratio']}x memory (lakelog's live Arrow peak "
                      f"{row['lakelog_arrow_peak_mb']} MiB)", flush=True)
                if all("read_s" in r for r in lk + dl):
                    row.update(lakelog_read_s=round(statistics.median(r["read_s"] for r in lk), 4),
                               peer_read_s=round(statistics.median(r["read_s"] for r in dl), 4))
                    assert len({r["read_rows"] for r in lk + dl}) == 1, (lk, dl)
                    print(f"  {'  then the whole table read back':<62} lakelog {row['lakelog_read_s']:7.3f}s            "
                          f"deltalake {row['peer_read_s']:7.3f}s", flush=True)
                if (mode, "pyarrow") in results:
                    pa_s = statistics.median(r["seconds"] for r in results[(mode, "pyarrow")])
                    pa_mb = statistics.median(r["peak_mb"] for r in results[(mode, "pyarrow")])
                    row.update(floor_s=round(pa_s, 4), floor_peak_mb=round(pa_mb))
                    print(f"  {'  floor: pyarrow alone rewriting the files':<62} pyarrow {pa_s:7.3f}s {pa_mb:6.0f} MiB   "
                          f"lakelog/floor {lk_s / pa_s:.2f}x, deltalake/floor {dl_s / pa_s:.2f}x", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child(*sys.argv[2:7])), flush=True)
        sys.stdout.flush()
        os._exit(0)  # deltalake's runtime can abort the interpreter at shutdown
    ap = argparse.ArgumentParser(prog="python -m benchmarks.dml")
    ap.add_argument("--quick", action="store_true", help="1M rows and 10k source rows")
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--rows", type=int, default=None, help="table rows (default 4M; the issue also asks for 40M)")
    ap.add_argument("--ops", default=",".join(OPS), help=f"comma-separated, of {','.join(OPS)}")
    ap.add_argument("--upsert-rows", type=int, default=None, help="also a 1-row upsert into a table of this many rows (50M in the issue)")
    ap.add_argument("--arrow-pool", choices=("jemalloc", "mimalloc", "system"), default=None,
                    help="Arrow's default memory pool in every child (ARROW_DEFAULT_MEMORY_POOL; default: pyarrow's, mimalloc)")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated: op (the operation alone), script (the whole fresh process)")
    ap.add_argument("--floor", action="store_true", help="also pyarrow alone rewriting the files (deletes and the update)")
    a = ap.parse_args()
    run(quick=a.quick, runs=a.runs, rows=a.rows, ops=[o for o in a.ops.split(",") if o], upsert_rows=a.upsert_rows, arrow_pool=a.arrow_pool,
        modes=[m for m in a.modes.split(",") if m], floor=a.floor)
    sys.stdout.flush()
    os._exit(0)

"""Writing 1M rows as a script pays it: lakelog against pyarrow's own ``write_table`` (and deltalake), each
run a fresh process from interpreter start to exit, and the write alone inside the same processes.

Every child reads the same mixed-type rows (benchmarks.data, 1M rows, written once as a Parquet file)
with ``pyarrow.parquet.read_table`` and writes them: ``lakelog.write_table(path, t)`` (a new table),
``pyarrow.parquet.write_table(t, path/f.parquet)`` (the floor: no log, no stats, no fsync) or
``deltalake.write_deltalake(path, t)``. Contenders run interleaved after one untimed run each (which also
leaves the bytecode caches an installed package has). Peak memory is the child's ``VmHWM``.

    python -m benchmarks.write_process            # 11 runs per contender
    python -m benchmarks.write_process --runs 21 --rows 1000000

Top-level imports here are the standard library only, so a child's imports are its own.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks.timing import machine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = """
import time
t0 = time.perf_counter()
import pyarrow.parquet as pq
t = pq.read_table({src!r})
{imports}
t1 = time.perf_counter()
{write}
t2 = time.perf_counter()
with open("/proc/self/status") as f:
    peak = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) / 1024
import json, os, sys
print(json.dumps({{"write_s": t2 - t1, "peak_mb": peak}}), flush=True)
os._exit(0)
"""

CONTENDERS = {
    "lakelog": ("import lakelog", "lakelog.write_table({dst!r}, t)"),
    "pyarrow": ("import os", "os.makedirs({dst!r}); pq.write_table(t, os.path.join({dst!r}, 'f.parquet'))"),
    "deltalake": ("import deltalake", "deltalake.write_deltalake({dst!r}, t)"),
}


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONWARNINGS", None)
    return env


def _run(name: str, src: str, dst: str) -> dict:
    imports, write = CONTENDERS[name]
    code = _CHILD.format(src=src, imports=imports, write=write.format(dst=dst))
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=600)
    wall = time.perf_counter() - t0
    if r.returncode:
        raise RuntimeError(f"{name}: {r.stderr[-2000:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["process_s"] = wall
    return out


def run(rows: int = 1_000_000, runs: int = 11) -> list[dict]:
    import pyarrow.parquet as pq

    from benchmarks.data import mixed_table

    tmp = tempfile.mkdtemp(prefix="lakelog-bench-write-")
    try:
        src = os.path.join(tmp, "source.parquet")
        pq.write_table(mixed_table(rows), src)
        results: dict[str, list[dict]] = {n: [] for n in CONTENDERS}
        for i in range(runs + 1):
            for name in CONTENDERS:
                dst = os.path.join(tmp, f"{name}-{i}")
                r = _run(name, src, dst)
                shutil.rmtree(dst, ignore_errors=True)
                if i:  # the first run of each: untimed
                    results[name].append(r)
        med = {n: {k: statistics.median(r[k] for r in rs) for k in ("write_s", "process_s", "peak_mb")} for n, rs in results.items()}
        print(f"write {rows:,} rows, fresh processes, {runs} runs each; {machine()}; load average {os.getloadavg()[0]:.2f}")
        for n, m in med.items():
            print(f"  {n:<10} write {m['write_s']:.3f} s   whole process {m['process_s']:.3f} s   peak {m['peak_mb']:.0f} MiB")
        out = []
        for peer in ("pyarrow", "deltalake"):
            lk, p = med["lakelog"], med[peer]
            row = {"name": f"write {rows // 1_000_000 or rows}{'M' if rows >= 1_000_000 else ''} rows", "peer": peer,
                   "write_ratio": round(lk["write_s"] / p["write_s"], 3), "process_ratio": round(lk["process_s"] / p["process_s"], 3),
                   "memory_ratio": round(lk["peak_mb"] / p["peak_mb"], 3), "lakelog": lk, "peer_figures": p}
            out.append(row)
            print(f"  lakelog / {peer:<10} write {row['write_ratio']:.2f}x   whole process {row['process_ratio']:.2f}x   peak memory {row['memory_ratio']:.2f}x")
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(prog="python -m benchmarks.write_process")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=11)
    a = ap.parse_args()
    run(a.rows, a.runs)

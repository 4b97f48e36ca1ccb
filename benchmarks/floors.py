"""Floors beside the round-4 targets: what a fresh process pays to import the engines a script loads,
and pyarrow alone reading and writing back the checkpoint of ``benchmarks.scale``'s 1M-file table.

* import times: ``python -c pass``, ``import pyarrow``, ``import pyarrow, pyarrow.compute,
  pyarrow.parquet`` (what a lakelog row-level change loads), ``import deltalake``, ``import duckdb;
  duckdb.connect()`` (what a lakelog merge loads for its join); medians of ``--runs`` fresh processes
  after one untimed run each;
* the checkpoint: a fresh process imports ``pyarrow.parquet``, reads every column of the table's
  checkpoint (1M add rows, pyarrow's own threads) and writes it back to memory (snappy, 131,072-row
  groups): no replay, no checks, no log; median of three after one untimed run.

    python -m benchmarks.floors [--runs 11] [--files 1000000]

Top-level imports here are the standard library only, so a child's imports are its own.
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import subprocess
import sys
import time

IMPORTS = [
    ("python -c pass", "pass"),
    ("import pyarrow", "import pyarrow"),
    ("import pyarrow, pyarrow.compute, pyarrow.parquet", "import pyarrow, pyarrow.compute, pyarrow.parquet"),
    ("import deltalake", "import deltalake"),
    ("import duckdb; duckdb.connect()", "import duckdb; duckdb.connect()"),
]

_COPY = """
import io, time
t0 = time.perf_counter()
import pyarrow.parquet as pq
t = pq.read_table({path!r})
buf = io.BytesIO()
pq.write_table(t, buf, compression="snappy", row_group_size=131072)
print(time.perf_counter() - t0)
"""


def _wall(code: str, runs: int) -> float:
    times = []
    for _ in range(runs + 1):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times[1:])


def run(runs: int = 11, files: int = 1_000_000) -> dict:
    from benchmarks.scale import ensure_table

    out = {}
    for label, code in IMPORTS:
        out[label] = _wall(code, runs)
        print(f"  {label:<55} {out[label]:.3f} s (median of {runs} fresh processes)", flush=True)
    table, _ = ensure_table(files, 1000, 50)
    checkpoint = sorted(glob.glob(os.path.join(table, "_delta_log", "*.checkpoint.parquet")))[-1]
    code = _COPY.format(path=checkpoint)
    copies = [float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout) for _ in range(4)][1:]
    out["checkpoint copy"] = statistics.median(copies)
    print(f"  pyarrow alone: import, read the {files:,}-row checkpoint, write it back: {out['checkpoint copy']:.3f} s", flush=True)
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(prog="python -m benchmarks.floors")
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--files", type=int, default=1_000_000)
    a = ap.parse_args()
    run(a.runs, a.files)

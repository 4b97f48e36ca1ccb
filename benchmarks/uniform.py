"""UniForm's cost: the Iceberg step's share of a commit, on a table with UniForm against the same table
without it (both with column mapping and icebergCompatV2, so only the Iceberg step differs).

    python -m benchmarks.uniform              # 1-row appends (20 runs) and 1M-row appends (5 runs)
    python -m benchmarks.uniform --runs 5 --rows 200000

Each contender appends to its own table, interleaved (a, b, a, b, ...) after a warm-up; the tables
grow as the runs go, alike. The Iceberg step is also timed alone (inside the UniForm commits), which is
steadier than the difference of two noisy medians; the first UniForm commit of a process also imports
``lakelog.iceberg``'s modules, timed apart.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import pyarrow as pa

from benchmarks.data import mixed_table
from benchmarks.timing import machine, median_times

COMPAT = {"delta.columnMapping.mode": "name", "delta.enableIcebergCompatV2": "true"}
UNIFORM = {**COMPAT, "delta.universalFormat.enabledFormats": "iceberg"}


def _import_cost() -> float:
    code = "import time, lakelog; t = time.perf_counter(); import lakelog.iceberg.catch_up; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.uniform")
    ap.add_argument("--runs", type=int, default=20, help="runs of the one-row append (the 1M-row append: a quarter, at least 3)")
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the large append")
    args = ap.parse_args()
    import lakelog
    from lakelog import iceberg

    step: list[float] = []
    sync = iceberg.sync

    def timed_sync(*a, **k):
        t0 = time.perf_counter()
        try:
            return sync(*a, **k)
        finally:
            step.append(time.perf_counter() - t0)

    iceberg.sync = timed_sync  # the commit hook calls it through the module
    print(f"machine: {machine()}")
    print(f"import lakelog.iceberg.catch_up (once per process): {_import_cost() * 1000:.1f} ms")
    with tempfile.TemporaryDirectory() as d:
        plain, uni = os.path.join(d, "plain"), os.path.join(d, "uniform")
        one = pa.table({"id": pa.array([1], pa.int64()), "name": ["x"]})
        lakelog.write_table(plain, one, configuration=COMPAT)
        lakelog.write_table(uni, one, configuration=UNIFORM)
        step.clear()
        t_plain, t_uni = median_times([lambda: lakelog.write_table(plain, one, mode="append"),
                                       lambda: lakelog.write_table(uni, one, mode="append")], args.runs)
        s_med = statistics.median(step)
        print(f"one-row append: {t_plain * 1000:.1f} ms without UniForm, {t_uni * 1000:.1f} ms with "
              f"({(t_uni / t_plain - 1) * 100:+.0f}%); the Iceberg step alone: {s_med * 1000:.2f} ms = "
              f"{s_med / t_plain * 100:.1f}% of the plain commit (target <= 20%)")
        big = mixed_table(args.rows)
        bplain, buni = os.path.join(d, "bplain"), os.path.join(d, "buniform")
        lakelog.write_table(bplain, big.slice(0, 10), configuration=COMPAT)
        lakelog.write_table(buni, big.slice(0, 10), configuration=UNIFORM)
        step.clear()
        t_plain, t_uni = median_times([lambda: lakelog.write_table(bplain, big, mode="append"),
                                       lambda: lakelog.write_table(buni, big, mode="append")], max(3, args.runs // 4))
        s_med = statistics.median(step)
        print(f"{args.rows:,}-row append: {t_plain:.3f} s without UniForm, {t_uni:.3f} s with "
              f"({(t_uni / t_plain - 1) * 100:+.1f}%); the Iceberg step alone: {s_med * 1000:.2f} ms = "
              f"{s_med / t_plain * 100:.2f}% of the plain append (target <= 5%)")
        t0 = time.perf_counter()
        lakelog.Table(uni).sync_iceberg()
        print(f"sync_iceberg with nothing to do: {(time.perf_counter() - t0) * 1000:.1f} ms")


if __name__ == "__main__":
    main()

"""UniForm's cost: what the Iceberg step adds to a commit as its caller sees it, on a table with UniForm
against the same table without it (both with column mapping and icebergCompatV2, so only the Iceberg step
differs), and the step's own time (on the worker thread that runs it after the commit returns).

    python -m benchmarks.uniform              # 1-row appends (20 runs) and 1M-row appends (5 runs)
    python -m benchmarks.uniform --runs 5 --rows 200000

Each contender appends to its own table, interleaved (a, b, a, b, ...) after a warm-up; the tables grow as
the runs go, alike. UniForm's part of the commit (the hand-off to the worker thread, or the whole step when
synchronous) is timed inside the commits, which is steadier than the difference of two noisy medians.
Each run starts with no Iceberg step pending (``lakelog.iceberg.flush()``, untimed) and is one append
(settled: the commit alone) or five in a row (back to back: the appends after the first share the
process, and its GIL, with the steps of those before, as a loop of appends does). The step alone is also
given as a share of the plain commit: what a synchronous step (``LAKELOG_UNIFORM_ICEBERG_SYNC_CONVERT=true``,
also measured) adds. The first UniForm commit of a process also imports ``lakelog.iceberg``'s modules,
timed apart.
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
SYNC_ENV = "LAKELOG_UNIFORM_ICEBERG_SYNC_CONVERT"


def _import_cost() -> float:
    code = "import time, lakelog; t = time.perf_counter(); import lakelog.iceberg.catch_up; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout)


def _timed(module, name: str) -> list[float]:
    """Replace ``module.name`` by a wrapper that appends each call's duration to the returned list."""
    times: list[float] = []
    fn = getattr(module, name)

    def timed(*a, **k):
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            times.append(time.perf_counter() - t0)

    setattr(module, name, timed)
    return times


def _compare(label: str, plain: str, uni: str, data: pa.Table, runs: int, step: list[float], handoff: list[float], *, burst: int, unit: str) -> None:
    """Median time per append of ``burst`` appends in a row to each table, interleaved; each run starts with
    no step pending (``flush``, untimed), so the appends of a burst after the first meet their steps."""
    import lakelog
    from lakelog import iceberg

    def appends(path):
        return lambda: [lakelog.write_table(path, data, mode="append") for _ in range(burst)]

    iceberg.flush()
    step.clear()
    handoff.clear()
    t_plain, t_uni = (t / burst for t in median_times([appends(plain), appends(uni)], runs, setup=iceberg.flush))
    iceberg.flush()
    s_med, h_med = statistics.median(step), statistics.median(handoff)
    scale, fmt = (1000, ".2f") if unit == "ms" else (1, ".3f")
    print(f"{label}: commit as the caller sees it {t_plain * scale:{fmt}} {unit} without UniForm, {t_uni * scale:{fmt}} {unit} with "
          f"({(t_uni / t_plain - 1) * 100:+.1f}%); inside the commit, UniForm's part {h_med * 1000:.3f} ms = {h_med / t_uni * 100:.1f}% "
          f"of the UniForm commit (target <= 10%); the step alone {s_med * 1000:.2f} ms = {s_med / t_plain * 100:.1f}% of the plain "
          f"commit ({len(step)} steps for {(runs + 1) * burst} appends)")


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.uniform")
    ap.add_argument("--runs", type=int, default=20, help="runs of the one-row append (the 1M-row append: a quarter, at least 3)")
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the large append")
    args = ap.parse_args()
    import lakelog
    from lakelog import iceberg

    # both called through the module: the step (on whichever thread runs it), and the commit's UniForm part
    # (the hand-off, or the whole step when synchronous)
    step, handoff = _timed(iceberg, "sync"), _timed(iceberg, "after_commit")
    os.environ.pop(SYNC_ENV, None)
    print(f"machine: {machine()}")
    print(f"import lakelog.iceberg.catch_up (once per process): {_import_cost() * 1000:.1f} ms")
    with tempfile.TemporaryDirectory() as d:
        plain, uni = os.path.join(d, "plain"), os.path.join(d, "uniform")
        one = pa.table({"id": pa.array([1], pa.int64()), "name": ["x"]})
        lakelog.write_table(plain, one, configuration=COMPAT)
        lakelog.write_table(uni, one, configuration=UNIFORM)
        _compare("one-row append, settled", plain, uni, one, args.runs, step, handoff, burst=1, unit="ms")
        _compare("one-row append, 5 back to back", plain, uni, one, args.runs, step, handoff, burst=5, unit="ms")
        os.environ[SYNC_ENV] = "true"
        try:
            _compare(f"one-row append, {SYNC_ENV}=true", plain, uni, one, args.runs, step, handoff, burst=1, unit="ms")
        finally:
            del os.environ[SYNC_ENV]
        big = mixed_table(args.rows)
        bplain, buni = os.path.join(d, "bplain"), os.path.join(d, "buniform")
        lakelog.write_table(bplain, big.slice(0, 10), configuration=COMPAT)
        lakelog.write_table(buni, big.slice(0, 10), configuration=UNIFORM)
        _compare(f"{args.rows:,}-row append, settled", bplain, buni, big, max(3, args.runs // 4), step, handoff, burst=1, unit="s")
        t0 = time.perf_counter()
        lakelog.Table(uni).sync_iceberg()
        print(f"sync_iceberg with nothing to do: {(time.perf_counter() - t0) * 1000:.1f} ms")


if __name__ == "__main__":
    main()

"""Reading a table where 10% of the rows are deleted through deletion vectors, against reading the same
live rows from a table without deletion vectors (the target: within 1.3x).

Both tables hold the mixed-type rows of benchmarks.suite in 8 files. The DV table keeps every row in its
files and one on-disk deletion vector per file (a random 10% of its rows, in one shared DV file, as
Spark writes them); the plain table's files hold only the live rows.

    python -m benchmarks.deletion_vectors [--quick]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import tempfile
import time

import lakelog
from benchmarks import dv_tables
from benchmarks.dv_tables import FILES
from benchmarks.data import mixed_table


def build(root: str, rows: int, fraction: float = 0.1, seed: int = 7) -> tuple[str, str, int]:
    """(DV table path, plain table path, live rows) of ``rows`` mixed-type rows."""
    return dv_tables.build(root, mixed_table(rows), fraction, seed)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)  # every thread of the process
    return r.ru_utime + r.ru_stime


def _times(fns, runs: int) -> tuple[list[float], list[float]]:
    """Median wall and CPU time of each function, runs interleaved after one warm-up each (CPU time is
    the steadier figure on a shared machine: it does not count the time other processes hold the cores)."""
    for fn in fns:
        fn()
    wall: list[list[float]] = [[] for _ in fns]
    cpu: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for i, fn in enumerate(fns):
            c0, t0 = _cpu(), time.perf_counter()
            fn()
            wall[i].append(time.perf_counter() - t0)
            cpu[i].append(_cpu() - c0)
    return [statistics.median(t) for t in wall], [statistics.median(t) for t in cpu]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.deletion_vectors")
    ap.add_argument("--quick", action="store_true", help="1M rows and 3 runs (default: 4M rows, 5 runs)")
    args = ap.parse_args(argv)
    rows, runs = (1_000_000, 3) if args.quick else (4_000_000, 5)
    root = tempfile.mkdtemp(prefix="lakelog-bench-dv-")
    try:
        dv_path, plain_path, live = build(root, rows)
        dv_table, plain_table = lakelog.Table(dv_path), lakelog.Table(plain_path)
        assert dv_table.to_pyarrow().num_rows == plain_table.to_pyarrow().num_rows == live
        filt = [("id", "<", rows // 2)]
        contenders = [dv_table.to_pyarrow, plain_table.to_pyarrow, lambda: dv_table.to_pyarrow(filters=filt), lambda: plain_table.to_pyarrow(filters=filt)]
        wall, cpu = _times(contenders, runs)
        print(f"{rows:,} rows in {FILES} files, 10% deleted by deletion vectors ({live:,} live), median of {runs} runs")
        for label, i in (("read all rows", 0), (f"read with id < {rows // 2:,}", 2)):
            print(
                f"  {label:<26} wall: DV {wall[i]:.3f}s plain {wall[i + 1]:.3f}s ratio {wall[i] / wall[i + 1]:.2f}x   "
                f"CPU: DV {cpu[i]:.3f}s plain {cpu[i + 1]:.3f}s ratio {cpu[i] / cpu[i + 1]:.2f}x"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

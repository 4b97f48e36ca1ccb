"""python -m benchmarks [--quick] [--spark]: the whole suite; see benchmarks/suite.py."""

import argparse
import os
import sys

from benchmarks.suite import run

if __name__ == "__main__":
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description="lakelog against its peers, as ratios")
    ap.add_argument("--quick", action="store_true", help="smaller data, fewer runs")
    ap.add_argument("--spark", action="store_true", help="also compare Spark format('lakelog') with Spark parquet")
    args = ap.parse_args()
    run(quick=args.quick, spark=args.spark)
    sys.stdout.flush()
    os._exit(0)  # deltalake's native runtime can abort the interpreter at shutdown; results are written

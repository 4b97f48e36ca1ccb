"""Which embedded SQL engine evaluates lakelog's predicates: DuckDB against DataFusion's Python package.

Not part of ``make bench`` (DataFusion is not a lakelog dependency). With both installed:

    python -m benchmarks.sql_engines [--spark] [--rows N]

1. Dialect: the same expressions over the same rows (nulls included) in each engine, compared with
   Spark SQL's results (``--spark`` computes them with a local Spark session; without it the Spark
   results recorded in ``SPARK`` are used). A mismatch or an error counts against the engine.
2. Arrow in, Arrow out: registering an N-row Arrow table and filtering it (time, RSS growth: a copy
   of the input would show as growth near its size).
3. Join: N target keys against N/100 source keys (an inner equi-join, count and the joined rows).
4. Import time (fresh interpreter, median of 5) and installed wheel size.
Results are printed; specs/sql-engine.md records them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import subprocess
import sys
import time

import pyarrow as pa

ROWS = pa.table({
    "i": pa.array([1, 2, None, 4], pa.int32()),
    "s": pa.array(["ab", "Ba", None, "b_c"]),
    "d": pa.array([dt.date(2026, 1, 1), dt.date(2026, 1, 2), None, dt.date(2026, 1, 3)]),
})

# Expression -> Spark SQL 4.x result per row (ANSI mode on, Spark's default since 4.0).
EXPRESSIONS = {
    "s like 'a%'": [True, False, None, False],
    "s like '_a'": [False, True, None, False],
    "i in (1, 2)": [True, True, None, False],
    "i not in (1, NULL)": [False, None, None, None],
    "i is null": [False, False, True, False],
    "NOT (i > 1)": [True, False, None, False],
    "i = NULL": [None, None, None, None],
    "i between 2 and 4": [False, True, None, True],
    "coalesce(s, 'x')": ["ab", "Ba", "x", "b_c"],
    "concat(s, '-')": ["ab-", "Ba-", None, "b_c-"],
    "s || '-'": ["ab-", "Ba-", None, "b_c-"],
    "upper(s)": ["AB", "BA", None, "B_C"],
    "d >= DATE '2026-01-02'": [False, True, None, True],
    "d >= '2026-01-02'": [False, True, None, True],
    "d < TIMESTAMP '2026-01-02 12:00:00'": [True, True, None, False],
    "cast(i as string)": ["1", "2", None, "4"],
    "cast('12' as int) + i": [13, 14, None, 16],
    "cast(i as double) / 2": [0.5, 1.0, None, 2.0],
    "i / 2": [0.5, 1.0, None, 2.0],
    "CASE WHEN i > 1 THEN 'big' WHEN i IS NULL THEN 'none' ELSE 'small' END": ["small", "big", "none", "big"],
    "substring(s, 1, 1)": ["a", "B", None, "b"],
    "length(s)": [2, 2, None, 3],
}


def spark_results() -> dict[str, list]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    spark.createDataFrame(ROWS.to_pandas().astype({"i": "Int32"})).createOrReplaceTempView("t")
    out = {}
    for e in EXPRESSIONS:
        out[e] = [r[0] for r in spark.sql(f"SELECT {e} FROM t").collect()]
    spark.stop()
    return out


def duckdb_eval(e: str):
    import duckdb

    con = duckdb.connect()
    con.register("t", ROWS)
    return con.sql(f"SELECT {e} AS v FROM t").to_arrow_table().column(0).to_pylist()


def datafusion_eval(e: str):
    import datafusion

    ctx = datafusion.SessionContext()
    ctx.from_arrow(ROWS, name="t")
    return ctx.sql(f"SELECT {e} AS v FROM t").to_arrow_table().column(0).to_pylist()


def _same(got, want) -> bool:
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if isinstance(g, dt.datetime) or isinstance(w, dt.datetime):
            return False
        if isinstance(w, float) and isinstance(g, (int, float)):
            if abs(g - w) > 1e-9:
                return False
        elif g != w:
            return False
    return True


def dialect(expected: dict[str, list]) -> None:
    print("1. dialect (agreement with Spark SQL, nulls included)")
    score = {"duckdb": 0, "datafusion": 0}
    for e, want in expected.items():
        cells = []
        for name, fn in (("duckdb", duckdb_eval), ("datafusion", datafusion_eval)):
            try:
                got = fn(e)
                ok = _same(got, want)
                cells.append("ok" if ok else f"differs {got}")
            except Exception as ex:  # noqa: BLE001 - an engine refusing an expression is a result
                ok = False
                cells.append(f"error: {str(ex).splitlines()[0][:60]}")
            score[name] += ok
        print(f"  {e:<72} duckdb: {cells[0]:<30} datafusion: {cells[1]}")
    print(f"  agreement: duckdb {score['duckdb']}/{len(expected)}, datafusion {score['datafusion']}/{len(expected)}")


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def arrow_and_join(rows: int) -> None:
    import numpy as np
    import pyarrow.compute as pc

    target = pa.table({"id": np.arange(rows, dtype=np.int64), "x": np.random.default_rng(1).random(rows)})
    source = pa.table({"id": np.random.default_rng(2).choice(rows, rows // 100, replace=False).astype(np.int64), "v": np.arange(rows // 100)})
    print(f"2./3. Arrow in and out, and a join: {rows:,} target rows ({target.nbytes / 2**20:.0f} MiB), {source.num_rows:,} source rows")
    import datafusion
    import duckdb

    def run_duckdb():
        con = duckdb.connect()
        r0 = _rss_mb()
        t0 = time.perf_counter()
        con.register("t", target)
        con.register("s", source)
        f = con.sql("SELECT id FROM t WHERE x > 0.99").to_arrow_table()
        t1 = time.perf_counter()
        j = con.sql("SELECT t.id, t.x, s.v FROM t JOIN s ON t.id = s.id").to_arrow_table()
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1, _rss_mb() - r0, f.num_rows, j.num_rows

    def run_datafusion():
        ctx = datafusion.SessionContext()
        r0 = _rss_mb()
        t0 = time.perf_counter()
        ctx.from_arrow(target, name="t")
        ctx.from_arrow(source, name="s")
        f = ctx.sql("SELECT id FROM t WHERE x > 0.99").to_arrow_table()
        t1 = time.perf_counter()
        j = ctx.sql("SELECT t.id, t.x, s.v FROM t JOIN s ON t.id = s.id").to_arrow_table()
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1, _rss_mb() - r0, f.num_rows, j.num_rows

    for name, fn in (("duckdb", run_duckdb), ("datafusion", run_datafusion)):
        fn()  # warm-up
        runs = [fn() for _ in range(3)]
        scan = statistics.median(r[0] for r in runs)
        join = statistics.median(r[1] for r in runs)
        growth = statistics.median(r[2] for r in runs)
        print(f"  {name:<11} register+filter {scan * 1000:7.1f} ms   join {join * 1000:7.1f} ms   RSS growth {growth:6.0f} MiB   "
              f"({runs[0][3]:,} filtered, {runs[0][4]:,} joined rows)")
    assert pc.sum(pc.is_in(source.column("id"), target.column("id"))).as_py() == source.num_rows


def imports_and_size() -> None:
    print("4. import time (fresh interpreter, median of 5) and installed size")
    for mod in ("duckdb", "datafusion"):
        times = []
        for _ in range(5):
            r = subprocess.run([sys.executable, "-c", f"import time; t=time.perf_counter(); import {mod}; print(time.perf_counter()-t)"],
                               capture_output=True, text=True, env=os.environ)
            times.append(float(r.stdout.strip()))
        pkg = __import__(mod)
        base = os.path.dirname(pkg.__file__)
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(base) for f in fs)
        if mod == "duckdb":  # the extension module sits beside the package
            site = os.path.dirname(base)
            size += sum(os.path.getsize(os.path.join(site, f)) for f in os.listdir(site) if f.startswith("_duckdb") and f.endswith(".so"))
        print(f"  {mod:<11} import {statistics.median(times) * 1000:6.0f} ms   installed {size / 2**20:6.0f} MiB   version {pkg.__version__}")


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.sql_engines")
    ap.add_argument("--spark", action="store_true", help="compute the expected results with Spark instead of the recorded ones")
    ap.add_argument("--rows", type=int, default=10_000_000)
    a = ap.parse_args()
    expected = spark_results() if a.spark else EXPRESSIONS
    if a.spark:
        for e, want in expected.items():
            if want != EXPRESSIONS[e]:
                print(f"  note: Spark gives {want} for {e!r}, recorded {EXPRESSIONS[e]}")
    dialect(expected)
    arrow_and_join(a.rows)
    imports_and_size()


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)

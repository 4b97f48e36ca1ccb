"""Cold start: ``import lakelog`` and ``lakelog describe`` leave the heavy modules unimported (fresh subprocesses).

pandas, ``pyarrow.dataset`` (which imports pandas), DuckDB, Spark and fsspec's remote back ends cost most of
a cold start; the CLI, Spark's Python workers and short jobs pay it on every run. They are imported where
they are used. Speed itself is measured in ``benchmarks/scale.py``, not here.
"""

import json
import os
import subprocess
import sys

import pyarrow as pa

import lakelog

HEAVY = ("pandas", "pyarrow.dataset", "pyarrow._dataset", "duckdb", "pyspark", "s3fs", "gcsfs", "adlfs", "aiohttp")
FSSPEC_LOCAL = {"fsspec.implementations", "fsspec.implementations.local", "fsspec.implementations.chained"}  # chained: URL chaining in fsspec.core, no back end


def modules_after(code: str) -> tuple[set[str], str]:
    """The modules a fresh interpreter holds after running ``code``, and what ``code`` printed before."""
    env = dict(os.environ)
    env.pop("PYTHONWARNINGS", None)
    r = subprocess.run([sys.executable, "-c", code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    *printed, last = r.stdout.strip().splitlines()
    return set(json.loads(last)), "\n".join(printed)


def heavy(mods: set[str]) -> list[str]:
    found = [m for m in mods if m in HEAVY or m.split(".")[0] in HEAVY]
    found += [m for m in mods if m.startswith("fsspec.implementations.") and m not in FSSPEC_LOCAL]
    return sorted(found)


def test_import_lakelog_imports_no_heavy_module():
    mods, _ = modules_after("import lakelog")
    assert "lakelog.table" in mods and "pyarrow" in mods
    assert heavy(mods) == []
    assert "fsspec" not in mods  # imported when a table is opened


def test_describe_imports_no_heavy_module(tmp_path):
    p = str(tmp_path / "t")
    for k in range(3):
        lakelog.write_table(p, pa.table({"id": pa.array([k, k + 10], pa.int64()), "part": [f"p{k}"] * 2}), partition_by=["part"])
    mods, out = modules_after(f"from lakelog.cli import main\nassert main(['describe', {p!r}]) == 0")
    assert "version:     2" in out and "3 file(s)" in out and "6 records" in out, out
    assert heavy(mods) == []


def test_reading_still_imports_what_it_needs(tmp_path):
    """The control: the check above would see the modules, and a scan still gets them when it needs them."""
    p = str(tmp_path / "t")
    lakelog.write_table(p, pa.table({"id": pa.array([1, 2], pa.int64())}))
    mods, out = modules_after(f"import lakelog\nprint(lakelog.Table({p!r}).to_pandas()['id'].sum())")
    assert out == "3"
    assert {"pyarrow.dataset", "pandas"} <= set(heavy(mods))


def test_filtered_planning_imports_no_heavy_module(tmp_path):
    """Planning with a DNF filter (partition values, stats, literals of every type filters use) converts no
    Python value through pyarrow's pandas-checking conversion: pandas and pyarrow.dataset stay unimported."""
    import datetime as dt

    p = str(tmp_path / "t")
    for k in range(4):
        lakelog.write_table(p, pa.table({
            "id": pa.array([k, k + 10], pa.int64()),
            "small": pa.array([k, -k], pa.int16()),
            "name": [f"n{k}", "z"],
            "x": pa.array([k / 2, None], pa.float64()),
            "d": pa.array([dt.date(2024, 1, 1 + k)] * 2, pa.date32()),
            "ts": pa.array([dt.datetime(2024, 1, 1, k)] * 2, pa.timestamp("us", "UTC")),
            "part": [f"p{k}"] * 2,
            "day": pa.array([dt.date(2024, 2, 1 + k % 2)] * 2, pa.date32()),
        }), partition_by=["part", "day"])
    filters = {
        "data": [("id", ">", 11), ("id", "<", 100)],
        "partition": [("part", "=", "p1")],
        "both": [[("part", "in", ["p1", "p2", None]), ("small", "<=", 1)], [("name", "not in", ["z"]), ("day", "!=", "2024-02-01")]],
        "types": [("d", ">", dt.date(2024, 1, 2)), ("ts", "<=", dt.datetime(2024, 1, 1, 2)), ("x", "!=", 0.5), ("small", "<", 40000)],
        "null": [("id", "=", None)],
    }
    expected = {k: sorted(lakelog.Table(p).files(f)) for k, f in filters.items()}
    assert len(expected["partition"]) == 1 and 0 < len(expected["data"]) < 4 and expected["null"] == []
    code = f"import lakelog\nt = lakelog.Table({p!r})\n" + "".join(
        f"print({k!r}, sorted(t.files({f!r})))\n" for k, f in filters.items())
    mods, out = modules_after("import datetime\nfrom datetime import date, datetime as _dt\n" + code.replace("datetime.datetime(", "_dt(").replace("datetime.date(", "date("))
    assert out.splitlines() == [f"{k} {v}" for k, v in expected.items()]
    assert heavy(mods) == []

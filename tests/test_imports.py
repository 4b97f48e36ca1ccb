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

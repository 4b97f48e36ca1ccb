"""Cold start: what ``import lakelog`` and the commands that read only the log import (fresh subprocesses).

pyarrow, numpy, pandas, ``pyarrow.dataset`` (which imports pandas), DuckDB, sqlglot, Polars, Spark and
fsspec cost most of a cold start; the CLI, Spark's Python workers and short jobs pay it on every run. They
are imported where they are used. Speed itself is measured in ``benchmarks/startup.py``, not here.

What each log-only command may import (pinned below):

* ``import lakelog``, ``lakelog --version``: none of them (nor fsspec);
* ``lakelog history PATH``: none of them on a table whose latest protocol and metadata are in a JSON
  commit (no checkpoint, or a later commit holds them) or in a version checksum file (``n.crc``) at or
  after its newest checkpoint; where only a checkpoint holds them, pyarrow and numpy read its protocol
  and metadata rows (in-commit timestamps depend on them);
* ``Table(PATH).version`` and ``Table(PATH).history()``: none of them on a table whose schema has only
  plain types (primitives, decimals, structs, arrays, maps) when its latest protocol and metadata are in
  a JSON commit or in a version checksum file (``n.crc``) at or after its newest checkpoint: the live
  files, which need pyarrow when a checkpoint holds them, are replayed on first use;
* ``lakelog describe PATH``: the same, when the checksum file also lists the live files (``allFiles``,
  on tables of up to 50 files); else, with a checkpoint, pyarrow and numpy (its file count, size and
  record count come from the checkpoint's rows), nothing else.
"""

import json
import os
import subprocess
import sys

import pyarrow as pa

import lakelog

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(os.path.dirname(sys.executable), "lakelog")
CLI = [SCRIPT] if os.path.exists(SCRIPT) else [sys.executable, "-m", "lakelog.cli"]
HEAVY = ("pandas", "pyarrow.dataset", "pyarrow._dataset", "duckdb", "pyspark", "s3fs", "gcsfs", "adlfs", "aiohttp")
ENGINES = ("pyarrow", "numpy", "duckdb", "pandas", "sqlglot", "polars")  # none of them on the log-only paths
FSSPEC_LOCAL = {"fsspec.implementations", "fsspec.implementations.local", "fsspec.implementations.chained"}  # chained: URL chaining in fsspec.core, no back end


def _env() -> dict:
    env = dict(os.environ)
    env.pop("PYTHONWARNINGS", None)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")  # this checkout's lakelog, also for the console script
    return env


def modules_after(code: str) -> tuple[set[str], str]:
    """The modules a fresh interpreter holds after running ``code``, and what ``code`` printed before."""
    r = subprocess.run([sys.executable, "-c", code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"],
                       capture_output=True, text=True, timeout=120, env=_env(), cwd=ROOT)
    assert r.returncode == 0, r.stderr
    *printed, last = r.stdout.strip().splitlines()
    return set(json.loads(last)), "\n".join(printed)


def command_modules(*args: str) -> tuple[set[str], str]:
    """The modules the ``lakelog`` console script imports for ``args`` (as ``-X importtime`` reports them,
    the interpreter's own start-up included), and what it printed."""
    env = _env()
    env["PYTHONPROFILEIMPORTTIME"] = "1"
    r = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    mods = {line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines() if line.startswith("import time:") and "|" in line}
    assert "lakelog.cli" in mods, r.stderr[-3000:]
    return mods, r.stdout


def heavy(mods: set[str]) -> list[str]:
    found = [m for m in mods if m in HEAVY or m.split(".")[0] in HEAVY]
    found += [m for m in mods if m.startswith("fsspec.implementations.") and m not in FSSPEC_LOCAL]
    return sorted(found)


def engines(mods: set[str], allowed: tuple[str, ...] = ()) -> list[str]:
    return sorted({m.split(".")[0] for m in mods} & (set(ENGINES) - set(allowed)))


def _table(path: str, checkpoint_at: int | None = None, metadata_after: bool = False) -> str:
    for k in range(3):
        lakelog.write_table(path, pa.table({"id": pa.array([k, k + 10], pa.int64()), "part": [f"p{k}"] * 2}), partition_by=["part"])
        if k == checkpoint_at:
            lakelog.Table(path).checkpoint()
    if metadata_after:
        # a commit after the checkpoint with protocol and metaData (the feature upgrades the protocol)
        lakelog.Table(path).set_properties({"delta.enableDeletionVectors": True})
    return path


def test_import_lakelog_imports_no_engine():
    mods, out = modules_after("import lakelog\nprint(sorted(m for m in __import__('sys').modules if m.startswith('lakelog')))")
    assert out == "['lakelog', 'lakelog.errors']"
    assert engines(mods) == [] and heavy(mods) == []
    assert "fsspec" not in mods


def test_public_names_import_on_first_use():
    """The names ``import lakelog`` no longer imports at once still work as attributes, in ``from lakelog
    import ...``, in ``dir()``, and submodules read as attributes are imported."""
    mods, out = modules_after(
        "import lakelog\nfrom lakelog import Table, write_table, WritePlan, variant_field\n"
        "print(lakelog.Table is Table, lakelog.write_table is write_table, 'Table' in dir(lakelog), set(lakelog.__all__) <= set(dir(lakelog)))\n"
        "print(callable(lakelog.check.check_table), lakelog.errors.LakelogError is lakelog.LakelogError)\n"
        "try:\n    lakelog.no_such_name\nexcept AttributeError as e:\n    print(e)"
    )
    assert out.splitlines() == ["True True True True", "True True", "module 'lakelog' has no attribute 'no_such_name'"]
    assert "lakelog.table" in mods


def test_version_command_imports_no_engine():
    mods, out = command_modules("--version")
    assert out.strip() == f"lakelog {lakelog.__version__}"
    assert engines(mods) == [] and "fsspec" not in mods


def test_history_command_reads_json_commits_only(tmp_path):
    """Without a checkpoint, with one followed by a commit holding the metadata, and with one beside its
    version checksum file, history reads JSON only; where only the checkpoint holds protocol and
    metadata, pyarrow reads it, and no engine beyond it."""
    bare = _table(str(tmp_path / "cp"), checkpoint_at=1)
    os.remove(os.path.join(bare, "_delta_log", f"{1:020d}.crc"))
    cases = {
        "plain": (_table(str(tmp_path / "plain")), ()),
        "metadata after checkpoint": (_table(str(tmp_path / "after"), checkpoint_at=1, metadata_after=True), ()),
        "checkpoint with checksum": (_table(str(tmp_path / "sum"), checkpoint_at=1), ()),
        "metadata in checkpoint only": (bare, ("pyarrow", "numpy")),
    }
    for name, (path, allowed) in cases.items():
        mods, out = command_modules("history", path, "--json")
        versions = [e["version"] for e in json.loads(out)]
        assert versions == list(range(max(versions), -1, -1)) and versions[0] >= 2, (name, out)
        assert engines(mods, allowed) == [], name
        assert heavy(mods) == [] and "fsspec" not in mods, name
    assert "pyarrow" in {m.split(".")[0] for m in mods}  # the control: the check sees an import


def test_table_version_and_history_import_no_engine(tmp_path):
    """Without a checkpoint, and with one that has a version checksum file at or after it, opening a table
    and reading its version and history import no engine; without the checksum file the checkpoint is
    read at once, with pyarrow (the control: the check sees the import)."""
    cases = {
        "plain": (_table(str(tmp_path / "plain")), ()),
        "checkpoint with checksum": (_table(str(tmp_path / "cp"), checkpoint_at=1), ()),
        "metadata after checkpoint": (_table(str(tmp_path / "after"), checkpoint_at=1, metadata_after=True), ()),
    }
    bare = _table(str(tmp_path / "bare"), checkpoint_at=1)
    os.remove(os.path.join(bare, "_delta_log", f"{1:020d}.crc"))
    cases["checkpoint without checksum"] = (bare, ("pyarrow", "numpy"))
    for name, (path, allowed) in cases.items():
        mods, out = modules_after(f"import lakelog\nt = lakelog.Table({path!r})\nprint(t.version, len(t.history()))")
        assert out in ("2 3", "3 4"), (name, out)
        assert engines(mods, allowed) == [] and heavy(mods) == [] and "fsspec" not in mods, (name, engines(mods, allowed))
    assert "pyarrow" in {m.split(".")[0] for m in mods}


def test_describe_imports_no_engine(tmp_path):
    """Without a checkpoint, and with one whose checksum file lists the live files; the control: without
    that list the checkpoint's rows are read, with pyarrow and numpy."""
    plain, cp = _table(str(tmp_path / "plain")), _table(str(tmp_path / "cp"), checkpoint_at=1)
    bare = _table(str(tmp_path / "bare"), checkpoint_at=1)
    crc = os.path.join(bare, "_delta_log", f"{1:020d}.crc")
    with open(crc, "rb") as f:
        body = json.loads(f.read())
    del body["allFiles"]
    with open(crc, "w") as f:
        json.dump(body, f)
    for path, allowed in ((plain, ()), (cp, ()), (bare, ("pyarrow", "numpy"))):
        mods, out = command_modules("describe", path)
        assert "version:     2" in out and "3 file(s)" in out and "6 records" in out, out
        assert engines(mods, allowed) == [] and heavy(mods) == [] and "fsspec" not in mods, (path, engines(mods, allowed))
    assert "pyarrow" in {m.split(".")[0] for m in mods}


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


def test_writes_and_row_changes_on_a_plain_table_import_no_sqlglot(tmp_path):
    """sqlglot translates the Spark SQL a table stores (constraints, generated columns, defaults): a table
    without them never needs it; with a CHECK constraint a write imports it (the control)."""
    plain, checked = str(tmp_path / "plain"), str(tmp_path / "checked")
    for p in (plain, checked):
        lakelog.write_table(p, pa.table({"id": pa.array([1, 2, 3], pa.int64()), "s": ["a", "b", "c"]}))
    lakelog.Table(checked).add_constraint({"positive": "id > 0"})
    code = ("import lakelog\n"
            "t = lakelog.Table({p!r})\n"
            "t.delete('id = 1'); t.update({{'s': \"'z'\"}}, 'id = 2')\n"
            "import pyarrow as pa\n"
            "lakelog.write_table({p!r}, pa.table({{'id': pa.array([4], pa.int64()), 's': ['d']}}), mode='append')\n"
            "print(sorted(lakelog.Table({p!r}).to_pyarrow().column('s').to_pylist()))")
    mods, out = modules_after(code.format(p=plain))
    assert out == "['c', 'd', 'z']"
    assert "sqlglot" not in mods
    mods, out = modules_after(code.format(p=checked))
    assert out == "['c', 'd', 'z']" and "sqlglot" in mods


def test_writing_a_checkpoint_imports_no_pandas(tmp_path):
    """A checkpoint's rows (protocol, metaData, txn, adds with partition values, removes) are built from
    their children, not through pyarrow's pandas-checking conversion; the control reads the result."""
    p = _table(str(tmp_path / "t"), checkpoint_at=1)
    lakelog.Table(p).delete("id = 12")  # a remove row, and a file rewritten
    mods, out = modules_after(f"import lakelog\nt = lakelog.Table({p!r})\nprint(t.checkpoint())")
    version = lakelog.Table(p).version
    assert out == str(version) and "pandas" not in mods and "pyarrow.dataset" not in mods
    assert os.path.exists(os.path.join(p, "_delta_log", f"{version:020d}.checkpoint.parquet"))
    import deltalake

    assert sorted(deltalake.DeltaTable(p).to_pyarrow_table().column("id").to_pylist()) == [0, 1, 2, 10, 11]


def test_simple_deletes_and_updates_import_no_pandas_or_duckdb(tmp_path):
    """A delete or update whose predicate (a numeric column against a number, IS NULL, AND/OR/NOT) and
    values (string literals) pyarrow evaluates exactly loads neither pandas (through pyarrow.dataset or
    pyarrow's conversion of Python values) nor DuckDB nor sqlglot; a predicate outside that grammar loads
    DuckDB (the control). Files are skipped by an integer column's stats without a pyarrow dataset."""
    p = str(tmp_path / "t")
    lakelog.write_table(p, pa.table({"id": pa.array(range(10), pa.int64()), "x": pa.array([k / 10 for k in range(10)]),
                                     "s": [f"s{k}" for k in range(10)]}))
    code = (f"import lakelog\nt = lakelog.Table({p!r})\n"
            "print(t.delete('x < 0.15 OR id IS NULL')['num_deleted_rows'])\n"
            "print(t.update({'s': \"'it''s'\"}, 'NOT (x >= 0.45) AND id > 1')['num_updated_rows'])\n")
    mods, out = modules_after(code)
    assert out.splitlines() == ["2", "3"]
    assert heavy(mods) == [] and "sqlglot" not in mods
    rows = lakelog.Table(p).to_pyarrow().sort_by("id")
    assert rows.column("s").to_pylist()[:4] == ["it's", "it's", "it's", "s5"] and rows.num_rows == 8
    mods, out = modules_after(f"import lakelog\nprint(lakelog.Table({p!r}).delete('x * 2 > 1.7')['num_deleted_rows'])")
    assert out == "1" and "duckdb" in mods

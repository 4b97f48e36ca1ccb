"""UniForm: the Iceberg metadata lakelog writes next to the Delta log, read back by an independent reader
(pyiceberg's ``StaticTable``) and compared with lakelog's own reads, at every snapshot.

The random program (hypothesis) runs a few short seeded examples by default; LAKELOG_UNIFORM_FULL=1 runs
many longer ones.
"""

from __future__ import annotations

import datetime as dt
import decimal
import glob
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import fastavro
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakelog
from lakelog import iceberg
from lakelog.cli import main as cli_main
from lakelog.errors import (IcebergSyncError, IcebergSyncTimeoutError, IcebergSyncWarning, InvalidArgumentError, InvalidTablePropertyError,
                            LakelogError, UnsupportedFeatureError)

pyiceberg_table = pytest.importorskip("pyiceberg.table")

UNIFORM = {
    "delta.columnMapping.mode": "name",
    "delta.enableIcebergCompatV2": "true",
    "delta.universalFormat.enabledFormats": "iceberg",
}
FULL = os.environ.get("LAKELOG_UNIFORM_FULL") == "1"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def latest_metadata(path) -> str:
    """The newest metadata file, once the Iceberg steps queued by this process's commits are done."""
    iceberg.flush()
    return unflushed_metadata(path)


def unflushed_metadata(path) -> str:
    with open(os.path.join(path, "metadata", "version-hint.text")) as f:
        n = int(f.read().strip())
    return os.path.join(path, "metadata", f"v{n}.metadata.json")


def rows(table: pa.Table) -> list:
    return sorted((tuple(sorted(r.items())) for r in table.to_pylist()), key=repr)


def check_iceberg(path, filters: list[tuple[str, pc.Expression]] = ()) -> dict[int, int]:
    """Every Iceberg snapshot reads the rows of the Delta version its summary names; the latest is the
    table's latest version; ``filters`` (pyiceberg's filter, the same as a pyarrow expression on lakelog's
    rows) agree at the latest, where pyiceberg prunes files by the partition values and bounds.
    Returns {delta version: snapshot id}."""
    ice = pyiceberg_table.StaticTable.from_metadata(latest_metadata(path))
    latest = lakelog.Table(path)
    assert ice.properties["delta-version"] == str(latest.version)
    by_version = {}
    for snap in ice.snapshots():
        v = int(snap.summary["delta-version"])
        by_version[v] = snap.snapshot_id
        got = ice.scan(snapshot_id=snap.snapshot_id).to_arrow()
        assert rows(got) == rows(lakelog.Table(path, version=v).to_pyarrow()), f"snapshot of version {v}"
    versions = sorted(by_version)
    assert versions == list(range(versions[0], latest.version + 1)), "one snapshot per Delta version"
    assert ice.current_snapshot().snapshot_id == by_version[latest.version]
    for ice_filter, delta_filter in filters:
        assert rows(ice.scan(row_filter=ice_filter).to_arrow()) == rows(latest.to_pyarrow().filter(delta_filter)), ice_filter
    return by_version


def data(ids, part: str | None = None) -> pa.Table:
    ids = list(ids)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "part": pa.array([part or ("a" if i % 3 else "b") for i in ids]),
        "name": pa.array([None if i % 4 == 0 else f"n{i}" for i in ids]),
        "score": pa.array([i / 2 for i in ids], pa.float64()),
    })


def test_every_operation_reads_the_same_through_iceberg(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, data(range(10)), partition_by=["part"], configuration=UNIFORM)
    check_iceberg(path)
    lakelog.write_table(path, data(range(10, 15)), mode="append")
    check_iceberg(path)
    t = lakelog.Table(path)
    from lakelog.iceberg import convert

    convert._LAST_LIST[:] = [None, []]  # as a new process: the manifest list is read back from its Avro file
    t.delete("id < 3")
    check_iceberg(path)
    t.update({"name": "'upd'"}, "id % 2 = 0")
    check_iceberg(path)
    src = data(range(12, 20))
    (t.merge(src, "target.id = source.id").when_matched_update_all().when_not_matched_insert_all().execute())
    check_iceberg(path)
    lakelog.write_table(path, data(range(30, 33), part="c"), mode="overwrite", predicate="part = 'c'")
    check_iceberg(path)
    t.refresh().optimize()
    f = pc.field
    check_iceberg(path, [("id >= 12", f("id") >= 12), ("part = 'b'", f("part") == "b"), ("name = 'upd'", f("name") == "upd"), ("score < 3.0", f("score") < 3)])
    lakelog.write_table(path, data(range(3)), mode="overwrite")
    by_version = check_iceberg(path, [("id = 1", f("id") == 1)])
    assert sorted(by_version) == list(range(t.refresh().version + 1))
    ice = pyiceberg_table.StaticTable.from_metadata(latest_metadata(path))
    ops = [s.summary.operation.value for s in ice.snapshots()]
    assert ops[1] == "append" and ops[2] == "overwrite" and "replace" in ops  # optimize changes no data


def test_types_stats_and_partition_values(tmp_path):
    """Bounds in Iceberg's binary form let pyiceberg prune files: a wrong bound would drop rows."""
    path = str(tmp_path / "t")
    utc = dt.timezone.utc

    def batch(k):
        return pa.table({
            "i8": pa.array([k, k + 1], pa.int8()), "i16": pa.array([k * 100, -5], pa.int16()), "i32": pa.array([k, None], pa.int32()),
            "i64": pa.array([2**40 + k, -(2**40)], pa.int64()), "f32": pa.array([k + 0.5, -1.25], pa.float32()),
            "b": pa.array([True, k % 2 == 0]), "s": pa.array(["é" * 40 + str(k), "z"]),
            "d": pa.array([dt.date(2020, 1, 1 + k), dt.date(1969, 12, 31)]),
            "ts": pa.array([dt.datetime(2021, 1, 1, 0, 0, 0, k, tzinfo=utc), dt.datetime(2021, 6, 1, tzinfo=utc)], pa.timestamp("us", "UTC")),
            "ntz": pa.array([dt.datetime(2021, 1, 1, 1, 2, 3, 999999), None], pa.timestamp("us")),
            "dec": pa.array([decimal.Decimal(f"{k}.25"), decimal.Decimal("-3.10")], pa.decimal128(9, 2)),
            "bin": pa.array([b"\x00\x01", None], pa.binary()),
            "st": pa.array([{"x": k, "y": "a"}, {"x": -k, "y": None}]),
            "lst": pa.array([[k, None], None], pa.list_(pa.int64())),
            "mp": pa.array([[("a", k)], []], pa.map_(pa.string(), pa.int32())),
            "nest": pa.array([{"l": [{"z": k}]}, None], pa.struct([("l", pa.list_(pa.struct([("z", pa.int16())])))])),
            "pd": pa.array([dt.date(2024, 1, k % 2 + 1)] * 2), "pi": pa.array([k % 2] * 2, pa.int32()),
            "pdec": pa.array([decimal.Decimal(f"-{k}.50")] * 2, pa.decimal128(9, 2)),
            "pdec2": pa.array([decimal.Decimal("1.25") if k < 3 else None] * 2, pa.decimal128(9, 2)),
            "pts": pa.array([dt.datetime(2020, 5, 5, k, tzinfo=utc)] * 2, pa.timestamp("us", "UTC")),
        })

    lakelog.write_table(path, batch(1), partition_by=["pd", "pi", "pdec", "pdec2", "pts"], configuration=UNIFORM)
    for k in (2, 3):
        lakelog.write_table(path, batch(k), mode="append")
    f, e40 = pc.field, "é" * 40
    ts = pa.scalar(dt.datetime(2021, 1, 1, 0, 0, 0, 2, tzinfo=utc), pa.timestamp("us", "UTC"))
    ntz = pa.scalar(dt.datetime(2021, 1, 1, 1, 2, 3, 999999), pa.timestamp("us"))
    check_iceberg(path, [
        ("i8 = 2", f("i8") == 2), ("i16 < 0", f("i16") < 0), ("i64 > 1099511627777", f("i64") > 2**40 + 1), ("f32 > 2.0", f("f32") > 2.0),
        ("s = 'z'", f("s") == "z"), (f"s > '{e40}2'", f("s") > f"{e40}2"), ("d < '1970-01-01'", f("d") < pa.scalar(dt.date(1970, 1, 1))),
        ("ts > '2021-01-01T00:00:00.000002+00:00'", f("ts") > ts), ("ntz >= '2021-01-01T01:02:03.999999'", f("ntz") >= ntz),
        ("dec > 2.00", f("dec") > pa.scalar(decimal.Decimal("2.00"), pa.decimal128(9, 2))),
        ("pd = '2024-01-02'", f("pd") == pa.scalar(dt.date(2024, 1, 2))), ("pi = 1", f("pi") == 1), ("i32 is null", f("i32").is_null()),
        ("b = false", f("b") == False),  # noqa: E712
        ("pdec < -1.50", f("pdec") < pa.scalar(decimal.Decimal("-1.50"), pa.decimal128(9, 2))), ("pdec2 is null", f("pdec2").is_null()),
        ("pts >= '2020-05-05T02:00:00+00:00'", f("pts") >= pa.scalar(dt.datetime(2020, 5, 5, 2, tzinfo=utc), pa.timestamp("us", "UTC"))),
    ])
    # Avro defines each name once (Java's parser refuses a redefinition; pyiceberg does not check); the
    # header's schema carries Iceberg's field ids, and the header the keys Iceberg's readers look up
    for f in glob.glob(os.path.join(path, "metadata", "*.avro")):
        with open(f, "rb") as fh:
            meta = fastavro.reader(fh).metadata
        schema = orjson.loads(meta["avro.schema"])
        keys = ("schema", "partition-spec", "partition-spec-id", "content") if f.endswith("-m0.avro") else ("snapshot-id", "sequence-number")
        assert meta["format-version"] == "2" and all(k in meta for k in keys) and meta["avro.codec"] == "deflate", (f, meta.keys())
        names: list[str] = []
        no_id: list = []

        def walk(t, names=names, no_id=no_id):
            if isinstance(t, list):
                for x in t:
                    walk(x)
            elif isinstance(t, dict):
                if t["type"] in ("record", "fixed", "enum"):
                    names.append(t["name"])
                no_id.extend(x for x in t.get("fields", []) if not isinstance(x.get("field-id"), int))
                if t["type"] == "array" and t.get("logicalType") != "map" and not isinstance(t.get("element-id"), int):
                    no_id.append(t)
                for x in t.get("fields", []):
                    walk(x["type"])
                for key in ("items", "values"):
                    if key in t:
                        walk(t[key])

        walk(schema)
        assert len(names) == len(set(names)), (f, names)
        assert no_id == [], (f, no_id)


def test_uniform_needs_iceberg_compat_and_column_mapping(tmp_path):
    t = pa.table({"x": [1]})
    no_compat = {k: v for k, v in UNIFORM.items() if k != "delta.enableIcebergCompatV2"}
    with pytest.raises(InvalidTablePropertyError, match="enabledFormats=iceberg needs Iceberg compatibility.*delta.enableIcebergCompatV2"):
        lakelog.write_table(str(tmp_path / "a"), t, configuration=no_compat)
    with pytest.raises(LakelogError, match="column mapping"):  # icebergCompatV2's own requirement
        lakelog.write_table(str(tmp_path / "b"), t, configuration={**UNIFORM, "delta.columnMapping.mode": "none"})
    with pytest.raises(UnsupportedFeatureError, match="not Hudi"):
        lakelog.write_table(str(tmp_path / "c"), t, configuration={**UNIFORM, "delta.universalFormat.enabledFormats": "iceberg,hudi"})
    for name in "abc":
        assert not os.path.exists(tmp_path / name / "_delta_log" / "00000000000000000000.json")
    plain = str(tmp_path / "d")
    lakelog.write_table(plain, t)
    with pytest.raises(UnsupportedFeatureError, match="does not have UniForm on"):
        lakelog.Table(plain).sync_iceberg()


def test_enabling_uniform_on_an_existing_table_converts_it_once(tmp_path):
    path = str(tmp_path / "t")
    compat = {k: v for k, v in UNIFORM.items() if k != "delta.universalFormat.enabledFormats"}
    lakelog.write_table(path, data(range(5)), configuration=compat)
    lakelog.write_table(path, data(range(5, 9)), mode="append")
    lakelog.Table(path).delete("id = 2")
    assert not os.path.exists(tmp_path / "t" / "metadata")
    t = lakelog.Table(path)
    t.set_properties({"delta.universalFormat.enabledFormats": "iceberg"})
    assert check_iceberg(path).keys() == {3}
    lakelog.write_table(path, data(range(20, 22)), mode="append")
    assert check_iceberg(path).keys() == {3, 4}


def _failing_iceberg_step(op, p):
    if "/metadata/" in p and op in ("put", "put_if_absent"):
        raise OSError("injected: the Iceberg step fails")


def test_a_failed_iceberg_step_is_caught_up(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, data(range(5)), configuration=UNIFORM)
    failing = {"lakelog.fault_injector": _failing_iceberg_step}
    with pytest.warns(IcebergSyncWarning, match="version 1 is committed, but writing its Iceberg metadata"):
        lakelog.write_table(path, data(range(5, 8)), mode="append", storage_options=failing)
        with pytest.raises(IcebergSyncError, match="failed: .* at version 1: OSError.*injected") as raised:
            iceberg.flush()  # the step runs after the commit returned: its failure is the flush's error too
    assert raised.value.committed and list(raised.value.errors) == [f"file:{path}"]
    iceberg.flush()  # reported once
    with pytest.warns(UserWarning, match="version 2 is committed"):
        lakelog.Table(path, storage_options=failing).delete("id = 1")
        with pytest.raises(IcebergSyncError, match="at version 2"):
            iceberg.flush()
    assert lakelog.Table(path).version == 2  # the Delta commits stand
    ice = pyiceberg_table.StaticTable.from_metadata(latest_metadata(path))
    assert ice.properties["delta-version"] == "0"
    assert lakelog.Table(path).sync_iceberg() == 2
    assert check_iceberg(path).keys() == {0, 1, 2}
    # the next commit catches up too
    with pytest.warns(UserWarning):
        lakelog.write_table(path, data(range(40, 41)), mode="append", storage_options=failing)
        with pytest.raises(IcebergSyncError):
            iceberg.flush()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lakelog.write_table(path, data(range(50, 51)), mode="append")
        iceberg.flush()
    assert check_iceberg(path).keys() == {0, 1, 2, 3, 4}


def test_a_writer_killed_between_the_commit_and_the_iceberg_step(tmp_path, capsys):
    path = str(tmp_path / "t")
    lakelog.write_table(path, data(range(5)), configuration=UNIFORM)
    script = textwrap.dedent(f"""
        import os, signal, pyarrow as pa, lakelog
        def die(op, p):
            if "/metadata/" in p:
                os.kill(os.getpid(), signal.SIGKILL)
        lakelog.write_table({path!r}, pa.table({{"id": pa.array([100], pa.int64()), "part": ["a"], "name": ["k"], "score": [1.0]}}),
                            mode="append", storage_options={{"lakelog.fault_injector": die}})
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stderr.decode()
    assert lakelog.Table(path).version == 1
    ice = pyiceberg_table.StaticTable.from_metadata(latest_metadata(path))
    assert ice.properties["delta-version"] == "0"
    assert cli_main(["uniform", path]) == 0
    assert "describes version 1" in capsys.readouterr().out
    assert check_iceberg(path).keys() == {0, 1}
    assert cli_main(["uniform", path, "--json"]) == 0  # nothing left to do
    assert '"version": 1' in capsys.readouterr().out.replace(":1", ": 1")


class _Hold:
    """A fault injector that holds the Iceberg step at its first write until released, noting the thread."""

    def __init__(self):
        self.entered, self.release, self.threads = threading.Event(), threading.Event(), set()

    def __call__(self, op, p):
        if "/metadata/" in p and op in ("put", "put_if_absent"):
            self.threads.add(threading.current_thread().name)
            self.entered.set()
            assert self.release.wait(120), "never released"


def _iceberg_version(path) -> int:
    """The Delta version the newest Iceberg metadata file describes, read without waiting for any step."""
    with open(unflushed_metadata(path), "rb") as f:
        return int(orjson.loads(f.read())["properties"]["delta-version"])


def test_the_commit_returns_before_its_iceberg_step_and_a_burst_converts_once(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, data(range(3)), configuration=UNIFORM)  # the commit turning UniForm on converts in it
    assert _iceberg_version(path) == 0
    hold = _Hold()
    lakelog.write_table(path, data(range(3, 5)), mode="append", storage_options={"lakelog.fault_injector": hold})
    assert hold.entered.wait(120)
    # the commit has returned while its Iceberg step waits on another thread
    assert lakelog.Table(path).version == 1 and _iceberg_version(path) == 0
    assert hold.threads == {"lakelog-iceberg"}
    with pytest.raises(IcebergSyncTimeoutError, match="had not finished after 0 s"):
        iceberg.flush(timeout=0)
    for k in range(3):  # queued behind the held step: one step converts the three
        lakelog.write_table(path, data([10 + k]), mode="append")
    lakelog.Table(path).delete("id = 0")
    hold.release.set()
    assert check_iceberg(path).keys() == {0, 1, 2, 3, 4, 5}  # one snapshot per Delta version
    assert sorted(glob.glob("v*.metadata.json", root_dir=tmp_path / "t" / "metadata")) == [f"v{n}.metadata.json" for n in (1, 2, 3)]  # 0; 1; 2-5
    with pytest.raises(InvalidArgumentError, match="timeout"):
        iceberg.flush(timeout=-1)


def test_sync_iceberg_waits_for_the_queued_step(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, data(range(3)), configuration=UNIFORM)
    hold = _Hold()
    lakelog.write_table(path, data(range(3, 5)), mode="append", storage_options={"lakelog.fault_injector": hold})
    assert hold.entered.wait(120)
    done = []
    waiter = threading.Thread(target=lambda: done.append(lakelog.Table(path).sync_iceberg()))
    waiter.start()
    waiter.join(0.5)  # (not a timing assertion: whatever it did by now, it must not have converted around the held step)
    assert _iceberg_version(path) == 0
    hold.release.set()
    waiter.join(120)
    assert done == [1] and _iceberg_version(path) == 1


def test_sync_iceberg_settles_the_failure_of_a_queued_step(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, data(range(3)), configuration=UNIFORM)
    with pytest.warns(IcebergSyncWarning, match="version 1 is committed"):
        lakelog.write_table(path, data(range(3, 5)), mode="append", storage_options={"lakelog.fault_injector": _failing_iceberg_step})
        assert lakelog.Table(path).sync_iceberg() == 1  # waits for the queued step, then catches up
    iceberg.flush()  # the table is caught up: its step's failure is not reported again
    assert check_iceberg(path).keys() == {0, 1}


def test_synchronous_conversion_by_environment_variable(tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    lakelog.write_table(path, data(range(3)), configuration=UNIFORM)
    monkeypatch.setenv("LAKELOG_UNIFORM_ICEBERG_SYNC_CONVERT", "true")
    hold = _Hold()
    hold.release.set()
    lakelog.write_table(path, data(range(3, 5)), mode="append", storage_options={"lakelog.fault_injector": hold})
    assert hold.threads == {threading.current_thread().name} and _iceberg_version(path) == 1  # done inside the commit
    monkeypatch.setenv("LAKELOG_UNIFORM_ICEBERG_SYNC_CONVERT", "sometimes")
    with pytest.raises(InvalidArgumentError, match="LAKELOG_UNIFORM_ICEBERG_SYNC_CONVERT='sometimes' is not true or false"):
        lakelog.write_table(path, data(range(5, 6)), mode="append")
    assert lakelog.Table(path).version == 1  # refused before anything was committed


def test_a_writer_killed_after_the_commit_returned_before_its_iceberg_step(tmp_path):
    """The process dies (SIGKILL) once the commit has returned, its Iceberg step held on the worker thread:
    the next commit, in another process, converts both versions."""
    path = str(tmp_path / "t")
    lakelog.write_table(path, data(range(5)), configuration=UNIFORM)
    script = textwrap.dedent(f"""
        import os, signal, threading, pyarrow as pa, lakelog
        entered = threading.Event()
        def hold(op, p):
            if "/metadata/" in p:
                entered.set()
                threading.Event().wait()
        lakelog.write_table({path!r}, pa.table({{"id": pa.array([100], pa.int64()), "part": ["a"], "name": ["k"], "score": [1.0]}}),
                            mode="append", storage_options={{"lakelog.fault_injector": hold}})
        entered.wait()
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stderr.decode()
    assert lakelog.Table(path).version == 1 and _iceberg_version(path) == 0
    lakelog.write_table(path, data([200]), mode="append")
    assert check_iceberg(path).keys() == {0, 1, 2}


def test_a_short_script_publishes_at_exit(tmp_path):
    """The interpreter's exit waits for the queued step (held here until the interpreter is shutting down)."""
    path = str(tmp_path / "t")
    lakelog.write_table(path, data(range(5)), configuration=UNIFORM)
    script = textwrap.dedent(f"""
        import threading, time, pyarrow as pa, lakelog
        def hold(op, p):
            while "/metadata/" in p and not threading._SHUTTING_DOWN:  # (CPython's flag, set as the exit begins)
                time.sleep(0.01)
        lakelog.write_table({path!r}, pa.table({{"id": pa.array([100], pa.int64()), "part": ["a"], "name": ["k"], "score": [1.0]}}),
                            mode="append", storage_options={{"lakelog.fault_injector": hold}})
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    assert _iceberg_version(path) == 1
    assert check_iceberg(path).keys() == {0, 1}


def test_the_command_line_publishes_before_it_exits(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, data(range(5)), configuration=UNIFORM)
    src = tmp_path / "rows.json"
    src.write_text('{"id": 100, "part": "a", "name": "k", "score": 1.0}\n')
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-m", "lakelog.cli", "write", path, str(src)], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
    assert _iceberg_version(path) == 2  # (os._exit skips the interpreter's own wait)
    assert check_iceberg(path).keys() == {0, 1, 2}


def test_import_lakelog_loads_no_iceberg_code():
    code = "import sys, lakelog; print(sorted(m for m in sys.modules if m.startswith(('lakelog.iceberg.', 'pyiceberg', 'fastavro'))))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, timeout=120, check=True)
    assert proc.stdout.decode().strip() == "[]", proc.stdout  # only the package's light __init__ is imported


# ---------------------------------------------------------------- random programs

OPS = st.sampled_from(["append", "delete", "update", "merge", "overwrite", "overwrite_where", "optimize", "sync_fail", "new_process"])


@settings(max_examples=40 if FULL else 3, deadline=None, derandomize=not FULL,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(OPS, st.integers(0, 30)), min_size=3, max_size=14 if FULL else 5), partitioned=st.booleans())
def test_random_programs_read_the_same_through_iceberg(tmp_path_factory, ops, partitioned):
    from lakelog.iceberg import convert

    path = str(tmp_path_factory.mktemp("uniform") / "t")
    lakelog.write_table(path, data(range(6)), partition_by=["part"] if partitioned else None, configuration=UNIFORM)
    for op, k in ops:
        t = lakelog.Table(path)
        if op == "append":
            lakelog.write_table(path, data(range(k, k + 3)), mode="append")
        elif op == "delete":
            t.delete(f"id % 5 = {k % 5}")
        elif op == "update":
            t.update({"score": "score + 1", "name": f"'u{k}'"}, f"id > {k}")
        elif op == "merge":
            (t.merge(data(range(k, k + 4)), "target.id = source.id").when_matched_delete("source.id % 2 = 0")
             .when_matched_update_all().when_not_matched_insert_all().execute())
        elif op == "overwrite":
            lakelog.write_table(path, data(range(k, k + 2)), mode="overwrite")
        elif op == "overwrite_where":
            lakelog.write_table(path, data(range(k, k + 2), part="b"), mode="overwrite", predicate="part = 'b'")
        elif op == "optimize":
            t.optimize()
        elif op == "new_process":  # forget the manifest list this process wrote: the next step reads it back
            convert._LAST_LIST[:] = [None, []]
        else:  # a commit whose Iceberg step fails: caught up by the next one
            with pytest.warns(UserWarning), pytest.raises(IcebergSyncError):
                lakelog.write_table(path, data([k]), mode="append", storage_options={"lakelog.fault_injector": _failing_iceberg_step})
                iceberg.flush()
    lakelog.Table(path).sync_iceberg()
    check_iceberg(path)


def test_schema_changes_restore_and_manifest_merging(tmp_path, monkeypatch):
    """A renamed column keeps its field id (files written before the rename still read), an added column
    gets a new schema, restore re-adds old files, and many appends' manifests are merged into one."""
    from lakelog.iceberg import convert

    monkeypatch.setattr(convert, "MERGE_AT", 3)
    path = str(tmp_path / "t")
    lakelog.write_table(path, data(range(4)), configuration=UNIFORM)
    for k in range(5):
        lakelog.write_table(path, data(range(10 * k + 10, 10 * k + 12)), mode="append")
    t = lakelog.Table(path)
    t.rename_column("name", "label")
    t.add_columns({"extra": pa.int32()})
    lakelog.write_table(path, data(range(90, 92)).append_column("extra", pa.array([7, None], pa.int32())).rename_columns(
        ["id", "part", "label", "score", "extra"]), mode="append")
    t.refresh().delete("id = 10")
    check_iceberg(path, [("label = 'n11'", pc.field("label") == "n11"), ("extra = 7", pc.field("extra") == 7)])
    t.refresh().restore(version=3)
    check_iceberg(path)
    lakelog.write_table(path, data(range(95, 96)), mode="append")
    by_version = check_iceberg(path)
    assert sorted(by_version) == list(range(t.refresh().version + 1))
    ice = pyiceberg_table.StaticTable.from_metadata(latest_metadata(path))
    # unmerged, each of the 8 appends would have left its manifest
    assert max(len(s.manifests(ice.io)) for s in ice.snapshots()) <= convert.MERGE_AT + 3
    assert len(ice.current_snapshot().manifests(ice.io)) <= convert.MERGE_AT
    schemas = [{f.name: f.field_id for f in sc.fields} for _, sc in sorted(ice.schemas().items())]
    first, renamed = schemas[0], next(sc for sc in schemas if "extra" in sc)
    assert renamed["id"] == first["id"] and renamed["label"] == first["name"] and renamed["extra"] > max(first.values())
    assert ice.schema().schema_id == 0  # restored to version 3: the first schema again


def test_vacuum_keeps_the_iceberg_metadata_and_catch_up_survives_log_cleanup(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, data(range(4)), configuration={**UNIFORM, "delta.checkpointInterval": "3"})
    failing = {"lakelog.fault_injector": _failing_iceberg_step}
    with pytest.warns(UserWarning), pytest.raises(IcebergSyncError):
        for k in range(3):
            lakelog.write_table(path, data(range(10 * k + 10, 10 * k + 12)), mode="overwrite", storage_options=failing)
        iceberg.flush()
    # the commits after the last converted version are gone (as log cleanup removes them): the next
    # commit (vacuum's) converts its version whole, on top of the existing history
    for v in (1, 2):
        os.remove(tmp_path / "t" / "_delta_log" / f"{v:020d}.json")
    assert lakelog.Table(path).vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False)
    assert lakelog.Table(path).sync_iceberg() == 5  # VACUUM START and END are versions 4 and 5
    ice = pyiceberg_table.StaticTable.from_metadata(latest_metadata(path))
    assert [s.summary["delta-version"] for s in ice.snapshots()] == ["0", "4", "5"]
    # vacuum left metadata/ alone (as Delta's does on UniForm tables): the Iceberg table still reads
    assert rows(ice.scan().to_arrow()) == rows(lakelog.Table(path).to_pyarrow())


def test_uniform_on_s3(s3_endpoint):
    """The Iceberg metadata goes through the table's store: on S3 (moto), pyiceberg reads it there."""
    path = s3_endpoint.new_table_uri()
    lakelog.write_table(path, data(range(6)), partition_by=["part"], configuration=UNIFORM)
    lakelog.write_table(path, data(range(6, 9)), mode="append")
    lakelog.Table(path).delete("id = 4")
    import fsspec

    fs = fsspec.filesystem("s3")
    iceberg.flush()
    hint = int(fs.cat_file(f"{path}/metadata/version-hint.text"))
    ice = pyiceberg_table.StaticTable.from_metadata(f"{path}/metadata/v{hint}.metadata.json", properties={
        "s3.endpoint": s3_endpoint.url, "s3.access-key-id": s3_endpoint.access_key,
        "s3.secret-access-key": s3_endpoint.secret_key, "s3.region": s3_endpoint.region,
    })
    assert ice.location() == path
    for snap in ice.snapshots():
        v = int(snap.summary["delta-version"])
        assert rows(ice.scan(snapshot_id=snap.snapshot_id).to_arrow()) == rows(lakelog.Table(path, version=v).to_pyarrow())
    assert [s.summary["delta-version"] for s in ice.snapshots()] == ["0", "1", "2"]


def test_iceberg_snapshots_expire_with_the_log_retention(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, data(range(3)), configuration=UNIFORM)
    lakelog.write_table(path, data(range(3, 5)), mode="append")
    assert len(pyiceberg_table.StaticTable.from_metadata(latest_metadata(path)).snapshots()) == 2
    lakelog.Table(path).set_properties({"delta.logRetentionDuration": "interval 0 seconds"})
    time.sleep(0.05)  # a later commit time than version 2's
    lakelog.write_table(path, data(range(5, 6)), mode="append")
    ice = pyiceberg_table.StaticTable.from_metadata(latest_metadata(path))
    assert [s.summary["delta-version"] for s in ice.snapshots()] == ["3"]  # older than 0 s before the latest: gone
    assert ice.current_snapshot().parent_snapshot_id is None
    assert rows(ice.scan().to_arrow()) == rows(lakelog.Table(path).to_pyarrow())


def test_rewritten_manifests_keep_logical_partition_values(tmp_path):
    """A delete rewrites the manifest holding the removed file: the other entries' date, timestamp and
    decimal partition values (which the Avro reader returns as date, datetime and Decimal objects) are
    written back as the days, microseconds and fixed bytes they were, with matching partition summaries."""
    from pyiceberg.expressions import And, EqualTo, GreaterThanOrEqual, LessThan

    path = str(tmp_path / "t")
    utc = dt.timezone.utc

    def batch(k):
        return pa.table({
            "id": pa.array([k, k + 10], pa.int64()), "pd": pa.array([dt.date(2024, 1, 1 + k)] * 2),
            "pts": pa.array([dt.datetime(2020, 5, 5, k, 0, 0, 7, tzinfo=utc)] * 2, pa.timestamp("us", "UTC")),
            "pntz": pa.array([dt.datetime(1969, 12, 31, 23, 59, 59, k)] * 2, pa.timestamp("us")),
            "pdec": pa.array([decimal.Decimal(f"-{k}.05")] * 2, pa.decimal128(20, 2)),
        })

    lakelog.write_table(path, batch(0), partition_by=["pd", "pts", "pntz", "pdec"], configuration=UNIFORM)
    lakelog.write_table(path, pa.concat_tables([batch(1), batch(2)]), mode="append")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a failed Iceberg step is a warning
        lakelog.Table(path).delete("id = 1")
    f = pc.field
    ts = pa.scalar(dt.datetime(2020, 5, 5, 2, tzinfo=utc), pa.timestamp("us", "UTC"))
    check_iceberg(path, [
        (EqualTo("pd", "2024-01-03"), f("pd") == pa.scalar(dt.date(2024, 1, 3))),
        (GreaterThanOrEqual("pts", "2020-05-05T02:00:00+00:00"), f("pts") >= ts),
        (LessThan("pntz", "1969-12-31T23:59:59.000002"), f("pntz") < pa.scalar(dt.datetime(1969, 12, 31, 23, 59, 59, 2), pa.timestamp("us"))),
        (And(LessThan("pdec", "-1.00"), GreaterThanOrEqual("pdec", "-2.05")),
         (f("pdec") < pa.scalar(decimal.Decimal("-1.00"), pa.decimal128(20, 2))) & (f("pdec") >= pa.scalar(decimal.Decimal("-2.05"), pa.decimal128(20, 2)))),
    ])
    ice = pyiceberg_table.StaticTable.from_metadata(latest_metadata(path))
    entries = [e for m in ice.current_snapshot().manifests(ice.io) for e in m.fetch_manifest_entry(ice.io, discard_deleted=False)]
    existing = [tuple(e.data_file.partition) for e in entries if e.status.value == 0]
    # days, microseconds and the decimal (pyiceberg reads fixed decimals as Decimal)
    assert existing == [(19725, 1588644000000007, -999998, decimal.Decimal("-2.05"))]


def test_partition_columns_whose_names_avro_does_not_allow(tmp_path):
    """Partition field names in manifests' Avro schemas are made valid Avro names (as Iceberg's Java
    library makes them); the partition spec keeps the column names."""
    from pyiceberg.expressions import EqualTo

    path = str(tmp_path / "t")
    t = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "my region": ["eu", "us", "eu"], "1st": pa.array([1, 1, 2], pa.int32())})
    lakelog.write_table(path, t, partition_by=["my region", "1st"], configuration=UNIFORM)
    lakelog.Table(path).delete("id = 2")
    check_iceberg(path, [(EqualTo("my region", "eu"), pc.field("my region") == "eu")])
    ice = pyiceberg_table.StaticTable.from_metadata(latest_metadata(path))
    assert [f.name for f in ice.spec().fields] == ["my region", "1st"]
    for f in glob.glob(os.path.join(path, "metadata", "*-m0.avro")):
        with open(f, "rb") as fh:
            schema = orjson.loads(fastavro.reader(fh).metadata["avro.schema"])
        data_file = next(x["type"] for x in schema["fields"] if x["name"] == "data_file")
        partition = next(x["type"] for x in data_file["fields"] if x["name"] == "partition")
        assert [x["name"] for x in partition["fields"]] == ["my_x20region", "_1st"]


def test_spark_writes_and_row_level_changes_keep_the_iceberg_metadata(spark, tmp_path):
    """Spark's writes commit through the same transaction: a format("lakelog") append and LakelogTable's
    update, merge and delete (files written by Spark's tasks) each get their Iceberg snapshot."""
    from pyiceberg.expressions import EqualTo, IsNull

    from spark_ext import LakelogTable

    path = str(tmp_path / "t")
    lakelog.write_table(path, data(range(6)), partition_by=["part"], configuration=UNIFORM)
    # ('' is a null partition value: the files' copy of the partition column, which Iceberg readers read, too)
    spark.createDataFrame([(6, "a", "n6", 3.0), (7, "c", None, 3.5), (9, "", "e", 1.0)], "id long, part string, name string, score double") \
        .write.format("lakelog").mode("append").save(path)
    t = LakelogTable.forPath(spark, path)
    t.update("id = 1", {"score": "-1.0"})
    src = spark.createDataFrame([(2, "b", "m2", 9.0), (8, "b", "n8", 4.0)], "id long, part string, name string, score double")
    t.alias("t").merge(src.alias("s"), "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    t.update("id = 9", {"score": "2.0"})
    t.delete("id = 3")
    assert sorted(lakelog.Table(path).to_pyarrow().column("id").to_pylist()) == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    by_version = check_iceberg(path, [(EqualTo("part", "b"), pc.field("part") == "b"), (IsNull("part"), pc.field("part").is_null())])
    assert sorted(by_version) == list(range(lakelog.Table(path).version + 1))


def test_manifest_merging_leaves_full_manifests_alone(tmp_path, monkeypatch):
    """A merge rewrites the small manifests of recent appends, never one that reached the target size:
    a commit's work stays proportional to the recent commits, not to the table."""
    from lakelog.iceberg import convert

    monkeypatch.setattr(convert, "MERGE_AT", 3)
    path = str(tmp_path / "t")
    lakelog.write_table(path, data(range(40)), configuration=UNIFORM)
    first = pyiceberg_table.StaticTable.from_metadata(latest_metadata(path)).current_snapshot().manifest_list
    big = [m for m in convert.read_manifest_list(open(first.removeprefix("file:"), "rb").read())][0]
    monkeypatch.setattr(convert, "MERGE_TARGET_BYTES", big["manifest_length"])  # the first manifest is "full"
    for k in range(8):
        lakelog.write_table(path, data(range(100 + k, 101 + k)), mode="append")
    ice = pyiceberg_table.StaticTable.from_metadata(latest_metadata(path))
    manifests = ice.current_snapshot().manifests(ice.io)
    paths = [m.manifest_path for m in manifests]
    assert big["manifest_path"] in paths  # never rewritten
    assert any(m.existing_files_count for m in manifests)  # small ones were merged
    assert sum(m.manifest_length < big["manifest_length"] for m in manifests) <= convert.MERGE_AT + 1
    check_iceberg(path)


# ---------------------------------------------------------------- what Iceberg readers see: values and locations

def _pv_rows(ids, s, b) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([f"v{i}" for i in ids]), "s": pa.array(s, pa.string()),
                     "b": pa.array(b, pa.binary()), "d": pa.array([-0.0 if i % 2 else 1.5 for i in ids], pa.float64())})


def _deltalake_rows(path) -> list:
    import deltalake

    return rows(pa.table(deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path)).execute("SELECT * FROM t").read_all()))


def test_iceberg_reads_the_logged_partition_values_on_every_write_path(tmp_path):
    """An empty string or binary partition value is null in the log (as Spark logs it): the partition
    columns' copy inside the data files, which Iceberg readers read, holds null too, on every path
    that writes files, so pyiceberg, lakelog and deltalake read the same rows and filters agree."""
    from pyiceberg.expressions import EqualTo, IsNull, NotNull

    path = str(tmp_path / "t")
    f = pc.field
    filters = [(IsNull("s"), f("s").is_null()), (EqualTo("s", ""), f("s") == ""), (NotNull("s"), f("s").is_valid()),
               (EqualTo("s", "x"), f("s") == "x"), (IsNull("b"), f("b").is_null())]
    steps = [
        lambda: lakelog.write_table(path, _pv_rows(range(6), ["", "x", None, "", "y", "x"], [b"", b"q", None, b"", b"", b"q"]),
                                    partition_by=["s", "b", "d"], configuration=UNIFORM),
        lambda: lakelog.write_table(path, _pv_rows([6, 7], ["", "x"], [b"", b""]), mode="append"),
        lambda: lakelog.Table(path).update({"v": "'u'"}, "id = 0"),
        lambda: lakelog.Table(path).delete("id = 3"),
        lambda: lakelog.Table(path).merge(_pv_rows([1, 8], ["", ""], [b"", None]), "target.id = source.id")
        .when_matched_update_all().when_not_matched_insert_all().execute(),
        lambda: lakelog.write_table(path, _pv_rows([9], ["", ], [b""]), mode="overwrite", predicate="id >= 8"),
        lambda: lakelog.write_table(path, _pv_rows([10], [""], [b""]), mode="overwrite", partition_overwrite="dynamic"),
        lambda: lakelog.Table(path).optimize(),
    ]
    for step in steps:
        step()
        check_iceberg(path, filters)
        assert _deltalake_rows(path) == rows(lakelog.read_table(path))
    ice = pyiceberg_table.StaticTable.from_metadata(latest_metadata(path))
    assert ice.scan(row_filter=EqualTo("s", "")).to_arrow().num_rows == 0
    # (the dynamic overwrite replaced the partition (null, null, 1.5) of rows 0, 2 and 6)
    assert sorted(ice.scan(row_filter=IsNull("s")).to_arrow().column("id").to_pylist()) == [1, 9, 10]
    assert rows(ice.scan().to_arrow()) == rows(lakelog.read_table(path))


def _own_url(backend) -> str:
    """A fresh table URL on ``backend``'s store, in the form a Hadoop/Iceberg user writes it: ``s3a://``,
    ``abfss://container@account.dfs.core.windows.net/...`` (Azurite's account, reached through the
    emulator's options), ``gcs://``; a plain absolute path locally."""
    uri = backend.new_uri()
    if backend.kind == "s3":
        return "s3a://" + uri.removeprefix("s3://")
    if backend.kind == "azure":
        from lakelog.storage.azure import EMULATOR_ACCOUNT

        container, rest = uri.removeprefix("az://").split("/", 1)
        return f"abfss://{container}@{EMULATOR_ACCOUNT}.dfs.core.windows.net/{rest}"
    if backend.kind == "gcs":
        return "gcs://" + uri.removeprefix("gs://")
    return uri


def _iceberg_properties(backend) -> dict[str, str]:
    """pyiceberg's FileIO properties reaching the store's emulator."""
    ep = backend.endpoint
    if backend.kind == "s3":
        return {"s3.endpoint": ep.url, "s3.access-key-id": ep.access_key, "s3.secret-access-key": ep.secret_key, "s3.region": ep.region}
    if backend.kind == "azure":
        from lakelog.storage.azure import EMULATOR_ACCOUNT, EMULATOR_KEY

        return {"adls.connection-string": f"DefaultEndpointsProtocol=http;AccountName={EMULATOR_ACCOUNT};AccountKey={EMULATOR_KEY};"
                                          f"BlobEndpoint={ep.emulator.url}/{EMULATOR_ACCOUNT};"}
    if backend.kind == "gcs":
        # (pyarrow's client: gcsfs's, which pyiceberg's fsspec IO opens, asks a gRPC API the emulator lacks, 60 s a bucket)
        return {"py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO", "gcs.service.host": ep.emulator.url, "gcs.oauth2.token": "emulator",
                "gcs.oauth2.token-expires-at": str(int(time.time() * 1000) + 3_600_000)}
    return {}


def _iceberg_at(backend, url: str):
    iceberg.flush()
    st = backend.storage(url)
    n = int(st.read(st.join("metadata", "version-hint.text")))
    location = "file:" + st.root if backend.kind == "local" else url
    return pyiceberg_table.StaticTable.from_metadata(f"{location}/metadata/v{n}.metadata.json", properties=_iceberg_properties(backend))


def _iceberg_reads_each_version(backend, url: str, ice) -> None:
    for snap in ice.snapshots():
        v = int(snap.summary["delta-version"])
        theirs = ice.scan(snapshot_id=snap.snapshot_id).to_arrow()
        assert rows(theirs) == rows(lakelog.Table(url, version=v, storage_options=backend.storage_options).to_pyarrow()), v


def test_iceberg_locations_are_the_tables_own_url(backend):
    """The Iceberg ``location`` and every manifest list, manifest and data file path is the table's own
    URL, as Delta's UniForm writes it (a Hadoop path): scheme and authority as given, ``file:`` and the
    absolute path locally. pyiceberg reads the table there; deltalake reads the same URL."""
    url = _own_url(backend)
    opts = backend.storage_options
    lakelog.write_table(url, data(range(6)), partition_by=["part"], configuration=UNIFORM, storage_options=opts)
    lakelog.write_table(url, data(range(6, 9)), mode="append", storage_options=opts)
    lakelog.Table(url, storage_options=opts).delete("id = 4")
    expected = "file:" + backend.storage(url).root if backend.kind == "local" else url
    ice = _iceberg_at(backend, url)
    assert ice.metadata.location == expected
    assert all(e["metadata-file"].startswith(expected + "/metadata/v") for e in ice.metadata.model_dump(by_alias=True)["metadata-log"])
    for snap in ice.snapshots():
        assert snap.manifest_list.startswith(expected + "/metadata/snap-")
        for m in snap.manifests(ice.io):
            assert m.manifest_path.startswith(expected + "/metadata/")
            for e in m.fetch_manifest_entry(ice.io, discard_deleted=False):
                rel = e.data_file.file_path.removeprefix(expected + "/")
                assert rel != e.data_file.file_path and "://" not in rel and ":" not in rel.split("/", 1)[0], e.data_file.file_path
    _iceberg_reads_each_version(backend, url, ice)
    assert [s.summary["delta-version"] for s in ice.snapshots()] == ["0", "1", "2"]
    peer_url = "gs://" + url.removeprefix("gcs://") if backend.kind == "gcs" else url  # (delta-rs reads gs://, not gcs://)
    assert rows(backend.peer_sql("SELECT * FROM t", uri=peer_url)) == rows(lakelog.read_table(url, storage_options=opts))


def test_writers_naming_the_table_by_other_urls_keep_its_iceberg_history_right(backend):
    """Files a writer listed under one form of the table's URL are removed by a writer that names it by
    another (``s3://`` and ``s3a://``, ``az://`` and ``abfss://``, ``gs://`` and ``gcs://``, a path and
    ``file://``, or the forms older versions wrote): the removal matches them by their path."""
    url = _own_url(backend)
    other = backend.storage(url).root if backend.kind == "local" else backend.new_uri()
    if backend.kind == "local":
        other = "file://" + other
    else:  # the same table under the store's other spelling
        other = {"s3": "s3://", "azure": "az://", "gcs": "gs://"}[backend.kind] + backend.storage(url).root.lstrip("/")
    opts = backend.storage_options
    lakelog.write_table(url, data(range(6)), partition_by=["part"], configuration=UNIFORM, storage_options=opts)
    lakelog.Table(other, storage_options=opts).delete("id = 1")
    lakelog.write_table(other, data(range(6, 8)), mode="append", storage_options=opts)
    lakelog.Table(url, storage_options=opts).update({"name": "'u'"}, "id < 3")
    lakelog.write_table(url, data(range(2, 4)), mode="overwrite", predicate="id >= 2 AND id < 4", storage_options=opts)
    ice = _iceberg_at(backend, url)
    _iceberg_reads_each_version(backend, url, ice)
    assert len(ice.snapshots()) == 5

"""Row-level changes under concurrency and crashes, with real processes (the lost-update race also on S3,
Azure and GCS, in a short form).

* Lost updates: two processes each increment the same rows N times (retrying on CommitConflictError);
  every row ends at +2N.
* A concurrent append to another partition does not conflict with a delete/update/merge; an append
  that could hold rows the operation read does (tests/test_dml.py drives the deterministic cases).
* A merge SIGKILLed at every storage operation of interest (each data-file write, the commit, just
  after the commit) leaves the table exactly at the old version or exactly at the new one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pyarrow as pa
import pytest

import lakelog
from tests.dml_worker import run_merge

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N = int(os.environ.get("LAKELOG_DML_INCREMENTS", "8"))
SHORT_N = 2  # on object stores


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _worker(*args):
    return subprocess.Popen([sys.executable, "-m", "tests.dml_worker", *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT, env=_env())


def _table(path):
    ids = pa.array(range(400), pa.int64())
    data = pa.table({"id": ids, "part": pa.array([i % 8 for i in range(400)], pa.int64()), "x": ids})
    for k in range(4):  # several files per partition
        lakelog.write_table(path, data.slice(k * 100, 100), partition_by=["part"])


# Local disk runs both kinds of row-level change in full; the object stores run deletion vectors (which
# also write DV files), with fewer increments.
@pytest.mark.parametrize("backend, deletion_vectors", [("local", False), ("local", True), ("s3", True), ("azure", True), ("gcs", True)],
                         ids=["local-copy-on-write", "local-deletion-vectors", "s3-deletion-vectors", "azure-deletion-vectors",
                              "gcs-deletion-vectors"], indirect=["backend"])
def test_two_processes_incrementing_the_same_rows_lose_no_update(backend, deletion_vectors):
    table_path = backend.uri
    n = SHORT_N if backend.short else N
    lakelog.write_table(table_path, pa.table({"id": pa.array(range(10), pa.int64()), "x": pa.array([0] * 10, pa.int64())}),
                        configuration={"delta.enableDeletionVectors": "true"} if deletion_vectors else None)
    procs = [_worker("increment", table_path, n) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert "done" in out
    got = {r["id"]: r["x"] for r in lakelog.read_table(table_path).to_pylist()}
    assert got == {i: (2 * n if i < 5 else 0) for i in range(10)}
    history = lakelog.Table(table_path).history()
    assert sum(h["operation"] == "UPDATE" for h in history) == 2 * n
    if deletion_vectors:  # the first file was never rewritten: its first five rows are marked deleted
        files = lakelog.Table(table_path).snapshot.files.values()
        assert sum(a.deletion_vector is not None and a.deletion_vector.cardinality == 5 for a in files) == 1


def test_concurrent_append_to_another_partition_does_not_conflict(table_path):
    _table(table_path)
    t = lakelog.Table(table_path)
    stop = threading.Event()
    appended = []

    def append():
        k = 0
        while not stop.is_set():
            lakelog.write_table(table_path, pa.table({"id": pa.array([10_000 + k], pa.int64()), "part": pa.array([7], pa.int64()), "x": pa.array([0], pa.int64())}))
            appended.append(k)
            k += 1

    th = threading.Thread(target=append)
    th.start()
    try:
        for _ in range(5):  # every one of these runs beside appends to part=7 and must commit without conflict
            t.update({"x": "x + 1"}, "part = 1")
            t.delete("part = 2 and id > 300")
            t.merge(pa.table({"id": pa.array([3], pa.int64()), "part": pa.array([3], pa.int64()), "x": pa.array([0], pa.int64())}),
                    "target.id = source.id and target.part = 3").when_matched_update({"x": "target.x + 1"}).execute()
    finally:
        stop.set()
        th.join()
    rows = {r["id"]: r for r in lakelog.read_table(table_path).to_pylist()}
    assert appended and all(10_000 + k in rows for k in appended)
    assert rows[9]["x"] == 9 + 5 and rows[3]["x"] == 3 + 5
    assert not any(i in rows for i in range(301, 400) if i % 8 == 2)


def _expected_after_merge(before):
    from tests.dml_worker import merge_source

    out = {r["id"]: dict(r) for r in before}
    for s in merge_source().to_pylist():
        if s["id"] in out:
            if s["id"] % 2 == 0:
                del out[s["id"]]
            else:
                out[s["id"]]["x"] = s["x"]
        else:
            out[s["id"]] = s
    return sorted(out.values(), key=lambda r: r["id"])


KILL_POINTS = ["open_output#1", "open_output#3", "open_output#6", "put_if_absent@_delta_log#1", "put_if_absent:done@_delta_log#1"]


# Local disk only: on the object stores, tests/test_crash.py kills writers of partitioned appends (several
# data files per commit) just before and just after the commit's create.
@pytest.mark.parametrize("kill_at", KILL_POINTS)
def test_sigkill_during_merge_leaves_old_or_new_version(tmp_path, kill_at):
    path = str(tmp_path / "t")
    _table(path)
    before = sorted(lakelog.read_table(path).to_pylist(), key=lambda r: r["id"])
    expected = _expected_after_merge(before)
    p = _worker("merge", path, "--kill-at", kill_at)
    out, err = p.communicate(timeout=300)
    assert p.returncode == -9, (p.returncode, out, err)  # it was killed
    t = lakelog.Table(path)
    got = sorted(t.to_pyarrow().to_pylist(), key=lambda r: r["id"])
    if kill_at.startswith("put_if_absent:done"):
        assert t.version == 4 and got == expected
    else:
        assert t.version == 3 and got == before
    # the table stays fully usable: the same merge now commits and gives the merged rows
    if t.version == 3:
        run_merge(path)
        assert sorted(lakelog.read_table(path).to_pylist(), key=lambda r: r["id"]) == expected
    assert lakelog.Table(path).check().ok

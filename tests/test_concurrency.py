"""Concurrent writers: conflict rules of the one commit path, and real multi-process races.

The first half drives two transactions against one table from a single process, deterministically:
both are planned on the same version, then committed one after the other, so the second one meets a
concurrent winner exactly as it would in a race. The second half starts real processes (this file run
as a script) that race on one table, on local disk and on each object store (S3 on moto, Azure on
Azurite, GCS on fake-gcs-server; fewer processes and commits there), and checks the log afterwards:
contiguous versions, each acknowledged write exactly once, and deltalake reading the same. The
deterministic tests that use a backend run on those and on ``memory://`` too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter

import orjson
import pyarrow as pa
import pytest

import lakelog
from lakelog.actions import AddFile, CommitInfo, RemoveFile, Txn
from lakelog.errors import CommitConflictError, TableExistsError
from lakelog.log.delta_log import DeltaLog
from lakelog.log.snapshot import Snapshot
from lakelog.storage import Storage
from lakelog.transaction import DuplicateTransaction, Transaction, backoff_delay

# ---------------------------------------------------------------- helpers


def _row(writer: int, seq: int, kind: str = "append", part: str = "a") -> pa.Table:
    return pa.table({"writer": [writer], "seq": [seq], "kind": [kind], "p": [part]})


def _keys(table: pa.Table) -> list[tuple]:
    return sorted(zip(table.column("writer").to_pylist(), table.column("seq").to_pylist(), table.column("kind").to_pylist()))


def _log_versions(path: str, storage_options=None) -> list[int]:
    return sorted(DeltaLog(Storage(path, storage_options)).list().commits)


def _commit_ops(path: str, versions: list[int], storage_options=None) -> dict[int, dict]:
    """Per version: the (writer, seq, kind) of its one added row (from the add's stats), its removes and txns."""
    log = DeltaLog(Storage(path, storage_options))
    out = {}
    for v, actions in log.read_commits(versions).items():
        adds = [a for a in actions if isinstance(a, AddFile)]
        keys = []
        for a in adds:
            st = orjson.loads(a.stats)
            assert st["numRecords"] == 1
            keys.append((st["minValues"]["writer"], st["minValues"]["seq"], st["minValues"]["kind"]))
        out[v] = {
            "adds": keys,
            "removes": sum(isinstance(a, RemoveFile) for a in actions),
            "txns": [(a.app_id, a.version) for a in actions if isinstance(a, Txn)],
            "info": next(a.info for a in actions if isinstance(a, CommitInfo)),
        }
    return out


def _plan(path, data, **kw):
    plan = lakelog.plan_write(path, data.schema, **kw)
    return plan, plan.write(data)


# ---------------------------------------------------------------- conflict rules (deterministic)


def test_blind_appends_rebase_and_never_conflict(any_backend):
    path = any_backend.uri
    lakelog.write_table(path, _row(0, 0))
    plans = [_plan(path, _row(1, i)) for i in range(3)]  # all planned on version 0
    versions = [plan.commit(adds) for plan, adds in plans]
    assert versions == [1, 2, 3]
    assert _keys(lakelog.read_table(path)) == [(0, 0, "append")] + [(1, i, "append") for i in range(3)]
    infos = _commit_ops(path, [1, 2, 3])
    assert all(infos[v]["info"]["isBlindAppend"] for v in infos)


def test_overwrite_conflicts_with_concurrent_append(any_backend):
    path = any_backend.uri
    lakelog.write_table(path, _row(0, 0))
    plan, adds = _plan(path, _row(9, 9, "overwrite"), mode="overwrite")
    lakelog.write_table(path, _row(1, 1))  # version 1 adds a file the overwrite did not see
    with pytest.raises(CommitConflictError, match=r"read version 0 but version 1 was committed concurrently and added") as e:
        plan.commit(adds)
    assert (e.value.read_version, e.value.winning_version) == (0, 1)
    assert _log_versions(path) == [0, 1]  # nothing committed
    assert _keys(lakelog.read_table(path)) == [(0, 0, "append"), (1, 1, "append")]
    fs = Storage(path).fs
    assert not any(fs.exists(Storage(path).join(a.relative_path)) for a in adds)  # its files are gone


def test_overwrite_conflicts_with_concurrent_overwrite(table_path):
    lakelog.write_table(table_path, _row(0, 0))
    first, first_adds = _plan(table_path, _row(1, 1, "overwrite"), mode="overwrite")
    second, second_adds = _plan(table_path, _row(2, 2, "overwrite"), mode="overwrite")
    assert first.commit(first_adds) == 1
    with pytest.raises(CommitConflictError, match="removed") as e:
        second.commit(second_adds)
    assert (e.value.read_version, e.value.winning_version) == (0, 1)
    assert _keys(lakelog.read_table(table_path)) == [(1, 1, "overwrite")]


def test_overwrite_planned_on_the_latest_version_commits(table_path):
    """An overwrite planned on the latest version commits; one planned before a data change does not."""
    lakelog.write_table(table_path, _row(0, 0))
    lakelog.write_table(table_path, _row(0, 1))
    assert lakelog.write_table(table_path, _row(5, 5, "overwrite"), mode="overwrite") == 2
    assert _keys(lakelog.read_table(table_path)) == [(5, 5, "overwrite")]
    assert _commit_ops(table_path, [2])[2]["removes"] == 2
    # Planned on version 2, which is still the latest when it commits: it commits.
    plan, adds = _plan(table_path, _row(6, 6, "overwrite"), mode="overwrite")
    assert plan.commit(adds) == 3
    assert _keys(lakelog.read_table(table_path)) == [(6, 6, "overwrite")]
    # Planned on version 3, but version 4 changed the data before it committed: a conflict, nothing replaced.
    plan, adds = _plan(table_path, _row(7, 7, "overwrite"), mode="overwrite")
    lakelog.write_table(table_path, _row(0, 2))
    with pytest.raises(CommitConflictError) as e:
        plan.commit(adds)
    assert (e.value.read_version, e.value.winning_version) == (3, 4)
    assert _log_versions(table_path) == [0, 1, 2, 3, 4]
    assert _keys(lakelog.read_table(table_path)) == [(0, 2, "append"), (6, 6, "overwrite")]


def _compaction(storage: Storage, snapshot: Snapshot, paths: list[str], **kw) -> tuple[Transaction, list]:
    """A compaction of ``paths``: their removes and one add, all with dataChange=false.

    Only the log matters to conflict detection, so the "rewritten" file reuses the first file's entry.
    """
    old = [snapshot.files[p] for p in paths]
    keep = old[0]
    add = AddFile(path=keep.path + ".compacted", partition_values=dict(keep.partition_values), size=keep.size,
                  modification_time=keep.modification_time, data_change=False, stats=keep.stats)
    actions = [a.remove(data_change=False) for a in old] + [add]
    return Transaction(storage, snapshot, "OPTIMIZE", {}, **kw), actions


def test_compaction_beside_append_commits_but_not_beside_a_remove_of_its_files(table_path):
    for i in range(3):
        lakelog.write_table(table_path, _row(0, i))
    storage = Storage(table_path)
    snap = Snapshot.load(storage)
    paths = sorted(snap.files)
    txn, actions = _compaction(storage, snap, paths[:2])
    lakelog.write_table(table_path, _row(1, 0))  # concurrent append: compaction does not read new files
    assert txn.commit(actions).version == 4
    info = _commit_ops(table_path, [4])[4]["info"]
    assert info["operation"] == "OPTIMIZE" and info["isBlindAppend"] is False

    snap = Snapshot.load(storage)
    target = sorted(p for p in snap.files if not p.endswith(".compacted"))[:1]
    txn, actions = _compaction(storage, snap, target)
    other = Transaction(storage, snap, "DELETE", {}, read_whole_table=False)
    other.commit([snap.files[target[0]].remove()])  # a concurrent delete of the same file wins
    with pytest.raises(CommitConflictError, match=r"removed .* which this transaction also removes") as e:
        txn.commit(actions)
    assert (e.value.read_version, e.value.winning_version) == (snap.version, snap.version + 1)


def test_predicate_read_conflicts_only_with_files_it_would_read(table_path):
    lakelog.write_table(table_path, _row(0, 0, part="a"), partition_by=["p"])
    lakelog.write_table(table_path, _row(0, 1, part="b"))
    storage = Storage(table_path)
    snap = Snapshot.load(storage)
    in_a = lambda add: add.partition_values.get("p") == "a"  # noqa: E731
    removes = [f.remove() for f in snap.files.values() if in_a(f)]

    txn = Transaction(storage, snap, "DELETE", {"predicate": "p = 'a'"}, read_predicate=in_a)
    lakelog.write_table(table_path, _row(1, 0, part="b"))  # another partition: no conflict
    assert txn.commit(removes).version == 3
    assert _keys(lakelog.read_table(table_path)) == [(0, 1, "append"), (1, 0, "append")]

    lakelog.write_table(table_path, _row(2, 0, part="a"))
    snap = Snapshot.load(storage)
    removes = [f.remove() for f in snap.files.values() if in_a(f)]
    txn = Transaction(storage, snap, "DELETE", {"predicate": "p = 'a'"}, read_predicate=in_a)
    lakelog.write_table(table_path, _row(3, 0, part="a"))  # adds a file the delete would have read
    with pytest.raises(CommitConflictError, match="would have read") as e:
        txn.commit(removes)
    assert (e.value.read_version, e.value.winning_version) == (4, 5)


def test_concurrent_metadata_change_conflicts(table_path):
    lakelog.write_table(table_path, _row(0, 0))
    storage = Storage(table_path)
    snap = Snapshot.load(storage)
    _, adds = _plan(table_path, _row(1, 1))
    merged = pa.table({"writer": [2], "seq": [2], "kind": ["append"], "p": ["a"], "extra": [1.5]})
    lakelog.write_table(table_path, merged, schema_mode="merge")  # version 1 changes metaData
    txn = Transaction(storage, snap, "WRITE", {})
    with pytest.raises(CommitConflictError, match="changed the table's metadata") as e:
        txn.commit(adds)
    assert (e.value.read_version, e.value.winning_version) == (0, 1)
    assert _log_versions(table_path) == [0, 1]


def test_concurrent_table_creation_replans(table_path):
    a, a_adds = _plan(table_path, _row(1, 0))
    b, b_adds = _plan(table_path, _row(2, 0))
    assert a.commit(a_adds) == 0
    assert b.commit(b_adds) == 1  # created concurrently: the append replans on the new table
    assert _keys(lakelog.read_table(table_path)) == [(1, 0, "append"), (2, 0, "append")]
    c, c_adds = _plan(table_path + "2", _row(1, 0), mode="error")
    lakelog.write_table(table_path + "2", _row(3, 0))
    with pytest.raises(TableExistsError):
        c.commit(c_adds)


def test_racing_duplicate_txn_commits_once(any_backend):
    path = any_backend.uri
    lakelog.write_table(path, _row(0, 0))
    first, first_adds = _plan(path, _row(1, 1))
    second, second_adds = _plan(path, _row(2, 1))  # same (app_id, app_version), planned concurrently
    assert first.commit(first_adds, app_id="job", app_version=7) == 1
    assert second.commit(second_adds, app_id="job", app_version=7) == 1  # the winner's version
    assert _log_versions(path) == [0, 1]
    assert _keys(lakelog.read_table(path)) == [(0, 0, "append"), (1, 1, "append")]
    storage = Storage(path)
    assert not any(storage.fs.exists(storage.join(a.relative_path)) for a in second_adds)
    # the rule inside the transaction itself: a winner holding our txn at a version >= ours
    snap = Snapshot.load(storage, version=0)
    txn = Transaction(storage, snap, "WRITE", {})
    with pytest.raises(DuplicateTransaction) as d:
        txn.commit([Txn("job", 6, 0)])
    assert d.value.version == 1
    txn = Transaction(storage, snap, "WRITE", {})
    assert txn.commit([Txn("job", 8, 0)]).version == 2  # a newer app version commits


def test_lost_reply_is_recognised_by_txn_id(any_backend):
    """A commit whose put landed but whose reply was lost is found again by its txnId, not redone."""
    path = any_backend.uri
    lakelog.write_table(path, _row(0, 0))
    storage = Storage(path)
    snap = Snapshot.load(storage)
    plan, adds = _plan(path, _row(1, 1))
    txn = Transaction(storage, snap, "WRITE", {})
    payload = [txn._commit_info(adds), *adds]
    DeltaLog(storage).write_commit(1, payload)  # the first attempt landed; the writer never heard back
    result = txn.commit(adds)  # the retry meets its own commit
    assert result.version == 1 and result.attempts == 1
    assert _log_versions(path) == [0, 1]
    assert _keys(lakelog.read_table(path)) == [(0, 0, "append"), (1, 1, "append")]


def test_retry_limit_is_configurable(table_path):
    lakelog.write_table(table_path, _row(0, 0))
    opts = {"lakelog.max_commit_attempts": "1"}
    storage = Storage(table_path, opts)
    snap = Snapshot.load(storage)
    lakelog.write_table(table_path, _row(1, 1))
    txn = Transaction(storage, snap, "WRITE", {})
    assert txn.max_attempts == 1
    _, adds = _plan(table_path, _row(2, 2))
    with pytest.raises(CommitConflictError, match="gave up after losing the race for a new version 1 times"):
        txn.commit(adds)
    assert Transaction(Storage(table_path), snap, "WRITE", {}).max_attempts == 10_000  # PROTOCOL.md: 10,000 lost races
    with pytest.raises(ValueError, match="max_commit_attempts"):
        Storage(table_path, {"lakelog.max_commit_attempts": "0"})
    with pytest.raises(ValueError, match="unknown lakelog storage option"):
        Storage(table_path, {"lakelog.single_writter": "true"})


def test_backoff_is_jittered_and_bounded():
    assert backoff_delay(0) == 0 and backoff_delay(1, 0.05) == 0  # the first retry goes at once
    for unit, cap in [(0.0, 0.008), (0.002, 0.016), (0.05, 0.4), (30.0, 0.4)]:
        delays = [backoff_delay(n, unit) for n in range(2, 60) for _ in range(20)]
        assert all(0 <= d <= cap for d in delays)
        assert max(delays) > cap / 4
        assert len(set(delays)) > 100  # jittered, not a fixed schedule
    assert max(backoff_delay(2, 0.01) for _ in range(200)) <= 0.01  # the window starts at one round


# ---------------------------------------------------------------- multi-process races

WORKER_TIMEOUT_S = 150


def _worker_main(cfg: dict) -> None:
    """Run in a subprocess: wait for "go" on stdin, do the writes, print one JSON line per write."""
    import lakelog as ll
    from lakelog.errors import CommitConflictError as Conflict

    path, w, opts = cfg["path"], cfg["writer"], cfg.get("storage_options")
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return
    for i in range(cfg["count"]):
        kind = cfg["role"]
        tries = cfg.get("tries", 1)
        for attempt in range(tries):
            rec = {"writer": w, "seq": i, "kind": kind, "attempt": attempt}
            t0 = time.perf_counter()
            try:
                if kind == "append":
                    v = ll.write_table(path, _row(w, i), storage_options=opts)
                elif kind == "overwrite":
                    v = ll.write_table(path, _row(w, i, "overwrite"), mode="overwrite", storage_options=opts)
                else:  # idempotent append of batch i by app "job"
                    v = ll.write_table(path, _row(w, i), app_id="job", app_version=i, storage_options=opts)
                rec.update(status="ok", version=v)
            except Conflict as e:
                rec.update(status="conflict", read_version=e.read_version, winning_version=e.winning_version, error=str(e))
            except Exception as e:  # reported, and the test fails on it
                rec.update(status="error", error=f"{type(e).__name__}: {e}")
            rec["seconds"] = round(time.perf_counter() - t0, 4)
            print(json.dumps(rec), flush=True)
            if rec["status"] != "conflict":
                break
            time.sleep(cfg.get("pause", 0.0))
        time.sleep(cfg.get("pause", 0.0))


def _run_workers(configs: list[dict]) -> list[dict]:
    """Start one process per config, release them together, return every record they printed."""
    procs = [
        subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), json.dumps(cfg)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for cfg in configs
    ]
    try:
        for p in procs:
            line = p.stdout.readline().strip()
            if line != "ready":
                p.wait(timeout=30)
                raise AssertionError(f"worker did not start: {line!r} {p.stderr.read()[-3000:]}")
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        records = []
        deadline = time.monotonic() + WORKER_TIMEOUT_S
        for p in procs:
            out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            assert p.returncode == 0, f"worker failed ({p.returncode}): {err[-3000:]}"
            records += [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        return records
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def _deltalake_keys(backend) -> tuple[int, list[tuple]]:
    dt = backend.deltalake_table()
    return dt.version(), _keys(dt.to_pyarrow_table())


def test_six_processes_append_concurrently(backend):
    """Six processes × 15 appends on local disk; three × four on the object stores (the short form)."""
    path, opts = backend.uri, backend.storage_options
    writers, per_writer = (3, 4) if backend.short else (6, 15)
    lakelog.write_table(path, _row(-1, -1).slice(0, 0), partition_by=None, storage_options=opts)  # version 0, empty
    t0 = time.perf_counter()
    records = _run_workers([{"path": path, "writer": w, "count": per_writer, "role": "append", "storage_options": opts} for w in range(writers)])
    elapsed = time.perf_counter() - t0
    total = writers * per_writer
    bad = [r for r in records if r["status"] != "ok"]
    assert not bad, bad[:3]
    assert len(records) == total
    acked = {r["version"]: (r["writer"], r["seq"], "append") for r in records}
    assert sorted(acked) == list(range(1, total + 1)), "each acknowledged append has its own version"
    assert _log_versions(path, opts) == list(range(total + 1)), "versions are contiguous"
    ops = _commit_ops(path, list(range(1, total + 1)), opts)
    assert {v: ops[v]["adds"] for v in ops} == {v: [k] for v, k in acked.items()}, "each version holds exactly its append"
    expected = sorted(acked.values())
    assert _keys(lakelog.read_table(path, storage_options=opts)) == expected  # each append present exactly once
    assert _deltalake_keys(backend) == (total, expected)
    print(f"{total} appends by {writers} processes in {elapsed:.1f}s ({total / elapsed:.1f} commits/s)")


def test_overwrites_racing_appends_lose_nothing_acknowledged(backend):
    path, opts = backend.uri, backend.storage_options
    lakelog.write_table(path, _row(-1, -1).slice(0, 0), storage_options=opts)
    appenders, appends, overwriters, overwrites = (2, 4, 1, 2) if backend.short else (4, 8, 2, 2)
    cfgs = [{"path": path, "writer": w, "count": appends, "role": "append", "storage_options": opts, "pause": 0.01} for w in range(appenders)]
    cfgs += [
        {"path": path, "writer": 100 + w, "count": overwrites, "role": "overwrite", "storage_options": opts, "tries": 200, "pause": 0.005}
        for w in range(overwriters)
    ]
    records = _run_workers(cfgs)
    assert not [r for r in records if r["status"] == "error"], [r for r in records if r["status"] == "error"][:3]
    conflicts = [r for r in records if r["status"] == "conflict"]
    assert all(r["kind"] == "overwrite" for r in conflicts), "appends never conflict"
    assert all(r["winning_version"] > r["read_version"] >= 0 for r in conflicts)
    ok = [r for r in records if r["status"] == "ok"]
    assert Counter(r["kind"] for r in ok) == {"append": appenders * appends, "overwrite": overwriters * overwrites}
    acked = {r["version"]: (r["writer"], r["seq"], r["kind"]) for r in ok}
    n = len(ok)
    assert sorted(acked) == list(range(1, n + 1)) and _log_versions(path, opts) == list(range(n + 1))
    # Replay the acknowledged writes in version order: that is exactly what the table must show.
    ops = _commit_ops(path, list(range(1, n + 1)), opts)
    state: set[tuple] = set()
    for v in range(1, n + 1):
        assert ops[v]["adds"] == [acked[v]], f"version {v} does not hold the write acknowledged for it"
        if acked[v][2] == "overwrite":
            assert ops[v]["removes"] == len(state), "an overwrite removes exactly the files it read"
            state = set()
        state.add(acked[v])
    expected = sorted(state)
    assert _keys(lakelog.read_table(path, storage_options=opts)) == expected
    assert _deltalake_keys(backend) == (n, expected)
    print(f"{len(conflicts)} overwrite attempts conflicted; {n} writes committed")


def test_racing_duplicate_app_versions_commit_once(backend):
    path, opts = backend.uri, backend.storage_options
    lakelog.write_table(path, _row(-1, -1).slice(0, 0), storage_options=opts)
    processes, batches = (3, 3) if backend.short else (4, 6)
    records = _run_workers([{"path": path, "writer": w, "count": batches, "role": "idempotent", "storage_options": opts} for w in range(processes)])
    assert [r for r in records if r["status"] != "ok"] == []
    assert len(records) == processes * batches
    versions = _log_versions(path, opts)
    ops = _commit_ops(path, versions[1:], opts)
    txns = [t for v in ops for t in ops[v]["txns"]]
    assert sorted(txns) == [("job", i) for i in range(batches)], "each (app_id, app_version) committed exactly once"
    assert versions == list(range(batches + 1))
    rows = _keys(lakelog.read_table(path, storage_options=opts))
    assert sorted(seq for _, seq, _ in rows) == list(range(batches))
    assert _deltalake_keys(backend) == (batches, rows)


if __name__ == "__main__":
    _worker_main(json.loads(sys.argv[1]))

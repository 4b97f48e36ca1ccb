"""SIGKILLed writers on a table with V2 checkpoints and in-commit timestamps (real subprocesses, see
tests/crash_writer.py), on local disk and, in a short form (two kills), on S3, Azure and GCS: kills land
while sidecars are written, just before and after the UUID-named checkpoint file is created, before
``_last_checkpoint``, around commits, and at random moments. After every kill the table holds exactly
the acknowledged-or-committed batches for lakelog and for deltalake's SQL engine, in-commit timestamps
stay strictly increasing, and log cleanup removes the sidecars that killed writers left without a
checkpoint while the table stays readable."""

from __future__ import annotations

import json
import random
import signal
import time
import warnings

import pyarrow as pa

import lakelog
import lakelog.log.checkpoint
import lakelog.log.cleanup
from lakelog.check import check_table
from lakelog.log.delta_log import DeltaLog
from lakelog.storage import Storage

from tests.crash_writer import CONFIGURATION, batch_table, expected_rows
from tests.test_crash import SEED, _committed_batches, _rows, _WriterRun

KILL_SPECS = [
    "open_output@_sidecars",
    "put_if_absent@.checkpoint.",
    "put_if_absent:done@.checkpoint.",
    "put@_last_checkpoint",
    "put_if_absent@.json",
    "put_if_absent:done@.json",
]


# The short form on object stores: a kill after the sidecars are written but before the checkpoint file
# that names them (an orphan sidecar), then one at a random moment.
SHORT_KILL_SPECS = ["put_if_absent@.checkpoint."]


def _peer_rows(backend, path: str) -> list[tuple]:
    got = backend.peer_sql('select "batch", "row", part, payload from t', path)
    return _rows(got.cast(pa.schema([("batch", pa.int64()), ("row", pa.int64()), ("part", pa.int64()), ("payload", pa.string())])))


def _verify(backend, path: str, started: set[int], acked: set[int]) -> None:
    committed = _committed_batches(path)
    assert acked <= set(committed) <= started
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = lakelog.Table(path)
        assert t.version == max(committed.values())
        got = _rows(t.to_pyarrow())
    assert got == expected_rows(committed)
    assert _peer_rows(backend, path) == got
    commits = t.storage.read_many([t.storage.log_file(f"{v:020d}.json") for v in range(t.version + 1)])
    icts = [json.loads(data.split(b"\n", 1)[0])["commitInfo"]["inCommitTimestamp"] for data in commits.values()]
    assert icts == sorted(icts) and len(set(icts)) == len(icts), icts
    report = check_table(path)
    assert report.ok, report.format()


def test_sigkill_during_v2_checkpoints_and_ict_commits(backend, monkeypatch):
    """Twelve kills on local disk; two on object stores (SHORT_KILL_SPECS, then a random moment)."""
    path = backend.uri
    rng = random.Random(SEED)
    specs = SHORT_KILL_SPECS if backend.short else KILL_SPECS
    lakelog.write_table(
        path, batch_table(0), partition_by=["part"], user_metadata="batch-0",
        configuration={**CONFIGURATION, "delta.checkpointPolicy": "v2", "delta.enableInCommitTimestamps": "true"},
    )
    started, acked = {0}, {0}
    next_batch, died = 1, set()
    for i in range(2 * len(specs)):
        spec = f"{specs[i // 2]}#{rng.randint(1, 2)}" if i % 2 == 0 else None
        # A run killed by the test must still be writing when the kill comes: on an idle machine 20
        # batches can all commit within the random delay.
        run = _WriterRun(path, next_batch, spec, max_batches=20 if spec is not None else 100_000)
        assert run.ready.wait(60), run.error_output()
        if spec is None:
            time.sleep(rng.uniform(0.3, 1.0) if backend.short else rng.uniform(0.05, 0.4))
            run.proc.send_signal(signal.SIGKILL)
        rc = run.finish(timeout=60)
        assert rc == -signal.SIGKILL, f"writer exited with {rc} (spec {spec}):\n{run.error_output()}"
        if spec is not None:
            assert run.died_at is not None, (spec, run.lines[-3:])
            died.add(spec.split("#")[0])
        started |= run.batches("start")
        acked |= run.batches("ack")
        _verify(backend, path, started, acked)
        next_batch = max(started) + 1
    assert died == set(specs)
    storage = Storage(path)
    listing = DeltaLog(storage).list()
    assert all(cp.kind == "uuid" for cps in listing.checkpoints.values() for cp in cps)
    # Sidecars of checkpoints that never got their file are orphans; cleanup deletes them (and the old
    # checkpoints' sidecars), keeping every sidecar the remaining checkpoints name.
    sidecars_before = {f.name for f in storage.list_dir(storage.log_file("_sidecars"))}
    named = set()
    for cps in listing.checkpoints.values():
        for cp in cps:
            named |= set(lakelog.log.checkpoint.read_checkpoint_state(storage, cp).sidecars)
    assert sidecars_before - named, "no kill left an unreferenced sidecar"
    # Two more writes: one of them makes a checkpoint (every second version), which cleanup needs.
    for b in (next_batch, next_batch + 1):
        lakelog.write_table(path, batch_table(b), partition_by=["part"], user_metadata=f"batch-{b}")
        started.add(b)
        acked.add(b)
    _verify(backend, path, started, acked)
    committed = _committed_batches(path)
    # Sidecars less than a day old are kept: clean up as if two days had passed (an object store sets its
    # own modification times, so the files cannot be aged instead).
    now = lakelog.log.cleanup.now_ms()
    monkeypatch.setattr(lakelog.log.cleanup, "now_ms", lambda: now + 2 * 86_400_000)
    deleted = lakelog.Table(path).cleanup_log(retention_hours=0)
    monkeypatch.undo()
    assert any(d.startswith("_sidecars/") for d in deleted), deleted
    # the commits before the newest checkpoint are gone too: the rows come from it and its sidecars
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = lakelog.Table(path)
        assert t.snapshot.file_set.base is not None
        assert _rows(t.to_pyarrow()) == expected_rows(committed) == _peer_rows(backend, path)
    left = {f.name for f in storage.list_dir(storage.log_file("_sidecars"))}
    assert not (left & (sidecars_before - named)), "orphan sidecars survived cleanup"
    # The last write may have made a checkpoint of its own: what is left is what the checkpoints name now.
    named_now = set()
    for cps in DeltaLog(storage).list().checkpoints.values():
        for cp in cps:
            named_now |= set(lakelog.log.checkpoint.read_checkpoint_state(storage, cp).sidecars)
    assert left <= named_now, "unreferenced sidecars survived cleanup"

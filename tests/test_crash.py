"""Crash safety by fault injection, on local disk (in full) and on S3, Azure and GCS (a short form).

* ``test_sigkill_*``: a writer process (tests/crash_writer.py) appends identifiable batches to a table with
  ``delta.checkpointInterval`` 2 and is SIGKILLed, at random moments (seeded) and just before chosen
  storage operations (data files, the commit, the checkpoint, ``_last_checkpoint``). After every kill the
  table opens, every file of the snapshot exists, the visible rows are exactly those of the batches whose
  commit is in the log (each batch all or nothing), every acknowledged batch is among them, deltalake
  reads the same rows, and ``check_table`` finds no problem. On object stores: four kills, two of them
  just before and just after the commit's create.
* ``test_fault_at_every_storage_operation``: a storage operation of a commit that also writes a
  checkpoint fails (the ``lakelog.fault_injector`` storage option), at operation 1, 2, 3, ... until a run
  completes without reaching the failure. After each: the table reads as the old or the new state, and
  a retry of the write succeeds and leaves the new state exactly once. On object stores: one failure at
  each of the operations that write to the store.

Environment knobs: LAKELOG_CRASH_SEED (default 20251122), LAKELOG_CRASH_KILLS (default 30).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import warnings

import pyarrow as pa
import pytest

import lakelog
from lakelog.check import check_table
from lakelog.errors import LakelogError, TableNotFoundError
from lakelog.storage import Storage
from tests.crash_writer import CONFIGURATION, batch_table, expected_rows

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED = int(os.environ.get("LAKELOG_CRASH_SEED", "20251122"))
KILLS = int(os.environ.get("LAKELOG_CRASH_KILLS", "30"))
COLUMNS = ["batch", "row", "part", "payload"]


# ---------------------------------------------------------------- helpers


def _rows(table: pa.Table) -> list[tuple]:
    cols = [table.column(c).to_pylist() for c in COLUMNS]
    return sorted(zip(*cols))


def _committed_batches(path: str) -> dict[int, int]:
    """{batch: version} read straight from the commit files on any store (its filesystem, no lakelog log
    code); asserts contiguity."""
    storage = Storage(path)
    fs, log_dir = storage.fs, storage.log_dir
    fs.invalidate_cache()
    try:
        names = [p.rsplit("/", 1)[-1] for p in fs.ls(log_dir, detail=False)]
    except FileNotFoundError:
        return {}
    versions = sorted(int(n[:20]) for n in names if re.fullmatch(r"\d{20}\.json", n))
    assert versions == list(range(len(versions))), f"the log is not contiguous: {versions}"
    out = {}
    for v in versions:
        for line in fs.cat_file(f"{log_dir}/{v:020d}.json").splitlines():
            info = json.loads(line).get("commitInfo")
            if info and str(info.get("userMetadata", "")).startswith("batch-"):
                b = int(info["userMetadata"].split("-", 1)[1])
                assert b not in out, f"batch {b} committed twice (versions {out[b]} and {v})"
                out[b] = v
    return out


def _verify_after_crash(path: str, started: set[int], acked: set[int], deltalake_options: dict | None = None) -> dict[int, int]:
    committed = _committed_batches(path)
    assert acked <= set(committed), f"acknowledged batches {sorted(acked - set(committed))} are not committed"
    assert set(committed) <= started, f"batches {sorted(set(committed) - started)} were committed but never started"
    if not committed:
        with pytest.raises(TableNotFoundError):
            lakelog.Table(path)
        return committed
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = lakelog.Table(path)
        assert t.version == max(committed.values())
        for rel in t.snapshot.files:
            assert t.storage.exists(t.storage.join(rel)), f"snapshot file {rel} does not exist"
        got = _rows(t.to_pyarrow())
    assert got == expected_rows(committed), "visible rows differ from the committed batches (a partial or lost batch)"
    from deltalake import DeltaTable

    assert _rows(DeltaTable(path, storage_options=deltalake_options).to_pyarrow_table()) == got, "deltalake reads other rows than lakelog"
    report = check_table(path)
    assert report.ok, report.format()
    return committed


class _WriterRun:
    """One crash_writer process: its stdout lines, gathered by a thread."""

    def __init__(self, path: str, first: int, kill_at: str | None, max_batches: int, env: dict | None = None):
        cmd = [sys.executable, "-m", "tests.crash_writer", path, str(first), "--max-batches", str(max_batches)]
        if kill_at:
            cmd += ["--kill-at", kill_at]
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=self.stderr, text=True, env=env)
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.strip())
            if line.startswith("ready"):
                self.ready.set()
        self.ready.set()

    def finish(self, timeout: float) -> int:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.thread.join(10)
        return rc

    def error_output(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-4000:]

    def batches(self, kind: str) -> set[int]:
        return {int(line.split()[1]) for line in self.lines if line.startswith(kind + " ")}

    @property
    def died_at(self) -> str | None:
        return next((line[len("dying "):] for line in self.lines if line.startswith("dying ")), None)


def _hooked_ops() -> set[str]:
    """The storage operations one partitioned write with a checkpoint reports to a fault injector."""
    seen: set[str] = set()
    path = f"memory://lakelog-tests/{uuid.uuid4().hex}/probe"
    for b in range(2):
        lakelog.write_table(path, batch_table(b), partition_by=["part"], configuration=CONFIGURATION, storage_options={"lakelog.fault_injector": lambda op, p: seen.add(op)})
    return seen


# ---------------------------------------------------------------- SIGKILL


def _kill_specs(hooked: set[str]) -> list[str]:
    """Where op-targeted kills land: data files, the commit, the checkpoint and _last_checkpoint."""
    specs = ["makedirs@part=1", "put_if_absent@.json", "put_if_absent:done@.json", "put_if_absent@.checkpoint.parquet",
             "put_if_absent:done@.checkpoint.parquet", "put@_last_checkpoint", "put:done@_last_checkpoint"]
    if "open_output" in hooked:
        specs.insert(0, "open_output")
    return specs


# The short form on object stores: two timer kills, and kills just before and just after the commit's create.
SHORT_KILLS = 4
SHORT_SPECS = ["put_if_absent@.json", "put_if_absent:done@.json"]


def test_sigkill_writer_at_random_moments(backend):
    """KILLS kills (SHORT_KILLS on object stores): even ones after a random delay, odd ones just before a
    chosen storage operation."""
    path = backend.uri
    rng = random.Random(SEED)
    kills = SHORT_KILLS if backend.short else KILLS
    specs = SHORT_SPECS if backend.short else _kill_specs(_hooked_ops())
    started: set[int] = set()
    acked: set[int] = set()
    died_at: list[str] = []  # the specs at which a kill landed
    next_batch = 0
    deadline = time.monotonic() + 150
    for i in range(kills):
        spec = None
        if i % 2:
            spec = f"{specs[(i // 2) % len(specs)]}#{rng.randint(1, 3)}"
        run = _WriterRun(path, next_batch, spec, max_batches=50)
        assert run.ready.wait(60), run.error_output()
        if spec is None:
            # an object store's commit takes longer than a local one: wait long enough for some to land
            time.sleep(rng.uniform(0.2, 1.2) if backend.short else rng.uniform(0.0, 0.3))
            run.proc.send_signal(signal.SIGKILL)
        rc = run.finish(timeout=60)
        assert rc == -signal.SIGKILL, f"writer exited with {rc} (kill {i}, spec {spec}):\n{run.error_output()}"
        if spec is not None:
            op, _, sub = spec.split("#")[0].partition("@")
            assert run.died_at is not None, (spec, run.lines[-3:])
            died_op, died_path = run.died_at.split(" ", 1)
            assert died_op == op and sub in died_path, (spec, run.died_at)
            died_at.append(spec.split("#")[0])
        started |= run.batches("start")
        acked |= run.batches("ack")
        _verify_after_crash(path, started, acked, backend.deltalake_options)
        next_batch = max(started, default=-1) + 1
        assert time.monotonic() < deadline, f"the kill test is too slow ({i + 1} kills so far)"

    # Every targeted moment was hit.
    assert set(died_at) == set(specs[: kills // 2]), sorted(set(died_at))
    # Killed writers left data files no commit names (some half written): invisible, listed as orphans.
    report = check_table(path)
    assert report.ok and report.orphans, report.format()
    assert all(re.fullmatch(r"part=[012]/part-\d{5}-[0-9a-f-]{36}\.snappy\.parquet", o) for o in report.orphans), report.orphans

    # A writer that is not killed carries on from the crashed state.
    run = _WriterRun(path, next_batch, None, max_batches=3)
    assert run.finish(timeout=60) == 0, run.error_output()
    started |= run.batches("start")
    acked |= run.batches("ack")
    assert run.batches("ack") == {next_batch, next_batch + 1, next_batch + 2}
    committed = _verify_after_crash(path, started, acked, backend.deltalake_options)
    assert len(acked) > kills // 2, f"only {len(acked)} batches were acknowledged in {kills} runs"
    assert set(committed) >= acked


# ---------------------------------------------------------------- deterministic injection


class InjectedFault(OSError):
    """The store failed (not a transient error: lakelog does not retry it)."""


class FailAt:
    """Fails the ``n``-th storage operation (counting ``:done`` events) once; records every event."""

    def __init__(self, n: int, kind: str):
        self.n, self.kind = n, kind
        self.count = 0
        self.fired: tuple[str, str] | None = None
        self.events: list[tuple[str, str]] = []

    def __call__(self, op: str, path: str) -> None:
        self.count += 1
        self.events.append((op, path.rsplit("/", 1)[-1]))
        if self.count == self.n:
            self.fired = (op, path.rsplit("/", 1)[-1])
            error = ConnectionError if self.kind == "transient" else InjectedFault
            raise error(f"injected fault at storage operation {self.n}: {op} {path}")


def _write(path: str, b: int, injector=None, partitioned: bool = True) -> int:
    options = {"lakelog.fault_injector": injector} if injector is not None else None
    return lakelog.write_table(
        path, batch_table(b), partition_by=["part"] if partitioned else None, configuration=CONFIGURATION, storage_options=options,
        app_id="fault-test", app_version=b, user_metadata=f"batch-{b}",
    )


def _read_rows(path: str) -> list[tuple]:
    return _rows(lakelog.read_table(path))


# What the short form on object stores fails, once each: the data file, the commit's create before and
# after it lands, the checkpoint's create, and the _last_checkpoint write once it landed.
SHORT_FAULTS = [("open_output", "snappy.parquet"), ("put_if_absent", "json"), ("put_if_absent:done", "json"),
                ("put_if_absent", "checkpoint.parquet"), ("put:done", "_last_checkpoint")]


def _op_kind(op: str, name: str) -> tuple[str, str]:
    """(op, what kind of file): a commit or checkpoint by its suffix, a data file as snappy.parquet."""
    if name.startswith("part-"):
        return op, "snappy.parquet"
    return op, name.split(".", 1)[-1] if name[:1].isdigit() else name


@pytest.mark.filterwarnings("ignore:lakelog")  # failed checkpoints warn by design
@pytest.mark.parametrize("kind", ["error", "transient"])
def test_fault_at_every_storage_operation(any_backend, kind):
    """Run one append that also checkpoints (version 4; a checkpoint exists at 2) with a failure at storage
    operation 1, 2, 3, ... of it, each on a fresh table, until a run never reaches the failure. The short
    form on object stores runs the append once without a failure, then fails the first operation of
    each kind in SHORT_FAULTS.

    kind "error": a non-transient OSError, which surfaces unless it hit the optional checkpoint;
    kind "transient": ConnectionError, which the commit path retries.
    """
    backend = any_backend
    if backend.short and kind == "transient":
        pytest.skip("the object stores run the non-transient faults; transient ones are covered on local and memory")
    hooked = _hooked_ops()
    partitioned = not backend.short  # on object stores, one data file per batch keeps the run short

    setup = [0, 1, 2, 3]  # versions 0..3, checkpoint at 2
    b = len(setup)  # the faulted batch: version 4, which also writes a checkpoint and _last_checkpoint
    old, new = expected_rows(setup), expected_rows(setup + [b])

    def faulted_run(n: int):
        path = backend.new_uri()
        for s in setup:
            _write(path, s, partitioned=partitioned)
        injector = FailAt(n, kind)
        try:
            return path, injector, _write(path, b, injector, partitioned), None
        except Exception as e:  # noqa: BLE001 - whatever the failure surfaces as is checked below
            return path, injector, None, e

    if backend.short:
        path, probe, version, error = faulted_run(0)  # no failure: the operations of the append, in order
        assert error is None and version == 4 and _read_rows(path) == new
        first = {}
        for n, (op, name) in enumerate(probe.events, start=1):
            first.setdefault(_op_kind(op, name), n)
        assert set(SHORT_FAULTS) <= set(first), sorted(first)
        ns = [first[k] for k in SHORT_FAULTS]
    else:
        ns = range(1, 100)
    fired: list[tuple[str, str]] = []
    outcomes = {"raised": 0, "survived": 0}
    for n in ns:
        path, injector, version, error = faulted_run(n)
        if injector.fired is None:
            assert not backend.short and error is None, error
            assert version == 4 and _read_rows(path) == new
            break  # a run with no failure: every operation of the commit was failed once
        fired.append(injector.fired)
        state = _read_rows(path)
        if error is None:
            outcomes["survived"] += 1
            assert version == 4
            assert state == new, f"the write succeeded despite the fault at {injector.fired} but the table is not the new state"
        else:
            outcomes["raised"] += 1
            assert isinstance(error, (OSError, LakelogError)), f"unexpected {type(error).__name__} from a storage fault: {error!r}"
            assert state in (old, new), f"after a fault at {injector.fired} the table is neither the old nor the new state ({injector.events})"
            assert _write(path, b, partitioned=partitioned) == 4  # the retry succeeds (idempotent: app_id/app_version)
            assert _read_rows(path) == new, f"the retry after a fault at {injector.fired} did not leave the new state"
        report = check_table(path)
        assert report.ok, f"after a fault at {injector.fired}:\n{report.format()}"
        assert lakelog.Table(path).version == 4
        if backend.peer:
            assert _rows(backend.deltalake_table(path).to_pyarrow_table()) == new
    else:
        assert backend.short, "the commit never ran to completion"

    ops = {_op_kind(op, name) for op, name in fired}
    if backend.short:
        assert ops == set(SHORT_FAULTS), sorted(ops)
    else:
        for expected in [
            ("list_dir", "_delta_log"),
            ("open_input", "checkpoint.parquet"),
            ("put_if_absent", "json"),
            ("put_if_absent:done", "json"),
            ("put_if_absent", "checkpoint.parquet"),
            ("put_if_absent:done", "checkpoint.parquet"),
            ("read", "_last_checkpoint"),
            ("put", "_last_checkpoint"),
            ("put:done", "_last_checkpoint"),
        ]:
            assert expected in ops, f"no fault was injected at {expected}: {sorted(ops)}"
        if partitioned:
            assert ("makedirs", "part=2") in ops
        if "open_output" in hooked:  # data files go through Storage.open_output
            assert any(op == "open_output" for op, _ in fired)
    assert outcomes["raised"] and outcomes["survived"], outcomes

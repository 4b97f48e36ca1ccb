"""Model-based test: random sequences of appends, overwrites, idempotent writes, checkpoints, time travel
(by version and by timestamp), reopening and refreshing, against an in-memory model of every version.

At every step the table's latest version is the model's; every version read by lakelog (and, in some
steps, by deltalake) equals the model's rows of that version; a ``Table`` opened earlier keeps showing
its own version (snapshot isolation) until refreshed; ``check_table`` finds no problem.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import tempfile
import time
import warnings

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import lakelog
from lakelog.check import check_table

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("x", pa.int64())])
# Commits are at least this far apart in wall-clock time, so that a time taken between two commits
# falls between their commit files' modification times. File times come from the kernel's coarse
# clock, which lags time.time() by up to one tick (10 ms at HZ=100), and are compared in whole
# milliseconds; 6 ms failed on a loaded machine.
COMMIT_GAP_S = 0.025
PARTS = st.sampled_from(["a", "b", "a b", "50%", "é", None])
ROWS = st.lists(st.tuples(PARTS, st.none() | st.integers(-1000, 1000)), max_size=6)


class TableModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="lakelog-model-")
        self.path = os.path.join(self.dir, "table")
        self.versions: list[list[tuple]] = []  # the model: sorted rows of each version
        self.txns: dict[str, int] = {}
        self.next_id = 0
        self.open: lakelog.Table | None = None  # a Table opened at some point (may be stale)
        self.open_version: int | None = None  # the version the model says ``open`` shows
        # Wall-clock time (epoch seconds) just before each version's write started and just after it returned.
        self.started: list[float] = []
        self.finished: list[float] = []
        self._write_started = 0.0

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    # ------------------------------------------------------------ helpers
    def _data(self, rows) -> tuple[pa.Table, list[tuple]]:
        ids = list(range(self.next_id, self.next_id + len(rows)))
        self.next_id += len(rows)
        table = pa.table({"id": ids, "p": [p for p, _ in rows], "x": [x for _, x in rows]}, schema=SCHEMA)
        return table, [(i, p, x) for i, (p, x) in zip(ids, rows)]

    def _begin_write(self) -> None:
        if self.finished:
            gap = COMMIT_GAP_S - (time.time() - self.finished[-1])
            if gap > 0:
                time.sleep(gap)
        self._write_started = time.time()

    def _commit(self, rows: list[tuple]) -> None:
        self.versions.append(sorted(rows, key=repr))
        self.started.append(self._write_started)
        self.finished.append(time.time())

    @staticmethod
    def _rows(t: pa.Table) -> list[tuple]:
        cols = [t.column(c).to_pylist() for c in ("id", "p", "x")]
        return sorted(zip(*cols), key=repr)

    @property
    def latest(self) -> int:
        return len(self.versions) - 1

    # ------------------------------------------------------------ steps
    @initialize(rows=ROWS, partitioned=st.booleans(), interval=st.sampled_from([None, "1", "2", "3"]))
    def create(self, rows, partitioned, interval):
        data, new = self._data(rows)
        conf = {"delta.checkpointInterval": interval} if interval else None
        self._begin_write()
        v = lakelog.write_table(self.path, data, partition_by=["p"] if partitioned else None, configuration=conf)
        assert v == 0
        self._commit(new)

    @rule(rows=ROWS)
    def append(self, rows):
        data, new = self._data(rows)
        self._begin_write()
        assert lakelog.write_table(self.path, data) == self.latest + 1
        self._commit(self.versions[-1] + new)

    @rule(rows=ROWS)
    def overwrite(self, rows):
        data, new = self._data(rows)
        self._begin_write()
        assert lakelog.write_table(self.path, data, mode="overwrite") == self.latest + 1
        self._commit(new)

    @rule(rows=ROWS, app=st.sampled_from(["job-a", "job-b"]), app_version=st.integers(0, 4))
    def idempotent_append(self, rows, app, app_version):
        data, new = self._data(rows)
        self._begin_write()
        v = lakelog.write_table(self.path, data, app_id=app, app_version=app_version)
        if app in self.txns and self.txns[app] >= app_version:
            assert v == self.latest  # a duplicate: nothing committed
        else:
            assert v == self.latest + 1
            self.txns[app] = app_version
            self._commit(self.versions[-1] + new)

    @rule()
    def checkpoint_latest(self):
        assert lakelog.Table(self.path).checkpoint() == self.latest

    @rule(data=st.data())
    def checkpoint_older_version(self, data):
        v = data.draw(st.integers(0, self.latest))
        assert lakelog.Table(self.path, version=v).checkpoint() == v

    @rule(data=st.data())
    def time_travel_by_version(self, data):
        v = data.draw(st.integers(0, self.latest))
        t = lakelog.Table(self.path, version=v)
        assert t.version == v
        assert self._rows(t.to_pyarrow()) == self.versions[v]

    @rule(data=st.data())
    def time_travel_by_timestamp(self, data):
        # Times come from the test's own clock around each commit, never from lakelog (history()).
        v = data.draw(st.integers(0, self.latest))
        when = dt.datetime.fromtimestamp(self.finished[v], dt.timezone.utc)  # after v landed, before v+1 began
        t = lakelog.Table(self.path, timestamp=when)
        assert t.version == v
        assert self._rows(t.to_pyarrow()) == self.versions[v]
        later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=5)
        assert lakelog.Table(self.path, timestamp=later).version == self.latest
        with pytest.raises(lakelog.VersionNotFoundError):
            lakelog.Table(self.path, timestamp=dt.datetime.fromtimestamp(self.started[0] - 1, dt.timezone.utc))
        assert [h["version"] for h in lakelog.Table(self.path).history()] == list(range(self.latest, -1, -1))

    @rule()
    def reopen(self):
        self.open = lakelog.Table(self.path)
        self.open_version = self.latest
        assert self.open.version == self.latest

    @precondition(lambda self: self.open is not None)
    @rule()
    def refresh(self):
        self.open.refresh()
        self.open_version = self.latest
        assert self.open.version == self.latest
        assert self._rows(self.open.to_pyarrow()) == self.versions[-1]

    @rule(data=st.data())
    def filtered_read(self, data):
        p = data.draw(PARTS.filter(lambda v: v is not None))
        got = self._rows(lakelog.read_table(self.path, filters=[("p", "=", p)]))
        assert got == [r for r in self.versions[-1] if r[1] == p]

    @rule(data=st.data())
    def deltalake_reads_the_same(self, data):
        from deltalake import DeltaTable

        v = data.draw(st.integers(0, self.latest))
        assert self._rows(DeltaTable(self.path, version=v).to_pyarrow_table()) == self.versions[v]

    @rule()
    def check(self):
        report = check_table(self.path)
        assert report.ok and not report.orphans, report.format()

    # ------------------------------------------------------------ invariants
    @invariant()
    def latest_equals_model(self):
        if not self.versions:
            return
        t = lakelog.Table(self.path)
        assert t.version == self.latest
        assert self._rows(t.to_pyarrow()) == self.versions[-1]

    @invariant()
    def open_table_keeps_its_version(self):
        # Compared with the version recorded when the Table was opened (or refreshed), not with the
        # version the Table reports about itself: a Table that moved on by itself must fail here.
        if self.open is not None:
            assert self.open.version == self.open_version
            assert self._rows(self.open.to_pyarrow()) == self.versions[self.open_version]


TableModel.TestCase.settings = settings(
    max_examples=20,
    stateful_step_count=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


class TestTableModel(TableModel.TestCase):
    def setUp(self) -> None:
        warnings.simplefilter("ignore", FutureWarning)

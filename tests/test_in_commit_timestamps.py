"""In-commit timestamps (the ``inCommitTimestamp`` writer feature).

Writers: with ``delta.enableInCommitTimestamps=true`` every commit starts with a ``commitInfo`` holding a
strictly increasing ``inCommitTimestamp``; a table with earlier commits records the enablement version
and timestamp in the enabling commit. Readers: from the enablement version on, history, timestamp time
travel and the streaming source's ``startingTimestamp`` use those timestamps and ignore file times (tests
set file times that contradict them); before it, file times. deltalake is the peer for what lakelog
writes: it reads every version and its history shows the same times (its ``load_as_version(datetime)``
goes by file times, so it is not the oracle for timestamp time travel)."""

from __future__ import annotations

import datetime as dt
import json
import os

import deltalake
import orjson
import pyarrow as pa
import pytest

import lakelog
from lakelog.errors import CorruptLogError, VersionNotFoundError

ICT = {"delta.enableInCommitTimestamps": "true"}
DATA = os.path.join(os.path.dirname(__file__), "data")


def _commit_path(path: str, v: int) -> str:
    return os.path.join(path, "_delta_log", f"{v:020d}.json")


def _lines(path: str, v: int) -> list[dict]:
    with open(_commit_path(path, v), "rb") as f:
        return [orjson.loads(line) for line in f.read().splitlines() if line.strip()]


def _write(path: str, i: int, configuration=None) -> None:
    lakelog.write_table(path, pa.table({"id": pa.array([i], pa.int64())}), configuration=configuration)


def _ms(minute: int) -> int:
    return int(dt.datetime(2026, 5, 1, 12, minute, tzinfo=dt.timezone.utc).timestamp() * 1000)


def _set_mtime(path: str, v: int, ms: int) -> None:
    os.utime(_commit_path(path, v), (ms / 1000, ms / 1000))


def _set_ict(path: str, v: int, ms: int) -> None:
    """Give commit ``v`` the in-commit timestamp ``ms`` (and, for the enabling commit, the matching
    enablement timestamp), as a writer with that clock would have; its file time is kept."""
    st = os.stat(_commit_path(path, v))
    out = []
    for obj in _lines(path, v):
        if "commitInfo" in obj:
            obj["commitInfo"]["inCommitTimestamp"] = ms
            obj["commitInfo"]["timestamp"] = ms
        md = obj.get("metaData")
        if md and "delta.inCommitTimestampEnablementTimestamp" in md.get("configuration", {}):
            md["configuration"]["delta.inCommitTimestampEnablementTimestamp"] = str(ms)
        out.append(orjson.dumps(obj))
    with open(_commit_path(path, v), "wb") as f:
        f.write(b"\n".join(out) + b"\n")
    os.utime(_commit_path(path, v), ns=(st.st_atime_ns, st.st_mtime_ns))


def _enabled_at_3(path: str) -> None:
    """Versions 0..2 without in-commit timestamps, 3 enables them, 4..5 have them. File times say minutes
    0, 1, 2 for 0..2 and (contradicting the in-commit timestamps) minute 59 for 3..5; in-commit
    timestamps are minutes 3, 4, 5."""
    for i in range(3):
        _write(path, i)
    _write(path, 3, ICT)
    for i in range(4, 6):
        _write(path, i)
    for v in range(6):
        if v >= 3:
            _set_ict(path, v, _ms(v))
        _set_mtime(path, v, _ms(v) if v < 3 else _ms(59))


def test_writers_stamp_every_commit_from_enablement_on(table_path):
    for i in range(3):
        _write(table_path, i)
    _write(table_path, 3, ICT)
    for i in range(4, 8):
        _write(table_path, i)
    t = lakelog.Table(table_path)
    assert "inCommitTimestamp" in t.protocol.writer_features and t.protocol.min_writer_version == 7
    conf = t.metadata.configuration
    assert conf["delta.inCommitTimestampEnablementVersion"] == "3"
    enabling = _lines(table_path, 3)
    assert "commitInfo" in enabling[0]  # commitInfo is the first action
    ict3 = enabling[0]["commitInfo"]["inCommitTimestamp"]
    assert conf["delta.inCommitTimestampEnablementTimestamp"] == str(ict3)
    assert ict3 > os.stat(_commit_path(table_path, 2)).st_mtime * 1000 - 1
    icts = [_lines(table_path, v)[0]["commitInfo"]["inCommitTimestamp"] for v in range(3, 8)]
    assert icts == sorted(icts) and len(set(icts)) == len(icts)
    for v in range(3):
        assert "inCommitTimestamp" not in _lines(table_path, v)[0]["commitInfo"]
    # the peer reads the table and agrees on every version's time
    peer = {h["version"]: h["timestamp"] for h in deltalake.DeltaTable(table_path).history()}
    mine = {h["version"]: int(h["timestamp"].timestamp() * 1000) for h in t.history()}
    assert {v: mine[v] for v in range(3, 8)} == {v: peer[v] for v in range(3, 8)} == dict(zip(range(3, 8), icts))


def test_created_with_ict_has_no_enablement_properties(table_path):
    _write(table_path, 0, ICT)
    _write(table_path, 1)
    conf = lakelog.Table(table_path).metadata.configuration
    assert "delta.inCommitTimestampEnablementVersion" not in conf and "delta.inCommitTimestampEnablementTimestamp" not in conf
    assert all("inCommitTimestamp" in _lines(table_path, v)[0]["commitInfo"] for v in range(2))
    # every version's time is its in-commit timestamp, whatever the file says
    _set_ict(table_path, 0, _ms(10))
    _set_ict(table_path, 1, _ms(11))
    _set_mtime(table_path, 0, _ms(50))
    _set_mtime(table_path, 1, _ms(40))
    assert lakelog.Table(table_path, timestamp=dt.datetime(2026, 5, 1, 12, 10, 30)).version == 0
    assert lakelog.Table(table_path, timestamp="2026-05-01T12:11:00Z").version == 1
    with pytest.raises(VersionNotFoundError, match="before the earliest"):
        lakelog.Table(table_path, timestamp="2026-05-01T12:09:00Z")


def test_time_travel_and_history_use_ict_from_the_enablement_version(table_path):
    _enabled_at_3(table_path)
    at = lambda minute, sec=0: lakelog.Table(table_path, timestamp=dt.datetime(2026, 5, 1, 12, minute, sec)).version  # noqa: E731
    assert [at(0), at(1, 30), at(2, 59)] == [0, 1, 2]  # before enablement: file times
    assert [at(3), at(4, 1), at(5), at(58)] == [3, 4, 5, 5]  # after: in-commit timestamps (files say minute 59)
    with pytest.raises(VersionNotFoundError):
        lakelog.Table(table_path, timestamp="2026-05-01T11:59:00Z")
    hist = {h["version"]: h["timestamp"] for h in lakelog.Table(table_path).history()}
    assert hist == {v: dt.datetime(2026, 5, 1, 12, v, tzinfo=dt.timezone.utc) for v in range(6)}
    # an old Table object's history also uses the latest metadata's enablement version
    assert {h["version"]: h["timestamp"] for h in lakelog.Table(table_path, version=4).history()} == {v: hist[v] for v in range(5)}
    # deltalake reads every version of the table lakelog wrote (its load_as_version(datetime) goes by
    # file times, so it is no oracle for timestamp time travel on this table)
    for v in range(6):
        peer = deltalake.DeltaTable(table_path, version=v).to_pyarrow_table()
        assert sorted(peer.column("id").to_pylist()) == sorted(lakelog.read_table(table_path, version=v).column("id").to_pylist()) == list(range(v + 1))


def test_commits_stay_monotonic_after_a_future_timestamp(table_path):
    """A writer with a fast clock left an in-commit timestamp in the future: the next one is after it."""
    _write(table_path, 0, ICT)
    future = int((dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)).timestamp() * 1000)
    _set_ict(table_path, 0, future)
    _write(table_path, 1)
    assert _lines(table_path, 1)[0]["commitInfo"]["inCommitTimestamp"] == future + 1
    # a checkpoint carries the enablement state forward (version 1 has a checkpoint's metadata too)
    lakelog.Table(table_path).checkpoint()
    assert lakelog.Table(table_path).history()[0]["timestamp"] == dt.datetime.fromtimestamp((future + 1) / 1000, dt.timezone.utc)


def test_enablement_properties_survive_checkpoints(table_path):
    lakelog.write_table(table_path, pa.table({"id": pa.array([0], pa.int64())}), configuration={"delta.checkpointInterval": "2"})
    _write(table_path, 1, ICT)
    for i in range(2, 5):
        _write(table_path, i)
    # version 4 has a checkpoint: the snapshot starts there and still knows where ICT starts
    t = lakelog.Table(table_path)
    assert t.snapshot.file_set.base is not None
    assert t.metadata.configuration["delta.inCommitTimestampEnablementVersion"] == "1"
    icts = [_lines(table_path, v)[0]["commitInfo"]["inCommitTimestamp"] for v in range(1, 5)]
    assert [int(h["timestamp"].timestamp() * 1000) for h in t.history()][:4] == icts[::-1]


def test_a_commit_missing_its_ict_is_a_typed_error(table_path):
    _enabled_at_3(table_path)
    lines = _lines(table_path, 4)
    del lines[0]["commitInfo"]["inCommitTimestamp"]
    with open(_commit_path(table_path, 4), "wb") as f:
        f.write(b"\n".join(orjson.dumps(o) for o in lines) + b"\n")
    with pytest.raises(CorruptLogError, match="commit 4 has no commitInfo.inCommitTimestamp"):
        lakelog.Table(table_path).history()
    with pytest.raises(CorruptLogError, match="inCommitTimestamp"):
        lakelog.Table(table_path, timestamp="2026-05-01T12:04:30Z")


def test_spark_written_ict_table_history_reports_stored_timestamps():
    """cdc_ict_table: ICT in every commit from version 0 (v1's is deliberately older than v0's)."""
    path = os.path.join(DATA, "cdc_ict_table")
    stored = {}
    for v in range(4):
        first = _lines(path, v)[0]
        assert "commitInfo" in first
        stored[v] = first["commitInfo"]["inCommitTimestamp"]
    hist = {h["version"]: int(h["timestamp"].timestamp() * 1000) for h in lakelog.Table(path).history()}
    assert hist == stored
    # the latest version is found by its own in-commit timestamp, not by the file's time
    latest = dt.datetime.fromtimestamp(stored[3] / 1000, dt.timezone.utc)
    assert lakelog.Table(path, timestamp=latest).version == 3


def test_stream_source_starting_timestamp_uses_ict(table_path):
    pytest.importorskip("pyspark")
    from pyspark.sql.datasource import CaseInsensitiveDict
    from pyspark.sql.pandas.types import from_arrow_schema

    from spark_ext.datasource.stream_source import LakelogStreamReader, Position

    _enabled_at_3(table_path)

    def start(ts: str) -> dict:
        opts = CaseInsensitiveDict({"path": table_path, "startingTimestamp": ts})
        return LakelogStreamReader(opts, from_arrow_schema(lakelog.Table(table_path).schema)).initialOffset()

    assert start("2026-05-01T12:01:30Z") == Position(2).to_offset()
    assert start("2026-05-01T12:03:30Z") == Position(4).to_offset()  # files say minute 59 for 3..5
    assert start("2026-05-01T12:05:00Z") == Position(5).to_offset()
    with pytest.raises(VersionNotFoundError):
        start("2026-05-01T12:30:00Z")


def test_check_reports_missing_and_decreasing_icts(table_path):
    _enabled_at_3(table_path)
    assert lakelog.Table(table_path).check().ok
    _set_ict(table_path, 5, _ms(4))  # equal to version 4's
    report = lakelog.Table(table_path).check()
    assert report.ok and [(w.kind, w.version) for w in report.warnings if w.kind == "in_commit_timestamp"] == [("in_commit_timestamp", 5)]
    lines = _lines(table_path, 4)
    del lines[0]["commitInfo"]["inCommitTimestamp"]
    with open(_commit_path(table_path, 4), "wb") as f:
        f.write(b"\n".join(orjson.dumps(o) for o in lines) + b"\n")
    report = lakelog.Table(table_path).check()
    assert not report.ok and [(p.kind, p.version) for p in report.problems] == [("in_commit_timestamp", 4)]
    # the Spark-written table with a deliberately older in-commit timestamp at version 1
    report = lakelog.Table(os.path.join(DATA, "cdc_ict_table")).check()
    assert report.ok and [w.version for w in report.warnings if w.kind == "in_commit_timestamp"] == [1]

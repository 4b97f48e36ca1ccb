"""checkpointProtection: log cleanup on a table whose history before
``delta.requireCheckpointProtectionBeforeVersion`` is protected, as Delta's fast DROP FEATURE leaves it.

The table is laid out as Delta leaves it: versions 1-4 list a writer feature lakelog does not support
(``testRemovableWriter``, a name only Delta's tests know), 2-4 are empty commits with barrier
checkpoints, and version 5 drops the feature, adds ``checkpointProtection`` and sets the property to 5.
lakelog makes every commit and checkpoint except those hand-written protocol changes."""

from __future__ import annotations

import os
import time

import orjson
import pyarrow as pa
import pytest
from deltalake import DeltaTable

import lakelog
from lakelog.log.checkpoint import write_checkpoint
from lakelog.errors import InvalidTablePropertyError, UnsupportedFeatureError
from lakelog.maintenance import cleanup_expired_logs
from lakelog.log.snapshot import Snapshot
from lakelog.storage import Storage

DAY = 24 * 3600
PROP = "delta.requireCheckpointProtectionBeforeVersion"


def _rows(i):
    return pa.table({"id": pa.array([i * 10, i * 10 + 1], pa.int64()), "v": pa.array([f"r{i}"] * 2)})


def _commit(path, version, *actions):
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "DROP FEATURE" if version == 5 else "MANUAL"}}
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json"), "wb") as f:
        f.write(b"\n".join(orjson.dumps(a) for a in [*actions, info]) + b"\n")


def _protocol(*features):
    return {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": sorted(["appendOnly", "invariants", *features])}}


def _protected_table(path, unsupported=True, protection=True):
    """Versions 0-7 as above; with ``unsupported=False`` versions 1-4 list only features lakelog supports;
    with ``protection=False`` version 5 sets the property without listing the feature."""
    lakelog.write_table(path, _rows(0), configuration={"delta.enableExpiredLogCleanup": "false"})
    _commit(path, 1, _protocol(*(["testRemovableWriter"] if unsupported else [])))
    storage = Storage(path)
    for v in (2, 3, 4):  # the barrier checkpoints (Delta's writer supports its feature; lakelog's test stands in)
        _commit(path, v)
        write_checkpoint(Snapshot.load(storage, version=v))
    lines = open(os.path.join(path, "_delta_log", f"{0:020d}.json"), "rb").read().splitlines()
    meta = next(a for a in map(orjson.loads, lines) if "metaData" in a)
    meta["metaData"]["configuration"][PROP] = "5"
    _commit(path, 5, _protocol(*(["checkpointProtection"] if protection else [])), meta)
    lakelog.Table(path).checkpoint()
    lakelog.write_table(path, _rows(6))  # normal writes on a protected table
    lakelog.Table(path).delete("id = 1")  # v7
    return storage


def _age(path, versions):
    t = time.time() - 40 * DAY
    for v in versions:
        os.utime(os.path.join(path, "_delta_log", f"{v:020d}.json"), (t, t))


def _names(path):
    return sorted(n for n in os.listdir(os.path.join(path, "_delta_log")) if n[0].isdigit())


def _sorted(t):
    return sorted(t.to_pylist(), key=lambda r: r["id"])


def test_partial_cleanup_over_unsupported_versions_removes_nothing(tmp_path):
    path = str(tmp_path / "t")
    storage = _protected_table(path)
    before = _names(path)
    expected = {v: _sorted(lakelog.read_table(path, version=v)) for v in range(8)}
    _age(path, range(4))  # cutoff commit 3: its checkpoint is before 5, and versions 1-2 list a feature lakelog lacks
    t = lakelog.Table(path)
    assert t.cleanup_log() == []
    assert cleanup_expired_logs(storage, t.snapshot) == []  # what a commit's checkpoint runs (property aside)
    assert _names(path) == before
    for v, rows in expected.items():
        assert _sorted(lakelog.read_table(path, version=v)) == rows
    assert _sorted(DeltaTable(path).to_pyarrow_table()) == expected[7]
    # a checkpoint at a version whose protocol lakelog cannot write is refused
    with pytest.raises(UnsupportedFeatureError, match="testRemovableWriter"):
        lakelog.Table(path, version=3).checkpoint()


def test_cleanup_past_the_protected_version_removes_all_before_it_at_once(tmp_path):
    path = str(tmp_path / "t")
    _protected_table(path)
    expected = {v: _sorted(lakelog.read_table(path, version=v)) for v in (5, 6, 7)}
    _age(path, range(7))  # cutoff commit 6: the newest checkpoint at or before it is 5
    t = lakelog.Table(path)
    dry = t.cleanup_log(dry_run=True)
    # commits first, then the checkpoints they led to (with the checksum files written beside them)
    assert dry == [f"{v:020d}.json" for v in range(5)] + [f"{v:020d}.{kind}" for v in (2, 3, 4) for kind in ("checkpoint.parquet", "crc")]
    assert t.cleanup_log() == dry
    assert _names(path)[0] == f"{5:020d}.checkpoint.parquet"
    for v, rows in expected.items():
        assert _sorted(lakelog.read_table(path, version=v)) == rows
        assert _sorted(DeltaTable(path, version=v).to_pyarrow_table()) == rows
    assert lakelog.Table(path).snapshot.configuration[PROP] == "5"
    lakelog.write_table(path, _rows(8))
    assert _sorted(DeltaTable(path).to_pyarrow_table()) == _sorted(lakelog.read_table(path))


def test_partial_cleanup_over_supported_versions_is_allowed(tmp_path):
    path = str(tmp_path / "t")
    _protected_table(path, unsupported=False)
    _age(path, range(4))
    assert lakelog.Table(path).cleanup_log() == [f"{v:020d}.json" for v in range(3)] + [f"{2:020d}.checkpoint.parquet", f"{2:020d}.crc"]
    for v in range(3, 8):
        assert _sorted(lakelog.read_table(path, version=v)) == _sorted(DeltaTable(path, version=v).to_pyarrow_table())


def test_the_property_is_kept_and_not_settable(tmp_path):
    path = str(tmp_path / "t")
    _protected_table(path)
    t = lakelog.Table(path)
    assert t.snapshot.configuration[PROP] == "5" and "checkpointProtection" in t.snapshot.protocol.writer_features
    with pytest.raises(InvalidTablePropertyError, match="maintained by the engine"):
        t.set_properties({PROP: "7"})


def test_the_property_without_the_feature_protects_nothing(tmp_path):
    """As in Delta: the version only counts while the protocol lists checkpointProtection."""
    path = str(tmp_path / "t")
    _protected_table(path, protection=False)
    _age(path, range(4))
    assert lakelog.Table(path).cleanup_log() == [f"{v:020d}.json" for v in range(3)] + [f"{2:020d}.checkpoint.parquet", f"{2:020d}.crc"]

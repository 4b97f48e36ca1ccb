"""Vacuum, optimize, restore and log cleanup on real tables, with deltalake (delta-rs) as the oracle.
Vacuum with optimize, and restore, also run on S3, Azure and GCS (and vacuum on memory://)."""

import os
import time

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

import lakelog
from lakelog import maintenance
from lakelog.errors import CommitConflictError, InvalidArgumentError, MissingDataFileError, SchemaMismatchError, VersionNotFoundError
from lakelog.maintenance import RetentionDurationError
from lakelog.storage import Storage
from tests.table_files import table_fs

HOUR = 3600
DAY = 24 * HOUR


def _rows(i, n=3, p=None):
    d = {"id": pa.array(range(i * 1000, i * 1000 + n), pa.int64()), "v": pa.array([f"r{i}"] * n)}
    if p is not None:
        d["p"] = pa.array([p[j % len(p)] for j in range(n)])
    return pa.table(d)


def _sorted(t: pa.Table) -> list[dict]:
    return sorted(t.to_pylist(), key=lambda r: (r["id"], str(r)))


def _lakelog_rows(path, version=None):
    return _sorted(lakelog.read_table(path, version=version))


def _delta_rows(path, version=None, storage_options=None):
    dt_ = DeltaTable(path, storage_options=storage_options) if version is None else DeltaTable(path, version=version, storage_options=storage_options)
    return _sorted(dt_.to_pyarrow_table())


def _age(path, seconds):
    """Set the modification time of ``path`` to ``seconds`` ago."""
    t = time.time() - seconds
    os.utime(path, (t, t))


def _data_files(root):
    out = set()
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x != "_delta_log"]
        for f in files:
            out.add(os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/"))
    return out


def _log_files(root):
    return set(os.listdir(os.path.join(root, "_delta_log")))


def _commit(path, version):
    fs, root = table_fs(path)
    return [orjson.loads(line) for line in fs.cat_file(f"{root}/_delta_log/{version:020d}.json").splitlines() if line.strip()]


def _commit_info(path, version):
    return next(a["commitInfo"] for a in _commit(path, version) if "commitInfo" in a)


# ---------------------------------------------------------------- vacuum


def test_vacuum_keeps_every_version_in_retention_and_deletes_old_orphans(table_path):
    lakelog.write_table(table_path, _rows(0, p=["a", "b"]), partition_by=["p"])  # v0
    lakelog.write_table(table_path, _rows(1, p=["a"]))  # v1
    lakelog.write_table(table_path, _rows(2, p=["b"]), mode="overwrite")  # v2: removes every earlier file
    lakelog.write_table(table_path, _rows(3, p=["c"]))  # v3
    expected = {v: _lakelog_rows(table_path, v) for v in range(4)}
    # Every data file looks 30 days old, but the removes happened just now: all of them are still needed.
    for rel in _data_files(table_path):
        _age(os.path.join(table_path, rel), 30 * DAY)
    orphan_old = "p=a/part-00099-killed-writer-old.snappy.parquet"
    orphan_new = "p=a/part-00098-killed-writer-new.snappy.parquet"
    for rel in (orphan_old, orphan_new):
        pq.write_table(pa.table({"id": [1]}), os.path.join(table_path, rel))
    _age(os.path.join(table_path, orphan_old), 8 * DAY)
    log_before = _log_files(table_path)

    t = lakelog.Table(table_path)
    assert t.vacuum() == [orphan_old]  # dry run by default
    assert os.path.exists(os.path.join(table_path, orphan_old))
    assert lakelog.Table(table_path).version == 3  # a dry run commits nothing
    assert _log_files(table_path) == log_before

    assert t.vacuum(dry_run=False) == [orphan_old]
    assert not os.path.exists(os.path.join(table_path, orphan_old))
    assert os.path.exists(os.path.join(table_path, orphan_new))
    assert t.version == 5  # VACUUM START (4) and VACUUM END (5)
    start, end = _commit_info(table_path, 4), _commit_info(table_path, 5)
    assert start["operation"] == "VACUUM START"
    assert start["operationParameters"] == {"retentionCheckEnabled": "true", "defaultRetentionMillis": str(7 * DAY * 1000)}
    assert start["operationMetrics"]["numFilesToDelete"] == "1"
    assert end["operation"] == "VACUUM END"
    assert end["operationParameters"] == {"status": "COMPLETED"}
    assert end["operationMetrics"]["numDeletedFiles"] == "1"
    assert len(_commit(table_path, 4)) == 1 and len(_commit(table_path, 5)) == 1  # commitInfo only
    for v in range(4):
        assert _lakelog_rows(table_path, v) == expected[v]
        assert _delta_rows(table_path, v) == expected[v]
    assert _delta_rows(table_path) == expected[3]
    assert _log_files(table_path) >= log_before  # the log is never touched (only new commits)


def test_vacuum_deletes_expired_tombstones_and_never_the_latest_files(table_path):
    lakelog.write_table(table_path, _rows(0))
    lakelog.write_table(table_path, _rows(1))
    lakelog.write_table(table_path, _rows(2), mode="overwrite")
    latest = _lakelog_rows(table_path)
    live = set(lakelog.Table(table_path).files())
    removed = _data_files(table_path) - live
    assert len(removed) == 2
    deleted = lakelog.Table(table_path).vacuum(0, dry_run=False, enforce_retention_duration=False)
    assert set(deleted) == removed
    assert _data_files(table_path) == live
    assert _lakelog_rows(table_path) == latest
    assert _delta_rows(table_path) == latest
    with pytest.raises(MissingDataFileError) as e:  # files of version 0 are gone: reading it names them
        lakelog.read_table(table_path, version=0)
    assert set(e.value.paths) == {p for p in removed if p in lakelog.Table(table_path, version=0).files()}


def test_vacuum_keeps_files_of_versions_in_window_even_when_checkpoint_dropped_tombstone(table_path):
    conf = {"delta.deletedFileRetentionDuration": "interval 1 second", "delta.checkpointInterval": "2"}
    lakelog.write_table(table_path, _rows(0), configuration=conf)  # v0
    v0_file = lakelog.Table(table_path).files()[0]
    lakelog.write_table(table_path, _rows(1), mode="overwrite")  # v1 removes v0's file
    time.sleep(1.2)
    lakelog.write_table(table_path, _rows(2))  # v2 + checkpoint: the 1-second-old tombstone is dropped
    assert "00000000000000000002.checkpoint.parquet" in _log_files(table_path)
    assert v0_file not in lakelog.Table(table_path).snapshot.tombstones
    _age(os.path.join(table_path, v0_file), 2 * HOUR)
    expected0 = _lakelog_rows(table_path, 0)
    # Version 0 was current within the last hour: a one-hour retention must keep its file.
    assert lakelog.Table(table_path).vacuum(1, dry_run=False) == []
    assert _lakelog_rows(table_path, 0) == expected0
    assert _delta_rows(table_path, 0) == expected0


def test_vacuum_orphans_of_a_killed_writer_only_after_retention(table_path):
    lakelog.write_table(table_path, _rows(0, p=["a"]), partition_by=["p"])
    # A writer that wrote its files and died before committing: files exist, no commit names them.
    plan = lakelog.plan_write(table_path, _rows(1, p=["a", "b"]).schema)
    orphans = {a.relative_path for a in plan.write(_rows(1, p=["a", "b"]))}
    assert len(orphans) == 2
    committed = set(lakelog.Table(table_path).files())
    assert lakelog.Table(table_path).vacuum(dry_run=False) == []  # too young
    assert orphans <= _data_files(table_path)

    for rel in orphans | committed:
        _age(os.path.join(table_path, rel), 8 * DAY)
    # Hidden files, a symlink to a directory outside the table and a nested table are never touched.
    outside = os.path.join(os.path.dirname(table_path), "outside")
    os.makedirs(outside)
    pq.write_table(pa.table({"x": [1]}), os.path.join(outside, "victim.parquet"))
    _age(os.path.join(outside, "victim.parquet"), 30 * DAY)
    os.symlink(outside, os.path.join(table_path, "linked"))
    os.symlink(os.path.join(outside, "victim.parquet"), os.path.join(table_path, "link.parquet"))
    nested = os.path.join(table_path, "nested")
    lakelog.write_table(nested, _rows(9))
    hidden = ["_tmp_staging.parquet", ".part.crc", "p=a/_SUCCESS", "_hidden_dir/file.parquet"]
    for rel in hidden:
        full = os.path.join(table_path, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        open(full, "wb").close()
    for rel in hidden + [f"nested/{f}" for f in _data_files(nested)]:
        _age(os.path.join(table_path, rel), 30 * DAY)

    t = lakelog.Table(table_path)
    assert set(t.vacuum()) == orphans  # dry run
    assert orphans <= _data_files(table_path)
    assert set(t.vacuum(dry_run=False)) == orphans
    remaining = _data_files(table_path)
    assert not (orphans & remaining)
    assert committed <= remaining
    assert all(os.path.exists(os.path.join(table_path, rel)) for rel in hidden)
    assert os.path.exists(os.path.join(outside, "victim.parquet"))
    assert os.path.islink(os.path.join(table_path, "link.parquet"))
    assert lakelog.read_table(nested).num_rows == 3
    assert _delta_rows(table_path) == _lakelog_rows(table_path) == _sorted(_rows(0, p=["a"]))


def test_vacuum_retention_check(table_path):
    lakelog.write_table(table_path, _rows(0))
    t = lakelog.Table(table_path)
    with pytest.raises(RetentionDurationError, match="deletedFileRetentionDuration"):
        t.vacuum(retention_hours=1)
    assert isinstance(RetentionDurationError("x"), lakelog.LakelogError)
    with pytest.raises(ValueError):
        t.vacuum(retention_hours=-1, enforce_retention_duration=False)
    assert t.vacuum(retention_hours=1, enforce_retention_duration=False) == []
    assert t.vacuum(retention_hours=24 * 8) == []
    # The table's own (shorter) retention is its minimum.
    lakelog.write_table(table_path, _rows(1), configuration={"delta.deletedFileRetentionDuration": "interval 2 hours"})
    assert lakelog.Table(table_path).vacuum(retention_hours=2) == []
    with pytest.raises(RetentionDurationError):
        lakelog.Table(table_path).vacuum(retention_hours=1)


def test_vacuum_and_optimize_on_every_backend(any_backend):
    path = any_backend.uri
    for i in range(4):
        lakelog.write_table(path, _rows(i, p=["a", "b"]), partition_by=["p"] if i == 0 else None)
    lakelog.write_table(path, _rows(4, p=["a"]), mode="overwrite")
    for i in range(5, 8):
        lakelog.write_table(path, _rows(i, p=["a", "b"]))
    expected = _lakelog_rows(path)
    t = lakelog.Table(path)
    m = t.optimize()
    assert m["numFilesAdded"] == 2 and m["numFilesRemoved"] == 7
    assert len(t.files()) == 2 and _lakelog_rows(path) == expected
    deleted = t.vacuum(0, dry_run=False, enforce_retention_duration=False)
    assert len(deleted) == 8 + 7  # the overwritten files and the compacted ones
    assert _lakelog_rows(path) == expected
    assert t.vacuum(0, dry_run=False, enforce_retention_duration=False) == []
    if any_backend.peer:
        assert _delta_rows(path, storage_options=any_backend.deltalake_options) == expected


# ---------------------------------------------------------------- optimize


def _many_small_files(path, commits=20, files_per_commit=10):
    """``commits`` versions, each adding ``files_per_commit`` files over partitions a and b."""
    n = 0
    for c in range(commits):
        data = [_rows(n + k, n=5, p=["a", "b"] if k % 2 else ["a"]) for k in range(files_per_commit)]
        n += files_per_commit
        plan = lakelog.plan_write(path, data[0].schema, partition_by=["p"])
        adds = []
        for d in data:
            adds.extend(plan.write(d))
        plan.commit(adds)
    return n


def test_optimize_compacts_200_small_files_and_keeps_data_at_every_version(table_path):
    _many_small_files(table_path, commits=20, files_per_commit=7)  # 10 files per commit
    before = lakelog.Table(table_path)
    assert len(before.files()) == 200
    last = before.version
    expected = {v: _lakelog_rows(table_path, v) for v in (0, 7, last)}

    metrics = lakelog.Table(table_path).optimize()
    assert metrics["version"] == last + 1
    assert metrics["numFilesRemoved"] == 200
    assert metrics["numFilesAdded"] == 2  # one per partition
    assert metrics["partitionsOptimized"] == 2
    assert metrics["filesRemoved"]["totalFiles"] == 200
    after = lakelog.Table(table_path)
    assert len(after.files()) == 2
    assert _lakelog_rows(table_path) == expected[last] == _delta_rows(table_path)
    for v, rows in expected.items():
        assert _lakelog_rows(table_path, v) == rows
        assert _delta_rows(table_path, v) == rows
    info = _commit_info(table_path, last + 1)
    assert info["operation"] == "OPTIMIZE"
    assert info["operationParameters"]["targetSize"] == str(100 * 1024 * 1024)
    assert info["operationMetrics"]["numFilesRemoved"] == "200"
    actions = _commit(table_path, last + 1)
    assert all(a[k]["dataChange"] is False for a in actions for k in ("add", "remove") if k in a)
    for a in actions:
        if "add" in a:
            stats = orjson.loads(a["add"]["stats"])
            assert stats["numRecords"] > 0 and "id" in stats["minValues"]
    # The compacted table is pruned by stats as before.
    assert lakelog.read_table(table_path, filters=[("id", "=", 1002)]).num_rows == 1
    # Nothing left to compact.
    again = lakelog.Table(table_path).optimize()
    assert again["committed"] is False and again["version"] == last + 1 and again["numFilesAdded"] == 0
    assert DeltaTable(table_path).version() == last + 1


def test_optimize_target_size_and_partition_filter(table_path):
    _many_small_files(table_path, commits=4, files_per_commit=10)
    files = lakelog.Table(table_path).snapshot.files.values()
    size = max(a.size for a in files)
    expected = _lakelog_rows(table_path)
    m = lakelog.Table(table_path).optimize(filters=[("p", "=", "b")])
    assert m["numFilesRemoved"] == 20 and m["numFilesAdded"] == 1
    assert {f.split("/")[0] for f in _commit_files(table_path, m["version"], "add")} == {"p=b"}
    m = lakelog.Table(table_path).optimize(target_size=size * 10)
    assert m["numFilesRemoved"] == 40  # partition a: 40 files in bins of up to 10
    assert 4 <= m["numFilesAdded"] <= 5
    assert _lakelog_rows(table_path) == expected == _delta_rows(table_path)
    with pytest.raises(SchemaMismatchError):
        lakelog.Table(table_path).optimize(filters=[("id", "=", 1)])


def test_optimize_target_size_from_the_table_property_and_argument_checks(table_path):
    _many_small_files(table_path, commits=2, files_per_commit=4)
    size = max(a.size for a in lakelog.Table(table_path).snapshot.files.values())
    lakelog.write_table(table_path, pa.table({"id": pa.array([], pa.int64()), "p": pa.array([], pa.string())}),
                        configuration={"delta.targetFileSize": size * 2})  # an int, stored as its text
    assert lakelog.Table(table_path).metadata.configuration["delta.targetFileSize"] == str(size * 2)
    m = lakelog.Table(table_path).optimize()
    assert m["targetSize"] == size * 2 and m["numFilesAdded"] >= 2
    for bad in [1.5, True, "10", 0, -1]:
        with pytest.raises(InvalidArgumentError, match="target_size"):
            lakelog.Table(table_path).optimize(target_size=bad)


def _commit_files(path, version, kind):
    return [decode for a in _commit(path, version) if kind in a for decode in [a[kind]["path"]]]


def test_optimize_conflicts_with_a_concurrent_remove_and_cleans_up(table_path):
    _many_small_files(table_path, commits=3, files_per_commit=4)
    files_before = _data_files(table_path)

    def overwrite_meanwhile(done, total):
        if done == 1:
            lakelog.write_table(table_path, _rows(77, p=["a"]), mode="overwrite")

    with pytest.raises(CommitConflictError):
        lakelog.Table(table_path).optimize(progress=overwrite_meanwhile)
    latest = lakelog.Table(table_path)
    assert latest.history(1)[0]["operation"] == "WRITE"
    # The files optimize wrote were deleted; only the overwrite's file is new.
    new = _data_files(table_path) - files_before
    assert new == set(latest.files())
    assert _lakelog_rows(table_path) == _sorted(_rows(77, p=["a"]))


def test_optimize_rebases_over_a_concurrent_append(table_path):
    _many_small_files(table_path, commits=3, files_per_commit=4)
    expected = _lakelog_rows(table_path)

    def append_meanwhile(done, total):
        if done == 1:
            lakelog.write_table(table_path, _rows(55, p=["a"]))

    m = lakelog.Table(table_path).optimize(progress=append_meanwhile)
    assert m["version"] == 4
    assert _lakelog_rows(table_path) == _sorted(pa.concat_tables([pa.Table.from_pylist(expected), _rows(55, p=["a"])]))
    assert _delta_rows(table_path) == _lakelog_rows(table_path)


# ---------------------------------------------------------------- restore


def test_restore_brings_back_data_and_schema(backend):
    table_path, options = backend.uri, backend.deltalake_options
    lakelog.write_table(table_path, _rows(0, p=["a", "b"]), partition_by=["p"])  # v0
    lakelog.write_table(table_path, _rows(1, p=["a"]))  # v1
    v1 = _lakelog_rows(table_path, 1)
    lakelog.write_table(table_path, _rows(2, p=["c"]), mode="overwrite")  # v2
    extra = _rows(3, p=["c"]).append_column("w", pa.array([1.5] * 3))
    lakelog.write_table(table_path, extra, schema_mode="merge")  # v3 adds column w

    t = lakelog.Table(table_path)
    result = t.restore(1)
    assert result["version"] == 4 and result["restoredVersion"] == 1
    assert result["numRestoredFiles"] == 3 and result["numRemovedFiles"] == 2
    assert t.version == 4
    assert t.schema.names == ["id", "v", "p"]
    assert _lakelog_rows(table_path) == v1 == _delta_rows(table_path, storage_options=options)
    info = _commit_info(table_path, 4)
    assert info["operation"] == "RESTORE" and info["operationParameters"]["version"] == "1"
    for v in range(4):  # history is untouched
        assert _lakelog_rows(table_path, v) == _delta_rows(table_path, v, options)
    # Restoring the current version commits nothing.
    assert lakelog.Table(table_path).restore(4)["version"] == 4
    assert lakelog.Table(table_path).version == 4
    # Time travel then restore: Table(version=...).restore() restores the version it shows.
    assert lakelog.Table(table_path, version=2).restore()["version"] == 5
    assert _lakelog_rows(table_path) == _lakelog_rows(table_path, 2) == _delta_rows(table_path, storage_options=options)
    ts = lakelog.Table(table_path).history()[-1]["timestamp"]  # version 0's commit time
    lakelog.Table(table_path).restore(timestamp=ts)
    assert _lakelog_rows(table_path) == _lakelog_rows(table_path, 0) == _delta_rows(table_path, storage_options=options)
    with pytest.raises(VersionNotFoundError):
        lakelog.Table(table_path).restore(99)


def test_restore_brings_back_properties_and_never_downgrades_the_protocol(table_path):
    lakelog.write_table(table_path, _rows(0), configuration={"delta.logRetentionDuration": "interval 40 days", "app.owner": "ann"})  # v0
    assert (lakelog.Table(table_path).protocol.min_reader_version, lakelog.Table(table_path).protocol.min_writer_version) == (1, 2)
    ntz = _rows(1).append_column("at", pa.array([None] * 3, pa.timestamp("us")))
    lakelog.write_table(table_path, ntz, schema_mode="merge", configuration={"app.owner": "bob", "delta.appendOnly": "false"})  # v1
    upgraded = lakelog.Table(table_path).protocol
    assert (upgraded.min_reader_version, upgraded.min_writer_version) == (3, 7) and "timestampNtz" in upgraded.writer_features

    result = lakelog.Table(table_path).restore(0)
    assert result["version"] == 2
    t = lakelog.Table(table_path)
    assert t.metadata.configuration == {"delta.logRetentionDuration": "interval 40 days", "app.owner": "ann"}
    assert t.schema.names == ["id", "v"]
    assert t.protocol == upgraded  # never downgraded
    assert not any("protocol" in a for a in _commit(table_path, 2))
    assert _lakelog_rows(table_path) == _lakelog_rows(table_path, 0) == _delta_rows(table_path)
    assert DeltaTable(table_path).metadata().configuration == t.metadata.configuration


def test_restore_refuses_a_version_whose_files_were_vacuumed(table_path):
    lakelog.write_table(table_path, _rows(0))
    lakelog.write_table(table_path, _rows(1), mode="overwrite")
    lakelog.Table(table_path).vacuum(0, dry_run=False, enforce_retention_duration=False)
    version = lakelog.Table(table_path).version
    with pytest.raises(VersionNotFoundError, match="no longer exist"):
        lakelog.Table(table_path).restore(0)
    assert lakelog.Table(table_path).version == version
    assert _lakelog_rows(table_path) == _sorted(_rows(1))


# ---------------------------------------------------------------- log cleanup


def _age_commits(path, versions, seconds):
    for v in versions:
        _age(os.path.join(path, "_delta_log", f"{v:020d}.json"), seconds)


def test_cleanup_log_keeps_the_table_readable_from_a_checkpoint(table_path):
    for i in range(25):
        lakelog.write_table(table_path, _rows(i))
    expected = {v: _lakelog_rows(table_path, v) for v in (10, 15, 24)}
    assert {"00000000000000000010.checkpoint.parquet", "00000000000000000020.checkpoint.parquet"} <= _log_files(table_path)
    _age_commits(table_path, range(15), 40 * DAY)
    # A crashed writer's temp file, long ago.
    tmp = os.path.join(table_path, "_delta_log", f".{3:020d}.json.{'ab' * 16}.tmp")
    open(tmp, "wb").close()
    _age(tmp, 40 * DAY)

    t = lakelog.Table(table_path)
    dry = t.cleanup_log(dry_run=True)
    assert dry[0] == os.path.basename(tmp)
    assert dry[1:] == [f"{v:020d}.json" for v in range(10)]
    assert os.path.exists(os.path.join(table_path, "_delta_log", f"{0:020d}.json"))
    assert t.cleanup_log() == dry
    names = _log_files(table_path)
    assert f"{10:020d}.json" in names and f"{10:020d}.checkpoint.parquet" in names
    assert not any(n.startswith(f"{v:020d}.") for v in range(10) for n in names)
    for v in (0, 5, 9):
        with pytest.raises(VersionNotFoundError):
            lakelog.Table(table_path, version=v)
    for v, rows in expected.items():
        assert _lakelog_rows(table_path, v) == rows
        assert _delta_rows(table_path, v) == rows
    assert _delta_rows(table_path) == expected[24]
    assert [h["version"] for h in t.history()][-1] == 10
    assert t.cleanup_log() == []  # nothing else is old enough


def test_cleanup_log_needs_a_usable_checkpoint(table_path):
    conf = {"delta.enableExpiredLogCleanup": "false"}  # only the explicit cleanup below deletes anything
    for i in range(8):
        lakelog.write_table(table_path, _rows(i), configuration=conf if i == 0 else None)
    _age_commits(table_path, range(8), 40 * DAY)
    assert lakelog.Table(table_path).cleanup_log() == []  # no checkpoint: every commit is needed
    lakelog.Table(table_path).checkpoint()  # checkpoint at 7
    for i in range(8, 12):
        lakelog.write_table(table_path, _rows(i))  # checkpoint at 10 (young)
    _age_commits(table_path, range(10), 40 * DAY)
    # An unreadable checkpoint at 7 is not trusted: nothing older than a usable one goes.
    cp7 = os.path.join(table_path, "_delta_log", f"{7:020d}.checkpoint.parquet")
    good = open(cp7, "rb").read()
    with open(cp7, "wb") as f:
        f.write(b"not parquet")
    assert lakelog.Table(table_path).cleanup_log() == []
    with open(cp7, "wb") as f:
        f.write(good)
    deleted = lakelog.Table(table_path).cleanup_log()
    assert deleted == [f"{v:020d}.json" for v in range(7)]
    assert lakelog.read_table(table_path, version=7).num_rows == 24
    assert _delta_rows(table_path) == _lakelog_rows(table_path)


def test_cleanup_log_retention_property(table_path):
    conf = {"delta.logRetentionDuration": "interval 2 days", "delta.checkpointInterval": "5", "delta.enableExpiredLogCleanup": "false"}
    for i in range(7):
        lakelog.write_table(table_path, _rows(i), configuration=conf if i == 0 else None)
    _age_commits(table_path, range(6), 3 * DAY + HOUR)  # older than 2 days, even cut at midnight
    snap = lakelog.Table(table_path).snapshot
    storage = Storage(table_path)
    assert maintenance.cleanup_expired_logs(storage, snap) == []  # the property is false
    assert lakelog.Table(table_path).cleanup_log() == [f"{v:020d}.json" for v in range(5)]  # explicit: 2 days
    assert lakelog.Table(table_path, version=5).version == 5
    with pytest.raises(VersionNotFoundError):
        lakelog.Table(table_path, version=4)
    assert _delta_rows(table_path) == _lakelog_rows(table_path)
    # An explicit retention is exact: one hour keeps nothing older than version 5's checkpoint anyway.
    assert lakelog.Table(table_path).cleanup_log(retention_hours=1) == []


def test_commit_that_checkpoints_cleans_up_expired_logs(table_path):
    """The automatic Metadata Cleanup runs after a checkpoint that a commit triggers, and only when
    delta.enableExpiredLogCleanup is true."""
    conf = {"delta.logRetentionDuration": "interval 2 days", "delta.checkpointInterval": "5", "delta.enableExpiredLogCleanup": "false"}
    for i in range(7):
        lakelog.write_table(table_path, _rows(i), configuration=conf if i == 0 else None)
    _age_commits(table_path, range(6), 3 * DAY + HOUR)
    everything = _log_files(table_path)
    for i in range(7, 11):  # version 10 writes a checkpoint; cleanup is off
        lakelog.write_table(table_path, _rows(i))
    assert f"{10:020d}.checkpoint.parquet" in _log_files(table_path)
    assert everything <= _log_files(table_path)
    lakelog.write_table(table_path, _rows(11), configuration={"delta.enableExpiredLogCleanup": "true"})  # v11
    assert everything <= _log_files(table_path)  # no checkpoint at 11: nothing ran
    for i in range(12, 16):  # version 15 writes a checkpoint, then the cleanup runs
        lakelog.write_table(table_path, _rows(i))
    names = _log_files(table_path)
    assert f"{15:020d}.checkpoint.parquet" in names
    # Commits before the newest checkpoint at or before the cutoff commit (5) are gone; 5 onwards stay.
    assert sorted(n for n in names if n.endswith(".json")) == [f"{v:020d}.json" for v in range(5, 16)]
    assert {f"{v:020d}.checkpoint.parquet" for v in (5, 10, 15)} <= names
    with pytest.raises(VersionNotFoundError):
        lakelog.Table(table_path, version=4)
    assert _lakelog_rows(table_path, 5) == _delta_rows(table_path, 5)
    assert _delta_rows(table_path) == _lakelog_rows(table_path)
    assert len(_lakelog_rows(table_path)) == 16 * 3


def test_vacuum_matches_escaped_partition_paths(table_path):
    values = ["a b", "50%", "ü/x", None, "x=y", "#[]:?"]
    data = pa.table({"id": pa.array(range(len(values)), pa.int64()), "p": pa.array(values, pa.string())})
    lakelog.write_table(table_path, data, partition_by=["p"])
    lakelog.write_table(table_path, data)
    for rel in _data_files(table_path):
        _age(os.path.join(table_path, rel), 30 * DAY)
    expected = _lakelog_rows(table_path)
    # Every file on disk is live: a path that failed to match its log entry would be deleted here.
    assert lakelog.Table(table_path).vacuum(0, dry_run=False, enforce_retention_duration=False) == []
    assert _lakelog_rows(table_path) == expected == _delta_rows(table_path)
    lakelog.Table(table_path).optimize()
    deleted = lakelog.Table(table_path).vacuum(0, dry_run=False, enforce_retention_duration=False)
    assert len(deleted) == 2 * len(values)
    assert _lakelog_rows(table_path) == expected == _delta_rows(table_path)


def test_vacuum_needs_only_the_writer_protocol_not_data_enforcement(table_path):
    """vacuum used to refuse a table with CHECK constraints (or change data feed) although it writes no
    data: only the protocol check of vacuumProtocolCheck applies to it (writes now enforce the constraint)."""
    from deltalake import write_deltalake

    write_deltalake(table_path, _rows(0), configuration={"delta.enableChangeDataFeed": "true"})
    DeltaTable(table_path).alter.add_constraint({"id_not_negative": "id >= 0"})
    write_deltalake(table_path, _rows(1), mode="overwrite")
    with pytest.raises(lakelog.errors.ConstraintViolationError, match="id_not_negative"):
        lakelog.write_table(table_path, pa.table({"id": pa.array([-1], pa.int64()), "v": ["x"]}))
    removed = sorted(_data_files(table_path) - set(lakelog.Table(table_path).files()))
    assert removed
    for rel in removed:
        _age(os.path.join(table_path, rel), 10 * DAY)
    t = lakelog.Table(table_path)
    assert t.vacuum() == []  # the tombstones are younger than the 7-day retention
    deleted = t.vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False)
    assert sorted(deleted) == removed and not (set(removed) & _data_files(table_path))
    assert [_commit_info(table_path, v)["operation"] for v in (t.version - 1, t.version)] == ["VACUUM START", "VACUUM END"]
    assert _lakelog_rows(table_path) == _delta_rows(table_path) == _sorted(_rows(1))


def test_vacuum_refuses_unknown_writer_features(table_path):
    """The other half of vacuumProtocolCheck: a writer feature lakelog does not know may reference files
    that look unreferenced to it, so vacuum (and every write) refuses the table."""
    lakelog.write_table(table_path, _rows(0))
    with open(os.path.join(table_path, "_delta_log", f"{1:020d}.json"), "wb") as f:
        f.write(orjson.dumps({"commitInfo": {"operation": "UPGRADE PROTOCOL"}}) + b"\n")
        f.write(orjson.dumps({"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["vacuumProtocolCheck"], "writerFeatures": ["vacuumProtocolCheck", "featureFromTheFuture"]}}) + b"\n")
    t = lakelog.Table(table_path)  # readable: the unknown feature is a writer feature
    assert _sorted(t.to_pyarrow()) == _sorted(_rows(0))
    with pytest.raises(lakelog.UnsupportedFeatureError, match="featureFromTheFuture"):
        t.vacuum()
    with pytest.raises(lakelog.UnsupportedFeatureError, match="featureFromTheFuture"):
        lakelog.write_table(table_path, _rows(1))

"""V2 checkpoints lakelog writes (``delta.checkpointPolicy=v2``): UUID-named Parquet checkpoint files whose
file actions are in sidecars under ``_delta_log/_sidecars/``. Every version of such a table reads the
same through lakelog (from the checkpoints) as by replaying the JSON commits, and deltalake (the peer,
whose SQL engine reads v2Checkpoint tables) reads the same rows at every version, also when the commits
the checkpoint covers are gone so that it has to read the checkpoint and its sidecars."""

from __future__ import annotations

import json
import os
import shutil
import time

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakelog
from lakelog.log.checkpoint import v2 as checkpoint_v2
from lakelog.log.last_checkpoint import json_checksum
from lakelog.log.delta_log import DeltaLog
from lakelog.storage import Storage
from tests.table_files import remove_commits

V2 = {"delta.checkpointPolicy": "v2", "delta.checkpointInterval": "3"}


def _log(path: str, *names: str) -> str:
    return os.path.join(path, "_delta_log", *names)


def _rows(i: int, n: int = 4) -> pa.Table:
    return pa.table({"id": pa.array(range(i * 100, i * 100 + n), pa.int64()), "part": pa.array([f"p{i % 3}"] * n), "v": pa.array([f"r{i}"] * n)})


def _sorted(t: pa.Table) -> list[dict]:
    return sorted(t.select(["id", "part", "v"]).to_pylist(), key=lambda r: r["id"])


def _peer_rows(path: str, version: int | None = None) -> list[dict]:
    dt = deltalake.DeltaTable(path) if version is None else deltalake.DeltaTable(path, version=version)
    got = pa.table(deltalake.QueryBuilder().register("t", dt).execute("select id, part, v from t").read_all())
    return sorted(({k: (str(v) if v is not None and k != "id" else v) for k, v in r.items()} for r in got.to_pylist()), key=lambda r: r["id"])


def _build(path: str) -> int:
    """A partitioned V2-checkpoint table: appends, a delete and an overwrite of a partition (tombstones),
    checkpoints every 3 commits. Returns the latest version."""
    lakelog.write_table(path, _rows(0), partition_by=["part"], configuration=V2)
    for i in range(1, 8):
        lakelog.write_table(path, _rows(i))
    lakelog.Table(path).delete("id < 150")
    for i in range(8, 11):
        lakelog.write_table(path, _rows(i))
    return lakelog.Table(path).version


def _age_sidecars(path: str, days: int = 2) -> None:
    """Make every sidecar ``days`` old, as if the checkpoints naming them were written then."""
    when = time.time() - days * 86400
    for n in os.listdir(_log(path, "_sidecars")):
        os.utime(_log(path, "_sidecars", n), (when, when))


@pytest.fixture
def small_sidecars(monkeypatch):
    """Sidecars of at most 5 actions in row groups of 2: a checkpoint spans several sidecar files."""
    monkeypatch.setattr(checkpoint_v2, "SIDECAR_MAX_ACTIONS", 5)
    monkeypatch.setattr(checkpoint_v2, "SIDECAR_ROW_GROUP_ROWS", 2)


def test_v2_policy_enables_the_feature_and_writes_uuid_checkpoints_with_sidecars(table_path, small_sidecars):
    latest = _build(table_path)
    p = lakelog.Table(table_path).protocol
    assert "v2Checkpoint" in p.reader_features and "v2Checkpoint" in p.writer_features
    names = os.listdir(_log(table_path))
    assert not [n for n in names if n.endswith(".checkpoint.parquet")]  # no classic checkpoints
    listing = DeltaLog(Storage(table_path)).list()
    assert listing.checkpoints and all(cp.kind == "uuid" and cp.fmt == "parquet" for cps in listing.checkpoints.values() for cp in cps)
    newest = max(listing.checkpoints)
    [cp] = listing.checkpoints[newest]
    body = pq.read_table(cp.files[0].path)
    assert set(body.column_names) >= {"checkpointMetadata", "sidecar", "protocol", "metaData"}
    assert body.column("add").drop_null().length() == 0  # file actions only in sidecars
    sidecars = [s for s in body.column("sidecar").to_pylist() if s]
    assert len(sidecars) >= 2
    for s in sidecars:
        f = pq.ParquetFile(_log(table_path, "_sidecars", s["path"]))
        assert f.schema_arrow.names == ["add", "remove"] and f.metadata.num_rows <= 5
        assert all(f.metadata.row_group(i).num_rows <= 2 for i in range(f.metadata.num_row_groups))
        assert os.path.getsize(_log(table_path, "_sidecars", s["path"])) == s["sizeInBytes"]
    hint = json.load(open(_log(table_path, "_last_checkpoint")))
    assert hint["version"] == newest and hint["checksum"] == json_checksum(hint)
    assert hint["v2Checkpoint"]["path"] == cp.files[0].name
    assert [s["path"] for s in hint["v2Checkpoint"]["sidecarFiles"]] == [s["path"] for s in sidecars]
    assert hint["numOfAddFiles"] == lakelog.Table(table_path, version=newest).snapshot.num_files
    assert latest >= 9


def test_every_version_reads_the_same_from_checkpoints_json_replay_and_deltalake(table_path, tmp_path, small_sidecars):
    latest = _build(table_path)
    replay = str(tmp_path / "replay")
    shutil.copytree(table_path, replay)
    for n in os.listdir(_log(replay)):
        if ".checkpoint." in n or n in ("_last_checkpoint", "_sidecars"):
            p = _log(replay, n)
            shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
    for v in range(latest + 1):
        mine = _sorted(lakelog.read_table(table_path, version=v))
        assert mine == _sorted(lakelog.read_table(replay, version=v)), v
        assert mine == _peer_rows(table_path, v), v
    # The commits a checkpoint covers removed: lakelog and deltalake must both use it and its sidecars.
    newest = max(DeltaLog(Storage(table_path)).list().checkpoints)
    for v in range(newest):
        os.remove(_log(table_path, f"{v:020d}.json"))
    expected = _sorted(lakelog.read_table(replay))
    assert _sorted(lakelog.read_table(table_path)) == expected
    assert _peer_rows(table_path) == expected
    # and the table stays writable, with the next checkpoint built from the V2 one
    for i in range(11, 15):
        lakelog.write_table(table_path, _rows(i))
        lakelog.write_table(replay, _rows(i))
    assert _sorted(lakelog.read_table(table_path)) == _sorted(lakelog.read_table(replay)) == _peer_rows(table_path)


def test_turning_v2_on_for_an_existing_table(table_path):
    for i in range(3):
        lakelog.write_table(table_path, _rows(i))
    lakelog.write_table(table_path, _rows(3), configuration={"delta.checkpointPolicy": "v2"})
    assert "v2Checkpoint" in lakelog.Table(table_path).protocol.writer_features
    lakelog.Table(table_path).checkpoint()
    listing = DeltaLog(Storage(table_path)).list()
    assert [cp.kind for cp in listing.checkpoints[3]] == ["uuid"]
    assert _sorted(lakelog.read_table(table_path)) == _peer_rows(table_path)


def test_damaged_sidecar_of_a_written_checkpoint_falls_back(table_path, small_sidecars):
    _build(table_path)
    expected = _sorted(lakelog.read_table(table_path))
    newest = max(DeltaLog(Storage(table_path)).list().checkpoints)
    hint = json.load(open(_log(table_path, "_last_checkpoint")))
    os.remove(_log(table_path, "_sidecars", hint["v2Checkpoint"]["sidecarFiles"][-1]["path"]))
    with pytest.warns(UserWarning, match=f"skipping unusable checkpoint at version {newest}.*sidecar"):
        assert _sorted(lakelog.read_table(table_path)) == expected


def test_log_cleanup_keeps_sidecars_a_retained_checkpoint_names(table_path, small_sidecars):
    _build(table_path)
    before = set(os.listdir(_log(table_path, "_sidecars")))
    lakelog.write_table(table_path, _rows(20))  # newest version, no checkpoint
    # an orphan sidecar, as a writer killed before its checkpoint file leaves behind
    orphan = "00000000000000000099.checkpoint.0000000001.deadbeef-0000-0000-0000-000000000000.parquet"
    shutil.copy(_log(table_path, "_sidecars", sorted(before)[0]), _log(table_path, "_sidecars", orphan))
    expected = _sorted(lakelog.read_table(table_path))
    # a sidecar less than a day old (as of midnight UTC) may belong to a checkpoint being written: kept
    assert not [d for d in lakelog.Table(table_path).cleanup_log(retention_hours=0, dry_run=True) if d.startswith("_sidecars/")]
    _age_sidecars(table_path)
    deleted = lakelog.Table(table_path).cleanup_log(retention_hours=0)
    listing = DeltaLog(Storage(table_path)).list()
    kept_cp = min(listing.checkpoints)
    referenced = {s["path"] for cp in listing.checkpoints[kept_cp] for s in pq.read_table(cp.files[0].path).column("sidecar").to_pylist() if s}
    left = set(os.listdir(_log(table_path, "_sidecars")))
    assert referenced <= left
    assert f"_sidecars/{orphan}" in deleted and orphan not in left
    assert any(d.startswith("_sidecars/") and d != f"_sidecars/{orphan}" for d in deleted)  # sidecars of older checkpoints
    assert _sorted(lakelog.read_table(table_path)) == expected == _peer_rows(table_path)


def test_appending_to_a_spark_written_v2_table(tmp_path):
    """v2-checkpoint-parquet (Spark, checkpointInterval 2, policy v2): lakelog's next checkpoint starts from
    Spark's V2 checkpoint and sidecars and is V2 too; lakelog and deltalake read the same rows."""
    path = str(tmp_path / "spark-v2")
    shutil.copytree(os.path.join(os.path.dirname(__file__), "data", "v2-checkpoint-parquet"), path)
    before = sorted(lakelog.read_table(path).column("id").to_pylist())
    for i in range(2):
        lakelog.write_table(path, pa.table({"id": pa.array([1000 + i], pa.int64())}))
    listing = DeltaLog(Storage(path)).list()
    assert [cp.kind for cp in listing.checkpoints[4]] == ["uuid"]
    t = lakelog.Table(path)
    assert t.snapshot.file_set.base is not None and t.snapshot.file_set.base.v2
    got = sorted(t.to_pyarrow().column("id").to_pylist())
    assert got == sorted(before + [1000, 1001])
    dt = deltalake.DeltaTable(path)
    peer = pa.table(deltalake.QueryBuilder().register("t", dt).execute("select id from t").read_all())
    assert sorted(peer.column("id").to_pylist()) == got


def test_v2_checkpoints_on_every_storage_backend(any_backend, small_sidecars):
    """Sidecars and the UUID-named checkpoint through the store's filesystem and pyarrow on local disk,
    memory, S3, Azure and GCS; deltalake's SQL engine reads the table from them once the commits are gone."""
    path = any_backend.uri
    lakelog.write_table(path, _rows(0), partition_by=["part"], configuration=V2)
    for i in range(1, 7):
        lakelog.write_table(path, _rows(i))
    storage = Storage(path)
    listing = DeltaLog(storage).list()
    assert sorted(listing.checkpoints) == [3, 6]
    assert all(cp.kind == "uuid" for cps in listing.checkpoints.values() for cp in cps)
    assert len(storage.list_dir(storage.log_file("_sidecars"))) == 1 + 2  # 4 files at v3, 7 at v6; 5 a sidecar
    t = lakelog.Table(path)
    assert t.snapshot.file_set.base is not None and t.snapshot.file_set.base.sidecars
    expected = sorted(i * 100 + k for i in range(7) for k in range(4))
    assert sorted(t.to_pyarrow().column("id").to_pylist()) == expected
    assert lakelog.Table(path).check().ok
    if any_backend.peer:
        remove_commits(path, range(6))
        assert sorted(lakelog.read_table(path).column("id").to_pylist()) == expected
        assert sorted(any_backend.peer_sql("select id from t").column("id").to_pylist()) == expected

"""Row tracking (Delta's rowTracking feature): row ids and commit versions assigned at commit, kept through
update, merge, delete, optimize and restore, read back with with_row_tracking=True, and read by deltalake."""

from __future__ import annotations

import json
import os
import shutil

import deltalake
import pyarrow as pa
import pytest

import lakelog
from lakelog.errors import InvalidArgumentError

from tests.concurrent_writers import append_from_processes
from tests.row_tracking_tables import ON, shape_configuration, tracked

DATA = os.path.join(os.path.dirname(__file__), "data")


def _log(path: str) -> list[tuple[int, dict]]:
    log = os.path.join(path, "_delta_log")
    out = []
    for name in sorted(os.listdir(log)):
        if name.endswith(".json") and name[:20].isdigit() and len(name) == 25:
            out.extend((int(name[:20]), json.loads(line)) for line in open(os.path.join(log, name)) if line.strip())
    return out


def _mark(path: str) -> int:
    marks = [json.loads(a["domainMetadata"]["configuration"])["rowIdHighWaterMark"]
             for _, a in _log(path) if "domainMetadata" in a and a["domainMetadata"]["domain"] == "delta.rowTracking"]
    return marks[-1]


def _check_log(path: str) -> None:
    """Every add carries row tracking fields; fresh id ranges never overlap; the mark covers them all."""
    t = lakelog.Table(path)
    ranges = []
    for a in t.snapshot.files.values():
        assert a.base_row_id is not None and a.default_row_commit_version is not None, a.path
        ranges.append((a.base_row_id, a.base_row_id + a.num_records() - 1))
    ranges.sort()
    assert all(hi < lo for (_, hi), (lo, _) in zip(ranges, ranges[1:])), ranges
    assert not ranges or ranges[-1][1] <= _mark(path)


def _deltalake_matches(path: str) -> None:
    ours = sorted(lakelog.read_table(path).to_pylist(), key=lambda r: r["id"])
    t = deltalake.DeltaTable(path)
    theirs = pa.table(deltalake.QueryBuilder().register("t", t).execute("SELECT * FROM t").read_all())
    assert sorted(theirs.to_pylist(), key=lambda r: r["id"]) == ours


def test_create_assigns_row_ids_and_the_high_water_mark(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": [1, 2, 3]}), configuration=ON)
    lakelog.write_table(path, pa.table({"id": [4, 5]}), mode="append")
    protocol = next(a["protocol"] for _, a in _log(path) if "protocol" in a)
    assert {"rowTracking", "domainMetadata"} <= set(protocol["writerFeatures"]) and protocol["minWriterVersion"] == 7
    conf = lakelog.Table(path).metadata.configuration
    assert conf["delta.rowTracking.materializedRowIdColumnName"] != conf["delta.rowTracking.materializedRowCommitVersionColumnName"]
    assert tracked(path) == {1: (0, 0), 2: (1, 0), 3: (2, 0), 4: (3, 1), 5: (4, 1)}
    assert _mark(path) == 4
    _check_log(path)
    _deltalake_matches(path)


@pytest.mark.parametrize("shape", ["copy-on-write", "deletion vectors", "column mapping + feed", "partitioned + deletion vectors + feed"])
def test_row_ids_survive_update_merge_delete_optimize_and_restore(tmp_path, shape):
    path = str(tmp_path / "t")
    conf, partition_by = shape_configuration(shape)
    data = pa.table({"id": list(range(20)), "v": ["a"] * 20, "p": [i % 2 for i in range(20)]})
    lakelog.write_table(path, data.slice(0, 10), configuration=conf, partition_by=partition_by)
    lakelog.write_table(path, data.slice(10), mode="append")
    t = lakelog.Table(path)
    before = tracked(path)

    v = t.update({"v": "'u'"}, "id % 3 = 0")["version"]
    after = tracked(path)
    for i in before:  # updated rows keep their id and take the commit's version; the others keep both
        assert after[i] == ((before[i][0], v) if i % 3 == 0 else before[i])

    t.refresh()
    v = t.delete("id = 4")["version"]
    before, after = after, tracked(path)
    assert 4 not in after and all(after[i] == before[i] for i in after)

    t.refresh()
    src = pa.table({"id": [1, 100], "v": ["m", "n"], "p": [1, 0]})
    v = t.merge(src, "target.id = source.id").when_matched_update_all().when_not_matched_insert_all().execute()["version"]
    before, after = after, tracked(path)
    assert after[1] == (before[1][0], v)
    assert after[100][1] == v and after[100][0] not in {r for r, _ in before.values()}
    assert all(after[i] == before[i] for i in before if i != 1)
    _check_log(path)
    _deltalake_matches(path)

    t.refresh()
    assert t.optimize()["committed"]
    assert tracked(path) == after  # compaction copies rows: ids and commit versions kept
    _check_log(path)

    merged_version = v
    t.refresh()
    t.delete("id < 5")
    t.refresh()
    t.restore(merged_version)
    assert tracked(path) == after  # restored rows get their ids back
    _check_log(path)
    _deltalake_matches(path)


def test_checkpoints_keep_row_tracking_fields(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": [0, 1]}), configuration={**ON, "delta.checkpointInterval": "2"})
    for i in range(2, 6):
        lakelog.write_table(path, pa.table({"id": [i]}), mode="append")
    assert any(n.endswith(".checkpoint.parquet") for n in os.listdir(os.path.join(path, "_delta_log")))
    expected = {0: (0, 0), 1: (1, 0), 2: (2, 1), 3: (3, 2), 4: (4, 3), 5: (5, 4)}
    assert tracked(path) == expected
    lakelog.write_table(path, pa.table({"id": [6]}), mode="append")  # the mark is read back from the checkpoint
    assert tracked(path)[6] == (6, 5)
    _deltalake_matches(path)


def test_enabling_row_tracking_backfills_every_live_file(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": [1, 2]}))
    lakelog.write_table(path, pa.table({"id": [3]}), mode="append")
    with pytest.raises(InvalidArgumentError, match="row tracking"):
        lakelog.read_table(path, with_row_tracking=True)
    version = lakelog.Table(path).set_properties({"delta.enableRowTracking": True})
    _check_log(path)
    ids = tracked(path)
    assert sorted(r for r, _ in ids.values()) == [0, 1, 2] and {c for _, c in ids.values()} == {version}
    adds = [a["add"] for v, a in _log(path) if v == version and "add" in a]
    assert len(adds) == 2 and not any(a["dataChange"] for a in adds)  # re-added, not changed
    assert lakelog.read_table(path).num_rows == 3
    _deltalake_matches(path)


def test_spark_written_row_tracking_table_continues_above_its_high_water_mark(tmp_path):
    path = str(tmp_path / "t")
    shutil.copytree(os.path.join(DATA, "table_with_liquid_clustering"), path)
    # (Databricks 13.2: row tracking, deletion vectors and its 'liquid' preview of clustering)
    assert tracked(path) == {i: (i, 0) for i in range(10)}
    lakelog.write_table(path, pa.table({"id": pa.array([10, 11], pa.int64())}), mode="append")
    t = lakelog.Table(path)
    v = t.update({"id": "id + 100"}, "id = 3")["version"]
    ids = tracked(path)
    assert ids[103] == (3, v) and ids[10][0] > 9 and ids[11][0] > 9
    assert all(ids[i] == (i, 0) for i in range(10) if i != 3)
    _check_log(path)


def test_concurrent_writer_processes_never_assign_a_row_id_twice(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": pa.array([], pa.int64())}), configuration=ON)
    append_from_processes(path, "{'id': [int(tag) * 100 + i * 3 + k for k in range(3)]}")
    ids = tracked(path)  # (asserts the ids unique)
    assert len(ids) == 72 and _mark(path) == 71
    _check_log(path)


def test_supported_but_not_enabled_assigns_fresh_ids_without_materializing(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": [1, 2]}))
    log = os.path.join(path, "_delta_log")
    with open(os.path.join(log, f"{1:020d}.json"), "x") as f:  # as Spark's ALTER TABLE ... SET TBLPROPERTIES ('delta.feature.rowTracking'='supported')
        f.write(json.dumps({"commitInfo": {"operation": "SET TBLPROPERTIES"}}) + "\n")
        f.write(json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["appendOnly", "invariants", "rowTracking", "domainMetadata"]}}) + "\n")
    lakelog.write_table(path, pa.table({"id": [3]}), mode="append")
    lakelog.Table(path).delete("id = 1")
    t = lakelog.Table(path)
    assert sorted(r["id"] for r in t.to_pyarrow().to_pylist()) == [2, 3]
    assert all(a.base_row_id is not None for a in t.snapshot.files.values())  # (every live file was written after v1)
    with pytest.raises(InvalidArgumentError):
        t.to_pyarrow(with_row_tracking=True)  # supported, not enabled: ids exist but are not stable
    _deltalake_matches(path)


def test_suspended_row_tracking_assigns_nothing(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": [1]}), configuration=ON)
    lakelog.Table(path).set_properties({"delta.enableRowTracking": False, "delta.rowTrackingSuspended": True})
    lakelog.write_table(path, pa.table({"id": [2]}), mode="append")
    last = [a["add"] for v, a in _log(path) if "add" in a][-1]
    assert "baseRowId" not in last and "defaultRowCommitVersion" not in last

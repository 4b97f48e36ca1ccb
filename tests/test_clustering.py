"""Liquid clustering (cluster_by) and Z-order (optimize(zorder_by=...)): the table's definition as Delta
writes it, stats always kept for clustering columns, and files rewritten so selective reads skip most."""

import json
import os

import deltalake
import numpy as np
import pyarrow as pa
import pytest

import lakelog
import lakelog.read.scan
from lakelog.errors import InvalidArgumentError, SchemaMismatchError


def _rows(path):
    return sorted(lakelog.Table(path).to_pyarrow().to_pylist(), key=lambda r: r["id"])


def _batch(i, n=4000, seed=0):
    rng = np.random.default_rng(seed + i)
    return pa.table({"id": np.arange(i * n, (i + 1) * n), "x": rng.integers(0, 100_000, n), "y": rng.integers(0, 100_000, n),
                     "s": [f"name-{k}" for k in range(n)]})


def _log(path, version):
    return [json.loads(line) for line in open(os.path.join(path, "_delta_log", f"{version:020d}.json"))]


def test_clustered_table_is_written_as_delta_defines_it_and_optimize_clusters_it(tmp_path):
    path = str(tmp_path / "t")
    for i in range(16):
        lakelog.write_table(path, _batch(i), cluster_by=["x", "y"] if i == 0 else None,
                            configuration={"delta.dataSkippingNumIndexedCols": "1"} if i == 0 else None)
    t = lakelog.Table(path)
    protocol = deltalake.DeltaTable(path).protocol()
    assert protocol.min_writer_version == 7 and {"clustering", "domainMetadata"} <= set(protocol.writer_features)
    domain = next(a["domainMetadata"] for a in _log(path, 0) if "domainMetadata" in a)
    assert domain["domain"] == "delta.clustering" and json.loads(domain["configuration"]) == {"clusteringColumns": [["x"], ["y"]]}
    # stats for the clustering columns although only the first column is indexed (and for nothing else)
    for a in t.snapshot.files.values():
        stats = json.loads(a.stats)
        assert set(stats["minValues"]) == {"id", "x", "y"}
    t.update({"s": "'u'"}, "id < 10")  # files a row-level change writes keep them too
    assert all({"x", "y"} <= set(json.loads(a.stats)["minValues"]) for a in lakelog.Table(path).snapshot.files.values())
    before = _rows(path)
    selective = [("x", "<", 5_000), ("y", "<", 5_000)]
    assert len(lakelog.read.scan.pruned_files(lakelog.Table(path).snapshot, selective)) == len(lakelog.Table(path).snapshot.files)

    m = t.optimize(target_size=32 * 1024)
    assert m["committed"]
    info = next(a["commitInfo"] for a in _log(path, m["version"]) if "commitInfo" in a)
    assert info["operation"] == "OPTIMIZE" and json.loads(info["operationParameters"]["clusterBy"]) == ["x", "y"]
    adds = [a["add"] for a in _log(path, m["version"]) if "add" in a]
    assert adds and all(a["clusteringProvider"] == "liquid" and not a["dataChange"] for a in adds)
    t = lakelog.Table(path)
    kept = lakelog.read.scan.pruned_files(t.snapshot, selective)
    skipped = 1 - len(kept) / len(t.snapshot.files)
    assert skipped >= 0.9, (len(kept), len(t.snapshot.files))
    assert _rows(path) == before
    got = sorted(r["id"] for r in t.to_pyarrow(filters=selective).to_pylist())
    assert got == sorted(r["id"] for r in before if r["x"] < 5_000 and r["y"] < 5_000)
    assert sorted(deltalake.DeltaTable(path).to_pyarrow_table().column("id").to_pylist()) == [r["id"] for r in before]


def test_clustering_is_incremental_and_kept_through_checkpoints(tmp_path):
    path = str(tmp_path / "t")
    for i in range(4):
        lakelog.write_table(path, _batch(i), cluster_by=["x"] if i == 0 else None)
    first = lakelog.Table(path).optimize(target_size=32 * 1024)
    clustered = set(lakelog.Table(path).snapshot.files)
    assert first["numFilesRemoved"] == 4
    assert not lakelog.Table(path).optimize(target_size=32 * 1024)["committed"]  # nothing new to cluster
    for i in range(4, 6):
        lakelog.write_table(path, _batch(i))
    lakelog.Table(path).checkpoint()  # clusteringProvider read back from the checkpoint
    t = lakelog.Table(path)
    assert {p for p, a in t.snapshot.files.items() if a.clustering_provider == "liquid"} == clustered
    before = _rows(path)
    m = t.optimize(target_size=32 * 1024)
    assert m["numFilesRemoved"] == 2  # only the two files written since
    after = lakelog.Table(path).snapshot.files
    assert clustered <= set(after) and all(a.clustering_provider == "liquid" for a in after.values())
    assert _rows(path) == before


def test_zorder_by_rewrites_each_partition_in_z_order(tmp_path):
    path = str(tmp_path / "t")
    for i in range(8):
        lakelog.write_table(path, _batch(i).append_column("p", pa.array(["a" if k % 2 else "b" for k in range(4000)])), partition_by="p")
    before = _rows(path)
    t = lakelog.Table(path)
    m = t.optimize(target_size=48 * 1024, zorder_by=["x"])
    info = next(a["commitInfo"] for a in _log(path, m["version"]) if "commitInfo" in a)
    assert json.loads(info["operationParameters"]["zOrderBy"]) == ["x"]
    t = lakelog.Table(path)
    assert {a.partition_values["p"] for a in t.snapshot.files.values()} == {"a", "b"}
    kept = lakelog.read.scan.pruned_files(t.snapshot, [("x", "<", 5_000)])
    assert len(kept) <= 0.2 * len(t.snapshot.files), (len(kept), len(t.snapshot.files))
    assert _rows(path) == before


def test_clustering_arguments_are_checked(tmp_path):
    path = str(tmp_path / "t")
    with pytest.raises(InvalidArgumentError, match="partitioned or clustered"):
        lakelog.write_table(path, _batch(0).append_column("p", pa.array(["a"] * 4000)), partition_by="p", cluster_by=["x"])
    with pytest.raises(SchemaMismatchError, match="nope"):
        lakelog.write_table(path, _batch(0), cluster_by=["nope"])
    lakelog.write_table(path, _batch(0), cluster_by="X")  # names resolve ignoring case
    with pytest.raises(InvalidArgumentError, match="creates the table"):
        lakelog.write_table(path, _batch(1), cluster_by=["y"])
    with pytest.raises(InvalidArgumentError, match="clustered by"):
        lakelog.Table(path).optimize(zorder_by=["y"])
    lakelog.write_table(str(tmp_path / "u"), _batch(0))
    with pytest.raises(InvalidArgumentError, match="non-empty list"):
        lakelog.Table(str(tmp_path / "u")).optimize(zorder_by=[])

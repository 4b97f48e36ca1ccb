"""Symlink format manifests (``delta.compatibility.symlinkFormatManifest.enabled``): after every write
path the manifests under ``_symlink_format_manifest/`` list exactly the snapshot's files per partition,
a Hive-style reader (manifest files + partition values from the directories) gets the table's rows,
and a failure after the commit leaves the commit standing."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakelog
from lakelog.conversion import hive_unescape
from lakelog.errors import SymlinkManifestError, UnsupportedFeatureError
from lakelog.storage import Storage

KEY = "delta.compatibility.symlinkFormatManifest.enabled"
ON = {KEY: "true"}
SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("p", pa.string())])
# values whose partition directories need Hive escaping, and null
PARTS = ["x", "y a", "a/b", "50%", None]


def _data(ids, part=None) -> pa.Table:
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "v": pa.array([f"v{i}" for i in ids]),
        "p": pa.array([part if part is not None or i < 0 else PARTS[i % len(PARTS)] for i in ids], pa.string()),
    }, schema=SCHEMA)


def _manifests(uri: str, storage_options=None) -> dict[str, list[str]]:
    """{manifest directory relative to _symlink_format_manifest/: its lines}, read through the store."""
    storage = Storage(uri, storage_options)
    root = storage.join("_symlink_format_manifest")
    out = {}
    for f in storage.list_files(root):
        rel_dir, _, name = f.name.rpartition("/")
        assert name == "manifest", f"unexpected file {f.name!r} under _symlink_format_manifest/"
        text = storage.read(f.path).decode()
        assert text == "" or text.endswith("\n")
        out[rel_dir] = text.splitlines()
    return out


def _file_uri(uri: str, rel: str) -> str:
    return f"file:{os.path.abspath(uri)}/{rel}" if "://" not in uri else f"{uri.rstrip('/')}/{rel}"


def _expected(uri: str, storage_options=None) -> dict[str, list[str]]:
    """What the manifests must be: the snapshot's files grouped by the directory the writer put them in
    (Hive-style, as the data files are laid out), as absolute paths."""
    t = lakelog.Table(uri, storage_options=storage_options)
    out: dict[str, list[str]] = {}
    for rel in t.files():
        out.setdefault(rel.rpartition("/")[0], []).append(_file_uri(uri, rel))
    if not out and not t.partition_columns:
        out[""] = []
    return {k: sorted(v) for k, v in out.items()}


def _check(uri: str, storage_options=None) -> None:
    got = {k: sorted(v) for k, v in _manifests(uri, storage_options).items()}
    assert got == _expected(uri, storage_options)


def _hive_read(uri: str) -> list[tuple]:
    """The rows a Hive-style engine gets from the manifests of a local table: each listed file, with
    the partition values of its manifest's directory."""
    rows = []
    for rel_dir, lines in _manifests(uri).items():
        parts = {}
        for seg in rel_dir.split("/") if rel_dir else []:
            k, _, v = seg.partition("=")
            parts[hive_unescape(k)] = None if v == "__HIVE_DEFAULT_PARTITION__" else hive_unescape(v)
        for line in lines:
            assert line.startswith("file:/") and not line.startswith("file://")
            t = pq.read_table(line[len("file:"):])
            for r in t.to_pylist():
                rows.append((r["id"], r["v"], parts["p"] if "p" in parts else r.get("p")))
    return sorted(rows, key=repr)


def _rows(uri: str) -> list[tuple]:
    return sorted(((r["id"], r["v"], r["p"]) for r in lakelog.read_table(uri).to_pylist()), key=repr)


def _check_all(uri: str) -> None:
    _check(uri)
    assert _hive_read(uri) == _rows(uri)


def test_every_write_path_keeps_the_manifests_exact(tmp_path):
    uri = str(tmp_path / "t")
    lakelog.write_table(uri, _data(range(10)), partition_by=["p"], configuration=ON)
    _check_all(uri)
    assert set(_manifests(uri)) == {"p=x", "p=y a", "p=a%2Fb", "p=50%25", "p=__HIVE_DEFAULT_PARTITION__"}
    t = lakelog.Table(uri)
    steps = [
        ("append", lambda: lakelog.write_table(uri, _data([10, 11]), mode="append")),
        ("replaceWhere", lambda: lakelog.write_table(uri, _data([20], "x"), mode="overwrite", predicate="p = 'x'")),
        ("dynamic overwrite", lambda: lakelog.write_table(uri, _data([21], "y a"), mode="overwrite", partition_overwrite="dynamic")),
        ("delete a partition", lambda: t.delete("p = 'a/b'")),
        ("delete rows", lambda: t.delete("id = 4")),
        ("update", lambda: t.update({"v": "'u'"}, "id = 3")),
        ("merge", lambda: t.merge(_data([3, 30], "new"), "target.id = source.id")
            .when_matched_delete().when_not_matched_insert_all().execute()),
        ("optimize", lambda: t.optimize()),
        ("restore", lambda: t.restore(version=1)),
        ("vacuum", lambda: t.vacuum(0, dry_run=False, enforce_retention_duration=False)),
        ("overwrite", lambda: lakelog.write_table(uri, _data([40, 41]), mode="overwrite")),
    ]
    for name, step in steps:
        step()
        t.refresh()
        try:
            _check_all(uri)
        except AssertionError as e:
            raise AssertionError(f"after {name}: {e}") from None
    assert set(_manifests(uri)) == {"p=x", "p=y a"}  # the others were emptied and their manifests deleted
    assert not os.path.exists(tmp_path / "t" / "_symlink_format_manifest" / "p=a%2Fb")


def test_each_commit_updates_only_the_partitions_it_touched_once(tmp_path):
    uri = str(tmp_path / "t")
    lakelog.write_table(uri, _data(range(5)), partition_by=["p"], configuration=ON)
    ops: list[tuple[str, str]] = []

    def record(op, path):
        if "_symlink_format_manifest/" in path and op in ("put", "delete") and not path.endswith(".crc"):
            ops.append((op, path.split("_symlink_format_manifest/", 1)[1]))

    opts = {"lakelog.fault_injector": record}
    lakelog.write_table(uri, _data([5], "x"), mode="append", storage_options=opts)
    assert ops == [("put", "p=x/manifest")]
    ops.clear()
    lakelog.Table(uri, storage_options=opts).delete("p = 'y a'")
    assert ops == [("delete", "p=y a/manifest")]
    ops.clear()
    lakelog.Table(uri, storage_options=opts).set_properties({"delta.appendOnly": False})  # no file actions
    assert ops == []
    _check_all(uri)


def test_unpartitioned_table_has_one_manifest_even_when_empty(tmp_path):
    uri = str(tmp_path / "t")
    lakelog.write_table(uri, _data([1, 2]), configuration=ON)
    assert list(_manifests(uri)) == [""]
    _check_all(uri)
    lakelog.Table(uri).delete()
    assert _manifests(uri) == {"": []}
    lakelog.write_table(uri, _data([3]), mode="append")
    _check_all(uri)


def test_enabling_generates_all_disabling_stops_and_generate_repairs(tmp_path):
    uri = str(tmp_path / "t")
    lakelog.write_table(uri, _data(range(5)), partition_by=["p"])
    assert _manifests(uri) == {}
    t = lakelog.Table(uri)
    t.set_properties(ON)  # a metadata-only commit turning it on generates every partition's manifest
    _check_all(uri)
    t.unset_properties([KEY])
    t.delete("p = 'x'")
    stale = _manifests(uri)
    assert "p=x" in stale  # off: manifests are no longer maintained
    # a stale file of an earlier layout, and a Hadoop checksum: the full regeneration removes both
    extra = tmp_path / "t" / "_symlink_format_manifest" / "q=1"
    extra.mkdir()
    (extra / "manifest").write_text("file:/nowhere\n")
    from lakelog.cli import main

    assert main(["generate-manifest", uri]) == 0
    assert not extra.exists()
    _check_all(uri)
    assert "p=x" not in _manifests(uri)


def test_property_is_refused_where_manifests_cannot_be_right(tmp_path):
    uri = str(tmp_path / "t")
    with pytest.raises(UnsupportedFeatureError, match="column mapping"):
        lakelog.write_table(uri, _data([1]), configuration={**ON, "delta.columnMapping.mode": "name"})
    log = os.path.join(uri, "_delta_log")
    assert not os.path.exists(log) or not os.listdir(log)
    with pytest.raises(UnsupportedFeatureError, match="mutually exclusive"):
        lakelog.write_table(uri, _data([1]), configuration={**ON, "delta.enableDeletionVectors": "true"})
    lakelog.write_table(uri, _data(range(5)), configuration={"delta.enableDeletionVectors": "true"})
    t = lakelog.Table(uri)
    t.delete("id = 1")  # a deletion vector
    t.set_properties({"delta.enableDeletionVectors": "false"})
    with pytest.raises(UnsupportedFeatureError, match="deletion vectors"):
        t.set_properties(ON)
    assert KEY not in lakelog.Table(uri).metadata.configuration
    with pytest.raises(UnsupportedFeatureError, match="deletion vectors"):
        t.generate_symlink_manifest()
    assert not os.path.exists(os.path.join(uri, "_symlink_format_manifest"))


def test_a_manifest_failure_after_the_commit_keeps_the_commit(tmp_path):
    uri = str(tmp_path / "t")
    lakelog.write_table(uri, _data(range(5)), partition_by=["p"], configuration=ON)

    def fail_manifests(op, path):
        if op == "put" and "_symlink_format_manifest" in path:
            raise OSError("disk full")

    opts = {"lakelog.fault_injector": fail_manifests}
    with pytest.raises(SymlinkManifestError, match="version 1 was committed.*generate_symlink_manifest") as e:
        lakelog.write_table(uri, _data([5, 6]), mode="append", storage_options=opts)
    assert e.value.version == 1
    t = lakelog.Table(uri)
    assert t.version == 1 and {r[0] for r in _rows(uri)} == set(range(7))  # committed, files kept
    # paths that write new files (copy-on-write update, optimize) keep them too
    with pytest.raises(SymlinkManifestError, match="version 2 was committed"):
        lakelog.Table(uri, storage_options=opts).update({"v": "'z'"}, "id = 1")
    assert lakelog.Table(uri).version == 2 and ("z", 1) in {(r[1], r[0]) for r in _rows(uri)}
    with pytest.raises(SymlinkManifestError, match="version 3 was committed"):
        lakelog.Table(uri, storage_options=opts).optimize()
    assert lakelog.Table(uri).version == 3 and {r[0] for r in _rows(uri)} == set(range(7))
    with pytest.raises(AssertionError):
        _check(uri)  # stale
    t.generate_symlink_manifest()
    _check_all(uri)


def test_manifests_on_object_stores(object_store):
    uri, opts = object_store.uri, object_store.storage_options
    lakelog.write_table(uri, _data(range(5)), partition_by=["p"], configuration=ON, storage_options=opts)
    _check(uri, opts)
    lakelog.Table(uri, storage_options=opts).delete("p = 'y a'")
    _check(uri, opts)
    assert "p=y a" not in _manifests(uri, opts)
    for lines in _manifests(uri, opts).values():
        for line in lines:  # the table's URL and the (decoded) relative path: readable as listed
            assert line.startswith(uri.rstrip("/") + "/")
            assert Storage(uri, opts).fs.exists(line.split("://", 1)[1] if "://" in line else line)


def test_manifests_name_files_as_the_store_names_them(object_store):
    """A table URL with a percent-escape names the decoded path (as delta-rs and the stores take it): the
    manifests list the files as Hadoop prints that path (``.../my table/...``), so a reader opens them."""
    uri, opts = object_store.uri.rsplit("/", 1)[0] + "/my%20table", object_store.storage_options
    lakelog.write_table(uri, _data(range(5)), partition_by=["p"], configuration=ON, storage_options=opts)
    decoded = uri.replace("%20", " ")
    fs = Storage(uri, opts).fs
    lines = [line for lines in _manifests(uri, opts).values() for line in lines]
    assert len(lines) == len(lakelog.Table(uri, storage_options=opts).files()) == 5
    for line in lines:
        assert line.startswith(decoded + "/"), line
        assert fs.exists(line.split("://", 1)[1])


def test_spark_writes_keep_the_manifests(spark, tmp_path):
    from spark_ext import LakelogTable

    uri = str(tmp_path / "t")
    # (plain partition values: Spark's DML on escaped partition directories is a separate matter)
    lakelog.write_table(uri, pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"], "p": ["x", "y", None]}, schema=SCHEMA),
                        partition_by=["p"], configuration=ON)
    df = spark.createDataFrame([(10, "v10", "x"), (11, "v11", "new")], "id bigint, v string, p string")
    df.write.format("lakelog").mode("append").save(uri)
    _check_all(uri)
    assert "p=new" in _manifests(uri)
    LakelogTable.forPath(spark, uri).delete("p = 'x' OR id = 2")
    _check_all(uri)
    assert "p=x" not in _manifests(uri)

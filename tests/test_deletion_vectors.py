"""Deletion vectors: the RoaringBitmapArray reader against an independent encoder (tests/dv_encoding.py),
tables whose files have DVs (u, i and p descriptors) on every read path, damaged DV files, check,
vacuum, optimize and row-level operations on such tables. deltalake's SQL engine (QueryBuilder, which
applies DVs) is the peer."""

from __future__ import annotations

import json
import os
import shutil
import uuid

import deltalake
import numpy as np
import orjson
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lakelog
from lakelog.check import check_table
from lakelog.table_features.deletion_vectors import decode_bitmap, read_deletion_vector, z85_decode
from lakelog.actions import DeletionVectorDescriptor
from lakelog.errors import CorruptDeletionVectorError, InvalidPathError, MissingDeletionVectorError, UnsupportedFeatureError
from lakelog.storage import Storage

from .dv_encoding import dv_file, roaring_bitmap_array, uuid_dv, z85_encode
from .expected_rows import canonical_rows, expected, table_path

FUZZ = int(os.environ.get("LAKELOG_FUZZ_EXAMPLES", "60"))

# ---------------------------------------------------------------- the bitmap format

_row_sets = st.one_of(
    st.sets(st.integers(0, 2**40), max_size=200),
    # dense ranges (bitmap and run containers), across 32-bit buckets
    st.builds(
        lambda starts, lengths: {s + i for s, n in zip(starts, lengths) for i in range(n)},
        st.lists(st.integers(0, 2**34), min_size=1, max_size=3),
        st.lists(st.integers(1, 9000), min_size=1, max_size=3),
    ),
)


@settings(max_examples=FUZZ, deadline=None, derandomize=True)
@given(rows=_row_sets, use_runs=st.booleans())
def test_random_bitmaps_round_trip_through_the_reader(rows, use_runs):
    data = roaring_bitmap_array(sorted(rows), use_runs)
    got = decode_bitmap(data)
    assert got.dtype == np.uint64
    assert got.tolist() == sorted(rows)


@settings(max_examples=FUZZ, deadline=None, derandomize=True)
@given(rows=st.lists(st.sets(st.integers(0, 70000), max_size=50), min_size=1, max_size=4), tmp=st.uuids())
def test_dv_files_and_inline_dvs_round_trip(rows, tmp, tmp_path_factory):
    """Several DVs in one file at their offsets, and the same bitmaps inline (z85, zero-padded)."""
    root = tmp_path_factory.mktemp("dv")
    storage = Storage(str(root))
    bitmaps = [roaring_bitmap_array(sorted(r)) for r in rows]
    blob, offsets = dv_file(bitmaps)
    path_or_inline, rel = uuid_dv(tmp, prefix="ab")
    (root / "ab").mkdir()
    (root / rel).write_bytes(blob)
    for r, b, off in zip(rows, bitmaps, offsets):
        dv = DeletionVectorDescriptor("u", path_or_inline, len(b), len(r), off)
        assert read_deletion_vector(storage, dv, "f.parquet").tolist() == sorted(r)
        inline = DeletionVectorDescriptor("i", z85_encode(b), len(b), len(r))
        assert read_deletion_vector(storage, inline, "f.parquet").tolist() == sorted(r)


def test_z85_reads_the_rust_short_tail_form():
    """cdf-table-with-dv holds an inline DV whose last block is a short tail ('#'-led), as the Rust z85
    crate writes it: it decodes to the same bytes as the zero-padded form minus the padding."""
    data = roaring_bitmap_array([0, 3, 5])
    assert z85_decode(z85_encode(data))[: len(data)] == data
    assert z85_decode(z85_encode(b"\x01\x02\x03\x04")) == b"\x01\x02\x03\x04"
    e = expected("cdf-table-with-dv")
    assert canonical_rows(lakelog.read_table(table_path("cdf-table-with-dv"))) == e["rows"]


# ---------------------------------------------------------------- tables lakelog writes, DVs added by hand

N = 100


def _dv_table(path: str, deleted: list[int], *, storage_type: str = "u", prefix: str = "") -> dict:
    """A one-file table of ids 0..N-1, then version 1: the protocol gains deletionVectors and the file is
    re-added with a DV deleting the rows at ``deleted``. Returns the DV's descriptor (JSON)."""
    lakelog.write_table(path, pa.table({"id": pa.array(range(N), pa.int64()), "s": [f"v{i}" for i in range(N)]}))
    (add,) = lakelog.Table(path).snapshot.files.values()
    bitmap = roaring_bitmap_array(deleted)
    if storage_type == "i":
        desc = {"storageType": "i", "pathOrInlineDv": z85_encode(bitmap), "sizeInBytes": len(bitmap), "cardinality": len(deleted)}
    else:
        blob, (offset,) = dv_file([bitmap])
        path_or_inline, rel = uuid_dv(uuid.uuid4(), prefix)
        os.makedirs(os.path.dirname(os.path.join(path, rel)), exist_ok=True)
        with open(os.path.join(path, rel), "wb") as f:
            f.write(blob)
        if storage_type == "p":
            path_or_inline = "file://" + os.path.join(path, rel)
        desc = {"storageType": storage_type, "pathOrInlineDv": path_or_inline, "offset": offset, "sizeInBytes": len(bitmap), "cardinality": len(deleted)}
    new_add = dict(add.to_json()["add"], dataChange=True, deletionVector=desc)
    remove = {"path": add.path, "deletionTimestamp": 1, "dataChange": True, "extendedFileMetadata": True, "partitionValues": {}, "size": add.size}
    actions = [
        {"commitInfo": {"operation": "DELETE"}},
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"], "writerFeatures": ["deletionVectors"]}},
        {"remove": remove},
        {"add": new_add},
    ]
    with open(os.path.join(path, "_delta_log", f"{1:020d}.json"), "wb") as f:
        f.write(b"\n".join(orjson.dumps(a) for a in actions) + b"\n")
    return desc


def _peer_rows(path: str) -> list[int]:
    dt = deltalake.DeltaTable(path)
    t = deltalake.QueryBuilder().register("t", dt).execute("select id from t").read_all()
    return sorted(t.column("id").to_pylist())


DELETED = sorted({3, 7, 8, 9, 50, 99} | set(range(20, 30)))
LIVE = [i for i in range(N) if i not in set(DELETED)]


@pytest.mark.parametrize("storage_type, prefix", [("u", ""), ("u", "xy"), ("i", ""), ("p", "")])
def test_deleted_rows_are_never_returned(tmp_path, storage_type, prefix):
    path = str(tmp_path / "t")
    _dv_table(path, DELETED, storage_type=storage_type, prefix=prefix)
    if storage_type != "p":  # delta-rs reads absolute DV paths only under its object store's scheme
        assert _peer_rows(path) == LIVE
    table = lakelog.Table(path)
    assert sorted(lakelog.read_table(path).column("id").to_pylist()) == LIVE
    assert sorted(table.to_pandas()["id"]) == LIVE
    assert sorted(b for batch in table.read_batches(columns=["id"]) for b in batch.column(0).to_pylist()) == LIVE
    got = table.to_pyarrow(filters=[("id", ">=", 20), ("id", "<", 40)])
    assert sorted(got.column("id").to_pylist()) == [i for i in LIVE if 20 <= i < 40]
    got = table.to_pyarrow(columns=["s"], filters=[("s", "in", ["v3", "v4", "v25", "v31"])])
    assert sorted(got.column("s").to_pylist()) == ["v31", "v4"]
    assert sorted(lakelog.read_table(path, version=0).column("id").to_pylist()) == list(range(N))
    with pytest.raises(UnsupportedFeatureError, match="deletion vectors"):
        table.to_pyarrow_dataset()


def test_absolute_dv_path_outside_the_table_is_refused(tmp_path):
    path = str(tmp_path / "t")
    desc = _dv_table(path, DELETED, storage_type="p")
    outside = str(tmp_path / "elsewhere.bin")
    shutil.copy(desc["pathOrInlineDv"][len("file://"):], outside)
    log = os.path.join(path, "_delta_log", f"{1:020d}.json")
    text = open(log).read()
    open(log, "w").write(text.replace(desc["pathOrInlineDv"], "file://" + outside))
    with pytest.raises(InvalidPathError, match="outside the table root"):
        lakelog.read_table(path)


@pytest.mark.parametrize("damage", ["checksum", "truncated", "missing", "size", "cardinality"])
def test_damaged_dv_file_is_a_typed_error_naming_it(tmp_path, damage):
    path = str(tmp_path / "t")
    desc = _dv_table(path, DELETED)
    _, rel = uuid_dv(uuid.UUID(bytes=z85_decode(desc["pathOrInlineDv"])))
    full = os.path.join(path, rel)
    blob = open(full, "rb").read()
    if damage == "checksum":
        blob = blob[:-5] + bytes([blob[-5] ^ 0xFF]) + blob[-4:]  # a bitmap byte
    elif damage == "truncated":
        blob = blob[: len(blob) // 2]
    elif damage == "size":
        blob = blob[:1] + (len(blob)).to_bytes(4, "big") + blob[5:]
    if damage == "missing":
        os.remove(full)
    else:
        open(full, "wb").write(blob)
    if damage == "cardinality":
        log = os.path.join(path, "_delta_log", f"{1:020d}.json")
        text = open(log).read()
        open(log, "w").write(text.replace(f'"cardinality":{len(DELETED)}', f'"cardinality":{len(DELETED) - 1}'))
    expected_type = MissingDeletionVectorError if damage == "missing" else CorruptDeletionVectorError
    what = {"checksum": "CRC-32", "truncated": "truncated", "missing": "missing", "size": "stored size", "cardinality": "cardinality"}[damage]
    table = lakelog.Table(path)
    (data_file,) = table.files()
    for read in (lambda: lakelog.read_table(path), table.to_pandas, lambda: table.to_pyarrow(filters=[("id", ">", 10)]), lambda: list(table.read_batches())):
        with pytest.raises(expected_type, match=what) as info:
            read()
        assert info.value.paths == [rel, data_file]
        assert rel in str(info.value)
    report = check_table(path)
    assert not report.ok
    kinds = {p.kind for p in report.problems}
    assert kinds == {"missing_deletion_vector" if damage == "missing" else "corrupt_deletion_vector"}
    # time travel to before the DV still reads
    assert lakelog.read_table(path, version=0).num_rows == N


def test_check_counts_dv_files_as_referenced(tmp_path):
    path = str(tmp_path / "t")
    _dv_table(path, DELETED, prefix="pq")
    report = check_table(path)
    assert report.ok and report.orphans == [], report.format()


def test_vacuum_keeps_dv_files_a_retained_version_needs(tmp_path):
    path = str(tmp_path / "t")
    desc = _dv_table(path, DELETED)
    _, rel = uuid_dv(uuid.UUID(bytes=z85_decode(desc["pathOrInlineDv"])))
    table = lakelog.Table(path)
    assert rel not in table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=True)
    metrics = table.optimize()
    assert metrics["numFilesRemoved"] == 1 and metrics["numFilesAdded"] == 1
    # within the default retention the DV file stays (version 1 still needs it) ...
    assert rel not in lakelog.Table(path).vacuum(dry_run=True)
    # ... with no retention, nothing needs it any more
    assert rel in lakelog.Table(path).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=True)


def test_optimize_drops_deleted_rows_and_the_dv(tmp_path):
    path = str(tmp_path / "t")
    _dv_table(path, DELETED)
    metrics = lakelog.Table(path).optimize()
    assert metrics["version"] == 2
    table = lakelog.Table(path)
    assert all(a.deletion_vector is None for a in table.snapshot.files.values())
    assert table.snapshot.files and sum(a.num_records() for a in table.snapshot.files.values()) == len(LIVE)
    assert sorted(table.to_pyarrow().column("id").to_pylist()) == LIVE
    assert _peer_rows(path) == LIVE
    # the commit removed the logical file (path, DV): its remove carries the descriptor
    log = [json.loads(line) for line in open(os.path.join(path, "_delta_log", f"{2:020d}.json"))]
    (remove,) = [a["remove"] for a in log if "remove" in a]
    assert remove["deletionVector"]["cardinality"] == len(DELETED)
    assert sorted(lakelog.read_table(path, version=1).column("id").to_pylist()) == LIVE


def test_row_level_delete_and_update_never_resurrect_deleted_rows(tmp_path):
    path = str(tmp_path / "t")
    _dv_table(path, DELETED)
    table = lakelog.Table(path)
    assert table.delete("id < 5")["num_deleted_rows"] == len([i for i in LIVE if i < 5])
    table.update({"s": "'changed'"}, "id >= 90")
    got = {r["id"]: r["s"] for r in lakelog.read_table(path).to_pylist()}
    want = {i: ("changed" if i >= 90 else f"v{i}") for i in LIVE if i >= 5}
    assert got == want
    assert sorted(_peer_rows(path)) == sorted(want)


def test_row_count_for_planning_subtracts_the_dv_cardinality(tmp_path):
    path = str(tmp_path / "t")
    _dv_table(path, DELETED)
    (add,) = lakelog.Table(path).snapshot.files.values()
    assert add.num_records() == N and add.num_logical_records() == len(LIVE)


def test_checkpoint_round_trips_deletion_vectors(tmp_path):
    """A checkpoint lakelog writes keeps each file's DV; readers (lakelog and delta-rs) apply it."""
    path = str(tmp_path / "t")
    _dv_table(path, DELETED)
    lakelog.Table(path).checkpoint()
    for v in (0, 1):
        os.remove(os.path.join(path, "_delta_log", f"{v:020d}.json"))
    assert sorted(lakelog.read_table(path).column("id").to_pylist()) == LIVE
    assert _peer_rows(path) == LIVE


def test_restore_keys_files_by_path_and_deletion_vector(tmp_path):
    """Restoring to before the DV re-adds the file without it (all rows back); restoring to the DV version
    after OPTIMIZE re-adds the file with its DV (deleted rows stay deleted)."""
    path = str(tmp_path / "t")
    _dv_table(path, DELETED)
    table = lakelog.Table(path)
    table.restore(version=0)
    assert sorted(lakelog.read_table(path).column("id").to_pylist()) == list(range(N))
    assert _peer_rows(path) == list(range(N))
    table = lakelog.Table(path)
    table.restore(version=1)
    assert sorted(lakelog.read_table(path).column("id").to_pylist()) == LIVE
    assert _peer_rows(path) == LIVE
    table = lakelog.Table(path)
    table.optimize()
    table.restore(version=1)
    (add,) = lakelog.Table(path).snapshot.files.values()
    assert add.deletion_vector is not None and add.deletion_vector.cardinality == len(DELETED)
    assert sorted(lakelog.read_table(path).column("id").to_pylist()) == LIVE
    assert _peer_rows(path) == LIVE

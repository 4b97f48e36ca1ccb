"""Row-level operations on deletion-vector tables (merge-on-read): delete, update, merge and predicate
overwrite mark rows in deletion vectors instead of rewriting files.

The expected rows come from pandas, applied to the same operations; deltalake's SQL engine
(QueryBuilder, which applies DVs) and lakelog read every version. Update and merge, and vacuum of DV
files, also run on S3, Azure and GCS. The DV writer is checked byte for
byte against the independent encoder in tests/dv_encoding.py.
"""

from __future__ import annotations

import json
import os
import struct
import uuid

import deltalake
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lakelog
from lakelog.actions import decode_path
from lakelog.table_features.deletion_vectors import encode_bitmap, read_deletion_vector, uuid_relative_path, write_deletion_vectors, z85_decode, z85_encode
from lakelog.errors import CommitConflictError
from lakelog.storage import Storage
from tests.dv_encoding import MAGIC, _runs, dv_file, roaring32
from tests.dv_encoding import z85_encode as independent_z85
from tests.dv_tables import DV, check_all_versions, log_entries, peer_rows, start_dv_table


def test_creating_a_dv_table_writes_the_feature_in_both_lists(table_path):
    lakelog.write_table(table_path, pa.table({"id": [1, 2]}), configuration=DV)
    (protocol,) = [a["protocol"] for a in log_entries(table_path, 0) if "protocol" in a]
    assert (protocol["minReaderVersion"], protocol["minWriterVersion"]) == (3, 7)
    assert "deletionVectors" in protocol["readerFeatures"] and "deletionVectors" in protocol["writerFeatures"]
    assert deltalake.DeltaTable(table_path).protocol().reader_features == ["deletionVectors"]


def test_deletes_mark_rows_in_deletion_vectors_and_every_version_reads(table_path):
    df = start_dv_table(table_path)
    expected = {0: df[df.id < 100], 3: df}
    table = lakelog.Table(table_path)
    files_before = {decode_path(a.path) for a in table.snapshot.files.values()}
    data_files_before = {f for f in os.listdir(table_path) if f != "_delta_log"}

    m = table.delete("x > 90 or s is null")
    want = df[~((df.x > 90) | df.s.isna())]
    assert m["num_deleted_rows"] == len(df) - len(want)
    assert m["num_added_files"] == 0 and m["num_removed_files"] == 0 and m["num_copied_rows"] == 0
    expected[m["version"]] = want
    # no data file was written: the same files, each with a DV, and one new DV file
    table = lakelog.Table(table_path)
    assert {decode_path(a.path) for a in table.snapshot.files.values()} == files_before
    assert all(a.deletion_vector is not None and a.deletion_vector.storage_type == "u" for a in table.snapshot.files.values())
    new = {f for f in os.listdir(table_path) if f != "_delta_log"} - data_files_before
    assert len(new) == 1 and next(iter(new)).startswith("deletion_vector_")
    commit = log_entries(table_path, m["version"])
    info = next(a["commitInfo"] for a in commit if "commitInfo" in a)
    assert info["operation"] == "DELETE" and info["operationMetrics"]["numDeletionVectorsAdded"] == str(len(files_before))
    for add in (a["add"] for a in commit if "add" in a):
        stats = json.loads(add["stats"])
        assert stats["tightBounds"] is False
        assert stats["numRecords"] == 50  # the physical rows of the file

    # a predicate on the partition column and a data column
    m = table.delete("p = 'a' and id < 120")
    want = want[~((want.p == "a") & (want.id < 120))]
    expected[m["version"]] = want
    check_all_versions(table_path, expected)


def test_repeated_deletes_on_a_file_union_the_bitmaps(table_path):
    lakelog.write_table(table_path, pa.table({"id": pa.array(range(50), pa.int64()), "p": ["a"] * 50, "x": pa.array([1] * 50, pa.int64()),
                                              "s": ["v"] * 50}), configuration=DV)
    table = lakelog.Table(table_path)
    sets = [range(0, 10), range(5, 20), [40, 41, 49]]
    gone: set[int] = set()
    for k, ids in enumerate(sets, start=1):
        old = next(iter(lakelog.Table(table_path).snapshot.files.values())).deletion_vector
        m = table.delete(f"id in ({', '.join(map(str, ids))})")
        assert m["num_deleted_rows"] == len(set(ids) - gone)
        gone |= set(ids)
        commit = log_entries(table_path, k)
        (remove,) = [a["remove"] for a in commit if "remove" in a]
        (add,) = [a["add"] for a in commit if "add" in a]
        assert remove["path"] == add["path"]
        assert remove.get("deletionVector") == (old.to_json() if old is not None else None)
        assert add["deletionVector"]["cardinality"] == len(gone)
        (live,) = lakelog.Table(table_path).snapshot.files.values()
        rows = read_deletion_vector(Storage(table_path), live.deletion_vector, live.path)
        assert rows.tolist() == sorted(gone)
        assert sorted(lakelog.read_table(table_path).column("id").to_pylist()) == sorted(set(range(50)) - gone)
        assert sorted(peer_rows(table_path, k).id) == sorted(set(range(50)) - gone)


def test_a_file_whose_rows_are_all_deleted_is_removed(table_path):
    df = start_dv_table(table_path, n=200, files=2)
    table = lakelog.Table(table_path)
    table.delete("id < 50")  # the first file of each partition loses all its rows in two deletes
    m = table.delete("id < 100")
    assert m["num_removed_files"] == 2
    commit = log_entries(table_path, m["version"])
    removed = {a["remove"]["path"] for a in commit if "remove" in a}
    readded = {a["add"]["path"] for a in commit if "add" in a}
    assert len(removed) == 2 and not readded
    info = next(a["commitInfo"] for a in commit if "commitInfo" in a)
    assert info["operationMetrics"]["numDeletionVectorsRemoved"] == "2"
    check_all_versions(table_path, {0: df[df.id < 100], 1: df, 2: df[df.id >= 50], 3: df[df.id >= 100]})


def test_update_and_merge_on_a_dv_table(backend):
    table_path = backend.uri
    df = start_dv_table(table_path)
    expected = {3: df}
    table = lakelog.Table(table_path)
    m = table.update({"x": "x * 2 + 1", "s": "concat(coalesce(s, ''), '_u')"}, "x < 20")
    want = df.copy()
    hit = want.x < 20
    want.loc[hit, "s"] = want.loc[hit, "s"].fillna("") + "_u"
    want.loc[hit, "x"] = want.loc[hit, "x"] * 2 + 1
    assert m["num_updated_rows"] == int(hit.sum())
    assert m["num_removed_files"] == 0 and m["num_copied_rows"] == 0 and m["num_added_files"] >= 1
    expected[m["version"]] = want

    # moving rows to the other partition
    m = table.update({"p": "'b'"}, "p = 'a' and id % 5 = 0")
    want = want.copy()
    want.loc[(want.p == "a") & (want.id % 5 == 0), "p"] = "b"
    expected[m["version"]] = want

    source = pa.table({"id": pa.array([1, 2, 3, 1000, 1001], pa.int64()), "p": ["a", "b", "a", "b", "a"],
                       "x": pa.array([-1, -2, -3, -4, -5], pa.int64()), "s": ["m1", "m2", "m3", "n1", "n2"]})
    m = (table.merge(source, "target.id = source.id")
         .when_matched_delete("source.x = -2")
         .when_matched_update({"x": "source.x", "s": "source.s"})
         .when_not_matched_insert_all()
         .when_not_matched_by_source_delete("target.id >= 390")
         .execute())
    want = want.set_index("id")
    want.loc[[1, 3], "x"] = [-1, -3]
    want.loc[[1, 3], "s"] = ["m1", "m3"]
    want = want.drop(index=[2] + list(range(390, 400))).reset_index()
    want = pd.concat([want, source.to_pandas().iloc[3:]])
    assert (m["num_target_rows_updated"], m["num_target_rows_deleted"], m["num_target_rows_inserted"]) == (2, 11, 2)
    assert m["num_target_rows_copied"] == 0
    expected[m["version"]] = want
    # every touched file carries a DV and no file was rewritten (only updated/inserted rows are new)
    assert any(a.deletion_vector is not None for a in lakelog.Table(table_path).snapshot.files.values())
    check_all_versions(table_path, expected, backend.deltalake_options)


def test_predicate_overwrite_on_a_dv_table(table_path):
    df = start_dv_table(table_path)
    new = pa.table({"id": pa.array([5000, 5001], pa.int64()), "p": ["a", "b"], "x": pa.array([60, 70], pa.int64()), "s": ["o", "o"]})
    lakelog.write_table(table_path, new, mode="overwrite", predicate="x >= 50")
    want = pd.concat([df[~(df.x >= 50)], new.to_pandas()])
    check_all_versions(table_path, {3: df, 4: want})


def test_concurrent_delete_of_the_same_file_conflicts_and_leaves_no_dv_file(table_path):
    from lakelog.dml.delete import delete_matching
    from lakelog.dml.rewrite import RowLevelOperation, compile_predicate

    df = start_dv_table(table_path)
    op = RowLevelOperation(Storage(table_path))
    delete_matching(op, compile_predicate("id = 10", op.schema, op.engine))
    op.finish()
    dv_files = {f for f in os.listdir(table_path) if f.startswith("deletion_vector_")}
    assert len(dv_files) == 1
    lakelog.Table(table_path).delete("id = 12")  # the same file, concurrently
    with pytest.raises(CommitConflictError):
        op.commit("DELETE", {}, {})
    # the losing commit's DV file is gone; the winner's stays; nothing of the loser is visible
    left = {f for f in os.listdir(table_path) if f.startswith("deletion_vector_")}
    assert len(left) == 1 and not (left & dv_files)
    check_all_versions(table_path, {4: df[df.id != 12]})
    # retrying on the new version unions with the winner's DV
    lakelog.Table(table_path).delete("id = 10")
    check_all_versions(table_path, {5: df[~df.id.isin([10, 12])]})


def test_vacuum_keeps_dv_files_of_retained_versions_and_deletes_unreferenced_ones(backend):
    table_path = backend.uri
    storage = Storage(table_path)
    df = start_dv_table(table_path)
    table = lakelog.Table(table_path)
    table.delete("id < 20")
    table.delete("id < 40")
    first, second = ((0, uuid_relative_path(next(a["add"] for a in log_entries(table_path, v) if "add" in a)["deletionVector"]["pathOrInlineDv"]))
                     for v in (4, 5))
    # the first DV file is replaced by the second, but version 4 still needs it within the retention
    assert first[1] not in lakelog.Table(table_path).vacuum(dry_run=True)
    gone = lakelog.Table(table_path).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=True)
    assert first[1] in gone and second[1] not in gone
    lakelog.Table(table_path).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    assert not storage.exists(storage.join(first[1]))
    check_all_versions(table_path, {5: df[df.id >= 40]}, backend.deltalake_options)
    # optimize drops the DVs; then no version kept needs the second DV file either
    version = lakelog.Table(table_path).optimize()["version"]
    assert all(a.deletion_vector is None for a in lakelog.Table(table_path).snapshot.files.values())
    assert second[1] in lakelog.Table(table_path).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    assert not storage.exists(storage.join(second[1]))
    check_all_versions(table_path, {version: df[df.id >= 40]}, backend.deltalake_options)


# ---------------------------------------------------------------- the writer against the independent encoder

def expected_bitmap(rows: list[int]) -> bytes:
    """The RoaringBitmapArray of ``rows`` as the independent encoder writes it, each 16-bit container a
    run container exactly when that is smaller than its array or bitmap form (Roaring's run optimisation,
    which the writer applies)."""
    buckets: dict[int, list[int]] = {}
    for r in rows:
        buckets.setdefault(r >> 32, []).append(r & 0xFFFFFFFF)
    out = struct.pack("<iQ", MAGIC, len(buckets))
    for high in sorted(buckets):
        containers: dict[int, list[int]] = {}
        for v in buckets[high]:
            containers.setdefault(v >> 16, []).append(v & 0xFFFF)
        runs = [2 + 4 * len(_runs(c)) < (2 * len(c) if len(c) <= 4096 else 8192) for _, c in sorted(containers.items())]
        out += struct.pack("<I", high) + roaring32(buckets[high], runs)
    return out


ROWS = st.one_of(
    st.lists(st.integers(0, 200_000), max_size=300),
    st.lists(st.integers(0, 2**40), max_size=50),
    st.tuples(st.integers(0, 100_000), st.integers(0, 70_000)).map(lambda t: list(range(t[0], t[0] + t[1]))),
).map(lambda rows: sorted(set(rows)))


@settings(max_examples=int(os.environ.get("LAKELOG_FUZZ_EXAMPLES", "60")), deadline=None)
@given(st.lists(ROWS, min_size=1, max_size=4), st.uuids())
def test_dv_writer_matches_the_independent_encoder(bitmaps, u):
    # the bitmap bytes equal the encoder's written from the specification
    for rows in bitmaps:
        assert encode_bitmap(np.array(rows, dtype=np.uint64)) == expected_bitmap(rows)
    assert z85_encode(u.bytes) == independent_z85(u.bytes) and z85_decode(z85_encode(u.bytes)) == u.bytes


def test_dv_file_matches_the_independent_encoder_and_reads_back(tmp_path):
    storage = Storage(str(tmp_path))
    bitmaps = [np.array([0, 3, 9], np.uint64), np.arange(70_000, dtype=np.uint64) * 3, np.array([2**33 + 1], np.uint64), np.array([], np.uint64)]
    rel, descriptors = write_deletion_vectors(storage, bitmaps)
    want, offsets = dv_file([expected_bitmap(b.tolist()) for b in bitmaps])
    with open(tmp_path / rel, "rb") as f:
        assert f.read() == want
    assert [d.offset for d in descriptors] == offsets
    for d, rows in zip(descriptors, bitmaps):
        assert d.storage_type == "u" and uuid_relative_path(d.path_or_inline_dv) == rel
        assert d.cardinality == len(rows)
        assert read_deletion_vector(storage, d, "data.parquet").tolist() == rows.tolist()
    assert uuid.UUID(rel[len("deletion_vector_"):-len(".bin")])


def test_checkpoints_carry_the_written_deletion_vectors(table_path):
    df = start_dv_table(table_path, n=200, files=2)
    lakelog.write_table(table_path, pa.table({"id": pa.array([], pa.int64()), "p": pa.array([], pa.string()),
                                              "x": pa.array([], pa.int64()), "s": pa.array([], pa.string())}),
                        mode="append", configuration={"delta.checkpointInterval": "2"})
    table = lakelog.Table(table_path)
    expected = {}
    for pred, selected in [("id % 3 = 0", lambda d: d.id % 3 == 0), ("id % 5 = 0", lambda d: d.id % 5 == 0),
                           ("x > 80", lambda d: d.x > 80), ("p = 'b' and id < 150", lambda d: (d.p == "b") & (d.id < 150))]:
        m = table.delete(pred)
        df = df[~selected(df)]
        expected[m["version"]] = df
    assert any(f.endswith(".checkpoint.parquet") for f in os.listdir(os.path.join(table_path, "_delta_log")))
    check_all_versions(table_path, expected)

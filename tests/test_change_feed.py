"""The change data feed: written by every Python row-level path (copy-on-write and deletion vectors, with
and without column mapping), read by Table.changes, and checked against deltalake's load_cdf (on what it
reads) and Spark-written CDF tables in tests/data (delta-kernel-rs test tables). The row-level paths
also record their changes on S3, Azure and GCS (on deletion-vector tables)."""

import datetime as dt
import json
import os
import time
import shutil

import deltalake
import pyarrow as pa
import pytest

import lakelog
from lakelog.errors import ChangeFeedUnavailableError, InvalidArgumentError, VersionNotFoundError
from tests.table_files import table_fs

DATA = os.path.join(os.path.dirname(__file__), "data")
KEY = ["_commit_version", "_change_type", "id"]


def _rows(t: pa.Table, cols=("id", "p", "v")) -> list[tuple]:
    names = [c for c in cols if c in t.schema.names] + ["_change_type", "_commit_version"]
    return sorted(tuple(r[c] for c in names) for r in t.select(names).to_pylist())


def _theirs(path, start=0):
    return pa.table(deltalake.DeltaTable(path).load_cdf(starting_version=start).read_all())


CONFIGS = {
    "copy-on-write": {},
    "deletion-vectors": {"delta.enableDeletionVectors": "true"},
    "column-mapping": {"delta.columnMapping.mode": "name"},
    "legacy-key": {"delta.enableChangeDataCapture": "true"},
}


# Every shape on local disk; deletion vectors (which write DV files beside the change data) on object stores.
SHAPES = [("local", shape) for shape in sorted(CONFIGS)] + [(kind, "deletion-vectors") for kind in ("s3", "azure", "gcs")]


@pytest.mark.parametrize("backend, shape", SHAPES, ids=[f"{k}-{s}" for k, s in SHAPES], indirect=["backend"])
def test_every_row_level_path_records_its_changes(backend, shape):
    path = backend.uri
    conf = {"delta.enableChangeDataFeed": "true", **CONFIGS[shape]} if shape != "legacy-key" else CONFIGS[shape]
    lakelog.write_table(path, pa.table({"id": [1, 2, 3, 4, 5, 6], "p": ["a", "a", "b", "b", "c", "c"], "v": [10, 20, 30, 40, 50, 60]}),
                        partition_by="p", configuration=conf)
    t = lakelog.Table(path)
    t.delete("id = 1")                                                        # 1: part of a file
    t.delete("p = 'c'")                                                       # 2: whole files
    t.update({"v": "v + 1"}, "id = 3")                                        # 3
    t.merge(pa.table({"id": [2, 4, 7], "p": ["a", "b", "a"], "v": [22, 0, 70]}), "target.id = source.id") \
        .when_matched_update_all("source.v > 0").when_matched_delete().when_not_matched_insert_all().execute()  # 4
    lakelog.write_table(path, pa.table({"id": [8], "p": ["b"], "v": [80]}), mode="overwrite", predicate="p = 'b'")  # 5
    lakelog.write_table(path, pa.table({"id": [9], "p": ["a"], "v": [90]}), mode="overwrite", partition_overwrite="dynamic")  # 6
    time.sleep(0.05)
    before_7 = dt.datetime.now(dt.timezone.utc)
    # a commit's timestamp is its file's mtime, in whole milliseconds, from the kernel's coarse clock that lags
    # time.time() by up to one tick (10 ms at HZ=100): version 7 must land clearly after before_7. S3 and
    # Azure give an object's Last-Modified in whole seconds: there version 7 lands in the next second.
    time.sleep(1.05 - before_7.microsecond / 1e6 if backend.short else 0.05)
    lakelog.write_table(path, pa.table({"id": [10], "p": ["d"], "v": [100]}))  # 7: a plain append
    expected = sorted([
        (1, "a", 10, "insert", 0), (2, "a", 20, "insert", 0), (3, "b", 30, "insert", 0), (4, "b", 40, "insert", 0),
        (5, "c", 50, "insert", 0), (6, "c", 60, "insert", 0),
        (1, "a", 10, "delete", 1),
        (5, "c", 50, "delete", 2), (6, "c", 60, "delete", 2),
        (3, "b", 30, "update_preimage", 3), (3, "b", 31, "update_postimage", 3),
        (2, "a", 20, "update_preimage", 4), (2, "a", 22, "update_postimage", 4), (4, "b", 40, "delete", 4), (7, "a", 70, "insert", 4),
        (3, "b", 31, "delete", 5), (8, "b", 80, "insert", 5),
        (2, "a", 22, "delete", 6), (7, "a", 70, "delete", 6), (9, "a", 90, "insert", 6),
        (10, "d", 100, "insert", 7),
    ])
    ours = t.changes()
    assert _rows(ours) == expected
    assert ours.schema.field("_commit_version").type == pa.int64()
    assert ours.schema.field("_commit_timestamp").type == pa.timestamp("us", tz="UTC")
    if shape not in ("column-mapping", "legacy-key"):  # (deltalake reads neither column-mapped feeds nor the legacy key)
        assert _rows(backend.peer_changes()) == expected
    # ranges, columns, batches, timestamps
    assert _rows(t.changes(3, 4)) == [r for r in expected if 3 <= r[4] <= 4]
    assert t.changes(4, 4, columns=["id"]).schema.names == ["id", "_change_type", "_commit_version", "_commit_timestamp"]
    assert sum(b.num_rows for b in t.changes_batches(1)) == len([r for r in expected if r[4] >= 1])
    assert _rows(t.changes(starting_timestamp=before_7)) == [r for r in expected if r[4] == 7]
    assert _rows(t.changes(ending_timestamp=before_7)) == [r for r in expected if r[4] < 7]
    assert lakelog.Table(path).check().ok
    # history: each row-level commit counts its change data files, as Delta's operationMetrics do
    metrics = {h["version"]: h.get("operationMetrics") or {} for h in lakelog.Table(path).history()}
    fs, root = table_fs(path)
    for v in (1, 2, 3, 4, 5):
        logged = [json.loads(line) for line in fs.cat_file(f"{root}/_delta_log/{v:020d}.json").splitlines()]
        assert int(metrics[v]["numAddedChangeFiles"]) == sum(1 for a in logged if "cdc" in a), v


def test_change_feed_ranges_that_cannot_be_read_are_typed_errors(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": [1, 2]}))
    t = lakelog.Table(path)
    t.set_properties({"delta.enableChangeDataFeed": True})  # 1: upgrades the protocol
    assert t.snapshot.protocol.min_writer_version >= 4
    t.delete("id = 1")  # 2
    with pytest.raises(ChangeFeedUnavailableError, match="version 0"):
        t.changes(0)
    assert _rows(t.changes(1), ("id",)) == [(1, "delete", 2)]
    with pytest.raises(VersionNotFoundError):
        t.changes(5)
    with pytest.raises(VersionNotFoundError):
        t.changes(1, 9)
    with pytest.raises(InvalidArgumentError):
        t.changes(2, 1)
    with pytest.raises(InvalidArgumentError):
        t.changes(-1)
    # a change file removed (as a too-short vacuum would) is named, never silently skipped
    for root, _, files in os.walk(os.path.join(path, "_change_data")):
        for f in files:
            os.remove(os.path.join(root, f))
    with pytest.raises(ChangeFeedUnavailableError, match="version 2"):
        t.changes(1)


@pytest.mark.parametrize("name", ["cdf-table-with-dv", "cdc_ict_table", "compacted-log-files-table"])
def test_spark_written_change_feeds_read_as_deltalake_reads_them(name):
    # delta-kernel-rs kernel/tests/data (Spark-written); deltalake's load_cdf is the reference
    t = lakelog.Table(os.path.join(DATA, name))
    ours = t.changes()
    theirs = _theirs(os.path.join(DATA, name))
    cols = [c for c in ours.schema.names if not c.startswith("_")]
    key = lambda tb: sorted(tuple(r[c] for c in cols + ["_change_type", "_commit_version"]) for r in tb.to_pylist())  # noqa: E731
    assert key(ours) == key(theirs.cast(pa.schema([ours.schema.field(c) if c in ours.schema.names else f for c, f in zip(theirs.schema.names, theirs.schema)])))


@pytest.mark.parametrize("name", ["cdf-column-mapping-name-mode-3-7", "cdf-column-mapping-id-mode"])
def test_spark_written_column_mapped_change_feed(tmp_path, name):
    # change files name columns by physical name; version 0 predates the feed
    path = str(tmp_path / name)
    shutil.copytree(os.path.join(DATA, name), path)
    t = lakelog.Table(path)
    with pytest.raises(ChangeFeedUnavailableError, match="version 0"):
        t.changes(0)
    kinds = [r["_change_type"] for r in t.changes(1).to_pylist()]
    assert sorted(kinds) == ["delete", "insert", "update_postimage", "update_preimage"]
    # and lakelog now writes into it, recording the changes
    t.update({"value": "value * 2"}, "id = 4")
    last = t.changes(t.version)
    assert sorted(r["_change_type"] for r in last.to_pylist()) == ["update_postimage", "update_preimage"]


def test_the_feed_records_generated_and_identity_values_as_written(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"v": [1, 2]}), configuration={"delta.enableChangeDataFeed": "true"},
                        generated_columns={"w": "v * 10"}, identity_columns=["id"])
    t = lakelog.Table(path)
    t.update({"v": "v + 1"}, "v = 1")
    t.merge(pa.table({"v": [9]}), "target.v = source.v").when_not_matched_insert_all().execute()
    got = sorted((r["_change_type"], r["v"], r["w"], r["id"]) for r in t.changes(1).to_pylist())
    assert got == [("insert", 9, 90, 3), ("update_postimage", 2, 20, 1), ("update_preimage", 1, 10, 1)]


def test_deltalake_written_row_level_changes_read_as_deltalake_reads_them(tmp_path):
    path = str(tmp_path / "t")
    deltalake.write_deltalake(path, pa.table({"id": [1, 2, 3, 4], "p": ["a", "a", "b", "b"], "v": [10, 20, 30, 40]}),
                              partition_by=["p"], configuration={"delta.enableChangeDataFeed": "true"})
    dt_ = deltalake.DeltaTable(path)
    dt_.delete("id = 1")
    dt_.update(updates={"v": "v + 1"}, predicate="id = 3")
    (dt_.merge(pa.table({"id": [2, 5], "p": ["a", "b"], "v": [22, 50]}), "target.id = source.id", source_alias="source", target_alias="target")
     .when_matched_update_all().when_not_matched_insert_all().execute())
    deltalake.write_deltalake(path, pa.table({"id": [6], "p": ["a"], "v": [60]}), mode="append")
    ours = lakelog.Table(path).changes()
    assert _rows(ours) == _rows(_theirs(path))
    assert {r[3] for r in _rows(ours)} == {"insert", "delete", "update_preimage", "update_postimage"}


def test_check_verifies_change_data_files(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": [1, 2, 3]}), configuration={"delta.enableChangeDataFeed": "true"})
    t = lakelog.Table(path)
    t.update({"id": "id + 10"}, "id = 2")
    assert t.check().ok and not t.check().warnings
    changes = [os.path.join(r, f) for r, _, fs in os.walk(os.path.join(path, "_change_data")) for f in fs]
    assert changes
    with open(changes[0], "ab") as f:
        f.write(b"x")
    report = t.check()
    assert not report.ok and any(p.kind == "size_mismatch" and "change data file" in p.message for p in report.problems)
    os.remove(changes[0])
    report = t.check()
    assert report.ok and any(w.kind == "missing_change_file" and w.version == 1 for w in report.warnings)


def test_changes_from_a_table_opened_before_log_cleanup_name_the_missing_version(tmp_path):
    """A Table's listing is reused for a range it covers; when log cleanup removed commits since it was
    opened, the range is listed again and the missing version named, and a range still in the log reads."""
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": [0], "v": ["a"]}), configuration={"delta.enableChangeDataFeed": "true"})
    for i in range(1, 5):
        lakelog.write_table(path, pa.table({"id": [i], "v": ["a"]}), mode="append")
    t = lakelog.Table(path)
    lakelog.Table(path).checkpoint()
    for v in range(3):  # as log cleanup does: commits before the checkpoint go
        os.remove(os.path.join(path, "_delta_log", f"{v:020d}.json"))
    with pytest.raises(ChangeFeedUnavailableError, match="version 1 is no longer in the log"):
        t.changes(1, 4)
    assert sorted(t.changes(3, 4).column("id").to_pylist()) == [3, 4]


def test_a_bound_given_as_a_version_and_a_timestamp_is_refused(tmp_path):
    """As Delta (DELTA_MULTIPLE_CDC_BOUNDARY): a starting (or ending) bound given both ways is refused,
    naming both arguments, never one silently ignored; either alone still reads, and so do a version for
    one bound and a timestamp for the other."""
    from pyspark.sql.datasource import CaseInsensitiveDict
    from pyspark.sql.pandas.types import from_arrow_schema

    from lakelog.errors import ConflictingBoundsError
    from spark_ext.datasource.change_feed import LakelogChangeReader, LakelogChangeStreamReader

    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": [1, 2, 3]}), configuration={"delta.enableChangeDataFeed": "true"})
    t = lakelog.Table(path)
    t.delete("id = 1")  # 1
    t.delete("id = 2")  # 2
    early, late = "2000-01-01T00:00:00Z", "2999-01-01T00:00:00Z"
    with pytest.raises(ConflictingBoundsError, match="starting_version=2 with starting_timestamp=.*give starting_version or starting_timestamp") as e:
        t.changes(2, starting_timestamp=early)
    assert e.value.bounds == [("starting_version", "starting_timestamp")] and isinstance(e.value, InvalidArgumentError)
    with pytest.raises(ConflictingBoundsError, match="ending_version=1 with ending_timestamp") as e:
        t.changes(0, 1, ending_timestamp=late)
    assert e.value.bounds == [("ending_version", "ending_timestamp")]
    with pytest.raises(ConflictingBoundsError) as e:
        list(t.changes_batches(0, 1, starting_timestamp=early, ending_timestamp=late))
    assert e.value.bounds == [("starting_version", "starting_timestamp"), ("ending_version", "ending_timestamp")]
    with pytest.raises(ConflictingBoundsError):  # version 0 is a bound too
        t.changes(0, starting_timestamp=late)
    # one bound each way, or either alone: read as before
    assert _rows(t.changes(2, ending_timestamp=late), ("id",)) == [(2, "delete", 2)]
    assert _rows(t.changes(starting_timestamp=early, ending_version=1), ("id",)) == sorted(
        [(1, "insert", 0), (2, "insert", 0), (3, "insert", 0), (1, "delete", 1)])
    assert len(t.changes()) == 5
    # Spark's readers, with Delta's option names (built as Spark builds them; the Spark tests run them end to end)
    schema = from_arrow_schema(t.schema, prefer_timestamp_ntz=True)

    def options(**kw):
        return CaseInsensitiveDict({"path": path, "readChangeFeed": "true", **{k: str(v) for k, v in kw.items()}})

    with pytest.raises(ConflictingBoundsError, match="startingVersion='2' with startingTimestamp") as e:
        LakelogChangeReader(options(startingVersion=2, startingTimestamp=early), schema)
    assert e.value.bounds == [("startingVersion", "startingTimestamp")]
    with pytest.raises(ConflictingBoundsError, match="endingVersion='1' with endingTimestamp"):
        LakelogChangeReader(options(startingVersion=0, endingVersion=1, endingTimestamp=late), schema)
    with pytest.raises(ConflictingBoundsError, match="startingVersion='1' with startingTimestamp"):
        LakelogChangeStreamReader(options(startingVersion=1, startingTimestamp=early), schema)
    ranged = LakelogChangeReader(options(startingVersion=2, endingTimestamp=late), schema)
    assert (ranged.start, ranged.end) == (2, 2)
    assert LakelogChangeReader(options(startingTimestamp=early, endingVersion=1), schema).start == 0

"""spark_ext.read: Spark's own Parquet source over exactly a snapshot's files, partition values from the log."""

import datetime as dt
import decimal
import json
import math
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakelog
from lakelog.actions import AddFile, CommitInfo
from lakelog.errors import UnsupportedFeatureError
from lakelog.log.delta_log import DeltaLog
from lakelog.storage import Storage

import spark_ext
from spark_ext.scan.native import NATIVE_READER_FEATURES, snapshot_frame, unreadable_type_changes

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def _canonical(v):
    """tests/data/README.md's canonical JSON form of one value."""
    if isinstance(v, float):
        return "NaN" if math.isnan(v) else ("Infinity" if v == math.inf else "-Infinity" if v == -math.inf else v)
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            return v.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return v.strftime("%Y-%m-%dT%H:%M:%S.%f")
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, bytes):
        return {"$binary": v.hex()}
    if isinstance(v, dict):
        return {k: _canonical(x) for k, x in v.items()}
    if isinstance(v, list):
        if v and all(isinstance(x, tuple) and len(x) == 2 for x in v):  # pyarrow's form of a map
            return {"$map": sorted(([_canonical(a), _canonical(b)] for a, b in v), key=lambda p: json.dumps(p, sort_keys=True))}
        return [_canonical(x) for x in v]
    return v


def _rows(table: pa.Table) -> list[str]:
    return sorted(json.dumps({k: _canonical(v) for k, v in r.items()}, sort_keys=True) for r in table.to_pylist())


def _arrow(df) -> pa.Table:
    return df.toArrow()


def _same(df, expected: pa.Table) -> None:
    got = _arrow(df)
    assert got.column_names == expected.column_names
    assert _rows(got) == _rows(expected)


def test_matches_lakelog_for_every_type_partition_value_and_version(spark, tmp_path):
    path = str(tmp_path / "t")
    n = 30
    data = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "s": [f"a b/c=%{i % 4}:é" if i % 7 else None for i in range(n)],  # Hive escaping in directory names
            "small": pa.array([i % 3 for i in range(n)], pa.int16()),
            "d": pa.array([dt.date(2026, 1, 1 + i % 2) for i in range(n)], pa.date32()),
            "ts": pa.array([dt.datetime(2026, 1, 1, 1, 2, 3, 456789, tzinfo=dt.timezone.utc) + dt.timedelta(hours=i % 2) for i in range(n)], pa.timestamp("us", tz="UTC")),
            "ntz": pa.array([dt.datetime(2026, 2, 3, 4, 5, 6, 7) for _ in range(n)], pa.timestamp("us")),
            "amount": pa.array([decimal.Decimal(i % 3) / 4 for i in range(n)], pa.decimal128(10, 2)),
            "flag": [i % 2 == 0 for i in range(n)],
            "x": [i / 3 for i in range(n)],
            "name": [f"n{i}" for i in range(n)],
        }
    )
    lakelog.write_table(path, data, partition_by=["s", "small", "d", "ts", "amount", "flag"])
    lakelog.write_table(path, data.slice(0, 5), mode="overwrite")  # the first version's files stay on disk
    lakelog.write_table(path, data.slice(5, 3))
    for version in (None, 0, 1):
        df = spark_ext.read(spark, path, version=version)
        _same(df, lakelog.read_table(path, version=version))
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")  # partition values are instants, not wall times
    try:
        _same(spark_ext.read(spark, path, version=0), lakelog.read_table(path, version=0))
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    assert spark_ext.read(spark, path).count() == 8
    ts = lakelog.Table(path).history()[-1]["timestamp"]  # version 0's commit time
    assert spark_ext.read(spark, path, timestamp=ts).count() == n
    same_as_source = spark.read.format("lakelog").load(path)
    assert spark_ext.read(spark, path).schema.simpleString() == same_as_source.schema.simpleString()


def test_reads_only_the_snapshots_files_with_the_logs_partition_values(spark, tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": [1, 2, 3], "p": ["a", "b", "a"]}), partition_by=["p"])
    # Files the log never names: a stray Parquet file in a partition directory and at the root.
    pq.write_table(pa.table({"id": [666]}), os.path.join(path, "p=a", "stray.parquet"))
    pq.write_table(pa.table({"id": [667]}), os.path.join(path, "stray.parquet"))
    # Files whose directory says something else than the log: the log wins.
    for rel, value, ids in [("p=zzz/f1.parquet", "c", [4]), ("odd dir/f2.parquet", None, [5]), ("mixed/f3.parquet", "d", [6]), ("mixed/f4.parquet", "e", [7])]:
        full = os.path.join(path, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), full)
        add = AddFile(path=rel.replace(" ", "%20"), partition_values={"p": value}, size=os.path.getsize(full), modification_time=0)
        DeltaLog(Storage(path)).write_commit(lakelog.Table(path).version + 1, [CommitInfo({"operation": "WRITE"}), add])
    df = spark_ext.read(spark, path)
    got = sorted((r.id, r.p) for r in df.collect())
    assert got == [(1, "a"), (2, "b"), (3, "a"), (4, "c"), (5, None), (6, "d"), (7, "e")]
    assert got == sorted((r["id"], r["p"]) for r in lakelog.read_table(path).to_pylist())
    assert sorted(r.id for r in df.filter("p = 'e'").collect()) == [7]
    assert sorted(r.id for r in df.filter("p is null").collect()) == [5]


def test_unpartitioned_table_with_files_in_subdirectories(spark, tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": pa.array([1], pa.int64())}))
    for v, rel in enumerate(["a/f1.parquet", "a/b/f2.parquet", "c=1/f3.parquet"], start=1):
        full = os.path.join(path, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        pq.write_table(pa.table({"id": pa.array([v + 1], pa.int64())}), full)
        DeltaLog(Storage(path)).write_commit(v, [AddFile(path=rel, partition_values={}, size=os.path.getsize(full), modification_time=0)])
    pq.write_table(pa.table({"id": pa.array([99], pa.int64())}), os.path.join(path, "a", "stray.parquet"))
    df = spark_ext.read(spark, path)
    assert sorted(r.id for r in df.collect()) == [1, 2, 3, 4]
    spark.catalog.refreshByPath(path)  # Spark re-lists what it indexed: a snapshot stays what it is
    assert sorted(r.id for r in df.collect()) == [1, 2, 3, 4]


def test_spark_plans_it_as_a_parquet_scan(spark, tmp_path):
    path = str(tmp_path / "t")
    for i in range(3):
        data = pa.table({"id": pa.array(range(i * 1000, i * 1000 + 1000), pa.int64()), "p": [str(i)] * 1000, "x": [0.5] * 1000})
        lakelog.write_table(path, data, partition_by=["p"])
    df = spark_ext.read(spark, path)
    plan = df.filter("p = '1' and id < 1100").select("id")._jdf.queryExecution().executedPlan().toString()
    assert "FileScan parquet" in plan and "Batched: true" in plan  # Spark's vectorised Parquet reader
    assert "ReadSchema: struct<id:bigint>" in plan  # column pruning
    assert "PushedFilters: [IsNotNull(id), LessThan(id,1100)]" in plan  # row-group skipping
    assert "PartitionFilters: [isnotnull(p" in plan and "= 1)]" in plan
    # Partition pruning for real: the other partitions' files are unreadable and never opened.
    for rel in lakelog.Table(path).files():
        if not rel.startswith("p=1/"):
            with open(os.path.join(path, rel), "wb") as f:
                f.write(b"not parquet")
    assert sorted(r.id for r in df.filter("p = '1' and id < 1003").collect()) == [1000, 1001, 1002]
    with pytest.raises(Exception, match="(?i)parquet|corrupt|magic"):
        df.count()


TABLES = sorted(n for n in os.listdir(DATA) if os.path.isdir(os.path.join(DATA, n)) and n != "expected")


@pytest.mark.parametrize("name", TABLES)
def test_spark_written_tables(spark, name):
    path = os.path.join(DATA, name)
    expected = json.load(open(os.path.join(DATA, "expected", f"{name}.json")))
    try:
        snap = lakelog.Table(path).snapshot
    except UnsupportedFeatureError:
        with pytest.raises(UnsupportedFeatureError):
            spark_ext.read(spark, path)
        return
    p = snap.protocol
    native_ok = not (set(p.reader_features or []) - NATIVE_READER_FEATURES if p.min_reader_version >= 3 else set())
    native_ok = native_ok and not unreadable_type_changes(snap.metadata.schema_string)
    if not native_ok or expected.get("expect") == "refuse":
        with pytest.raises(UnsupportedFeatureError):
            spark_ext.read(spark, path)
        return
    df = spark_ext.read(spark, path)
    assert expected.get("expect") == "metadata_only" or df.columns == expected["columns"]
    if "rows" in expected:
        assert _rows(_arrow(df)) == sorted(json.dumps(r, sort_keys=True) for r in expected["rows"])


def test_refuses_what_a_parquet_scan_cannot_read(spark, tmp_path):
    with pytest.raises(UnsupportedFeatureError, match="memory filesystem"):
        path = "memory://native-tests/t"
        lakelog.write_table(path, pa.table({"id": [1]}))
        spark_ext.read(spark, path)
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": [1]}))
    hidden = os.path.join(path, "_hidden.parquet")  # Spark's file index would skip it silently
    pq.write_table(pa.table({"id": pa.array([2], pa.int64())}), hidden)
    DeltaLog(Storage(path)).write_commit(1, [AddFile(path="_hidden.parquet", partition_values={}, size=os.path.getsize(hidden), modification_time=0)])
    with pytest.raises(UnsupportedFeatureError, match="_hidden.parquet"):
        spark_ext.read(spark, path)
    assert sorted(r.id for r in spark.read.format("lakelog").load(path).collect()) == [1, 2]


def test_empty_table(spark, tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": pa.array([], pa.int64()), "p": pa.array([], pa.string())}), partition_by=["p"])
    df = spark_ext.read(spark, path)
    assert df.columns == ["id", "p"] and df.count() == 0
    shutil.rmtree(path)


def _add_deletion_vectors(path: str, deleted: dict[str, list[int]]) -> None:
    """Commit the next version of the lakelog table at ``path``: each file in ``deleted`` re-added with a
    deletion vector deleting those row positions (alternately in one shared DV file and inline)."""
    import uuid

    import orjson

    from .dv_encoding import dv_file, roaring_bitmap_array, uuid_dv, z85_encode

    snap = lakelog.Table(path).snapshot
    items = sorted(deleted.items())
    on_disk = [(rel, rows) for i, (rel, rows) in enumerate(items) if i % 2 == 0]
    blob, offsets = dv_file([roaring_bitmap_array(rows) for _, rows in on_disk])
    path_or_inline, dv_rel = uuid_dv(uuid.uuid4(), "dv")
    os.makedirs(os.path.join(path, "dv"), exist_ok=True)
    with open(os.path.join(path, dv_rel), "wb") as f:
        f.write(blob)
    offset_of = {rel: off for (rel, _), off in zip(on_disk, offsets)}
    actions = [
        {"commitInfo": {"operation": "DELETE"}},
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"], "writerFeatures": ["deletionVectors"]}},
    ]
    for rel, rows in items:
        add = snap.files[rel].to_json()["add"]
        bitmap = roaring_bitmap_array(rows)
        if rel in offset_of:
            desc = {"storageType": "u", "pathOrInlineDv": path_or_inline, "offset": offset_of[rel], "sizeInBytes": len(bitmap), "cardinality": len(rows)}
        else:
            desc = {"storageType": "i", "pathOrInlineDv": z85_encode(bitmap), "sizeInBytes": len(bitmap), "cardinality": len(rows)}
        actions.append({"remove": {"path": add["path"], "deletionTimestamp": 1, "dataChange": True, "partitionValues": add["partitionValues"], "size": add["size"]}})
        actions.append({"add": dict(add, deletionVector=desc)})
    with open(os.path.join(path, "_delta_log", f"{snap.version + 1:020d}.json"), "wb") as f:
        f.write(b"\n".join(orjson.dumps(a) for a in actions) + b"\n")


@pytest.mark.parametrize("vectorized", [True, False])
def test_deletion_vectors_hold_across_splits_skipped_row_groups_and_row_reading(spark, tmp_path, monkeypatch, vectorized):
    """A file with a deletion vector, in several row groups, read in several splits, with row groups
    skipped by a filter, with and without Spark's vectorised reader, beside _metadata.row_index: every
    row is marked by its position in its file, so exactly the deleted rows go, and row indexes stay the
    file's."""
    import lakelog.write.files

    monkeypatch.setattr(lakelog.write.files, "ROW_GROUP_ROWS", 1000)
    path = str(tmp_path / "t")
    n = 12_000
    for lo in range(0, n, 6000):  # two files (one per commit) of six row groups each
        ids = pa.array(range(lo, lo + 6000), pa.int64())
        lakelog.write_table(path, pa.table({"id": ids, "p": pa.array(["a"] * 6000), "s": [f"v{i}" for i in range(lo, lo + 6000)]}),
                            partition_by=["p"], mode="append")
    files = sorted(lakelog.Table(path).files())
    first = {rel: pq.read_table(os.path.join(path, rel), columns=["id"]).column("id")[0].as_py() for rel in files}
    deleted = {rel: sorted({0, 999, 1000, 2500, 5999} | set(range(3000 + k, 4000, 7))) for k, rel in enumerate(files)}
    _add_deletion_vectors(path, deleted)
    gone = {first[rel] + r for rel, rows in deleted.items() for r in rows}
    live = [i for i in range(n) if i not in gone]
    conf = {"spark.sql.files.maxPartitionBytes": "20000", "spark.sql.files.openCostInBytes": "0",
            "spark.sql.parquet.enableVectorizedReader": str(vectorized).lower()}
    before = {k: spark.conf.get(k, None) for k in conf}
    try:
        for k, v in conf.items():
            spark.conf.set(k, v)
        df = spark_ext.read(spark, path)
        assert df.rdd.getNumPartitions() > 2  # (each file is split)
        assert sorted(r.id for r in df.select("id").collect()) == live
        assert sorted(r.id for r in df.where("id >= 2000 and id < 4500").select("id").collect()) == [i for i in live if 2000 <= i < 4500]
        got = df.where("id >= 6500").select("id", "s", "p", "_metadata.row_index").collect()
        assert sorted((r.id, r.s, r.p, r.row_index) for r in got) == [(i, f"v{i}", "a", i - 6000) for i in live if i >= 6500]
        assert df.count() == len(live)
    finally:
        for k, v in before.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)


def test_deletion_vectors_in_a_table_too_wide_for_columnar_reading(spark, tmp_path):
    """With more columns than Spark's whole-stage code generation takes (100), Spark reads row by row
    and converts rows itself: the live column is filled there too, with nested and partition columns."""
    path = str(tmp_path / "t")
    n = 300
    cols = {"id": pa.array(range(n), pa.int64()), "p": pa.array(["x" if i % 2 else "y" for i in range(n)]),
            "nested": pa.array([{"a": i, "b": [i, i + 1]} for i in range(n)])}
    cols.update({f"c{k}": pa.array([i * k for i in range(n)], pa.int32()) for k in range(110)})
    lakelog.write_table(path, pa.table(cols), partition_by=["p"])
    deleted = {}
    for rel in lakelog.Table(path).files():
        ids = pq.read_table(os.path.join(path, rel), columns=["id"]).column("id").to_pylist()
        deleted[rel] = [r for r, i in enumerate(ids) if i % 7 == 0]
    _add_deletion_vectors(path, deleted)
    df = spark_ext.read(spark, path)
    assert "Batched: false" in df._jdf.queryExecution().executedPlan().toString()
    got = sorted((r.id, r.p, r.nested.b[1], r.c109) for r in df.collect())
    assert got == [(i, "x" if i % 2 else "y", i + 1, i * 109) for i in range(n) if i % 7]


def test_deletion_vectors_with_row_indexes_past_32_bits(spark, tmp_path):
    """Deleted row indexes that need 64 bits reach the JVM as 64-bit integers (the others as 32-bit)."""
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": pa.array(range(100), pa.int64())}))
    (rel,) = lakelog.Table(path).files()
    _add_deletion_vectors(path, {rel: [2**32 + 5]})  # (read as 32-bit integers it would be row 5)
    assert sorted(r.id for r in spark_ext.read(spark, path).collect()) == list(range(100))


def test_deletion_vectors_drop_exactly_the_deleted_rows(spark, tmp_path):
    """Files with a deletion vector are scanned by a format that marks each row live or deleted by its
    position (each file found by Spark's form of its path, escapes included), then filtered, with no
    join; files without one are read as they are."""
    path = str(tmp_path / "t")
    n = 3000
    for lo in range(0, n, 500):  # 6 commits x 3 partitions
        ids = range(lo, lo + 500)
        data = pa.table({"id": pa.array(ids, pa.int64()), "p": [f"a b/c=%{i % 3}:é" for i in ids], "x": [i / 7 for i in ids]})
        lakelog.write_table(path, data, partition_by=["p"], mode="append")
    files = lakelog.Table(path).files()
    deleted_ids = set()
    deleted: dict[str, list[int]] = {}
    for k, rel in enumerate(sorted(files)[: len(files) - 1]):  # one file keeps every row
        ids = pq.read_table(os.path.join(path, rel), columns=["id"]).column("id").to_pylist()
        rows = sorted({(k * 37 + j * 11) % len(ids) for j in range(1 + k * 7)} | {0, len(ids) - 1})
        deleted[rel] = rows
        deleted_ids |= {ids[r] for r in rows}
    _add_deletion_vectors(path, deleted)
    live = [i for i in range(n) if i not in deleted_ids]
    df = spark_ext.read(spark, path)
    assert sorted(r.id for r in df.collect()) == live
    assert sorted(r.id for r in df.where("id >= 1000 and p = 'a b/c=%1:é'").select("id").collect()) == [i for i in live if i >= 1000 and i % 3 == 1]
    assert df.count() == len(live)
    assert sorted(r.id for r in spark_ext.read(spark, path, version=5).collect()) == list(range(n))
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "Parquet with deletion vectors" in plan and "Join" not in plan, plan
    # the row-level path's file column still names each row's file
    got = snapshot_frame(spark, Storage(path), lakelog.Table(path).snapshot, file_column="f").select("id", "f").collect()
    assert sorted(r.id for r in got) == live and len({r.f for r in got}) == len(files)


def test_row_level_changes_on_spark_read_files_with_deletion_vectors_without_their_deleted_rows(spark, tmp_path):
    """LakelogTable's delete and update read candidates through the native path: a file with a
    deletion vector is rewritten whole without its deleted rows (never resurrecting them)."""
    from spark_ext import LakelogTable

    path = str(tmp_path / "t")
    shutil.copytree(os.path.join(DATA, "basic-dv-no-checkpoint"), path)
    live = sorted(r["id"] for r in json.load(open(os.path.join(DATA, "expected", "basic-dv-no-checkpoint.json")))["rows"])
    t = LakelogTable.forPath(spark, path)
    t.delete("id = 5")
    t.update("id = 6", {"id": "60"})
    want = sorted([i for i in live if i != 5 and i != 6] + ([60] if 6 in live else []))
    assert sorted(lakelog.read_table(path).column("id").to_pylist()) == want
    assert sorted(r.id for r in spark_ext.read(spark, path).collect()) == want


def test_widened_columns_read_as_their_new_types_partition_values_included(spark, tmp_path):
    """Files and partition values written before a type widening (a date partition now timestamp_ntz,
    its values logged as '2024-01-01') read as the wider types, as lakelog reads them."""
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({
        "d": pa.array([dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2024, 1, 1)], pa.date32()),
        "i": pa.array([1, -2, 2**31 - 1], pa.int32()), "f": pa.array([1.5, 0.1, None], pa.float32()), "n": pa.array([3, -4, 5], pa.int16()),
        "s": pa.array([{"x": 1}, None, {"x": -128}], pa.struct([("x", pa.int8())])),
    }), partition_by=["d"], configuration={"delta.enableTypeWidening": "true"})
    t = lakelog.Table(path)
    for column, to in (("d", "timestamp_ntz"), ("i", "long"), ("f", "double"), ("n", "decimal(12,2)"), ("s.x", "int")):
        t.alter_column_type(column, to)
    lakelog.write_table(path, pa.table({
        "d": pa.array([dt.datetime(2024, 1, 1, 6, 30)], pa.timestamp("us")), "i": pa.array([2**40], pa.int64()), "f": [0.25],
        "n": pa.array([decimal.Decimal("1234567890.12")], pa.decimal128(12, 2)), "s": pa.array([{"x": 2**20}], pa.struct([("x", pa.int32())])),
    }))
    df = spark_ext.read(spark, path)
    assert df.schema.simpleString() == "struct<d:timestamp_ntz,i:bigint,f:double,n:decimal(12,2),s:struct<x:int>>"
    _same(df, lakelog.read_table(path))
    assert sorted(r.i for r in df.filter("d = timestamp_ntz'2024-01-01 00:00:00'").collect()) == [1, 2**31 - 1]
    assert sorted(r.i for r in df.filter("d < timestamp_ntz'2024-01-01 12:00:00'").collect()) == [1, 2**31 - 1, 2**40]

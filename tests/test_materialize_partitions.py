"""materializePartitionColumns: every new data file also holds the partition columns (after the data
columns, without stats), on every write path; readers take partition values from the log, as Delta
and delta-rs do, even when a file's copy disagrees."""

from __future__ import annotations

import os
import shutil

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder

import lakelog
from lakelog.errors import CommitConflictError

FEATURE = "materializePartitionColumns"
ENABLE = {"delta.enableMaterializePartitionColumnsFeature": "true"}
DATA = os.path.join(os.path.dirname(__file__), "data")


def _rows(ids, ps):
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([f"v{i}" for i in ids]), "p": pa.array(ps, pa.string())})


def _sorted(rows):
    return sorted(rows, key=lambda r: (r["id"], str(r["p"])))


def _delta_rows(path):
    t = pa.table(QueryBuilder().register("t", DeltaTable(path)).execute("SELECT * FROM t").read_all())
    return _sorted(t.to_pylist())


def _check_files(path, partition="p"):
    """Every live file holds the partition column with its logged value (by physical name), and no stats for it."""
    t = lakelog.Table(path)
    assert t.files(), "no files"
    for add in t.snapshot.files.values():
        key = next(iter(add.partition_values))
        column = pq.read_table(os.path.join(path, add.relative_path)).column(key).to_pylist()
        assert set(column) == {add.partition_values[key]}, (add.path, column)
        assert key not in orjson.loads(add.stats)["minValues"]
    return t


@pytest.mark.parametrize("mapping", ["none", "name"])
def test_every_python_write_path_materializes(tmp_path, mapping):
    path = str(tmp_path / "t")
    lakelog.write_table(path, _rows([1, 2, 3], ["a", "b", None]), partition_by=["p"],
                        configuration={**ENABLE, "delta.columnMapping.mode": mapping})
    assert FEATURE in lakelog.Table(path).protocol.writer_features
    steps = [
        lambda: lakelog.write_table(path, _rows([4, 5], ["a", "c"])),
        lambda: lakelog.Table(path).update({"v": "'u'"}, "id = 2"),
        lambda: lakelog.Table(path).delete("id = 4"),
        lambda: lakelog.Table(path).merge(_rows([1, 6], ["a", "d"]), "target.id = source.id")
        .when_matched_update_all().when_not_matched_insert_all().execute(),
        lambda: lakelog.write_table(path, _rows([7], ["b"]), mode="overwrite", predicate="p = 'b'"),
        lambda: lakelog.write_table(path, _rows([8], ["c"]), mode="overwrite", partition_overwrite="dynamic"),
        lambda: lakelog.write_table(path, _rows([9], ["a"])),
        lambda: lakelog.Table(path).optimize(),
    ]
    for step in steps:
        step()
        _check_files(path)
        assert _delta_rows(path) == _sorted(lakelog.read_table(path).to_pylist())
    assert _sorted(lakelog.read_table(path).to_pylist()) == _sorted(
        [{"id": 1, "v": "v1", "p": "a"}, {"id": 3, "v": "v3", "p": None}, {"id": 6, "v": "v6", "p": "d"},
         {"id": 7, "v": "v7", "p": "b"}, {"id": 8, "v": "v8", "p": "c"}, {"id": 9, "v": "v9", "p": "a"}])


def test_enabling_on_an_existing_table_and_the_best_effort_property(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, _rows([1], ["a"]), partition_by=["p"], configuration={"delta.writePartitionColumnsToParquet": "true"})
    assert lakelog.Table(path).protocol.writer_features is None  # the property alone needs no feature
    _check_files(path)
    lakelog.Table(path).set_properties({"delta.writePartitionColumnsToParquet": "false"})
    lakelog.write_table(path, _rows([2], ["b"]))
    plain = [a for a in lakelog.Table(path).snapshot.files.values() if a.partition_values["p"] == "b"]
    assert pq.read_schema(os.path.join(path, plain[0].relative_path)).names == ["id", "v"]
    lakelog.Table(path).set_properties(ENABLE)  # as Delta: lists the feature on an existing table
    lakelog.Table(path).set_properties({"delta.enableMaterializePartitionColumnsFeature": "false"})
    assert FEATURE in lakelog.Table(path).protocol.writer_features  # listed it stays
    lakelog.write_table(path, _rows([3], ["b"]), mode="overwrite", partition_overwrite="dynamic")
    _check_files(path)
    assert _delta_rows(path) == _sorted(lakelog.read_table(path).to_pylist()) == _sorted(
        [{"id": 1, "v": "v1", "p": "a"}, {"id": 3, "v": "v3", "p": "b"}])


def test_a_write_planned_before_the_feature_was_listed_conflicts(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, _rows([1], ["a"]), partition_by=["p"])
    plan = lakelog.plan_write(path, _rows([2], ["b"]).schema)
    adds = plan.write(_rows([2], ["b"]))
    lakelog.Table(path).set_properties(ENABLE)
    with pytest.raises(CommitConflictError, match="materializePartitionColumns"):
        plan.commit(adds)
    assert lakelog.read_table(path).num_rows == 1


def test_kernel_table_takes_writes_with_the_column(tmp_path):
    path = str(tmp_path / "t")
    shutil.copytree(os.path.join(DATA, "partitioned_with_materialize_feature"), path)
    before = lakelog.read_table(path)
    lakelog.write_table(path, before.slice(0, 2))
    lakelog.Table(path).delete("number = 1")
    new = [a for a in lakelog.Table(path).snapshot.files.values() if not a.path.endswith(".c000.snappy.parquet")]
    assert new and all("letter" in pq.read_schema(os.path.join(path, a.relative_path)).names for a in new)
    for a in new:
        assert set(pq.read_table(os.path.join(path, a.relative_path)).column("letter").to_pylist()) == {a.partition_values["letter"]}
    got = sorted(lakelog.read_table(path).to_pylist(), key=lambda r: (r["number"], str(r["letter"])))
    theirs = pa.table(QueryBuilder().register("t", DeltaTable(path)).execute("SELECT * FROM t").read_all()).to_pylist()
    assert got == sorted(theirs, key=lambda r: (r["number"], str(r["letter"])))
    assert [r["number"] for r in got] == [2, 2, 3, 4, 5, 6]


def _disagree(path, value):
    """Rewrite the file of partition a so that its p column says ``value``; fix its logged size."""
    log = os.path.join(path, "_delta_log", f"{0:020d}.json")
    actions = [orjson.loads(line) for line in open(log, "rb").read().splitlines()]
    for a in actions:
        if "add" in a and a["add"]["partitionValues"]["p"] == "a":
            f = os.path.join(path, a["add"]["path"])
            t = pq.read_table(f)
            pq.write_table(t.set_column(t.schema.get_field_index("p"), "p", pa.array([value] * t.num_rows)), f)
            a["add"]["size"] = os.path.getsize(f)
    with open(log, "wb") as out:
        out.write(b"\n".join(orjson.dumps(a) for a in actions) + b"\n")


def test_the_logged_partition_value_wins_over_the_files(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, _rows([1, 2, 3], ["a", "a", "b"]), partition_by=["p"],
                        configuration={**ENABLE, "delta.enableDeletionVectors": "true"})
    _disagree(path, "zz")
    t = lakelog.Table(path)
    assert _sorted(t.to_pyarrow().to_pylist()) == _delta_rows(path)
    assert [r["id"] for r in _sorted(t.to_pyarrow(filters=[("p", "=", "a")]).to_pylist())] == [1, 2]
    assert t.to_pyarrow(filters=[("p", "=", "zz")]).num_rows == 0
    assert t.to_pyarrow(filters=[("id", "=", 1)]).to_pylist() == [{"id": 1, "v": "v1", "p": "a"}]
    t.delete("id = 2")  # a deletion vector on that file: read through the file reader
    t.update({"v": "'u'"}, "p = 'b'")
    expected = [{"id": 1, "v": "v1", "p": "a"}, {"id": 3, "v": "u", "p": "b"}]
    assert _sorted(lakelog.read_table(path).to_pylist()) == _delta_rows(path) == expected
    assert lakelog.Table(path).delete("p = 'zz'")["num_deleted_rows"] == 0
    assert lakelog.Table(path).delete("p = 'a'")["num_deleted_rows"] == 1
    assert _sorted(lakelog.read_table(path).to_pylist()) == _delta_rows(path) == expected[1:]


def test_spark_appends_and_row_level_tasks_materialize(spark, table_path):
    from spark_ext import LakelogTable

    # (with deletion vectors the updated rows are written by Spark's own tasks; copy-on-write rewrites
    # run lakelog's row-level rewrite in them)
    lakelog.write_table(table_path, _rows([1, 2], ["a", "b"]), partition_by=["p"], configuration={**ENABLE, "delta.enableDeletionVectors": "true"})
    # ('' is logged as null, as Spark logs it: the files' copy is null too)
    spark.createDataFrame([(3, "v3", "c"), (4, "v4", ""), (5, "v5", "")], "id long, v string, p string").write.format("lakelog").mode("append").save(table_path)
    LakelogTable.forPath(spark, table_path).update("id = 1 OR id = 4", {"v": "'u'"})
    _check_files(table_path)
    assert _delta_rows(table_path) == _sorted(lakelog.read_table(table_path).to_pylist()) == _sorted(
        [{"id": 1, "v": "u", "p": "a"}, {"id": 2, "v": "v2", "p": "b"}, {"id": 3, "v": "v3", "p": "c"}, {"id": 4, "v": "u", "p": None},
         {"id": 5, "v": "v5", "p": None}])


def test_the_files_copy_holds_what_the_log_says(tmp_path):
    """An empty string or binary partition value is null in the log (as Spark logs it): the copy in the
    file is null too, on every write path, so whatever reads the file's columns (as Iceberg readers do)
    sees the rows deltalake reads from the log."""
    path = str(tmp_path / "t")

    def rows(ids, s, b):
        return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([f"v{i}" for i in ids]), "s": pa.array(s, pa.string()), "b": pa.array(b, pa.binary())})

    def theirs():
        t = pa.table(QueryBuilder().register("t", DeltaTable(path)).execute("SELECT id, s, b FROM t").read_all())
        return {r["id"]: (r["s"], r["b"]) for r in t.to_pylist()}

    def check():
        t = lakelog.Table(path)
        name = t.snapshot.column_mapping.physical_name
        seen = {}
        for add in t.snapshot.files.values():
            f = pq.read_table(os.path.join(path, add.relative_path))
            for i, s, b in zip(*(f.column(name(c)).to_pylist() for c in ("id", "s", "b"))):
                seen[i] = (s, b)
        assert seen == theirs()

    lakelog.write_table(path, rows([1, 2, 3], ["", "x", None], [b"", b"y", b""]), partition_by=["s", "b"],
                        configuration={**ENABLE, "delta.columnMapping.mode": "name"})
    steps = [
        lambda: None,
        lambda: lakelog.write_table(path, rows([4, 5], ["", "x"], [b"", b""])),
        lambda: lakelog.Table(path).update({"v": "'u'"}, "id = 1"),
        lambda: lakelog.Table(path).delete("id = 4"),
        lambda: lakelog.Table(path).merge(rows([2, 6], ["", ""], [b"", None]), "target.id = source.id")
        .when_matched_update_all().when_not_matched_insert_all().execute(),
        lambda: lakelog.write_table(path, rows([7], [""], [b""]), mode="overwrite", predicate="id >= 6"),
        lambda: lakelog.write_table(path, rows([8], [""], [b"z"]), mode="overwrite", partition_overwrite="dynamic"),
        lambda: lakelog.Table(path).optimize(),
    ]
    for step in steps:
        step()
        check()
    assert theirs() == {1: (None, None), 2: (None, None), 3: (None, None), 5: ("x", None), 7: (None, None), 8: (None, b"z")}

"""LakelogTable delete, update and merge on deletion-vector tables (merge-on-read on Spark).

Each operation runs on Spark on one copy of a table and through the Python row-level API on another:
the commits must have the same shape (the same files removed and re-added with a DV, one DV file, no
data file rewritten) and the same operation and metrics; the rows are checked against pandas, and
every version is read by lakelog and by deltalake's SQL engine (QueryBuilder, which applies DVs).
"""

from __future__ import annotations

import json
import os
import shutil

import deltalake
import pandas as pd
import pyarrow as pa
import pytest

import lakelog
from lakelog.actions import decode_path
from lakelog.errors import CommitConflictError

from spark_ext import LakelogTable
from tests.dv_tables import COLS, assert_same, check_all_versions, frame, log_entries, start_dv_table


def check_every_version(path: str, expected: dict[int, pd.DataFrame]) -> None:
    """``check_all_versions``, and ``expected`` names every version of the table."""
    assert sorted(expected) == list(range(lakelog.Table(path).version + 1))
    check_all_versions(path, expected)


def _shape(path: str, version: int) -> dict:
    """What a commit did, comparable across two copies of a table: operation, metrics (but time),
    removed paths, re-added paths (with the DV's cardinality), number of new data files, and
    number of DV files it references."""
    actions = log_entries(path, version)
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    metrics = {k: v for k, v in info["operationMetrics"].items() if k != "executionTimeMs"}
    removes = {decode_path(a["remove"]["path"]) for a in actions if "remove" in a}
    adds = [a["add"] for a in actions if "add" in a]
    readded = {decode_path(a["path"]): a["deletionVector"]["cardinality"] for a in adds if a.get("deletionVector")}
    dv_files = {a["deletionVector"]["pathOrInlineDv"] for a in adds if a.get("deletionVector")}
    for a in adds:
        if a.get("deletionVector"):
            stats = json.loads(a["stats"])
            assert stats["tightBounds"] is False
            assert stats["numRecords"] == pq_rows(path, a["path"])  # physical rows
    return {"operation": info["operation"], "metrics": metrics, "removed": removes, "readded": readded,
            "new_files": sum(1 for a in adds if not a.get("deletionVector") or decode_path(a["path"]) not in removes),
            "dv_files": len(dv_files)}


def pq_rows(path: str, rel: str) -> int:
    import pyarrow.parquet as pq

    return pq.ParquetFile(os.path.join(path, decode_path(rel))).metadata.num_rows


def _twins(tmp_path, partitioned: bool) -> tuple[str, str, pd.DataFrame]:
    spark_path, py_path = str(tmp_path / "spark"), str(tmp_path / "python")
    df = start_dv_table(spark_path, partitioned)
    shutil.copytree(spark_path, py_path)
    return spark_path, py_path, df


@pytest.mark.parametrize("partitioned", [True, False], ids=["partitioned", "unpartitioned"])
def test_spark_delete_marks_deletion_vectors_as_the_python_path(spark, tmp_path, partitioned):
    path, py_path, df = _twins(tmp_path, partitioned)
    t, py = LakelogTable.forPath(spark, path), lakelog.Table(py_path)
    expected = {0: df[df.id < 100], 1: df[df.id < 200], 2: df[df.id < 300], 3: df}
    before = set(lakelog.Table(path).snapshot.files)

    m = t.delete("x > 90 or s is null")
    want = df[~((df.x > 90) | df.s.isna())]
    expected[m["version"]] = want
    assert m == {**py.delete("x > 90 or s is null"), "version": m["version"]}
    assert m["num_deleted_rows"] == len(df) - len(want) and m["num_added_files"] == m["num_removed_files"] == m["num_copied_rows"] == 0
    shape = _shape(path, m["version"])
    assert shape == _shape(py_path, m["version"])
    assert shape["operation"] == "DELETE" and shape["new_files"] == 0 and shape["dv_files"] == 1
    assert shape["readded"].keys() == shape["removed"] == before  # every file got a DV, none was rewritten
    assert shape["metrics"]["numDeletionVectorsAdded"] == str(len(before))

    # a second delete on the same files: their DVs are the union of the old and new deleted rows
    m = t.delete("id % 10 in (1, 2)")
    want = want[~(want.id % 10).isin([1, 2])]
    expected[m["version"]] = want
    assert m == {**py.delete("id % 10 in (1, 2)"), "version": m["version"]}
    shape = _shape(path, m["version"])
    assert shape == _shape(py_path, m["version"])
    assert shape["metrics"]["numDeletionVectorsUpdated"] == str(len(before)) and shape["metrics"]["numDeletionVectorsAdded"] == "0"
    for rel, card in shape["readded"].items():
        assert card == pq_rows(path, rel) - len(want[want.id.isin(_ids_of(path, rel))])

    # a delete taking every remaining row of the files of the first append: those files are only removed
    m = t.delete("id < 100")
    want = want[want.id >= 100]
    expected[m["version"]] = want
    assert m == {**py.delete("id < 100"), "version": m["version"]}
    shape = _shape(path, m["version"])
    assert shape == _shape(py_path, m["version"])
    assert shape["readded"] == {} and shape["new_files"] == 0 and len(shape["removed"]) == (2 if partitioned else 1)
    assert shape["metrics"]["numDeletionVectorsRemoved"] == str(len(shape["removed"]))

    # a condition on partition columns only removes whole files without reading their rows, as lakelog.Table.delete
    cond = "p = 'b'" if partitioned else "id >= 300"
    m = t.delete(cond)
    want = want[want.p != "b"] if partitioned else want[want.id < 300]
    expected[m["version"]] = want
    assert m == {**py.delete(cond), "version": m["version"]}
    shape = _shape(path, m["version"])
    assert shape == _shape(py_path, m["version"])
    assert shape["readded"] == {} and shape["dv_files"] == 0 and len(shape["removed"]) == (3 if partitioned else 1)
    check_every_version(path, expected)


def _ids_of(path: str, rel: str) -> list[int]:
    """The ids physically in a data file (deleted rows included)."""
    import pyarrow.parquet as pq

    return pq.read_table(os.path.join(path, rel), columns=["id"]).column("id").to_pylist()


@pytest.mark.parametrize("partitioned", [True, False], ids=["partitioned", "unpartitioned"])
def test_spark_update_marks_deletion_vectors_and_writes_only_updated_rows(spark, tmp_path, partitioned):
    path, py_path, df = _twins(tmp_path, partitioned)
    t, py = LakelogTable.forPath(spark, path), lakelog.Table(py_path)
    expected = {0: df[df.id < 100], 1: df[df.id < 200], 2: df[df.id < 300], 3: df}

    m = t.update("x < 20", {"x": "x * 2 + 1", "s": "concat(coalesce(s, ''), '_u')"})
    want = df.copy()
    hit = want.x < 20
    want.loc[hit, "s"] = want.loc[hit, "s"].fillna("") + "_u"
    want.loc[hit, "x"] = want.loc[hit, "x"] * 2 + 1
    expected[m["version"]] = want
    py_m = py.update({"x": "x * 2 + 1", "s": "concat(coalesce(s, ''), '_u')"}, "x < 20")
    assert (m["num_updated_rows"], m["num_removed_files"], m["num_copied_rows"]) == (int(hit.sum()), 0, 0)
    assert {k: v for k, v in m.items() if k != "num_added_files"} == {k: v for k, v in py_m.items() if k != "num_added_files"}
    shape, py_shape = _shape(path, m["version"]), _shape(py_path, m["version"])
    assert shape["operation"] == "UPDATE" and shape["dv_files"] == 1 and shape["new_files"] >= 1
    assert shape["readded"] == py_shape["readded"] and shape["removed"] == py_shape["removed"] == set(shape["readded"])
    strip = ("numAddedFiles",)  # Spark writes the updated rows in as many files as tasks
    assert {k: v for k, v in shape["metrics"].items() if k not in strip} == {k: v for k, v in py_shape["metrics"].items() if k not in strip}
    new_rows = sum(pq_rows(path, a["add"]["path"]) for a in log_entries(path, m["version"]) if "add" in a and not a["add"].get("deletionVector"))
    assert new_rows == int(hit.sum())  # only the updated rows were written

    # moving rows to another partition, with no condition on some rows of a file
    m = t.update("p = 'a' and id % 5 = 0", {"p": "'b'"})
    want = want.copy()
    want.loc[(want.p == "a") & (want.id % 5 == 0), "p"] = "b"
    expected[m["version"]] = want
    check_every_version(path, expected)


def test_spark_merge_on_a_dv_table_as_the_python_path(spark, tmp_path):
    path, py_path, df = _twins(tmp_path, True)
    t = LakelogTable.forPath(spark, path)
    rows = [(1, "a", -1, "m1"), (2, "b", -2, "m2"), (3, "a", -3, "m3"), (1000, "b", -4, "n1"), (1001, "a", -5, "n2")]
    source = pd.DataFrame(rows, columns=COLS)
    m = (t.alias("target").merge(spark.createDataFrame(source).alias("source"), "target.id = source.id")
         .whenMatchedDelete("source.x = -2")
         .whenMatchedUpdate(set={"x": "source.x", "s": "source.s"})
         .whenNotMatchedInsertAll()
         .whenNotMatchedBySourceUpdate("target.id >= 380 and target.id < 390", {"s": "'gone soon'"})
         .whenNotMatchedBySourceDelete("target.id >= 390")
         .execute())
    py_m = (lakelog.Table(py_path).merge(pa.Table.from_pandas(source, preserve_index=False), "target.id = source.id")
            .when_matched_delete("source.x = -2")
            .when_matched_update({"x": "source.x", "s": "source.s"})
            .when_not_matched_insert_all()
            .when_not_matched_by_source_update({"s": "'gone soon'"}, "target.id >= 380 and target.id < 390")
            .when_not_matched_by_source_delete("target.id >= 390")
            .execute())
    want = df.set_index("id")
    want.loc[[1, 3], "x"] = [-1, -3]
    want.loc[[1, 3], "s"] = ["m1", "m3"]
    want.loc[list(range(380, 390)), "s"] = "gone soon"
    want = pd.concat([want.drop(index=[2] + list(range(390, 400))).reset_index(), source.iloc[3:]])
    assert (m["num_target_rows_updated"], m["num_target_rows_deleted"], m["num_target_rows_inserted"], m["num_target_rows_copied"]) == (12, 11, 2, 0)
    skip = ("num_target_files_added", "version")
    assert {k: v for k, v in m.items() if k not in skip} == {k: v for k, v in py_m.items() if k not in skip}
    shape, py_shape = _shape(path, m["version"]), _shape(py_path, m["version"])
    assert shape["operation"] == "MERGE" and shape["dv_files"] == 1
    assert shape["readded"] == py_shape["readded"] and shape["removed"] == py_shape["removed"] == set(shape["readded"])
    strip = ("numTargetFilesAdded",)
    assert {k: v for k, v in shape["metrics"].items() if k not in strip} == {k: v for k, v in py_shape["metrics"].items() if k not in strip}
    new_rows = sum(pq_rows(path, a["add"]["path"]) for a in log_entries(path, m["version"]) if "add" in a and not a["add"].get("deletionVector"))
    assert new_rows == 12 + 2  # the updated and inserted rows, nothing copied

    # a second merge touching the same files unions their DVs; an unconditional matched delete
    # with a duplicated source key is allowed, as in Delta
    dup = spark.createDataFrame([(5,), (5,), (6,)], "id long")
    m2 = t.alias("target").merge(dup.alias("source"), "target.id = source.id").whenMatchedDelete().execute()
    assert m2["num_target_rows_deleted"] == 2 and m2["num_target_rows_copied"] == 0
    assert _shape(path, m2["version"])["metrics"]["numDeletionVectorsUpdated"] == "2"
    check_every_version(path, {0: df[df.id < 100], 1: df[df.id < 200], 2: df[df.id < 300], 3: df, 4: want,
                               5: want[~want.id.isin([5, 6])]})


def test_spark_merge_on_a_dv_table_conflicts_with_a_concurrent_python_delete(spark, tmp_path):
    path = str(tmp_path / "t")
    df = start_dv_table(path, True)
    t = LakelogTable.forPath(spark, path)
    source = spark.createDataFrame([(0, "a", 50, "m")], "id long, p string, x long, s string")
    entries = set(os.listdir(path))
    plan = t.alias("t").merge(source.alias("s"), "t.id = s.id").whenMatchedUpdateAll().prepare()
    written = set(os.listdir(path)) - entries
    assert any(f.startswith("deletion_vector_") for f in written)  # the merge's DV file, uncommitted
    lakelog.Table(path).delete("id = 2")  # a Python delete on the file the merge marks, between its read and commit
    after = frame(lakelog.read_table(path))
    with pytest.raises(CommitConflictError):
        plan.commit()
    assert_same(after, df[df.id != 2])
    assert not (written & set(os.listdir(path)))  # the merge's DV file is gone (the partition's new file too)


def test_spark_delete_on_a_dv_table_is_idempotent_with_txn(spark, tmp_path):
    path = str(tmp_path / "t")
    df = start_dv_table(path, False)
    t = LakelogTable.forPath(spark, path)
    m = t.delete("x > 50", txnAppId="job", txnVersion=3)
    again = t.delete("x > 10", txnAppId="job", txnVersion=3)  # a replay: nothing is done
    assert again["version"] == m["version"] == 4 and again["num_deleted_rows"] == 0
    assert lakelog.Table(path).version == 4
    check_every_version(path, {0: df[df.id < 100], 1: df[df.id < 200], 2: df[df.id < 300], 3: df, 4: df[df.x <= 50]})


def test_spark_row_level_changes_on_a_dv_table_with_column_mapping_and_schema_evolution(spark, tmp_path):
    """Merge-on-read through the rename projection of column mapping, an update without condition (every
    row of every file marked, so the files go), and a merge that adds a column: lakelog and deltalake's
    SQL engine read the expected rows at every version."""
    path = str(tmp_path / "t")
    df = start_dv_table(path, True, n=200)
    lakelog.Table(path).set_properties({"delta.columnMapping.mode": "name"})
    lakelog.Table(path).rename_column("s", "label")
    t = LakelogTable.forPath(spark, path)
    want = df.rename(columns={"s": "label"}).assign(extra=None)

    m = t.delete("label is null or x > 80")
    want = want[~(want.label.isna() | (want.x > 80))]
    assert m["num_copied_rows"] == 0 and m["num_added_files"] == 0
    assert any(a.deletion_vector is not None for a in lakelog.Table(path).snapshot.files.values())

    src = spark.createDataFrame([(2, "a", 5, "m2", "e2"), (1000, "b", 2, "m1000", "e1000")], "id long, p string, x long, label string, extra string")
    m = t.alias("t").merge(src.alias("s"), "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().withSchemaEvolution().execute()
    assert (m["num_target_rows_updated"], m["num_target_rows_inserted"], m["num_target_rows_copied"]) == (1, 1, 0)
    want = want.set_index("id")
    want.loc[2, ["x", "label", "extra"]] = [5, "m2", "e2"]
    want = pd.concat([want.reset_index(), pd.DataFrame([{"id": 1000, "p": "b", "x": 2, "label": "m1000", "extra": "e1000"}])])

    version_before = lakelog.Table(path).version
    m = t.update(set={"x": "x + 1"})  # no condition: every row is marked, so every file goes, and all rows are written anew
    assert m["num_updated_rows"] == len(want) and m["num_copied_rows"] == 0
    actions = log_entries(path, m["version"])
    assert not any("add" in a and a["add"].get("deletionVector") for a in actions)  # no file is left with a DV
    want = want.assign(x=want.x + 1)

    cols = ["id", "p", "x", "label", "extra"]
    expect = want[cols].sort_values("id").reset_index(drop=True)
    got = lakelog.read_table(path).to_pandas()[cols].sort_values("id").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, expect, check_dtype=False)
    peer = pa.table(deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path)).execute("select id, p, x, label, extra from t").read_all())
    pd.testing.assert_frame_equal(peer.to_pandas()[cols].sort_values("id").reset_index(drop=True), expect, check_dtype=False)
    before = lakelog.read_table(path, version=version_before).to_pandas()
    assert sorted(before.x.tolist()) == sorted((want.x - 1).tolist())  # time travel shows the rows before the update

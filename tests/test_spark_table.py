"""spark_ext.LakelogTable on a real local Spark session: the DeltaTable-style handle, and delete, update
and merge run on Spark, checked against rows computed independently (plain Python / pandas), with
deltalake reading every version and the commits compared with the Python row-level API's."""

import json
import glob
import os
import shutil

import deltalake
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

import lakelog
import lakelog.read.scan
from lakelog.errors import CommitConflictError, MultipleSourceMatchesError, PredicateError, TableNotFoundError

from spark_ext import LakelogTable
from tests.row_tracking_tables import shape_configuration, tracked

COLS = ["id", "p", "x", "s"]


def _base() -> pd.DataFrame:
    """20 rows over partitions a/b/c, with NULLs in x and s (three-valued logic matters)."""
    rows = []
    for i in range(20):
        rows.append({"id": i, "p": "abc"[i % 3], "x": None if i % 7 == 3 else i * 1.5, "s": None if i % 5 == 4 else f"n{i}"})
    return pd.DataFrame(rows, columns=COLS).astype({"id": "int64", "x": "float64"})


def _make(path: str, df: pd.DataFrame | None = None, files: int = 2) -> pd.DataFrame:
    df = _base() if df is None else df
    schema = pa.schema([("id", pa.int64()), ("p", pa.string()), ("x", pa.float64()), ("s", pa.string())])
    chunk = -(-len(df) // files)
    for i in range(files):  # several files per partition, so untouched files exist
        part = pa.Table.from_pandas(df.iloc[i * chunk:(i + 1) * chunk], schema=schema, preserve_index=False)
        lakelog.write_table(path, part, mode="append", partition_by="p")
    return df


def _rows(records) -> list[tuple]:
    out = []
    for r in records:
        out.append(tuple(None if (isinstance(v, float) and pd.isna(v)) else v for v in (r[c] for c in COLS)))
    return sorted(out, key=lambda t: tuple((v is None, v) for v in t))


def _frame_rows(df: pd.DataFrame) -> list[tuple]:
    return _rows(df.astype(object).where(df.notna(), None).to_dict("records"))


def _table_rows(path: str, version: int | None = None) -> list[tuple]:
    return _rows(lakelog.Table(path, version=version).to_pyarrow().to_pylist())


def _check_versions(path: str) -> None:
    """deltalake reads every version as lakelog does."""
    latest = lakelog.Table(path).version
    for v in range(latest + 1):
        dl = deltalake.DeltaTable(path, version=v).to_pyarrow_table()
        assert _rows(dl.to_pylist()) == _table_rows(path, v), f"version {v}"


def _data_files(path: str) -> set[str]:
    return {os.path.relpath(f, path) for f in glob.glob(os.path.join(path, "**", "*.parquet"), recursive=True)}


def _last_commit(path: str) -> dict:
    return lakelog.Table(path).history(1)[0]


# ---------------------------------------------------------------- the handle

def test_handle_reads_history_detail_and_maintenance(spark, tmp_path):
    path = str(tmp_path / "t")
    with pytest.raises(TableNotFoundError):
        LakelogTable.forPath(spark, path)
    assert not LakelogTable.isLakelogTable(spark, path)
    df = _make(path, files=3)
    assert LakelogTable.isLakelogTable(spark, path)
    t = LakelogTable.forPath(spark, path)
    assert _rows(r.asDict() for r in t.toDF().collect()) == _frame_rows(df)
    aliased = t.alias("t").toDF().where("t.p = 'a'").select("t.id")
    assert sorted(r.id for r in aliased.collect()) == sorted(df[df.p == "a"].id)

    hist = t.history().collect()
    assert [h.version for h in hist] == [2, 1, 0] and [h.operation for h in hist] == ["WRITE", "WRITE", "CREATE TABLE"]
    assert hist[0].operationParameters["mode"] == "Append" and hist[0].readVersion == 1 and hist[0].isBlindAppend is True
    assert hist[0].timestamp == lakelog.Table(path).history(1)[0]["timestamp"].replace(tzinfo=None)  # the session is UTC
    assert [h.version for h in t.history(1).collect()] == [2]

    detail = t.detail().collect()[0]
    snap = lakelog.Table(path).snapshot
    assert detail.format == "delta" and detail.partitionColumns == ["p"] and detail.numFiles == len(snap.files)
    assert detail.sizeInBytes == sum(a.size for a in snap.files.values()) and detail.minReaderVersion == 1

    files_before = len(snap.files)
    out = t.optimize().executeCompaction().collect()[0]
    assert int(out.metrics["numFilesRemoved"]) == files_before and len(lakelog.Table(path).snapshot.files) == 3  # one per partition
    assert _last_commit(path)["operation"] == "OPTIMIZE"
    assert _table_rows(path) == _frame_rows(df)
    assert t.vacuum().count() == 0  # inside the default retention nothing goes

    t.delete("p = 'a'")
    restored = t.restoreToVersion(2).collect()[0]
    assert restored.numRestoredFiles > 0 and _table_rows(path) == _frame_rows(df)
    ts = lakelog.Table(path).history()[-1]["timestamp"]  # version 0's time
    t.restoreToTimestamp(ts.isoformat())
    assert _table_rows(path) == _table_rows(path, 0)
    assert _last_commit(path)["operation"] == "RESTORE"
    _check_versions(path)


# ---------------------------------------------------------------- delete / update

def test_delete_on_spark_matches_python_api(spark, tmp_path):
    path, twin = str(tmp_path / "t"), str(tmp_path / "twin")
    df = _make(path)
    shutil.copytree(path, twin)
    t = LakelogTable.forPath(spark, path)

    cond = "p = 'a' and x > 10"  # NULL x is not deleted
    m = t.delete(cond)
    expected = df[~((df.p == "a") & (df.x > 10))]
    assert _table_rows(path) == _frame_rows(expected)
    py = lakelog.Table(twin).delete(cond)
    for k in ("num_deleted_rows", "num_removed_files", "num_copied_rows", "version"):
        assert m[k] == py[k], k
    ours, theirs = _last_commit(path), _last_commit(twin)
    assert ours["operation"] == theirs["operation"] == "DELETE"
    assert ours["operationParameters"] == theirs["operationParameters"] == {"predicate": '["p = \'a\' and x > 10"]'}
    assert set(ours["operationMetrics"]) == set(theirs["operationMetrics"])
    assert {k: v for k, v in ours["operationMetrics"].items() if k not in ("executionTimeMs", "numAddedFiles")} == {
        k: v for k, v in theirs["operationMetrics"].items() if k not in ("executionTimeMs", "numAddedFiles")}

    # a Column condition with a Spark function; files of other partitions are left alone
    before = lakelog.Table(path).snapshot.files
    m = t.delete(F.expr("upper(s) like 'N1%'"))
    expected = expected[~expected.s.fillna("").str.upper().str.startswith("N1")]
    assert _table_rows(path) == _frame_rows(expected) and m["num_deleted_rows"] > 0
    after = lakelog.Table(path).snapshot.files
    assert len(set(before) - set(after)) == m["num_removed_files"]

    # a partition predicate removes whole files without rewriting them
    m = t.delete("p = 'b'")
    assert m["num_added_files"] == 0 and m["num_copied_rows"] == 0
    expected = expected[expected.p != "b"]
    assert _table_rows(path) == _frame_rows(expected)

    v = lakelog.Table(path).version
    assert t.delete("x > 1000")["num_removed_files"] == 0 and lakelog.Table(path).version == v  # nothing to do: no commit
    with pytest.raises(PredicateError):
        t.delete("no_such_column = 1")
    assert lakelog.Table(path).version == v
    assert t.delete()["num_deleted_rows"] == len(expected)
    assert _table_rows(path) == []
    _check_versions(path)


def test_spark_row_level_changes_in_partition_directories_with_escapes(spark, tmp_path):
    """Partition values that Hive-escape in directory names (``p=a%2Fb``): Spark reports the file it read
    URI-encoded (``p=a%252Fb``), which must still name the file the operation planned."""
    path = str(tmp_path / "t")
    df = _base()
    df["p"] = df["p"].map({"a": "a/b", "b": "c%d", "c": "e f"})
    _make(path, df, files=1)
    t = LakelogTable.forPath(spark, path)
    t.delete("x > 20")  # rewrites a file in every partition
    expected = df[~(df.x > 20)]
    assert _table_rows(path) == _frame_rows(expected)
    t.update("s = 'n1'", {"x": "-1.0"})
    expected.loc[expected.s == "n1", "x"] = -1.0
    assert _table_rows(path) == _frame_rows(expected)
    _check_versions(path)


def test_spark_copy_on_write_delete_of_files_another_engine_gave_deletion_vectors(spark, tmp_path):
    """Spark's row positions are physical; the rewriting tasks read each file without its DV's rows:
    the rows deleted are exactly those selected, in files that already lost others."""
    path, twin = str(tmp_path / "t"), str(tmp_path / "twin")
    data = pa.table({"id": list(range(300)), "g": [f"g{i % 7}" for i in range(300)], "x": [float(i % 11) for i in range(300)]})
    for k in range(3):
        lakelog.write_table(path, data.slice(100 * k, 100), configuration={"delta.enableDeletionVectors": "true"} if k == 0 else None)
    lakelog.Table(path).delete("id % 3 = 0")  # deletion vectors in every file
    lakelog.Table(path).set_properties({"delta.enableDeletionVectors": "false"})  # from here on: copy-on-write
    assert all(a.deletion_vector is not None for a in lakelog.Table(path).snapshot.files.values())
    shutil.copytree(path, twin)
    m = LakelogTable.forPath(spark, path).delete("x > 7 OR g = 'g2'")
    py = lakelog.Table(twin).delete("x > 7 OR g = 'g2'")
    for k in ("num_deleted_rows", "num_removed_files", "num_copied_rows"):
        assert m[k] == py[k], k
    ours = lakelog.read_table(path).sort_by("id")
    assert ours.equals(lakelog.read_table(twin).sort_by("id"))
    assert ours.column("id").to_pylist() == [i for i in range(300) if i % 3 and not (i % 11 > 7 or i % 7 == 2)]
    assert all(a.deletion_vector is None for a in lakelog.Table(path).snapshot.files.values())
    peer = pa.table(deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path)).execute("select id, g, x from t order by id").read_all())
    assert peer.to_pylist() == ours.to_pylist()


def test_update_on_spark_moves_partitions_and_follows_three_valued_logic(spark, tmp_path):
    path, twin = str(tmp_path / "t"), str(tmp_path / "twin")
    df = _make(path)
    shutil.copytree(path, twin)
    t = LakelogTable.forPath(spark, path)

    m = t.update("x > 20", {"x": "x * 2", "s": "concat(coalesce(s, ''), '_u')"})
    py = lakelog.Table(twin).update({"x": "x * 2", "s": "concat(coalesce(s, ''), '_u')"}, "x > 20")
    hit = df.x > 20  # NULL x: not updated
    expected = df.copy()
    expected.loc[hit, "x"] = df.x[hit] * 2
    expected.loc[hit, "s"] = df.s[hit].fillna("") + "_u"
    assert _table_rows(path) == _frame_rows(expected) == _table_rows(twin)
    assert m["num_updated_rows"] == py["num_updated_rows"] == int(hit.sum())
    assert m["num_removed_files"] == py["num_removed_files"] and m["num_copied_rows"] == py["num_copied_rows"]
    ours, theirs = _last_commit(path), _last_commit(twin)
    assert ours["operation"] == "UPDATE" and ours["operationParameters"] == theirs["operationParameters"]
    assert set(ours["operationMetrics"]) == set(theirs["operationMetrics"])

    # updating the partition column moves rows (keyword form, Column values)
    m = t.update(condition=F.col("id") < 3, set={"p": F.lit("z")})
    expected.loc[expected.id < 3, "p"] = "z"
    assert _table_rows(path) == _frame_rows(expected) and m["num_updated_rows"] == 3
    assert any(f.startswith("p=z/") for f in lakelog.Table(path).files())

    m = t.update({"id": "id + 100"})  # Delta's update(set) form: every row
    expected["id"] += 100
    assert _table_rows(path) == _frame_rows(expected) and m["num_updated_rows"] == len(expected)
    with pytest.raises(PredicateError):
        t.update("id > 0", {"nope": "1"})
    _check_versions(path)


# ---------------------------------------------------------------- merge

def _model_merge(target: list[dict], source: list[dict], on, matched, not_matched, by_source) -> list[dict]:
    """Delta's merge semantics in plain Python: each clause is (condition(t, s) or None, action, values(t, s))."""
    out = []
    matched_sources = set()
    for t in target:
        hits = [i for i, s in enumerate(source) if on(t, s)]
        matched_sources.update(hits)
        if hits:
            assert len(hits) == 1
            s = source[hits[0]]
            for cond, action, values in matched:
                if cond is None or cond(t, s) is True:
                    if action == "update":
                        out.append({**t, **values(t, s)})
                    break
            else:
                out.append(t)
        else:
            for cond, action, values in by_source:
                if cond is None or cond(t, None) is True:
                    if action == "update":
                        out.append({**t, **values(t, None)})
                    break
            else:
                out.append(t)
    for i, s in enumerate(source):
        if i in matched_sources:
            continue
        for cond, _, values in not_matched:
            if cond is None or cond(None, s) is True:
                out.append({c: None for c in COLS} | values(None, s))
                break
    return out


def _gt(a, b):
    return None if a is None or b is None else a > b


def test_merge_every_clause_type_against_a_model(spark, tmp_path):
    path, twin = str(tmp_path / "t"), str(tmp_path / "twin")
    df = _make(path, files=3)
    shutil.copytree(path, twin)
    target = df.astype(object).where(df.notna(), None).to_dict("records")
    src_rows = [
        {"id": 0, "p": "a", "x": 100.0, "s": "u0"},     # matched, s.x > t.x: update
        {"id": 1, "p": "b", "x": 0.5, "s": "d1"},       # matched, s.x <= t.x, s = 'd1': delete
        {"id": 3, "p": "a", "x": 7.0, "s": None},       # matched, t.x NULL: both conditions NULL -> last clause (unconditional) updates
        {"id": 4, "p": "b", "x": 2.0, "s": "keep"},     # matched, s.x <= t.x, no clause applies -> unchanged
        {"id": 50, "p": "c", "x": 1.0, "s": "i50"},     # not matched, x > 0: insert first clause
        {"id": 51, "p": "a", "x": -1.0, "s": "i51"},    # not matched: second insert clause (values)
        {"id": 52, "p": "b", "x": None, "s": "i52"},    # not matched, x NULL: second clause
    ]
    source = spark.createDataFrame(pd.DataFrame(src_rows, columns=COLS).astype({"x": "float64"}))
    t = LakelogTable.forPath(spark, path).alias("t")
    m = (
        t.merge(source.alias("s"), "t.id = s.id")
        .whenMatchedUpdate("s.x > t.x", {"x": "s.x", "s": "concat(s.s, '!')"})
        .whenMatchedDelete("s.s = 'd1'")
        .whenMatchedUpdate(condition=F.expr("t.x is null"), set={"x": F.expr("s.x + 1")})
        .whenNotMatchedInsertAll("s.x > 0")
        .whenNotMatchedInsert(values={"id": "s.id", "p": "'n'", "s": "upper(s.s)"})
        .whenNotMatchedBySourceDelete("t.x > 25")
        .whenNotMatchedBySourceUpdate(set={"s": "'nmbs'"})
        .execute()
    )
    expected = _model_merge(
        target, src_rows, lambda a, b: a["id"] == b["id"],
        matched=[
            (lambda a, b: _gt(b["x"], a["x"]), "update", lambda a, b: {"x": b["x"], "s": None if b["s"] is None else b["s"] + "!"}),
            (lambda a, b: b["s"] == "d1" if b["s"] is not None else None, "delete", None),
            (lambda a, b: a["x"] is None, "update", lambda a, b: {"x": b["x"] + 1}),
        ],
        not_matched=[
            (lambda a, b: _gt(b["x"], 0), "insert", lambda a, b: dict(b)),
            (None, "insert", lambda a, b: {"id": b["id"], "p": "n", "s": b["s"].upper()}),
        ],
        by_source=[(lambda a, b: _gt(a["x"], 25), "delete", None), (None, "update", lambda a, b: {"s": "nmbs"})],
    )
    assert _table_rows(path) == _rows(expected)
    n_deleted = sum(1 for r in target if r["id"] not in {s["id"] for s in src_rows} and _gt(r["x"], 25)) + 1
    assert m["num_target_rows_deleted"] == n_deleted and m["num_target_rows_inserted"] == 3 and m["num_source_rows"] == 7
    assert m["num_output_rows"] == len(expected)

    # the Python API on the twin: same rows, metrics and commit parameters
    py = (
        lakelog.Table(twin).merge(pd.DataFrame(src_rows, columns=COLS).astype({"x": "float64"}), "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update({"x": "s.x", "s": "concat(s.s, '!')"}, "s.x > t.x")
        .when_matched_delete("s.s = 'd1'")
        .when_matched_update({"x": "s.x + 1"}, "t.x is null")
        .when_not_matched_insert_all("s.x > 0")
        .when_not_matched_insert({"id": "s.id", "p": "'n'", "s": "upper(s.s)"})
        .when_not_matched_by_source_delete("t.x > 25")
        .when_not_matched_by_source_update({"s": "'nmbs'"})
        .execute()
    )
    assert _table_rows(twin) == _table_rows(path)
    for k in ("num_source_rows", "num_target_rows_inserted", "num_target_rows_updated", "num_target_rows_deleted",
              "num_target_rows_copied", "num_output_rows", "num_target_files_removed", "version"):
        assert m[k] == py[k], k
    ours, theirs = _last_commit(path), _last_commit(twin)
    assert ours["operation"] == theirs["operation"] == "MERGE"
    assert set(ours["operationParameters"]) == set(theirs["operationParameters"])
    assert ours["operationParameters"]["predicate"] == theirs["operationParameters"]["predicate"]
    assert ours["operationParameters"]["notMatchedBySourcePredicates"] == theirs["operationParameters"]["notMatchedBySourcePredicates"]
    assert set(ours["operationMetrics"]) == set(theirs["operationMetrics"])
    _check_versions(path)


@pytest.mark.parametrize("limit", [None, 2])
@pytest.mark.parametrize("conditional", [False, True])
def test_merge_inserts_from_the_matched_keys_as_the_python_api(spark, tmp_path, monkeypatch, limit, conditional):
    """A merge on one key equality: the job that finds the matches (the rewriting job itself, or with a
    conditional matched clause the counting job) brings back the matched source keys and the inserts
    are the source rows whose key is not among them (NULL keys and repeated unmatched keys included);
    past the limit (here 2; the counting job collects only with at most half the limit of distinct
    source keys) the inserts come from the target again. All give the Python API's rows and metrics."""
    import spark_ext.dml.jobs

    if limit is not None:
        monkeypatch.setattr(spark_ext.dml.jobs, "MATCHED_KEYS_LIMIT", limit)
    base = str(tmp_path / "base")
    _make(base, files=3)
    rows = [{"id": i, "p": "a", "x": float(i), "s": f"src{i}"} for i in (1, 4, 7, 1000, 1000, 1001)]
    rows += [{"id": None, "p": "b", "x": 0.5, "s": "null key"}, {"id": None, "p": "b", "x": 0.25, "s": "null key 2"}]
    src = pd.DataFrame(rows, columns=COLS).astype({"id": "Int64"})
    path, twin = str(tmp_path / "t"), str(tmp_path / "twin")
    shutil.copytree(base, path)
    shutil.copytree(base, twin)
    spark_src = spark.createDataFrame(src.astype(object).where(src.notna(), None), "id long, p string, x double, s string")
    m = (LakelogTable.forPath(spark, path).alias("t").merge(spark_src.alias("s"), "t.id = s.id")
         .whenMatchedUpdate("s.x <> 4" if conditional else None, set={"x": "s.x + t.x"})
         .whenNotMatchedInsert("s.s <> 'src1001'", values={"id": "s.id", "p": "s.p", "s": "s.s"}).execute())
    py = (lakelog.Table(twin).merge(pa.Table.from_pandas(src, preserve_index=False), "t.id = s.id", source_alias="s", target_alias="t")
          .when_matched_update({"x": "s.x + t.x"}, "s.x <> 4" if conditional else None)
          .when_not_matched_insert({"id": "s.id", "p": "s.p", "s": "s.s"}, "s.s <> 'src1001'").execute())
    assert _table_rows(path) == _table_rows(twin)
    assert m["num_target_rows_inserted"] == 4 and m["num_target_rows_updated"] == (2 if conditional else 3)
    for k in ("num_source_rows", "num_target_rows_inserted", "num_target_rows_updated", "num_target_rows_copied", "num_output_rows"):
        assert m[k] == py[k], k


def test_merge_with_unconditional_matched_clauses_rewritten_by_lakelog_tasks_as_the_python_api(spark, tmp_path):
    """Unconditional matched clauses (at most one source row per target row, each applying one): Spark's
    tasks rewrite the touched files with lakelog, given the changed rows' positions and new values."""
    base = str(tmp_path / "base")
    _make(base, files=3)
    src = pd.DataFrame([{"id": i, "p": "a" if i % 2 else "b", "x": float(i) / 3, "s": f"src{i}"} for i in range(0, 90, 4)], columns=COLS)
    for matched in ("update", "delete"):  # (an unconditional matched delete alone: Spark's rewrite, for comparison)
        path, twin = str(tmp_path / f"t-{matched}"), str(tmp_path / f"twin-{matched}")
        shutil.copytree(base, path)
        shutil.copytree(base, twin)
        t = LakelogTable.forPath(spark, path).alias("t")
        b = t.merge(spark.createDataFrame(src).alias("s"), "t.id = s.id")
        b = b.whenMatchedUpdate(set={"x": "s.x + t.x", "s": "concat(coalesce(t.s, ''), s.s)"}) if matched == "update" else b.whenMatchedDelete()
        m = b.whenNotMatchedInsertAll().whenNotMatchedBySourceDelete("t.x > 40").whenNotMatchedBySourceUpdate(set={"s": "'nmbs'"}).execute()
        pb = lakelog.Table(twin).merge(src, "t.id = s.id", source_alias="s", target_alias="t")
        pb = pb.when_matched_update({"x": "s.x + t.x", "s": "concat(coalesce(t.s, ''), s.s)"}) if matched == "update" else pb.when_matched_delete()
        py = pb.when_not_matched_insert_all().when_not_matched_by_source_delete("t.x > 40").when_not_matched_by_source_update({"s": "'nmbs'"}).execute()
        assert _table_rows(path) == _table_rows(twin)
        for k in ("num_target_rows_inserted", "num_target_rows_updated", "num_target_rows_deleted", "num_target_rows_copied",
                  "num_output_rows", "num_target_files_removed"):
            assert m[k] == py[k], (matched, k)
        _check_versions(path)


def test_merge_upsert_all_schema_evolution_and_unaliased_source(spark, tmp_path):
    path = str(tmp_path / "t")
    df = _make(path)
    t = LakelogTable.forPath(spark, path)
    ups = spark.createDataFrame([(1, "b", 9.0, "up", "e1"), (99, "c", 1.0, "new", "e99")], "id long, p string, x double, s string, extra string")
    with pytest.raises(PredicateError):  # the source lacks a table column and evolution is off
        t.alias("t").merge(ups.drop("s").alias("s"), "t.id = s.id").whenMatchedUpdateAll().execute()
    m = t.alias("t").merge(ups.alias("s"), "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().withSchemaEvolution().execute()
    assert m["num_target_rows_updated"] == 1 and m["num_target_rows_inserted"] == 1
    got = lakelog.Table(path)
    assert got.schema.names == COLS + ["extra"]
    rows = {r["id"]: r for r in got.to_pyarrow().to_pylist()}
    assert rows[1] == {"id": 1, "p": "b", "x": 9.0, "s": "up", "extra": "e1"} and rows[99]["extra"] == "e99"
    assert rows[0]["extra"] is None and len(rows) == len(df) + 1

    # the session setting turns evolution on too
    spark.conf.set("spark.databricks.delta.schema.autoMerge.enabled", "true")
    try:
        more = spark.createDataFrame([(5, "c", 0.0, "x", "e5", 7)], "id long, p string, x double, s string, extra string, more int")
        t.alias("t").merge(more.alias("s"), "t.id = s.id").whenMatchedUpdateAll().execute()
    finally:
        spark.conf.unset("spark.databricks.delta.schema.autoMerge.enabled")
    rows = {r["id"]: r for r in lakelog.Table(path).to_pyarrow().to_pylist()}
    assert lakelog.Table(path).schema.names == COLS + ["extra", "more"] and rows[5]["more"] == 7 and rows[6]["more"] is None
    # an unaliased source is referred to by its column names
    m = t.alias("t").merge(spark.createDataFrame([(2, "zz")], "key long, label string"), "t.id = key").whenMatchedUpdate(set={"s": "label"}).execute()
    assert m["num_target_rows_updated"] == 1 and {r["id"]: r["s"] for r in lakelog.Table(path).to_pyarrow().to_pylist()}[2] == "zz"
    _check_versions(path)


def test_merge_multiple_matches_fail_and_commit_nothing(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(path)
    t = LakelogTable.forPath(spark, path)
    v, files = lakelog.Table(path).version, _data_files(path)
    dup = spark.createDataFrame([(3, 1.0), (3, 2.0), (5, 1.0)], "id long, x double")
    with pytest.raises(MultipleSourceMatchesError):
        t.alias("t").merge(dup.alias("s"), "t.id = s.id").whenMatchedUpdate(set={"x": "s.x"}).whenNotMatchedInsert(values={"id": "s.id"}).execute()
    assert lakelog.Table(path).version == v and _data_files(path) == files
    # Two source rows match id 3, but the clause condition holds for one: not ambiguous (as Delta).
    m = t.alias("t").merge(dup.alias("s"), "t.id = s.id").whenMatchedUpdate("s.x = 2.0", set={"x": "s.x"}).execute()
    assert m["num_target_rows_updated"] == 1 and {r["id"]: r["x"] for r in lakelog.Table(path).to_pyarrow().to_pylist()}[3] == 2.0
    v, files = lakelog.Table(path).version, _data_files(path)
    with pytest.raises(PredicateError, match="nope"):  # Spark's analysis error, as lakelog's typed error
        t.alias("t").merge(dup.alias("s"), "t.nope = s.id").whenMatchedDelete().execute()
    assert lakelog.Table(path).version == v and _data_files(path) == files
    # Delta's exception: an unconditional delete as the only matched clause may match a row many times
    m = t.alias("t").merge(dup.alias("s"), "t.id = s.id").whenMatchedDelete().execute()
    assert m["num_target_rows_deleted"] == 2 and sorted(r["id"] for r in lakelog.Table(path).to_pyarrow().to_pylist()) == [
        i for i in range(20) if i not in (3, 5)]
    with pytest.raises(PredicateError):
        t.merge(dup, "id = 1").whenMatchedDelete().whenMatchedDelete("true").execute()  # only the last clause may omit its condition
    # without matched clauses several matches are fine, and a matched row is kept once
    m = t.alias("t").merge(dup.alias("s"), "t.id = s.id - 4").whenNotMatchedBySourceUpdate("t.id < 10", {"s": "'gone?'"}).execute()
    rows = {r["id"]: r for r in lakelog.Table(path).to_pyarrow().to_pylist()}
    assert len(rows) == 18 and len(lakelog.Table(path).to_pyarrow()) == 18  # ids 0..19 without 3 and 5, no duplicates
    assert rows[1]["s"] == "n1" and rows[0]["s"] == "gone?" and rows[12]["s"] == "n12"  # 1 = 5 - 4 matched; 0 unmatched
    assert m["num_target_rows_updated"] == 7  # ids 0, 2, 4, 6, 7, 8, 9
    _check_versions(path)


def test_merge_touching_one_percent_of_files_rewrites_only_those(spark, tmp_path):
    path = str(tmp_path / "t")
    # 100 files in 10 partitions, ids clustered per file: file i holds ids 100*i .. 100*i+99
    for i in range(100):
        ids = list(range(100 * i, 100 * i + 100))
        lakelog.write_table(path, pa.table({"id": ids, "p": [f"p{i // 10}"] * 100, "x": [0.0] * 100}), mode="append", partition_by="p")
    before = lakelog.Table(path).snapshot.files
    t = LakelogTable.forPath(spark, path)
    source = spark.createDataFrame([(4210 + k, "p4", 1.0) for k in range(5)] + [(1_000_000, "p4", 2.0)], "id long, p string, x double")
    m = t.alias("t").merge(source.alias("s"), "t.id = s.id").whenMatchedUpdate(set={"x": "s.x"}).whenNotMatchedInsertAll().execute()
    assert m["num_target_files_removed"] == 1 and m["num_target_rows_updated"] == 5 and m["num_target_rows_inserted"] == 1
    after = lakelog.Table(path).snapshot.files
    removed = set(before) - set(after)
    assert len(removed) == 1 and before[removed.pop()].partition_values == {"p": "p4"}
    x = {r["id"]: r["x"] for r in lakelog.Table(path).to_pyarrow(filters=[("p", "=", "p4")]).to_pylist()}
    assert all(x[4210 + k] == 1.0 for k in range(5)) and x[1_000_000] == 2.0 and x[4209] == 0.0
    # the Python path prunes and rewrites the same single file
    py = lakelog.Table(path).merge(source.where("id < 1000000").toPandas(), "target.id = source.id").when_matched_update({"x": "source.x + 1"}).execute()
    gone = set(after) - set(lakelog.Table(path).snapshot.files)
    assert py["num_target_files_removed"] == len(gone) >= 1 and all(after[f].partition_values == {"p": "p4"} for f in gone)


def test_merge_conflicting_concurrent_delete_fails_and_loses_nothing(spark, tmp_path):
    path = str(tmp_path / "t")
    df = _make(path)
    t = LakelogTable.forPath(spark, path)
    source = spark.createDataFrame([(0, "a", 50.0, "m")], "id long, p string, x double, s string")
    files_before = _data_files(path)
    plan = t.alias("t").merge(source.alias("s"), "t.id = s.id").whenMatchedUpdateAll().prepare()
    written = _data_files(path) - files_before
    assert written  # the merge's new files exist, uncommitted
    lakelog.Table(path).delete("p = 'a' and id = 6")  # a Python delete of a file the merge read, between read and commit
    after_delete = _table_rows(path)
    with pytest.raises(CommitConflictError):
        plan.commit()
    assert _table_rows(path) == after_delete == _frame_rows(df[df.id != 6])
    assert not (written & _data_files(path))  # the merge's files are gone

    # a concurrent append to another partition does not conflict: the merge commits after it
    plan = t.alias("t").merge(source.alias("s"), "t.id = s.id").whenMatchedUpdateAll().prepare()
    lakelog.write_table(path, pa.table({"id": [77], "p": ["c"], "x": [1.0], "s": ["late"]}), mode="append")
    m = plan.commit()
    rows = {r["id"]: r for r in lakelog.Table(path).to_pyarrow().to_pylist()}
    assert m["num_target_rows_updated"] == 1 and rows[0]["x"] == 50.0 and rows[77]["s"] == "late" and 6 not in rows
    _check_versions(path)


def test_foreach_batch_merge_replayed_by_spark_commits_once(spark, tmp_path):
    path, incoming, checkpoint = str(tmp_path / "t"), str(tmp_path / "in"), str(tmp_path / "ck")
    _make(path)
    os.makedirs(incoming)
    pd.DataFrame({"id": [1, 100], "p": ["b", "a"], "x": [10.0, 20.0], "s": ["u1", "i100"]}).to_parquet(os.path.join(incoming, "0.parquet"))
    calls = []

    def upsert(batch, batch_id):
        calls.append(batch_id)
        (LakelogTable.forPath(spark, path).alias("t").merge(batch.alias("s"), "t.id = s.id")
         .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(txnAppId="cdc-test", txnVersion=batch_id))

    def run():
        q = (spark.readStream.schema("id long, p string, x double, s string").parquet(incoming)
             .writeStream.foreachBatch(upsert).option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        q.awaitTermination(120)

    run()
    assert calls == [0]
    merges = [h for h in lakelog.Table(path).history() if h["operation"] == "MERGE"]
    assert len(merges) == 1
    # as after a crash between the batch's commit and Spark's own: Spark replays batch 0
    for name in ("0", ".0.crc"):
        if os.path.exists(os.path.join(checkpoint, "commits", name)):
            os.remove(os.path.join(checkpoint, "commits", name))
    run()
    assert calls == [0, 0]
    assert len([h for h in lakelog.Table(path).history() if h["operation"] == "MERGE"]) == 1
    rows = {r["id"]: r for r in lakelog.Table(path).to_pyarrow().to_pylist()}
    assert rows[1]["x"] == 10.0 and rows[100]["s"] == "i100" and len(rows) == 21
    # Delta's session settings work as well
    spark.conf.set("spark.databricks.delta.write.txnAppId", "cdc-test")
    spark.conf.set("spark.databricks.delta.write.txnVersion", "0")
    try:
        m = LakelogTable.forPath(spark, path).delete("id = 1")
    finally:
        spark.conf.unset("spark.databricks.delta.write.txnAppId")
        spark.conf.unset("spark.databricks.delta.write.txnVersion")
    assert m["num_deleted_rows"] == 0 and 1 in {r["id"] for r in lakelog.Table(path).to_pyarrow().to_pylist()}
    _check_versions(path)


def test_spark_writes_and_row_level_operations_on_a_column_mapping_table(spark, tmp_path):
    """format("lakelog") appends and LakelogTable delete/update/merge on a renamed column-mapping table:
    Spark's tasks write physical names; lakelog and deltalake's SQL engine read the expected rows."""
    path = str(tmp_path / "t")
    df = _make(path)
    lakelog.Table(path).set_properties({"delta.columnMapping.mode": "name"})
    lakelog.Table(path).rename_column("s", "label")
    cols = ["id", "p", "x", "label"]
    spark.createDataFrame([(100, "a", 1.0, "w1"), (101, "d", None, "w2")], "id long, p string, x double, label string") \
        .write.format("lakelog").mode("append").save(path)
    t = LakelogTable.forPath(spark, path)
    t.delete("x > 20")
    t.update("id = 100", {"label": "'upd'"})
    src = spark.createDataFrame([(0, "a", 5.0, "m0", "e0"), (200, "e", 2.0, "m200", "e200")], "id long, p string, x double, label string, extra string")
    t.alias("t").merge(src.alias("s"), "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().withSchemaEvolution().execute()
    want = {}
    for r in df.astype(object).where(df.notna(), None).to_dict("records"):
        want[r["id"]] = {"id": r["id"], "p": r["p"], "x": r["x"], "label": r["s"], "extra": None}
    want[100] = {"id": 100, "p": "a", "x": 1.0, "label": "w1", "extra": None}
    want[101] = {"id": 101, "p": "d", "x": None, "label": "w2", "extra": None}
    want = {k: v for k, v in want.items() if not (v["x"] is not None and v["x"] > 20)}
    want[100]["label"] = "upd"
    want[0] = {"id": 0, "p": "a", "x": 5.0, "label": "m0", "extra": "e0"}
    want[200] = {"id": 200, "p": "e", "x": 2.0, "label": "m200", "extra": "e200"}
    key = lambda r: r["id"]  # noqa: E731
    got = sorted(lakelog.Table(path).to_pyarrow(columns=cols + ["extra"]).to_pylist(), key=key)
    assert got == sorted(want.values(), key=key)
    peer = pa.table(deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path)).execute("select id, p, x, label, extra from t").read_all())
    assert sorted(peer.to_pylist(), key=key) == got
    assert sorted(spark.read.format("lakelog").load(path).toArrow().to_pylist(), key=key) == got
    fields = {f["name"]: f["metadata"]["delta.columnMapping.physicalName"] for f in json.loads(lakelog.Table(path).metadata.schema_string)["fields"]}
    assert fields["label"] == "s" and fields["extra"].startswith("col-")
    for a in lakelog.Table(path).snapshot.files.values():
        assert set(a.partition_values) == {"p"} and set(pq.read_schema(f"{path}/{a.relative_path}").names) <= set(fields.values())


# ---------------------------------------------------------------- writer features

def test_constraints_and_generated_columns_hold_on_every_spark_write_path(spark, tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": pa.array([10, 20, 30], pa.int64())}),
                        generated_columns={"v2": "v * 2"})
    lakelog.Table(path).add_constraint({"v_positive": "v > 0"})
    start = lakelog.Table(path).version
    t = LakelogTable.forPath(spark, path)

    def refused(fn, what="v_positive"):
        with pytest.raises(Exception) as e:
            fn()
        assert what in str(e.value)
        assert lakelog.Table(path).version == start  # nothing committed

    bad = spark.createDataFrame([(4, -1)], "id long, v long")
    refused(lambda: bad.write.format("lakelog").mode("append").save(path))
    refused(lambda: bad.write.format("lakelog").mode("overwrite").option("replaceWhere", "id >= 4").save(path))
    refused(lambda: t.update("id = 1", {"v": "v - 100"}))
    refused(lambda: t.alias("t").merge(bad.alias("s"), "t.id = s.id").whenNotMatchedInsertAll().execute())
    refused(lambda: spark.createDataFrame([(5, 5, 99)], "id long, v long, v2 long").write.format("lakelog").mode("append").save(path), "v2")

    spark.createDataFrame([(4, 40)], "id long, v long").write.format("lakelog").mode("append").save(path)  # v2 computed in the task
    t.update("id = 1", {"v": "v + 1"})  # v2 recomputed
    t.alias("t").merge(spark.createDataFrame([(2, 25), (6, 60)], "id long, v long").alias("s"), "t.id = s.id") \
        .whenMatchedUpdate(set={"v": "s.v"}).whenNotMatchedInsert(values={"id": "s.id", "v": "s.v"}).execute()
    t.delete("id = 3")
    got = sorted((r["id"], r["v"], r["v2"]) for r in lakelog.Table(path).to_pyarrow().to_pylist())
    assert got == [(1, 11, 22), (2, 25, 50), (4, 40, 80), (6, 60, 120)]
    assert sorted((r["id"], r["v2"]) for r in deltalake.DeltaTable(path).to_pyarrow_table().to_pylist()) == [(1, 22), (2, 50), (4, 80), (6, 120)]


def test_spark_writes_meet_table_expressions_with_spark_semantics(spark, tmp_path):
    # dayofweek counts Saturday as 7 in Spark (6 in DuckDB): the CHECK and the generated column say so on Spark paths too
    import datetime as dt

    path = str(tmp_path / "t")
    sunday, saturday = dt.date(2024, 1, 7), dt.date(2024, 1, 6)
    lakelog.write_table(path, pa.table({"d": pa.array([sunday], pa.date32())}), generated_columns={"dow": "dayofweek(d)"})
    lakelog.Table(path).add_constraint({"no_saturday": "dayofweek(d) <> 7"})
    with pytest.raises(Exception, match="no_saturday"):
        spark.createDataFrame([(saturday,)], "d date").write.format("lakelog").mode("append").save(path)
    with pytest.raises(Exception, match="no_saturday"):
        LakelogTable.forPath(spark, path).update("true", {"d": "date_sub(d, 1)"})
    spark.createDataFrame([(dt.date(2024, 1, 5),)], "d date").write.format("lakelog").mode("append").save(path)
    assert sorted((r["d"], r["dow"]) for r in lakelog.Table(path).to_pyarrow().to_pylist()) == [(dt.date(2024, 1, 5), 6), (sunday, 1)]


def test_identity_values_from_parallel_spark_tasks_are_unique(spark, tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"name": ["seed"]}), identity_columns=["id"])
    spark.range(300).selectExpr("concat('n', id) AS name").repartition(3).write.format("lakelog").mode("append").save(path)
    t = LakelogTable.forPath(spark, path)
    src = spark.range(290, 320).selectExpr("concat('n', id) AS name").repartition(2)
    t.alias("t").merge(src.alias("s"), "t.name = s.name").whenMatchedUpdate(set={"name": "upper(s.name)"}).whenNotMatchedInsertAll().execute()
    rows = lakelog.Table(path).to_pyarrow().to_pylist()
    ids = [r["id"] for r in rows]
    assert len(rows) == 321 and len(set(ids)) == 321 and None not in ids
    assert {r["name"]: r["id"] for r in rows}["seed"] == 1
    mark = json.loads(lakelog.Table(path).snapshot.metadata.schema_string)["fields"][1]["metadata"]["delta.identity.highWaterMark"]
    assert mark == max(ids)
    lakelog.write_table(path, pa.table({"name": ["after"]}))
    assert {r["name"]: r["id"] for r in lakelog.Table(path).to_pyarrow().to_pylist()}["after"] == mark + 1


def test_spark_paths_never_update_or_give_generated_always_identity_values(spark, tmp_path):
    # tests/data/checkpoint-v2-table (Databricks, id GENERATED ALWAYS, mark 44): LakelogTable's update and
    # merge, and DataFrame writes, refuse what would set ids (a merge had given two rows id 39).
    from lakelog.errors import IdentityColumnError

    path = str(tmp_path / "t")
    shutil.copytree(os.path.join(os.path.dirname(__file__), "data", "checkpoint-v2-table"), path)
    version = lakelog.Table(path).version
    t = LakelogTable.forPath(spark, path)
    full = spark.createDataFrame([(39, "Alice", None), (777780, "Zed", None)], "id long, name string, created_at timestamp")
    attempts = [
        ("DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED", lambda: t.update("id = 38", {"id": "id + 1"})),
        ("DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED", lambda: t.update(None, {"ID": F.lit(1)})),
        ("DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED",
         lambda: t.alias("t").merge(full.alias("s"), "t.name = s.name").whenMatchedUpdate(set={"t.id": "s.id"}).execute()),
        ("DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED", lambda: t.alias("t").merge(full.alias("s"), "t.name = s.name").whenMatchedUpdateAll().execute()),
        ("DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED",
         lambda: t.alias("t").merge(full.alias("s"), "t.name = s.name").whenNotMatchedInsert(values={"name": "s.name", "id": "s.id"}).execute()),
        ("DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED",
         lambda: t.alias("t").merge(full.alias("s"), "t.name = s.name").whenNotMatchedInsertAll().execute()),
    ]
    for error_class, attempt in attempts:
        with pytest.raises(IdentityColumnError) as e:
            attempt()
        assert e.value.error_class == error_class
    with pytest.raises(Exception, match="DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED"):
        full.write.format("lakelog").mode("append").save(path)
    assert lakelog.Table(path).version == version
    t.alias("t").merge(full.drop("id").alias("s"), "t.name = s.name").whenNotMatchedInsertAll().execute()
    rows = lakelog.Table(path).to_pyarrow().to_pylist()
    ids = [r["id"] for r in rows]
    (zed,) = [r["id"] for r in rows if r["name"] == "Zed"]  # (drawn by its task: beyond 44, not dense)
    assert len(ids) == len(set(ids)) == 45 and zed > 44
    assert json.loads(lakelog.Table(path).snapshot.metadata.schema_string)["fields"][0]["metadata"]["delta.identity.highWaterMark"] == zed


def test_spark_update_tasks_never_draw_the_same_identity_values(spark, tmp_path):
    # Rows with NULL in a column generated by default (another engine may write them) get values when an
    # update rewrites them; the files are rewritten by several Spark tasks, each drawing by its partition id.
    path = str(tmp_path / "t")
    for part in range(4):  # four files, rewritten by separate tasks
        lakelog.write_table(path, pa.table({"name": [f"n{part}-{i}" for i in range(3)], "id": pa.array([None] * 3, pa.int64())}))
    log = os.path.join(path, "_delta_log")
    meta = [json.loads(line) for line in open(os.path.join(log, f"{0:020d}.json")) if '"metaData"' in line][0]["metaData"]
    schema = json.loads(meta["schemaString"])
    schema["fields"][1]["metadata"] = {"delta.identity.start": 1, "delta.identity.step": 1, "delta.identity.allowExplicitInsert": True}
    meta["schemaString"] = json.dumps(schema)
    with open(os.path.join(log, f"{4:020d}.json"), "x") as f:  # (as another engine declares it; writer version 6)
        f.write(json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 6}}) + "\n" + json.dumps({"metaData": meta}) + "\n")
    LakelogTable.forPath(spark, path).update(None, {"name": "upper(name)"})
    ids = [r["id"] for r in lakelog.Table(path).to_pyarrow().to_pylist()]
    assert None not in ids and len(set(ids)) == len(ids) == 12
    mark = json.loads(lakelog.Table(path).snapshot.metadata.schema_string)["fields"][1]["metadata"]["delta.identity.highWaterMark"]
    assert mark == max(ids)


def test_change_feed_reads_on_spark_and_spark_row_level_operations_record_it(spark, tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": [1, 2, 3], "p": ["a", "b", "a"]}), partition_by="p",
                        configuration={"delta.enableChangeDataFeed": "true"})
    t = lakelog.Table(path)
    t.update({"id": "id * 10"}, "id = 2")
    t.delete("id = 3")
    spark.createDataFrame([(4, "b")], "id long, p string").write.format("lakelog").mode("append").save(path)
    df = spark.read.format("lakelog").option("readChangeFeed", "true").option("startingVersion", 1).load(path)
    assert df.columns == ["id", "p", "_change_type", "_commit_version", "_commit_timestamp"]
    got = sorted((r["id"], r["_change_type"], r["_commit_version"]) for r in df.collect())
    assert got == [(2, "update_preimage", 1), (3, "delete", 2), (4, "insert", 3), (20, "update_postimage", 1)]
    ours = sorted((r["id"], r["_change_type"], r["_commit_version"]) for r in t.changes(1).to_pylist())
    assert got == ours
    ranged = spark.read.format("lakelog").option("readChangeFeed", "true").option("startingVersion", 2) \
        .option("endingVersion", 2).load(path).collect()
    assert [(r["id"], r["_change_type"]) for r in ranged] == [(3, "delete")]
    with pytest.raises(Exception, match="startingVersion"):
        spark.read.format("lakelog").option("readChangeFeed", "true").load(path).collect()
    # delete, update and merge on Spark record their changes
    lt = LakelogTable.forPath(spark, path)
    lt.update("id = 1", {"id": "id + 100"})
    lt.delete("id = 4")
    assert sorted((r["id"], r["_change_type"]) for r in t.changes(4).to_pylist()) == [
        (1, "update_preimage"), (4, "delete"), (101, "update_postimage")]
    src = spark.createDataFrame([(101, "a"), (20, "z"), (7, "b")], "id long, p string")
    lt.alias("t").merge(src.alias("s"), "t.id = s.id").whenMatchedDelete("s.p = 'a'").whenMatchedUpdateAll() \
        .whenNotMatchedInsertAll().execute()
    v = lakelog.Table(path).version
    assert sorted((r["id"], r["p"], r["_change_type"]) for r in t.changes(v).to_pylist()) == [
        (7, "b", "insert"), (20, "b", "update_preimage"), (20, "z", "update_postimage"), (101, "a", "delete")]
    assert sorted(r["id"] for r in lakelog.Table(path).to_pyarrow().to_pylist()) == [7, 20]
    theirs = pa.table(deltalake.DeltaTable(path).load_cdf(starting_version=1).read_all())
    assert sorted((r["id"], r["_change_type"], r["_commit_version"]) for r in theirs.to_pylist()) == sorted(
        (r["id"], r["_change_type"], r["_commit_version"]) for r in lakelog.Table(path).changes(1).to_pylist())


def test_spark_delete_and_update_record_the_change_feed_with_deletion_vectors_and_column_mapping(spark, tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": [1, 2, 3, 4], "p": ["a", "a", "b", "b"]}), partition_by="p",
                        configuration={"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": "true",
                                       "delta.columnMapping.mode": "name"})
    lt = LakelogTable.forPath(spark, path)
    lt.delete("id = 2")
    lt.delete("p = 'b'")  # whole files
    lt.update("id = 1", {"p": "'c'"})  # moves the row to another partition
    got = sorted((r["_commit_version"], r["_change_type"], r["id"], r["p"]) for r in lakelog.Table(path).changes(1).to_pylist())
    assert got == [(1, "delete", 2, "a"), (2, "delete", 3, "b"), (2, "delete", 4, "b"),
                   (3, "update_postimage", 1, "c"), (3, "update_preimage", 1, "a")]
    assert lakelog.Table(path).to_pyarrow().to_pylist() == [{"id": 1, "p": "c"}]


def test_a_streaming_cdc_pipeline_keeps_a_target_equal_to_its_source_across_restarts(spark, tmp_path):
    """source table -> readStream readChangeFeed -> foreachBatch merge into a target, restarted between
    changes; the target ends equal to the source (exactly once through the checkpoint)."""
    src, dst, ck = str(tmp_path / "src"), str(tmp_path / "dst"), str(tmp_path / "ck")
    lakelog.write_table(src, pa.table({"id": [1, 2, 3], "v": [10, 20, 30]}), configuration={"delta.enableChangeDataFeed": "true"})
    lakelog.write_table(dst, pa.table({"id": pa.array([], pa.int64()), "v": pa.array([], pa.int64())}))

    def apply(batch_df, batch_id):
        rows = pa.Table.from_pylist([r.asDict() for r in batch_df.collect()]) if not batch_df.isEmpty() else None
        if rows is None:
            return
        for v in sorted(set(rows.column("_commit_version").to_pylist())):  # versions in order; one change per key each
            changes = rows.filter(pa.compute.equal(rows.column("_commit_version"), v))
            changes = changes.filter(pa.compute.not_equal(changes.column("_change_type"), "update_preimage"))
            (lakelog.Table(dst).merge(changes.select(["id", "v", "_change_type"]), "target.id = source.id",
                                      app_id="cdc", app_version=batch_id * 10_000 + v)
             .when_matched_delete("source._change_type = 'delete'").when_matched_update({"v": "source.v"})
             .when_not_matched_insert({"id": "source.id", "v": "source.v"}, "source._change_type != 'delete'").execute())

    def run():
        q = (spark.readStream.format("lakelog").option("readChangeFeed", "true").load(src)
             .writeStream.foreachBatch(apply).option("checkpointLocation", ck).trigger(availableNow=True).start())
        q.awaitTermination(120)

    def same():
        key = lambda p: sorted((r["id"], r["v"]) for r in lakelog.Table(p).to_pyarrow().to_pylist())  # noqa: E731
        return key(src) == key(dst)

    run()  # the initial snapshot, as inserts
    assert same()
    t = lakelog.Table(src)
    t.update({"v": "v + 1"}, "id = 2")
    t.delete("id = 1")
    run()
    assert same()
    t.merge(pa.table({"id": [3, 4], "v": [33, 44]}), "target.id = source.id").when_matched_update_all().when_not_matched_insert_all().execute()
    lakelog.write_table(src, pa.table({"id": [5], "v": [50]}))
    run()
    run()  # nothing new: nothing applied twice
    assert same()


def test_spark_creates_a_clustered_table_and_its_files_carry_clustering_stats(spark, tmp_path):
    path = str(tmp_path / "t")
    df = spark.range(2000).selectExpr("id", "cast(id * 7919 % 1000 as long) AS x", "cast(id % 13 as string) AS s")
    df.write.format("lakelog").option("clusterBy", "x").option("maxRecordsPerFile", 500).mode("overwrite").save(path)
    t = lakelog.Table(path)
    assert json.loads(t.snapshot.domains["delta.clustering"].configuration) == {"clusteringColumns": [["x"]]}
    spark.range(2000, 2500).selectExpr("id", "cast(id % 1000 as long) AS x", "'n' AS s").write.format("lakelog").mode("append").save(path)
    t = lakelog.Table(path)
    assert all("x" in json.loads(a.stats)["minValues"] for a in t.snapshot.files.values())
    assert t.optimize(target_size=8 * 1024)["committed"]
    t = lakelog.Table(path)
    assert len(lakelog.read.scan.pruned_files(t.snapshot, [("x", "<", 50)])) <= max(1, 0.2 * len(t.snapshot.files))
    assert t.to_pyarrow().num_rows == 2500


@pytest.mark.parametrize("shape", ["copy-on-write", "deletion vectors + column mapping", "partitioned + feed"])
def test_row_level_changes_on_spark_keep_row_ids(spark, tmp_path, shape):
    """LakelogTable delete, update and merge on a row-tracking table keep every surviving row's id, give
    updated rows the commit's version and new rows fresh ids, as the Python path does; Spark appends
    get ids at commit."""
    path = str(tmp_path / "t")
    conf, partition_by = shape_configuration(shape)
    data = pa.table({"id": pa.array(range(20), pa.int64()), "v": ["a"] * 20, "p": pa.array([i % 2 for i in range(20)], pa.int64())})
    lakelog.write_table(path, data.slice(0, 10), configuration=conf, partition_by=partition_by)
    spark.createDataFrame(data.slice(10).to_pandas()).write.format("lakelog").mode("append").save(path)
    t = LakelogTable.forPath(spark, path)
    before = tracked(path)
    assert sorted(r for r, _ in before.values()) == list(range(20))

    v = t.update("id % 3 = 0", {"v": "'u'"})["version"]
    after = tracked(path)
    assert after == {i: ((before[i][0], v) if i % 3 == 0 else before[i]) for i in before}

    t.delete("id = 4")
    before, after = after, tracked(path)
    assert after == {i: before[i] for i in before if i != 4}

    src = spark.createDataFrame([(1, "m", 1), (100, "n", 0)], "id long, v string, p long")
    v = t.alias("target").merge(src.alias("source"), "target.id = source.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()["version"]
    before, after = after, tracked(path)
    assert after[1] == (before[1][0], v)
    assert after[100][1] == v and after[100][0] > max(r for r, _ in before.values())
    assert {i: after[i] for i in before if i != 1} == {i: before[i] for i in before if i != 1}

    # conditional clauses (the plan that picks, per target row, the source row a clause applies for)
    src = spark.createDataFrame([(2, "x", 0), (3, "y", 1)], "id long, v string, p long")
    v = (t.alias("target").merge(src.alias("source"), "target.id = source.id")
         .whenMatchedUpdate("source.v = 'x'", {"v": "source.v"}).whenNotMatchedBySourceUpdate("target.id = 5", {"v": "'s'"}).execute()["version"])
    before, after = after, tracked(path)
    assert after == {i: ((before[i][0], v) if i in (2, 5) else before[i]) for i in before}
    for a in lakelog.Table(path).snapshot.files.values():  # every file written has its ids
        assert a.base_row_id is not None and a.default_row_commit_version is not None
    ours = sorted(lakelog.read_table(path).to_pylist(), key=lambda r: r["id"])
    theirs = pa.table(deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path)).execute("SELECT * FROM t").read_all())
    assert sorted(theirs.to_pylist(), key=lambda r: r["id"]) == ours

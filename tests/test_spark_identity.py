"""Identity values written by Spark's tasks (the ``format("lakelog")`` data source, SQL INSERT, LakelogTable's
merge and update) on a real local Spark session: unique, on the sequence beyond the high water mark, the
first value of a job its next one, no fixed range burnt per task, overflow refused as a typed error with
nothing committed; RESTORE keeps the newest mark. deltalake reads what is written."""

from __future__ import annotations

import json
import threading

import deltalake
import pyarrow as pa
import pytest

import lakelog
from lakelog.errors import CommitConflictError, IdentityOverflowError
from spark_ext import LakelogTable
from spark_ext.sql import sql

LONG_MAX = (1 << 63) - 1


def _mark(path: str, column: str = "id"):
    field = next(f for f in json.loads(lakelog.Table(path).snapshot.metadata.schema_string)["fields"] if f["name"] == column)
    return field["metadata"].get("delta.identity.highWaterMark")


def _ids(path: str) -> list[int]:
    return sorted(r["id"] for r in lakelog.read_table(path).to_pylist())


def _peer_ids(path: str) -> list[int]:
    return sorted(r["id"] for r in pa.table(deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path))
                                            .execute("SELECT id FROM t").read_all()).to_pylist())


def _on_sequence(ids: list[int], start: int, step: int) -> bool:
    return all((i - start) % step == 0 and (i - start) // step >= 0 for i in ids)


def test_inserts_with_a_large_step_start_at_start_and_many_small_jobs_never_overflow(spark, tmp_path):
    # START WITH 1 INCREMENT BY 2**30: the first INSERT stores 1 (Delta's value; a fixed range of 2**32
    # values per task had given 2**62 + 1, and the second INSERT overflowed). Forty more small jobs of
    # three rows (two tasks each) stay far inside the range, unique and on the sequence.
    path = str(tmp_path / "t")
    step = 1 << 30
    ref = f"lakelog.`{path}`"
    sql(spark, f"CREATE TABLE {ref} (id BIGINT GENERATED ALWAYS AS IDENTITY (START WITH 1 INCREMENT BY {step}), v STRING)")
    sql(spark, f"INSERT INTO {ref} (v) VALUES ('first')")
    assert _ids(path) == [1] and _mark(path) == 1
    for n in range(40):
        sql(spark, f"INSERT INTO {ref} (v) VALUES ('a{n}'), ('b{n}'), ('c{n}')")
    ids = _ids(path)
    assert len(ids) == len(set(ids)) == 121 and _on_sequence(ids, 1, step)
    assert _mark(path) == ids[-1] and (ids[-1] - 1) // step < 121 * 8  # (a few values per row, not 2**32 per task)
    assert _peer_ids(path) == ids


@pytest.mark.parametrize("start, step", [(-1, -(1 << 40)), (LONG_MAX - (1 << 20), -7), (5, 3)])
def test_dataframe_appends_over_many_tasks_are_unique_and_on_the_sequence(spark, tmp_path, start, step):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"v": pa.array([], pa.int64())}), identity_columns={"id": {"start": start, "step": step}})
    tasks, rows = 7, 700
    spark.range(rows).withColumnRenamed("id", "v").repartition(tasks).write.format("lakelog").mode("append").save(path)
    ids = _ids(path)
    assert len(ids) == len(set(ids)) == rows and _on_sequence(ids, start, step)
    furthest = max(ids) if step > 0 else min(ids)
    assert _mark(path) == furthest
    # No further than spark_index(6, 101) = 2460 (task 6's row 101: repartition spreads the rows evenly).
    assert (furthest - start) // step <= 2460
    before = furthest
    spark.range(rows, rows + 10).withColumnRenamed("id", "v").repartition(3).write.format("lakelog").mode("append").save(path)
    new = [i for i in _ids(path) if i not in set(ids)]
    assert len(new) == 10 and all((i - before) * step > 0 for i in new)  # all beyond the mark
    assert _peer_ids(path) == _ids(path)


def test_identity_overflow_on_spark_is_refused_with_nothing_committed(spark, tmp_path):
    # START WITH 1 INCREMENT BY 2**62: only 1 and 2**62 + 1 are in the bigint range.
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"v": pa.array([], pa.int64())}), identity_columns={"id": {"start": 1, "step": 1 << 62}})
    one = spark.createDataFrame([(1,)], "v long").coalesce(1)
    one.write.format("lakelog").mode("append").save(path)
    one.write.format("lakelog").mode("append").save(path)
    assert _ids(path) == [1, (1 << 62) + 1]
    version = lakelog.Table(path).version
    with pytest.raises(Exception, match="IdentityOverflowError"):
        one.write.format("lakelog").mode("append").save(path)
    with pytest.raises(IdentityOverflowError) as e:  # (typed again on the driver for LakelogTable's jobs)
        LakelogTable.forPath(spark, path).alias("t").merge(spark.createDataFrame([(9,)], "v long").alias("s"), "t.v = s.v") \
            .whenNotMatchedInsertAll().execute()
    assert e.value.column == "id" and "bigint range" in str(e.value)
    assert lakelog.Table(path).version == version and _ids(path) == [1, (1 << 62) + 1]


def test_merge_jobs_of_one_operation_draw_beyond_each_other(spark, tmp_path):
    # A merge on Spark writes its inserted rows in one job and may rewrite rows (a BY DEFAULT column's
    # NULLs get values) in another: the second job draws beyond the first job's values, from one mark.
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"k": [1, 2], "id": pa.array([None, None], pa.int64())}),
                        identity_columns={"id": {"start": 10, "step": 10, "allow_explicit_insert": True}})
    src = spark.createDataFrame([(1,), (2,), (3,), (4,), (5,)], "k long").repartition(2)
    LakelogTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.k = s.k") \
        .whenMatchedUpdate(set={"k": "t.k"}).whenNotMatchedInsert(values={"k": "s.k"}).execute()
    ids = _ids(path)
    assert len(ids) == len(set(ids)) == 5 and _on_sequence(ids, 10, 10) and _mark(path) == ids[-1]
    assert (ids[-1] - 10) // 10 < 64  # (no fixed range per job or task)
    assert _peer_ids(path) == ids


def test_spark_appends_and_a_concurrent_writer_never_commit_the_same_ids(spark, tmp_path):
    # Writers that drew from the same mark: the second to commit conflicts (Delta: identity columns
    # take no concurrent writes), write_table retries; no id is ever committed twice.
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"v": pa.array([], pa.int64())}), identity_columns=["id"])
    committed = {"spark": 0, "python": 0}
    conflicts = []

    def spark_writer():
        for n in range(6):
            try:
                spark.range(n * 10, n * 10 + 10).withColumnRenamed("id", "v").repartition(2).write.format("lakelog").mode("append").save(path)
                committed["spark"] += 10
            except Exception as e:  # noqa: BLE001 - (a conflict fails the Spark job; checked below)
                conflicts.append(str(e))

    def python_writer():
        for n in range(15):
            lakelog.write_table(path, pa.table({"v": [1000 + n]}))
            committed["python"] += 1

    other = threading.Thread(target=python_writer)  # (Spark's jobs run from the thread of the session)
    other.start()
    spark_writer()
    other.join(timeout=600)
    assert not other.is_alive()
    assert all(CommitConflictError.__name__ in c for c in conflicts), conflicts[:1]
    ids = _ids(path)
    assert len(ids) == len(set(ids)) == committed["spark"] + committed["python"] and committed["python"] == 15
    assert _mark(path) == ids[-1]


def test_sql_restore_keeps_the_newest_high_water_mark(spark, tmp_path):
    path = str(tmp_path / "t")
    ref = f"lakelog.`{path}`"
    sql(spark, f"CREATE TABLE {ref} (id BIGINT GENERATED ALWAYS AS IDENTITY (START WITH 100 INCREMENT BY -1), v STRING)")
    sql(spark, f"INSERT INTO {ref} (v) VALUES ('a')")
    sql(spark, f"INSERT INTO {ref} (v) VALUES ('b'), ('c'), ('d')")
    issued = set(_ids(path))
    sql(spark, f"RESTORE TABLE {ref} TO VERSION AS OF 1")
    assert _ids(path) == [100] and _mark(path) == min(issued)
    LakelogTable.forPath(spark, path).restoreToVersion(1)  # (nothing to restore: the mark stays)
    sql(spark, f"INSERT INTO {ref} (v) VALUES ('e')")
    new = set(_ids(path)) - {100}
    assert len(new) == 1 and not new & issued and max(new) < min(issued)
    df = spark.createDataFrame([("f",)], "v string")
    df.write.format("lakelog").mode("append").save(path)
    assert len(set(_ids(path))) == 3


def test_streaming_micro_batches_draw_beyond_the_previous_ones(spark, tmp_path):
    # The sink's plan is made when the query starts; each micro-batch's tasks (three here) draw beyond the
    # table's latest mark, by partition id: no id repeats within a micro-batch or across them.
    path, source, ck = str(tmp_path / "t"), tmp_path / "in", str(tmp_path / "ck")
    lakelog.write_table(path, pa.table({"v": pa.array([], pa.int64())}), identity_columns={"id": {"start": 1, "step": 2}})
    source.mkdir()
    for b in range(3):
        (source / f"b{b}.json").write_text("".join(f'{{"v": {b * 100 + i}}}\n' for i in range(20)))
    stream = spark.readStream.schema("v long").option("maxFilesPerTrigger", 1).json(str(source)).repartition(3)
    q = stream.writeStream.format("lakelog").option("checkpointLocation", ck).trigger(availableNow=True).start(path)
    q.awaitTermination(300)
    assert q.exception() is None, q.exception()
    ids = _ids(path)
    assert len(ids) == len(set(ids)) == 60 and _on_sequence(ids, 1, 2) and _mark(path) == ids[-1]
    assert lakelog.Table(path).version == 3 and _peer_ids(path) == ids


def test_spark_updates_refuse_to_fill_identity_values_the_change_feed_cannot_record(spark, tmp_path):
    # A row with a NULL id (another engine wrote it into a BY DEFAULT column) gets a value when an update
    # rewrites it; on Spark the change data feed's post-image is written by other tasks, which cannot know
    # it: refused, nothing committed. Rows that have their ids update with the feed as usual.
    from lakelog.errors import UnsupportedFeatureError

    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"k": [1, 2, 3], "id": pa.array([7, None, 9], pa.int64())}),
                        configuration={"delta.enableChangeDataFeed": "true"})
    log = tmp_path / "t" / "_delta_log"
    meta = [json.loads(line) for line in (log / f"{0:020d}.json").read_text().splitlines() if '"metaData"' in line][0]["metaData"]
    schema = json.loads(meta["schemaString"])
    schema["fields"][1]["metadata"] = {"delta.identity.start": 10, "delta.identity.step": 1, "delta.identity.allowExplicitInsert": True,
                                       "delta.identity.highWaterMark": 10}
    meta["schemaString"] = json.dumps(schema)
    (log / f"{1:020d}.json").write_text(json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 6}}) + "\n"
                                         + json.dumps({"metaData": meta}) + "\n")
    t = LakelogTable.forPath(spark, path)
    for update in (lambda: t.update("true", {"k": "k + 10"}),
                   lambda: t.alias("t").merge(spark.createDataFrame([(2,)], "k long").alias("s"), "t.k = s.k")
                   .whenMatchedUpdate(set={"k": "s.k + 100"}).execute()):
        with pytest.raises(UnsupportedFeatureError, match="change data feed"):
            update()
        assert lakelog.Table(path).version == 1
    t.update("k <> 2", {"k": "k + 10"})
    changes = lakelog.Table(path).changes(2, 2).to_pylist()
    assert sorted((c["_change_type"], c["k"], c["id"]) for c in changes) == [
        ("update_postimage", 11, 7), ("update_postimage", 13, 9), ("update_preimage", 1, 7), ("update_preimage", 3, 9)]

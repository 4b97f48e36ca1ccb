"""The change data feed of spark_ext.LakelogTable delete, update and merge: every changed row recorded.

A randomized model check (the plan and its expected rows and changes: tests/cdf_model.py): each
sequence creates a table (copy-on-write or deletion vectors, partitioned or not, several files over
their own id ranges) and runs DELETE, UPDATE and MERGE on Spark (every merge clause kind, with and
without conditions) and Spark overwrites (``replaceWhere``, dynamic partition overwrite). After each operation the table equals the model and the version's changes are
exactly the model's; at the end, replaying the feed from version 0 gives lakelog's snapshot and the
model at every version, and Spark's readChangeFeed and deltalake's load_cdf read the same feed.

The default run is six seeded sequences chosen so that together they exercise every clause kind,
operation and shape (``test_the_default_sequences_cover_every_clause_and_shape`` checks it without Spark);
LAKELOG_SPARK_CDF_SEQUENCES=N runs N more sequences (seeds from LAKELOG_SPARK_CDF_SEED, default 0).
"""

from __future__ import annotations

import json
import os
from collections import Counter

import deltalake
import pyarrow as pa
import pytest

import lakelog
from spark_ext import LakelogTable
from tests.cdf_model import COLUMNS, SCHEMA, Op, Sequence, coverage, key, plan

ARROW = pa.schema([("id", pa.int64()), ("p", pa.string()), ("x", pa.int64()), ("s", pa.string())])
DEFAULT_SEEDS = (529, 2286, 3304, 4307, 3, 9)
LONG = int(os.environ.get("LAKELOG_SPARK_CDF_SEQUENCES", "0") or 0)
FIRST = int(os.environ.get("LAKELOG_SPARK_CDF_SEED", "0") or 0)
SEEDS = list(DEFAULT_SEEDS) + [s for s in range(FIRST, FIRST + LONG) if s not in DEFAULT_SEEDS]


def _arrow(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([{c: r[c] for c in COLUMNS} for r in rows], schema=ARROW)


def _rows(t: pa.Table) -> Counter:
    return Counter(tuple(r[c] for c in COLUMNS) for r in t.select(list(COLUMNS)).to_pylist())


def _feed(records) -> dict[int, Counter]:
    """Change rows by version: (change type, row) -> count."""
    out: dict[int, Counter] = {}
    for r in records:
        out.setdefault(r["_commit_version"], Counter())[(r["_change_type"], tuple(r[c] for c in COLUMNS))] += 1
    return out


def _peer_reads(path: str, version: int) -> bool:
    """Whether deltalake reads the changes of ``version`` as the protocol says: it has change data files,
    or no removed file with a deletion vector (deltalake reads such a file's deleted rows as deletes)."""
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as f:
        actions = [json.loads(line) for line in f if line.strip()]
    return any("cdc" in a for a in actions) or not any("remove" in a and a["remove"].get("deletionVector") for a in actions)


def _run(spark, path: str, op: Op) -> None:
    if op.kind == "append":
        lakelog.write_table(path, _arrow(op.source), mode="append")
        return
    if op.kind == "overwrite":
        writer = spark.createDataFrame([key(r) for r in op.source], SCHEMA).write.format("lakelog").mode("overwrite")
        if op.condition is not None:
            writer = writer.option("replaceWhere", op.condition.sql)
        else:
            writer = writer.option("partitionOverwriteMode", "dynamic")
        writer.save(path)
        return
    lt = LakelogTable.forPath(spark, path)
    cond = op.condition.sql if op.condition is not None else None
    if op.kind == "delete":
        lt.delete(cond)
    elif op.kind == "update":
        lt.update(cond, {c: e.sql for c, e in op.sets.items()})
    else:
        source = spark.createDataFrame([key(r) for r in op.source], SCHEMA)
        m = lt.alias("t").merge(source.alias("src"), op.on.sql)
        for c in op.clauses:
            cond = c.condition.sql if c.condition is not None else None
            sets = {col: e.sql for col, e in c.sets.items()} if c.sets is not None else None
            if c.kind == "matched":
                m = (m.whenMatchedDelete(cond) if c.action == "delete" else m.whenMatchedUpdateAll(cond) if c.all
                     else m.whenMatchedUpdate(cond, sets))
            elif c.kind == "not_matched":
                m = m.whenNotMatchedInsertAll(cond) if c.all else m.whenNotMatchedInsert(cond, sets)
            else:
                m = m.whenNotMatchedBySourceDelete(cond) if c.action == "delete" else m.whenNotMatchedBySourceUpdate(cond, sets)
        m.execute()


def _check_sequence(spark, tmp_path, q: Sequence) -> None:
    path = str(tmp_path / f"t{q.seed}")
    conf = {"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": str(q.deletion_vectors).lower()}
    expected: dict[int, tuple[Counter, Counter]] = {}  # version -> (rows, changes)
    rows: list[dict] = []
    for i, batch in enumerate(q.appends):
        if i == 0:
            lakelog.write_table(path, _arrow(batch), partition_by="p" if q.partitioned else None, configuration=conf)
        else:
            lakelog.write_table(path, _arrow(batch), mode="append")
        rows = rows + batch
        expected[i] = (Counter(key(r) for r in rows), Counter(("insert", key(r)) for r in batch))
    done: list[str] = []
    for op in q.ops:
        before = lakelog.Table(path).version
        _run(spark, path, op)
        done.append(op.text())
        where = f"seed {q.seed} ({q.shape}), after:\n  " + "\n  ".join(done)
        t = lakelog.Table(path)
        if t.version == before:  # (nothing committed: it must have changed nothing)
            assert not op.changes, where
            continue
        assert t.version == before + 1, where
        assert _rows(t.to_pyarrow()) == Counter(key(r) for r in op.rows_after), where
        assert _feed(t.changes(t.version, t.version).to_pylist()).get(t.version, Counter()) == op.changes, where
        expected[t.version] = (Counter(key(r) for r in op.rows_after), op.changes)
    where = f"seed {q.seed} ({q.shape}):\n  " + "\n  ".join(done)
    # Replaying the feed from version 0 gives every version, as lakelog reads it and as the model says.
    t = lakelog.Table(path)
    ours = t.changes(0).to_pylist()
    feed = _feed(ours)
    state: Counter = Counter()
    for v in range(t.version + 1):
        changes = feed.get(v, Counter())
        for (kind, row), n in changes.items():
            if kind in ("delete", "update_preimage"):
                assert state[row] >= n, (v, kind, row, where)
                state[row] -= n
            else:
                state[row] += n
        state = +state
        assert state == _rows(lakelog.Table(path, version=v).to_pyarrow()), (v, where)
        if v in expected:
            assert (state, changes) == expected[v], (v, where)
    # Spark's reader and deltalake's read the same feed
    theirs = spark.read.format("lakelog").option("readChangeFeed", "true").option("startingVersion", 0).load(path)
    assert _feed(r.asDict() for r in theirs.collect()) == feed, where
    # (deltalake reads a removed file's rows without its deletion vector: compared where no such remove
    # stands for changes, i.e. versions with change files or without removes that carry one)
    peer = _feed(pa.table(deltalake.DeltaTable(path).load_cdf(starting_version=0).read_all()).to_pylist())
    same = [v for v in range(t.version + 1) if _peer_reads(path, v)]
    assert {v: peer.get(v) for v in same} == {v: feed.get(v) for v in same}, where
    assert t.check().ok, where


def test_the_default_sequences_cover_every_clause_and_shape():
    wanted = coverage([plan(s) for s in range(1000)])
    # 12 merge clause forms, 4 shapes with a by-source clause, delete and update with and without
    # conditions, inserting merges leaving a match unchanged or changing no target row, on 2 conditions,
    # overwrites where p or x and of partitions, on partitioned and flat tables
    assert len(wanted) == 30
    assert coverage([plan(s) for s in DEFAULT_SEEDS]) == wanted


@pytest.mark.parametrize("seed", SEEDS)
def test_spark_row_level_changes_replay_to_every_version(spark, tmp_path, seed):
    _check_sequence(spark, tmp_path, plan(seed))


def test_a_spark_merge_on_a_deletion_vector_table_records_changes_in_every_file(spark, tmp_path):
    """Merge-on-read: the changes of a merge were picked per file row index across files, so rows of
    different files at the same position hid each other (a file outside the source's key range, whose
    rows only a not-matched-by-source clause deletes, against one the matched clause updates)."""
    path = str(tmp_path / "t")
    conf = {"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": "true"}
    lakelog.write_table(path, pa.table({"id": [1, 2, 3], "v": [10, 20, 30]}), configuration=conf)
    lakelog.write_table(path, pa.table({"id": [11, 12, 13], "v": [110, 120, 130]}), mode="append")
    source = spark.createDataFrame([(11, 0), (12, 0)], "id long, v long")
    m = (LakelogTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.id = s.id")
         .whenMatchedUpdate(set={"v": "s.v"}).whenNotMatchedBySourceDelete().execute())
    assert (m["num_target_rows_updated"], m["num_target_rows_deleted"]) == (2, 4)
    t = lakelog.Table(path)
    assert sorted((r["id"], r["v"]) for r in t.to_pyarrow().to_pylist()) == [(11, 0), (12, 0)]
    got = sorted((r["_change_type"], r["id"], r["v"]) for r in t.changes(2).to_pylist())
    assert got == [("delete", 1, 10), ("delete", 2, 20), ("delete", 3, 30), ("delete", 13, 130),
                   ("update_postimage", 11, 0), ("update_postimage", 12, 0), ("update_preimage", 11, 110), ("update_preimage", 12, 120)]


@pytest.mark.parametrize("deletion_vectors", [False, True])
def test_a_spark_merge_records_as_inserts_only_the_rows_it_inserts(spark, tmp_path, deletion_vectors):
    """The feed's inserts were the source rows matching no target row of the files the merge changed,
    not of all candidate files: with no file changed, every source row was recorded as inserted, and
    rows matching a row of an unchanged file too."""
    path = str(tmp_path / "t")
    conf = {"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": str(deletion_vectors).lower()}
    lakelog.write_table(path, pa.table({"id": [1, 2, 3], "v": [10, 20, 30]}), configuration=conf)
    lakelog.write_table(path, pa.table({"id": [11, 12], "v": [110, 120]}), mode="append")
    t = LakelogTable.forPath(spark, path)
    source = spark.createDataFrame([(2, 0), (12, 5), (50, 7)], "id long, v long")
    versions = [
        t.alias("t").merge(source.alias("s"), "t.id = s.id").whenNotMatchedInsertAll().execute()["version"],  # inserts 50
        t.alias("t").merge(source.alias("s"), "t.id = s.id").whenMatchedUpdate("s.v > 100", {"v": "s.v"})
        .whenNotMatchedInsertAll().execute()["version"],  # changes nothing
        # (not one key equality: the unmatched rows are found against the target's files, not from matched keys)
        t.alias("t").merge(source.alias("s"), "t.id = s.id AND s.v >= 0").whenMatchedUpdate("s.v = 5", {"v": "s.v"})
        .whenNotMatchedInsertAll("s.v > 0").execute()["version"],  # updates 12: one file changed, not the others
    ]
    feed = sorted((r["_commit_version"], r["_change_type"], r["id"], r["v"]) for r in lakelog.Table(path).changes(2).to_pylist())
    assert versions[1] in (versions[0], versions[0] + 1)  # (a merge that changes nothing may commit nothing)
    assert feed == [(versions[0], "insert", 50, 7), (versions[2], "update_postimage", 12, 5), (versions[2], "update_preimage", 12, 120)]
    assert sorted((r["id"], r["v"]) for r in lakelog.Table(path).to_pyarrow().to_pylist()) == [
        (1, 10), (2, 20), (3, 30), (11, 110), (12, 5), (50, 7)]


def test_spark_refuses_a_change_feed_bound_given_as_a_version_and_a_timestamp(spark, tmp_path):
    """As Delta's DELTA_MULTIPLE_CDC_BOUNDARY: the batch and the streaming reader name both options;
    before, startingTimestamp won and startingVersion was silently ignored."""
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": [1, 2]}), configuration={"delta.enableChangeDataFeed": "true"})
    LakelogTable.forPath(spark, path).delete("id = 1")

    def read(**options):
        reader = spark.read.format("lakelog").option("readChangeFeed", "true")
        for k, v in options.items():
            reader = reader.option(k, v)
        return sorted((r["id"], r["_change_type"]) for r in reader.load(path).collect())

    with pytest.raises(Exception, match=r"ConflictingBoundsError.*startingVersion='1' with startingTimestamp='2000-01-01'"):
        read(startingVersion=1, startingTimestamp="2000-01-01")
    with pytest.raises(Exception, match=r"ConflictingBoundsError.*endingVersion='1' with endingTimestamp"):
        read(startingVersion=0, endingVersion=1, endingTimestamp="2999-01-01")
    assert read(startingVersion=1, endingTimestamp="2999-01-01") == [(1, "delete")]
    stream = spark.readStream.format("lakelog").option("readChangeFeed", "true").option("startingVersion", 1) \
        .option("startingTimestamp", "2000-01-01").load(path)
    with pytest.raises(Exception, match=r"ConflictingBoundsError.*startingVersion='1' with startingTimestamp"):
        q = stream.writeStream.format("memory").queryName("both_bounds").trigger(availableNow=True).start()
        try:
            q.awaitTermination(120)
        finally:
            q.stop()


@pytest.mark.parametrize("deletion_vectors", [False, True])
def test_a_spark_merge_that_adds_a_column_records_its_changes_in_the_new_schema(spark, tmp_path, deletion_vectors):
    """withSchemaEvolution on a table with the feed: rows before the merge have no value for the new
    column (NULL in deletes and pre-images), rows it writes have the source's."""
    path = str(tmp_path / "t")
    conf = {"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": str(deletion_vectors).lower()}
    lakelog.write_table(path, pa.table({"id": [1, 2, 3], "v": [10, 20, 30]}), configuration=conf)
    lakelog.write_table(path, pa.table({"id": [11, 12], "v": [110, 120]}), mode="append")
    source = spark.createDataFrame([(2, 0, "e2"), (12, 5, "e12"), (50, 7, "e50")], "id long, v long, extra string")
    m = (LakelogTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.id = s.id")
         .whenMatchedDelete("s.v = 0").whenMatchedUpdateAll().whenNotMatchedInsertAll()
         .whenNotMatchedBySourceUpdate("t.id = 1", {"v": "t.v + 1"}).whenNotMatchedBySourceDelete("t.id = 11")
         .withSchemaEvolution().execute())
    t = lakelog.Table(path)
    assert t.schema.names == ["id", "v", "extra"]
    got = sorted((r["_change_type"], r["id"], r["v"], r["extra"]) for r in t.changes(m["version"]).to_pylist())
    assert got == [("delete", 2, 20, None), ("delete", 11, 110, None), ("insert", 50, 7, "e50"),
                   ("update_postimage", 1, 11, None), ("update_postimage", 12, 5, "e12"),
                   ("update_preimage", 1, 10, None), ("update_preimage", 12, 120, None)]
    assert sorted((r["id"], r["v"], r["extra"]) for r in t.to_pyarrow().to_pylist()) == [
        (1, 11, None), (3, 30, None), (12, 5, "e12"), (50, 7, "e50")]

"""Write-side guarantees of README.md and specs/PROTOCOL.md, each on a real table:

* ``delta.appendOnly=true`` refuses commits that remove data (compaction, which changes no data, is allowed);
* tables that need what lakelog does not write yet (unknown writer features) are refused for writes, naming the feature;
* stores without atomic put-if-absent refuse commits unless ``lakelog.single_writer`` is set;
* ``WritePlan.abort`` and the Spark writer's ``abort`` keep the files of a commit that landed although
  its reply was lost;
* a planned append commits on top of a compatible concurrent schema merge;
* at most 10 store errors with an unknown outcome are retried per commit.
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import lakelog
from lakelog.check import check_table
from lakelog.errors import SchemaMismatchError, StorageError, UnsupportedFeatureError
from lakelog.log.snapshot import Snapshot
from lakelog.storage import Storage
from lakelog.transaction import Transaction

SCHEMA = pa.schema([("id", pa.int64()), ("s", pa.string())])


def _data(*ids: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "s": [f"r{i}" for i in ids]}, schema=SCHEMA)


def _ids(t: pa.Table) -> list[int]:
    return sorted(t.column("id").to_pylist())


def _commits(path: str) -> list[str]:
    return sorted(n for n in os.listdir(os.path.join(path, "_delta_log")) if n.endswith(".json"))


def _data_files(root: str) -> set[str]:
    out = set()
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x != "_delta_log"]
        out.update(os.path.relpath(os.path.join(d, f), root) for f in files)
    return out


def _raw_commit(path: str, version: int) -> list[dict]:
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json"), "rb") as f:
        return [json.loads(line) for line in f if line.strip()]


def _append_raw_commit(path: str, actions: list[dict]) -> None:
    """Commit ``actions`` as the next version, as another engine would."""
    version = len(_commits(path))
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json"), "x") as f:
        f.writelines(json.dumps(a) + "\n" for a in [{"commitInfo": {"operation": "SET TBLPROPERTIES"}}, *actions])


# ---------------------------------------------------------------- delta.appendOnly


def test_append_only_table_refuses_removes_and_overwrites(table_path):
    lakelog.write_table(table_path, _data(1, 2), configuration={"delta.appendOnly": "true"})
    assert lakelog.write_table(table_path, _data(3)) == 1  # appends are fine
    files_before = _data_files(table_path)

    with pytest.raises(UnsupportedFeatureError, match="appendOnly"):
        lakelog.write_table(table_path, _data(9), mode="overwrite")
    with pytest.raises(UnsupportedFeatureError, match="appendOnly"):
        lakelog.Table(table_path).restore(0)  # would remove version 1's file
    storage = Storage(table_path)
    snap = Snapshot.load(storage)
    with pytest.raises(UnsupportedFeatureError, match="appendOnly"):
        Transaction(storage, snap, "DELETE").commit([next(iter(snap.files.values())).remove()])

    assert _commits(table_path) == [f"{v:020d}.json" for v in range(2)]  # nothing committed
    assert _data_files(table_path) == files_before  # the refused overwrite's file was deleted
    assert _ids(lakelog.read_table(table_path)) == [1, 2, 3]
    # Rewriting files without changing data (dataChange=false) is allowed, as in Delta.
    metrics = lakelog.Table(table_path).optimize()
    assert metrics["numFilesRemoved"] == 2 and metrics["version"] == 2
    assert _ids(lakelog.read_table(table_path)) == [1, 2, 3] == _ids(DeltaTable(table_path).to_pyarrow_table())


# ---------------------------------------------------------------- features lakelog cannot enforce


def _field_metadata(path: str, metadata: dict) -> list[dict]:
    """A metaData action equal to version 0's, with ``metadata`` on column ``id``."""
    meta = next(a["metaData"] for a in _raw_commit(path, 0) if "metaData" in a)
    schema = json.loads(meta["schemaString"])
    schema["fields"][0]["metadata"] = metadata
    return [{"metaData": {**meta, "schemaString": json.dumps(schema)}}]


def _configuration(path: str, conf: dict) -> list[dict]:
    meta = next(a["metaData"] for a in _raw_commit(path, 0) if "metaData" in a)
    return [{"metaData": {**meta, "configuration": {**meta["configuration"], **conf}}}]


def _protocol(writer: int, features: list[str] | None = None) -> dict:
    p = {"minReaderVersion": 1, "minWriterVersion": writer}
    if features is not None:
        p["writerFeatures"] = features
    return {"protocol": p}


FEATURES = {
    # (CHECK constraints, invariants, generated and identity columns, the change data feed and row tracking
    # are written: tests/test_writer_features.py, tests/test_change_feed.py, tests/test_row_tracking.py)
    "writer feature": lambda p: [_protocol(7, ["someFutureWriterFeature"])],
}


@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_writes_are_refused_on_tables_that_need_checks_lakelog_cannot_enforce(table_path, feature):
    lakelog.write_table(table_path, _data(1, 2))
    _append_raw_commit(table_path, FEATURES[feature](table_path))
    files_before = _data_files(table_path)
    for mode in ("append", "overwrite"):
        with pytest.raises(UnsupportedFeatureError, match=feature):
            lakelog.write_table(table_path, _data(3), mode=mode)
    with pytest.raises(UnsupportedFeatureError, match=feature):
        lakelog.plan_write(table_path, SCHEMA)
    with pytest.raises(UnsupportedFeatureError, match=feature):
        lakelog.Table(table_path).optimize()
    assert len(_commits(table_path)) == 2 and _data_files(table_path) == files_before
    assert _ids(lakelog.read_table(table_path)) == [1, 2]  # reading is unaffected


def test_check_constraint_added_by_deltalake_is_enforced(table_path):
    write_deltalake(table_path, _data(1, 2))
    DeltaTable(table_path).alter.add_constraint({"id_positive": "id > 0"})
    with pytest.raises(lakelog.errors.ConstraintViolationError, match="id_positive"):
        lakelog.write_table(table_path, _data(-5))
    lakelog.write_table(table_path, _data(3))
    assert _ids(lakelog.read_table(table_path)) == [1, 2, 3]


# ---------------------------------------------------------------- stores without put-if-absent


def test_store_without_put_if_absent_needs_single_writer(tmp_path):
    """fsspec's dir:// filesystem (here over a local directory) has no atomic create: commits are refused
    unless the table is declared single-writer, and then they work."""
    opts = {"path": str(tmp_path), "target_protocol": "file"}
    with pytest.raises(StorageError, match="lakelog.single_writer"):
        lakelog.write_table("dir://table", _data(1), storage_options=opts)
    with pytest.raises(StorageError, match="lakelog.single_writer"):
        lakelog.plan_write("dir://table", SCHEMA, storage_options=opts)
    assert not os.path.exists(tmp_path / "table" / "_delta_log")

    single = {**opts, "lakelog.single_writer": "true"}
    assert lakelog.write_table("dir://table", _data(1), storage_options=single) == 0
    assert lakelog.write_table("dir://table", _data(2), storage_options=single) == 1
    with pytest.raises(StorageError, match="lakelog.single_writer"):
        lakelog.write_table("dir://table", _data(3), storage_options=opts)  # every commit needs the option
    local = str(tmp_path / "table")
    assert _ids(lakelog.read_table("dir://table", storage_options=opts)) == [1, 2]
    assert _ids(lakelog.read_table(local)) == [1, 2] == _ids(DeltaTable(local).to_pyarrow_table())
    assert _commits(local) == [f"{v:020d}.json" for v in range(2)]


# ---------------------------------------------------------------- abort after a lost reply


class LoseCommitReply:
    """The commit file is created, then the store's reply is lost: the writer sees an error whose
    outcome it cannot know (not a retryable one)."""

    def __init__(self) -> None:
        self.fired = 0

    def __call__(self, op: str, path: str) -> None:
        if op == "put_if_absent:done" and path.endswith(".json") and not self.fired:
            self.fired += 1
            raise OSError("injected: the reply to the commit was lost")


def test_plan_abort_keeps_the_files_of_a_commit_that_landed(table_path):
    lakelog.write_table(table_path, _data(0))
    lose = LoseCommitReply()
    plan = lakelog.plan_write(table_path, SCHEMA, storage_options={"lakelog.fault_injector": lose})
    adds = plan.write(_data(1, 2))
    with pytest.raises(OSError, match="reply to the commit was lost"):
        plan.commit(adds)
    assert lose.fired == 1
    plan.abort(adds)  # what a caller does after a failed commit
    assert all(os.path.exists(os.path.join(table_path, a.relative_path)) for a in adds)
    assert lakelog.Table(table_path).version == 1
    assert _ids(lakelog.read_table(table_path)) == [0, 1, 2] == _ids(DeltaTable(table_path).to_pyarrow_table())

    # The files of a write that never committed are deleted.
    plan = lakelog.plan_write(table_path, SCHEMA)
    never = plan.write(_data(7))
    plan.abort(never)
    assert not any(os.path.exists(os.path.join(table_path, a.relative_path)) for a in never)
    report = check_table(table_path)
    assert report.ok and report.orphans == [], report.format()


def test_spark_writer_abort_keeps_the_files_of_a_commit_that_landed(table_path):
    """The driver side of format("lakelog"): tasks' messages, a commit whose reply is lost, then the
    abort() Spark calls after a failed commit. No Spark session is needed for the driver calls."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from spark_ext.datasource.source import LakelogWriter

    lakelog.write_table(table_path, _data(0))
    schema = StructType([StructField("id", LongType()), StructField("s", StringType())])
    writer = LakelogWriter({"path": table_path}, schema, "append")
    messages = [writer.write(iter(_data(i, i + 10).to_batches())) for i in (1, 2)]  # two tasks
    lose = LoseCommitReply()
    writer.plan.storage_options = {"lakelog.fault_injector": lose}
    with pytest.raises(OSError, match="reply to the commit was lost"):
        writer.commit(messages)
    writer.abort(messages)
    assert lose.fired == 1
    assert _ids(lakelog.read_table(table_path)) == [0, 1, 2, 11, 12]
    report = check_table(table_path)
    assert report.ok and report.orphans == [], report.format()

    # Aborting the messages of a job whose commit never happened deletes its files.
    writer = LakelogWriter({"path": table_path}, schema, "append")
    messages = [writer.write(iter(_data(50).to_batches()))]
    writer.abort(messages)
    assert check_table(table_path).orphans == []
    assert _ids(lakelog.read_table(table_path)) == [0, 1, 2, 11, 12]


# ---------------------------------------------------------------- planned append vs concurrent schema merge


def test_planned_append_commits_after_a_compatible_concurrent_schema_merge(table_path):
    lakelog.write_table(table_path, _data(1))
    plan = lakelog.plan_write(table_path, SCHEMA)  # planned on version 0
    adds = plan.write(_data(2))
    wider = _data(3).append_column("extra", pa.array([1.5]))
    assert lakelog.write_table(table_path, wider, schema_mode="merge") == 1  # changes metaData
    assert plan.commit(adds) == 2
    t = lakelog.Table(table_path)
    assert t.schema.names == ["id", "s", "extra"]
    expected = [(1, "r1", None), (2, "r2", None), (3, "r3", 1.5)]
    assert sorted((r["id"], r["s"], r["extra"]) for r in t.to_pyarrow().to_pylist()) == expected
    assert sorted((r["id"], r["s"], r["extra"]) for r in DeltaTable(table_path).to_pyarrow_table().to_pylist()) == expected

    # A concurrent change the planned data no longer fits: refused, and its files are deleted.
    plan = lakelog.plan_write(table_path, SCHEMA)
    adds = plan.write(_data(4))
    lakelog.write_table(table_path, pa.table({"other": [1]}), mode="overwrite", schema_mode="overwrite")
    with pytest.raises(SchemaMismatchError):
        plan.commit(adds)
    assert not any(os.path.exists(os.path.join(table_path, a.relative_path)) for a in adds)
    assert lakelog.Table(table_path).version == 3


# ---------------------------------------------------------------- unknown-outcome store errors


class TimeoutsOnCommit:
    """The first ``n`` attempts to create a commit file time out before anything is written."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.attempts = 0

    def __call__(self, op: str, path: str) -> None:
        if op == "put_if_absent" and path.endswith(".json"):
            self.attempts += 1
            if self.attempts <= self.n:
                raise TimeoutError(f"injected timeout {self.attempts}")


def test_at_most_ten_unknown_outcome_store_errors_per_commit(table_path):
    lakelog.write_table(table_path, _data(0))
    ten = TimeoutsOnCommit(10)
    assert lakelog.write_table(table_path, _data(1), storage_options={"lakelog.fault_injector": ten}) == 1
    assert ten.attempts == 11  # ten errors, each followed by another look at the same version

    eleven = TimeoutsOnCommit(11)
    with pytest.raises(TimeoutError, match="injected timeout 11"):
        lakelog.write_table(table_path, _data(2), storage_options={"lakelog.fault_injector": eleven})
    assert eleven.attempts == 11
    assert lakelog.Table(table_path).version == 1 and _ids(lakelog.read_table(table_path)) == [0, 1]
    assert check_table(table_path).ok

"""Predicate and dynamic partition overwrites of files written elsewhere (``WritePlan.write`` in
another process, e.g. Spark tasks), committed by ``lakelog.dml.commit_overwrite_*``."""

from __future__ import annotations

import os
import pickle

import deltalake
import pyarrow as pa
import pytest

import lakelog
from lakelog.dml import checked_batches, commit_overwrite_partitions, commit_overwrite_where
from lakelog.errors import CommitConflictError, PredicateViolationError


def _rows(path: str) -> list[tuple]:
    t = deltalake.DeltaTable(path).to_pyarrow_table()
    return sorted(zip(t.column("day").to_pylist(), t.column("x").to_pylist()))


@pytest.fixture
def table(tmp_path) -> str:
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"day": ["d1", "d1", "d2"], "x": [1, 2, 3]}), partition_by=["day"])
    return path


def _written(path: str, data: pa.Table):
    """A plan as a remote committer gets it (pickled: no snapshot), and the files written with it."""
    plan = pickle.loads(pickle.dumps(lakelog.plan_write(path, data.schema, mode="overwrite")))
    return plan, plan.write(data)


def _gone(path: str, adds) -> bool:
    return not any(os.path.exists(os.path.join(path, a.relative_path)) for a in adds)


def test_where_replaces_matching_rows_beside_a_concurrent_append_elsewhere(table):
    plan, adds = _written(table, pa.table({"day": ["d1"], "x": [10]}))
    lakelog.write_table(table, pa.table({"day": ["d3"], "x": [30]}))  # another partition, after the plan
    v = commit_overwrite_where(plan, adds, "day = 'd1'")
    assert v == 2
    assert _rows(table) == [("d1", 10), ("d2", 3), ("d3", 30)]
    assert deltalake.DeltaTable(table).history(1)[0]["operationParameters"]["predicate"] == "day = 'd1'"


@pytest.mark.parametrize("predicate, data", [
    ("day = 'd1'", {"day": ["d1", "d2"], "x": [5, 6]}),  # partition predicate: checked on partition values
    ("x < 100", {"day": ["d1", "d1"], "x": [5, 200]}),  # data predicate: the files are read
    ("x < 100", {"day": ["d1"], "x": [None]}),  # NULL is not TRUE
])
def test_where_refuses_rows_outside_the_predicate_and_commits_nothing(table, predicate, data):
    before = deltalake.DeltaTable(table).version()
    plan, adds = _written(table, pa.table(data, schema=pa.schema([("day", pa.string()), ("x", pa.int64())])))
    with pytest.raises(PredicateViolationError, match=predicate):
        commit_overwrite_where(plan, adds, predicate)
    assert deltalake.DeltaTable(table).version() == before
    assert _gone(table, adds)


def test_where_conflicts_with_a_concurrent_append_it_would_replace(table):
    plan, adds = _written(table, pa.table({"day": ["d1"], "x": [5]}))
    lakelog.write_table(table, pa.table({"day": ["d1"], "x": [77]}))
    with pytest.raises(CommitConflictError):
        commit_overwrite_where(plan, adds, "day = 'd1'")
    assert _rows(table) == [("d1", 1), ("d1", 2), ("d1", 77), ("d2", 3)]
    assert _gone(table, adds)


def test_checked_batches_names_the_predicate(table):
    schema = pa.schema([("day", pa.string()), ("x", pa.int64())])
    ok = list(checked_batches(pa.table({"day": ["d1"], "x": [1]}).to_batches(), schema, "day = 'd1'"))
    assert ok[0].num_rows == 1
    with pytest.raises(PredicateViolationError, match="day = 'd1'"):
        list(checked_batches(pa.table({"day": ["d2"], "x": [1]}).to_batches(), schema, "day = 'd1'"))


def test_partitions_replaced_beside_a_concurrent_append_elsewhere(table):
    plan, adds = _written(table, pa.table({"day": ["d2"], "x": [222]}))
    lakelog.write_table(table, pa.table({"day": ["d4"], "x": [4]}))
    commit_overwrite_partitions(plan, adds)
    assert _rows(table) == [("d1", 1), ("d1", 2), ("d2", 222), ("d4", 4)]
    assert deltalake.DeltaTable(table).history(1)[0]["operationParameters"]["partitionOverwriteMode"] == "dynamic"


def test_partitions_conflict_with_a_concurrent_append_to_a_replaced_partition(table):
    plan, adds = _written(table, pa.table({"day": ["d2"], "x": [222]}))
    lakelog.write_table(table, pa.table({"day": ["d2"], "x": [4]}))
    with pytest.raises(CommitConflictError):
        commit_overwrite_partitions(plan, adds)
    assert _rows(table) == [("d1", 1), ("d1", 2), ("d2", 3), ("d2", 4)]
    assert _gone(table, adds)


def test_new_table(tmp_path):
    path = str(tmp_path / "new")
    plan, adds = _written(path, pa.table({"day": ["d1"], "x": [1]}))
    commit_overwrite_where(plan, adds, "day = 'd1'")
    assert _rows(path) == [("d1", 1)]

"""Row-level changes (lakelog.dml): delete, update, merge, predicate and dynamic partition overwrite.

Each behaviour is checked on real tables, against hand-computed rows, and the commits against what
Delta writes (operation, operationParameters, operationMetrics); deltalake reads every version.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

import lakelog
from lakelog.actions import AddFile, RemoveFile, Txn
from lakelog.errors import (
    CommitConflictError,
    MultipleSourceMatchesError,
    PredicateError,
    PredicateViolationError,
    SchemaMismatchError,
    UnsupportedFeatureError,
)
from lakelog.log.delta_log import DeltaLog
from lakelog.storage import Storage


def rows(path, sort=("id",)):
    t = lakelog.read_table(path)
    return sorted(t.to_pylist(), key=lambda r: tuple((r[k] is None, r[k]) for k in sort))


def dl_rows(path, sort=("id",)):
    t = DeltaTable(path).to_pyarrow_table()
    return sorted(t.to_pylist(), key=lambda r: tuple((r[k] is None, r[k]) for k in sort))


def commit(path, version):
    return DeltaLog(Storage(path)).read_commit(version)


def commit_info(path, version=None):
    t = lakelog.Table(path, version=version)
    return t.history(limit=1)[0]


def _people(table_path):
    data = pa.table(
        {
            "id": pa.array([1, 2, 3, 4, 5, 6], pa.int64()),
            "p": ["a", "a", "b", "b", None, "c"],
            "x": pa.array([10, 20, None, 40, 50, 60], pa.int32()),
            "s": ["al", "bo", None, "alx", "z", ""],
        }
    )
    lakelog.write_table(table_path, data, partition_by=["p"])
    return table_path


@pytest.fixture
def people(table_path):
    return _people(table_path)


# ---------------------------------------------------------------- delete

def test_delete_sql_three_valued_and_metrics(people):
    t = lakelog.Table(people)
    m = t.delete("x > 15 and s like 'al%'")  # NULL x or s: not selected
    assert m["num_deleted_rows"] == 1 and m["version"] == 1
    assert [r["id"] for r in rows(people)] == [1, 2, 3, 5, 6]
    assert m["num_removed_files"] == 1 and m["num_added_files"] == 1 and m["num_copied_rows"] == 1
    info = commit_info(people)
    assert info["operation"] == "DELETE"
    assert json.loads(info["operationParameters"]["predicate"]) == ["x > 15 and s like 'al%'"]
    assert info["operationMetrics"]["numDeletedRows"] == "1" and info["operationMetrics"]["numCopiedRows"] == "1"
    assert info["isBlindAppend"] is False and info["readVersion"] == 0
    assert t.version == 1
    assert dl_rows(people) == rows(people)


def test_delete_not_in_and_null_rows(people):
    lakelog.Table(people).delete("x not in (10, 20)")
    # x NULL (id 3) is not selected by NOT IN: it stays.
    assert [r["id"] for r in rows(people)] == [1, 2, 3]


def test_delete_partition_predicate_removes_whole_files_without_rewriting(people):
    m = lakelog.Table(people).delete("p = 'b' or p is null")
    assert m == {"num_deleted_rows": 3, "num_added_files": 0, "num_removed_files": 2, "num_copied_rows": 0, "version": 1}
    acts = commit(people, 1)
    assert not any(isinstance(a, AddFile) for a in acts)
    assert [r["id"] for r in rows(people)] == [1, 2, 6]


def test_delete_everything_and_nothing(people):
    t = lakelog.Table(people)
    m = t.delete("id > 100")
    assert m["num_deleted_rows"] == 0 and m["version"] == 0  # nothing to change: no commit
    m = t.delete()
    assert m["num_deleted_rows"] == 6 and m["num_removed_files"] == 4
    assert rows(people) == []
    assert json.loads(commit_info(people)["operationParameters"]["predicate"]) == []


def test_delete_with_dnf_filters_and_pyarrow_expression(people):
    t = lakelog.Table(people)
    t.delete([("p", "=", "a"), ("x", ">=", 20)])
    assert [r["id"] for r in rows(people)] == [1, 3, 4, 5, 6]
    t.delete([("x", "not in", [40, 50])])  # 3VL: NULL x (id 3) stays
    assert [r["id"] for r in rows(people)] == [3, 4, 5]
    t.delete(pc.field("s") == "z")
    assert [r["id"] for r in rows(people)] == [3, 4]


@pytest.mark.parametrize(
    "predicate, fragment",
    [
        ("nope = 1", "nope"),
        ("x >", "cannot parse"),
        ("x + 1", "not a boolean"),
        ("x = 1; drop table t", "cannot parse"),
        ("1 = 1) union select (1", "not a single SQL expression"),
        ("x in (select 1)", "subquery"),
        ("sum(x) > 1", "aggregates"),
        ("row_number() over () = 1", "window"),
        ("", "empty"),
    ],
)
def test_bad_predicates_are_typed_errors_quoting_the_text_and_commit_nothing(people, predicate, fragment):
    with pytest.raises(PredicateError) as e:
        lakelog.Table(people).delete(predicate)
    assert fragment in str(e.value)
    if predicate:
        assert repr(predicate) in str(e.value) or predicate in str(e.value)
    assert lakelog.Table(people).version == 0
    assert sorted(os.listdir(os.path.join(people, "_delta_log"))) == ["00000000000000000000.json"]


def test_runtime_type_error_commits_nothing_and_leaves_no_files(people):
    before = {os.path.join(d, f) for d, _, fs in os.walk(people) for f in fs}
    with pytest.raises(PredicateError, match="x > 'abc'"):
        lakelog.Table(people).delete("x > 'abc'")
    with pytest.raises(PredicateError):
        lakelog.Table(people).update({"x": "cast(s as integer)"}, "id = 1")  # 'al' is not an integer
    after = {os.path.join(d, f) for d, _, fs in os.walk(people) for f in fs}
    assert after == before and lakelog.Table(people).version == 0


# ---------------------------------------------------------------- update

def test_update_expressions_cast_to_column_type(people):
    t = lakelog.Table(people)
    m = t.update({"x": "x * 2 + 1", "s": "concat(coalesce(s, ''), '_u')"}, "id <= 3")
    assert m["num_updated_rows"] == 3 and m["version"] == 1
    got = {r["id"]: (r["x"], r["s"]) for r in rows(people)}
    assert got[1] == (21, "al_u") and got[2] == (41, "bo_u") and got[3] == (None, "_u") and got[4] == (40, "alx")
    assert lakelog.read_table(people).schema.field("x").type == pa.int32()
    info = commit_info(people)
    assert info["operation"] == "UPDATE" and json.loads(info["operationParameters"]["predicate"]) == ["id <= 3"]
    assert info["operationMetrics"]["numUpdatedRows"] == "3"
    assert dl_rows(people) == rows(people)


def test_update_values_line_up_with_their_rows_across_files(table_path):
    """Updated values are computed over the scanned columns of a group of files and handed to each
    file's rewrite: they must land on their own rows, whatever the files, gaps and column mix."""
    rng = np.random.default_rng(5)
    for k in range(6):  # six small files: one scan group
        n = 50 + 10 * k
        lakelog.write_table(table_path, pa.table({
            "id": np.arange(k * 1000, k * 1000 + n), "g": [f"g{k}"] * n, "a": rng.integers(0, 100, n), "b": rng.random(n).round(3),
            "s": [f"s{i}" for i in range(n)],
        }))
    t = lakelog.Table(table_path)
    before = t.to_pyarrow().sort_by("id")
    # the expression reads columns the predicate does not; one file is updated whole (kept rows: none)
    m = t.update({"s": "concat(g, ':', CAST(a AS VARCHAR), ':', s)", "a": "a + id"}, "a % 3 = 0 OR g = 'g2'")
    after = t.to_pyarrow().sort_by("id")
    want = before.to_pylist()
    for r in want:
        if r["a"] % 3 == 0 or r["g"] == "g2":
            r["s"], r["a"] = f"{r['g']}:{r['a']}:{r['s']}", r["a"] + r["id"]
    assert after.to_pylist() == want
    assert m["num_updated_rows"] == sum(1 for r in before.to_pylist() if r["a"] % 3 == 0 or r["g"] == "g2")
    assert dl_rows(table_path) == rows(table_path)
    # a pyarrow expression as the predicate
    t.update({"b": "b * 2"}, pc.field("id") < 3)
    assert lakelog.read_table(table_path, filters=[("id", "<", 3)]).sort_by("id").column("b").to_pylist() == \
        [v * 2 for v in before.column("b").to_pylist()[:3]]


def test_update_partition_column_moves_rows(people):
    m = lakelog.Table(people).update({"p": "'z'"}, "p = 'a' or p is null")
    assert m["num_updated_rows"] == 3
    adds = [a for a in commit(people, 1) if isinstance(a, AddFile)]
    assert {a.partition_values["p"] for a in adds} == {"z"}
    assert all(a.path.startswith("p=z/") for a in adds)
    got = lakelog.read_table(people, filters=[("p", "=", "z")])
    assert sorted(got.column("id").to_pylist()) == [1, 2, 5]
    assert dl_rows(people) == rows(people)


def test_update_checks_columns_and_types(people):
    t = lakelog.Table(people)
    with pytest.raises(PredicateError, match="'nope' is not in the table"):
        t.update({"nope": "1"})
    with pytest.raises(PredicateError, match="expression for column 'x'"):
        t.update({"x": "no_such_function(x)"})
    with pytest.raises(PredicateError, match="non-empty"):
        t.update({})
    with pytest.raises(SchemaMismatchError, match="type long, which column 'x' of type integer"):  # x is int32: refused by type
        t.update({"x": "x + 3000000000"}, "id = 1")
    with pytest.raises(PredicateError, match="INT32|int32|out of range|Overflow"):  # an explicit cast: by value
        t.update({"x": "CAST(x + 3000000000 AS INTEGER)"}, "id = 1")
    assert t.version == 0


def test_update_not_nullable_column_refuses_null(table_path):
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])
    lakelog.write_table(table_path, pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=schema))
    with pytest.raises(SchemaMismatchError, match="not nullable"):
        lakelog.Table(table_path).update({"id": "NULL"}, "id = 1")
    assert lakelog.Table(table_path).version == 0


# ---------------------------------------------------------------- merge

def _target(table_path):
    lakelog.write_table(
        table_path,
        pa.table({"id": pa.array([1, 2, 3, 4, 5], pa.int64()), "p": ["a", "a", "b", "b", None], "x": pa.array([10, 20, 30, 40, 50], pa.int64())}),
        partition_by=["p"],
    )
    return lakelog.Table(table_path)


def test_merge_every_clause_type_first_match_wins(table_path):
    t = _target(table_path)
    src = pa.table({"id": [2, 4, 6, None], "p": ["a", "c", "c", "z"], "x": [200, 400, 600, 700]})
    m = (
        t.merge(src, "target.id = source.id")
        .when_matched_update_all(condition="source.x > 300")
        .when_matched_delete()
        .when_not_matched_insert({"id": "source.id", "p": "source.p", "x": "source.x + 1"}, condition="source.id is not null")
        .when_not_matched_insert_all()
        .when_not_matched_by_source_update({"x": "target.x + 1"}, condition="target.p = 'b'")
        .when_not_matched_by_source_delete("target.p is null")
        .execute()
    )
    assert [(r["id"], r["p"], r["x"]) for r in rows(table_path)] == [
        (1, "a", 10), (3, "b", 31), (4, "c", 400), (6, "c", 601), (None, "z", 700),
    ]
    assert m["num_source_rows"] == 4 and m["num_target_rows_inserted"] == 2
    assert m["num_target_rows_updated"] == 2 and m["num_target_rows_deleted"] == 2
    assert m["num_output_rows"] == m["num_target_rows_inserted"] + m["num_target_rows_updated"] + m["num_target_rows_copied"]
    info = commit_info(table_path)
    assert info["operation"] == "MERGE"
    params = info["operationParameters"]
    assert json.loads(params["predicate"]) == ["target.id = source.id"]
    assert json.loads(params["matchedPredicates"]) == [{"predicate": "source.x > 300", "actionType": "update"}, {"actionType": "delete"}]
    assert json.loads(params["notMatchedPredicates"])[1] == {"actionType": "insert"}
    assert [c["actionType"] for c in json.loads(params["notMatchedBySourcePredicates"])] == ["update", "delete"]
    assert info["operationMetrics"]["numTargetRowsMatchedDeleted"] == "1"
    assert info["operationMetrics"]["numTargetRowsNotMatchedBySourceDeleted"] == "1"
    assert dl_rows(table_path) == rows(table_path)


def test_merge_multiple_source_matches_is_an_error_and_commits_nothing(table_path):
    t = _target(table_path)
    src = pa.table({"id": [1, 1], "p": ["a", "a"], "x": [0, 1]})
    with pytest.raises(MultipleSourceMatchesError):
        t.merge(src, "target.id = source.id").when_matched_update_all().execute()
    assert t.version == 0 and lakelog.Table(table_path).version == 0
    # ... except when the only matched clause is an unconditional delete (Delta allows it)
    m = t.merge(src, "target.id = source.id").when_matched_delete().execute()
    assert m["num_target_rows_deleted"] == 1 and [r["id"] for r in rows(table_path)] == [2, 3, 4, 5]
    # and an insert-only merge does not care how many source rows match
    m = t.merge(pa.table({"id": [2, 2, 9], "p": ["a", "a", "a"], "x": [0, 0, 0]}), "target.id = source.id").when_not_matched_insert_all().execute()
    assert m["num_target_rows_inserted"] == 1


def test_merge_only_last_clause_of_a_kind_may_be_unconditional(table_path):
    t = _target(table_path)
    with pytest.raises(PredicateError, match="only the last matched clause"):
        t.merge(pa.table({"id": [1]}), "target.id = source.id").when_matched_delete().when_matched_update({"x": "1"}).execute()


def test_merge_update_all_needs_every_column_unless_schema_merge(table_path):
    t = _target(table_path)
    src = pa.table({"id": [1, 7], "x": [11, 70], "extra": ["e1", "e7"]})
    with pytest.raises(PredicateError, match=r"missing: \['p'\]"):
        t.merge(src, "target.id = source.id").when_matched_update_all().execute()
    m = (t.merge(src, "target.id = source.id", schema_mode="merge")
         .when_matched_update_all().when_not_matched_insert_all().execute())
    assert m["num_target_rows_updated"] == 1 and m["num_target_rows_inserted"] == 1
    assert t.schema.names == ["id", "p", "x", "extra"]
    got = {r["id"]: r for r in rows(table_path)}
    assert got[1] == {"id": 1, "p": "a", "x": 11, "extra": "e1"}  # p kept (not in the source)
    assert got[7] == {"id": 7, "p": None, "x": 70, "extra": "e7"}
    assert got[2]["extra"] is None
    assert dl_rows(table_path) == rows(table_path)


def test_merge_extra_source_columns_ignored_without_schema_merge(table_path):
    t = _target(table_path)
    src = pa.table({"id": [1], "p": ["a"], "x": [5], "extra": [1]})
    t.merge(src, "target.id = source.id").when_matched_update_all().execute()
    assert t.schema.names == ["id", "p", "x"] and rows(table_path)[0]["x"] == 5


def test_merge_aliases_pandas_source_and_bad_expressions(table_path):
    import pandas as pd

    t = _target(table_path)
    src = pd.DataFrame({"key": [3, 8], "val": [33, 88]})
    m = (t.merge(src, "t.id = s.key", source_alias="s", target_alias="t")
         .when_matched_update({"t.x": "s.val"}).when_not_matched_insert({"id": "s.key", "x": "s.val", "p": "'n'"}).execute())
    assert (m["num_target_rows_updated"], m["num_target_rows_inserted"]) == (1, 1)
    assert {r["id"]: r["x"] for r in rows(table_path)}[3] == 33
    with pytest.raises(PredicateError, match="not matched by source"):
        t.merge(src, "t.id = s.key", source_alias="s", target_alias="t").when_not_matched_by_source_update({"x": "s.val"}).execute()
    with pytest.raises(PredicateError, match="merge predicate"):
        t.merge(src, "t.id = s.nope", source_alias="s", target_alias="t").when_matched_delete().execute()
    with pytest.raises(PredicateError):
        t.merge(src, "t.id = s.key", source_alias="s", target_alias="t").when_not_matched_insert({"id": "t.id"}).execute()


@pytest.mark.parametrize("deletion_vectors", [False, True])
def test_merge_new_values_from_the_join_columns_alone_or_from_whole_files(table_path, monkeypatch, deletion_vectors):
    """Updated rows whose new values need only the source and the target columns the join read are
    built without reading the target files first (each rewrite reads its own); any other target column
    (kept as it is, or named in an expression) makes the merge read the files whole first. Both give
    the same rows."""
    from lakelog.dml.rewrite import RowLevelOperation

    whole_reads = []
    read_many = RowLevelOperation.read_many
    monkeypatch.setattr(RowLevelOperation, "read_many", lambda self, *a, **k: whole_reads.append(1) or read_many(self, *a, **k))
    config = {"delta.enableDeletionVectors": "true"} if deletion_vectors else None
    lakelog.write_table(table_path, pa.table({"id": pa.array(range(40), pa.int64()), "p": ["a", "b"] * 20,
                                              "x": pa.array(range(0, 400, 10), pa.int64())}),
                        partition_by=["p"], configuration=config)
    t = lakelog.Table(table_path)
    src = pa.table({"id": pa.array([3, 4, 50], pa.int64()), "p": ["b", "z", "z"], "x": pa.array([1, 2, 3], pa.int64()), "y": [7, 8, 9]})
    # every column set from the source and the join key (target.id), and y only the source has
    m = (t.merge(src, "target.id = source.id")
         .when_matched_update({"id": "source.id", "p": "source.p", "x": "y * 100 + target.id"})
         .when_not_matched_insert({"id": "source.id", "p": "source.p", "x": "source.x"}).execute())
    assert (m["num_target_rows_updated"], m["num_target_rows_inserted"]) == (2, 1)
    assert not whole_reads
    expected = {i: ("a" if i % 2 == 0 else "b", i * 10) for i in range(40)}
    expected.update({3: ("b", 703), 4: ("z", 804), 50: ("z", 3)})
    assert {r["id"]: (r["p"], r["x"]) for r in rows(table_path)} == expected
    # x from target.x, which the join did not read: whole files first
    m = (t.merge(src, "target.id = source.id")
         .when_matched_update({"id": "source.id", "p": "source.p", "x": "target.x + source.x"}).execute())
    assert m["num_target_rows_updated"] == 3 and whole_reads  # (50 was inserted above)
    expected.update({3: ("b", 704), 4: ("z", 806), 50: ("z", 6)})
    assert {r["id"]: (r["p"], r["x"]) for r in rows(table_path)} == expected
    if deletion_vectors:
        assert any(a.deletion_vector is not None for a in lakelog.Table(table_path).snapshot.files.values())
    else:
        assert dl_rows(table_path) == rows(table_path)


def test_merge_with_empty_source_applies_not_matched_by_source(table_path):
    t = _target(table_path)
    m = t.merge(pa.table({"id": pa.array([], pa.int64())}), "target.id = source.id").when_not_matched_by_source_delete("target.x > 25").execute()
    assert m["num_target_rows_deleted"] == 3 and [r["id"] for r in rows(table_path)] == [1, 2]


# ---------------------------------------------------------------- overwrite

def test_predicate_overwrite_replaces_rows_and_refuses_violations(people):
    v = lakelog.write_table(people, pa.table({"id": [9], "p": ["a"], "x": pa.array([0], pa.int32()), "s": ["n"]}),
                            mode="overwrite", predicate="p = 'a' or x = 40")
    assert v == 1
    assert [r["id"] for r in rows(people)] == [3, 5, 6, 9]
    info = commit_info(people)
    assert info["operation"] == "WRITE"
    assert info["operationParameters"] == {"mode": "Overwrite", "partitionBy": '["p"]', "predicate": "p = 'a' or x = 40"}
    assert info["operationMetrics"]["numDeletedRows"] == "3" and info["operationMetrics"]["numCopiedRows"] == "1"
    acts = commit(people, 1)
    removed = {a.partition_values["p"] for a in acts if isinstance(a, RemoveFile)}
    assert removed == {"a", "b"}  # p=a removed whole, p=b rewritten without id 4; others untouched
    with pytest.raises(PredicateViolationError, match="do not satisfy"):
        lakelog.write_table(people, pa.table({"id": [10, 11], "p": ["a", None], "x": pa.array([0, 0], pa.int32()), "s": ["", ""]}),
                            mode="overwrite", predicate="p = 'a'")
    assert lakelog.Table(people).version == 1
    assert dl_rows(people) == rows(people)


def test_predicate_overwrite_needs_overwrite_mode_and_creates_tables(tmp_path):
    path = str(tmp_path / "new")
    data = pa.table({"d": ["2026-01-01", "2026-01-01"], "v": [1, 2]})
    with pytest.raises(ValueError, match="mode='overwrite'"):
        lakelog.write_table(path, data, predicate="d = '2026-01-01'")
    assert lakelog.write_table(path, data, mode="overwrite", predicate="d = '2026-01-01'", partition_by=["d"]) == 0
    v = lakelog.write_table(path, pa.table({"d": ["2026-01-01"], "v": [3]}), mode="overwrite", predicate="d = '2026-01-01'")
    assert lakelog.read_table(path).to_pylist() == [{"d": "2026-01-01", "v": 3}] and v == 1
    # idempotent: the same app version twice commits once
    for _ in range(2):
        lakelog.write_table(path, pa.table({"d": ["2026-01-02"], "v": [4]}), mode="overwrite", predicate="d = '2026-01-02'",
                            app_id="job", app_version=7)
    assert lakelog.Table(path).version == 2


def test_dynamic_partition_overwrite(people):
    lakelog.write_table(people, pa.table({"id": [10, 11], "p": ["b", "d"], "x": pa.array([0, 0], pa.int32()), "s": ["", ""]}),
                        mode="overwrite", partition_overwrite="dynamic")
    assert [r["id"] for r in rows(people)] == [1, 2, 5, 6, 10, 11]
    info = commit_info(people)
    assert info["operationParameters"]["mode"] == "Overwrite" and info["operationParameters"]["partitionOverwriteMode"] == "dynamic"
    with pytest.raises(ValueError, match="partition_overwrite"):
        lakelog.write_table(people, pa.table({"id": [1]}), mode="overwrite", partition_overwrite="sometimes")
    assert dl_rows(people) == rows(people)


# ---------------------------------------------------------------- pruning, idempotency, protocol

def test_pruning_rewrites_only_touched_files_of_a_100_file_table(table_path):
    for i in range(100):  # 10 partitions x 10 files, each file an id range of 10
        ids = pa.array(range(i * 10, i * 10 + 10), pa.int64())
        lakelog.write_table(table_path, pa.table({"id": ids, "part": [i % 10] * 10, "v": ids}), partition_by=["part"])
    t = lakelog.Table(table_path)
    assert len(t.files()) == 100
    m = t.delete("id >= 430 and id < 435")  # one file (ids 430..439, part 3)
    assert m["num_removed_files"] == 1 and m["num_added_files"] == 1
    m = t.delete("part = 7")  # one partition: ten files, none rewritten
    assert m["num_removed_files"] == 10 and m["num_added_files"] == 0
    src = pa.table({"id": pa.array([500, 505, 2000], pa.int64()), "part": [0, 0, 1], "v": pa.array([1, 2, 3], pa.int64())})
    m = t.merge(src, "target.id = source.id").when_matched_update_all().when_not_matched_insert_all().execute()
    assert m["num_target_files_removed"] == 1  # the key range 500..2000 prunes by stats: only 500..509 matches
    assert m["num_target_rows_updated"] == 2 and m["num_target_rows_inserted"] == 1
    src = pa.table({"id": pa.array([11, 21], pa.int64()), "part": [1, 2], "v": pa.array([0, 0], pa.int64())})
    m = t.merge(src, "target.id = source.id and target.part = source.part").when_matched_delete().execute()
    assert m["num_target_files_removed"] == 2 and m["num_target_rows_deleted"] == 2
    assert dl_rows(table_path) == rows(table_path)


def test_idempotent_operations_commit_once(people):
    t = lakelog.Table(people)
    for _ in range(2):
        t.update({"x": "x + 1"}, "id = 1", app_id="fix", app_version=1)
    assert {r["id"]: r["x"] for r in rows(people)}[1] == 11
    for _ in range(2):
        t.delete("id = 2", app_id="fix", app_version=2)
    for _ in range(2):
        (t.merge(pa.table({"id": [1]}), "target.id = source.id", app_id="fix", app_version=3)
         .when_matched_update({"x": "target.x * 10"}).execute())
    assert {r["id"]: r["x"] for r in rows(people)}[1] == 110
    assert t.version == 3
    txns = [a for a in commit(people, 3) if isinstance(a, Txn)]
    assert [(x.app_id, x.version) for x in txns] == [("fix", 3)]
    with pytest.raises(ValueError, match="app_version"):
        t.delete("id = 3", app_id="fix", app_version=1.5)


def test_append_only_table_refuses_row_changes_and_takes_inserts(table_path):
    lakelog.write_table(table_path, pa.table({"id": [1]}), configuration={"delta.appendOnly": "true"})
    t = lakelog.Table(table_path)
    with pytest.raises(UnsupportedFeatureError, match="appendOnly"):
        t.delete("id = 1")
    with pytest.raises(UnsupportedFeatureError, match="appendOnly"):
        t.update({"id": "id + 1"})
    with pytest.raises(UnsupportedFeatureError, match="appendOnly"):
        t.merge(pa.table({"id": [1, 2]}), "target.id = source.id").when_matched_update_all().when_not_matched_insert_all().execute()
    assert t.version == 0 and len(os.listdir(table_path)) == 2  # nothing committed, no file left behind
    # what Spark allows on an append-only table: an insert-only merge, a delete or update that matches nothing
    assert t.delete("id = 99")["num_deleted_rows"] == 0
    assert t.update({"id": "0"}, "id > 99")["num_updated_rows"] == 0
    m = t.merge(pa.table({"id": [1, 2]}), "target.id = source.id").when_not_matched_insert_all().execute()
    assert m["num_target_rows_inserted"] == 1
    assert sorted(r["id"] for r in t.to_pyarrow().to_pylist()) == [1, 2]


def test_concurrent_commits_conflict_only_when_they_touch_what_was_read(backend):
    from lakelog.dml.rewrite import RowLevelOperation, compile_predicate
    from lakelog.dml.delete import delete_matching

    people = _people(backend.uri)

    def staged_delete(predicate):
        op = RowLevelOperation(Storage(people))
        delete_matching(op, compile_predicate(predicate, op.schema, op.engine))
        op.finish()
        return op

    op = staged_delete("p = 'a' and x > 15")
    lakelog.write_table(people, pa.table({"id": [7], "p": ["c"], "x": pa.array([1], pa.int32()), "s": ["n"]}))  # other partition
    assert op.commit("DELETE", {}, {}) == 2
    op = staged_delete("p = 'a' and x > 5")
    lakelog.write_table(people, pa.table({"id": [8], "p": ["a"], "x": pa.array([99], pa.int32()), "s": ["n"]}))  # could match
    with pytest.raises(CommitConflictError):
        op.commit("DELETE", {}, {})
    op = staged_delete("id = 6")
    lakelog.Table(people).update({"s": "'w'"}, "p = 'c'")  # rewrites the file the delete read
    with pytest.raises(CommitConflictError):
        op.commit("DELETE", {}, {})
    assert [r["id"] for r in rows(people)] == [1, 3, 4, 5, 6, 7, 8]


# ---------------------------------------------------------------- interop and isolation

def test_lakelog_reads_deltalake_dml_and_deltalake_reads_lakelog_dml(table_path):
    data = pa.table({"id": pa.array(range(20), pa.int64()), "g": [f"g{i % 4}" for i in range(20)], "v": pa.array(range(20), pa.int64())})
    lakelog.write_table(table_path, data, partition_by=["g"])
    dt = DeltaTable(table_path)
    dt.delete("v < 3")
    dt.update(updates={"v": "v * 2"}, predicate="g = 'g1'")
    (dt.merge(pa.table({"id": pa.array([5, 50], pa.int64()), "g": ["g1", "g9"], "v": pa.array([0, 0], pa.int64())}), "t.id = s.id",
              source_alias="s", target_alias="t").when_matched_update_all().when_not_matched_insert_all().execute())
    t = lakelog.Table(table_path)
    for v in range(t.version + 1):
        assert sorted(lakelog.read_table(table_path, version=v).to_pylist(), key=lambda r: r["id"]) == sorted(
            DeltaTable(table_path, version=v).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    t.delete("v > 30")
    t.update({"g": "'g0'"}, "id = 7")
    t.merge(pa.table({"id": pa.array([7], pa.int64()), "v": pa.array([1], pa.int64())}), "target.id = source.id").when_matched_update({"v": "source.v"}).execute()
    for v in range(t.version + 1):
        assert sorted(lakelog.read_table(table_path, version=v).to_pylist(), key=lambda r: r["id"]) == sorted(
            DeltaTable(table_path, version=v).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])


def test_plain_reads_and_writes_do_not_import_duckdb(tmp_path):
    code = f"""
import sys, pyarrow as pa, lakelog
p = {str(tmp_path / 't')!r}
lakelog.write_table(p, pa.table({{"id": [1, 2], "p": ["a", "b"]}}), partition_by=["p"])
lakelog.write_table(p, pa.table({{"id": [3], "p": ["a"]}}))
lakelog.write_table(p, pa.table({{"id": [4], "p": ["a"]}}), mode="overwrite")
assert lakelog.read_table(p, filters=[("p", "=", "a")]).num_rows == 1
lakelog.Table(p).to_pandas()
assert "duckdb" not in sys.modules, "the plain read/write path imported duckdb"
lakelog.Table(p).delete("id = 4")
assert "duckdb" not in sys.modules, "a simple predicate (pyarrow evaluates it exactly) imported duckdb"
lakelog.Table(p).delete("id + 1 = 100")
assert "duckdb" in sys.modules
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_cli_delete_and_update(people):
    from tests.test_cli import run, run_json

    r = run("update", people, "--set", "x=x + 100", "--set", "s=upper(s)", "--where", "p = 'a'")
    assert r.returncode == 0 and "2 row(s) updated" in r.stdout
    out = run_json("delete", people, "--where", "x > 100")
    assert out["num_deleted_rows"] == 2 and out["version"] == 2
    r = run("delete", people)
    assert r.returncode == 2 and "--where" in r.stderr
    r = run("delete", people, "--where", "nope = 1")
    assert r.returncode == 2 and "nope" in r.stderr
    assert [r["id"] for r in rows(people)] == [3, 4, 5, 6]


def test_stats_of_rewritten_files(people):
    lakelog.Table(people).update({"x": "x + 1000"}, "id = 4")
    adds = [a for a in commit(people, 1) if isinstance(a, AddFile)]
    stats = orjson.loads(adds[0].stats)
    assert stats["numRecords"] == 2 and stats["maxValues"]["x"] == 1040 and stats["nullCount"]["x"] == 1


def test_rewritten_files_keep_the_source_files_dictionary_encoding(table_path):
    import pyarrow.parquet as pq

    n = 5000
    lakelog.write_table(table_path, pa.table({
        "id": pa.array(range(n), pa.int64()),  # all distinct: pyarrow falls back to plain pages
        "g": [f"g{i % 3}" for i in range(n)],  # few values: dictionary
        "st": pa.array([{"a": i % 2, "b": i} for i in range(n)]),
    }))
    lakelog.Table(table_path).delete("id % 10 = 0")
    new = [a for a in commit(table_path, 1) if isinstance(a, AddFile)]
    md = pq.ParquetFile(os.path.join(table_path, new[0].relative_path)).metadata.row_group(0)
    has_dict = {md.column(i).path_in_schema: md.column(i).has_dictionary_page for i in range(md.num_columns)}
    assert has_dict == {"id": False, "g": True, "st.a": True, "st.b": False}
    assert lakelog.read_table(table_path).num_rows == n - n // 10


def test_row_level_operations_on_every_storage_backend(any_backend):
    path = any_backend.uri
    lakelog.write_table(path, pa.table({"id": pa.array(range(6), pa.int64()), "p": ["a", "b"] * 3, "v": pa.array(range(6), pa.int64())}),
                        partition_by=["p"])
    t = lakelog.Table(path)
    assert t.delete("v = 0")["num_deleted_rows"] == 1
    assert t.update({"v": "v * 10"}, "p = 'b'")["num_updated_rows"] == 3
    m = t.merge(pa.table({"id": pa.array([2, 9], pa.int64()), "p": ["a", "a"], "v": pa.array([-2, -9], pa.int64())}),
                "target.id = source.id").when_matched_update_all().when_not_matched_insert_all().execute()
    assert (m["num_target_rows_updated"], m["num_target_rows_inserted"]) == (1, 1)
    lakelog.write_table(path, pa.table({"id": pa.array([7], pa.int64()), "p": ["b"], "v": pa.array([7], pa.int64())}),
                        mode="overwrite", predicate="p = 'b'")
    got = sorted((r["id"], r["p"], r["v"]) for r in lakelog.read_table(path).to_pylist())
    assert got == [(2, "a", -2), (4, "a", 4), (7, "b", 7), (9, "a", -9)]
    if any_backend.peer:
        assert sorted((r["id"], r["p"], r["v"]) for r in any_backend.deltalake_table().to_pyarrow_table().to_pylist()) == got


def test_update_and_merge_take_python_values_as_literals(tmp_path):
    """``t.update({"amount": 0})`` was refused: only str values are SQL expressions."""
    import datetime as dt
    import decimal

    import numpy as np

    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({
        "id": [1, 2, 3], "amount": [1.0, 2.0, 3.0], "note": ["a", "b", "c"], "day": [dt.date(2026, 1, 1)] * 3,
        "price": pa.array([decimal.Decimal("1.10")] * 3, pa.decimal128(9, 2)), "ok": [True, True, True],
    }))
    t = lakelog.Table(path)
    t.update({"amount": 0, "note": None, "ok": False}, "id = 1")
    t.update({"amount": np.int64(5), "day": dt.date(2026, 2, 3), "price": decimal.Decimal("9.99"), "note": "upper(note)"}, "id = 2")
    t.merge(pa.table({"id": [3, 4]}), "target.id = source.id") \
        .when_matched_update({"amount": 2.5}) \
        .when_not_matched_insert({"id": "source.id", "note": "'it''s'", "amount": -1}).execute()
    with pytest.raises(PredicateError, match="must be a SQL expression .* or a literal"):
        t.update({"amount": [1, 2]})
    with pytest.raises(PredicateError, match="it's"):
        t.update({"note": "it's"})  # a str stays SQL: the string literal is 'it''s'
    rows = {r["id"]: r for r in DeltaTable(path).to_pyarrow_table().to_pylist()}
    assert (rows[1]["amount"], rows[1]["note"], rows[1]["ok"]) == (0.0, None, False)
    assert (rows[2]["amount"], rows[2]["day"], rows[2]["price"], rows[2]["note"]) == (5.0, dt.date(2026, 2, 3), decimal.Decimal("9.99"), "B")
    assert rows[3]["amount"] == 2.5 and rows[3]["note"] == "c"
    assert rows[4]["amount"] == -1.0 and rows[4]["note"] == "it's"

"""Identity columns by the Delta protocol ("Identity Columns") and Delta's own rules: generated values are
``start + k * step`` (k >= 0) beyond the high water mark and never leave the bigint range; the mark moves
as Delta's ``updateToValidHighWaterMark`` (onto the sequence, only forward, not for values before
``start``); identity values are never updated and a column generated always takes no given value, on
every write path; a column is never both identity and generated. deltalake reads every table written
here (a real delta-rs table, tests/data/checkpoint-v2-table, among them)."""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import shutil
import tempfile

import deltalake
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakelog
from lakelog.errors import IdentityColumnError, IdentityOverflowError, InvalidArgumentError, SchemaMismatchError

DATA = os.path.join(os.path.dirname(__file__), "data")
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
UPDATE_REFUSED = "DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED"
INSERT_REFUSED = "DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED"
FUZZ = int(os.environ.get("LAKELOG_FUZZ_EXAMPLES", "0"))


def _field(path: str, column: str = "id") -> dict:
    return next(f for f in json.loads(lakelog.Table(path).snapshot.metadata.schema_string)["fields"] if f["name"] == column)


def _mark(path: str, column: str = "id"):
    return (_field(path, column).get("metadata") or {}).get("delta.identity.highWaterMark")


def _rows(path: str) -> list[dict]:
    return sorted(lakelog.Table(path).to_pyarrow().to_pylist(), key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _peer_rows(path: str) -> list[dict]:
    """The rows deltalake's SQL engine reads (its pyarrow reader refuses v2 checkpoint tables)."""
    got = pa.table(deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path)).execute("SELECT * FROM t").read_all())
    return sorted(got.to_pylist(), key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _data_files(path: str) -> set[str]:
    return set(glob.glob(os.path.join(path, "**", "*.parquet"), recursive=True))


def _commit_metadata(path: str, change) -> None:
    """Commit, by hand, the table's metaData with ``change(schema dict)`` applied (as another writer may)."""
    t = lakelog.Table(path)
    m = t.snapshot.metadata
    schema = json.loads(m.schema_string)
    change(schema)
    meta = {"id": m.id, "format": {"provider": "parquet", "options": {}}, "schemaString": json.dumps(schema),
            "partitionColumns": list(m.partition_columns), "configuration": dict(m.configuration), "createdTime": m.created_time}
    with open(os.path.join(path, "_delta_log", f"{t.version + 1:020d}.json"), "x") as f:
        f.write(json.dumps({"commitInfo": {"timestamp": 1, "operation": "SET TBLPROPERTIES"}}) + "\n" + json.dumps({"metaData": meta}) + "\n")


# ---------------------------------------------------------------- overflow


@pytest.mark.parametrize("start, step", [(LONG_MAX - 4, 2), (LONG_MIN + 4, -2)])
def test_generated_values_past_the_bigint_range_fail_the_write(tmp_path, start, step):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"v": [1, 2]}), identity_columns={"id": {"start": start, "step": step}})
    end = start + 2 * step  # LONG_MAX (LONG_MIN): the sequence's last value
    version, files = lakelog.Table(path).version, _data_files(path)
    with pytest.raises(IdentityOverflowError) as e:  # the second value would wrap around
        lakelog.write_table(path, pa.table({"v": [3, 4]}))
    assert e.value.column == "id" and "bigint range" in str(e.value)
    assert lakelog.Table(path).version == version and _data_files(path) == files
    lakelog.write_table(path, pa.table({"v": [3]}))
    assert _mark(path) == end
    version, files = lakelog.Table(path).version, _data_files(path)
    for write in (lambda: lakelog.write_table(path, pa.table({"v": [4]})),
                  lambda: lakelog.Table(path).merge(pa.table({"v": [4]}), "target.v = source.v").when_not_matched_insert_all().execute()):
        with pytest.raises(IdentityOverflowError):
            write()
        assert lakelog.Table(path).version == version and _data_files(path) == files
    assert sorted(r["id"] for r in _rows(path)) == sorted([start, start + step, end])
    assert _peer_rows(path) == _rows(path)


def test_a_spark_task_whose_values_would_leave_the_range_fails_before_writing(tmp_path):
    # Start 0, step 2**59: indexes 0 .. 15 of the sequence are in range. Task 3 (a Spark partition)
    # draws index 13 for its first row (spark_index(3, 0)), task 7 index 41: past the range.
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"v": pa.array([], pa.int64())}), identity_columns={"id": {"start": 0, "step": 1 << 59}})
    plan = lakelog.plan_write(path, pa.schema([("v", pa.int64())]))
    batch = pa.record_batch({"v": pa.array([2], pa.int64())})
    files = _data_files(path)
    task = dataclasses.replace(plan, features=plan.features.for_task(7))
    with pytest.raises(IdentityOverflowError, match="Spark task 7") as e:
        task.write([batch])
    assert e.value.column == "id" and _data_files(path) == files
    adds = [a for p in (0, 3) for a in dataclasses.replace(plan, features=plan.features.for_task(p)).write([batch])]
    plan.commit(adds)
    assert sorted(r["id"] for r in _rows(path)) == [0, 13 << 59] and _mark(path) == 13 << 59


def test_an_explicit_value_whose_mark_would_leave_the_range_fails_the_write(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"v": [1]}), identity_columns={"id": {"start": 0, "step": 10, "allow_explicit_insert": True}})
    version, files = lakelog.Table(path).version, _data_files(path)
    with pytest.raises(IdentityOverflowError, match="high water mark"):  # rounds up to 9223372036854775810
        lakelog.write_table(path, pa.table({"v": [2], "id": pa.array([LONG_MAX - 3], pa.int64())}))
    with pytest.raises(IdentityOverflowError, match="high water mark"):
        lakelog.Table(path).merge(pa.table({"v": [2], "id": pa.array([LONG_MAX - 3], pa.int64())}), "target.v = source.v") \
            .when_not_matched_insert_all().execute()
    assert lakelog.Table(path).version == version and _data_files(path) == files
    lakelog.write_table(path, pa.table({"v": [3], "id": pa.array([LONG_MAX - 7], pa.int64())}))  # on the sequence: it is the mark
    assert _mark(path) == LONG_MAX - 7


def test_declarations_outside_the_bigint_range_are_refused(tmp_path):
    path = str(tmp_path / "t")
    for spec in ({"start": 1 << 63}, {"step": -(1 << 63) - 1}, {"allow_explicit_insert": "false"}):
        with pytest.raises(InvalidArgumentError):
            lakelog.write_table(path, pa.table({"v": [1]}), identity_columns={"id": spec})
    assert not os.path.exists(os.path.join(path, "_delta_log"))


# ---------------------------------------------------------------- the high water mark


@pytest.mark.parametrize("start, step, explicit, mark, following", [
    (10, 5, 13, 15, 20),  # off the sequence: rounded to its next value
    (10, 5, 25, 25, 30),  # on it
    (10, 5, 7, None, 10),  # before start: the mark does not move
    (-1, -4, -6, -9, -13),  # a negative step: rounded down
    (-1, -4, 5, None, -1),  # before start, against the step
    (LONG_MIN + 7, -3, LONG_MIN + 5, LONG_MIN + 4, LONG_MIN + 1),
])
def test_explicit_values_move_the_mark_onto_the_sequence(tmp_path, start, step, explicit, mark, following):
    path = str(tmp_path / "t")
    empty = pa.table({"v": pa.array([], pa.int64())})
    lakelog.write_table(path, empty, identity_columns={"id": {"start": start, "step": step, "allow_explicit_insert": True}})
    lakelog.write_table(path, pa.table({"v": [1], "id": pa.array([explicit], pa.int64())}))
    assert _mark(path) == mark
    lakelog.write_table(path, pa.table({"v": [2]}))
    assert [r["id"] for r in _rows(path) if r["v"] == 2] == [following]
    assert (_mark(path) - start) % step == 0 and _peer_rows(path) == _rows(path)


def test_a_mark_left_off_the_sequence_is_continued_on_it(tmp_path):
    # A writer that did not round an explicit value left the mark at 13 (start 10, step 5): the next
    # value is 15, on the sequence (Delta's generator requires the mark on it), not 18.
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"v": [1]}), identity_columns={"id": {"start": 10, "step": 5, "allow_explicit_insert": True}})

    def off(schema):
        schema["fields"][1]["metadata"]["delta.identity.highWaterMark"] = 13
    _commit_metadata(path, off)
    lakelog.write_table(path, pa.table({"v": [2, 3]}))
    assert sorted(r["id"] for r in _rows(path)) == [10, 15, 20] and _mark(path) == 20


def test_a_mark_before_start_is_not_continued_before_start(tmp_path):
    # (k >= 0 in start + k * step: a mark another writer left before start is not continued from)
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"v": pa.array([], pa.int64())}), identity_columns={"id": {"start": 100, "step": 1}})

    def behind(schema):
        schema["fields"][1]["metadata"]["delta.identity.highWaterMark"] = 5
    _commit_metadata(path, behind)
    lakelog.write_table(path, pa.table({"v": [1, 2]}))
    assert sorted(r["id"] for r in _rows(path)) == [100, 101] and _mark(path) == 101


# ---------------------------------------------------------------- Spark tasks


def test_spark_indexes_are_one_to_one_on_a_grid_of_tasks_and_rows():
    from lakelog.writer_features.identity import spark_index

    grid = {spark_index(p, k) for p in range(128) for k in range(128)}
    assert len(grid) == 128 * 128 and spark_index(0, 0) == 0


@settings(max_examples=300 if not FUZZ else FUZZ, deadline=None)
@given(st.integers(0, (1 << 16) - 1), st.integers(0, (1 << 40) - 1), st.integers(1, 300),
       st.integers(0, (1 << 16) - 1), st.integers(0, (1 << 40) - 1))
def test_spark_indexes_grow_with_the_row_stay_within_the_bound_and_never_meet(task, row, count, other_task, other_row):
    # Unique across tasks, increasing within one (the last row drawn is the furthest), and a job of n
    # tasks with r rows each stays below (2 log2(n r) + 1) n r (Delta's generator: n r).
    from lakelog.writer_features.identity import spark_index, spark_indexes

    got = spark_indexes(task, row, count).tolist()
    assert got == [spark_index(task, r) for r in range(row, row + count)] and got == sorted(set(got))
    n, r = task + 1, row + count
    assert got[-1] < (2 * (n * r).bit_length() + 1) * n * r
    if (task, row) != (other_task, other_row):
        assert spark_index(task, row) != spark_index(other_task, other_row)


# ---------------------------------------------------------------- restore


@pytest.mark.parametrize("start, step", [(1, 1), (-5, -3), (0, 1 << 40)])
def test_restore_keeps_the_newest_high_water_mark(tmp_path, start, step):
    # As Delta's RESTORE (copySchemaWithMergedHighWaterMarks): the restored schema takes the latest
    # version's mark where it is further on, so a value issued before the restore is never issued again.
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"v": [1]}), identity_columns={"id": {"start": start, "step": step}})
    lakelog.write_table(path, pa.table({"v": [2, 3]}))
    issued = {r["id"] for r in _rows(path)}
    lakelog.Table(path).restore(0)
    assert _mark(path) == start + 2 * step and {r["id"] for r in _rows(path)} == {start}
    lakelog.write_table(path, pa.table({"v": [4]}))
    (new,) = [r["id"] for r in _rows(path) if r["v"] == 4]
    assert new == start + 3 * step and new not in issued and _mark(path) == new
    assert _peer_rows(path) == _rows(path)


def test_restore_of_a_version_without_values_keeps_the_mark(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"v": pa.array([], pa.int64())}), identity_columns={"id": {"start": 10, "step": 10}})
    lakelog.write_table(path, pa.table({"v": [1, 2]}))
    result = lakelog.Table(path).restore(0)  # (version 0 has no mark: the newest one is kept)
    assert result["numRemovedFiles"] == 1 and _mark(path) == 20 and _rows(path) == []
    lakelog.write_table(path, pa.table({"v": [3]}))
    assert [r["id"] for r in _rows(path)] == [30]


def test_restore_matches_marks_by_physical_column(tmp_path):
    # Column mapping: restoring a version from before the identity column was renamed takes the mark of
    # the renamed column (Delta matches columns by physical name).
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"v": [1]}), identity_columns={"id": {"start": 1, "step": 1}},
                        configuration={"delta.columnMapping.mode": "name"})
    restore_to = lakelog.Table(path).version
    lakelog.write_table(path, pa.table({"v": [2, 3]}))
    lakelog.Table(path).rename_column("id", "key")
    lakelog.Table(path).restore(restore_to)
    assert _mark(path) == 3
    lakelog.write_table(path, pa.table({"v": [4]}))
    assert sorted(r["id"] for r in _rows(path)) == [1, 4]


def test_restore_from_the_cli_keeps_the_newest_high_water_mark(tmp_path):
    import subprocess
    import sys

    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"v": [1]}), identity_columns=["id"])
    lakelog.write_table(path, pa.table({"v": [2, 3]}))
    done = subprocess.run([sys.executable, "-m", "lakelog.cli", "restore", path, "0"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert _mark(path) == 3
    lakelog.write_table(path, pa.table({"v": [4]}))
    assert sorted(r["id"] for r in _rows(path)) == [1, 4]


# ---------------------------------------------------------------- updates and explicit values


def test_merge_into_a_delta_rs_table_cannot_write_its_generated_always_identity_values(tmp_path):
    # tests/data/checkpoint-v2-table: written by Databricks, id GENERATED ALWAYS (start 1, step 1, mark 44).
    # A merge that set or inserted ids gave two rows id 39 and moved the mark to 777780.
    path = str(tmp_path / "t")
    shutil.copytree(os.path.join(DATA, "checkpoint-v2-table"), path)
    version, before = lakelog.Table(path).version, _rows(path)
    assert _mark(path) == 44
    keyed = pa.table({"name": ["Alice", "Zed"], "x": pa.array([39, 777780], pa.int64())})
    full = pa.table({"id": pa.array([39, 777780], pa.int64()), "name": ["Alice", "Zed"],
                     "created_at": pa.array([None, None], pa.timestamp("us", "UTC"))})
    attempts = {
        "matched update": (lambda m: m.when_matched_update({"id": "source.x"}), keyed, UPDATE_REFUSED),
        "matched update, column by another case": (lambda m: m.when_matched_update({"target.ID": "source.x"}), keyed, UPDATE_REFUSED),
        "not matched by source update": (lambda m: m.when_not_matched_by_source_update({"id": "target.id + 1"}), keyed, UPDATE_REFUSED),
        "update all, id in the source": (lambda m: m.when_matched_update_all(), full, UPDATE_REFUSED),
        "insert": (lambda m: m.when_not_matched_insert({"name": "source.name", "id": "source.x"}), keyed, INSERT_REFUSED),
        "insert all, id in the source": (lambda m: m.when_not_matched_insert_all(), full, INSERT_REFUSED),
    }
    for what, (clauses, source, error_class) in attempts.items():
        with pytest.raises(IdentityColumnError) as e:
            clauses(lakelog.Table(path).merge(source, "target.name = source.name")).execute()
        assert e.value.column == "id" and e.value.error_class == error_class and "nothing was committed" in str(e.value), what
    with pytest.raises(IdentityColumnError, match=UPDATE_REFUSED):
        lakelog.Table(path).update({"id": "id + 1"}, "id = 38")
    assert lakelog.Table(path).version == version and _rows(path) == before and _mark(path) == 44
    # Leaving the column out: matched rows keep their ids, the inserted row gets the next one.
    lakelog.Table(path).merge(full.select(["name", "created_at"]), "target.name = source.name") \
        .when_matched_update({"name": "upper(source.name)"}).when_not_matched_insert_all().execute()
    after = _rows(path)
    ids = [r["id"] for r in after]
    assert len(ids) == len(set(ids)) == len(before) + 1
    assert {r["id"] for r in after if r["name"] == "ALICE"} == {r["id"] for r in before if r["name"] == "Alice"}
    assert [r["id"] for r in after if r["name"] == "Zed"] == [45] and _mark(path) == 45
    assert _peer_rows(path) == after


@pytest.mark.parametrize("allow_explicit", [False, True])
def test_no_update_sets_an_identity_column(tmp_path, allow_explicit):
    # As Delta, for GENERATED ALWAYS and BY DEFAULT alike: UPDATE on IDENTITY column is not supported.
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"value": [1, 2]}), identity_columns={"id": {"allow_explicit_insert": allow_explicit}})
    t = lakelog.Table(path)
    for updates, predicate in (({"id": "1"}, None), ({"id": "id + 1"}, "value = 2"), ({"ID": 7, "value": "value"}, None)):
        with pytest.raises(IdentityColumnError) as e:
            t.update(updates, predicate)
        assert e.value.error_class == UPDATE_REFUSED and e.value.column == "id"
    assert t.update({"value": "value * 10"})["num_updated_rows"] == 2  # other columns: ids kept
    assert [(r["id"], r["value"]) for r in _rows(path)] == [(1, 10), (2, 20)] and _peer_rows(path) == _rows(path)


def test_a_column_allowing_explicit_inserts_takes_inserted_values_but_no_update(tmp_path):
    # Delta's admission rules for GENERATED BY DEFAULT: INSERT * with the column in the source inserts
    # its values; UPDATE SET * (which would set it) is refused.
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"value": [2, 3, 4]}), identity_columns={"id": {"allow_explicit_insert": True}})
    source = pa.table({"value": [1, 2, 3], "id": pa.array([100, 200, 300], pa.int64())})
    with pytest.raises(IdentityColumnError, match=UPDATE_REFUSED):
        lakelog.Table(path).merge(source, "target.value = source.value").when_matched_update_all().execute()
    lakelog.Table(path).merge(source, "target.value = source.value").when_not_matched_insert_all().execute()
    assert sorted((r["value"], r["id"]) for r in _rows(path)) == [(1, 100), (2, 1), (3, 2), (4, 3)]
    assert _mark(path) == 100
    lakelog.write_table(path, pa.table({"value": [5]}))
    assert [r["id"] for r in _rows(path) if r["value"] == 5] == [101]


def test_appends_cannot_give_values_to_a_generated_always_column(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"v": [1]}), identity_columns=["id"])
    for data in (pa.table({"v": [2], "id": pa.array([5], pa.int64())}), pa.table({"v": [2], "id": pa.array([None], pa.int64())})):
        with pytest.raises(IdentityColumnError) as e:
            lakelog.write_table(path, data)
        assert e.value.error_class == INSERT_REFUSED
    assert lakelog.Table(path).version == 0


# ---------------------------------------------------------------- declaration


def test_a_column_cannot_be_both_identity_and_generated(tmp_path):
    path = str(tmp_path / "t")
    for identity in (["id"], ["ID"], {"id": {"start": 5}}):
        with pytest.raises(InvalidArgumentError, match="both identity and generated"):
            lakelog.write_table(path, pa.table({"v": pa.array([1], pa.int64())}), identity_columns=identity, generated_columns={"id": "v + 1"})
    assert not os.path.exists(os.path.join(path, "_delta_log")) and not _data_files(str(tmp_path))
    # A table whose schema declares both (made by hand) is not written to.
    lakelog.write_table(path, pa.table({"v": pa.array([1], pa.int64())}), identity_columns=["id"])

    def both(schema):
        schema["fields"][1]["metadata"]["delta.generationExpression"] = "v + 1"
    _commit_metadata(path, both)
    with pytest.raises(SchemaMismatchError, match="both an identity column and a generated column"):
        lakelog.write_table(path, pa.table({"v": pa.array([2], pa.int64())}))
    assert [r["v"] for r in _rows(path)] == [1]


# ---------------------------------------------------------------- the generator's invariant, at random


def _grid_next(start: int, step: int, mark: int | None) -> int:
    """The model's k of the first value beyond ``mark`` (k >= 0)."""
    return 0 if mark is None else max(0, (mark - start) // step + 1)


def _round_up(start: int, step: int, v: int) -> int:
    """The sequence's first value at or beyond ``v`` in the step's direction (``v`` not before start)."""
    return start + step * -((start - v) // step)


def _before(step: int, a: int, b: int) -> bool:
    return a < b if step > 0 else a > b


class _Model:
    """What the table must hold: each row's id, which ids were generated, the mark Delta's rules give."""

    def __init__(self, start: int, step: int, allow: bool):
        self.start, self.step, self.allow = start, step, allow
        self.rows: dict[int, int | None] = {}  # v -> id (None: to be checked as generated)
        self.generated: set[int] = set()
        self.mark: int | None = None
        self.next_v = 0

    def draw(self, n: int) -> list[int]:
        k = _grid_next(self.start, self.step, self.mark)
        return [self.start + self.step * (k + i) for i in range(n)]

    def commit(self, new_ids: list[int]) -> None:
        """The mark after a commit that writes rows with ``new_ids`` (generated and explicit)."""
        moving = [i for i in new_ids if not _before(self.step, i, self.start)]
        if moving:
            furthest = max(moving) if self.step > 0 else min(moving)
            r = _round_up(self.start, self.step, furthest)
            self.mark = r if self.mark is None else (max(r, self.mark) if self.step > 0 else min(r, self.mark))

    def overflows(self, new_ids: list[int]) -> bool:
        if any(not LONG_MIN <= i <= LONG_MAX for i in new_ids):
            return True
        moving = [i for i in new_ids if not _before(self.step, i, self.start)]
        if not moving:
            return False
        r = _round_up(self.start, self.step, max(moving) if self.step > 0 else min(moving))
        return not LONG_MIN <= r <= LONG_MAX


starts = st.one_of(st.integers(-1000, 1000), st.integers(LONG_MAX - (1 << 20), LONG_MAX), st.integers(LONG_MIN, LONG_MIN + (1 << 20)),
                   st.integers(LONG_MIN, LONG_MAX))
steps = st.one_of(st.integers(1, 7), st.integers(-7, -1), st.integers(1, 1 << 40), st.integers(-(1 << 40), -1))
explicit_value = st.one_of(st.integers(-50, 50), st.integers(LONG_MIN, LONG_MAX), st.integers(-(1 << 45), 1 << 45))
operations = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 4)),
    st.tuples(st.just("explicit"), st.lists(st.one_of(st.none(), explicit_value), min_size=1, max_size=3)),
    st.tuples(st.just("merge"), st.lists(st.one_of(st.none(), explicit_value), min_size=1, max_size=3)),
    st.tuples(st.just("update"), st.integers(0, 5)),
    st.tuples(st.just("delete"), st.integers(0, 5)),
    st.tuples(st.just("set id"), st.integers(0, 5)),
), min_size=1, max_size=6)


@settings(max_examples=FUZZ or 25, deadline=None, derandomize=not FUZZ, suppress_health_check=list(HealthCheck))
@given(start=starts, step=steps, allow=st.booleans(), ops=operations)
def test_every_commit_keeps_the_identity_generator_invariant(start, step, allow, ops):
    """After every commit: generated values are the sequence's next ones (start + k * step, k >= 0,
    dense for one writer), all values distinct, the mark on the sequence and beyond every generated
    value and every explicit value that moves it; a refused or overflowing write commits nothing, and
    deltalake reads what lakelog reads."""
    tmp = tempfile.mkdtemp(prefix="lakelog-identity-")
    try:
        path = os.path.join(tmp, "t")
        model = _Model(start, step, allow)
        lakelog.write_table(path, pa.table({"v": pa.array([], pa.int64()), "w": pa.array([], pa.int64())}),
                            identity_columns={"id": {"start": start, "step": step, "allow_explicit_insert": allow}})
        for op, arg in ops:
            version = lakelog.Table(path).version
            existing = {i for i in model.rows.values()}
            error = None
            if op in ("append", "explicit", "merge"):
                # Explicit values distinct from the table's and from any this write may draw (the user's
                # own duplicates are theirs to make).
                reserved = existing | set(model.draw(len(arg) if op != "append" else 0))
                given = [None] * arg if op == "append" else [v if v is None or v not in reserved else None for v in arg]
                given = [v if v is None or given.index(v) == n else None for n, v in enumerate(given)]
                explicit = [v for v in given if v is not None]
                drawn = model.draw(len(given) - len(explicit))
                vs = list(range(model.next_v, model.next_v + len(given)))
                model.next_v += len(given)
                if not allow and (op == "explicit" or explicit):  # (an append giving the column, even NULLs, gives values)
                    error = IdentityColumnError
                elif model.overflows(drawn + explicit):
                    error = IdentityOverflowError
                data = {"v": pa.array(vs, pa.int64()), "w": pa.array([0] * len(vs), pa.int64())}
                if op != "append":
                    data["id"] = pa.array(given, pa.int64())
                try:
                    if op == "merge":
                        source = pa.table(data)
                        m = lakelog.Table(path).merge(source, "target.v = source.v").when_matched_update({"w": "source.w"})
                        (m.when_not_matched_insert({"v": "source.v", "w": "source.w", **({"id": "source.id"} if explicit else {})})).execute()
                    else:
                        lakelog.write_table(path, pa.table(data))
                except (IdentityColumnError, IdentityOverflowError) as e:
                    assert isinstance(e, error), (op, e)
                else:
                    assert error is None, (op, given)
                    got = {r["v"]: r["id"] for r in lakelog.Table(path).to_pyarrow().to_pylist() if r["v"] in vs}
                    assert sorted(i for v, i in got.items() if given[v - vs[0]] is None) == sorted(drawn), (op, got)
                    assert all(got[v] == g for v, g in zip(vs, given) if g is not None)
                    model.rows.update(got)
                    model.generated |= set(drawn)
                    model.commit(drawn + explicit)
            elif op == "update":
                lakelog.Table(path).update({"w": "w + 1"}, f"v % 6 = {arg}")
            elif op == "delete":
                lakelog.Table(path).delete(f"v % 6 = {arg}")
                model.rows = {v: i for v, i in model.rows.items() if v % 6 != arg}
            else:
                error = IdentityColumnError
                with pytest.raises(IdentityColumnError, match=UPDATE_REFUSED):
                    lakelog.Table(path).update({"id": "id + 1"}, f"v % 6 = {arg}")
            if error is not None:
                assert lakelog.Table(path).version == version, "a refused write committed"
            rows = lakelog.Table(path).to_pyarrow().to_pylist()
            ids = [r["id"] for r in rows]
            assert {r["v"]: r["id"] for r in rows} == model.rows
            assert None not in ids and len(set(ids)) == len(ids), "identity values repeat"
            mark = _mark(path)
            assert mark == model.mark, (op, mark, model.mark)
            if mark is not None:
                assert (mark - start) % step == 0 and not _before(step, mark, start), "the mark is off the sequence"
                assert all(not _before(step, mark, g) for g in model.generated), "a generated value is beyond the mark"
            for g in model.generated:
                assert (g - start) % step == 0 and (g - start) // step >= 0
            assert _peer_rows(path) == sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_an_identity_column_cannot_be_a_partition_column(tmp_path):
    path = str(tmp_path / "t")
    with pytest.raises(InvalidArgumentError, match="DELTA_IDENTITY_COLUMNS_PARTITION_NOT_SUPPORTED"):
        lakelog.write_table(path, pa.table({"x": [1, 2]}), identity_columns=["id"], partition_by=["id"])
    assert not os.path.exists(os.path.join(path, "_delta_log"))
    lakelog.write_table(path, pa.table({"x": [1, 2]}), identity_columns=["id"], partition_by=["x"])
    assert sorted(lakelog.read_table(path).column("id").to_pylist()) == [1, 2]

"""UPDATE, DELETE and MERGE INTO on lakelog tables by name through plain ``spark.sql`` (copy-on-write and
with deletion vectors, the change feed on), and OPTIMIZE, VACUUM and RESTORE: each statement's metrics
row, the table after it and its change feed checked against a DuckDB model of the same statements and
against lakelog's and deltalake's reads of the table.

The seeded sequences of random statements run one seed per mode by default; LAKELOG_SPARK_SQL_FULL=1 runs
more seeds and longer sequences."""

from __future__ import annotations

import os
import random
import time

import deltalake
import duckdb
import pyarrow as pa
import pytest

import lakelog

from tests.catalog_peers import (FULL, assert_agree, deltalake_rows, full_only, lakelog_rows, location, refused, rows_of,
                                 spark_rows, unique, version_of)

# The Spark tests share one xdist worker (one JVM at a time on the machine).
pytestmark = pytest.mark.xdist_group("spark")

MODES = {"copy_on_write": "false", "deletion_vectors": "true"}
COLUMNS = ["id", "p", "x", "s"]
ROWS = [(1, "a", 10, "k1"), (2, "b", 20, "k2"), (3, "a", None, "k3"), (4, "b", 40, None), (5, "a", 50, "k5"),
        (6, "b", 60, "k6")]
SCHEMA = "id BIGINT, p STRING, x BIGINT, s STRING"
DUCK_SCHEMA = "id BIGINT, p VARCHAR, x BIGINT, s VARCHAR"


class Model:
    """The table in DuckDB: each statement run there too, with what it changed (RETURNING merge_action)."""

    def __init__(self, rows):
        self.con = duckdb.connect()
        self.con.sql(f"CREATE TABLE t ({DUCK_SCHEMA})")
        for r in rows:
            self.con.execute("INSERT INTO t VALUES (?, ?, ?, ?)", list(r))

    def rows(self) -> list[tuple]:
        return rows_of(self.con.sql("SELECT * FROM t").fetch_arrow_table())

    def source(self, name: str, rows) -> None:
        self.con.execute(f"CREATE OR REPLACE TABLE {name} ({DUCK_SCHEMA})")
        for r in rows:
            self.con.execute(f"INSERT INTO {name} VALUES (?, ?, ?, ?)", list(r))

    def run(self, sql: str) -> tuple[dict[str, int], list[tuple]]:
        """Run ``sql``; the number of rows each action changed, and the change feed rows it makes
        (id, p, x, s, _change_type)."""
        before = {r[0]: r for r in self.rows()}
        kind = sql.split()[0].upper()
        returned = self.con.sql(sql + (" RETURNING merge_action, *" if kind == "MERGE" else " RETURNING *")).fetchall()
        counts = {"UPDATE": 0, "DELETE": 0, "INSERT": 0}
        changes = []
        for r in returned:
            action, row = (r[0], tuple(r[1:])) if kind == "MERGE" else (kind, tuple(r))
            counts[action] += 1
            if action == "UPDATE":
                changes += [before[row[0]] + ("update_preimage",), row + ("update_postimage",)]
            elif action == "DELETE":
                changes.append(row + ("delete",))
            else:
                changes.append(row + ("insert",))
        return counts, changes


def _create(spark, mode: str, rows=ROWS) -> tuple[str, str]:
    name = unique("dml")
    spark.sql(f"CREATE TABLE {name} ({SCHEMA}) USING lakelog PARTITIONED BY (p) TBLPROPERTIES ("
              f"'delta.enableChangeDataFeed' = 'true', 'delta.enableDeletionVectors' = '{MODES[mode]}')")
    values = ", ".join("(" + ", ".join("NULL" if v is None else repr(v) for v in r) + ")" for r in rows)
    spark.sql(f"INSERT INTO {name} VALUES {values}")
    return name, location(spark, name)


def _source(spark, model: Model, rows) -> str:
    name = unique("src")
    spark.createDataFrame([list(r) for r in rows], SCHEMA).createOrReplaceTempView(name)
    model.source(name, rows)
    return name


def _changes(spark, name: str, path: str, start: int) -> list[tuple]:
    cols = COLUMNS + ["_change_type", "_commit_version"]
    got = spark_rows(spark.sql(f"SELECT * FROM table_changes('{name}', {start})"), cols)
    assert got == rows_of(lakelog.Table(path).changes(starting_version=start), cols)
    assert got == rows_of(pa.table(deltalake.DeltaTable(path).load_cdf(starting_version=start).read_all()), cols)
    return got


def _check(spark, name: str, path: str, model: Model) -> None:
    assert_agree(spark.table(name), path, COLUMNS, expected=model.rows())


def _run(spark, model: Model, name: str, path: str, statement: str) -> None:
    """Run ``statement`` (``{t}`` the table) by name in Spark and in the model; compare the metrics row,
    the table and the change feed of the new version."""
    before = version_of(path)
    ours = spark.sql(statement.format(t=name)).collect()
    counts, changes = model.run(statement.format(t="t"))
    kind = statement.split()[0].upper()
    if kind == "MERGE":
        assert ours[0].asDict() == {"num_affected_rows": sum(counts.values()), "num_updated_rows": counts["UPDATE"],
                                    "num_deleted_rows": counts["DELETE"], "num_inserted_rows": counts["INSERT"]}, statement
    else:
        assert ours[0].asDict() == {"num_affected_rows": counts[kind]}, statement
    _check(spark, name, path, model)
    if sum(counts.values()):
        version = version_of(path)
        assert version == before + 1, statement
        feed = [r[:-1] for r in _changes(spark, name, path, version)]
        assert sorted(feed, key=repr) == sorted(changes, key=repr), statement


@pytest.mark.parametrize("mode", list(MODES))
def test_update_delete_merge_every_clause(spark, mode):
    name, path = _create(spark, mode)
    model = Model(ROWS)
    src = _source(spark, model, [(2, "b", 200, "B"), (3, "a", 300, "C"), (6, "b", 600, "F"), (7, "a", 700, "G"),
                                 (8, "b", None, "H")])
    statements = [
        "UPDATE {t} SET x = x + 1, s = upper(s) WHERE x > 15",
        "DELETE FROM {t} WHERE id = 5 OR x IS NULL",
        f"MERGE INTO {{t}} AS t USING {src} ON t.id = {src}.id "
        f"WHEN MATCHED AND {src}.x > 250 THEN UPDATE SET x = {src}.x, s = {src}.s "
        "WHEN MATCHED THEN DELETE "
        f"WHEN NOT MATCHED AND {src}.x IS NOT NULL THEN INSERT (id, p, x, s) VALUES ({src}.id, {src}.p, {src}.x, {src}.s) "
        "WHEN NOT MATCHED BY SOURCE AND t.id = 1 THEN UPDATE SET x = -1 "
        "WHEN NOT MATCHED BY SOURCE THEN DELETE",
    ]
    for statement in statements:
        _run(spark, model, name, path, statement)
    added = sum(int((h.get("operationMetrics") or {}).get("numDeletionVectorsAdded", 0)) for h in lakelog.Table(path).history())
    assert (added > 0) == (mode == "deletion_vectors")


@pytest.mark.parametrize("mode", list(MODES) if FULL else ["deletion_vectors"])
def test_merge_star_clauses_and_schema_evolution(spark, mode):
    name, path = _create(spark, mode)
    spark.createDataFrame([(2, "b", 200, "B"), (9, "a", 900, "I")], SCHEMA).createOrReplaceTempView("star_src")
    r = spark.sql(f"MERGE INTO {name} t USING star_src s ON t.id = s.id "
                  "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *").first()
    assert tuple(r) == (2, 1, 0, 1)
    expected = [r for r in ROWS if r[0] != 2] + [(2, "b", 200, "B"), (9, "a", 900, "I")]
    assert_agree(spark.table(name), path, expected=expected)
    # Without schema evolution the source's extra columns are left out: the schema stays.
    spark.createDataFrame([(1, "a", 11, "q", True), (10, "b", 100, "J", False)],
                          "id long, p string, x long, s string, flag boolean").createOrReplaceTempView("extra_src")
    r = spark.sql(f"MERGE INTO {name} t USING extra_src s ON t.id = s.id "
                  "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *").first()
    assert tuple(r) == (2, 1, 0, 1)
    assert lakelog.Table(path).schema.names == COLUMNS
    expected = [e for e in expected if e[0] != 1] + [(1, "a", 11, "q"), (10, "b", 100, "J")]
    assert_agree(spark.table(name), path, expected=expected)
    spark.createDataFrame([(1, "a", 12, "r", True), (11, "b", 110, "K", False)],
                          "id long, p string, x long, s string, flag boolean").createOrReplaceTempView("evolve_src")
    before = version_of(path)
    r = spark.sql(f"MERGE WITH SCHEMA EVOLUTION INTO {name} t USING evolve_src s ON t.id = s.id "
                  "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *").first()
    assert tuple(r) == (2, 1, 0, 1)
    assert version_of(path) == before + 1
    assert lakelog.Table(path).schema.names == ["id", "p", "x", "s", "flag"]
    expected = [e + (None,) for e in expected if e[0] != 1] + [(1, "a", 12, "r", True), (11, "b", 110, "K", False)]
    assert_agree(spark.table(name), path, expected=expected)
    # Delta's rule without evolution: UPDATE SET * / INSERT * take the target's columns from the source by name,
    # and a source without all of them is an error.
    spark.createDataFrame([(4, "b", 41)], "id long, p string, x long").createOrReplaceTempView("narrow_src")
    cond, _ = refused(spark, f"MERGE INTO {name} t USING narrow_src s ON t.id = s.id WHEN MATCHED THEN UPDATE SET *")
    assert cond is not None
    assert version_of(path) == before + 1


@full_only
def test_merge_with_a_lakelog_source_and_a_self_merge(spark):
    name, path = _create(spark, "copy_on_write")
    other, _ = _create(spark, "copy_on_write", [(1, "a", 111, "z"), (100, "b", 1000, "new")])
    r = spark.sql(f"MERGE INTO {name} t USING {other} s ON t.id = s.id WHEN MATCHED THEN UPDATE SET x = s.x "
                  "WHEN NOT MATCHED THEN INSERT *").first()
    assert tuple(r) == (2, 1, 0, 1)
    expected = [(1, "a", 111, "k1")] + ROWS[1:] + [(100, "b", 1000, "new")]
    assert_agree(spark.table(name), path, expected=expected)
    r = spark.sql(f"MERGE INTO {name} t USING (SELECT id, x FROM {name} WHERE p = 'a') s ON t.id = s.id "
                  "WHEN MATCHED THEN UPDATE SET x = s.x * 2").first()
    assert tuple(r) == (3, 3, 0, 0)
    expected = [(i, p, x * 2 if (p == "a" and x is not None) else x, s) for i, p, x, s in expected]
    assert_agree(spark.table(name), path, expected=expected)


def test_merge_with_several_source_rows_for_one_target_row_is_refused(spark):
    name, path = _create(spark, "copy_on_write")
    spark.createDataFrame([(1, "a", 1, "x"), (1, "a", 2, "y")], SCHEMA).createOrReplaceTempView("dup_src")
    before = version_of(path)
    cond, message = refused(spark, f"MERGE INTO {name} t USING dup_src s ON t.id = s.id WHEN MATCHED THEN UPDATE SET x = s.x")
    assert cond is not None, message
    assert version_of(path) == before
    # An unconditional delete is fine with several matches (Delta's rule).
    r = spark.sql(f"MERGE INTO {name} t USING dup_src s ON t.id = s.id WHEN MATCHED THEN DELETE").first()
    assert tuple(r) == (1, 0, 1, 0)


def test_update_and_delete_by_path_alias_and_generated_columns(spark, tmp_path):
    path = str(tmp_path / "gen")
    spark.sql(f"CREATE TABLE lakelog.`{path}` (id BIGINT, g BIGINT GENERATED ALWAYS AS (id * 2), s STRING) USING lakelog")
    spark.sql(f"INSERT INTO lakelog.`{path}` (id, s) VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    assert spark.sql(f"UPDATE lakelog.`{path}` AS t SET t.id = t.id + 10 WHERE t.s <> 'b'").first()[0] == 2
    assert_agree(spark.sql(f"SELECT * FROM lakelog.`{path}`"), path, expected=[(2, 4, "b"), (11, 22, "a"), (13, 26, "c")])
    assert spark.sql(f"DELETE FROM lakelog.`{path}` t WHERE t.g > 25").first()[0] == 1
    assert_agree(spark.sql(f"SELECT * FROM lakelog.`{path}`"), path, expected=[(2, 4, "b"), (11, 22, "a")])
    assert spark.sql(f"DELETE FROM lakelog.`{path}` WHERE id > 100").first()[0] == 0
    assert spark.sql(f"UPDATE lakelog.`{path}` SET s = 'z'").first()[0] == 2
    assert spark.sql(f"DELETE FROM lakelog.`{path}`").first()[0] == 2
    assert lakelog_rows(path) == [] == deltalake_rows(path)


# ---------------------------------------------------------------- seeded sequences of random statements

def _predicate(rng: random.Random, q: str = "") -> str:
    """A condition on the table's columns (qualified with ``q``, e.g. ``t.``)."""
    atoms = [f"{q}id % {rng.randint(2, 4)} = {rng.randint(0, 1)}", f"{q}x > {rng.choice([0, 15, 35, 100])}", f"{q}x IS NULL",
             f"{q}s = 'k{rng.randint(1, 8)}'", f"{q}p = '{rng.choice('ab')}'", f"{q}s IS NOT NULL",
             f"{q}id BETWEEN {rng.randint(1, 4)} AND {rng.randint(4, 9)}"]
    first = rng.choice(atoms)
    roll = rng.random()
    if roll < 0.3:
        return f"({first}) {rng.choice(['AND', 'OR'])} ({rng.choice(atoms)})"
    if roll < 0.4:
        return f"NOT ({first})"
    return first


def _statement(rng: random.Random, src: str) -> str:
    kind = rng.choice(["update", "update", "delete", "merge", "merge"])
    if kind == "update":
        sets = rng.choice(["x = x + 1", "s = upper(s)", "x = NULL, s = 'u'", f"p = '{rng.choice('ab')}'", "x = id * 100"])
        return f"UPDATE {{t}} SET {sets} WHERE {_predicate(rng)}"
    if kind == "delete":
        return f"DELETE FROM {{t}} WHERE {_predicate(rng)}"
    clauses = []
    # (Only the last WHEN MATCHED clause may go without a condition: the delete, when there is one, comes first.)
    if rng.random() < 0.4:
        clauses.append(f"WHEN MATCHED AND {rng.choice([f'{src}.x IS NULL', 't.p = ' + repr(rng.choice('ab'))])} THEN DELETE")
    if rng.random() < 0.7:
        cond = rng.choice(["", f" AND {src}.x > 50", " AND t.x IS NULL"])
        clauses.append(f"WHEN MATCHED{cond} THEN UPDATE SET x = {src}.x, s = t.s || {src}.s")
    if rng.random() < 0.7:
        cond = rng.choice(["", f" AND {src}.x IS NOT NULL"])
        clauses.append(f"WHEN NOT MATCHED{cond} THEN INSERT (id, p, x, s) VALUES ({src}.id, {src}.p, {src}.x, {src}.s)")
    if rng.random() < 0.4:
        clauses.append(f"WHEN NOT MATCHED BY SOURCE AND ({_predicate(rng, 't.')}) "
                       "THEN UPDATE SET x = -1")
    if rng.random() < 0.3:
        clauses.append("WHEN NOT MATCHED BY SOURCE AND t.p = 'b' THEN DELETE")
    if not clauses:
        clauses.append("WHEN MATCHED THEN DELETE")
    return f"MERGE INTO {{t}} AS t USING {src} ON t.id = {src}.id " + " ".join(clauses)


SEEDS = list(range(6)) if FULL else [int(os.environ.get("LAKELOG_SPARK_SQL_SEED", "0"))]
LENGTH = 12 if FULL else 3


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("mode", list(MODES))
def test_seeded_statement_sequences(spark, mode, seed):
    rng = random.Random(f"{mode}-{seed}")
    name, path = _create(spark, mode)
    model = Model(ROWS)
    next_id = 100
    for _ in range(LENGTH):
        source_rows = []
        for _ in range(rng.randint(1, 4)):
            if rng.random() < 0.5:
                source_rows.append((rng.randint(1, 8), rng.choice("ab"), rng.choice([None, 5, 55, 555]), f"n{next_id}"))
            else:
                source_rows.append((next_id, rng.choice("ab"), rng.choice([None, 7, 77]), f"n{next_id}"))
            next_id += 1
        # One source row per key (several rows for one target row is an error in both engines).
        source_rows = list({r[0]: r for r in source_rows}.values())
        src = _source(spark, model, source_rows)
        _run(spark, model, name, path, _statement(rng, src))


# ---------------------------------------------------------------- maintenance

def test_optimize_where_and_zorder(spark):
    name = unique("opt")
    spark.sql(f"CREATE TABLE {name} (id BIGINT, p STRING, v DOUBLE) USING lakelog PARTITIONED BY (p)")
    for i in range(3):
        spark.sql(f"INSERT INTO {name} SELECT id + {i * 10}, CAST(id % 2 AS STRING), id * 1.5 FROM range(10)")
    path = location(spark, name)
    rows = lakelog_rows(path)
    files = lambda part: [f for f in lakelog.Table(path).files() if f.startswith(f"p={part}/")]  # noqa: E731
    assert len(files("0")) > 1 and len(files("1")) > 1
    before_p1 = sorted(files("1"))
    out = spark.sql(f"OPTIMIZE {name} WHERE p = '0'").collect()
    assert len(out) == 1 and out[0].path.endswith(path.rstrip("/").split("/")[-1])
    assert len(files("0")) == 1 and sorted(files("1")) == before_p1
    out = spark.sql(f"OPTIMIZE {name} ZORDER BY (v)").collect()
    assert len(files("1")) == 1
    assert_agree(spark.table(name), path, expected=rows)
    history = lakelog.Table(path).history()
    assert [h["operation"] for h in history[:2]] == ["OPTIMIZE", "OPTIMIZE"]
    assert "zOrderBy" in history[0]["operationParameters"]
    assert deltalake.DeltaTable(path).history(1)[0]["operation"] == "OPTIMIZE"
    # OPTIMIZE by path, and WHERE on a data column is refused (Delta: partition columns only).
    spark.sql(f"OPTIMIZE lakelog.`{path}`")
    cond, _ = refused(spark, f"OPTIMIZE {name} WHERE v > 1")
    assert cond is not None


def test_optimize_metrics_are_deltas_struct(spark):
    name = unique("optm")
    spark.sql(f"CREATE TABLE {name} (id BIGINT) USING lakelog")
    spark.sql(f"INSERT INTO {name} VALUES (1)")
    spark.sql(f"INSERT INTO {name} VALUES (2)")
    df = spark.sql(f"OPTIMIZE {name}")
    assert df.schema["metrics"].dataType.typeName() == "struct"
    row = df.select("metrics.numFilesAdded", "metrics.numFilesRemoved", "metrics.filesAdded.totalFiles").first()
    assert tuple(row) == (1, 2, 1)


def test_vacuum_dry_run_and_retain(spark):
    name = unique("vac")
    spark.sql(f"CREATE TABLE {name} (id BIGINT) USING lakelog TBLPROPERTIES "
              "('delta.deletedFileRetentionDuration' = 'interval 0 hours')")
    path = location(spark, name)
    spark.sql(f"INSERT INTO {name} VALUES (1), (2)")
    spark.sql(f"INSERT OVERWRITE {name} VALUES (3)")
    old = set(lakelog.Table(path, version=1).files()) - set(lakelog.Table(path).files())
    assert old
    time.sleep(0.01)
    dry = spark.sql(f"VACUUM {name} RETAIN 0 HOURS DRY RUN").collect()
    assert {r.path.rsplit("/", 1)[-1] for r in dry} == {f.rsplit("/", 1)[-1] for f in old}
    assert all(os.path.exists(os.path.join(path, f)) for f in old)
    spark.sql(f"VACUUM {name} RETAIN 0 HOURS").collect()
    assert not any(os.path.exists(os.path.join(path, f)) for f in old)
    assert_agree(spark.table(name), path, expected=[(3,)])
    assert spark.sql(f"VACUUM lakelog.`{path}` DRY RUN").collect() == []
    # A retention shorter than the table's is refused by default.
    other = unique("vac")
    spark.sql(f"CREATE TABLE {other} (id BIGINT) USING lakelog")
    cond, message = refused(spark, f"VACUUM {other} RETAIN 0 HOURS")
    assert cond == "LAKELOG_RETENTION_DURATION", message


def test_vacuum_honours_deltas_retention_check_switch(spark):
    name = unique("vacswitch")
    spark.sql(f"CREATE TABLE {name} (id BIGINT) USING lakelog")
    spark.sql(f"INSERT INTO {name} VALUES (1)")
    spark.sql(f"INSERT OVERWRITE {name} VALUES (2)")
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        spark.sql(f"VACUUM {name} RETAIN 0 HOURS").collect()
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    assert len(os.listdir(location(spark, name))) == 2  # _delta_log and the live file


def test_vacuum_returns_the_tables_path(spark):
    name = unique("vacpath")
    spark.sql(f"CREATE TABLE {name} (id BIGINT) USING lakelog")
    out = spark.sql(f"VACUUM {name}").collect()
    assert len(out) == 1 and out[0].path.rstrip("/").endswith(name)


def test_restore_to_version_and_timestamp(spark):
    name = unique("restore")
    spark.sql(f"CREATE TABLE {name} (id BIGINT) USING lakelog")
    path = location(spark, name)
    spark.sql(f"INSERT INTO {name} VALUES (1), (2)")
    time.sleep(0.05)
    spark.sql(f"INSERT INTO {name} VALUES (3)")
    spark.sql(f"DELETE FROM {name} WHERE id = 1")
    out = spark.sql(f"RESTORE TABLE {name} TO VERSION AS OF 1").collect()
    assert out[0].asDict().keys() == {"table_size_after_restore", "num_of_files_after_restore", "num_removed_files",
                                      "num_restored_files", "removed_files_size", "restored_files_size"}
    assert out[0].num_of_files_after_restore == len(lakelog.Table(path).files())
    assert_agree(spark.table(name), path, expected=[(1,), (2,)])
    assert lakelog.Table(path).history(1)[0]["operation"] == "RESTORE"
    at = lakelog.Table(path).history()[-3]["timestamp"]  # version 2
    assert lakelog.Table(path).history()[-3]["version"] == 2
    spark.sql(f"RESTORE {name} TO TIMESTAMP AS OF '{at.strftime('%Y-%m-%d %H:%M:%S.%f')}'")
    assert_agree(spark.table(name), path, expected=[(1,), (2,), (3,)])
    spark.sql(f"RESTORE TABLE lakelog.`{path}` TO VERSION AS OF 0")
    assert_agree(spark.table(name), path, expected=[])
    cond, _ = refused(spark, f"RESTORE TABLE {name} TO VERSION AS OF 99")
    assert cond is not None


def test_merge_insert_fills_column_defaults(spark):
    name = unique("mdefault")
    spark.sql(f"CREATE TABLE {name} (id BIGINT GENERATED ALWAYS AS IDENTITY, v STRING, d STRING DEFAULT 'dd') USING lakelog")
    spark.createDataFrame([("a",), ("b",)], "v string").createOrReplaceTempView("mdefault_src")
    spark.sql(f"MERGE INTO {name} t USING mdefault_src s ON t.v = s.v WHEN NOT MATCHED THEN INSERT (v) VALUES (s.v)")
    assert [(r[1], r[2]) for r in assert_agree(spark.table(name), location(spark, name))] == [("a", "dd"), ("b", "dd")]


def test_update_and_merge_set_default_and_identity_on_merge_insert(spark):
    name = unique("mdefault")
    spark.sql(f"CREATE TABLE {name} (id BIGINT GENERATED ALWAYS AS IDENTITY, v STRING, d STRING DEFAULT 'dd') USING lakelog")
    path = location(spark, name)
    spark.createDataFrame([("a",), ("b",)], "v string").createOrReplaceTempView("mdefault_src2")
    spark.sql(f"MERGE INTO {name} t USING mdefault_src2 s ON t.v = s.v WHEN NOT MATCHED THEN INSERT (v, d) VALUES (s.v, 'x')")
    ids = [r[0] for r in lakelog_rows(path)]
    assert len(set(ids)) == 2 and all(i is not None for i in ids)
    spark.sql(f"UPDATE {name} SET d = DEFAULT WHERE v = 'a'")
    assert [(r[1], r[2]) for r in assert_agree(spark.table(name), path)] == [("a", "dd"), ("b", "x")]
    spark.sql(f"MERGE INTO {name} t USING mdefault_src2 s ON t.v = s.v WHEN MATCHED THEN UPDATE SET d = DEFAULT")
    assert [(r[1], r[2]) for r in assert_agree(spark.table(name), path)] == [("a", "dd"), ("b", "dd")]
    assert sorted(r[0] for r in lakelog_rows(path)) == sorted(ids)  # updates keep the identity values


def test_concurrent_statements_by_name_commit_or_conflict_cleanly(spark):
    """INSERTs and UPDATEs from several threads of one session: every INSERT commits (blind appends do not
    conflict), each UPDATE either commits or fails with lakelog's conflict class, and the table holds exactly
    what the committed statements wrote."""
    import threading

    name = unique("concurrent")
    spark.sql(f"CREATE TABLE {name} (id BIGINT, v BIGINT) USING lakelog")
    spark.sql(f"INSERT INTO {name} SELECT id, 0 FROM range(10)")
    path = location(spark, name)
    outcomes = []

    def run(kind, k):
        statement = (f"INSERT INTO {name} SELECT id + {100 * k}, {k} FROM range(5)" if kind == "insert"
                     else f"UPDATE {name} SET v = v + 1 WHERE id < 10")
        try:
            spark.sql(statement).collect()
            outcomes.append((kind, None))
        except Exception as e:  # noqa: BLE001
            outcomes.append((kind, e.getCondition()))

    threads = [threading.Thread(target=run, args=("insert", k)) for k in (1, 2, 3)] + \
        [threading.Thread(target=run, args=("update", k)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert [c for kind, c in outcomes if kind == "insert"] == [None, None, None]
    assert {c for kind, c in outcomes if kind == "update"} <= {None, "LAKELOG_COMMIT_CONFLICT"}
    updates = sum(1 for kind, c in outcomes if kind == "update" and c is None)
    assert updates >= 1
    expected = [(i, updates) for i in range(10)] + [(i + 100 * k, k) for k in (1, 2, 3) for i in range(5)]
    assert_agree(spark.table(name), path, expected=expected)
    assert version_of(path) == 1 + 3 + updates

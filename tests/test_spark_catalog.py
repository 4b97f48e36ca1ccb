"""lakelog tables by name in Spark's catalog (a session from ``spark_ext.configure``): DDL through plain
``spark.sql``, each result checked against the same table read in plain Python by lakelog and deltalake."""

from __future__ import annotations

import os

import deltalake
import pyarrow as pa
import pytest

import lakelog

from tests.catalog_peers import (assert_agree, deltalake_rows, exists, lakelog_rows, location, refused, spark_rows,
                                 unique, version_of, warehouse)

# The Spark tests share one xdist worker (one JVM at a time on the machine).
pytestmark = pytest.mark.xdist_group("spark")


def _history_operations(path: str) -> list[tuple[int, str]]:
    return sorted((h["version"], h["operation"]) for h in lakelog.Table(path).history())


def test_create_managed_table_under_the_warehouse_with_its_clauses_in_the_log(spark):
    name = unique("managed")
    spark.sql(f"CREATE TABLE {name} (id BIGINT, p STRING, x DOUBLE) USING lakelog PARTITIONED BY (p) "
              "TBLPROPERTIES ('delta.appendOnly' = 'false', 'team' = 'core')")
    path = location(spark, name)
    assert path == os.path.join(warehouse(spark), name)
    t = lakelog.Table(path)
    assert t.version == 0 and t.partition_columns == ["p"]
    assert t.schema.names == ["id", "p", "x"]
    assert t.schema.field("id").type == pa.int64() and t.schema.field("x").type == pa.float64()
    assert {"delta.appendOnly": "false", "team": "core"}.items() <= dict(t.metadata.configuration).items()
    assert deltalake.DeltaTable(path).metadata().partition_columns == ["p"]
    spark.sql(f"INSERT INTO {name} VALUES (1, 'a', 1.5), (2, 'b', NULL)")
    assert_agree(spark.table(name), path, expected=[(1, "a", 1.5), (2, "b", None)])
    row = [r for r in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect() if r.col_name in ("Type", "Provider")]
    assert {r.col_name: r.data_type for r in row} == {"Type": "MANAGED", "Provider": "lakelog"}


def test_create_external_table_and_if_not_exists(spark, tmp_path):
    name = unique("ext")
    path = str(tmp_path / "ext")
    spark.sql(f"CREATE TABLE {name} (id BIGINT, s STRING) USING lakelog LOCATION '{path}'")
    assert location(spark, name) == path and version_of(path) == 0
    spark.sql(f"INSERT INTO {name} VALUES (1, 'a')")
    # IF NOT EXISTS on a table that exists: nothing happens (no commit, other columns ignored).
    spark.sql(f"CREATE TABLE IF NOT EXISTS {name} (other INT) USING lakelog")
    assert version_of(path) == 1
    assert lakelog.Table(path).schema.names == ["id", "s"]
    cond, _ = refused(spark, f"CREATE TABLE {name} (id BIGINT) USING lakelog")
    assert cond == "TABLE_OR_VIEW_ALREADY_EXISTS"
    assert version_of(path) == 1
    types = {r.col_name: r.data_type for r in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()}
    assert types["Type"] == "EXTERNAL"
    assert_agree(spark.table(name), path, expected=[(1, "a")])


def test_create_table_by_path(spark, tmp_path):
    path = str(tmp_path / "bypath")
    spark.sql(f"CREATE TABLE lakelog.`{path}` (id BIGINT, s STRING) USING lakelog PARTITIONED BY (s)")
    assert lakelog.Table(path).partition_columns == ["s"]
    spark.sql(f"INSERT INTO lakelog.`{path}` VALUES (1, 'a'), (2, 'b')")
    assert_agree(spark.sql(f"SELECT * FROM lakelog.`{path}`"), path, expected=[(1, "a"), (2, "b")])
    spark.sql(f"CREATE TABLE IF NOT EXISTS lakelog.`{path}` (id BIGINT, s STRING) USING lakelog")
    assert version_of(path) == 1


def test_create_over_a_table_written_from_python_takes_its_schema_from_the_log(spark, tmp_path):
    path = str(tmp_path / "py")
    data = pa.table({"a": pa.array([1, 2, 3], pa.int64()), "b": ["x", "y", "x"], "c": pa.array([1.0, None, 3.0])})
    lakelog.write_table(path, data, partition_by=["b"])
    name = unique("frompy")
    spark.sql(f"CREATE TABLE {name} USING lakelog LOCATION '{path}'")
    assert version_of(path) == 0  # registering writes nothing
    described = spark.sql(f"DESCRIBE TABLE {name}").collect()
    assert [(r.col_name, r.data_type) for r in described[:3]] == [("a", "bigint"), ("b", "string"), ("c", "double")]
    assert "# Partition Information" in [r.col_name for r in described]
    assert_agree(spark.table(name), path, expected=[(1, "x", 1.0), (2, "y", None), (3, "x", 3.0)])
    # The same columns may be given; other ones are refused, and nothing is registered or written.
    same = unique("frompy")
    spark.sql(f"CREATE TABLE {same} (a BIGINT, b STRING, c DOUBLE) USING lakelog PARTITIONED BY (b) LOCATION '{path}'")
    other = unique("frompy")
    cond, message = refused(spark, f"CREATE TABLE {other} (a INT, b STRING, c DOUBLE) USING lakelog LOCATION '{path}'")
    assert cond and cond.startswith("LAKELOG_") and "differ" in message
    assert not spark.catalog.tableExists(other)
    assert version_of(path) == 0
    # A write by name is a commit Python sees.
    spark.sql(f"INSERT INTO {same} VALUES (4, 'y', 4.0)")
    assert lakelog_rows(path) == [(1, "x", 1.0), (2, "y", None), (3, "x", 3.0), (4, "y", 4.0)]


def test_create_without_columns_where_there_is_no_table_is_refused(spark, tmp_path):
    path = str(tmp_path / "nothing")
    name = unique("nothing")
    cond, message = refused(spark, f"CREATE TABLE {name} USING lakelog LOCATION '{path}'")
    assert cond and cond.startswith("LAKELOG_"), (cond, message)
    assert not spark.catalog.tableExists(name) and not exists(path)


def test_ctas_create_or_replace_and_replace(spark):
    src = unique("src")
    spark.sql(f"CREATE TABLE {src} (id BIGINT, p STRING) USING lakelog")
    spark.sql(f"INSERT INTO {src} VALUES (1, 'a'), (2, 'b'), (3, 'a')")
    name = unique("ctas")
    spark.sql(f"CREATE TABLE {name} USING lakelog PARTITIONED BY (p) AS SELECT id, p FROM {src} WHERE id < 3")
    path = location(spark, name)
    assert lakelog.Table(path).partition_columns == ["p"]
    assert_agree(spark.table(name), path, expected=[(1, "a"), (2, "b")])
    # CTAS over a name that exists is refused; IF NOT EXISTS does nothing.
    cond, _ = refused(spark, f"CREATE TABLE {name} USING lakelog AS SELECT 1 AS k")
    assert cond == "TABLE_OR_VIEW_ALREADY_EXISTS"
    spark.sql(f"CREATE TABLE IF NOT EXISTS {name} USING lakelog AS SELECT 1 AS k")
    assert version_of(path) == 0

    spark.sql(f"CREATE OR REPLACE TABLE {name} (z INT, w STRING) USING lakelog")
    t = lakelog.Table(path)
    assert t.version == 1 and t.schema.names == ["z", "w"] and t.partition_columns == []
    assert_agree(spark.table(name), path, expected=[])
    # Time travel still reaches the version before the replace.
    assert_agree(spark.sql(f"SELECT * FROM {name} VERSION AS OF 0"), path, version=0, expected=[(1, "a"), (2, "b")])

    spark.sql(f"REPLACE TABLE {name} USING lakelog AS SELECT id * 10 AS k FROM {src}")
    assert lakelog.Table(path).schema.names == ["k"]
    assert_agree(spark.table(name), path, expected=[(10,), (20,), (30,)])
    spark.sql(f"CREATE OR REPLACE TABLE {name} USING lakelog PARTITIONED BY (p) AS SELECT * FROM {src}")
    assert lakelog.Table(path).partition_columns == ["p"]
    assert_agree(spark.table(name), path, expected=[(1, "a"), (2, "b"), (3, "a")])
    assert version_of(path) == 3

    missing = unique("missing")
    cond, _ = refused(spark, f"REPLACE TABLE {missing} (a INT) USING lakelog")
    assert cond in ("TABLE_OR_VIEW_NOT_FOUND", "LAKELOG_TABLE_NOT_FOUND")
    assert not spark.catalog.tableExists(missing)
    spark.sql(f"CREATE OR REPLACE TABLE {missing} (a INT) USING lakelog")
    assert lakelog.Table(location(spark, missing)).version == 0


@pytest.mark.xfail(strict=True, reason="REPLACE refuses a table whose properties the statement does not repeat, where Delta's "
                                      "REPLACE replaces the table's metadata, properties included")
def test_replace_drops_the_old_tables_properties_as_delta_does(spark):
    name = unique("reprops")
    spark.sql(f"CREATE TABLE {name} (id BIGINT) USING lakelog TBLPROPERTIES ('team' = 'core')")
    spark.sql(f"CREATE OR REPLACE TABLE {name} (id BIGINT, s STRING) USING lakelog TBLPROPERTIES ('contact' = 'me')")
    conf = dict(lakelog.Table(location(spark, name)).metadata.configuration)
    assert conf.get("contact") == "me" and "team" not in conf


def test_create_or_replace_history_names_the_operation(spark):
    name = unique("hist")
    spark.sql(f"CREATE TABLE {name} (id BIGINT) USING lakelog")
    spark.sql(f"CREATE OR REPLACE TABLE {name} (id BIGINT, s STRING) USING lakelog")
    ops = _history_operations(location(spark, name))
    assert ops[0] == (0, "CREATE TABLE")
    # Delta records "CREATE OR REPLACE TABLE"; an engine that records a plain overwrite ("WRITE") is fine too as long
    # as deltalake reads the same history.
    assert ops[1][0] == 1 and ops[1][1] in ("CREATE OR REPLACE TABLE", "REPLACE TABLE", "WRITE")
    assert [h["version"] for h in deltalake.DeltaTable(location(spark, name)).history()] == [1, 0]


def test_cluster_by(spark):
    name = unique("clustered")
    spark.sql(f"CREATE TABLE {name} (a INT, b STRING) USING lakelog CLUSTER BY (a)")
    path = location(spark, name)
    from lakelog.table_features.clustering import clustering_columns

    t = lakelog.Table(path)
    assert clustering_columns(t.snapshot) == ["a"] and t.partition_columns == []
    spark.sql(f"INSERT INTO {name} VALUES (2, 'x'), (1, 'y')")
    spark.sql(f"INSERT INTO {name} VALUES (3, 'z')")
    spark.sql(f"OPTIMIZE {name}")
    assert_agree(spark.table(name), path, expected=[(1, "y"), (2, "x"), (3, "z")])
    assert len(lakelog.Table(path).files()) == 1
    ctas = unique("clustered")
    spark.sql(f"CREATE TABLE {ctas} USING lakelog CLUSTER BY (b) AS SELECT * FROM {name}")
    assert clustering_columns(lakelog.Table(location(spark, ctas)).snapshot) == ["b"]


def test_create_table_like_copies_the_definition_not_the_rows(spark):
    source = unique("likesrc")
    spark.sql(f"CREATE TABLE {source} (a INT, b STRING) USING lakelog PARTITIONED BY (b) "
              "TBLPROPERTIES ('delta.appendOnly' = 'true')")
    spark.sql(f"ALTER TABLE {source} ADD CONSTRAINT positive CHECK (a > 0)")
    spark.sql(f"INSERT INTO {source} VALUES (1, 'x')")
    copy = unique("likecopy")
    spark.sql(f"CREATE TABLE {copy} LIKE {source}")
    t = lakelog.Table(location(spark, copy))
    assert t.partition_columns == ["b"] and t.schema.names == ["a", "b"]
    assert t.metadata.configuration.get("delta.appendOnly") == "true"
    assert t.metadata.configuration.get("delta.constraints.positive") == "a > 0"
    assert deltalake_rows(location(spark, copy)) == [] and spark_rows(spark.table(copy)) == []
    before = version_of(location(spark, copy))
    cond, _ = refused(spark, f"INSERT INTO {copy} VALUES (0, 'y')")
    assert cond is not None and version_of(location(spark, copy)) == before


def test_describe_detail_shows_clustering_columns(spark):
    name = unique("clustered")
    spark.sql(f"CREATE TABLE {name} (a INT, b STRING) USING lakelog CLUSTER BY (a)")
    assert spark.sql(f"DESCRIBE DETAIL {name}").first()["clusteringColumns"] == ["a"]


def test_column_default_generated_identity_and_not_null(spark):
    name = unique("clauses")
    spark.sql(f"""CREATE TABLE {name} (
        id BIGINT NOT NULL,
        s STRING DEFAULT 'none',
        g BIGINT GENERATED ALWAYS AS (id * 10),
        n BIGINT GENERATED ALWAYS AS IDENTITY (START WITH 100 INCREMENT BY 5),
        m BIGINT GENERATED BY DEFAULT AS IDENTITY) USING lakelog""")
    path = location(spark, name)
    fields = {f.name: f for f in lakelog.Table(path).schema}
    assert not fields["id"].nullable
    schema = lakelog.Table(path).metadata.schema_string
    assert '"delta.generationExpression":"id * 10"' in schema.replace(" ", "").replace("id*10", "id * 10")
    assert '"delta.identity.start":100' in schema.replace(" ", "")
    assert '"delta.identity.step":5' in schema.replace(" ", "")
    assert "CURRENT_DEFAULT" in schema

    spark.sql(f"INSERT INTO {name} (id) VALUES (1), (2)")
    spark.sql(f"INSERT INTO {name} (id, s) VALUES (3, DEFAULT), (4, 'four')")
    spark.sql(f"INSERT INTO {name} (id, m) VALUES (5, 7)")
    rows = assert_agree(spark.table(name), path)
    assert [(r[0], r[1], r[2]) for r in rows] == [(1, "none", 10), (2, "none", 20), (3, "none", 30), (4, "four", 40),
                                                  (5, "none", 50)]
    n = [r[3] for r in rows]
    # Identity values: unique, on the start/step grid and above the start (Delta's guarantee; not contiguous).
    assert len(set(n)) == 5 and all(v >= 100 and (v - 100) % 5 == 0 for v in n)
    by_id = {r[0]: r[3] for r in rows}
    assert min(by_id[3], by_id[4]) > max(by_id[1], by_id[2])  # a later insert's values are above the high water mark
    assert rows[4][4] == 7  # BY DEFAULT takes a given value
    m = [r[4] for r in rows[:4]]
    assert len(set(m)) == 4 and all(v is not None for v in m)

    before = version_of(path)
    for statement in (f"INSERT INTO {name} (id, s) VALUES (NULL, 'x')",       # NOT NULL
                      f"INSERT INTO {name} (id, n) VALUES (6, 1000)",         # GENERATED ALWAYS identity given
                      f"INSERT INTO {name} (id, g) VALUES (6, 1)"):           # generated value that is not id * 10
        cond, message = refused(spark, statement)
        assert cond is not None, message
        assert version_of(path) == before, statement
    spark.sql(f"INSERT INTO {name} (id, g) VALUES (6, 60)")  # a generated value that matches is taken
    assert (6, "none", 60) in [(r[0], r[1], r[2]) for r in lakelog_rows(path)]


def test_write_time_violations_carry_lakelog_error_classes(spark):
    name = unique("violations")
    spark.sql(f"CREATE TABLE {name} (id BIGINT, g BIGINT GENERATED ALWAYS AS (id * 10), "
              "n BIGINT GENERATED ALWAYS AS IDENTITY) USING lakelog")
    spark.sql(f"ALTER TABLE {name} ADD CONSTRAINT positive CHECK (id > 0)")
    conditions = {
        refused(spark, f"INSERT INTO {name} (id) VALUES (-1)")[0],
        refused(spark, f"INSERT INTO {name} (id, n) VALUES (1, 1)")[0],
    }
    assert all(c and c.startswith("LAKELOG_") for c in conditions), conditions


def test_check_constraints_add_and_drop(spark):
    name = unique("checks")
    spark.sql(f"CREATE TABLE {name} (id BIGINT, birth DATE) USING lakelog")
    path = location(spark, name)
    spark.sql(f"INSERT INTO {name} VALUES (1, DATE'1950-01-01'), (2, DATE'1990-06-01')")
    spark.sql(f"ALTER TABLE {name} ADD CONSTRAINT dateWithinRange CHECK (birth > '1900-01-01')")
    props = {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}
    assert props["delta.constraints.datewithinrange"].replace("`", "") == "birth > '1900-01-01'"
    assert "delta.constraints.datewithinrange" in lakelog.Table(path).metadata.configuration
    before = version_of(path)
    cond, message = refused(spark, f"INSERT INTO {name} VALUES (3, DATE'1850-01-01')")
    assert "datewithinrange" in message.lower()
    assert version_of(path) == before
    # A constraint the rows already written break is refused, by lakelog's class.
    cond, message = refused(spark, f"ALTER TABLE {name} ADD CONSTRAINT late CHECK (birth > '1960-01-01')")
    assert cond == "LAKELOG_CONSTRAINT_VIOLATION", message
    assert version_of(path) == before
    spark.sql(f"ALTER TABLE {name} DROP CONSTRAINT dateWithinRange")
    assert not any(k.startswith("delta.constraints.") for k in lakelog.Table(path).metadata.configuration)
    spark.sql(f"INSERT INTO {name} VALUES (3, DATE'1850-01-01')")
    spark.sql(f"ALTER TABLE {name} DROP CONSTRAINT IF EXISTS dateWithinRange")
    cond, _ = refused(spark, f"ALTER TABLE {name} DROP CONSTRAINT dateWithinRange")
    assert cond is not None
    assert_agree(spark.table(name), path)
    assert len(lakelog_rows(path)) == 3


def test_alter_table_columns_and_properties(spark):
    name = unique("alter")
    spark.sql(f"CREATE TABLE {name} (id BIGINT, a INT, b STRING NOT NULL, c STRING) USING lakelog "
              "TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    path = location(spark, name)
    spark.sql(f"INSERT INTO {name} VALUES (1, 1, 'x', 'c1'), (2, 2, 'y', 'c2')")
    spark.sql(f"ALTER TABLE {name} ADD COLUMNS (d DOUBLE, e STRUCT<f: INT>)")
    spark.sql(f"ALTER TABLE {name} RENAME COLUMN c TO c2")
    spark.sql(f"ALTER TABLE {name} DROP COLUMN d")
    assert lakelog.Table(path).schema.names == ["id", "a", "b", "c2", "e"]
    # deltalake reads the column-mapped table with its logical names.
    assert deltalake_rows(path) == [(1, 1, "x", "c1", None), (2, 2, "y", "c2", None)]
    spark.sql(f"ALTER TABLE {name} ALTER COLUMN b DROP NOT NULL")
    assert lakelog.Table(path).schema.field("b").nullable
    spark.sql(f"ALTER TABLE {name} ALTER COLUMN c2 SET DEFAULT 'zz'")
    spark.sql(f"INSERT INTO {name} (id, a) VALUES (3, 3)")
    spark.sql(f"ALTER TABLE {name} ALTER COLUMN c2 DROP DEFAULT")
    spark.sql(f"INSERT INTO {name} (id, a) VALUES (4, 4)")
    assert_agree(spark.table(name), path, expected=[(1, 1, "x", "c1", None), (2, 2, "y", "c2", None),
                                                     (3, 3, None, "zz", None), (4, 4, None, None, None)])
    spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('k1' = 'v1', 'k2' = 'v2')")
    spark.sql(f"ALTER TABLE {name} UNSET TBLPROPERTIES ('k1')")
    spark.sql(f"ALTER TABLE {name} UNSET TBLPROPERTIES IF EXISTS ('nope')")
    conf = dict(lakelog.Table(path).metadata.configuration)
    assert conf.get("k2") == "v2" and "k1" not in conf
    assert deltalake.DeltaTable(path).metadata().configuration.get("k2") == "v2"
    # Type widening: the new type is the log's; old files are read as the new type.
    spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    spark.sql(f"ALTER TABLE {name} ALTER COLUMN a TYPE BIGINT")
    assert lakelog.Table(path).schema.field("a").type == pa.int64()
    spark.sql(f"INSERT INTO {name} (id, a) VALUES (5, 5000000000)")
    assert_agree(spark.table(name), path, peer=False)  # (deltalake cannot read type widening)
    assert spark.table(name).schema["a"].dataType.simpleString() == "bigint"


def test_alter_table_with_several_changes_is_all_or_nothing(spark):
    name = unique("atomic")
    spark.sql(f"CREATE TABLE {name} (a INT, b STRING) USING lakelog")
    path = location(spark, name)
    for statement in (f"ALTER TABLE {name} ADD COLUMNS (ok INT, bad INT COMMENT 'about')",
                      f"ALTER TABLE {name} SET TBLPROPERTIES ('k' = 'v', 'comment' = 'about')"):
        cond, message = refused(spark, statement)
        assert cond is not None, message
    assert version_of(path) == 0
    assert lakelog.Table(path).schema.names == ["a", "b"] and "k" not in lakelog.Table(path).metadata.configuration


def test_alter_table_set_location(spark, tmp_path):
    name = unique("setloc")
    old, new = str(tmp_path / "old"), str(tmp_path / "new")
    spark.sql(f"CREATE TABLE {name} (id BIGINT) USING lakelog LOCATION '{old}'")
    spark.sql(f"INSERT INTO {name} VALUES (1)")
    lakelog.write_table(new, pa.table({"id": pa.array([2], pa.int64())}))
    try:
        spark.sql(f"ALTER TABLE {name} SET LOCATION '{new}'")
    except Exception as e:  # noqa: BLE001 - a refusal by name is fine, if it changes nothing
        assert e.getCondition() is not None
        assert location(spark, name) == old and "location" not in lakelog.Table(old).metadata.configuration
        return
    assert location(spark, name) == new and spark_rows(spark.table(name)) == [(2,)]
    assert "location" not in lakelog.Table(old).metadata.configuration


def test_rename_and_drop_columns_need_column_mapping(spark):
    name = unique("nomapping")
    spark.sql(f"CREATE TABLE {name} (id BIGINT, c STRING) USING lakelog")
    path = location(spark, name)
    for statement in (f"ALTER TABLE {name} RENAME COLUMN c TO d", f"ALTER TABLE {name} DROP COLUMN c"):
        cond, message = refused(spark, statement)
        assert cond == "LAKELOG_COLUMN_MAPPING_REQUIRED", message
    assert version_of(path) == 0


def test_drop_table_managed_removes_data_external_keeps_it(spark, tmp_path):
    managed = unique("dropm")
    spark.sql(f"CREATE TABLE {managed} (id BIGINT) USING lakelog")
    spark.sql(f"INSERT INTO {managed} VALUES (1)")
    mpath = location(spark, managed)
    assert exists(mpath)
    spark.sql(f"DROP TABLE {managed}")
    assert not spark.catalog.tableExists(managed) and not os.path.exists(mpath)
    # The name is free again, for a new empty table.
    spark.sql(f"CREATE TABLE {managed} (id BIGINT) USING lakelog")
    assert spark_rows(spark.table(managed)) == [] and version_of(mpath) == 0

    external = unique("drope")
    epath = str(tmp_path / "ext")
    spark.sql(f"CREATE TABLE {external} (id BIGINT) USING lakelog LOCATION '{epath}'")
    spark.sql(f"INSERT INTO {external} VALUES (1), (2)")
    spark.sql(f"DROP TABLE {external}")
    assert not spark.catalog.tableExists(external)
    assert lakelog_rows(epath) == [(1,), (2,)] and deltalake_rows(epath) == [(1,), (2,)]
    # Registering it again finds the data.
    spark.sql(f"CREATE TABLE {external} USING lakelog LOCATION '{epath}'")
    assert spark_rows(spark.table(external)) == [(1,), (2,)]
    spark.sql(f"DROP TABLE IF EXISTS {unique('never')}")


def test_show_tblproperties_show_create_table_and_describe(spark):
    name = unique("show")
    spark.sql(f"CREATE TABLE {name} (id BIGINT NOT NULL, p STRING, s STRING DEFAULT 'd') USING lakelog "
              "PARTITIONED BY (p) TBLPROPERTIES ('department' = 'accounting', 'delta.appendOnly' = 'false')")
    path = location(spark, name)
    props = {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES {name}").collect()}
    assert {k: v for k, v in props.items() if not k.startswith("delta.columnMapping")} == \
        {k: v for k, v in lakelog.Table(path).metadata.configuration.items()}
    assert props["department"] == "accounting"
    one = spark.sql(f"SHOW TBLPROPERTIES {name} ('department')").collect()
    assert [(r.key, r.value) for r in one] == [("department", "accounting")]

    ddl = spark.sql(f"SHOW CREATE TABLE {name}").first()[0]
    assert "USING lakelog" in ddl and "PARTITIONED BY (p)" in ddl
    # The statement SHOW CREATE TABLE gives makes the same table (under another name, at another location).
    copy = unique("copy")
    recreated = ddl.replace(f"spark_catalog.default.{name}", copy).split("LOCATION")[0] + \
        ddl.split("LOCATION")[1].split("\n", 1)[1]
    spark.sql(recreated)
    other = lakelog.Table(location(spark, copy))
    mine = lakelog.Table(path)
    assert other.partition_columns == mine.partition_columns
    assert other.metadata.schema_string == mine.metadata.schema_string
    assert dict(other.metadata.configuration) == dict(mine.metadata.configuration)

    described = spark.sql(f"DESCRIBE TABLE {name}").collect()
    assert [(r.col_name, r.data_type) for r in described[:3]] == [("id", "bigint"), ("p", "string"), ("s", "string")]
    extended = {r.col_name: r.data_type for r in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()}
    assert extended["Provider"] == "lakelog" and extended["Table"] == name


def test_describe_detail_and_history_agree_with_the_log(spark):
    name = unique("detail")
    spark.sql(f"CREATE TABLE {name} (id BIGINT, p STRING) USING lakelog PARTITIONED BY (p) TBLPROPERTIES ('k' = 'v')")
    spark.sql(f"INSERT INTO {name} VALUES (1, 'a'), (2, 'b')")
    spark.sql(f"DELETE FROM {name} WHERE id = 1")
    path = location(spark, name)
    t = lakelog.Table(path)
    detail = spark.sql(f"DESCRIBE DETAIL {name}").first()
    assert detail["format"] == "delta"
    assert detail["id"] == t.metadata.id == deltalake.DeltaTable(path).metadata().id
    assert detail["partitionColumns"] == ["p"]
    assert detail["numFiles"] == len(t.files()) == len(deltalake.DeltaTable(path).file_uris())
    assert detail["sizeInBytes"] == sum(f.size for f in t.snapshot.files.values())
    assert detail["properties"] == {"k": "v"}
    assert (detail["minReaderVersion"], detail["minWriterVersion"]) == (t.protocol.min_reader_version, t.protocol.min_writer_version)
    assert detail["location"].endswith(path) or detail["location"] == path
    history = spark.sql(f"DESCRIBE HISTORY {name}").collect()
    assert [(h.version, h.operation) for h in history] == \
        [(h["version"], h["operation"]) for h in t.history()] == [(2, "DELETE"), (1, "WRITE"), (0, "CREATE TABLE")]
    assert [h["version"] for h in deltalake.DeltaTable(path).history()] == [2, 1, 0]
    assert [h.version for h in spark.sql(f"DESCRIBE HISTORY {name} LIMIT 1").collect()] == [2]
    assert history[0].operationMetrics["numDeletedRows"] == "1"


def test_describe_detail_names_the_catalog_table(spark):
    name = unique("detailname")
    spark.sql(f"CREATE TABLE {name} (id BIGINT) USING lakelog")
    assert spark.sql(f"DESCRIBE DETAIL {name}").first()["name"] == f"spark_catalog.default.{name}"


def test_history_predicates_are_sql(spark):
    name = unique("predicate")
    spark.sql(f"CREATE TABLE {name} (id BIGINT) USING lakelog")
    spark.sql(f"INSERT INTO {name} VALUES (1), (2)")
    spark.sql(f"DELETE FROM {name} WHERE id = 1")
    predicate = spark.sql(f"DESCRIBE HISTORY {name} LIMIT 1").first().operationParameters["predicate"]
    assert "Column<" not in predicate and "id" in predicate

"""Writer features enforced on every write path (lakelog.table_features.row_rules): CHECK constraints, invariants,
generated columns and column defaults, on tables made by deltalake, by Spark (tests/data) and by hand as
Spark writes them; deltalake reads back what lakelog wrote, and refuses what lakelog refuses."""

import datetime as dt
import json
import os
import shutil

import deltalake
import orjson
import pyarrow as pa
import pytest

import lakelog
from lakelog.errors import ConstraintViolationError, GeneratedColumnError, InvalidArgumentError, PredicateError, UnsupportedFeatureError
from tests.concurrent_writers import append_from_processes

DATA = os.path.join(os.path.dirname(__file__), "data")


def _rows(path):
    """Rows as deltalake reads them, sorted."""
    t = deltalake.DeltaTable(str(path)).to_pyarrow_table()
    return sorted(t.to_pylist(), key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _ours(path):
    return sorted(lakelog.Table(str(path)).to_pyarrow().to_pylist(), key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _constrained(path):
    """A deltalake-made table with a deltalake-added CHECK constraint."""
    deltalake.write_deltalake(str(path), pa.table({"id": pa.array([1, 2, 3], pa.int64()), "p": ["a", "b", "a"], "v": [10, 20, 30]}),
                              partition_by=["p"])
    deltalake.DeltaTable(str(path)).alter.add_constraint({"v_positive": "v > 0"})
    return lakelog.Table(str(path))


def test_check_constraint_is_enforced_on_every_write_path(tmp_path):
    path = tmp_path / "t"
    t = _constrained(path)
    start = t.version

    def refused(fn):
        with pytest.raises(ConstraintViolationError) as e:
            fn()
        assert "v_positive" in str(e.value) and "v > 0" in str(e.value)
        assert lakelog.Table(str(path)).version == start  # nothing committed
        return e.value

    bad = pa.table({"id": pa.array([4, 5], pa.int64()), "p": ["a", "b"], "v": [5, -1]})
    err = refused(lambda: lakelog.write_table(str(path), bad))
    assert err.row["v"] == -1 and err.constraint == "v_positive"
    refused(lambda: lakelog.write_table(str(path), bad, mode="overwrite"))
    refused(lambda: lakelog.write_table(str(path), bad, mode="overwrite", predicate="p = 'a' OR p = 'b'"))
    refused(lambda: lakelog.write_table(str(path), bad, mode="overwrite", partition_overwrite="dynamic"))
    refused(lambda: t.update({"v": "v - 15"}, "id = 1"))
    refused(lambda: t.merge(bad, "target.id = source.id").when_not_matched_insert_all().execute())
    refused(lambda: t.merge(pa.table({"id": pa.array([2], pa.int64()), "v": [-2]}), "target.id = source.id")
            .when_matched_update({"v": "source.v"}).execute())
    # NULL is a violation, as in Delta
    refused(lambda: lakelog.write_table(str(path), pa.table({"id": pa.array([6], pa.int64()), "p": ["a"], "v": pa.array([None], pa.int64())})))

    # Good rows pass; DELETE is always allowed; deltalake reads what lakelog wrote
    lakelog.write_table(str(path), pa.table({"id": pa.array([7], pa.int64()), "p": ["b"], "v": [70]}))
    t.update({"v": "v + 1"}, "id = 1")
    t.merge(pa.table({"id": pa.array([2, 8], pa.int64()), "p": ["b", "a"], "v": [21, 80]}), "target.id = source.id") \
        .when_matched_update_all().when_not_matched_insert_all().execute()
    t.delete("id = 3")
    expected = [{"id": 1, "p": "a", "v": 11}, {"id": 2, "p": "b", "v": 21}, {"id": 7, "p": "b", "v": 70}, {"id": 8, "p": "a", "v": 80}]
    assert _rows(path) == _ours(path) == sorted(expected, key=lambda r: json.dumps(r, sort_keys=True))


def test_add_constraint_checks_existing_rows_upgrades_the_protocol_and_deltalake_enforces_it(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": [1, 2, 3], "name": ["a", "b", None]}))
    t = lakelog.Table(path)
    with pytest.raises(ConstraintViolationError, match="name_nn.*'name': None"):
        t.add_constraint({"name_nn": "name IS NOT NULL"})
    assert t.version == 0
    with pytest.raises(PredicateError):
        t.add_constraint({"bad": "no_such_column > 1"})
    with pytest.raises(InvalidArgumentError):
        t.add_constraint({"x": 1})
    v = t.add_constraint({"Id_Positive": "id > 0"})
    with pytest.raises(InvalidArgumentError, match="already has a constraint"):
        t.add_constraint({"id_positive": "id > 1"})
    log = [orjson.loads(line) for line in open(os.path.join(path, "_delta_log", f"{v:020d}.json"))]
    info = next(a["commitInfo"] for a in log if "commitInfo" in a)
    assert info["operation"] == "ADD CONSTRAINT" and info["operationParameters"] == {"name": "id_positive", "expr": "id > 0"}
    dt_ = deltalake.DeltaTable(path)
    assert dt_.protocol().min_writer_version == 3
    assert dt_.metadata().configuration["delta.constraints.id_positive"] == "id > 0"
    with pytest.raises(Exception, match="(?i)check|constraint|invalid"):  # deltalake enforces what lakelog added
        deltalake.write_deltalake(path, pa.table({"id": [-1], "name": ["z"]}), mode="append")
    t.drop_constraint("ID_POSITIVE")
    assert "delta.constraints.id_positive" not in deltalake.DeltaTable(path).metadata().configuration
    lakelog.write_table(path, pa.table({"id": [-1], "name": ["z"]}))
    with pytest.raises(InvalidArgumentError, match="no constraint"):
        t.drop_constraint("id_positive")
    assert t.drop_constraint("id_positive", if_exists=True) == t.version


def test_constraint_on_a_table_features_protocol_lists_the_feature(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": [1, 2]}), configuration={"delta.enableDeletionVectors": "true"})
    t = lakelog.Table(path)
    t.add_constraint({"small": "id < 100"})
    p = deltalake.DeltaTable(path).protocol()
    assert p.min_writer_version == 7 and "checkConstraints" in p.writer_features and "deletionVectors" in p.writer_features
    with pytest.raises(ConstraintViolationError):
        t.update({"id": "id * 100"})  # (deletion-vector path)
    t.delete("id = 1")
    assert _ours(path) == [{"id": 2}]


def _spark_style_table(path, fields, rows, writer_version=2):
    """A table whose log is written as Spark writes it (protocol, metaData with field metadata), with
    its rows appended by lakelog afterwards only through the checks under test."""
    os.makedirs(os.path.join(path, "_delta_log"))
    schema = {"type": "struct", "fields": fields}
    actions = [
        {"commitInfo": {"timestamp": 1700000000000, "operation": "CREATE TABLE", "operationParameters": {}}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": writer_version}},
        {"metaData": {"id": "0c2b4a8e-0000-4000-8000-000000000001", "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps(schema), "partitionColumns": [], "configuration": {}, "createdTime": 1700000000000}},
    ]
    with open(os.path.join(path, "_delta_log", "00000000000000000000.json"), "w") as f:
        f.write("\n".join(json.dumps(a) for a in actions) + "\n")


def test_invariants_are_enforced_including_nested_fields(tmp_path):
    path = str(tmp_path / "t")
    inv = lambda e: json.dumps({"expression": {"expression": e}})  # noqa: E731
    _spark_style_table(path, [
        {"name": "value", "type": "integer", "nullable": True, "metadata": {"delta.invariants": inv("value < 3")}},
        {"name": "s", "type": {"type": "struct", "fields": [
            {"name": "n", "type": "integer", "nullable": True, "metadata": {"delta.invariants": inv("s.n >= 0")}}]},
         "nullable": True, "metadata": {}},
    ], [])
    schema = pa.schema([("value", pa.int32()), ("s", pa.struct([("n", pa.int32())]))])
    lakelog.write_table(path, pa.table({"value": [1, 2], "s": [{"n": 0}, {"n": 5}]}, schema=schema))
    with pytest.raises(ConstraintViolationError, match="invariant on column 'value'"):
        lakelog.write_table(path, pa.table({"value": [3], "s": [{"n": 1}]}, schema=schema))
    with pytest.raises(ConstraintViolationError, match=r"invariant on column 's\.n'"):
        lakelog.write_table(path, pa.table({"value": [1], "s": [{"n": -1}]}, schema=schema))
    t = lakelog.Table(path)
    with pytest.raises(ConstraintViolationError):
        t.update({"value": "value + 2"})
    t.delete("value = 1")
    assert _rows(path) == _ours(path) == [{"value": 2, "s": {"n": 5}}]


def test_spark_written_generated_column_table_takes_every_write(tmp_path):
    # tests/data/dbr_8_1_generated_columns: written by Databricks Runtime 8.1 (from delta-rs's test data); c2 = c1 + 1
    path = str(tmp_path / "t")
    shutil.copytree(os.path.join(DATA, "dbr_8_1_generated_columns"), path)
    lakelog.write_table(path, pa.table({"c1": pa.array([1, 2], pa.int32())}))  # c2 computed
    lakelog.write_table(path, pa.table({"c1": pa.array([3], pa.int32()), "c2": pa.array([4], pa.int32())}))  # given, equal
    with pytest.raises(GeneratedColumnError, match=r"c2.*c1 \+ 1.*gives 9 where the expression computes 4"):
        lakelog.write_table(path, pa.table({"c1": pa.array([3], pa.int32()), "c2": pa.array([9], pa.int32())}))
    t = lakelog.Table(path)
    t.update({"c1": "c1 * 10"}, "c1 = 2")  # c2 recomputed
    with pytest.raises(GeneratedColumnError):
        t.update({"c2": "0"}, "c1 = 1")
    t.merge(pa.table({"c1": pa.array([3, 7], pa.int32())}), "target.c1 = source.c1") \
        .when_matched_update({"c1": "source.c1 + 100"}).when_not_matched_insert({"c1": "source.c1"}).execute()
    t.merge(pa.table({"c1": pa.array([9], pa.int32())}), "target.c1 = source.c1").when_not_matched_insert_all().execute()  # c2 not needed
    expected = [{"c1": 1, "c2": 2}, {"c1": 20, "c2": 21}, {"c1": 103, "c2": 104}, {"c1": 7, "c2": 8}, {"c1": 9, "c2": 10}]
    assert _rows(path) == _ours(path) == sorted(expected, key=lambda r: json.dumps(r, sort_keys=True))
    deltalake.write_deltalake(path, pa.table({"c1": pa.array([50], pa.int32())}), mode="append")  # and deltalake still writes there
    assert {"c1": 50, "c2": 51} in _ours(path)


def test_generated_columns_declared_from_python_partition_a_table_and_deltalake_honours_them(tmp_path):
    path = str(tmp_path / "t")
    ts = pa.array([dt.datetime(2026, 1, 1, 23, 0), dt.datetime(2026, 1, 2, 1, 0)], pa.timestamp("us", tz="UTC"))
    v = lakelog.write_table(path, pa.table({"id": [1, 2], "ts": ts}), partition_by="day",
                            generated_columns={"day": "CAST(ts AS DATE)", "id_name": "concat('n', id)"})
    meta = deltalake.DeltaTable(path)
    assert meta.protocol().min_writer_version == 4
    fields = {f["name"]: f for f in json.loads(meta.schema().to_json())["fields"]}
    assert fields["day"]["metadata"]["delta.generationExpression"] == "CAST(ts AS DATE)"
    assert fields["day"]["type"] == "date" and fields["id_name"]["type"] == "string"
    assert sorted(a.partition_values["day"] for a in lakelog.Table(path).snapshot.files.values()) == ["2026-01-01", "2026-01-02"]
    # dynamic partition overwrite of a generated partition column: partitions come from the computed values
    lakelog.write_table(path, pa.table({"id": [3], "ts": ts.slice(0, 1)}), mode="overwrite", partition_overwrite="dynamic")
    deltalake.write_deltalake(path, pa.table({"id": [4], "ts": ts.slice(1, 1)}), mode="append")
    rows = {r["id"]: (str(r["day"]), r["id_name"]) for r in _ours(path)}
    assert rows == {2: ("2026-01-02", "n2"), 3: ("2026-01-01", "n3"), 4: ("2026-01-02", "n4")}
    assert v == 0 and _rows(path) == _ours(path)
    with pytest.raises(InvalidArgumentError, match="creates the table"):
        lakelog.write_table(path, pa.table({"id": [5], "ts": ts.slice(0, 1)}), generated_columns={"x": "id"})
    with pytest.raises(PredicateError):
        lakelog.write_table(str(tmp_path / "u"), pa.table({"id": [1]}), generated_columns={"x": "nope + 1"})


def test_schema_evolution_keeps_generation_expressions_and_constraints(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"a": [1]}), generated_columns={"b": "a * 2"})
    t = lakelog.Table(path)
    t.add_constraint({"a_small": "a < 10"})
    lakelog.write_table(path, pa.table({"a": [2], "c": ["x"]}), schema_mode="merge")
    t.merge(pa.table({"a": [3], "d": [1.5]}), "target.a = source.a", schema_mode="merge").when_not_matched_insert_all().execute()
    fields = {f["name"]: f for f in json.loads(lakelog.Table(path).snapshot.metadata.schema_string)["fields"]}
    assert fields["b"]["metadata"]["delta.generationExpression"] == "a * 2"
    assert sorted((r["a"], r["b"]) for r in _ours(path)) == [(1, 2), (2, 4), (3, 6)]
    with pytest.raises(ConstraintViolationError):
        lakelog.write_table(path, pa.table({"a": [11]}))


def test_column_defaults_fill_appends_that_lack_the_column(tmp_path):
    path = str(tmp_path / "t")
    os.makedirs(os.path.join(path, "_delta_log"))
    schema = {"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "status", "type": "string", "nullable": False, "metadata": {"CURRENT_DEFAULT": "'new'", "EXISTS_DEFAULT": "'new'"}},
    ]}
    actions = [
        {"commitInfo": {"timestamp": 1700000000000, "operation": "CREATE TABLE", "operationParameters": {}}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["allowColumnDefaults"]}},
        {"metaData": {"id": "0c2b4a8e-0000-4000-8000-000000000002", "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps(schema), "partitionColumns": [], "configuration": {}, "createdTime": 1700000000000}},
    ]
    with open(os.path.join(path, "_delta_log", "00000000000000000000.json"), "w") as f:
        f.write("\n".join(json.dumps(a) for a in actions) + "\n")
    lakelog.write_table(path, pa.table({"id": [1, 2]}))
    lakelog.write_table(path, pa.table({"id": [3], "status": ["done"]}))
    assert sorted((r["id"], r["status"]) for r in _ours(path)) == [(1, "new"), (2, "new"), (3, "done")]


def test_a_table_whose_metadata_has_no_schema_yet_is_a_typed_refusal_until_one_is_set(tmp_path):
    from lakelog.errors import CorruptLogError, TableWithoutSchemaError

    path = str(tmp_path / "dlt")
    os.makedirs(os.path.join(path, "_delta_log"))
    meta = {"id": "0c2b4a8e-0000-4000-8000-00000000000a", "format": {"provider": "parquet", "options": {}}, "partitionColumns": [],
            "configuration": {"pipelines.pipelineId": "p"}, "createdTime": 1700000000000}
    with open(os.path.join(path, "_delta_log", f"{0:020d}.json"), "w") as f:  # as Delta Live Tables creates a table
        f.write(json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}) + "\n" + json.dumps({"metaData": meta}) + "\n")
    for attempt in (lambda: lakelog.Table(path), lambda: lakelog.write_table(path, pa.table({"a": [1]}))):
        with pytest.raises(TableWithoutSchemaError, match="no schema") as e:
            attempt()
        assert not isinstance(e.value, CorruptLogError)
    schema = {"type": "struct", "fields": [{"name": "a", "type": "long", "nullable": True, "metadata": {}}]}
    with open(os.path.join(path, "_delta_log", f"{1:020d}.json"), "w") as f:  # the pipeline's first update sets it
        f.write(json.dumps({"metaData": {**meta, "schemaString": json.dumps(schema)}}) + "\n")
    lakelog.write_table(path, pa.table({"a": [1]}))
    assert _ours(path) == [{"a": 1}]  # (deltalake cannot open this log at all: it requires schemaString in every metaData)


def test_columns_that_constraints_or_generation_expressions_read_cannot_be_renamed_or_dropped(tmp_path):
    from lakelog.errors import SchemaMismatchError

    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"a": [1], "b": [2], "c": [3]}), configuration={"delta.columnMapping.mode": "name"},
                        generated_columns={"g": "a + 1"})
    t = lakelog.Table(path)
    t.add_constraint({"b_small": "b < 10"})
    for fn in (lambda: t.rename_column("a", "x"), lambda: t.drop_column("A")):
        with pytest.raises(SchemaMismatchError, match=r"generated column 'g' \(a \+ 1\) reads it.*Table.drop_column\('g'\)"):
            fn()
    for fn in (lambda: t.rename_column("b", "x"), lambda: t.drop_column("B")):
        with pytest.raises(SchemaMismatchError, match=r"CHECK constraint\(s\) b_small \(b < 10\) read it.*drop_constraint\('b_small'\)"):
            fn()
    t.rename_column("c", "c2")
    t.rename_column("g", "g2")  # the generated column itself is renamed as Delta renames it: its expression reads a
    t.drop_constraint("b_small")
    t.drop_column("b")
    lakelog.write_table(path, pa.table({"a": [5], "c2": [6]}))
    assert sorted((r["a"], r["g2"], r["c2"]) for r in _ours(path)) == [(1, 2, 3), (5, 6, 6)]
    t.drop_column("g2")  # then nothing reads a any more
    t.rename_column("a", "a2")
    assert sorted((r["a2"], r["c2"]) for r in _ours(path)) == [(1, 3), (5, 6)]


@pytest.mark.parametrize("name", ["type-widening", "type-widening-nested"])
def test_spark_widened_tables_take_appends_and_row_level_changes(tmp_path, name):
    # tests/data/type-widening*: written by Spark 3.5 / Delta 3.3 (from delta-kernel-rs's test data); older files hold narrower types
    path = str(tmp_path / name)
    shutil.copytree(os.path.join(DATA, name), path)
    t = lakelog.Table(path)
    before = t.to_pyarrow()
    lakelog.write_table(path, before)  # the rows again, written with the widened types
    col = before.schema.names[0]
    if name == "type-widening":
        m = t.update({"int_long": "int_long + 1"}, "byte_long = 1")
        assert m["num_updated_rows"] == 2
        t.delete("float_double > 1e300")
    else:
        t.delete("struct.a = 9223372036854775807")
    after = t.to_pyarrow()
    assert after.schema == before.schema and lakelog.Table(path).check().ok
    rows = before.to_pylist() * 2
    if name == "type-widening":
        rows = [{**r, "int_long": r["int_long"] + 1} if r["byte_long"] == 1 else r for r in rows]
        rows = [r for r in rows if not r["float_double"] > 1e300]
    else:
        rows = [r for r in rows if r[col] is None or r[col]["a"] != 9223372036854775807]
    key = lambda r: json.dumps(r, sort_keys=True, default=str)  # noqa: E731
    assert sorted(after.to_pylist(), key=key) == sorted(rows, key=key)


def test_alter_column_type_widens_as_delta_does(tmp_path):
    from lakelog.errors import SchemaMismatchError

    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": pa.array([1, 2], pa.int32()), "x": pa.array([1.5, 2.5], pa.float32()),
                                        "d": pa.array([dt.date(2026, 1, 1), None], pa.date32())}), configuration={"delta.enableTypeWidening": "true"})
    t = lakelog.Table(path)
    t.alter_column_type("id", "bigint")
    t.alter_column_type("X", "double")
    t.alter_column_type("d", "timestamp_ntz")
    for bad in (("id", "int"), ("x", "decimal(10,2)"), ("id", "string")):
        with pytest.raises(SchemaMismatchError, match="type widening"):
            t.alter_column_type(*bad)
    p = t.snapshot.protocol
    assert "typeWidening" in p.reader_features and "typeWidening" in p.writer_features
    fields = {f["name"]: f for f in json.loads(t.snapshot.metadata.schema_string)["fields"]}
    assert fields["id"]["metadata"]["delta.typeChanges"] == [{"fromType": "integer", "toType": "long"}]
    lakelog.write_table(path, pa.table({"id": pa.array([2 ** 40], pa.int64()), "x": [0.1], "d": pa.array([dt.datetime(2026, 2, 1, 12)], pa.timestamp("us"))}))
    t.update({"x": "x * 2"}, "id = 1")
    t.merge(pa.table({"id": pa.array([2], pa.int64()), "x": [9.0], "d": pa.array([None], pa.timestamp("us"))}), "target.id = source.id") \
        .when_matched_update_all().execute()
    got = sorted((r["id"], r["x"], r["d"]) for r in _ours(path))
    assert got == [(1, 3.0, dt.datetime(2026, 1, 1)), (2, 9.0, None), (2 ** 40, 0.1, dt.datetime(2026, 2, 1, 12))]
    assert lakelog.read_table(path, version=0).schema.field("id").type == pa.int32()  # earlier versions read as they were


def _ids(path):
    return sorted(r["id"] for r in _ours(path))


def test_identity_columns_generate_unique_values_on_append_and_merge_and_keep_them_on_update(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"name": ["a", "b"]}), identity_columns={"id": {"start": 10, "step": 5}})
    lakelog.write_table(path, pa.table({"name": ["c"]}))
    assert {r["name"]: r["id"] for r in _ours(path)} == {"a": 10, "b": 15, "c": 20}
    t = lakelog.Table(path)
    p = deltalake.DeltaTable(path).protocol()
    assert p.min_writer_version == 6
    field = json.loads(t.snapshot.metadata.schema_string)["fields"][1]
    assert field["metadata"]["delta.identity.highWaterMark"] == 20 and field["type"] == "long"
    with pytest.raises(lakelog.errors.SchemaMismatchError, match="identity"):
        lakelog.write_table(path, pa.table({"name": ["x"], "id": pa.array([1], pa.int64())}))
    t.update({"name": "upper(name)"}, "name = 'a'")  # ids kept
    t.merge(pa.table({"name": ["b", "d", "e"]}), "target.name = source.name") \
        .when_matched_update({"name": "'B'"}).when_not_matched_insert_all().execute()
    got = {r["name"]: r["id"] for r in _ours(path)}
    assert got == {"A": 10, "B": 15, "c": 20, "d": 25, "e": 30}
    assert json.loads(lakelog.Table(path).snapshot.metadata.schema_string)["fields"][1]["metadata"]["delta.identity.highWaterMark"] == 30
    assert sorted(r["id"] for r in _rows(path)) == [10, 15, 20, 25, 30]


def test_spark_written_identity_table_continues_above_its_high_water_mark(tmp_path):
    # tests/data/identity_test_written_by_version_5: Spark-written, highWaterMark 4, explicit inserts allowed
    path = str(tmp_path / "t")
    shutil.copytree(os.path.join(DATA, "identity_test_written_by_version_5"), path)
    before = lakelog.Table(path).to_pyarrow()
    others = [c for c in before.schema.names if c != "id"]
    lakelog.write_table(path, before.select(others).slice(0, 2))
    lakelog.write_table(path, pa.table({**{c: before.column(c).slice(0, 1) for c in others}, "id": pa.array([100], pa.int64())}))  # explicit: allowed here
    ids = _ids(path)
    assert len(ids) == len(set(ids)) == before.num_rows + 3 and {5, 6, 100} <= set(ids)
    meta = json.loads(lakelog.Table(path).snapshot.metadata.schema_string)["fields"][0]["metadata"]
    assert meta["delta.identity.highWaterMark"] == 100


def test_identity_values_stay_unique_under_two_concurrent_writer_processes(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"w": pa.array([], pa.string())}), identity_columns=["id"])
    append_from_processes(path, "{'w': [tag] * 3}", ("x", "y"))
    ids = _ids(path)
    assert len(ids) == 72 and len(set(ids)) == 72  # every write committed, no value twice
    assert _rows(path) == _ours(path)

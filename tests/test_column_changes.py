"""Table.add_columns, drop_columns, unset_properties, set_column_default, drop_not_null and
write_table(column_defaults=...): metadata-only commits (what ALTER TABLE and CREATE TABLE in
spark_ext.sql run), and the column order of a CREATE TABLE with identity columns. Older rows read NULL
in added columns, deltalake reads what lakelog reads, and a refused change commits nothing."""

from __future__ import annotations

import json

import deltalake
import pyarrow as pa
import pytest

from lakelog import Table, read_table, write_table
from lakelog.errors import InvalidArgumentError, InvalidTablePropertyError, PredicateError, SchemaMismatchError


def _peer(path: str) -> list[dict]:
    dt = deltalake.DeltaTable(path)
    got = pa.table(deltalake.QueryBuilder().register("t", dt).execute("select * from t").read_all())
    return sorted(got.to_pylist(), key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _rows(t: pa.Table) -> list[dict]:
    return sorted(t.to_pylist(), key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _fields(path: str) -> dict[str, dict]:
    return {f["name"]: f for f in json.loads(Table(path).metadata.schema_string)["fields"]}


@pytest.fixture
def table(tmp_path) -> str:
    path = str(tmp_path / "t")
    write_table(path, pa.table({"id": pa.array([1, 2], pa.int64()), "s": [{"x": 1}, None]}))
    return path


@pytest.mark.parametrize("mapped", [False, True])
def test_add_columns_top_level_and_nested(table, mapped):
    t = Table(table)
    if mapped:
        t.set_properties({"delta.columnMapping.mode": "name"})
    before = t.version
    v = t.add_columns({"n": pa.float64(), "s.y": pa.string()})
    assert v == before + 1 and t.history(1)[0]["operation"] == "ADD COLUMNS"
    assert t.schema.names == ["id", "s", "n"] and t.schema.field("s").type == pa.struct([("x", pa.int64()), ("y", pa.string())])
    write_table(table, pa.table({"id": pa.array([3], pa.int64()), "s": [{"x": 3, "y": "q"}], "n": [0.5]}))
    rows = _rows(read_table(table))
    assert rows == [{"id": 1, "s": {"x": 1, "y": None}, "n": None}, {"id": 2, "s": None, "n": None},
                    {"id": 3, "s": {"x": 3, "y": "q"}, "n": 0.5}]
    if not mapped:
        assert _peer(table) == rows
    else:  # new columns get their own ids and physical names
        fields = _fields(table)
        assert fields["n"]["metadata"]["delta.columnMapping.physicalName"] != "n"
        assert int(Table(table).metadata.configuration["delta.columnMapping.maxColumnId"]) == 5  # id, s, s.x, then n, s.y


def test_add_columns_refusals_commit_nothing(table):
    t = Table(table)
    with pytest.raises(SchemaMismatchError, match="already exists"):
        t.add_columns({"ID": pa.int32()})
    with pytest.raises(SchemaMismatchError, match="NOT NULL"):
        t.add_columns({"z": pa.field("z", pa.int32(), nullable=False)})
    with pytest.raises(SchemaMismatchError, match="not a struct"):
        t.add_columns({"id.z": pa.int32()})
    with pytest.raises(SchemaMismatchError, match="does not exist"):
        t.add_columns({"nope.z": pa.int32()})
    assert Table(table).version == 0


def test_drop_columns_in_one_commit(table):
    t = Table(table)
    write_table(table, pa.table({"id": pa.array([3], pa.int64()), "s": [{"x": 3, "y": "q"}], "a": [1], "b": ["x"]}), schema_mode="merge")
    t.set_properties({"delta.columnMapping.mode": "name"})
    v = t.drop_columns(["a", "s.x"])
    assert v == t.version == 3 and t.schema.names == ["id", "s", "b"] and t.schema.field("s").type == pa.struct([("y", pa.string())])
    assert json.loads(t.history(1)[0]["operationParameters"]["columns"]) == ["a", "s.x"]
    assert read_table(table).sort_by("id").to_pylist()[-1] == {"id": 3, "s": {"y": "q"}, "b": "x"}
    with pytest.raises(SchemaMismatchError):
        t.drop_columns(["b", "nope"])
    assert Table(table).version == 3 and "b" in Table(table).schema.names


def test_unset_properties(table):
    t = Table(table)
    t.set_properties({"owner": "me", "delta.appendOnly": "false"})
    with pytest.raises(InvalidArgumentError, match="no property 'nope'"):
        t.unset_properties(["owner", "nope"])
    assert Table(table).metadata.configuration == {"owner": "me", "delta.appendOnly": "false"}
    with pytest.raises(InvalidTablePropertyError):
        t.unset_properties(["delta.columnMapping.maxColumnId"])
    v = t.unset_properties(["owner", "DELTA.appendonly", "nope"], if_exists=True)
    assert t.metadata.configuration == {} and t.history(1)[0]["operation"] == "UNSET TBLPROPERTIES"
    assert t.unset_properties(["owner"], if_exists=True) == v  # nothing to remove: no commit


def test_column_defaults_declared_on_create_and_changed(tmp_path):
    path = str(tmp_path / "d")
    schema = pa.schema([pa.field("id", pa.int64(), False), pa.field("status", pa.string()), pa.field("n", pa.int32())])
    write_table(path, schema.empty_table(), column_defaults={"status": "'new'", "N": "7"})
    assert Table(path).protocol.writer_features == ["allowColumnDefaults"]
    assert _fields(path)["status"]["metadata"] == {"CURRENT_DEFAULT": "'new'"} and _fields(path)["n"]["metadata"] == {"CURRENT_DEFAULT": "7"}
    write_table(path, pa.table({"id": pa.array([1], pa.int64())}))
    write_table(path, pa.table({"id": pa.array([2], pa.int64()), "status": ["given"], "n": pa.array([None], pa.int32())}))
    t = Table(path)
    t.set_column_default("status", "concat('o', 'ld')")
    write_table(path, pa.table({"id": pa.array([3], pa.int64())}))
    t.set_column_default("status", None)
    t.set_column_default("n", None)
    write_table(path, pa.table({"id": pa.array([4], pa.int64())}))
    assert read_table(path).sort_by("id").to_pylist() == [
        {"id": 1, "status": "new", "n": 7}, {"id": 2, "status": "given", "n": None},
        {"id": 3, "status": "old", "n": 7}, {"id": 4, "status": None, "n": None}]
    assert _peer(path) == _rows(read_table(path))


@pytest.mark.parametrize("default, error", [("id + 1", "constant"), ("1.5", "does not fit"), ("'x'", "does not fit"), ("no_such_fn(1)", "no_such_fn")])
def test_bad_column_defaults_are_refused(tmp_path, default, error):
    path = str(tmp_path / "d")
    with pytest.raises((SchemaMismatchError, PredicateError), match=error):
        write_table(path, pa.table({"id": pa.array([1], pa.int64())}), column_defaults={"id": default})
    write_table(path, pa.table({"id": pa.array([1], pa.int64())}))
    with pytest.raises((SchemaMismatchError, PredicateError), match=error):
        Table(path).set_column_default("id", default)
    assert Table(path).version == 0
    with pytest.raises(InvalidArgumentError, match="creates the table"):
        write_table(path, pa.table({"id": pa.array([1], pa.int64())}), column_defaults={"id": "1"})
    with pytest.raises(SchemaMismatchError, match="generated or identity"):
        write_table(str(tmp_path / "g"), pa.table({"id": pa.array([1], pa.int64())}), generated_columns={"g": "id + 1"}, column_defaults={"g": "1"})


def test_drop_not_null(tmp_path):
    path = str(tmp_path / "n")
    write_table(path, pa.schema([pa.field("id", pa.int64(), False), pa.field("s", pa.struct([pa.field("x", pa.int64(), False)]))]).empty_table())
    with pytest.raises(SchemaMismatchError, match="not nullable"):
        write_table(path, pa.table({"id": pa.array([None], pa.int64())}))
    t = Table(path)
    v = t.drop_not_null("id")
    assert t.drop_not_null("id") == v  # already nullable: no commit
    t.drop_not_null("s.x")
    write_table(path, pa.table({"id": pa.array([None], pa.int64()), "s": [{"x": None}]}))
    assert read_table(path).to_pylist() == [{"id": None, "s": {"x": None}}]
    assert t.history(1)[0]["operation"] == "CHANGE COLUMN"


def test_a_void_column_holds_the_place_of_an_identity_column_the_write_declares(tmp_path):
    path = str(tmp_path / "i")
    data = pa.schema([pa.field("id", pa.null()), pa.field("name", pa.string())]).empty_table()
    write_table(path, data, identity_columns={"id": {"start": 5, "step": 2}})
    assert Table(path).schema == pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])  # (not appended last)
    write_table(path, pa.table({"name": ["a", "b"]}))
    assert read_table(path).sort_by("id").to_pylist() == [{"id": 5, "name": "a"}, {"id": 7, "name": "b"}]
    with pytest.raises(SchemaMismatchError, match="identity"):
        write_table(path, pa.table({"id": pa.array([1], pa.int64()), "name": ["c"]}))

"""Table.set_properties, rename_column and drop_column: metadata-only commits that column mapping makes
possible. Every version reads as it did (time travel before the change), filters use the new names
and still prune by the files' stats, and deltalake's SQL engine (which applies column mapping) reads
the same rows."""

from __future__ import annotations

import json
import shutil

import deltalake
import pyarrow as pa
import pytest

from lakelog import Table, write_table
from lakelog.errors import ColumnMappingRequiredError, InvalidTablePropertyError, SchemaMismatchError, UnsupportedFeatureError
from tests.expected_rows import canonical_rows, expected, table_path


def _peer(path: str, columns: str = "*") -> list[dict]:
    dt = deltalake.DeltaTable(path)
    got = pa.table(deltalake.QueryBuilder().register("t", dt).execute(f"select {columns} from t").read_all())
    return sorted(got.to_pylist(), key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _rows(t: pa.Table) -> list[dict]:
    return sorted(t.to_pylist(), key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _log(path: str, version: int) -> list[dict]:
    with open(f"{path}/_delta_log/{version:020d}.json") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture
def plain(tmp_path) -> str:
    path = str(tmp_path / "t")
    write_table(path, pa.table({"id": [1, 2, 3, 4], "p": ["a", "b", "a", "b"], "s": [{"x": 1, "y": "q"}, None, {"x": 3, "y": "r"}, {"x": 4, "y": None}]}), partition_by="p")
    write_table(path, pa.table({"id": [10, 11], "p": ["c", "a"], "s": [{"x": 10, "y": "z"}, None]}))
    return path


def test_set_properties_validates_and_commits_once(plain):
    t = Table(plain)
    with pytest.raises(InvalidTablePropertyError) as e:
        t.set_properties({"delta.appendOnly": "maybe"})
    assert e.value.key == "delta.appendOnly"
    with pytest.raises(InvalidTablePropertyError):
        t.set_properties({"delta.noSuchProperty": "1"})
    with pytest.raises(InvalidTablePropertyError):
        t.set_properties({"delta.columnMapping.maxColumnId": 7})  # maintained by the engine
    assert Table(plain).version == 1  # nothing committed
    v = t.set_properties({"delta.logRetentionDuration": "interval 60 days", "owner": "me"})
    assert v == 2 == t.version
    assert t.metadata.configuration == {"delta.logRetentionDuration": "interval 60 days", "owner": "me"}
    actions = _log(plain, 2)
    assert actions[0]["commitInfo"]["operation"] == "SET TBLPROPERTIES"
    assert [k for a in actions for k in a] == ["commitInfo", "metaData"]
    assert t.set_properties({"owner": "me"}) == 2  # no change, no commit
    assert _rows(Table(plain).to_pyarrow()) == _rows(Table(plain, version=1).to_pyarrow())


def test_enabling_column_mapping_keeps_names_and_upgrades_protocol(plain):
    t = Table(plain)
    before = _rows(t.to_pyarrow())
    v = t.set_properties({"delta.columnMapping.mode": "name"})
    assert (t.protocol.min_reader_version, t.protocol.min_writer_version) == (2, 5)  # as Delta upgrades a legacy table
    assert t.protocol.reader_features is None
    conf = t.metadata.configuration
    assert conf["delta.columnMapping.mode"] == "name"
    fields = json.loads(t.metadata.schema_string)["fields"]
    # existing columns keep their names as physical names (the files already use them); ids are unique
    assert [f["metadata"]["delta.columnMapping.physicalName"] for f in fields] == ["id", "p", "s"]
    ids = [f["metadata"]["delta.columnMapping.id"] for f in fields] + [g["metadata"]["delta.columnMapping.id"] for g in fields[2]["type"]["fields"]]
    assert sorted(ids) == list(range(1, 6)) and conf["delta.columnMapping.maxColumnId"] == "5"
    assert [k for a in _log(plain, v) for k in a] == ["commitInfo", "protocol", "metaData"]
    assert _rows(t.to_pyarrow()) == before
    assert _peer(plain, "id, p") == sorted([{"id": r["id"], "p": r["p"]} for r in before], key=lambda r: json.dumps(r, sort_keys=True))


def test_column_mapping_on_a_table_features_protocol_is_listed_in_both_lists(tmp_path):
    path = str(tmp_path / "t")
    write_table(path, pa.table({"id": [1, 2]}), configuration={"delta.checkpointPolicy": "v2"})
    t = Table(path)
    assert t.protocol.min_writer_version == 7
    t.set_properties({"delta.columnMapping.mode": "name"})
    p = t.protocol
    assert (p.min_reader_version, p.min_writer_version) == (3, 7)
    assert "columnMapping" in p.reader_features and "columnMapping" in p.writer_features and "v2Checkpoint" in p.reader_features
    assert t.to_pyarrow().column("id").to_pylist() == [1, 2]


def test_a_feature_property_on_a_legacy_mapped_table_lists_column_mapping(plain):
    t = Table(plain)
    t.set_properties({"delta.columnMapping.mode": "name"})
    t.set_properties({"delta.enableInCommitTimestamps": True})
    p = t.protocol
    assert (p.min_reader_version, p.min_writer_version) == (3, 7)
    assert p.reader_features == ["columnMapping"]
    assert {"columnMapping", "inCommitTimestamp", "appendOnly", "invariants"} <= set(p.writer_features)
    assert len(_rows(t.to_pyarrow())) == 6


@pytest.mark.parametrize("start,to", [("name", "none"), ("name", "id"), ("none", "id")])
def test_column_mapping_mode_changes_delta_refuses(plain, start, to):
    t = Table(plain)
    if start == "name":
        t.set_properties({"delta.columnMapping.mode": "name"})
    version = t.version
    with pytest.raises(InvalidTablePropertyError, match="delta.columnMapping.mode cannot change") as e:
        t.set_properties({"delta.columnMapping.mode": to})
    assert e.value.key == "delta.columnMapping.mode"
    assert Table(plain).version == version


def test_rename_and_drop_need_column_mapping(plain):
    t = Table(plain)
    for call in (lambda: t.rename_column("id", "key"), lambda: t.drop_column("id")):
        with pytest.raises(ColumnMappingRequiredError, match=r'set_properties\(\{"delta.columnMapping.mode": "name"\}\)'):
            call()
    assert isinstance(ColumnMappingRequiredError("x"), UnsupportedFeatureError)
    assert Table(plain).version == 1


def test_rename_and_drop_then_time_travel(plain):
    t = Table(plain)
    v_map = t.set_properties({"delta.columnMapping.mode": "name"})
    snapshots = {v: _rows(Table(plain, version=v).to_pyarrow()) for v in range(v_map + 1)}
    v1 = t.rename_column("id", "key")
    v2 = t.rename_column("s.x", "sx")
    v3 = t.rename_column("p", "part")  # a partition column: partitionColumns follows
    assert t.partition_columns == ["part"]
    v4 = t.drop_column("s.y")
    v5 = t.drop_column("key")
    assert (v1, v2, v3, v4, v5) == tuple(range(v_map + 1, v_map + 6))
    for v in (v1, v2, v3, v4, v5):
        assert [k for a in _log(plain, v) for k in a] == ["commitInfo", "metaData"]  # no data rewritten
    base = snapshots[v_map]
    want = {
        v1: [{"key": r["id"], "p": r["p"], "s": r["s"]} for r in base],
        v2: [{"key": r["id"], "p": r["p"], "s": r["s"] and {"sx": r["s"]["x"], "y": r["s"]["y"]}} for r in base],
        v3: [{"key": r["id"], "part": r["p"], "s": r["s"] and {"sx": r["s"]["x"], "y": r["s"]["y"]}} for r in base],
        v4: [{"key": r["id"], "part": r["p"], "s": r["s"] and {"sx": r["s"]["x"]}} for r in base],
        v5: [{"part": r["p"], "s": r["s"] and {"sx": r["s"]["x"]}} for r in base],
    }
    for v, rows in {**snapshots, **want}.items():
        assert _rows(Table(plain, version=v).to_pyarrow()) == _rows(pa.Table.from_pylist(rows)), v
    assert Table(plain).schema.names == ["part", "s"]
    assert _peer(plain, "part") == sorted([{"part": r["p"]} for r in base], key=lambda r: json.dumps(r))
    assert [h["operation"] for h in t.history(5)] == ["DROP COLUMNS", "DROP COLUMNS", "RENAME COLUMN", "RENAME COLUMN", "RENAME COLUMN"]
    assert t.history(1)[0]["operationParameters"] == {"columns": '["key"]'}


def test_filters_by_a_renamed_column_prune_and_are_exact(plain):
    t = Table(plain)
    t.set_properties({"delta.columnMapping.mode": "name"})
    t.rename_column("id", "key")
    t.rename_column("p", "part")
    assert len(t.files()) == 4
    assert len(t.files([("key", ">=", 10)])) == 2  # stats (keyed by physical name) still prune
    assert len(t.files([("key", "=", 1)])) == 1
    assert len(t.files([("part", "=", "c")])) == 1
    assert sorted(t.to_pyarrow(filters=[("key", ">", 2)]).column("key").to_pylist()) == [3, 4, 10, 11]
    assert t.to_pyarrow(filters=[("part", "=", "b"), ("key", "<", 3)]).to_pylist() == [{"key": 2, "part": "b", "s": None}]
    with pytest.raises(SchemaMismatchError):
        t.to_pyarrow(filters=[("id", ">", 2)])  # the old name is gone


def test_rename_and_drop_errors(plain):
    t = Table(plain)
    t.set_properties({"delta.columnMapping.mode": "name"})
    version = t.version
    with pytest.raises(SchemaMismatchError, match="partition column"):
        t.drop_column("p")
    with pytest.raises(SchemaMismatchError, match="already exists"):
        t.rename_column("id", "S")
    with pytest.raises(SchemaMismatchError, match="does not exist"):
        t.rename_column("nope", "x")
    with pytest.raises(SchemaMismatchError, match="not a struct"):
        t.drop_column("id.x")
    t.drop_column("s.y")
    with pytest.raises(SchemaMismatchError, match="only field"):
        t.drop_column("s.x")
    assert Table(plain).version == version + 1


def test_rename_and_drop_on_a_spark_written_table(tmp_path):
    name = "table-with-columnmapping-mode-id"
    path = str(tmp_path / name)
    shutil.copytree(table_path(name), path)
    t = Table(path)
    exp = expected(name)["rows"]
    t.rename_column("LongType", "long_renamed")
    t.rename_column("nested_struct.aa", "aa2")
    t.drop_column("BinaryType")
    got = canonical_rows(t.to_pyarrow())
    want = []
    for r in exp:
        r = dict(r)
        r["long_renamed"] = r.pop("LongType")
        del r["BinaryType"]
        if r["nested_struct"] is not None:
            r["nested_struct"] = {("aa2" if k == "aa" else k): v for k, v in r["nested_struct"].items()}
        want.append(r)
    assert got == sorted(want, key=lambda r: json.dumps(r, sort_keys=True))
    assert canonical_rows(Table(path, version=t.version - 3).to_pyarrow()) == exp
    assert sorted(t.to_pyarrow(filters=[("long_renamed", ">=", 3)]).column("long_renamed").to_pylist()) == [3, 4]


def test_deletion_vectors_on_a_renamed_column_mapping_table(tmp_path):
    """delta.enableDeletionVectors=true on a (2, 5) column-mapping table moves it to (3, 7) with both
    features listed; a delete by a renamed column writes a deletion vector and both readers agree."""
    path = str(tmp_path / "t")
    write_table(path, pa.table({"id": list(range(10)), "p": ["a", "b"] * 5}), partition_by="p", configuration={"delta.columnMapping.mode": "name"})
    t = Table(path)
    t.set_properties({"delta.enableDeletionVectors": True})
    p = t.protocol
    assert (p.min_reader_version, p.min_writer_version) == (3, 7)
    assert {"columnMapping", "deletionVectors"} <= set(p.reader_features) and {"columnMapping", "deletionVectors"} <= set(p.writer_features)
    t.rename_column("id", "key")
    assert t.delete("key in (1, 2, 3)")["num_deleted_rows"] == 3
    assert all(a.deletion_vector is not None for a in t.snapshot.files.values())
    assert sorted(t.to_pyarrow().column("key").to_pylist()) == [0, 4, 5, 6, 7, 8, 9]
    assert [r["key"] for r in _peer(path, "key")] == [0, 4, 5, 6, 7, 8, 9]


def test_rename_and_drop_refuse_columns_expressions_read_and_say_what_to_do(tmp_path):
    """As Delta (containsDependentExpression): a column, struct field or struct a CHECK constraint or
    generation expression reads cannot be renamed or dropped; a sibling field, and the generated column
    itself, can. The advice works: dropping the generated column or the constraint frees the column."""
    path = str(tmp_path / "t")
    s_type = pa.struct([("x", pa.int64()), ("y", pa.string())])
    write_table(path, pa.table({"a": [1, 2], "s": pa.array([{"x": 1, "y": "p"}, {"x": 2, "y": None}], s_type), "arr": [[10], [20, 30]]}),
                configuration={"delta.columnMapping.mode": "name"}, generated_columns={"g": "s.x * 100 + arr[0]"})
    t = Table(path)
    t.add_constraint({"positive": "a > 0"})
    version = t.version
    for attempt, column in ((lambda: t.rename_column("s", "s2"), "s"), (lambda: t.rename_column("S.X", "x2"), "s.x"),
                            (lambda: t.drop_column("s.x"), "s.x"), (lambda: t.rename_column("arr", "arr2"), "arr"), (lambda: t.drop_column("arr"), "arr")):
        with pytest.raises(SchemaMismatchError, match=rf"column '{column}': generated column 'g' \(s.x \* 100 \+ arr\[0\]\) reads it.*Table.drop_column\('g'\)") as e:
            attempt()
        assert "drop_constraint" not in str(e.value)
    for attempt in (lambda: t.rename_column("a", "b"), lambda: t.drop_column("a")):
        with pytest.raises(SchemaMismatchError, match=r"CHECK constraint\(s\) positive \(a > 0\) read it.*Table.drop_constraint\('positive'\)"):
            attempt()
    assert Table(path).version == version
    t.rename_column("s.y", "label")  # a field no expression reads
    t.rename_column("g", "total")  # the generated column itself
    write_table(path, pa.table({"a": [3], "s": pa.array([{"x": 3, "label": "q"}], pa.struct([("x", pa.int64()), ("label", pa.string())])), "arr": [[7]]}))
    assert [(r["a"], r["total"]) for r in _rows(Table(path).to_pyarrow())] == [(1, 110), (2, 220), (3, 307)]
    t.drop_column("total")
    t.drop_constraint("positive")
    t.rename_column("s.x", "amount")
    t.rename_column("a", "b")
    t.drop_column("arr")
    want = [{"b": 1, "s": {"amount": 1, "label": "p"}}, {"b": 2, "s": {"amount": 2, "label": None}}, {"b": 3, "s": {"amount": 3, "label": "q"}}]
    assert _rows(Table(path).to_pyarrow()) == want
    assert _peer(path) == want

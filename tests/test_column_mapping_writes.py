"""Writing column-mapping tables: data files name columns by physical name and carry Parquet field ids,
partition values and stats are keyed by physical names, new columns get fresh physical names and ids.
Checked against deltalake's SQL engine (which applies column mapping; its to_pyarrow_table does not)
and by reading every version back, on lakelog-made tables and on copies of Spark-written ones."""

from __future__ import annotations

import datetime as dt
import json
import shutil

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakelog import Table, plan_write, write_table
from lakelog.table_features.column_mapping import field_id
from lakelog.errors import CommitConflictError, InvalidTablePropertyError
from tests.expected_rows import canonical_rows, expected, table_path


def _key(r: dict) -> str:
    return json.dumps(r, sort_keys=True, default=str)


def _peer(path: str, query: str = "select * from t") -> list[dict]:
    got = pa.table(deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path)).execute(query).read_all())
    return sorted(got.to_pylist(), key=_key)


def _rows(t: pa.Table) -> list[dict]:
    return sorted(t.to_pylist(), key=_key)


def _fields(t: Table) -> dict[str, dict]:
    return {f["name"]: f for f in json.loads(t.metadata.schema_string)["fields"]}


def _phys(f: dict) -> str:
    return f["metadata"]["delta.columnMapping.physicalName"]


def _data(ids, parts, xs=None) -> pa.Table:
    xs = xs if xs is not None else [None if i % 3 == 0 else {"x": i, "y": f"v{i}"} for i in ids]
    return pa.table({"id": pa.array(ids, pa.int64()), "p": parts, "s": pa.array(xs, pa.struct([("x", pa.int64()), ("y", pa.string())]))})


@pytest.mark.parametrize("mode", ["name", "id"])
def test_new_table_with_column_mapping(tmp_path, mode):
    path = str(tmp_path / "t")
    write_table(path, _data([1, 2, 3], ["a", "b", "a"]), partition_by="p", configuration={"delta.columnMapping.mode": mode})
    t = Table(path)
    assert (t.protocol.min_reader_version, t.protocol.min_writer_version) == (2, 5)
    fields = _fields(t)
    assert all(_phys(f).startswith("col-") for f in fields.values())
    ids = [f["metadata"]["delta.columnMapping.id"] for f in fields.values()] + [
        g["metadata"]["delta.columnMapping.id"] for g in fields["s"]["type"]["fields"]
    ]
    assert sorted(ids) == [1, 2, 3, 4, 5] and t.metadata.configuration["delta.columnMapping.maxColumnId"] == "5"
    assert t.partition_columns == ["p"]  # logical
    for add in t.snapshot.files.values():
        assert list(add.partition_values) == [_phys(fields["p"])]
        stats = json.loads(add.stats)
        assert set(stats["nullCount"]) == {_phys(fields["id"]), _phys(fields["s"])}
        schema = pq.read_schema(f"{path}/{add.relative_path}")
        assert schema.names == [_phys(fields["id"]), _phys(fields["s"])]
        assert [field_id(f) for f in schema] == [fields["id"]["metadata"]["delta.columnMapping.id"], fields["s"]["metadata"]["delta.columnMapping.id"]]
        nested = schema.field(_phys(fields["s"])).type
        assert [nested.field(i).name for i in range(2)] == [_phys(g) for g in fields["s"]["type"]["fields"]]
        assert all(field_id(nested.field(i)) is not None for i in range(2))
    want = _rows(_data([1, 2, 3], ["a", "b", "a"]).select(["id", "p", "s"]))
    assert _rows(t.to_pyarrow().select(["id", "p", "s"])) == want
    assert _peer(path, "select id, p, s from t") == want
    assert _rows(t.to_pyarrow(filters=[("id", ">", 1)])) == [r for r in want if r["id"] > 1]
    assert len(t.files([("id", "=", 3)])) == 1  # stats prune


@pytest.mark.parametrize("mode", ["name", "id"])
def test_appends_schema_evolution_rename_and_time_travel(tmp_path, mode):
    path = str(tmp_path / "t")
    write_table(path, _data([1, 2, 3], ["a", "b", "a"]), partition_by="p", configuration={"delta.columnMapping.mode": mode})
    write_table(path, _data([4, 5], ["b", "c"]))
    extra = _data([6], ["c"]).append_column("n", pa.array([1.5]))
    v_merge = write_table(path, extra, schema_mode="merge")
    t = Table(path)
    fields = _fields(t)
    assert _phys(fields["n"]).startswith("col-") and fields["n"]["metadata"]["delta.columnMapping.id"] == 6
    assert t.metadata.configuration["delta.columnMapping.maxColumnId"] == "6"
    v_rename = t.rename_column("id", "key")
    v_after = write_table(path, pa.table({"key": pa.array([7], pa.int64()), "p": ["a"], "s": pa.array([None], fields_type := t.schema.field("s").type), "n": [2.5]}))
    v_drop = t.drop_column("n")
    v_readd = write_table(path, pa.table({"key": pa.array([8], pa.int64()), "p": ["d"], "s": pa.array([None], fields_type), "n": ["new"]}), schema_mode="merge")
    t.refresh()
    # the re-added column is a new column: the dropped one's values never come back
    assert _phys(_fields(t)["n"]) != _phys(fields["n"]) and t.metadata.configuration["delta.columnMapping.maxColumnId"] == "7"
    base = [{"id": r["id"], "p": r["p"], "s": r["s"]} for r in _data([1, 2, 3, 4, 5, 6], ["a", "b", "a", "b", "c", "c"]).to_pylist()]
    expect = {
        v_merge: [{**r, "n": 1.5 if r["id"] == 6 else None} for r in base],
        v_rename: [{"key": r["id"], "p": r["p"], "s": r["s"], "n": 1.5 if r["id"] == 6 else None} for r in base],
    }
    expect[v_after] = expect[v_rename] + [{"key": 7, "p": "a", "s": None, "n": 2.5}]
    expect[v_drop] = [{k: v for k, v in r.items() if k != "n"} for r in expect[v_after]]
    expect[v_readd] = [{**r, "n": None} for r in expect[v_drop]] + [{"key": 8, "p": "d", "s": None, "n": "new"}]
    for v, rows in expect.items():
        assert _rows(Table(path, version=v).to_pyarrow()) == sorted(rows, key=_key), v
    assert _peer(path, "select key, p, n from t") == sorted(({"key": r["key"], "p": r["p"], "n": r["n"]} for r in expect[v_readd]), key=_key)
    assert sorted(t.to_pyarrow(filters=[("key", ">=", 6)]).column("key").to_pylist()) == [6, 7, 8]
    assert len(t.files([("key", ">=", 7)])) == 2


def test_row_level_operations_and_optimize(tmp_path):
    path = str(tmp_path / "t")
    write_table(path, _data([1, 2, 3, 4], ["a", "b", "a", "b"]), partition_by="p", configuration={"delta.columnMapping.mode": "name"})
    write_table(path, _data([5, 6], ["a", "c"]))
    t = Table(path)
    t.rename_column("id", "key")
    t.delete("key = 2")
    t.update({"key": "key * 10"}, "key >= 5")
    source = pa.table({"key": pa.array([1, 9], pa.int64()), "p": ["a", "z"], "s": pa.array([None, None], t.schema.field("s").type), "e": ["e1", "e9"]})
    t.merge(source, "target.key = source.key", schema_mode="merge").when_matched_update_all().when_not_matched_insert_all().execute()
    t.refresh()
    want = [
        {"key": 1, "p": "a", "e": "e1"}, {"key": 3, "p": "a", "e": None}, {"key": 4, "p": "b", "e": None},
        {"key": 50, "p": "a", "e": None}, {"key": 60, "p": "c", "e": None}, {"key": 9, "p": "z", "e": "e9"},
    ]
    assert _rows(t.to_pyarrow(columns=["key", "p", "e"])) == sorted(want, key=_key)
    assert _peer(path, "select key, p, e from t") == sorted(want, key=_key)
    assert t.metadata.configuration["delta.columnMapping.maxColumnId"] == "6"
    t.optimize()
    assert _rows(t.to_pyarrow(columns=["key", "p", "e"])) == sorted(want, key=_key)
    assert _peer(path, "select key, p, e from t") == sorted(want, key=_key)
    phys = {_phys(f) for f in _fields(t).values()}
    for add in t.snapshot.files.values():
        assert set(add.partition_values) <= phys and set(pq.read_schema(f"{path}/{add.relative_path}").names) <= phys


def test_overwrites(tmp_path):
    path = str(tmp_path / "t")
    write_table(path, _data([1, 2, 3, 4], ["a", "b", "a", "b"]), partition_by="p", configuration={"delta.columnMapping.mode": "id"})
    write_table(path, _data([10], ["a"]), predicate="p = 'a'", mode="overwrite")
    assert _rows(Table(path).to_pyarrow(columns=["id", "p"])) == [{"id": 10, "p": "a"}, {"id": 2, "p": "b"}, {"id": 4, "p": "b"}]
    write_table(path, _data([20], ["b"]), mode="overwrite", partition_overwrite="dynamic")
    assert _rows(Table(path).to_pyarrow(columns=["id", "p"])) == [{"id": 10, "p": "a"}, {"id": 20, "p": "b"}]
    write_table(path, _data([30], ["c"]), mode="overwrite")
    assert _peer(path, "select id, p from t") == [{"id": 30, "p": "c"}]
    assert _rows(Table(path, version=1).to_pyarrow(columns=["id", "p"])) == [{"id": 10, "p": "a"}, {"id": 2, "p": "b"}, {"id": 4, "p": "b"}]


def test_enabling_column_mapping_then_appending(tmp_path):
    path = str(tmp_path / "t")
    write_table(path, _data([1, 2], ["a", "b"]), partition_by="p")
    t = Table(path)
    t.set_properties({"delta.columnMapping.mode": "name"})
    t.rename_column("p", "part")
    write_table(path, pa.table({"id": pa.array([3], pa.int64()), "part": ["c"], "s": pa.array([{"x": 3, "y": "z"}], t.schema.field("s").type)}))
    t.refresh()
    assert _rows(t.to_pyarrow(columns=["id", "part"])) == [{"id": 1, "part": "a"}, {"id": 2, "part": "b"}, {"id": 3, "part": "c"}]
    assert _peer(path, "select id, part from t") == [{"id": 1, "part": "a"}, {"id": 2, "part": "b"}, {"id": 3, "part": "c"}]
    # existing columns kept their names as physical names, so old and new files agree
    assert all(set(a.partition_values) == {"p"} for a in t.snapshot.files.values())


def test_a_write_enables_column_mapping(tmp_path):
    path = str(tmp_path / "t")
    write_table(path, _data([1, 2], ["a", "b"]), partition_by="p")
    with pytest.raises(InvalidTablePropertyError, match="only go from none to name"):
        write_table(path, _data([3], ["c"]), configuration={"delta.columnMapping.mode": "id"})
    write_table(path, _data([3], ["c"]), configuration={"delta.columnMapping.mode": "name"})
    t = Table(path)
    assert t.version == 1 and t.metadata.configuration["delta.columnMapping.mode"] == "name"
    fields = _fields(t)
    assert {n: _phys(f) for n, f in fields.items()} == {"id": "id", "p": "p", "s": "s"}  # the files already name them so
    assert len({f["metadata"]["delta.columnMapping.id"] for f in fields.values()}) == 3
    write_table(path, _data([4], ["a"]).append_column("n", pa.array([1.5])), schema_mode="merge")
    want = [{"id": 1, "n": None, "p": "a"}, {"id": 2, "n": None, "p": "b"}, {"id": 3, "n": None, "p": "c"}, {"id": 4, "n": 1.5, "p": "a"}]
    assert _rows(Table(path).to_pyarrow(columns=["id", "n", "p"])) == want
    assert _peer(path, "select id, n, p from t") == want


def test_mode_change_through_a_write_is_refused(tmp_path):
    path = str(tmp_path / "t")
    write_table(path, _data([1], ["a"]), configuration={"delta.columnMapping.mode": "name"})
    with pytest.raises(InvalidTablePropertyError, match="cannot change"):
        write_table(path, _data([2], ["a"]), configuration={"delta.columnMapping.mode": "none"})
    assert Table(path).version == 0


def test_a_rename_between_plan_and_commit_is_a_conflict(tmp_path):
    path = str(tmp_path / "t")
    write_table(path, _data([1], ["a"]), configuration={"delta.columnMapping.mode": "name"})
    data = _data([2], ["a"]).append_column("n", pa.array([1.0]))
    plan = plan_write(path, data.schema, schema_mode="merge")
    adds = plan.write(data)
    Table(path).drop_column("p")  # another writer changes the mapping meanwhile
    write_table(path, pa.table({"id": pa.array([3], pa.int64()), "s": pa.array([None], _data([1], ["a"]).schema.field("s").type), "n": [5.0]}), schema_mode="merge")
    with pytest.raises(CommitConflictError, match="column mapping changed"):
        plan.commit(adds)  # its file names "n" by a physical name the table does not use
    assert _rows(Table(path).to_pyarrow(columns=["id", "n"])) == [{"id": 1, "n": None}, {"id": 3, "n": 5.0}]


SPARK_TABLES = [
    "table-with-columnmapping-mode-name",
    "table-with-columnmapping-mode-id",
    "table_with_column_mapping",
    "data-reader-timestamp_ntz-name-mode",
    "data-reader-timestamp_ntz-id-mode",
]


@pytest.mark.parametrize("name", SPARK_TABLES)
def test_appends_to_spark_written_tables(tmp_path, name):
    path = str(tmp_path / name)
    shutil.copytree(table_path(name), path)
    t = Table(path)
    before = t.version
    old = canonical_rows(t.to_pyarrow())
    assert old == expected(name)["rows"]
    # new rows: the table's own rows again (every type), with a distinguishable first column
    new = t.to_pyarrow().slice(0, 3)
    first = new.schema.field(0)
    if pa.types.is_integer(first.type):
        new = new.set_column(0, first, pa.array([100, 101, 102], first.type))
    elif pa.types.is_string(first.type):
        new = new.set_column(0, first, pa.array(["N1", "N2", "N3"]))
    max_id = t.metadata.configuration["delta.columnMapping.maxColumnId"]
    write_table(path, new)
    t.refresh()
    assert t.version == before + 1 and t.metadata.configuration["delta.columnMapping.maxColumnId"] == max_id
    assert canonical_rows(t.to_pyarrow()) == sorted(old + canonical_rows(new), key=lambda r: json.dumps(r, sort_keys=True))
    assert canonical_rows(Table(path, version=before).to_pyarrow()) == old
    fields = _fields(t)
    phys = {_phys(f) for f in fields.values()}
    added = [a for a in t.snapshot.files.values() if a.path not in {b.path for b in Table(path, version=before).snapshot.files.values()}]
    assert added
    for a in added:
        assert set(a.partition_values) == {_phys(fields[c]) for c in t.partition_columns}
        assert set(pq.read_schema(f"{path}/{a.relative_path}").names) <= phys
        assert set(json.loads(a.stats)["nullCount"]) <= phys
    # the peer reads the appended rows too (scalar columns; its SQL engine handles column mapping)
    col = t.schema.names[0]
    peer = _peer(path, f'select "{col}" from t')
    assert sorted((r[col] for r in peer), key=str) == sorted(t.to_pyarrow().column(col).to_pylist(), key=str)


def test_append_with_a_new_column_to_a_spark_written_table(tmp_path):
    name = "data-reader-timestamp_ntz-id-mode"
    path = str(tmp_path / name)
    shutil.copytree(table_path(name), path)
    t = Table(path)
    old = canonical_rows(t.to_pyarrow())
    row = {"id": 99, "tsNtz": dt.datetime(2024, 1, 2, 3, 4, 5), "tsNtzPartition": dt.datetime(2024, 1, 1), "extra": "x"}
    schema = pa.schema(list(t.schema) + [pa.field("extra", pa.string())])
    write_table(path, pa.Table.from_pylist([row], schema=schema), schema_mode="merge")
    t.refresh()
    f = _fields(t)["extra"]
    assert f["metadata"]["delta.columnMapping.id"] == 4 and t.metadata.configuration["delta.columnMapping.maxColumnId"] == "4"
    got = canonical_rows(t.to_pyarrow())
    assert got == sorted([{**r, "extra": None} for r in old] + [{"id": 99, "tsNtz": "2024-01-02T03:04:05.000000", "tsNtzPartition": "2024-01-01T00:00:00.000000", "extra": "x"}],
                         key=lambda r: json.dumps(r, sort_keys=True))
    assert sorted(r["id"] for r in _peer(path, "select id, extra from t")) == sorted(r["id"] for r in got)
    assert t.to_pyarrow(filters=[("extra", "=", "x")]).column("id").to_pylist() == [99]

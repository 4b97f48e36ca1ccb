"""Iceberg compatibility (``icebergCompatV1``/``V2``, lakelog.table_features.iceberg_compat): turning it on at create
and on existing tables, each constraint refused by name with nothing committed, and the data files
written to such tables (field ids on every column, array elements and map keys/values included,
partition columns in the files, INT64 timestamps, numRecords), read back by lakelog and by deltalake."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakelog import Table, write_table
from lakelog.table_features.column_mapping import field_id
from lakelog.errors import IcebergCompatError

V1 = {"delta.enableIcebergCompatV1": "true"}
V2 = {"delta.enableIcebergCompatV2": "true"}
DATA = os.path.join(os.path.dirname(__file__), "data")


def _key(r: dict) -> str:
    return json.dumps(r, sort_keys=True, default=str)


def _peer(path: str) -> list[dict]:
    got = pa.table(deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path)).execute("select * from t").read_all())
    return sorted(got.to_pylist(), key=_key)


def _rows(path: str) -> list[dict]:
    return sorted(Table(path).to_pyarrow().to_pylist(), key=_key)


def _nested() -> pa.Table:
    item = pa.struct([("a", pa.list_(pa.int32())), ("b", pa.int64())])
    return pa.table({
        "id": pa.array([1, 2, 3], pa.int64()),
        "p": ["x", "y", "x"],
        "l": pa.array([[[1]], [[2, 3], []], None], pa.list_(pa.list_(pa.int64()))),
        "m": pa.array([[("k", [1.5])], [], None], pa.map_(pa.string(), pa.list_(pa.float64()))),
        "s": pa.array([{"a": [1], "b": 2}, None, {"a": None, "b": 3}], item),
        "ts": pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)] * 3, pa.timestamp("us", "UTC")),
    })


def _ids_missing(f: pa.Field, path: str = "") -> list[str]:
    """Paths of the fields (any depth, list elements and map keys/values included) without a field id."""
    where = f"{path}.{f.name}" if path else f.name
    out = [] if field_id(f) is not None else [where]
    t = f.type
    if pa.types.is_struct(t):
        for i in range(t.num_fields):
            out += _ids_missing(t.field(i), where)
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        out += _ids_missing(t.value_field, where)
    elif pa.types.is_map(t):
        out += _ids_missing(t.key_field, where) + _ids_missing(t.item_field, where)
    return out


def _data_files(path: str) -> list[str]:
    return sorted(os.path.join(d, n) for d, _, names in os.walk(path) if "_delta_log" not in d for n in names)


def _check_files(path: str, partition_columns: list[str]) -> None:
    """Every live file: field ids on every column at every depth, the partition columns last, INT64
    timestamps, numRecords in the stats."""
    t = Table(path)
    mapping = t.snapshot.column_mapping
    fields = {f["name"]: f for f in json.loads(t.metadata.schema_string)["fields"]}
    for add in t.snapshot.files.values():
        pf = pq.ParquetFile(os.path.join(path, add.relative_path))
        schema = pf.schema_arrow
        missing = [m for f in schema for m in _ids_missing(f)]
        assert not missing, (add.path, missing)
        physical = [mapping.physical_name(c) for c in partition_columns]
        if physical:
            assert schema.names[-len(physical):] == physical, schema.names
        if "ts" in fields:
            ts = [pf.schema.column(i) for i in range(len(pf.schema)) if pf.schema.column(i).path == mapping.physical_name("ts")]
            assert len(ts) == 1 and ts[0].physical_type == "INT64"
        assert add.num_records() == pf.metadata.num_rows


def test_v2_on_create_maps_columns_assigns_nested_ids_and_writes_them(tmp_path):
    path = str(tmp_path / "t")
    data = _nested()
    write_table(path, data, partition_by=["p"], configuration=V2)
    t = Table(path)
    assert t.metadata.configuration["delta.columnMapping.mode"] == "name"  # as Delta sets it on create
    assert {"icebergCompatV2", "columnMapping"} <= set(t.snapshot.protocol.writer_features)
    fields = {f["name"]: f for f in json.loads(t.metadata.schema_string)["fields"]}
    pl, pm = (fields[c]["metadata"]["delta.columnMapping.physicalName"] for c in ("l", "m"))
    assert set(fields["l"]["metadata"]["delta.columnMapping.nested.ids"]) == {f"{pl}.element", f"{pl}.element.element"}
    assert set(fields["m"]["metadata"]["delta.columnMapping.nested.ids"]) == {f"{pm}.key", f"{pm}.value", f"{pm}.value.element"}
    inner = fields["s"]["type"]["fields"][0]["metadata"]
    assert list(inner["delta.columnMapping.nested.ids"]) == [inner["delta.columnMapping.physicalName"] + ".element"]
    every = list(fields.values()) + fields["s"]["type"]["fields"]
    ids = [v for f in every for v in f["metadata"]["delta.columnMapping.nested.ids"].values()]
    column_ids = [f["metadata"]["delta.columnMapping.id"] for f in every]
    assert len(set(ids + column_ids)) == len(ids + column_ids)  # unique, and apart from the column ids
    assert int(t.metadata.configuration["delta.columnMapping.maxColumnId"]) == max(ids + column_ids)
    # the file's element/key/value ids are the schema's
    add = next(iter(t.snapshot.files.values()))
    schema = pq.read_schema(os.path.join(path, add.relative_path))
    assert field_id(schema.field(pl).type.value_field) == fields["l"]["metadata"]["delta.columnMapping.nested.ids"][f"{pl}.element"]
    _check_files(path, ["p"])
    # row-level operations and OPTIMIZE write the same way
    t.update({"id": "id + 10"}, "p = 'x'")
    Table(path).delete("id = 2")
    write_table(path, data.slice(0, 1))
    Table(path).optimize()
    _check_files(path, ["p"])
    expected = sorted([{**r, "id": r["id"] + 10} for r in data.to_pylist() if r["p"] == "x"] + data.slice(0, 1).to_pylist(), key=_key)
    assert _rows(path) == expected
    assert _peer(path) == expected


def test_v1_on_create_takes_primitive_tables_and_refuses_arrays_maps_and_void(tmp_path):
    path = str(tmp_path / "t")
    data = pa.table({"id": pa.array([1, 2], pa.int64()), "p": pa.array([1, 2], pa.int32()), "s": pa.array([{"a": 1}, None], pa.struct([("a", pa.int32())]))})
    write_table(path, data, partition_by=["p"], configuration=V1)
    assert "icebergCompatV1" in Table(path).snapshot.protocol.writer_features
    _check_files(path, ["p"])
    assert _peer(path) == _rows(path) == sorted(data.to_pylist(), key=_key)
    for column in (pa.array([[1], []]), pa.array([[("a", 1)], []], pa.map_(pa.string(), pa.int64())), pa.nulls(2)):
        with pytest.raises(IcebergCompatError, match="IcebergCompatV1 does not allow the type"):
            write_table(str(tmp_path / "u"), data.append_column("bad", column), configuration=V1)
        assert not os.path.exists(tmp_path / "u" / "_delta_log")


def test_enabling_on_an_existing_table_needs_column_mapping_in_the_same_call(tmp_path):
    path = str(tmp_path / "t")
    data = _nested()
    write_table(path, data, partition_by=["p"])
    with pytest.raises(IcebergCompatError, match=r"requires column mapping.*'delta.columnMapping.mode': 'name'"):
        Table(path).set_properties(V2)
    assert Table(path).version == 0
    Table(path).set_properties({**V2, "delta.columnMapping.mode": "name"})
    t = Table(path)
    assert {"icebergCompatV2", "columnMapping"} <= set(t.snapshot.protocol.writer_features)
    assert "delta.columnMapping.nested.ids" in json.loads(t.metadata.schema_string)["fields"][2]["metadata"]
    write_table(path, data.slice(0, 2))  # new files follow the rules; the old ones (no partition columns) still read
    new = [a for a in Table(path).snapshot.files.values() if a.path not in t.snapshot.files]
    assert new and all(pq.read_schema(os.path.join(path, a.relative_path)).names[-1] == "p" for a in new)
    expected = sorted(data.to_pylist() + data.slice(0, 2).to_pylist(), key=_key)
    assert _rows(path) == expected == _peer(path)


def test_enabling_v1_checks_the_live_files_and_v1_v2_exclude_each_other(tmp_path):
    path = str(tmp_path / "t")
    write_table(path, pa.table({"id": pa.array([1, 2], pa.int64()), "p": [1, 2]}), partition_by=["p"], configuration={"delta.columnMapping.mode": "name"})
    with pytest.raises(IcebergCompatError, match="partition columns in every data file"):  # (V1 covers every file of the table)
        Table(path).set_properties(V1)
    Table(path).set_properties(V2)  # V2 asks it of new files only
    with pytest.raises(IcebergCompatError, match="only one Iceberg compatibility version"):
        Table(path).set_properties(V1)
    assert Table(path).version == 1
    Table(path).set_properties({**V1, "delta.enableIcebergCompatV2": "false"})
    assert Table(path).version == 2


def test_deletion_vectors_block_it(tmp_path):
    path = str(tmp_path / "t")
    dvs = {"delta.enableDeletionVectors": "true", "delta.columnMapping.mode": "name"}
    write_table(path, pa.table({"id": pa.array(range(10), pa.int64())}), configuration=dvs)
    Table(path).delete("id < 3")  # a deletion vector
    with pytest.raises(IcebergCompatError, match="delta.enableDeletionVectors is true"):
        Table(path).set_properties(V2)
    with pytest.raises(IcebergCompatError, match=r"live file .* has one; run Table.optimize\(\)"):
        Table(path).set_properties({**V2, "delta.enableDeletionVectors": "false"})
    with pytest.raises(IcebergCompatError, match="deletionVectors feature"):  # V1: not even the feature
        Table(path).set_properties({**V1, "delta.enableDeletionVectors": "false"})
    assert Table(path).version == 1
    Table(path).set_properties({"delta.enableDeletionVectors": "false"})
    Table(path).optimize()
    Table(path).set_properties(V2)
    with pytest.raises(IcebergCompatError, match="deletion vectors to be off"):
        Table(path).set_properties({"delta.enableDeletionVectors": "true"})
    version = Table(path).version
    Table(path).delete("id = 5")  # copy-on-write: no deletion vector
    t = Table(path)
    assert t.version == version + 1 and all(a.deletion_vector is None for a in t.snapshot.files.values())
    assert _rows(path) == _peer(path) == [{"id": i} for i in (3, 4, 6, 7, 8, 9)]


def test_schema_changes_that_break_it_are_refused_with_nothing_committed(tmp_path):
    path = str(tmp_path / "t")
    data = pa.table({"id": pa.array([1], pa.int64()), "p": [1], "i": pa.array([1], pa.int32())})
    write_table(path, data, partition_by=["p"], configuration={**V1, "delta.enableTypeWidening": "true"})
    before = _data_files(path)
    with pytest.raises(IcebergCompatError, match="does not allow the type array"):
        write_table(path, data.append_column("l", pa.array([[1]])), schema_mode="merge")
    with pytest.raises(IcebergCompatError, match="does not allow the type map"):
        Table(path).add_columns({"m": pa.map_(pa.string(), pa.int32())})
    with pytest.raises(IcebergCompatError, match="does not allow replacing the partitioning"):
        write_table(path, data, mode="overwrite", schema_mode="overwrite", partition_by=["id"])
    assert Table(path).version == 0 and _data_files(path) == before  # no file left behind either
    write_table(path, data.append_column("n", pa.array([2], pa.int32())), schema_mode="merge")  # primitives evolve
    assert Table(path).version == 1


def test_a_type_change_iceberg_lacks_blocks_enabling(tmp_path):
    path = str(tmp_path / "t")
    write_table(path, pa.table({"i": pa.array([1], pa.int32())}), configuration={"delta.enableTypeWidening": "true", "delta.columnMapping.mode": "name"})
    Table(path).alter_column_type("i", "double")
    with pytest.raises(IcebergCompatError, match="type change of column 'i' from integer to double"):
        Table(path).set_properties(V2)
    assert Table(path).version == 1


def test_v2_allow_list(tmp_path):
    with pytest.raises(IcebergCompatError, match="IcebergCompatV2 does not allow the type void"):
        write_table(str(tmp_path / "t"), pa.table({"id": [1], "v": pa.nulls(1)}), configuration=V2)
    with pytest.raises(IcebergCompatError, match="requires column mapping"):
        write_table(str(tmp_path / "t"), pa.table({"id": [1]}), configuration={**V2, "delta.columnMapping.mode": "none"})
    assert not os.path.exists(tmp_path / "t" / "_delta_log")


def test_the_spark_written_v2_table_takes_every_write(tmp_path):
    from tests.test_write_every_table import _lakelog_ops, _run

    path = str(tmp_path / "t")
    shutil.copytree(os.path.join(DATA, "table-with-icebegCompatV2Enabled"), path)
    spark_files = set(Table(path).snapshot.files)
    _, ops = _lakelog_ops(path)
    assert _run(path, ops) == "written"
    t = Table(path)
    new = [a for p, a in t.snapshot.files.items() if p not in spark_files]
    assert new and all(a.num_records() is not None for a in new)
    fields = {f["name"]: f for f in json.loads(t.metadata.schema_string)["fields"]}
    meta = fields["array_of_prims"]["metadata"]
    for a in new:
        schema = pq.read_schema(os.path.join(path, a.relative_path))
        assert not [m for f in schema for m in _ids_missing(f)]
        element = schema.field(meta["delta.columnMapping.physicalName"]).type.value_field
        assert field_id(element) == 31 == meta["delta.columnMapping.nested.ids"][meta["delta.columnMapping.physicalName"] + ".element"]


def test_spark_writes_keep_it(spark, tmp_path):
    """format("lakelog") appends and LakelogTable update and merge write from Spark's tasks: their files
    follow the same rules (field ids, partition columns last, numRecords)."""
    from spark_ext import LakelogTable

    path = str(tmp_path / "t")
    write_table(path, pa.table({"id": pa.array([1, 2], pa.int64()), "p": ["a", "b"], "l": pa.array([[1], []], pa.list_(pa.int64()))}),
                partition_by=["p"], configuration=V2)
    spark.createDataFrame([(3, "a", [5])], "id long, p string, l array<long>").write.format("lakelog").mode("append").save(path)
    t = LakelogTable.forPath(spark, path)
    t.update("id = 1", {"l": "array(7, 8)"})
    src = spark.createDataFrame([(2, "b", [9]), (4, "c", None)], "id long, p string, l array<long>")
    t.alias("t").merge(src.alias("s"), "t.id = s.id").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    _check_files(path, ["p"])
    expected = sorted([{"id": 1, "p": "a", "l": [7, 8]}, {"id": 2, "p": "b", "l": [9]}, {"id": 3, "p": "a", "l": [5]}, {"id": 4, "p": "c", "l": None}], key=_key)
    assert _rows(path) == expected == _peer(path)

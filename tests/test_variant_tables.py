"""Variant columns (Delta's variantType, variantShredding): the Spark-written tables in tests/data read
with exactly their expected bytes, a shredded file is reassembled, writes keep the binaries byte for
byte through every path (append, overwrite, delete/update/merge with and without deletion vectors,
optimize), deltalake reads what lakelog writes, and comparisons on variants are refused."""

from __future__ import annotations

import json
import os
import shutil

import deltalake
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakelog
import lakelog.schema.types
from lakelog.actions import AddCDCFile, AddFile, Protocol
from lakelog.errors import (
    InvalidFilterError,
    MissingDataFileError,
    PredicateError,
    UnsupportedFeatureError,
)
from lakelog.log.delta_log import DeltaLog
from lakelog.storage import Storage
from lakelog.variant import VARIANT_ARROW_TYPE, parse_json, to_json

from .expected_rows import canonical_rows, expected, table_path

SPARK_TABLES = ["spark-variant-checkpoint", "spark-shredded-variant-preview-delta"]


def _variant(texts: list[str | None]) -> pa.Array:
    """A variant column of JSON texts, encoded as Spark's parse_json does."""
    pairs = [None if t is None else parse_json(t) for t in texts]
    value = pa.array([b"" if p is None else p[1] for p in pairs], pa.binary())
    meta = pa.array([b"" if p is None else p[0] for p in pairs], pa.binary())
    return pa.StructArray.from_arrays([value, meta], fields=list(VARIANT_ARROW_TYPE), mask=pa.array([p is None for p in pairs]))


def _table(ids: list[int], texts: list[str | None]) -> pa.Table:
    return pa.Table.from_arrays([pa.array(ids, pa.int64()), _variant(texts)], schema=pa.schema([("id", pa.int64()), lakelog.variant_field("v")]))


def _bytes(t: pa.Table) -> dict[int, tuple[bytes, bytes] | None]:
    return {r["id"]: None if r["v"] is None else (r["v"]["metadata"], r["v"]["value"]) for r in t.to_pylist()}


@pytest.mark.parametrize("name", SPARK_TABLES)
def test_spark_tables_read_exactly_their_variant_bytes(name):
    e = expected(name)
    t = lakelog.Table(table_path(name))
    assert t.snapshot.file_set.base is not None  # read from the classic checkpoint at version 2
    assert lakelog.read_table(table_path(name)).column_names == e["columns"]
    assert canonical_rows(t.to_pyarrow()) == e["rows"]
    got = canonical_rows(t.to_pyarrow(filters=[("id", "<", 10)]))
    assert got == [r for r in e["rows"] if r["id"] < 10] and len(got) == 12
    # version 0: the 100 rows of the CREATE (versions 1 and 2 each append one of them again)
    first = canonical_rows(lakelog.read_table(table_path(name), version=0))
    assert len(first) == 100 and sorted({json.dumps(r, sort_keys=True) for r in e["rows"]}) == [json.dumps(r, sort_keys=True) for r in first]
    df = t.to_pandas()
    row = df[df.id == 7].iloc[0]
    assert row.v == {"key": 7} and row.struct_of_array_of_variants == {"v": [None, {"key": 7}]}
    assert t.to_duckdb(["id", "v"], [("id", "=", 7)]).fetchall() == [(7, '{"key":7}')]
    assert t.to_polars(["id", "v"], [("id", "=", 7)]).rows() == [(7, '{"key":7}')]


def test_the_log_only_stable_feature_table_opens_and_names_its_missing_files():
    t = lakelog.Table(table_path("spark-variant-stable-feature-checkpoint"))
    assert "variantType" in t.protocol.reader_features
    assert lakelog.schema.types.is_variant_field(t.schema.field("v"))
    assert lakelog.schema.types.is_variant_field(t.schema.field("array_of_variants").type.value_field)
    with pytest.raises(MissingDataFileError):
        t.to_pyarrow()


def test_a_variant_column_without_the_feature_is_refused(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, _table([1], ['{"a":1}']))
    log = os.path.join(path, "_delta_log", "00000000000000000000.json")
    with open(log) as f:
        lines = [json.loads(x) for x in f]
    lines = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}} if "protocol" in x else x for x in lines]
    with open(log, "w") as f:
        f.write("\n".join(json.dumps(x) for x in lines) + "\n")
    with pytest.raises(UnsupportedFeatureError, match="variantType"):
        lakelog.Table(path)


def test_create_declares_the_feature_and_writes_null_counts_only(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, _table([1, 2, 3], ['{"a": [1, 2.5, "x"]}', None, "null"]))
    t = lakelog.Table(path)
    assert t.schema.field("v").type == lakelog.schema.types.VARIANT_STORAGE == VARIANT_ARROW_TYPE  # the codec's Arrow type
    assert (t.protocol.min_reader_version, t.protocol.min_writer_version) == (3, 7)
    assert t.protocol.reader_features == ["variantType"] and t.protocol.writer_features == ["variantType"]
    assert json.loads(t.metadata.schema_string)["fields"][1]["type"] == "variant"
    stats = json.loads(next(iter(t.snapshot.files.values())).stats)
    assert stats["nullCount"] == {"id": 0, "v": 1} and "v" not in stats["minValues"] and "v" not in stats["maxValues"]
    assert _bytes(t.to_pyarrow()) == {1: parse_json('{"a": [1, 2.5, "x"]}'), 2: None, 3: parse_json("null")}
    # deltalake reads the same bytes
    theirs = pa.table(deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path)).execute("SELECT id, v FROM t").read_all())
    assert _bytes(theirs) == _bytes(t.to_pyarrow())


def test_writes_accept_json_text_python_values_and_spark_ordered_structs(tmp_path):
    path = str(tmp_path / "t")
    df = pd.DataFrame({"id": [1, 2, 3], "v": [{"a": 1, "b": [True, None]}, "text", None]})
    lakelog.write_table(path, lakelog.with_variants(df, ["v"]))
    lakelog.write_table(path, pa.table({"id": [4, 5], "v": ['{"k": -1.5e3}', None]}))  # JSON text
    spark_order = pa.StructArray.from_arrays([pa.array([parse_json("[1]")[1]]), pa.array([parse_json("[1]")[0]])], names=["value", "metadata"])
    lakelog.write_table(path, pa.table({"id": [6], "v": spark_order}))
    got = lakelog.Table(path).to_pandas().sort_values("id")
    assert got.v.tolist() == [{"a": 1, "b": [True, None]}, "text", None, {"k": -1500.0}, None, [1]]
    texts = dict(lakelog.Table(path).to_duckdb(["id", "v"]).fetchall())
    assert texts[1] == '{"a":1,"b":[true,null]}' and texts[4] == to_json(*parse_json('{"k": -1.5e3}'))
    with pytest.raises(lakelog.SchemaMismatchError, match="not JSON"):
        lakelog.write_table(path, pa.table({"id": [7], "v": ["{not json"]}))
    assert lakelog.Table(path).version == 2


@pytest.mark.parametrize("dv", [False, True])
def test_row_level_operations_keep_the_bytes(tmp_path, dv):
    path = str(tmp_path / "t")
    texts = ['{"b": 2, "a": 1}', "[1, 2, 3]", '"s"', None, "1.25"]
    conf = {"delta.enableDeletionVectors": "true"} if dv else None
    lakelog.write_table(path, _table([1, 2, 3, 4, 5], texts), configuration=conf)
    lakelog.write_table(path, _table([6], ['{"z": null}']))
    before = _bytes(lakelog.Table(path).to_pyarrow())
    t = lakelog.Table(path)
    t.delete("id = 2")
    assert any(a.deletion_vector is not None for a in lakelog.Table(path).snapshot.files.values()) == dv
    t.update({"id": "id + 10"}, "v IS NULL")
    src = _table([1, 7], ['{"new": true}', "[]"])
    t.merge(src, "target.id = source.id").when_matched_update_all().when_not_matched_insert_all().execute()
    t.optimize()
    want = {k: v for k, v in before.items() if k not in (2, 4)}
    want.update({14: None, 1: parse_json('{"new": true}'), 7: parse_json("[]")})
    assert _bytes(lakelog.Table(path).to_pyarrow()) == want
    if dv:
        rows = pa.table(deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path)).execute("SELECT id, v FROM t").read_all())
    else:
        rows = deltalake.DeltaTable(path).to_pyarrow_table()
    assert _bytes(rows) == want


def test_comparisons_on_variants_are_refused_is_null_is_not(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, _table([1, 2], ["1", None]))
    t = lakelog.Table(path)
    for predicate in ["v = '1'", "v > 1", "v.value = 'x'", "v IS NULL OR v <> v"]:
        with pytest.raises(PredicateError, match="variant"):
            t.delete(predicate)
    with pytest.raises(PredicateError, match="variant"):
        t.update({"v": "'1'"}, "id = 1")
    with pytest.raises(PredicateError, match="variant"):
        t.merge(_table([1], ["2"]), "target.v = source.v").when_matched_delete().execute()
    with pytest.raises(InvalidFilterError):
        t.to_pyarrow(filters=[("v", "=", "1")])
    assert lakelog.Table(path).version == 0
    t.delete("v IS NULL")
    assert _bytes(lakelog.Table(path).to_pyarrow()) == {1: parse_json("1")}


def _shredded_table(path: str) -> None:
    """A table with variantShredding whose second file stores v shredded (typed_value int64)."""
    lakelog.write_table(path, _table([0], ['{"a": 1}']))
    _add_shredded_file(path, 1)


def _add_shredded_file(path: str, version: int) -> None:
    """Commit ``version``: variantShredding, and a file of ids 1, 2, 3 storing v shredded (42, "hi", NULL)."""
    shredded = pa.struct([pa.field("metadata", pa.binary(), False), pa.field("value", pa.binary()), pa.field("typed_value", pa.int64())])
    meta = parse_json("1")[0]
    v = pa.StructArray.from_arrays(
        [pa.array([meta, meta, meta], pa.binary()), pa.array([None, parse_json('"hi"')[1], None], pa.binary()), pa.array([42, None, None], pa.int64())],
        fields=list(shredded), mask=pa.array([False, False, True]),
    )
    f = os.path.join(path, "shredded.parquet")
    pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": v}), f)
    p = lakelog.Table(path).protocol
    features = [sorted(set(fs) | {"variantShredding"}) for fs in (p.reader_features, p.writer_features)]
    stats = json.dumps({"numRecords": 3, "minValues": {"id": 1, "v": "not a usable bound"}, "maxValues": {"id": 3}, "nullCount": {"id": 0, "v": 1}})
    DeltaLog(Storage(path)).write_commit(version, [Protocol(3, 7, *features), AddFile("shredded.parquet", {}, os.path.getsize(f), 0, True, stats)])


def test_shredded_files_are_reassembled_and_rewritten_unshredded(tmp_path):
    path = str(tmp_path / "t")
    _shredded_table(path)
    t = lakelog.Table(path)
    assert dict(zip(*t.to_pandas().sort_values("id")[["id", "v"]].T.values.tolist())) == {0: {"a": 1}, 1: 42, 2: "hi", 3: None}
    assert t.to_pyarrow(filters=[("id", ">=", 2)]).num_rows == 2
    with pytest.raises(UnsupportedFeatureError, match="shredding"):
        t.to_pyarrow_dataset()
    t.update({"id": "id * 10"}, "id = 1")  # the shredded file is rewritten, unshredded
    got = lakelog.Table(path).to_pyarrow()
    assert json.loads(to_json(*_bytes(got)[10])) == 42
    for add in lakelog.Table(path).snapshot.files.values():
        assert "typed_value" not in str(pq.read_schema(os.path.join(path, add.relative_path)))


def test_deltalake_tables_listing_variant_type_read_and_write(tmp_path):
    """deltalake lists variantType in every table it creates with deletion vectors."""
    path = str(tmp_path / "t")
    deltalake.write_deltalake(path, pa.table({"id": [1, 2, 3]}), configuration={"delta.enableDeletionVectors": "true"})
    assert "variantType" in lakelog.Table(path).protocol.reader_features
    lakelog.Table(path).delete("id = 2")
    lakelog.write_table(path, pa.table({"id": [4]}))
    assert sorted(lakelog.Table(path).to_pyarrow().column("id").to_pylist()) == [1, 3, 4]
    rows = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path)).execute("SELECT id FROM t").read_all()
    assert sorted(pa.table(rows).column("id").to_pylist()) == [1, 3, 4]


def test_spark_tables_take_appends_of_their_own_rows(tmp_path):
    path = str(tmp_path / "t")
    shutil.copytree(table_path("spark-variant-checkpoint"), path)
    rows = lakelog.Table(path).to_pyarrow(filters=[("id", "=", 5)])
    lakelog.write_table(path, rows)
    again = lakelog.Table(path).to_pyarrow(filters=[("id", "=", 5)])
    assert again.num_rows == 2 and canonical_rows(again.slice(0, 1)) == canonical_rows(again.slice(1, 1)) == canonical_rows(rows)


def test_variant_columns_added_later_upgrade_the_protocol(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": pa.array([1], pa.int64())}))
    lakelog.write_table(path, _table([2], ['{"a": 1}']), schema_mode="merge")
    t = lakelog.Table(path)
    assert "variantType" in t.protocol.reader_features and lakelog.schema.types.is_variant_field(t.schema.field("v"))
    t.add_columns({"w": lakelog.variant_field("w")})
    t = lakelog.Table(path)
    assert json.loads(t.metadata.schema_string)["fields"][2]["type"] == "variant"
    lakelog.write_table(path, pa.table({"id": [3], "v": ["[1]"], "w": ['{"b": 2}']}))
    assert _bytes(lakelog.Table(path).to_pyarrow()) == {1: None, 2: parse_json('{"a": 1}'), 3: parse_json("[1]")}


def test_a_merge_source_of_json_text_stores_variants(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, _table([1, 2], ["1", "2"]))
    source = pa.table({"id": pa.array([2, 3], pa.int64()), "v": ['{"x": [true]}', "null"]})
    lakelog.Table(path).merge(source, "target.id = source.id").when_matched_update_all().when_not_matched_insert_all().execute()
    assert _bytes(lakelog.Table(path).to_pyarrow()) == {1: parse_json("1"), 2: parse_json('{"x": [true]}'), 3: parse_json("null")}


def test_pandas_objects_appended_without_with_variants_are_refused_not_changed(tmp_path):
    """pyarrow infers one struct for a column of dicts ({"a": 1}, {"b": 2} become {"a": 1, "b": null}, ...)."""
    path = str(tmp_path / "t")
    lakelog.write_table(path, _table([1], ["1"]))
    with pytest.raises(lakelog.SchemaMismatchError, match="with_variants"):
        lakelog.write_table(path, pd.DataFrame({"id": [2, 3], "v": [{"a": 1}, {"b": 2}]}))
    lakelog.write_table(path, lakelog.with_variants(pd.DataFrame({"id": [2, 3], "v": [{"a": 1}, {"b": 2}]}), ["v"]))
    lakelog.write_table(path, pd.DataFrame({"id": [4], "v": [[1, 2]]}))  # (no struct: encoded as given)
    assert _bytes(lakelog.Table(path).to_pyarrow())[3] == parse_json('{"b": 2}')
    assert lakelog.Table(path).to_pandas().sort_values("id").v.tolist() == [1, {"a": 1}, {"b": 2}, [1, 2]]


def test_update_and_merge_assign_parse_json_as_spark_does(tmp_path):
    path = str(tmp_path / "t")
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "s": ['{"x": 1.5e3}', None, "[1, 2]"]})
    lakelog.write_table(path, data.append_column(lakelog.variant_field("v"), _table([1, 2, 3], ["1", "2", "3"]).column("v")))
    t = lakelog.Table(path)
    t.update({"v": "parse_json(s)"}, "id >= 2")
    t.update({"v": """parse_json('{"b": [true, null], "a": -0.0}')"""}, "id = 1")
    src = pa.table({"id": pa.array([3, 4], pa.int64()), "j": ['"three"', '{"four": 4}']})
    t.merge(src, "target.id = source.id").when_matched_update({"v": "parse_json(source.j)"}).when_not_matched_insert(
        {"id": "source.id", "v": "parse_json(source.j)"}).execute()
    want = {1: parse_json('{"b": [true, null], "a": -0.0}'), 2: None, 3: parse_json('"three"'), 4: parse_json('{"four": 4}')}
    assert _bytes(lakelog.Table(path).to_pyarrow()) == want
    for value, message in [("parse_json('{bad')", "Invalid JSON"), ("coalesce(parse_json(s), v)", "whole value"),
                           ("parse_json(v)", "variant column 'v'"), ("parse_json(1)", "cannot take")]:
        with pytest.raises(PredicateError, match=message):
            t.update({"v": value}, "id = 1")
    with pytest.raises(PredicateError, match="no variant column"):
        t.update({"s": "parse_json('1')"})
    with pytest.raises(PredicateError, match="whole value"):
        t.delete("parse_json(s) = parse_json(s)")
    assert lakelog.Table(path).version == 3 and _bytes(lakelog.Table(path).to_pyarrow()) == want


@pytest.mark.parametrize("dv", [False, True])
def test_change_feed_of_a_variant_table_keeps_the_bytes(tmp_path, dv):
    path = str(tmp_path / "t")
    conf = {"delta.enableChangeDataFeed": "true", **({"delta.enableDeletionVectors": "true"} if dv else {})}
    lakelog.write_table(path, _table([0, 5], ['{"a": 1}', "[2]"]), configuration=conf)
    _add_shredded_file(path, 1)
    t = lakelog.Table(path)
    t.delete("id = 2")
    t.update({"id": "id + 10"}, "id = 0")
    t.merge(_table([1, 7], ['{"new": true}', "[]"]), "target.id = source.id").when_matched_update_all().when_not_matched_insert_all().execute()
    _add_shredded_change_files(path, 5)
    changes = lakelog.Table(path).changes()
    assert lakelog.schema.types.is_variant_field(changes.schema.field("v")) and changes.schema.field("v") == t.schema.field("v")
    got = sorted((r["_commit_version"], r["_change_type"], r["id"], None if r["v"] is None else (r["v"]["metadata"], r["v"]["value"]))
                 for r in changes.to_pylist())
    a, hi, n = parse_json('{"a": 1}'), parse_json('"hi"'), parse_json("42")  # (hi and 42 as the shredded file stores them)
    assert got == sorted([(0, "insert", 0, a), (0, "insert", 5, parse_json("[2]")),
                          (1, "insert", 1, n), (1, "insert", 2, hi), (1, "insert", 3, None),  # the shredded file
                          (2, "delete", 2, hi), (3, "update_preimage", 0, a), (3, "update_postimage", 10, a),
                          (4, "update_preimage", 1, n), (4, "update_postimage", 1, parse_json('{"new": true}')), (4, "insert", 7, parse_json("[]")),
                          (5, "update_preimage", 1, n), (5, "update_postimage", 1, hi), (5, "update_preimage", 2, n), (5, "update_postimage", 2, hi)])


def _add_shredded_change_files(path: str, version: int) -> None:
    """Commit ``version``: two change data files storing v shredded (an update of id 1 and one of id 2 from 42 to "hi")."""
    shredded = pa.struct([pa.field("metadata", pa.binary(), False), pa.field("value", pa.binary()), pa.field("typed_value", pa.int64())])
    meta = parse_json("1")[0]
    v = pa.StructArray.from_arrays([pa.array([meta] * 2, pa.binary()), pa.array([None, parse_json('"hi"')[1]], pa.binary()),
                                    pa.array([42, None], pa.int64())], fields=list(shredded))
    os.makedirs(os.path.join(path, "_change_data"), exist_ok=True)
    actions = []
    for i in (1, 2):
        rel = f"_change_data/shredded-{i}.parquet"
        pq.write_table(pa.table({"id": pa.array([i, i], pa.int64()), "v": v, "_change_type": ["update_preimage", "update_postimage"]}),
                       os.path.join(path, rel))
        actions.append(AddCDCFile(rel, {}, os.path.getsize(os.path.join(path, rel))))
    DeltaLog(Storage(path)).write_commit(version, actions)

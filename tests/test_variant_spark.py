"""Spark's VariantType through format("lakelog"): Spark writes parse_json values and lakelog stores
exactly Spark's bytes; lakelog writes variants and Spark reads them with the same to_json."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakelog
from lakelog.actions import AddFile, Protocol
from lakelog.errors import PredicateError
from lakelog.log.delta_log import DeltaLog
from lakelog.storage import Storage
from lakelog.variant import parse_json, to_json
from spark_ext import LakelogTable

from .expected_rows import table_path

QUERY = """select id, parse_json(format_string('{"key": %s, "arr": [1, 2.5, "x", null], "t": true}', id)) as v,
                  array(parse_json(cast(id as string)), null) as vs
           from range(4)"""


def _bytes(rows) -> dict:
    return {r["id"]: None if r["v"] is None else (bytes(r["v"]["value"]), bytes(r["v"]["metadata"])) for r in rows}


def test_spark_writes_variants_lakelog_stores_its_bytes(spark, tmp_path):
    path = str(tmp_path / "t")
    df = spark.sql(QUERY)
    df.write.format("lakelog").mode("append").save(path)
    t = lakelog.Table(path)
    assert "variantType" in t.protocol.reader_features
    theirs = {r.id: (bytes(r.v.value), bytes(r.v.metadata)) for r in df.collect()}
    assert _bytes(t.to_pyarrow().to_pylist()) == theirs
    assert t.to_pandas().sort_values("id").v.tolist()[3] == {"key": 3, "arr": [1, 2.5, "x", None], "t": True}
    # and Spark reads them back through format("lakelog")
    back = spark.read.format("lakelog").load(path)
    assert back.schema["v"].dataType.typeName() == "variant"
    assert sorted((r.id, r.k, r.j) for r in back.selectExpr("id", "cast(v:key as int) as k", "to_json(vs) as j").collect()) == [
        (i, i, f"[{i},null]") for i in range(4)
    ]


def test_lakelog_writes_variants_spark_reads_the_same_json(spark, tmp_path):
    path = str(tmp_path / "t")
    texts = ['{"a": [1, 2.5e10, -3], "b": {"c": "é"}}', "null", None, '"s"', "12345678901234"]
    lakelog.write_table(path, lakelog.with_variants(pa.table({"id": list(range(5)), "v": texts}), ["v"]))
    ours = {r["id"]: None if r["v"] is None else to_json(r["v"]["metadata"], r["v"]["value"]) for r in lakelog.Table(path).to_pyarrow().to_pylist()}
    theirs = {r.id: r.j for r in spark.read.format("lakelog").load(path).selectExpr("id", "to_json(v) as j").collect()}
    assert theirs == ours and ours[3] == '"s"' and ours[2] is None


def test_spark_reads_the_spark_written_variant_table(spark):
    path = table_path("spark-variant-checkpoint")
    rows = spark.read.format("lakelog").load(path).selectExpr("id", "to_json(v) as j", "to_json(map_of_variants) as m").collect()
    assert len(rows) == 102
    assert {(r.id, r.j, r.m) for r in rows} == {(i, f'{{"key":{i}}}', f'{{"{i}":{{"key":{i}}},"nullKey":null}}') for i in range(100)}


def _spark_dml_table(path: str, dv: bool) -> None:
    """ids 1..3 (v, w variants) in one file, ids 4..6 in a second file storing v shredded (typed_value int64)."""
    conf = {"delta.enableDeletionVectors": "true"} if dv else None
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ['{"a": 1, "b": "x"}', '{"a": 2}', None], "w": ["[1, 2]", '"w"', "3.5"]})
    lakelog.write_table(path, lakelog.with_variants(rows, ["v", "w"]), configuration=conf)
    shredded = pa.struct([pa.field("metadata", pa.binary(), False), pa.field("value", pa.binary()), pa.field("typed_value", pa.int64())])
    meta = parse_json("1")[0]
    v = pa.StructArray.from_arrays([pa.array([meta] * 3, pa.binary()), pa.array([None, parse_json('"hi"')[1], None], pa.binary()),
                                    pa.array([42, None, None], pa.int64())], fields=list(shredded), mask=pa.array([False, False, True]))
    w = lakelog.with_variants(pa.table({"w": ['{"k": 4}', "5", None]}), ["w"]).column("w").combine_chunks()
    f = os.path.join(path, "shredded.parquet")
    pq.write_table(pa.table({"id": pa.array([4, 5, 6], pa.int64()), "v": v, "w": w}), f)
    t = lakelog.Table(path)
    features = sorted(set(t.protocol.reader_features) | {"variantShredding"})
    DeltaLog(Storage(path)).write_commit(1, [Protocol(3, 7, features, sorted(set(t.protocol.writer_features) | {"variantShredding"})),
                                             AddFile("shredded.parquet", {}, os.path.getsize(f), 0, True, json.dumps({"numRecords": 3}))])


def test_spark_row_level_changes_on_variant_tables(spark, tmp_path):
    for dv in (False, True):
        path = str(tmp_path / f"t{dv}")
        _spark_dml_table(path, dv)
        before = {r["id"]: r for r in lakelog.Table(path).to_pyarrow().to_pylist()}
        t = LakelogTable(spark, path)
        t.delete("variant_get(v, '$.a', 'int') = 2")  # conditions on variants run in Spark
        t.delete("try_variant_get(v, '$', 'int') = 42")  # (a value of the shredded file)
        t.update("id = 3", {"v": "w", "w": "parse_json('{\"new\": [1, null]}')"})
        src = spark.sql("""select 5 as id, parse_json('{"m": 5}') as v, cast(null as variant) as w union all
                           select 7, parse_json('"seven"'), parse_json('7')""")
        t.alias("t").merge(src.alias("s"), "t.id = s.id").whenMatchedUpdate(set={"w": "s.v"}).whenNotMatchedInsertAll().execute()
        got = {r["id"]: r for r in lakelog.Table(path).to_pyarrow().to_pylist()}
        assert sorted(got) == [1, 3, 5, 6, 7]  # 2 and 4 deleted
        assert sorted((r.id, r.j) for r in t.toDF().selectExpr("id", "to_json(v) as j").collect()) == [
            (1, '{"a":1,"b":"x"}'), (3, '3.5'), (5, '"hi"'), (6, None), (7, '"seven"')]
        for i in (1, 6):  # untouched or copied rows: byte for byte (row 6 read from the shredded file: its SQL NULL)
            assert got[i] == before[i]
        assert got[3]["v"] == before[3]["w"] and (got[3]["w"]["metadata"], got[3]["w"]["value"]) == parse_json('{"new": [1, null]}')
        assert (got[5]["v"]["metadata"], got[5]["v"]["value"]) == parse_json('"hi"')  # reassembled from the shredded file
        assert (got[5]["w"]["metadata"], got[5]["w"]["value"]) == parse_json('{"m": 5}')
        assert (got[7]["v"]["metadata"], got[7]["v"]["value"]) == parse_json('"seven"') and got[7]["w"]["value"] == parse_json("7")[1]
        # Spark refuses = on variants, and nothing is committed
        version = lakelog.Table(path).version
        with pytest.raises(PredicateError, match="(?i)variant"):
            t.delete("v = w")
        assert lakelog.Table(path).version == version

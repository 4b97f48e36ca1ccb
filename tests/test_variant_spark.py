"""Spark's VariantType through format("lakelog"): Spark writes parse_json values and lakelog stores
exactly Spark's bytes; lakelog writes variants and Spark reads them with the same to_json."""

from __future__ import annotations

import pyarrow as pa

import lakelog
from lakelog.variant import to_json

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

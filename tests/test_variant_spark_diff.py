"""lakelog.variant against Spark 4 itself: parse_json bytes, to_json text, and Spark reading
lakelog-encoded Parquet as VARIANT. The default corpus is fixed plus a short seeded random part;
LAKELOG_VARIANT_DIFF_FULL=1 adds a large seeded random corpus."""

import datetime as dt
import json
import os
import random
import uuid
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq

from lakelog.errors import VariantError
from lakelog.variant import VARIANT_ARROW_TYPE, encode, parse_json, to_json

FIXED = [
    "null", "true", "false", "0", "-0", "1", "-1", "127", "128", "-128", "-129", "32767", "32768", "-32769",
    "2147483647", "2147483648", "-2147483649", "9223372036854775807", "-9223372036854775808",
    "9223372036854775808", "-9223372036854775809", "12345678901234567890123456789012345678",
    "123456789012345678901234567890123456789", "1" * 60,
    "0.0", "-0.0", "1.0", "1.50", "0.001", "-12.345", "123456789.5", "0.000000001", "0.0000000001",
    "1234567890.12345678", "0.00000000000000000000000000000000000001", "0.000000000000000000000000000000000000001",
    "99999999999999999999999999999999999999.0", "3.14159265358979323846264338327950288419716939937510",
    "1e0", "1E2", "1e-5", "-1.5e10", "1e308", "1.7976931348623157e308", "1e309", "-1e400", "4.9e-324", "1e-400",
    "2.5e-3", "1.0e7", "9999999.0e0", "1.2345e-3", "0.1e1", "-0.0e0", "123e-2", "5e-1",
    '""', '"a"', '"' + "x" * 63 + '"', '"' + "y" * 64 + '"', '"' + "z" * 300 + '"',
    '"\\u00e9t\\u00e9"', '"\\ud83d\\ude00 smile"', '"tab\\tnew\\nline\\r\\b\\f\\/\\\\\\""', '"\\u0001\\u001f\\u007f"',
    '"日本語テキスト"', '"\U0001F600\U0001F680"', '"\u2028\u2029"',
    "[]", "{}", "[1,2,3]", "[[[]]]", '[1,"a",null,true,1.5,{"k":[]}]', '{"a":1}', '{"b":1,"a":2}',
    '{"z":{"y":{"x":[1,{"w":null}]}},"a":"v"}', '{"a":{"a":{"a":1}}}', '{"k":1,"nested":{"k":2}}',
    '{"é":1,"e":2,"\U0001F600":3,"\uffff":4,"\ue000":5}', '{"":0}', '{"key with \\"quote\\"":"v"}',
    "  \n\t {\"ws\" : [ 1 , 2 ] }  ", '{"a":1} trailing', "[1] ]", '"s" "t"', "1 2", "true ", "null]",
    "{" + ",".join(f'"k{i:03d}":{i}' for i in range(300)) + "}",
    "[" + ",".join(str(i * 1000) for i in range(300)) + "]",
    "[" + ",".join('"' + "s" * 100 + '"' for _ in range(700)) + "]",
    "[" * 50 + "]" * 50,
]
INVALID = [
    "", "   ", "{", "[1,", '{"a":1,"a":2}', '{"a":{"b":1,"b":1}}', "NaN", "Infinity", "-Infinity", "01", "-",
    "+1", ".5", "1.", "1e", "1x", "truex", "nul", "[1,]", '{"a":1,}', "{'a':1}", '"\\x"', '"a\nb"',
    '"\\ud800"', '{"\\udc00":1}', '"unterminated', "[1 2]", '{"a" 1}', "1,2",
]


def _random_json(rng: random.Random, depth: int = 0):
    kind = rng.randrange(10 if depth < 3 else 6)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.choice([rng.randint(-200, 200), rng.randint(-2**40, 2**40), rng.randint(-2**70, 2**70)])
    if kind == 2:
        x = rng.choice([rng.uniform(-1e6, 1e6), rng.uniform(-1, 1) * 10 ** rng.randint(-320, 308), 0.0, -0.0])
        return x
    if kind == 3:
        return Decimal(rng.randint(-10**20, 10**20)).scaleb(-rng.randint(0, 30))
    if kind in (4, 5):
        alphabet = "abcé\u00ff\u0100\u4e2d\U0001F600\"\\\n\t\x01/ "
        return "".join(rng.choice(alphabet) for _ in range(rng.choice([0, 3, 40, 70])))
    if kind in (6, 7):
        return [_random_json(rng, depth + 1) for _ in range(rng.randrange(5))]
    keys = ["a", "b", "key", "é", "\U0001F600", "\uffee", "k" * 5, "Z"]
    return {rng.choice(keys) + str(rng.randrange(3)): _random_json(rng, depth + 1) for _ in range(rng.randrange(6))}


def _dumps(obj) -> str:
    if isinstance(obj, Decimal):
        return format(obj, "f")
    if isinstance(obj, float):
        return repr(obj)
    if isinstance(obj, list):
        return "[" + ",".join(_dumps(e) for e in obj) + "]"
    if isinstance(obj, dict):
        return "{" + ",".join(json.dumps(k) + ":" + _dumps(v) for k, v in obj.items()) + "}"
    return json.dumps(obj)


def _corpus() -> list[str]:
    rng = random.Random(20261127)
    n = 2000 if os.environ.get("LAKELOG_VARIANT_DIFF_FULL") == "1" else 20
    return FIXED + [_dumps(_random_json(rng)) for _ in range(n)]


def _spark_parse(spark, texts: list[str]) -> list:
    """Spark's (metadata, value, to_json) per text, or None where parse_json fails (try_parse_json)."""
    df = spark.createDataFrame([(i, t) for i, t in enumerate(texts)], "i int, s string")
    rows = df.selectExpr("i", "try_parse_json(s) AS v", "to_json(try_parse_json(s)) AS j").orderBy("i").collect()
    return [None if r.v is None else (bytes(r.v.metadata), bytes(r.v.value), r.j) for r in rows]


def test_parse_json_and_to_json_match_spark(spark):
    """One Spark query: valid texts give the same bytes and to_json text, invalid ones fail in both."""
    texts = _corpus() + INVALID
    spark_results = _spark_parse(spark, texts)
    mismatches = []
    for text, theirs in zip(texts, spark_results):
        try:
            ours = parse_json(text)
        except VariantError:
            ours = None
        if theirs is None or ours is None:
            if (theirs is None) != (ours is None):
                mismatches.append((text[:80], "spark fails" if theirs is None else "lakelog fails", ours, theirs))
            continue
        if ours != theirs[:2]:
            mismatches.append((text[:80], "bytes", ours, theirs[:2]))
        elif to_json(*ours) != theirs[2]:
            mismatches.append((text[:80], "to_json", to_json(*ours), theirs[2]))
    assert not mismatches, mismatches[:10]
    assert None not in spark_results[:len(FIXED)]  # the fixed corpus is all valid for Spark
    assert spark_results[-len(INVALID):] == [None] * len(INVALID)


def _encoded_values() -> list:
    utc = dt.UTC
    values = [
        None, True, 7, -300, 70000, 2**40, 2**70, 1.5, -0.0, 1e-7, 1e21, float("inf"), float("nan"),
        Decimal("1.50"), Decimal("-0.000123"), Decimal("12345678901234.5678"), Decimal("1" * 30 + ".25"),
        "short", "long " * 30, b"\x00\xffbinary", dt.date(2024, 2, 29), dt.date(1, 1, 1), dt.date(9999, 12, 31),
        dt.datetime(2024, 1, 2, 3, 4, 5, 600000, tzinfo=utc), dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=utc),
        dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=5))),
        dt.datetime(2000, 1, 1, 0, 0, 0, 1), uuid.UUID("12345678-1234-5678-9abc-def012345678"),
        [1, "a", None, [2.5, {"x": b"y"}]], {"b": {"c": dt.date(2020, 1, 1)}, "a": [Decimal("3.0")]},
        {f"k{i}": i for i in range(300)},
    ]
    rng = random.Random(7)
    n = 500 if os.environ.get("LAKELOG_VARIANT_DIFF_FULL") == "1" else 10
    values += [_random_json(rng) for _ in range(n)]
    return values


def test_spark_reads_lakelog_encoded_parquet_as_variant(spark, tmp_path):
    values = _encoded_values()
    pairs = [encode(v) for v in values]
    arr = pa.StructArray.from_arrays([pa.array([p[1] for p in pairs]), pa.array([p[0] for p in pairs])],
                                     fields=list(VARIANT_ARROW_TYPE))
    pq.write_table(pa.table({"i": pa.array(range(len(values)), pa.int32()), "v": arr}), tmp_path / "v.parquet")
    rows = (spark.read.schema("i int, v variant").parquet(str(tmp_path / "v.parquet"))
            .selectExpr("i", "to_json(v) AS j").orderBy("i").collect())
    ours = [to_json(*p) for p in pairs]
    theirs = [r.j for r in rows]
    assert [(v, a, b) for v, a, b in zip(values, ours, theirs) if a != b] == []


def test_unshred_gives_the_bytes_spark_reads_from_a_shredded_file(spark, tmp_path):
    from lakelog.variant import unshred
    from tests.test_variant_codec import _shredded_events

    arr, _ = _shredded_events()
    pq.write_table(pa.table({"i": pa.array(range(len(arr)), pa.int32()), "v": arr}), tmp_path / "s.parquet")
    rows = spark.read.schema("i int, v variant").parquet(str(tmp_path / "s.parquet")).orderBy("i").collect()
    theirs = [None if r.v is None else (bytes(r.v.metadata), bytes(r.v.value)) for r in rows]
    flat = unshred(pq.read_table(tmp_path / "s.parquet").column("v"))
    ours = [(row["metadata"], row["value"]) if row else None for row in flat.to_pylist()]
    assert None in theirs and ours == theirs


def test_unshred_spark_written_shredded_parquet(spark, tmp_path):
    # Spark shreds on write with a forced schema: objects (partially) shredded, arrays of decimals,
    # nested objects, values of other types left in value
    texts = [f'{{"a":{i},"b":"s{i}","c":[{i},2.5,"x"],"d":{{"e":{i * 10**12}}},"rest":{i % 3}}}' for i in range(20)]
    texts += ['"str"', "null", '{"a":"not an int","z":1e300}', "[1,2]", '{"a":1.5}', "{}", '{"d":[1]}', '{"c":{"k":1}}']
    confs = {"spark.sql.variant.writeShredding.enabled": "true",
             "spark.sql.variant.forceShreddingSchemaForTest":
                 "struct<a: int, b: string, c: array<decimal(9,1)>, d: struct<e: long>, z: double>"}
    old = {k: spark.conf.get(k, None) for k in confs}
    for k, v in confs.items():
        spark.conf.set(k, v)
    try:
        df = spark.createDataFrame([(i, t) for i, t in enumerate(texts)] + [(len(texts), None)], "i int, s string")
        df.selectExpr("i", "parse_json(s) AS v").coalesce(1).write.parquet(str(tmp_path / "out"))
    finally:
        for k, v in old.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    theirs = {r.i: None if r.v is None else (bytes(r.v.metadata), bytes(r.v.value)) for r in rows}
    table = pq.read_table(tmp_path / "out")
    assert "typed_value" in table.schema.field("v").type.names  # the file really is shredded
    from lakelog.variant import unshred

    flat = unshred(table.column("v"))
    ours = {i: (x["metadata"], x["value"]) if x else None for i, x in zip(table.column("i").to_pylist(), flat.to_pylist())}
    assert ours == theirs

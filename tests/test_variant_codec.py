"""lakelog.variant: the Variant binary codec, JSON text, Arrow columns and shredding reassembly."""

import datetime as dt
import json
import math
import uuid
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelog.errors import LakelogError, VariantError
from lakelog.variant import (
    VARIANT_ARROW_TYPE,
    VARIANT_NULL,
    decode,
    encode,
    from_json_array,
    from_python,
    parse_json,
    to_json,
    to_json_array,
    to_python,
    unshred,
)
from lakelog.variant.codec import VariantBuilder, read_metadata
from lakelog.variant.java_float import double_to_string, float_to_string

UTC = dt.UTC
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

keys = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
primitives = st.one_of(
    st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1), st.integers(-10**38 + 1, 10**38 - 1),
    st.floats(allow_nan=False), st.text(st.characters(exclude_categories=("Cs",)), max_size=80),
    st.binary(max_size=40), st.dates(),
    st.datetimes(timezones=st.just(UTC)), st.datetimes(), st.uuids(),
    st.decimals(allow_nan=False, allow_infinity=False, min_value=Decimal("-1e20"), max_value=Decimal("1e20"))
    .filter(lambda d: -38 <= d.as_tuple().exponent and len(d.as_tuple().digits) + max(d.as_tuple().exponent, 0) <= 38),
)
values = st.recursive(primitives, lambda inner: st.one_of(st.lists(inner, max_size=6),
                                                          st.dictionaries(keys, inner, max_size=6)), max_leaves=30)


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, (list, tuple)):
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, Decimal):
        return isinstance(b, Decimal) and a == b
    return type(a) is type(b) and a == b


@SETTINGS
@given(values)
def test_encode_decode_round_trip(obj):
    metadata, value = encode(obj)
    back = decode(metadata, value)
    expected = obj
    if isinstance(obj, int) and not isinstance(obj, bool) and not -2**63 <= obj < 2**63:
        expected = Decimal(obj)  # beyond int64: a decimal of scale 0
    assert _same(_normalise(expected), back), (obj, back)
    # decoding gives objects in key order; encoding that again changes only the dictionary order
    assert to_json(*encode(back)) == to_json(metadata, value)


def _normalise(obj):
    if isinstance(obj, int) and not isinstance(obj, bool) and not -2**63 <= obj < 2**63:
        return Decimal(obj)
    if isinstance(obj, Decimal) and obj.as_tuple().exponent > 0:
        return obj.quantize(Decimal(1))
    if isinstance(obj, list):
        return [_normalise(e) for e in obj]
    if isinstance(obj, dict):
        return {k: _normalise(v) for k, v in obj.items()}
    return obj


def _has_big_int(obj) -> bool:
    if isinstance(obj, int) and not isinstance(obj, bool):
        return not -2**63 <= obj < 2**63
    if isinstance(obj, list):
        return any(_has_big_int(e) for e in obj)
    if isinstance(obj, dict):
        return any(_has_big_int(v) for v in obj.values())
    return False


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10**45, 10**45), st.floats(allow_nan=False, allow_infinity=False),
              st.text(max_size=70).filter(lambda s: not any("\ud800" <= ch <= "\udfff" for ch in s))),
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(keys, inner, max_size=5)), max_leaves=25)


@SETTINGS
@given(json_values)
def test_parse_json_to_json_is_stable(obj):
    text = json.dumps(obj, ensure_ascii=False)
    metadata, value = parse_json(text)
    once = to_json(metadata, value)
    assert parse_json(once) == parse_json(to_json(*parse_json(once)))
    # doubles print in Java's digits; integers of more than 38 digits are doubles, as in Spark
    assert json.loads(once) == json.loads(text) or _has_float(obj)


def _has_float(obj) -> bool:
    if isinstance(obj, float) or (isinstance(obj, int) and abs(obj) >= 10**38):
        return True
    if isinstance(obj, list):
        return any(_has_float(e) for e in obj)
    if isinstance(obj, dict):
        return any(_has_float(v) for v in obj.values())
    return False


def test_integers_take_the_smallest_type():
    assert encode(0)[1] == b"\x0c\x00"
    assert encode(-129)[1] == b"\x10\x7f\xff"
    assert encode(2**31)[1] == b"\x18" + (2**31).to_bytes(8, "little")
    assert encode(2**63)[1][0] >> 2 == 10  # decimal16
    assert encode(True)[1] == b"\x04" and encode(None) == (b"\x01\x00\x00", b"\x00")
    with pytest.raises(VariantError, match="38 digits"):
        encode(10**40)


def test_decimals_by_precision_and_scale():
    assert encode(Decimal("1.50"))[1] == b"\x20\x02" + (150).to_bytes(4, "little")
    assert encode(Decimal("1234567890.5"))[1][0] >> 2 == 9
    assert encode(Decimal("0.0000000001"))[1][0] >> 2 == 9  # scale 10: decimal8 although 1 digit
    assert encode(Decimal("1" * 19))[1][0] >> 2 == 10
    assert decode(*encode(Decimal("1E+3"))) == Decimal(1000)
    for bad in (Decimal("NaN"), Decimal("1E-39"), Decimal("1" * 39)):
        with pytest.raises(VariantError):
            encode(bad)


def test_temporal_and_other_primitives():
    ts = dt.datetime(2024, 1, 2, 3, 4, 5, 678900, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert decode(*encode(ts)) == ts and decode(*encode(ts)).tzinfo == UTC
    assert to_json(*encode(ts)) == '"2024-01-02 01:04:05.6789+00:00"'
    assert to_json(*encode(dt.datetime(1, 1, 1))) == '"0001-01-01 00:00:00"'
    assert to_json(*encode(dt.date(1969, 12, 31))) == '"1969-12-31"'
    assert to_json(*encode(b"\x00\x01\xfe")) == '"AAH+"'
    u = uuid.UUID("12345678-1234-5678-9abc-def012345678")
    assert decode(*encode(u)) == u and to_json(*encode(u)) == f'"{u}"'
    assert decode(*encode(dt.time(13, 14, 15, 16))) == dt.time(13, 14, 15, 16)
    with pytest.raises(VariantError, match="no Variant type"):
        encode({1, 2})
    with pytest.raises(VariantError, match="keys are strings"):
        encode({1: "a"})


def test_short_and_long_strings():
    for n, header in ((0, 0x01), (63, 0xFD)):
        assert encode("x" * n)[1][0] == header
    long = encode("x" * 64)[1]
    assert long[0] == 16 << 2 and int.from_bytes(long[1:5], "little") == 64
    assert decode(*encode("é" * 40)) == "é" * 40  # 80 bytes: the long form


def test_big_objects_and_arrays_use_wide_offsets_and_ids():
    obj = {f"key{i:04d}": "v" * (i % 70) for i in range(300)}
    metadata, value = encode(obj)
    assert value[0] & 3 == 2 and value[0] >> 6 & 1 == 1  # is_large: 300 fields
    assert (value[0] >> 4) & 3 == 1  # 2-byte ids (ids up to 299)
    assert (value[0] >> 2) & 3 == 1  # 2-byte offsets
    assert metadata[0] >> 6 == 1  # 2-byte dictionary offsets
    assert decode(metadata, value) == obj
    arr = ["y" * 100] * 700  # 70 KB of elements: 3-byte offsets
    metadata, value = encode(arr)
    assert value[0] == (1 << 4 | 2 << 2 | 3)
    assert decode(metadata, value) == arr
    assert parse_json(to_json(metadata, value)) == (metadata, value)


def test_object_fields_sorted_as_spark_sorts_keys():
    # Spark compares keys as Java strings (UTF-16 units): U+FFFF sorts after U+1F600's surrogates
    metadata, value = parse_json('{"\uffff":1,"\U0001F600":2,"b":3,"a":4}')
    assert to_json(metadata, value) == '{"a":4,"b":3,"\U0001F600":2,"\uffff":1}'
    assert metadata[1] == 4 and metadata.endswith("\uffff\U0001F600ba".encode())
    assert to_json(*parse_json('{"a\uffff":1,"a\U0001F600":2,"":3}')) == '{"":3,"a\U0001F600":2,"a\uffff":1}'


@pytest.mark.parametrize("text", ["", "{", '{"a":1,"a":2}', "NaN", "01", "1x", "truex", '"\\ud800"', "[1,]", "'a'"])
def test_invalid_json_is_a_typed_error(text):
    with pytest.raises(VariantError) as e:
        parse_json(text)
    assert isinstance(e.value, LakelogError) and isinstance(e.value, ValueError)


def test_jackson_limits_as_spark_applies_them():
    # Spark (Jackson) nests up to 1000 levels and allows 1000 digits, the sign not counted
    deep = "[" * 1000 + "]" * 1000
    assert to_json(*parse_json(deep)) == deep
    assert decode(*parse_json(deep)) is not None
    assert to_json(*parse_json("-" + "1" * 1000)) == '"-Infinity"'
    assert to_json(*parse_json("0." + "1" * 1000)) == "0.1111111111111111"
    for text in ("[" * 1001 + "]" * 1001, "1" * 1001, "0." + "1" * 1001):
        with pytest.raises(VariantError):
            parse_json(text)


def test_duplicate_key_error_names_the_key():
    with pytest.raises(VariantError, match="'dup'"):
        parse_json('{"x":{"dup":1,"dup":2}}')
    with pytest.raises(VariantError, match="nesting"):
        parse_json("[" * 1001 + "]" * 1001)


@pytest.mark.parametrize("metadata, value, what", [
    (b"", b"\x00", "empty metadata"),
    (b"\x02\x00\x00", b"\x00", "version 2"),
    (b"\x01\x05\x00", b"\x00", "declares 5 keys"),
    (b"\x01\x01\x00\x05ab", b"\x00", "offsets"),
    (b"\x01\x01\x00\x02\xff\xfe", b"\x00", "not UTF-8"),
    (b"\x01\x00\x00", b"", "needs 1 bytes"),
    (b"\x01\x00\x00", b"\x18\x01\x02", "needs 9 bytes"),
    (b"\x01\x00\x00", b"\x54", "unknown primitive type id 21"),
    (b"\x01\x00\x00", b"\x02\x01\x00\x00\x01\x0c", "field id 0"),
    (b"\x01\x00\x00", b"\x03\x02\x00\x05\x02\x0c\x01", "offset 5"),
    (b"\x01\x00\x00", b"\x20\xff\x00\x00\x00\x00", "scale 255"),
    (b"\x01\x00\x00", b"\x0d\xff\xfe\x00", "not UTF-8"),
])
def test_malformed_bytes_are_typed_errors(metadata, value, what):
    for reader in (decode, to_json):
        with pytest.raises(VariantError, match=what):
            reader(metadata, value)


def test_java_float_text_matches_java_17():
    # values printed by Java 17's Double.toString / Float.toString
    cases = {4.9e-324: "4.9E-324", 1e23: "9.999999999999999E22", 2e23: "1.9999999999999998E23", 1e7: "1.0E7",
             9999999.0: "9999999.0", 0.001: "0.001", 1e-4: "1.0E-4", 123456789.0: "1.23456789E8", -0.0: "-0.0",
             2.82879384806159e17: "2.82879384806159008E17", 1.7976931348623157e308: "1.7976931348623157E308",
             100.0: "100.0", 0.1: "0.1"}
    assert {x: double_to_string(x) for x in cases} == cases
    assert [float_to_string(x) for x in (0.1, 1e-45, 3.4028235e38, 16777216.0)] == ["0.1", "1.4E-45", "3.4028235E38", "1.6777216E7"]


def test_arrow_columns_keep_sql_null_apart_from_variant_null():
    arr = from_json_array(pa.array(['{"a":1}', None, "null", "[1.5]"]))
    assert arr.type == VARIANT_ARROW_TYPE
    assert arr.is_valid().to_pylist() == [True, False, True, True]
    assert to_json_array(arr).to_pylist() == ['{"a":1}', None, "null", "[1.5]"]
    assert to_python(arr) == [{"a": 1}, None, VARIANT_NULL, [Decimal("1.5")]]
    again = from_python(to_python(arr))
    assert again.equals(arr)
    assert to_json_array(pa.chunked_array([arr.slice(0, 2), arr.slice(2)])).to_pylist()[2] == "null"
    with pytest.raises(VariantError):
        from_json_array(pa.array([1, 2]))


def test_arrow_column_round_trips_through_parquet(tmp_path):
    arr = from_python([{"k": [1, "two", None]}, None, VARIANT_NULL, dt.date(2020, 5, 17)])
    pq.write_table(pa.table({"v": arr}), tmp_path / "v.parquet")
    back = pq.read_table(tmp_path / "v.parquet").column("v")
    assert to_python(back) == [{"k": [1, "two", None]}, None, VARIANT_NULL, dt.date(2020, 5, 17)]


# ---- shredding -------------------------------------------------------------------------------------

def _field(typed: pa.DataType) -> pa.DataType:
    return pa.struct([pa.field("value", pa.binary()), pa.field("typed_value", typed)])


EVENT_TYPED = pa.struct([
    pa.field("event_type", _field(pa.string()), nullable=False),
    pa.field("event_ts", _field(pa.timestamp("us", tz="UTC")), nullable=False),
    pa.field("tags", _field(pa.list_(pa.field("element", _field(pa.string()), nullable=False))), nullable=False),
])
EVENT_TYPE = pa.struct([pa.field("metadata", pa.binary(), nullable=False), pa.field("value", pa.binary()),
                        pa.field("typed_value", EVENT_TYPED)])


def _shredded_events():
    """The spec's event example: rows as Spark writes them, with the objects they stand for."""
    m = encode({"event_type": 0, "event_ts": 0, "tags": 0, "email": 0, "click": 0})[0]

    def val(obj):  # a value encoded against the shared metadata (keys resolve through it)
        b = VariantBuilder()
        for k in ("event_type", "event_ts", "tags", "email", "click"):
            b.add_key(k)
        return b.append(obj)

    ts = dt.datetime(2024, 10, 24, 18, 21, 54, 937000, tzinfo=UTC)
    missing = {"value": None, "typed_value": None}
    rows = [
        ({"metadata": m, "value": None, "typed_value": {"event_type": {"value": None, "typed_value": "noop"},
                                                         "event_ts": {"value": None, "typed_value": ts}, "tags": missing}},
         {"event_type": "noop", "event_ts": ts}),
        ({"metadata": m, "value": val({"email": "user@example.com"}),
          "typed_value": {"event_type": {"value": None, "typed_value": "login"}, "event_ts": {"value": None, "typed_value": ts},
                          "tags": {"value": None, "typed_value": [{"value": None, "typed_value": "a"},
                                                                   {"value": val(None), "typed_value": None},
                                                                   {"value": val(7), "typed_value": None}]}}},
         {"event_type": "login", "event_ts": ts, "tags": ["a", None, 7], "email": "user@example.com"}),
        ({"metadata": m, "value": val("malformed: not an object"), "typed_value": None}, "malformed: not an object"),
        ({"metadata": m, "value": None, "typed_value": {"event_type": {"value": val(None), "typed_value": None},
                                                         "event_ts": {"value": val("2024-10-24"), "typed_value": None},
                                                         "tags": missing}},
         {"event_type": None, "event_ts": "2024-10-24"}),
        ({"metadata": m, "value": None, "typed_value": {"event_type": missing, "event_ts": missing, "tags": missing}}, {}),
        ({"metadata": m, "value": val(None), "typed_value": None}, None),
        (None, "SQL NULL"),
    ]
    return pa.array([r for r, _ in rows], EVENT_TYPE), [o for _, o in rows]


def test_unshred_rebuilds_values_as_spark_and_as_encode(tmp_path):
    arr, objects = _shredded_events()
    pq.write_table(pa.table({"v": arr}), tmp_path / "shredded.parquet")
    col = pq.read_table(tmp_path / "shredded.parquet").column("v")
    flat = unshred(col)
    assert flat.type == VARIANT_ARROW_TYPE
    assert to_python(flat) == [o if o is not None else VARIANT_NULL for o in objects[:-1]] + [None]
    # byte-compatible: shredded fields first (schema order), then the rest, as encode lays out a dict
    for i, obj in enumerate(objects[:-1]):
        assert (flat[i]["metadata"].as_py(), flat[i]["value"].as_py()) == encode(obj), i
    assert to_json_array(col).to_pylist()[1] == (
        '{"email":"user@example.com","event_ts":"2024-10-24 18:21:54.937+00:00","event_type":"login","tags":["a",null,7]}')


def test_unshred_primitive_typed_values():
    typed = pa.struct([pa.field("metadata", pa.binary(), nullable=False), pa.field("value", pa.binary()),
                       pa.field("typed_value", pa.int64())])
    m = b"\x01\x00\x00"
    arr = pa.array([{"metadata": m, "value": None, "typed_value": 34}, {"metadata": m, "value": b"\x00", "typed_value": None},
                    {"metadata": m, "value": b"\x0dn/a", "typed_value": None}, {"metadata": m, "value": None, "typed_value": 3 * 10**9},
                    {"metadata": m, "value": None, "typed_value": None}], typed)
    flat = unshred(arr)
    assert flat.field("value").to_pylist() == [encode(34)[1], b"\x00", b"\x0dn/a", encode(3 * 10**9)[1], b"\x00"]
    for t, x, expected in [(pa.decimal128(18, 4), Decimal("1.5000"), Decimal("1.5000")), (pa.float32(), 1.5, 1.5),
                           (pa.date32(), dt.date(2020, 1, 1), dt.date(2020, 1, 1)), (pa.bool_(), False, False),
                           (pa.timestamp("us"), dt.datetime(2020, 1, 1, 1), dt.datetime(2020, 1, 1, 1)),
                           (pa.binary(16), uuid.UUID(int=5).bytes, uuid.UUID(int=5))]:
        typ = pa.struct([pa.field("metadata", pa.binary(), nullable=False), pa.field("typed_value", t)])
        assert to_python(pa.array([{"metadata": m, "typed_value": x}], typ)) == [expected]


def test_unshred_refuses_malformed_columns():
    m = b"\x01\x00\x00"
    obj_t = pa.struct([pa.field("metadata", pa.binary(), nullable=False), pa.field("value", pa.binary()),
                       pa.field("typed_value", pa.struct([pa.field("a", _field(pa.int32()), nullable=False)]))])
    dup = encode({"a": 1})  # the shredded key also in value
    bad = [{"metadata": dup[0], "value": dup[1], "typed_value": {"a": {"value": None, "typed_value": 2}}},
           {"metadata": m, "value": b"\x0c\x01", "typed_value": {"a": {"value": None, "typed_value": 2}}}]
    for row in bad:
        with pytest.raises(VariantError):
            unshred(pa.array([row], obj_t))
    list_t = pa.struct([pa.field("metadata", pa.binary(), nullable=False),
                        pa.field("typed_value", pa.list_(pa.field("element", _field(pa.int32()), nullable=False)))])
    with pytest.raises(VariantError, match="missing"):
        unshred(pa.array([{"metadata": m, "typed_value": [{"value": None, "typed_value": None}]}], list_t))


# a shredding schema and a writer as the spec describes (VariantShredding.md), to check unshred on
# arbitrary values: whatever is shredded, unshred gives the bytes encode gives for the same value laid
# out as Spark rebuilds it (shredded fields in schema order, then the rest)
SCHEMA = pa.struct([
    pa.field("a", _field(pa.int64()), nullable=False),
    pa.field("b", _field(pa.string()), nullable=False),
    pa.field("c", _field(pa.list_(pa.field("element", _field(pa.struct([
        pa.field("x", _field(pa.float64()), nullable=False)])), nullable=False))), nullable=False),
    pa.field("d", _field(pa.struct([pa.field("e", _field(pa.string()), nullable=False)])), nullable=False),
])
COLUMN = pa.struct([pa.field("metadata", pa.binary(), nullable=False), pa.field("value", pa.binary()),
                    pa.field("typed_value", SCHEMA)])


def _shred(b: VariantBuilder, obj, t: pa.DataType):
    """(value, typed_value, the object as Spark rebuilds it) for obj under the typed_value type t."""
    if pa.types.is_struct(t) and isinstance(obj, dict):
        typed, rebuilt, names = {}, {}, [f.name for f in t]
        for f in t:
            if f.name in obj:
                v, tv, r = _shred(b, obj[f.name], f.type.field("typed_value").type)
                typed[f.name] = {"value": v, "typed_value": tv}
                rebuilt[f.name] = r
            else:
                typed[f.name] = {"value": None, "typed_value": None}
        rest = {k: v for k, v in obj.items() if k not in names}
        rest = dict(sorted(rest.items(), key=lambda kv: kv[0].encode("utf-16-be")))  # stored key order
        rebuilt.update(_stored(rest))
        return (b.append(rest) if rest else None), typed, rebuilt
    if pa.types.is_list(t) and isinstance(obj, list):
        parts = [_shred(b, e, t.value_type.field("typed_value").type) for e in obj]
        return None, [{"value": v, "typed_value": tv} for v, tv, _ in parts], [r for _, _, r in parts]
    fits = ((pa.types.is_int64(t) and isinstance(obj, int) and not isinstance(obj, bool) and -2**63 <= obj < 2**63)
            or (pa.types.is_string(t) and isinstance(obj, str)) or (pa.types.is_float64(t) and isinstance(obj, float)))
    if fits:
        return None, obj, obj
    return b.append(obj), None, _stored(obj)


def _stored(obj):
    """obj as decoding its encoding orders it: object keys in stored (sorted) order."""
    if isinstance(obj, dict):
        return {k: _stored(obj[k]) for k in sorted(obj, key=lambda k: k.encode("utf-16-be"))}
    if isinstance(obj, list):
        return [_stored(e) for e in obj]
    return obj


shred_leaves = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1), st.floats(allow_nan=False),
                         st.text(max_size=10).filter(lambda s: not any("\ud800" <= ch <= "\udfff" for ch in s)))
shred_values = st.recursive(shred_leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e", "x", "y", "é"]), inner, max_size=5)), max_leaves=20)


@SETTINGS
@given(st.lists(shred_values, min_size=1, max_size=5))
def test_unshred_any_shredding_matches_encode(objs):
    rows, expected = [], []
    for obj in objs:
        metadata = encode(obj)[0]
        b = VariantBuilder()
        for key in read_metadata(metadata):
            b.add_key(key)
        v, tv, rebuilt = _shred(b, obj, SCHEMA)
        rows.append({"metadata": metadata, "value": v, "typed_value": tv})
        expected.append(encode(rebuilt))
    flat = unshred(pa.array(rows, COLUMN))
    assert [(r["metadata"], r["value"]) for r in flat.to_pylist()] == expected

"""Type widening over Delta's whole table of changes, on data columns, partition columns and nested
fields: a table written with the old type is widened with ``Table.alter_column_type``, takes appends
of the new type, row-level changes and filters (pruned by partition values and stats logged before the
change), and its change data feed reads across the widening. Changes Delta does not list are refused
by name and commit nothing.

deltalake 1.6.6 is no peer here: it refuses the typeWidening reader feature on every read path
(``Unsupported table features required: [TypeWidening]``) and cannot even open a table whose date
partition column was widened to timestamp_ntz (``Failed to parse value '2024-01-01' as
'timestamp_ntz'``); each test checks it fails in exactly one of these ways (and compares its rows
if a later version reads the table), and checks lakelog's rows against values computed here.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import re

import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lakelog import Table, write_table
from lakelog.errors import SchemaMismatchError, UnsupportedFeatureError

D = decimal.Decimal
NAN, INF = math.nan, math.inf
ENABLE = {"delta.enableTypeWidening": "true"}

_INT_RANGES = {"byte": (-(2**7), 2**7 - 1), "short": (-(2**15), 2**15 - 1), "integer": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}
ARROW = {"byte": pa.int8(), "short": pa.int16(), "integer": pa.int32(), "long": pa.int64(), "float": pa.float32(), "double": pa.float64(),
         "date": pa.date32(), "timestamp_ntz": pa.timestamp("us")}


def arrow_type(name: str) -> pa.DataType:
    m = re.match(r"decimal\((\d+),(\d+)\)", name)
    return pa.decimal128(int(m.group(1)), int(m.group(2))) if m else ARROW[name]


def _ints(name: str) -> list:
    lo, hi = _INT_RANGES[name]
    return [1, -1, lo, hi, None]


# (from, to, values written before the change, values written after it), as Delta's own tests pick them
SUPPORTED = [
    ("byte", "short", _ints("byte"), _ints("short")),
    ("byte", "integer", _ints("byte"), _ints("integer")),
    ("byte", "long", _ints("byte"), _ints("long")),
    ("short", "integer", _ints("short"), _ints("integer")),
    ("short", "long", _ints("short"), _ints("long")),
    ("integer", "long", _ints("integer"), _ints("long")),
    ("float", "double", [1234.56789, -0.0, NAN, -INF, INF, 1.4e-45, -3.4028234663852886e38, 3.4028234663852886e38, None],
     [987654321.987654321, NAN, -INF, 5e-324, -1.7976931348623157e308, None]),
    ("byte", "double", _ints("byte"), [987654321.987654321, -0.0, NAN, INF, None]),
    ("short", "double", _ints("short"), [987654321.987654321, NAN, None]),
    ("integer", "double", _ints("integer"), [987654321.987654321, -INF, 5e-324, None]),
    ("date", "timestamp_ntz", [dt.date(2020, 1, 1), dt.date(2024, 2, 29), dt.date(1312, 2, 27), None, dt.date(9999, 12, 31)],
     [dt.datetime(2020, 3, 17, 15, 23, 15, 123456), dt.datetime(2058, 12, 31, 23, 59, 59, 999000), dt.datetime(1, 1, 1), None]),
    ("decimal(9,2)", "decimal(18,2)", [D("1.23"), D("10.34"), D("-9999999.99"), None], [D("-67.89"), D("9999999999999999.99"), None]),
    ("decimal(8,2)", "decimal(9,3)", [D("1.23"), D("10.34"), D("-999999.99"), None], [D("-67.891"), D("999999.999"), None]),
    ("decimal(9,2)", "decimal(19,3)", [D("1.23"), D("10.34"), D("9999999.99"), None], [D("-67.891"), D("9999999999999999.999"), None]),
    ("byte", "decimal(10,0)", _ints("byte"), [D("9999999999"), D("-3"), None]),
    ("short", "decimal(10,0)", _ints("short"), [D("9999999999"), None]),
    ("integer", "decimal(10,0)", _ints("integer"), [D("-9999999999"), None]),
    ("integer", "decimal(12,2)", _ints("integer"), [D("1234567890.12"), None]),
    ("long", "decimal(20,0)", _ints("long"), [D("9" * 20), D("-1"), None]),
    ("long", "decimal(22,2)", _ints("long"), [D("-12345678901234567890.12"), None]),
]

# Changes Delta refuses: narrowing, other families, decimals without room, and what only Delta 3.x
# previews recorded (byte -> decimal(4,1)); each is named in the error.
UNSUPPORTED = [
    ("integer", "byte"), ("long", "integer"), ("double", "float"), ("long", "double"), ("float", "decimal(20,10)"),
    ("byte", "decimal(2,0)"), ("byte", "decimal(4,1)"), ("short", "decimal(6,1)"), ("short", "decimal(4,0)"), ("integer", "decimal(9,0)"),
    ("integer", "decimal(11,2)"), ("long", "decimal(19,0)"), ("long", "decimal(21,2)"), ("timestamp_ntz", "date"), ("date", "timestamp"),
    ("decimal(9,2)", "decimal(9,3)"), ("decimal(9,2)", "decimal(8,2)"), ("decimal(18,2)", "decimal(8,1)"), ("decimal(9,2)", "decimal(10,4)"),
    ("decimal(18,2)", "decimal(12,1)"), ("integer", "string"), ("integer", "boolean"), ("decimal(10,0)", "long"), ("date", "string"),
]


def _widened(v, to: str, src: str = ""):
    """A value of the old type as the wider type holds it."""
    if v is None:
        return None
    if src == "float":
        return float(np.float32(v))
    if to == "timestamp_ntz":
        return dt.datetime.combine(v, dt.time())
    if to == "double":
        return float(v)
    if to.startswith("decimal"):
        return D(v).quantize(D(1).scaleb(-arrow_type(to).scale))
    return v


def _canon(v):
    if isinstance(v, float):
        return "NaN" if math.isnan(v) else repr(v)
    if isinstance(v, (D, dt.date)):
        return str(v)
    return v


def _rows(table: pa.Table, *cols: str) -> list:
    cols = cols or tuple(table.column_names)
    return sorted((tuple(_canon(r[c]) for c in cols) for r in table.to_pylist()), key=repr)


def _expected(rows: dict[int, object], *extra) -> list:
    return sorted(((i, _canon(v)) + extra for i, v in rows.items()), key=repr)


def _peer_rows(path: str) -> list | None:
    """deltalake's rows of the table, or None when it fails in one of the two known ways."""
    try:
        got = pa.table(deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path)).execute("select id, value from t").read_all())
    except Exception as e:  # noqa: BLE001 - deltalake raises its own classes
        assert re.search(r"Unsupported table features required: \[TypeWidening\]|Failed to parse value '[^']*' as '(timestamp_ntz|decimal\(\d+,\d+\))'", str(e)), e
        return None
    return _rows(got, "id", "value")


def _case_id(case) -> str:
    return f"{case[0]}->{case[1]}"


@pytest.mark.parametrize("partitioned", [False, True], ids=["data", "partition"])
@pytest.mark.parametrize("case", SUPPORTED, ids=_case_id)
def test_every_delta_widening_reads_writes_changes_and_filters(tmp_path, case, partitioned):
    src, to, old, new = case
    path = str(tmp_path / "t")
    config = {**ENABLE, "delta.enableChangeDataFeed": "true"}
    part = ["value"] if partitioned else None
    write_table(path, pa.table({"id": pa.array(range(len(old)), pa.int64()), "value": pa.array(old, arrow_type(src))}), partition_by=part, configuration=config)
    t = Table(path)
    t.checkpoint()  # stats and partition values of the old type also come from a checkpoint
    t.alter_column_type("value", to)
    assert t.schema.field("value").type == arrow_type(to)
    rows = {i: _widened(v, to, src) for i, v in enumerate(old)}
    assert _rows(t.to_pyarrow()) == _expected(rows)
    assert _rows(Table(path, version=0).to_pyarrow()) == _expected({i: _widened(v, src, src) for i, v in enumerate(old)})  # the old version reads as it was

    write_table(path, pa.table({"id": pa.array(range(100, 100 + len(new)), pa.int64()), "value": pa.array(new, arrow_type(to))}))
    rows.update({100 + i: v for i, v in enumerate(new)})
    t = Table(path)
    assert _rows(t.to_pyarrow()) == _expected(rows)
    peer = _peer_rows(path)
    assert peer is None or peer == _expected(rows)

    # Filters on the widened column: partition values and stats logged as the old type prune nothing wrongly.
    for v in {_canon(x): x for x in rows.values() if x is not None and not (isinstance(x, float) and math.isnan(x))}.values():
        want = sorted(i for i, x in rows.items() if x is not None and x == v)
        assert sorted(t.to_pyarrow(filters=[("value", "=", v)]).column("id").to_pylist()) == want, v
    assert sorted(t.to_pyarrow(filters=pc.field("value").is_null()).column("id").to_pylist()) == sorted(i for i, x in rows.items() if x is None)

    # Row-level changes rewrite old files with the wider type; a predicate on the column selects by value.
    assert t.update({"id": "id + 1000"}, "id = 0")["num_updated_rows"] == 1
    rows[1000] = rows.pop(0)
    assert t.delete("id = 1")["num_deleted_rows"] == 1
    deleted = {1: rows.pop(1)}
    target = new[0]
    t.merge(pa.table({"id": pa.array([2], pa.int64()), "value": pa.array([target], arrow_type(to))}), "target.id = source.id") \
        .when_matched_update_all().execute()
    merged_from, rows[2] = rows[2], target
    victim = next(v for i, v in sorted(rows.items()) if 3 <= i < 1000 and v is not None and not (isinstance(v, float) and math.isnan(v)))
    gone = {i: v for i, v in rows.items() if v is not None and v == victim}
    assert t.delete([("value", "=", victim)])["num_deleted_rows"] == len(gone)
    for i in gone:
        del rows[i]
    assert _rows(t.to_pyarrow()) == _expected(rows)
    assert t.check().ok
    peer = _peer_rows(path)
    assert peer is None or peer == _expected(rows)

    # The change data feed across the widening: every version's rows as the wider type.
    feed = t.changes(0)
    assert feed.schema.field("value").type == arrow_type(to)
    got = sorted(((r["_change_type"], r["id"], _canon(r["value"])) for r in feed.to_pylist()), key=repr)
    want = [("insert", i, _canon(_widened(v, to, src))) for i, v in enumerate(old)]
    want += [("insert", 100 + i, _canon(v)) for i, v in enumerate(new)]
    want += [("update_preimage", 0, _canon(_widened(old[0], to, src))), ("update_postimage", 1000, _canon(_widened(old[0], to, src)))]
    want += [("delete", 1, _canon(deleted[1]))]
    want += [("update_preimage", 2, _canon(merged_from)), ("update_postimage", 2, _canon(target))]
    want += [("delete", i, _canon(v)) for i, v in gone.items()]
    assert got == sorted(want, key=repr)


@pytest.mark.parametrize("partitioned", [False, True], ids=["data", "partition"])
@pytest.mark.parametrize("case", UNSUPPORTED, ids=_case_id)
def test_changes_delta_does_not_list_are_refused_by_name(tmp_path, case, partitioned):
    src, to = case
    path = str(tmp_path / "t")
    t_src = arrow_type(src) if src != "timestamp_ntz" else pa.timestamp("us")
    write_table(path, pa.table({"id": pa.array([1], pa.int64()), "value": pa.nulls(1, t_src)}), partition_by=["value"] if partitioned else None,
                configuration=ENABLE)
    t = Table(path)
    with pytest.raises(SchemaMismatchError, match=rf"cannot change column 'value' from {re.escape(src)} to {re.escape(to)}: .*widen {re.escape(src)} to"):
        t.alter_column_type("value", to)
    assert Table(path).version == 0


def test_the_date_partition_column_of_a_table_widened_to_timestamp_ntz_reads(tmp_path):
    """The table this once bricked: every read, DML and changes() failed on the '2024-01-01' partition values."""
    path = str(tmp_path / "t")
    write_table(path, pa.table({"d": pa.array([dt.date(2024, 1, 1), dt.date(2024, 1, 2)], pa.date32()), "v": [1, 2]}), partition_by=["d"],
                configuration={**ENABLE, "delta.enableChangeDataFeed": "true"})
    t = Table(path)
    t.alter_column_type("d", "timestamp_ntz")
    write_table(path, pa.table({"d": pa.array([dt.datetime(2024, 1, 1, 12, 30)], pa.timestamp("us")), "v": [3]}))
    with pytest.raises(Exception, match="Failed to parse value '2024-01-0[12]' as 'timestamp_ntz'"):
        deltalake.DeltaTable(path)
    t = Table(path)
    midnight = dt.datetime(2024, 1, 1)
    assert sorted((r["d"], r["v"]) for r in t.to_pyarrow().to_pylist()) == [(midnight, 1), (dt.datetime(2024, 1, 1, 12, 30), 3), (dt.datetime(2024, 1, 2), 2)]
    assert t.files([("d", "=", midnight)]) == [f for f in t.files() if f.startswith("d=2024-01-01/")]
    assert t.to_pyarrow(filters=[("d", "<", dt.datetime(2024, 1, 1, 1))]).column("v").to_pylist() == [1]
    t.update({"v": "v * 10"}, [("d", "=", midnight)])
    # a dynamic partition overwrite replaces the partition logged as '2024-01-02' (the same value)
    write_table(path, pa.table({"d": pa.array([dt.datetime(2024, 1, 2)], pa.timestamp("us")), "v": [20]}), mode="overwrite", partition_overwrite="dynamic")
    t = Table(path)
    assert sorted((r["d"], r["v"]) for r in t.to_pyarrow().to_pylist()) == [(midnight, 10), (dt.datetime(2024, 1, 1, 12, 30), 3), (dt.datetime(2024, 1, 2), 20)]
    feed = t.changes(0)
    assert ("insert", dt.datetime(2024, 1, 2), 2) in [(r["_change_type"], r["d"], r["v"]) for r in feed.to_pylist()]
    t.optimize()  # rewrites the old partitions' files, logging their values as timestamps
    assert t.check().ok
    assert sorted((r["d"], r["v"]) for r in t.to_pyarrow().to_pylist()) == [(midnight, 10), (dt.datetime(2024, 1, 1, 12, 30), 3), (dt.datetime(2024, 1, 2), 20)]


def test_stats_logged_as_the_old_type_still_skip_files(tmp_path):
    """Files written before the widening carry stats of the old type (integers for a long or decimal
    column, dates for a timestamp_ntz one), in commits and in a checkpoint: they bound the wider values."""
    path = str(tmp_path / "t")
    for k in range(3):
        write_table(path, pa.table({"i": pa.array([k * 10, k * 10 + 5], pa.int32()), "n": pa.array([k * 10, k * 10 + 5], pa.int16()),
                                    "d": pa.array([dt.date(2024, 1, 1 + k * 10), dt.date(2024, 1, 5 + k * 10)], pa.date32()),
                                    "f": pa.array([k * 10, k * 10 + 5], pa.int32())}), configuration=ENABLE if k == 0 else None)
        if k == 1:
            Table(path).checkpoint()
    t = Table(path)
    for col, to in (("i", "long"), ("n", "decimal(12,2)"), ("d", "timestamp_ntz"), ("f", "double")):
        t.alter_column_type(col, to)
    write_table(path, pa.table({"i": pa.array([2**40], pa.int64()), "n": pa.array([D("99.5")], pa.decimal128(12, 2)),
                                "d": pa.array([dt.datetime(2025, 1, 1, 6)], pa.timestamp("us")), "f": [0.5]}))
    t = Table(path)
    assert len(t.files()) == 4
    for col, lit, n_files, n_rows in (
        ("i", 12, 1, 0), ("i", 15, 1, 1), ("i", 2**40, 1, 1),
        ("n", D("25"), 1, 1), ("n", D("99.5"), 1, 1), ("n", D("7"), 0, 0),
        ("d", dt.datetime(2024, 1, 15), 1, 1), ("d", dt.datetime(2024, 1, 15, 0, 0, 1), 0, 0), ("d", dt.datetime(2025, 1, 1, 6), 1, 1),
    ):
        assert len(t.files([(col, "=", lit)])) == n_files, (col, lit)
        assert t.to_pyarrow(filters=[(col, "=", lit)]).num_rows == n_rows, (col, lit)
    assert len(t.files([("d", ">=", dt.datetime(2024, 1, 21))])) == 2
    assert len(t.files([("f", "=", 25.0)])) == 4  # double stats are never bounds (NaN, -0.0), old or new
    assert t.to_pyarrow(filters=[("f", "=", 25.0)]).num_rows == 1


def test_nested_fields_widen_by_their_field_path(tmp_path):
    """Struct fields, array elements, map keys and values, at any depth: recorded on the nearest struct
    field with Delta's fieldPath, read and written with the wider types."""
    path = str(tmp_path / "t")
    s_type = pa.struct([("x", pa.int8()), ("l", pa.list_(pa.struct([("q", pa.int32())])))])
    old = pa.table({
        "id": pa.array([1], pa.int64()),
        "s": pa.array([{"x": 7, "l": [{"q": 1}, {"q": -2}]}], s_type),
        "arr": pa.array([[1, None, 3]], pa.list_(pa.int16())),
        "m": pa.array([[(1.5, dt.date(2024, 1, 1))]], pa.map_(pa.float32(), pa.date32())),
        "am": pa.array([[[("k", D("1.25"))]]], pa.list_(pa.map_(pa.string(), pa.decimal128(6, 2)))),
    })
    write_table(path, old, configuration=ENABLE)
    t = Table(path)
    for column, to in (("s.x", "decimal(12,2)"), ("S.L.element.Q", "bigint"), ("arr.element", "int"), ("m.key", "double"), ("m.value", "timestamp_ntz"),
                       ("am.element.value", "decimal(10,4)")):
        t.alter_column_type(column, to)
    fields = {f["name"]: f for f in json.loads(t.snapshot.metadata.schema_string)["fields"]}
    assert fields["m"]["metadata"]["delta.typeChanges"] == [{"fromType": "float", "toType": "double", "fieldPath": "key"},
                                                            {"fromType": "date", "toType": "timestamp_ntz", "fieldPath": "value"}]
    assert fields["am"]["metadata"]["delta.typeChanges"] == [{"fromType": "decimal(6,2)", "toType": "decimal(10,4)", "fieldPath": "element.value"}]
    assert fields["arr"]["metadata"]["delta.typeChanges"] == [{"fromType": "short", "toType": "integer", "fieldPath": "element"}]
    x, q = fields["s"]["type"]["fields"]
    assert x["metadata"]["delta.typeChanges"] == [{"fromType": "byte", "toType": "decimal(12,2)"}]
    assert q["type"]["elementType"]["fields"][0]["metadata"]["delta.typeChanges"] == [{"fromType": "integer", "toType": "long"}]
    schema = t.schema
    new = pa.table({
        "id": pa.array([2], pa.int64()),
        "s": pa.array([{"x": D("1234567890.12"), "l": [{"q": 2**40}]}], schema.field("s").type),
        "arr": pa.array([[2**31 - 1]], pa.list_(pa.int32())),
        "m": pa.array([[(0.1, dt.datetime(2024, 1, 1, 6))]], pa.map_(pa.float64(), pa.timestamp("us"))),
        "am": pa.array([[[("z", D("123456.1234"))]]], pa.list_(pa.map_(pa.string(), pa.decimal128(10, 4)))),
    })
    write_table(path, new)
    t = Table(path)
    got = {r["id"]: r for r in t.to_pyarrow().to_pylist()}
    assert got[1] == {"id": 1, "s": {"x": D("7.00"), "l": [{"q": 1}, {"q": -2}]}, "arr": [1, None, 3], "m": [(1.5, dt.datetime(2024, 1, 1))],
                      "am": [[("k", D("1.2500"))]]}
    assert got[2] == new.to_pylist()[0]
    t.update({"id": "id + 10"}, "id = 1")
    assert sorted(t.to_pyarrow().column("id").to_pylist()) == [2, 11]
    assert t.to_pyarrow(filters=[("id", "=", 11)]).column("s").to_pylist() == [{"x": D("7.00"), "l": [{"q": 1}, {"q": -2}]}]
    assert _deltalake_refuses(path)
    for column, to, message in (("arr", "array<bigint>", "is a array"), ("m.element", "int", "is a map"), ("s.l.key", "int", "is an array"),
                                ("arr.element", "smallint", "from integer to short")):
        with pytest.raises(SchemaMismatchError, match=message):
            t.alter_column_type(column, to)


def _deltalake_refuses(path: str) -> bool:
    try:
        deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path)).execute("select * from t").read_all()
    except Exception as e:  # noqa: BLE001
        return "Unsupported table features required: [TypeWidening]" in str(e)
    raise AssertionError("deltalake now reads typeWidening tables: compare its rows here")


def test_widening_needs_delta_enable_type_widening(tmp_path):
    """As Delta: a writer changes a type only where delta.enableTypeWidening is true; setting it adds the
    typeWidening reader and writer feature (a table on the preview feature keeps it)."""
    path = str(tmp_path / "t")
    write_table(path, pa.table({"id": pa.array([1], pa.int32())}))
    t = Table(path)
    with pytest.raises(UnsupportedFeatureError, match=r"set_properties.*delta.enableTypeWidening"):
        t.alter_column_type("id", "long")
    with pytest.raises(SchemaMismatchError, match="not one of Delta's type widenings"):  # refused as a change first
        t.alter_column_type("id", "string")
    assert Table(path).version == 0
    t.set_properties({"delta.enableTypeWidening": True})
    p = t.protocol
    assert (p.min_reader_version, p.min_writer_version) == (3, 7) and "typeWidening" in p.reader_features and "typeWidening" in p.writer_features
    t.alter_column_type("id", "long")
    t.set_properties({"delta.enableTypeWidening": False})  # disabling stops further changes; the feature stays
    with pytest.raises(UnsupportedFeatureError, match="delta.enableTypeWidening"):
        t.alter_column_type("id", "decimal(20,0)")
    assert "typeWidening" in t.protocol.reader_features
    other = str(tmp_path / "u")
    write_table(other, pa.table({"x": pa.array([1.5], pa.float32())}), configuration=ENABLE)
    assert "typeWidening" in Table(other).protocol.reader_features


def test_columns_expressions_read_and_identity_columns_keep_their_type(tmp_path):
    """As Delta: a column a CHECK constraint or generation expression reads, or an identity column, cannot
    change type (the expression would change meaning); other columns, and the generated column itself, can."""
    path = str(tmp_path / "t")
    write_table(path, pa.table({"a": pa.array([1], pa.int32()), "b": pa.array([2], pa.int16()), "s": pa.array([{"x": 1, "y": 2}], pa.struct([("x", pa.int8()), ("y", pa.int8())]))}),
                configuration=ENABLE, generated_columns={"g": "a + 1"}, identity_columns={"k": {}})
    t = Table(path)
    t.add_constraint({"small_x": "s.x < 100"})
    with pytest.raises(SchemaMismatchError, match=r"generated column 'g' \(a \+ 1\) reads it.*drop_column\('g'\)"):
        t.alter_column_type("a", "long")
    with pytest.raises(SchemaMismatchError, match=r"CHECK constraint\(s\) small_x \(s.x < 100\) read it.*drop_constraint\('small_x'\)"):
        t.alter_column_type("s.x", "int")
    with pytest.raises(SchemaMismatchError, match="identity column 'k'"):
        t.alter_column_type("k", "decimal(20,0)")
    version = t.version
    t.alter_column_type("s.y", "int")  # the constraint reads s.x only
    t.alter_column_type("b", "int")
    t.alter_column_type("g", "long")
    assert t.version == version + 3
    write_table(path, pa.table({"a": pa.array([5], pa.int32()), "b": pa.array([2**20], pa.int32()), "s": pa.array([{"x": 3, "y": 2**20}], t.schema.field("s").type)}))
    got = sorted((r["a"], r["b"], r["g"], r["s"]["y"]) for r in Table(path).to_pyarrow().to_pylist())
    assert got == [(1, 2, 2, 2), (5, 2**20, 6, 2**20)]


def test_iceberg_compatible_tables_take_only_the_changes_iceberg_v2_reads(tmp_path):
    """The protocol forbids integers to double or decimal, date -> timestamp_ntz and decimal scale
    increases on a table with icebergCompatV1/V2."""
    path = str(tmp_path / "t")
    write_table(path, pa.table({"i": pa.array([1], pa.int32()), "s": pa.array([1], pa.int16()), "d": pa.array([dt.date(2024, 1, 1)], pa.date32()),
                                "n": pa.array([D("1.5")], pa.decimal128(5, 1)), "f": pa.array([1.5], pa.float32())}),
                configuration={**ENABLE, "delta.columnMapping.mode": "name"})
    Table(path).set_properties({"delta.enableIcebergCompatV2": "true"})
    t = Table(path)
    for column, to in (("i", "double"), ("s", "decimal(10,0)"), ("d", "timestamp_ntz"), ("n", "decimal(7,2)")):
        with pytest.raises(SchemaMismatchError, match=rf"column '{column}' .*Iceberg compatibility"):
            t.alter_column_type(column, to)
    assert Table(path).version == 1
    for column, to in (("i", "long"), ("s", "int"), ("n", "decimal(7,1)"), ("f", "double")):
        t.alter_column_type(column, to)
    assert [t.schema.field(c).type for c in ("i", "s", "n", "f")] == [pa.int64(), pa.int32(), pa.decimal128(7, 1), pa.float64()]


def test_spark_written_preview_tables_still_read_and_widen_further(tmp_path):
    """tests/data/type-widening (Spark 3.5, Delta 3.3 preview) records byte -> decimal(4,1), which only the
    preview wrote: it still reads; a further change keeps its typeWidening-preview feature."""
    import os
    import shutil

    path = str(tmp_path / "t")
    shutil.copytree(os.path.join(os.path.dirname(__file__), "data", "type-widening"), path)
    t = Table(path)
    before = t.to_pyarrow()
    assert before.schema.field("byte_decimal").type == pa.decimal128(4, 1)
    assert sorted(before.column("byte_decimal").to_pylist()) == [D("1.0"), D("123.4")]
    protocol = t.protocol
    t.alter_column_type("byte_decimal", "decimal(5,2)")
    t.alter_column_type("date_timestamp_ntz", "timestamp_ntz")  # (already: no commit)
    with pytest.raises(SchemaMismatchError, match="from decimal\\(5,2\\) to decimal\\(5,3\\)"):
        t.alter_column_type("byte_decimal", "decimal(5,3)")
    assert t.protocol == protocol and t.version == 3
    after = Table(path).to_pyarrow()
    assert after.column("byte_decimal").to_pylist() == [v.quantize(D("0.01")) for v in before.column("byte_decimal").to_pylist()]
    assert after.drop_columns(["byte_decimal"]).to_pylist() == before.drop_columns(["byte_decimal"]).to_pylist()

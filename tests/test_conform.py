"""Fitting data to a table's schema (lakelog.schema.conform): merge, safe casts, nested nulls, void columns.

Each case is written with lakelog and read back by lakelog and by deltalake.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable

import lakelog
from lakelog.schema.conform import safe_widening
from lakelog.errors import SchemaMismatchError

deltalake = pytest.importorskip("deltalake")
D = decimal.Decimal


def _struct(*fields):
    return pa.struct([f if isinstance(f, pa.Field) else pa.field(*f) for f in fields])


def _both(path: str) -> list[dict]:
    """The rows lakelog reads, after checking deltalake reads the same ones."""
    ours = lakelog.read_table(path).to_pylist()
    theirs = deltalake.DeltaTable(path).to_pyarrow_table().to_pylist()
    key = repr
    assert sorted(ours, key=key) == sorted(theirs, key=key)
    return ours


def _table_type(path: str, column: str) -> pa.DataType:
    return lakelog.Table(path).schema.field(column).type


# ---------------------------------------------------------------- schema_mode="merge"


def test_merge_adds_a_field_inside_a_struct(table_path):
    lakelog.write_table(table_path, pa.table({"s": pa.array([{"a": 1}], _struct(("a", pa.int64())))}))
    new = pa.table({"s": pa.array([{"a": 2, "b": "x"}], _struct(("a", pa.int64()), ("b", pa.string())))})
    with pytest.raises(SchemaMismatchError, match=r"'s\.b'.*schema_mode='merge'"):
        lakelog.write_table(table_path, new)
    lakelog.write_table(table_path, new, schema_mode="merge")
    assert _table_type(table_path, "s") == _struct(("a", pa.int64()), ("b", pa.string()))
    assert sorted(_both(table_path), key=repr) == [{"s": {"a": 1, "b": None}}, {"s": {"a": 2, "b": "x"}}]


def test_merge_adds_fields_at_any_depth_inside_lists_and_maps(table_path):
    inner = _struct(("x", pa.int32()))
    t = _struct(("deep", _struct(("inner", inner))), ("items", pa.list_(inner)), ("by_key", pa.map_(pa.string(), inner)))
    lakelog.write_table(table_path, pa.table({"c": pa.array([{"deep": {"inner": {"x": 1}}, "items": [{"x": 2}], "by_key": [("k", {"x": 3})]}], t)}))
    inner2 = _struct(("x", pa.int32()), ("y", pa.string()))
    t2 = _struct(("deep", _struct(("inner", inner2))), ("items", pa.list_(inner2)), ("by_key", pa.map_(pa.string(), inner2)), ("extra", pa.bool_()))
    row = {"deep": {"inner": {"x": 4, "y": "a"}}, "items": [{"x": 5, "y": "b"}, None], "by_key": [("k", {"x": 6, "y": "c"})], "extra": True}
    lakelog.write_table(table_path, pa.table({"c": pa.array([row, None], t2)}), schema_mode="merge")
    assert _table_type(table_path, "c") == t2
    rows = sorted(_both(table_path), key=repr)
    assert {"c": {"deep": {"inner": {"x": 1, "y": None}}, "items": [{"x": 2, "y": None}], "by_key": [("k", {"x": 3, "y": None})], "extra": None}} in rows
    assert {"c": row} in rows and {"c": None} in rows


def test_struct_fields_in_another_order_and_missing_nullable_fields(table_path):
    t = _struct(("a", pa.int64()), ("b", pa.string()), ("c", pa.float64()))
    lakelog.write_table(table_path, pa.table({"s": pa.array([{"a": 1, "b": "x", "c": 0.5}], t)}))
    reordered = pa.array([{"c": 1.5, "a": 2}, None], _struct(("c", pa.float64()), ("a", pa.int32())))
    lakelog.write_table(table_path, pa.table({"s": reordered}))  # no merge needed: nothing new
    assert _table_type(table_path, "s") == t
    assert sorted(_both(table_path), key=repr) == sorted(
        [{"s": {"a": 1, "b": "x", "c": 0.5}}, {"s": {"a": 2, "b": None, "c": 1.5}}, {"s": None}], key=repr
    )


def test_missing_non_nullable_nested_field_is_refused(table_path):
    t = _struct(pa.field("a", pa.int64(), False), ("b", pa.string()))
    lakelog.write_table(table_path, pa.table({"s": pa.array([{"a": 1, "b": "x"}], t)}))
    with pytest.raises(SchemaMismatchError, match=r"lacks column 's\.a'"):
        lakelog.write_table(table_path, pa.table({"s": pa.array([{"b": "y"}], _struct(("b", pa.string())))}))


def test_nested_field_differing_in_case_is_refused(table_path):
    lakelog.write_table(table_path, pa.table({"s": pa.array([{"a": 1}], _struct(("a", pa.int64())))}))
    with pytest.raises(SchemaMismatchError, match=r"'s\.A' differs in case"):
        lakelog.write_table(table_path, pa.table({"s": pa.array([{"A": 1}], _struct(("A", pa.int64())))}), schema_mode="merge")


def test_nested_names_delta_refuses_are_refused(table_path):
    with pytest.raises(SchemaMismatchError, match=r"'s\.a b'"):
        lakelog.write_table(table_path, pa.table({"s": pa.array([{"a b": 1}], _struct(("a b", pa.int64())))}))
    with pytest.raises(SchemaMismatchError, match=r"'l\.x' and 'l\.X'"):
        lakelog.write_table(table_path, pa.table({"l": pa.array([[{"x": 1, "X": 2}]], pa.list_(_struct(("x", pa.int64()), ("X", pa.int64()))))}))


def test_merge_never_changes_an_existing_columns_type(table_path):
    lakelog.write_table(table_path, pa.table({"x": pa.array([1], pa.int32())}))
    with pytest.raises(SchemaMismatchError, match=r"'x' has type long in the data but integer in the table.*does not change"):
        lakelog.write_table(table_path, pa.table({"x": pa.array([2], pa.int64())}), schema_mode="merge")
    assert lakelog.Table(table_path).version == 0


# ---------------------------------------------------------------- safe casts (with or without merge)


@pytest.mark.parametrize("schema_mode", [None, "merge"])
@pytest.mark.parametrize(
    "table_type, data",
    [
        (pa.list_(pa.int32()), pa.array([[1, None, -32768], None, []], pa.list_(pa.int16()))),
        (pa.decimal128(23, 1), pa.array([D("0.5"), D("-0.9"), None], pa.decimal128(1, 1))),
        (pa.decimal128(12, 4), pa.array([D("12.25")], pa.decimal128(4, 2))),
        (pa.int64(), pa.array([-128, 127], pa.int8())),
        (pa.int64(), pa.array([0, 2**32 - 1], pa.uint32())),
        (pa.float64(), pa.array([1.5, float("inf"), -0.0], pa.float32())),
        (pa.float64(), pa.array([2**31 - 1, -(2**31)], pa.int32())),
        (pa.decimal128(20, 0), pa.array([2**63 - 1, -(2**63)], pa.int64())),
        (pa.decimal128(12, 2), pa.array([2**31 - 1], pa.int32())),
        (pa.timestamp("us"), pa.array([dt.date(1, 1, 1), dt.date(9999, 12, 31)], pa.date32())),
        (pa.map_(pa.string(), pa.int64()), pa.array([[("a", 1)], None], pa.map_(pa.large_string(), pa.int16()))),
        (_struct(("d", pa.decimal128(10, 2)), ("l", pa.list_(pa.float64()))),
         pa.array([{"d": D("1.5"), "l": [1.0]}], _struct(("d", pa.decimal128(3, 1)), ("l", pa.list_(pa.float32()))))),
        (pa.string(), pa.array(["a", None], pa.large_string())),
        (pa.string(), pa.nulls(2)),
    ],
    ids=str,
)
def test_lossless_widenings_are_applied(table_path, schema_mode, table_type, data):
    lakelog.write_table(table_path, pa.table({"k": pa.array([0], pa.int8()), "c": pa.array([None], table_type)}))
    lakelog.write_table(table_path, pa.table({"k": pa.array([1] * len(data), pa.int8()), "c": data}), schema_mode=schema_mode)
    assert _table_type(table_path, "c") == table_type  # the table's type never changes
    got = [r["c"] for r in sorted(_both(table_path), key=lambda r: r["k"]) if r["k"] == 1]
    assert got == data.cast(table_type).to_pylist()


@pytest.mark.parametrize("schema_mode", [None, "merge"])
@pytest.mark.parametrize(
    "table_type, data, path",
    [
        (pa.list_(pa.int16()), pa.array([[1]], pa.list_(pa.int32())), "c.element"),
        (pa.decimal128(1, 1), pa.array([D("0.5")], pa.decimal128(23, 1)), "c"),
        (pa.decimal128(23, 1), pa.array([D("0.05")], pa.decimal128(5, 2)), "c"),
        (pa.decimal128(9, 0), pa.array([1], pa.int32()), "c"),
        (pa.int32(), pa.array([1], pa.int64()), "c"),
        (pa.int64(), pa.array([1], pa.uint64()), "c"),
        (pa.float32(), pa.array([1.5], pa.float64()), "c"),
        (pa.int64(), pa.array(["1"], pa.string()), "c"),
        (pa.date32(), pa.array([dt.datetime(2024, 1, 1)], pa.timestamp("us")), "c"),
        (pa.timestamp("us", "UTC"), pa.array([dt.datetime(2024, 1, 1)], pa.timestamp("us")), "c"),
        (_struct(("a", pa.int8())), pa.array([{"a": 1}], _struct(("a", pa.int16()))), "c.a"),
        (pa.map_(pa.string(), pa.int32()), pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int64())), "c.value"),
        (pa.map_(pa.int16(), pa.int32()), pa.array([[(1, 1)]], pa.map_(pa.int32(), pa.int32())), "c.key"),
        (pa.list_(pa.int64()), pa.array([1], pa.int64()), "c"),
    ],
    ids=str,
)
def test_lossy_or_foreign_types_are_refused_naming_the_path_and_both_types(table_path, schema_mode, table_type, data, path):
    lakelog.write_table(table_path, pa.table({"c": pa.array([None], table_type)}))
    with pytest.raises(SchemaMismatchError) as e:
        lakelog.write_table(table_path, pa.table({"c": data}), schema_mode=schema_mode)
    assert f"column {path!r} has type" in str(e.value)
    assert "in the data but" in str(e.value) and "in the table" in str(e.value)
    assert lakelog.Table(table_path).version == 0


def test_safe_widening_is_exactly_the_lossless_set():
    ints = [pa.int8(), pa.int16(), pa.int32(), pa.int64()]
    for i, src in enumerate(ints):
        for j, dst in enumerate(ints):
            assert safe_widening(src, dst) == (j >= i)
    assert safe_widening(pa.decimal128(5, 2), pa.decimal128(6, 3)) and not safe_widening(pa.decimal128(5, 2), pa.decimal128(6, 1))
    assert safe_widening(pa.int64(), pa.decimal128(20, 0)) and not safe_widening(pa.int64(), pa.decimal128(21, 2))
    assert not safe_widening(pa.float64(), pa.float32()) and not safe_widening(pa.int64(), pa.float64())
    assert not safe_widening(pa.timestamp("us"), pa.date32()) and safe_widening(pa.date32(), pa.timestamp("us"))
    assert not safe_widening(pa.date32(), pa.timestamp("us", "UTC"))


# ---------------------------------------------------------------- nulls in non-nullable nested fields


@pytest.mark.parametrize(
    "table_type, data, path",
    [
        (pa.list_(pa.field("element", pa.int64(), False)), pa.array([[1], [2, None]], pa.list_(pa.int64())), "c.element"),
        (pa.map_(pa.string(), pa.field("value", pa.int64(), False)), pa.array([[("k", None)]], pa.map_(pa.string(), pa.int64())), "c.value"),
        (_struct(pa.field("a", pa.int64(), False)), pa.array([{"a": None}], _struct(("a", pa.int64()))), "c.a"),
        (pa.list_(_struct(pa.field("a", pa.string(), False))), pa.array([[{"a": "x"}, {"a": None}]], pa.list_(_struct(("a", pa.string())))), "c.element.a"),
        (pa.list_(pa.field("element", pa.int64(), False)), pa.array([[1], [None]], pa.list_(pa.field("element", pa.int64(), False))), "c.element"),
    ],
    ids=str,
)
def test_nulls_in_non_nullable_nested_fields_are_a_schema_mismatch(table_path, table_type, data, path):
    lakelog.write_table(table_path, pa.table({"c": pa.array([], table_type)}))
    with pytest.raises(SchemaMismatchError, match=rf"column {path!r} is not nullable in the table but the data has 1 null"):
        lakelog.write_table(table_path, pa.table({"c": data}))
    assert lakelog.read_table(table_path).num_rows == 0


def test_nulls_under_a_null_parent_are_not_counted(table_path):
    t = _struct(pa.field("a", pa.int64(), False))
    lakelog.write_table(table_path, pa.table({"c": pa.array([{"a": 1}], t)}))
    data = pa.array([{"a": 2}, None], _struct(("a", pa.int64())))
    lakelog.write_table(table_path, pa.table({"c": data}))
    lst = pa.array([None, [3]], pa.list_(pa.int64()))
    lakelog.write_table(table_path + "_l", pa.table({"l": pa.array([[1]], pa.list_(pa.field("element", pa.int64(), False)))}))
    lakelog.write_table(table_path + "_l", pa.table({"l": lst}))
    assert sorted(_both(table_path), key=repr) == sorted([{"c": {"a": 1}}, {"c": {"a": 2}}, {"c": None}], key=repr)
    assert sorted(_both(table_path + "_l"), key=repr) == sorted([{"l": [1]}, {"l": None}, {"l": [3]}], key=repr)


def test_sliced_batches_are_cast_by_their_own_rows(table_path):
    lakelog.write_table(table_path, pa.table({"s": pa.array([], _struct(("a", pa.int64()), ("b", pa.list_(pa.int64()))))}))
    full = pa.array(
        [{"b": [9, None], "a": 1}, None, {"b": None, "a": 3}, {"b": [4], "a": None}], _struct(("b", pa.list_(pa.int32())), ("a", pa.int32()))
    )
    lakelog.write_table(table_path, pa.table({"s": full.slice(1, 3)}))
    assert sorted(_both(table_path), key=repr) == sorted([{"s": None}, {"s": {"a": 3, "b": None}}, {"s": {"a": None, "b": [4]}}], key=repr)


# ---------------------------------------------------------------- null-type (void) columns


def test_all_none_pandas_column_appends_into_a_string_column(table_path):
    lakelog.write_table(table_path, pd.DataFrame({"a": [1], "b": ["x"]}))
    lakelog.write_table(table_path, pd.DataFrame({"a": [2], "b": [None]}))
    assert _table_type(table_path, "b") == pa.string()
    assert sorted(_both(table_path), key=repr) == [{"a": 1, "b": "x"}, {"a": 2, "b": None}]


def test_new_table_with_an_all_null_column_is_void_as_deltalake_writes_it(table_path, tmp_path):
    lakelog.write_table(table_path, pd.DataFrame({"a": [1, 2], "b": [None, None]}))
    ours = lakelog.Table(table_path)
    assert ours.schema.field("b").type == pa.null() and ours.schema.field("b").nullable
    theirs = str(tmp_path / "theirs")
    deltalake.write_deltalake(theirs, pd.DataFrame({"a": [1, 2], "b": [None, None]}))

    def fields(path):
        for name in sorted(os.listdir(os.path.join(path, "_delta_log"))):
            for line in open(os.path.join(path, "_delta_log", name)):
                if "metaData" in line:
                    return [(f["name"], f["type"], f["nullable"]) for f in json.loads(json.loads(line)["metaData"]["schemaString"])["fields"]]

    assert fields(table_path) == fields(theirs) == [("a", "long", True), ("b", "void", True)]
    assert _both(table_path) == [{"a": 1, "b": None}, {"a": 2, "b": None}]
    # typed data needs schema_mode="merge" to give the void column a type (as deltalake)
    with pytest.raises(SchemaMismatchError, match="void.*schema_mode='merge'"):
        lakelog.write_table(table_path, pd.DataFrame({"a": [3], "b": ["x"]}))
    lakelog.write_table(table_path, pd.DataFrame({"a": [3], "b": ["x"]}), schema_mode="merge")
    assert _table_type(table_path, "b") == pa.string()
    assert sorted(_both(table_path), key=repr) == [{"a": 1, "b": None}, {"a": 2, "b": None}, {"a": 3, "b": "x"}]


def test_deltalake_table_with_void_columns_reads_and_appends(tmp_path):
    path = str(tmp_path / "t")
    nested = pa.array([{"x": None}, None], _struct(("x", pa.null())))
    deltalake.write_deltalake(path, pa.table({"a": [1, 2], "v": pa.nulls(2), "s": nested, "l": pa.array([[None], None], pa.list_(pa.null()))}))
    t = lakelog.Table(path)
    assert t.schema.field("v").type == pa.null()
    assert t.schema.field("s").type == _struct(("x", pa.null()))
    assert t.schema.field("l").type == pa.list_(pa.null())
    assert t.to_pyarrow().sort_by("a").to_pylist() == [{"a": 1, "v": None, "s": {"x": None}, "l": [None]}, {"a": 2, "v": None, "s": None, "l": None}]
    assert lakelog.read_table(path, filters=[("a", ">", 1)]).num_rows == 1
    lakelog.write_table(path, pd.DataFrame({"a": [3], "v": [None]}))
    t = lakelog.Table(path)
    t.checkpoint()
    assert _both(path) and len(_both(path)) == 3


def test_cannot_partition_by_a_void_column(table_path):
    with pytest.raises(SchemaMismatchError, match="partition"):
        lakelog.write_table(table_path, pa.table({"a": [1], "p": pa.nulls(1)}), partition_by=["p"])


def test_missing_nullable_fields_with_required_children_are_written(table_path):
    # Parquet refuses a null in a required field even under a null parent: such fields get placeholders.
    inner = _struct(pa.field("x", pa.int8(), False), pa.field("m", pa.map_(pa.string(), pa.int8()), False), pa.field("d", pa.decimal128(5, 2), False))
    t = _struct(("inner", inner), pa.field("y", pa.int8(), False))
    lakelog.write_table(table_path, pa.table({"k": [0], "s": pa.array([{"inner": {"x": 1, "m": [("a", 1)], "d": D("1.5")}, "y": 1}], t)}))
    lakelog.write_table(table_path, pa.table({"k": [1, 2], "s": pa.array([{"y": 2}, None], _struct(("y", pa.int8())))}))  # no s.inner
    lakelog.write_table(table_path, pa.table({"k": [3]}))  # no s at all
    # a required child holding nulls under null parents (valid Arrow, refused by Parquet as is)
    child = pa.array([None, 5], pa.int8())
    odd = pa.StructArray.from_arrays([child], fields=[pa.field("y", pa.int8(), False)], mask=pa.array([True, False]))
    lakelog.write_table(table_path, pa.table({"k": [4, 5], "s": odd}))
    assert sorted(_both(table_path), key=lambda r: r["k"]) == [
        {"k": 0, "s": {"inner": {"x": 1, "m": [("a", 1)], "d": D("1.50")}, "y": 1}},
        {"k": 1, "s": {"inner": None, "y": 2}},
        {"k": 2, "s": None},
        {"k": 3, "s": None},
        {"k": 4, "s": None},
        {"k": 5, "s": {"inner": None, "y": 5}},
    ]


def test_integers_into_a_double_column_when_asked_and_only_exactly(tmp_path):
    """A pandas int column (no missing value this time) appended to a double column."""
    path = str(tmp_path / "t")
    lakelog.write_table(path, pd.DataFrame({"amount": [1.5, None]}))
    with pytest.raises(SchemaMismatchError, match="schema_mode='merge' to store the integers as double"):
        lakelog.write_table(path, pd.DataFrame({"amount": [2]}))
    lakelog.write_table(path, pd.DataFrame({"amount": [2, 2**53]}), schema_mode="merge")
    lakelog.write_table(path, pa.table({"amount": pa.array([-7], pa.int8())}), schema_mode="merge")
    with pytest.raises(SchemaMismatchError, match="cannot be stored as double"):
        lakelog.write_table(path, pa.table({"amount": pa.array([2**53 + 1], pa.int64())}), schema_mode="merge")
    t = lakelog.Table(path)
    assert t.version == 2 and t.schema.field("amount").type == pa.float64()
    expected = [-7.0, 1.5, 2.0, float(2**53), None]
    key = lambda v: (v is None, v)  # noqa: E731
    assert sorted(t.to_pyarrow().column("amount").to_pylist(), key=key) == expected
    assert sorted(DeltaTable(path).to_pyarrow_table().column("amount").to_pylist(), key=key) == expected

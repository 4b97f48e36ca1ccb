"""Type edges of PROTOCOL.md's schema mapping, written by lakelog and read back by lakelog and deltalake:
nanosecond and millisecond timestamps (refused when precision would be lost), unsigned integers
(widened), decimals above precision 38 (refused), large/view/date64 variants (stored as their Delta
type), and ``delta.dataSkippingNumIndexedCols``.
"""

from __future__ import annotations

import datetime as dt
import decimal

import orjson
import pyarrow as pa
import pytest
from deltalake import DeltaTable

import lakelog
from lakelog.errors import SchemaMismatchError

UTC = dt.timezone.utc


def _only_stats(path: str) -> dict:
    (add,) = lakelog.Table(path).snapshot.files.values()
    return orjson.loads(add.stats)


@pytest.mark.parametrize("unit", ["ns", "ms"])
def test_coarser_or_finer_timestamps_are_stored_as_microseconds(table_path, unit):
    per_us = {"ns": 1000, "ms": 0.001}[unit]
    micros = [1_700_000_000_123_000, None, -86_400_000_000]  # whole milliseconds: exact in both units
    raw = [None if m is None else int(m * per_us) for m in micros]
    data = pa.table({"id": [1, 2, 3], "t": pa.array(raw, pa.timestamp(unit, tz="UTC")), "n": pa.array(raw, pa.timestamp(unit))})
    lakelog.write_table(table_path, data)
    got = lakelog.read_table(table_path).sort_by("id")
    assert got.schema.field("t").type == pa.timestamp("us", tz="UTC") and got.schema.field("n").type == pa.timestamp("us")
    assert got.column("t").cast(pa.int64()).to_pylist() == micros == got.column("n").cast(pa.int64()).to_pylist()
    dl = DeltaTable(table_path).to_pyarrow_table().sort_by("id")
    assert dl.column("t").cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).to_pylist() == micros


def test_nanosecond_timestamps_that_would_lose_precision_are_refused(table_path):
    lakelog.write_table(table_path, pa.table({"id": [0], "t": pa.array([0], pa.timestamp("us", tz="UTC"))}))
    lossy = pa.table({"id": [1], "t": pa.array([1_700_000_000_000_000_001], pa.timestamp("ns", tz="UTC"))})
    with pytest.raises(SchemaMismatchError, match="'t'"):
        lakelog.write_table(table_path, lossy)
    with pytest.raises(SchemaMismatchError, match="'t'"):
        lakelog.write_table(table_path + "-new", lossy)
    assert lakelog.Table(table_path).version == 0 and lakelog.read_table(table_path).num_rows == 1


def test_unsigned_integers_widen_to_the_next_signed_type(table_path):
    data = pa.table({
        "u8": pa.array([0, 255, None], pa.uint8()),
        "u16": pa.array([0, 65_535, None], pa.uint16()),
        "u32": pa.array([0, 4_294_967_295, None], pa.uint32()),
    })
    lakelog.write_table(table_path, data)
    t = lakelog.Table(table_path)
    assert [t.schema.field(c).type for c in data.column_names] == [pa.int16(), pa.int32(), pa.int64()]
    got = t.to_pyarrow()
    for c in data.column_names:
        assert sorted(got.column(c).to_pylist(), key=lambda v: (v is None, v)) == data.column(c).to_pylist()
    assert DeltaTable(table_path).to_pyarrow_table().column("u32").to_pylist() == data.column("u32").to_pylist()
    assert lakelog.read_table(table_path, filters=[("u32", ">", 2**31)]).column("u32").to_pylist() == [4_294_967_295]
    with pytest.raises(SchemaMismatchError, match="uint64"):
        lakelog.write_table(table_path + "-u64", pa.table({"u64": pa.array([1], pa.uint64())}))


def test_decimal_precision_above_38_is_refused(table_path):
    with pytest.raises(SchemaMismatchError, match="38"):
        lakelog.write_table(table_path, pa.table({"d": pa.array([decimal.Decimal("1.25")], pa.decimal256(40, 2))}))
    with pytest.raises(lakelog.TableNotFoundError):
        lakelog.Table(table_path)
    lakelog.write_table(table_path, pa.table({"d": pa.array([decimal.Decimal("1.25")], pa.decimal256(38, 2))}))
    assert lakelog.read_table(table_path).schema.field("d").type == pa.decimal128(38, 2)


def test_large_view_and_date64_types_are_stored_as_their_delta_type(table_path):
    day = dt.date(2026, 1, 2)
    data = pa.table({
        "ls": pa.array(["a", None, "ccc"], pa.large_string()),
        "sv": pa.array(["x", "y", None], pa.string_view()),
        "lb": pa.array([b"\x00", None, b"z"], pa.large_binary()),
        "bv": pa.array([b"1", b"22", None], pa.binary_view()),
        "ll": pa.array([[1, 2], None, []], pa.large_list(pa.int32())),
        "d64": pa.array([day, None, dt.date(1970, 1, 1)], pa.date64()),
    })
    lakelog.write_table(table_path, data)
    t = lakelog.Table(table_path)
    assert [t.schema.field(c).type for c in ("ls", "sv", "lb", "bv", "d64")] == [pa.string(), pa.string(), pa.binary(), pa.binary(), pa.date32()]
    assert pa.types.is_list(t.schema.field("ll").type) and t.schema.field("ll").type.value_type == pa.int32()
    got = t.to_pyarrow()
    assert got.column("d64").to_pylist() == [day, None, dt.date(1970, 1, 1)]
    for c in ("ls", "sv", "lb", "bv", "ll"):
        assert got.column(c).to_pylist() == data.column(c).to_pylist(), c
    dl = DeltaTable(table_path).to_pyarrow_table()
    assert dl.column("d64").to_pylist() == [day, None, dt.date(1970, 1, 1)]
    assert dl.column("ls").to_pylist() == ["a", None, "ccc"]
    # Appending the canonical types to the table works too.
    lakelog.write_table(table_path, got.slice(0, 1))
    assert lakelog.read_table(table_path).num_rows == 4


@pytest.mark.parametrize("indexed, columns", [("2", ["a", "b"]), ("0", []), ("-1", ["a", "b", "c", "d"])])
def test_data_skipping_num_indexed_cols(table_path, indexed, columns):
    data = pa.table({"a": [1, 2], "b": ["x", "y"], "c": pa.array([{"x": 1}, {"x": 5}]), "d": [3.5, None]})
    lakelog.write_table(table_path, data, configuration={"delta.dataSkippingNumIndexedCols": indexed})
    stats = _only_stats(table_path)
    assert stats["numRecords"] == 2
    assert sorted(stats["nullCount"]) == columns
    assert sorted(stats["minValues"]) == columns
    if "d" in columns:
        assert stats["nullCount"]["d"] == 1 and stats["minValues"]["d"] == 3.5 and stats["maxValues"]["d"] == 3.5
    if "c" in columns:
        assert stats["minValues"]["c"] == {"x": 1} and stats["maxValues"]["c"] == {"x": 5}
    # Appends to the table use the table's setting.
    lakelog.write_table(table_path, data)
    added = [orjson.loads(a.stats) for a in lakelog.Table(table_path).snapshot.files.values()]
    assert all(sorted(s["nullCount"]) == columns for s in added)
    assert sorted(lakelog.read_table(table_path, filters=[("a", "=", 2)]).column("a").to_pylist()) == [2, 2]

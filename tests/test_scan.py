"""Reading with filters: pruning by partition values, add-action stats and Parquet footers never drops a
row the filter keeps, whatever the values (floats, extremes of each type) or the stats' writer."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import os

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakelog
from lakelog.errors import PartitionValueError

deltalake = pytest.importorskip("deltalake")

UTC = dt.timezone.utc
NAN, INF = float("nan"), float("inf")


def _ids(t: pa.Table) -> list[int]:
    return sorted(t.column("id").to_pylist())


def _write_files(path: str, column: str, files: list[list], t: pa.DataType, partition_by=None) -> None:
    """One commit (and so one file) per inner list; ids count up across files."""
    n = 0
    for vals in files:
        lakelog.write_table(path, pa.table({"id": pa.array(range(n, n + len(vals)), pa.int64()), column: pa.array(vals, t)}), partition_by=partition_by)
        n += len(vals)


def _rewrite_stats(path: str, edit) -> None:
    """Apply ``edit(stats_dict)`` to the stats of every add action in the table's commits."""
    log = os.path.join(path, "_delta_log")
    for name in sorted(os.listdir(log)):
        if not name.endswith(".json"):
            continue
        lines = []
        with open(os.path.join(log, name), "rb") as f:
            for line in f.read().splitlines():
                action = orjson.loads(line)
                if "add" in action and action["add"].get("stats"):
                    action["add"]["stats"] = orjson.dumps(edit(orjson.loads(action["add"]["stats"]))).decode()
                lines.append(orjson.dumps(action))
        with open(os.path.join(log, name), "wb") as f:
            f.write(b"\n".join(lines) + b"\n")


# ---------------------------------------------------------------- floats: footer statistics must not prune

@pytest.mark.parametrize(
    "files,filters,expected",
    [
        ([[0.0]], [("f", "in", [0.0])], [0]),  # footer min is -0.0: pyarrow's is_in pruning dropped the file
        ([[0.0]], [("f", "=", -0.0)], [0]),
        ([[-0.0]], [("f", "in", [0.0])], [0]),
        ([[0.0, -0.0]], [("f", "in", [-0.0])], [0, 1]),
        ([[1.5, NAN]], [("f", "!=", 1.5)], [1]),  # footer min/max leave NaN out: the file looked like all 1.5
        ([[1.5, NAN]], [("f", ">", 1.5)], [1]),  # NaN is above every other value (Spark SQL)
        ([[1.5, NAN]], [("f", "=", NAN)], [1]),
        ([[1.5, NAN]], [("f", "in", [NAN, 7.0])], [1]),
        ([[NAN], [2.0]], [("f", ">=", NAN)], [0]),
        ([[1.5, NAN, None]], [("f", "not in", [1.5])], [1]),
        ([[INF, -INF], [NAN]], [("f", "<", NAN)], [0, 1]),
    ],
)
def test_float_filters_keep_rows_footer_statistics_would_prune(table_path, files, filters, expected):
    _write_files(table_path, "f", files, pa.float64())
    assert _ids(lakelog.read_table(table_path, filters=filters)) == expected
    assert _ids(lakelog.Table(table_path).to_pyarrow(columns=["id"], filters=filters)) == expected


def test_float_expressions_are_evaluated_exactly_as_pyarrow_does(table_path):
    """An expression keeps pyarrow's semantics (NaN != 1.5 is true, NaN > 1 is false); pruning never loses rows."""
    _write_files(table_path, "f", [[1.5, NAN], [0.0], [None]], pa.float64())
    full = lakelog.read_table(table_path)
    f = pc.field("f")
    for expr in (f != 1.5, f.isin([0.0]), f.is_nan(), ~(f == 1.5), (f > 1.0) | f.is_null(), f.isin([-0.0])):
        assert _ids(lakelog.read_table(table_path, filters=expr)) == _ids(full.filter(expr)), expr
        assert lakelog.Table(table_path).to_pyarrow(columns=["id"], filters=expr).column_names == ["id"]


def test_float32_and_nested_float_columns_are_not_pruned_by_footers(table_path):
    t = pa.table(
        {
            "id": pa.array([0, 1], pa.int64()),
            "f": pa.array([0.0, NAN], pa.float32()),
            "s": pa.array([{"x": 0.0}, {"x": NAN}], pa.struct([("x", pa.float64())])),
        }
    )
    lakelog.write_table(table_path, t)
    assert _ids(lakelog.read_table(table_path, filters=[("f", "in", [0.0])])) == [0]
    assert _ids(lakelog.read_table(table_path, filters=[("f", "!=", 0.0)])) == [1]
    assert _ids(lakelog.read_table(table_path, filters=pc.field("s", "x").is_nan())) == [1]
    assert _ids(lakelog.read_table(table_path, filters=pc.field("s", "x").isin([0.0]))) == [0]


def test_float_partition_values_filter_with_sql_semantics(table_path):
    _write_files(table_path, "q", [[0.0, -0.0, NAN, INF, -INF, None, 1.5]], pa.float64(), partition_by=["q"])
    t = lakelog.Table(table_path)
    assert _ids(t.to_pyarrow(filters=[("q", "=", 0.0)])) == [0, 1]
    assert _ids(t.to_pyarrow(filters=[("q", "in", [-0.0])])) == [0, 1]
    assert _ids(t.to_pyarrow(filters=[("q", ">", 1.5)])) == [2, 3]
    assert _ids(t.to_pyarrow(filters=[("q", "=", NAN)])) == [2]
    assert _ids(t.to_pyarrow(filters=[("q", "!=", NAN)])) == [0, 1, 3, 4, 6]
    assert len(t.files(filters=[("q", "=", NAN)])) == 1


# ---------------------------------------------------------------- stats at the edges of each type

def test_filtered_read_of_the_end_of_time_timestamp(table_path):
    """A max stat of 9999-12-31 23:59:59.999999 widened by 1 ms is past datetime's range: no OverflowError."""
    end = dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
    lakelog.write_table(table_path, pa.table({"id": [0, 1], "tn": pa.array([dt.datetime(2000, 1, 1), end], pa.timestamp("us")),
                                              "ts": pa.array([dt.datetime(2000, 1, 1, tzinfo=UTC), end.replace(tzinfo=UTC)], pa.timestamp("us", tz="UTC")),
                                              "d": pa.array([dt.date(2000, 1, 1), dt.date(9999, 12, 31)], pa.date32())}))
    assert _ids(lakelog.read_table(table_path, filters=[("tn", ">", dt.datetime(2001, 1, 1))])) == [1]
    assert _ids(lakelog.read_table(table_path, filters=[("tn", "=", end)])) == [1]
    assert _ids(lakelog.read_table(table_path, filters=[("ts", ">=", end.replace(tzinfo=UTC))])) == [1]
    assert _ids(lakelog.read_table(table_path, filters=[("d", "=", dt.date(9999, 12, 31))])) == [1]
    assert _ids(lakelog.read_table(table_path, filters=[("tn", "<", dt.datetime(1, 1, 1, 0, 0, 1))])) == []


@pytest.mark.parametrize(
    "t,values",
    [
        (pa.int8(), [-128, 127]),
        (pa.int16(), [-(2**15), 2**15 - 1]),
        (pa.int32(), [-(2**31), 2**31 - 1]),
        (pa.int64(), [-(2**63), 2**63 - 1]),
        (pa.decimal128(38, 0), [decimal.Decimal("-" + "9" * 38), decimal.Decimal("9" * 38)]),
        (pa.decimal128(15, 15), [decimal.Decimal("-0." + "9" * 15), decimal.Decimal("0." + "9" * 15)]),
        (pa.decimal128(5, 2), [decimal.Decimal("-999.99"), decimal.Decimal("999.99")]),
        (pa.date32(), [dt.date(1, 1, 1), dt.date(9999, 12, 31)]),
        (pa.timestamp("us"), [dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)]),
        (pa.timestamp("us", tz="UTC"), [dt.datetime(1, 1, 1, tzinfo=UTC), dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)]),
        (pa.string(), ["", "\U0010ffff" * 40]),
    ],
    ids=str,
)
def test_type_extremes_filter_exactly_through_stats(table_path, t, values):
    """Each type's minimum and maximum, one file each plus a file holding both: every comparison with
    either extreme selects exactly the rows an in-memory filter selects, in lakelog and in deltalake."""
    _write_files(table_path, "v", [[values[0]], [values[1]], list(values), [None]], t)
    full = lakelog.read_table(table_path)
    for v in values:
        for op in ("=", "!=", "<", "<=", ">", ">="):
            filters = [("v", op, v)]
            expr = {"=": pc.field("v") == v, "!=": pc.field("v") != v, "<": pc.field("v") < v, "<=": pc.field("v") <= v,
                    ">": pc.field("v") > v, ">=": pc.field("v") >= v}[op]
            expected = _ids(full.filter(expr))
            assert _ids(lakelog.read_table(table_path, filters=filters)) == expected, filters
            if pa.types.is_decimal(t) and t.precision > 15 or pa.types.is_string(t):
                continue  # deltalake: no decimal bound of 38 digits, and string extremes past its prefix
            assert _ids(deltalake.DeltaTable(table_path).to_pyarrow_table(filters=filters)) == expected, ("deltalake", filters)


@pytest.mark.parametrize(
    "stat_min,stat_max,rows",
    [
        ("2021-01-01T00:00:00.123Z", "2021-01-01T00:00:00.124Z", "ms"),  # Spark: milliseconds
        ("2021-01-01T00:00:00.123", "2021-01-01T00:00:00.124", "ms"),  # no zone: UTC
        ("2021-01-01T09:00:00.123+09:00", "2021-01-01T09:00:00.124+09:00", "ms"),  # an offset
        ("2021-01-01 00:00:00", "2021-01-01 00:00:01", "ms"),
        ("+10000-01-01T00:00:00Z", "garbage", "all"),  # unusable: no bound
        ("1-01-01T00:00:00.000000Z", "9999-12-31T23:59:59.999Z", "all"),  # unpadded year, ms-truncated end of time
    ],
)
def test_timestamp_stats_of_other_writers_bound_safely(table_path, stat_min, stat_max, rows):
    values = [dt.datetime(2021, 1, 1, 0, 0, 0, 123456, tzinfo=UTC), dt.datetime(2021, 1, 1, 0, 0, 0, 124999, tzinfo=UTC)]
    lakelog.write_table(table_path, pa.table({"id": [0, 1], "ts": pa.array(values, pa.timestamp("us", tz="UTC"))}))

    def edit(stats):
        stats["minValues"]["ts"], stats["maxValues"]["ts"] = stat_min, stat_max
        return stats

    _rewrite_stats(table_path, edit)
    t = lakelog.Table(table_path)
    for v in values:
        assert _ids(t.to_pyarrow(filters=[("ts", "=", v)])) == [values.index(v)]
        assert _ids(t.to_pyarrow(filters=[("ts", ">=", v)])) == list(range(values.index(v), 2))
    assert _ids(t.to_pyarrow(filters=[("ts", "<", dt.datetime(2000, 1, 1, tzinfo=UTC))])) == []


@pytest.mark.parametrize(
    "column,t,stat",
    [
        ("i", pa.int8(), 300),  # out of the type's range
        ("i", pa.int8(), True),  # a JSON boolean is not an integer bound
        ("i", pa.int8(), "5"),
        ("d", pa.date32(), "10000-01-01"),
        ("d", pa.date32(), 5),
        ("dec", pa.decimal128(5, 2), 1e300),
        ("s", pa.string(), 7),
    ],
)
def test_unusable_stats_are_ignored(table_path, column, t, stat):
    value = {"i": 5, "d": dt.date(2020, 1, 1), "dec": decimal.Decimal("1.25"), "s": "x"}[column]
    lakelog.write_table(table_path, pa.table({"id": [0], column: pa.array([value], t)}))

    def edit(stats):
        stats["minValues"][column] = stats["maxValues"][column] = stat
        return stats

    _rewrite_stats(table_path, edit)
    assert _ids(lakelog.read_table(table_path, filters=[(column, "=", value)])) == [0]
    assert _ids(lakelog.read_table(table_path, filters=[(column, ">=", value)])) == [0]


def test_malformed_stats_structure_is_ignored(table_path):
    lakelog.write_table(table_path, pa.table({"id": [0], "i": [5]}))
    for stats in ([1, 2], {"numRecords": "1", "minValues": [], "maxValues": None, "nullCount": {"i": "x"}}, {"numRecords": True, "nullCount": {"i": True}}):
        _rewrite_stats(table_path, lambda _: stats)
        assert _ids(lakelog.read_table(table_path, filters=[("i", "=", 5)])) == [0]


def test_timestamp_partition_at_the_beginning_of_time(table_path):
    """0001-01-01 is a common 'beginning of time' sentinel: as a partition value it is written padded and
    read back (by lakelog and deltalake); a value in the old unpadded form is read too."""
    start = dt.datetime(1, 1, 1, tzinfo=UTC)
    lakelog.write_table(table_path, pa.table({"id": [0, 1], "valid_from": pa.array([start, dt.datetime(2020, 1, 1, tzinfo=UTC)], pa.timestamp("us", tz="UTC"))}), partition_by=["valid_from"])
    pvs = sorted(a.partition_values["valid_from"] for a in lakelog.Table(table_path).snapshot.files.values())
    assert pvs == ["0001-01-01T00:00:00.000000Z", "2020-01-01T00:00:00.000000Z"]
    assert lakelog.read_table(table_path).sort_by("id").column("valid_from").to_pylist()[0] == start
    assert _ids(lakelog.read_table(table_path, filters=[("valid_from", "<", dt.datetime(2000, 1, 1, tzinfo=UTC))])) == [0]
    assert _ids(deltalake.DeltaTable(table_path).to_pyarrow_table(filters=[("valid_from", "<", dt.datetime(2000, 1, 1, tzinfo=UTC))])) == [0]


def test_garbage_partition_value_is_a_typed_error_naming_file_and_column(table_path):
    lakelog.write_table(table_path, pa.table({"id": [0], "ts": pa.array([dt.datetime(2020, 1, 1)], pa.timestamp("us"))}), partition_by=["ts"])
    log = os.path.join(table_path, "_delta_log", "00000000000000000000.json")
    with open(log) as f:
        text = f.read()
    with open(log, "w") as f:
        f.write(text.replace("2020-01-01 00:00:00.000000", "yesterday"))
    with pytest.raises(PartitionValueError, match=r"'ts'.*'yesterday'.*timestamp_ntz"):
        lakelog.read_table(table_path)
    assert isinstance(PartitionValueError("x"), lakelog.CorruptLogError)


def test_nan_and_infinite_partition_values_use_sparks_spelling(table_path):
    _write_files(table_path, "q", [[NAN, INF, -INF, -0.0]], pa.float64(), partition_by=["q"])
    pvs = sorted(a.partition_values["q"] for a in lakelog.Table(table_path).snapshot.files.values())
    assert pvs == ["-0.0", "-Infinity", "Infinity", "NaN"]
    got = lakelog.read_table(table_path).sort_by("id").column("q").to_pylist()
    assert math.isnan(got[0]) and got[1:3] == [INF, -INF] and math.copysign(1, got[3]) == -1
    assert [math.isnan(v) if v != v else v for v in deltalake.DeltaTable(table_path).to_pyarrow_table().sort_by("id").column("q").to_pylist()] == [True, INF, -INF, -0.0]

"""Partition value serialization: the protocol's forms, four-digit years, typed errors for anything else."""

from __future__ import annotations

import datetime as dt
import decimal
import math

import pyarrow as pa
import pytest

from lakelog.errors import PartitionValueError
from lakelog.schema.partition_values import parse_partition_value, serialize_partition_value, timestamp_micros

UTC = dt.timezone.utc
TS, NTZ = pa.timestamp("us", tz="UTC"), pa.timestamp("us")


@pytest.mark.parametrize(
    "value,t,text",
    [
        (dt.datetime(1, 1, 1, tzinfo=UTC), TS, "0001-01-01T00:00:00.000000Z"),
        (dt.datetime(999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), TS, "0999-12-31T23:59:59.999999Z"),
        (dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), TS, "9999-12-31T23:59:59.999999Z"),
        (dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), TS, "1969-12-31T23:59:59.999999Z"),
        (dt.datetime(1, 1, 1), NTZ, "0001-01-01 00:00:00.000000"),
        (dt.datetime(1000, 1, 1, 0, 0, 0, 1), NTZ, "1000-01-01 00:00:00.000001"),
        (dt.date(1, 1, 1), pa.date32(), "0001-01-01"),
        (dt.date(9999, 12, 31), pa.date32(), "9999-12-31"),
        (-0.0, pa.float64(), "-0.0"),
        (float("inf"), pa.float64(), "Infinity"),
        (float("-inf"), pa.float32(), "-Infinity"),
        (True, pa.bool_(), "true"),
        (-(2**63), pa.int64(), "-9223372036854775808"),
        (decimal.Decimal("-999.99"), pa.decimal128(5, 2), "-999.99"),
    ],
)
def test_partition_values_round_trip(value, t, text):
    assert serialize_partition_value(value, t) == text
    assert parse_partition_value(text, t) == value


def test_nan_partition_value():
    assert serialize_partition_value(float("nan"), pa.float64()) == "NaN"
    for text in ("NaN", "nan"):  # Spark writes NaN, Rust writers nan
        assert math.isnan(parse_partition_value(text, pa.float64()))


@pytest.mark.parametrize(
    "text,t,value",
    [
        ("2021-01-01 00:00:00", TS, dt.datetime(2021, 1, 1, tzinfo=UTC)),  # no offset: UTC
        ("2021-01-01 00:00:00.5", NTZ, dt.datetime(2021, 1, 1, 0, 0, 0, 500000)),  # fewer fraction digits
        ("2021-01-01T09:00:00+09:00", TS, dt.datetime(2021, 1, 1, tzinfo=UTC)),
        ("2021-01-01T00:00:00Z", NTZ, dt.datetime(2021, 1, 1)),
        ("1-01-01T00:00:00.000000Z", TS, dt.datetime(1, 1, 1, tzinfo=UTC)),  # unpadded year, as once written
        ("999-12-31", pa.date32(), dt.date(999, 12, 31)),
        ("TRUE", pa.bool_(), True),
        ("-0", pa.float64(), -0.0),
        ("inf", pa.float64(), float("inf")),
    ],
)
def test_partition_values_in_other_forms(text, t, value):
    assert parse_partition_value(text, t) == value


@pytest.mark.parametrize(
    "text,t",
    [
        ("yesterday", TS),
        ("2021-13-01 00:00:00", NTZ),
        ("2021-01-01", TS),  # a timestamp needs its time
        ("2021-01-01 00:00:00.1234567", NTZ),  # below microseconds
        ("2021-01-01T00:00:00+09:00", NTZ),  # no offsets without a time zone
        ("0001-01-01T00:00:00+01:00", TS),  # before year 1 in UTC
        ("10000-01-01 00:00:00", NTZ),
        ("2021-1-1", pa.date32()),
        ("maybe", pa.bool_()),
        ("1_000", pa.int64()),
        ("128", pa.int8()),
        ("1.5", pa.int32()),
        ("abc", pa.float64()),
        ("1.234", pa.decimal128(5, 2)),
        ("x", pa.decimal128(5, 2)),
    ],
)
def test_garbage_partition_values_are_typed_errors(text, t):
    with pytest.raises(PartitionValueError, match=repr(text).replace("+", r"\+").replace(".", r"\.")):
        parse_partition_value(text, t)


def test_timestamp_micros_reaches_past_datetimes_range():
    assert timestamp_micros("9999-12-31T23:59:59.999999Z", utc=True) + 1000 == 253402300800000999
    assert timestamp_micros("0001-01-01T00:00:00Z", utc=True) == -62135596800000000
    assert timestamp_micros("1969-12-31 23:59:59.999999", utc=False) == -1
    with pytest.raises(ValueError):
        timestamp_micros("2021-01-01T00:00:00+01:00", utc=False)


@pytest.mark.parametrize("value", [5, 1.5, True, ["a"], {"a": 1}])
def test_partition_values_that_are_not_strings_are_typed_errors(value):
    with pytest.raises(PartitionValueError, match="not a string"):
        parse_partition_value(value, pa.int64())

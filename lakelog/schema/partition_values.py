"""Partition values as the log spells them (the protocol's Partition Value Serialization) and as Arrow values,
the date and timestamp text forms they share with stats, and Hive-escaped ``k=v`` directory names."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
from typing import Any

import pyarrow as pa

from . import arrow_values
from ..errors import CorruptLogError, PartitionValueError, SchemaMismatchError, UnsupportedFeatureError
from .types import arrow_type_to_delta

# Years are written with four digits; fewer are accepted on read (such values were written unpadded).
_DATE_FORM = re.compile(r"^(\d{1,4})(-\d{2}-\d{2})$")
_TIMESTAMP_FORM = re.compile(r"^(\d{1,4})(-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?)(Z|[+-]\d{2}:\d{2})?$")
_INTEGER_FORM = re.compile(r"^[+-]?\d+$")
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = _EPOCH.replace(tzinfo=dt.timezone.utc)
_US = dt.timedelta(microseconds=1)


def format_timestamp(value: dt.datetime, sep: str = "T") -> str:
    """``YYYY-MM-DD<sep>HH:MM:SS.ffffff`` (four-digit year), plus ``Z`` for an aware value (converted to UTC)."""
    if value.tzinfo is not None:
        return (value - value.utcoffset()).replace(tzinfo=None).isoformat(sep=sep, timespec="microseconds") + "Z"
    return value.isoformat(sep=sep, timespec="microseconds")


def parse_date(s: str) -> dt.date:
    """A Delta date (``YYYY-MM-DD``); ValueError for anything else."""
    m = _DATE_FORM.match(s)
    if not m:
        raise ValueError(f"{s!r} is not a date of the form YYYY-MM-DD")
    return dt.date.fromisoformat(m.group(1).zfill(4) + m.group(2))


def parse_timestamp(s: str) -> dt.datetime:
    """A Delta timestamp (``YYYY-MM-DD HH:MM:SS[.ffffff]``, ``T`` for the space, optional ``Z`` or
    ``+HH:MM``): aware when it carries an offset; ValueError for anything else."""
    m = _TIMESTAMP_FORM.match(s)
    if not m:
        raise ValueError(f"{s!r} is not a timestamp of the form YYYY-MM-DD HH:MM:SS[.ffffff][Z]")
    year, md, clock, offset = m.groups()
    return dt.datetime.fromisoformat(f"{year.zfill(4)}{md}T{clock}{'+00:00' if offset == 'Z' else offset or ''}")


def timestamp_micros(s: str, utc: bool) -> int:
    """Microseconds since the epoch of a Delta timestamp string (no datetime range limit on the result).
    ``utc``: for a ``timestamp`` column (no offset means UTC); else ``timestamp_ntz`` (no offset, or ``Z``),
    where a date is its midnight (see ``parse_partition_value``)."""
    if not utc and _DATE_FORM.match(s):
        return (dt.datetime.combine(parse_date(s), dt.time()) - _EPOCH) // _US
    v = parse_timestamp(s)
    if v.tzinfo is None:
        return (v - _EPOCH) // _US
    if not utc and v.utcoffset():
        raise ValueError(f"{s!r} has a time zone offset, which a timestamp without time zone cannot have")
    return (v - _EPOCH_UTC) // _US


def serialize_partition_value(value: Any, t: pa.DataType) -> str | None:
    """Delta partition value serialization (PROTOCOL.md, 'Partition Value Serialization')."""
    if value is None:
        return None
    if pa.types.is_boolean(t):
        return "true" if value else "false"
    if pa.types.is_timestamp(t):
        if t.tz is not None:
            return format_timestamp(value)
        return format_timestamp(value, sep=" ")
    if pa.types.is_date(t):
        return value.isoformat()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return bytes(value).decode("latin-1")
    if pa.types.is_floating(t):
        f = float(value)
        if math.isnan(f):
            return "NaN"  # Java's forms, which Spark writes and reads
        if math.isinf(f):
            return "Infinity" if f > 0 else "-Infinity"
        return repr(f)
    if pa.types.is_decimal(t):
        return format(value, "f")
    if isinstance(value, str):
        return value
    if pa.types.is_integer(t):
        return str(int(value))
    raise SchemaMismatchError(f"cannot partition by a column of type {t}; partition columns must be primitive")


def parse_partition_value(s: str | None, t: pa.DataType) -> Any:
    """Inverse of serialize_partition_value; accepts every form the protocol allows. '' means null.

    A value that is not in a form the protocol allows for ``t`` raises ``PartitionValueError``."""
    if s is None or s == "":
        return None
    if not isinstance(s, str):
        raise PartitionValueError(f"partition value {s!r} is a JSON {type(s).__name__}, not a string as the protocol requires")
    try:
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return s
        if pa.types.is_integer(t):
            if not _INTEGER_FORM.match(s):
                raise ValueError("expected an integer")
            v = int(s)
            arrow_values.scalar(v, t)  # in range
            return v
        if pa.types.is_floating(t):
            return float(s)
        if pa.types.is_boolean(t):
            if s.lower() not in ("true", "false"):
                raise ValueError("expected true or false")
            return s.lower() == "true"
        if pa.types.is_date(t):
            return parse_date(s)
        if pa.types.is_timestamp(t):
            if t.tz is None and _DATE_FORM.match(s):
                # Logged while the column was a date, before a type widening to timestamp_ntz: the
                # widened value is the date's midnight (as Delta casts it).
                return dt.datetime.combine(parse_date(s), dt.time())
            v = parse_timestamp(s)
            if t.tz is not None:
                # Without an offset, taken as UTC (as modern writers write it; the protocol recommends UTC).
                return v.replace(tzinfo=dt.timezone.utc) if v.tzinfo is None else v.astimezone(dt.timezone.utc)
            if v.tzinfo is not None and v.utcoffset():
                raise ValueError("a timestamp without time zone cannot have an offset")
            return v.replace(tzinfo=None)
        if pa.types.is_decimal(t):
            v = decimal.Decimal(s)
            pa.scalar(v, t)  # fits the precision and scale
            return v
        if pa.types.is_binary(t):
            return s.encode("latin-1")
    except (ValueError, OverflowError, decimal.InvalidOperation, UnicodeEncodeError, pa.ArrowException) as e:
        raise PartitionValueError(f"partition value {s!r} is not a valid {arrow_type_to_delta(t)} ({e})") from None
    raise UnsupportedFeatureError(f"partition column of type {t} is not supported")


def partition_scalars(values: dict[str, str | None], schema: pa.Schema, partition_columns: list[str], path: str) -> dict[str, pa.Scalar]:
    """The typed partition values of the data file ``path`` (its ``partitionValues``), one Arrow scalar per
    partition column (a null scalar for null). ``CorruptLogError`` naming the file when a partition column
    has no entry or its value is not of the column's type: reading it would give wrong or no rows."""
    out: dict[str, pa.Scalar] = {}
    for c in partition_columns:
        t = schema.field(c).type
        if c not in values:
            raise CorruptLogError(
                f"data file {path!r} has no partition value for column {c!r} (its partitionValues are {values!r}); "
                "the log is damaged. Restore the commit that added it from a backup."
            )
        raw = values[c]
        try:
            if pa.types.is_boolean(t) and raw not in (None, "") and raw.lower() not in ("true", "false"):
                raise ValueError("not true or false")
            out[c] = arrow_values.scalar(parse_partition_value(raw, t), t)
        except (ValueError, TypeError, ArithmeticError, OverflowError, pa.ArrowException) as e:
            raise PartitionValueError(
                f"data file {path!r} has the partition value {raw!r} for column {c!r}, which is not a valid {t} ({e}); "
                "the log is damaged. Restore the commit that added it from a backup."
            ) from None
    return out


def partition_value_arrays(values: dict[str, str | None], schema: pa.Schema, partition_columns: list[str], path: str, n: int) -> dict[str, pa.Array]:
    """``n`` rows of each partition column holding the logged ``values`` as readers decode them (an
    empty string is null); errors as ``partition_scalars``."""
    scalars = partition_scalars(values, schema, partition_columns, path)
    return {c: pa.repeat(v, n) if v.is_valid else pa.nulls(n, schema.field(c).type) for c, v in scalars.items()}


_HIVE_ESCAPE = set('"#%\'*/:=?\\\x7f{[]^') | {chr(c) for c in range(0, 32)}
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


def hive_escape(s: str | None) -> str:
    """Escape a partition value for a ``k=v`` directory name, as Hive and Spark do."""
    if s is None:
        return HIVE_NULL
    return "".join(f"%{ord(c):02X}" if c in _HIVE_ESCAPE else c for c in s)

"""Spark's text forms of dates and timestamps: reading a date from a string (CAST), writing dates and
timestamps as strings, and timestamp literals; DuckDB's proleptic Gregorian dates, in UTC."""

from __future__ import annotations

import datetime as dt
import re

from .catalog import Sql, raise_sql
from . import types as T

# Spark trims these from both ends of a string it casts (UTF8String.trimAll): ASCII controls and space
TRIM_ALL = r"[\x00-\x20\x7f]"


def trimmed(text: str, chars: str = TRIM_ALL) -> str:
    return f"regexp_replace({text}, '^{chars}+|{chars}+$', '', 'g')"


_DATE_SYNTAX = r"([+-]?)([0-9]{4,7})(?:-([0-9]{1,2})(?:-([0-9]{1,2})(?:[ T].*)?)?)?"


# ---------------------------------------------------------------- text forms

def string_to_date(x: str, fail) -> str:
    """Spark's ``stringToDate`` (CAST(string AS DATE)): trimmed ``[+-]yyyy[yyy][-[m]m[-[d]d]]``, anything after
    the day that follows a space or a T ignored; an impossible date is an error (ANSI)."""
    v = trimmed(x)
    group = lambda k: f"regexp_extract({v}, '^{_DATE_SYNTAX}$', {k}, 's')"  # noqa: E731
    year = f"((CASE WHEN {group(1)} = '-' THEN -1 ELSE 1 END) * CAST(nullif({group(2)}, '') AS BIGINT))"
    month = f"coalesce(CAST(nullif({group(3)}, '') AS BIGINT), 1)"
    day = f"coalesce(CAST(nullif({group(4)}, '') AS BIGINT), 1)"
    ok = f"regexp_full_match({v}, '{_DATE_SYNTAX}', 's')"
    made = make_date_sql(year, month, day, lambda: fail("CAST_INVALID_INPUT", "not a date"))
    return f"(CASE WHEN {x} IS NULL THEN NULL WHEN NOT {ok} THEN {fail('CAST_INVALID_INPUT', 'not a date')} ELSE {made} END)"


_OUT_OF_RANGE = "dates beyond the years -5877641 to 5881580 (DuckDB's range)"


def make_date_sql(y: str, m: str, d: str, fail) -> str:
    """The date y-m-d, or ``fail()`` where it does not exist (a month or day out of range); a year beyond
    DuckDB's dates is refused (Spark holds dates to 7-digit years)."""
    unsupported = raise_sql("UNSUPPORTED", f"lakelog does not hold {_OUT_OF_RANGE}")
    return (f"(CASE WHEN {y} NOT BETWEEN -5877641 AND 5881579 THEN {unsupported} "
            f"WHEN {m} NOT BETWEEN 1 AND 12 OR {d} < 1 THEN {fail()} "
            f"WHEN {d} > day(last_day(make_date({y}, {m}, 1))) THEN {fail()} ELSE make_date({y}, {m}, {d}) END)")


def pad(value: str, width: int) -> str:
    return f"lpad(CAST({value} AS VARCHAR), {width}, '0')"


def signed_year(y: str) -> str:
    # java.time's ISO text: 4 digits, a sign past 9999 or before year 0
    return (f"(CASE WHEN {y} > 9999 THEN '+' || CAST({y} AS VARCHAR) WHEN {y} < 0 THEN '-' || {pad(f'abs({y})', 4)} "
            f"ELSE {pad(y, 4)} END)")


def date_string(x: str) -> str:
    return f"({signed_year(f'year({x})')} || '-' || {pad(f'month({x})', 2)} || '-' || {pad(f'day({x})', 2)})"


def wall(x: str, t: T.SparkType) -> str:
    """A timestamp as its UTC wall-clock DuckDB TIMESTAMP (fields without DuckDB's ICU calendar)."""
    return f"CAST({x} AS TIMESTAMP)" if t.name == "timestamp" else x


def micros_of_second(w: str) -> str:
    us = f"epoch_us({w})"
    return f"((({us} % 1000000) + 1000000) % 1000000)"


def timestamp_string(x: str, t: T.SparkType = T.TIMESTAMP) -> str:
    w = wall(x, t)
    fraction = f"rtrim({pad(micros_of_second(w), 6)}, '0')"
    clock = f"{pad(f'hour({w})', 2)} || ':' || {pad(f'minute({w})', 2)} || ':' || {pad(f'second({w})', 2)}"
    return f"({date_string(w)} || ' ' || {clock} || CASE WHEN {fraction} = '' THEN '' ELSE '.' || {fraction} END)"


_TS_SYNTAX = re.compile(
    r"([+-]?)(\d{4,6})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,6}))?)?)?"
    r"\s?(Z|UTC|[+-]\d{2}:\d{2})?"
)


def parse_timestamp_literal(tr, text: str, ntz: bool) -> int:
    """Microseconds since the epoch of a timestamp literal (UTC for TIMESTAMP), for the forms
    ``yyyy-[m]m-[d]d[( |T)[h]h:[m]m[:[s]s[.f]]][Z|UTC|+hh:mm]``; other forms Spark reads are refused."""
    s = re.sub(f"^{TRIM_ALL}+|{TRIM_ALL}+$", "", text)
    m = _TS_SYNTAX.fullmatch(s)
    if not m or (ntz and m.group(9)):
        tr.refuse(f"the timestamp text {text!r}",
                  "lakelog reads timestamp literals of the form 'yyyy-MM-dd[ HH:mm[:ss[.ffffff]]][Z|UTC|+hh:mm]'")
    sign, y, mo, d, h, mi, sec, frac, zone = m.groups()
    year = int(y) * (-1 if sign == "-" else 1)
    try:
        if not 1 <= int(mo) <= 12 or not 1 <= int(d) <= _month_days(year, int(mo)):
            raise ValueError
        base = _days_from_civil(year, int(mo), int(d))
        clock = dt.time(int(h or 0), int(mi or 0), int(sec or 0))
    except ValueError:
        tr.invalid(f"{text!r} is not a valid timestamp")
    micros = (base * 86400 + clock.hour * 3600 + clock.minute * 60 + clock.second) * 1_000_000 + int((frac or "").ljust(6, "0") or 0)
    if zone and zone not in ("Z", "UTC"):
        offset = (int(zone[1:3]) * 60 + int(zone[4:6])) * 60 * 1_000_000
        micros -= offset if zone[0] == "+" else -offset
    return micros


def _month_days(year: int, month: int) -> int:
    if month == 2:
        return 29 if (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _days_from_civil(y: int, m: int, d: int) -> int:
    # days since 1970-01-01 in the proleptic Gregorian calendar (any year)
    y -= m <= 2
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def timestamp_literal(tr, s: Sql, target: T.SparkType) -> Sql:
    if s.value is None:
        return Sql(f"CAST(NULL AS {target.duckdb})", target, value=None)
    micros = parse_timestamp_literal(tr, s.value, target.name == "timestamp_ntz")
    text = f"make_timestamp(CAST({micros} AS BIGINT))"
    if target.name == "timestamp":
        text = f"CAST({text} AS TIMESTAMP WITH TIME ZONE)"
    return Sql(text, target)


def from_days(days: str) -> str:
    """The date ``days`` (an int) after 1970-01-01; the three ints DuckDB's dates cannot hold are refused."""
    unsupported = raise_sql("UNSUPPORTED", f"lakelog does not hold {_OUT_OF_RANGE}")
    return f"(CASE WHEN ({days}) NOT BETWEEN -2147483646 AND 2147483646 THEN {unsupported} ELSE DATE '1970-01-01' + CAST({days} AS INTEGER) END)"

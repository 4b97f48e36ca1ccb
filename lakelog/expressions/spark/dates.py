"""Spark's date and time functions, Spark's text forms of dates and timestamps, and ``date_format``
patterns, over DuckDB's proleptic Gregorian calendar (Spark's since 3.0).

Timestamps are evaluated in UTC: a TIMESTAMP (with time zone) value's fields, the date it casts to and
its text are those of Spark with ``spark.sql.session.timeZone=UTC``, whichever session later reads the
table. Fields are taken from the UTC wall-clock time (DuckDB ``TIMESTAMP``), never through DuckDB's ICU
calendar, which switches to the Julian calendar before 1582."""

from __future__ import annotations

from sqlglot import exp

from . import types as T
from .catalog import NODES, Sql, entry, function, quote, raise_sql
from .texts import from_days, make_date_sql, micros_of_second, pad, signed_year, timestamp_literal, wall

# ---------------------------------------------------------------- argument types

def as_date(tr, s: Sql, name: str) -> Sql:
    """A function's date argument, cast as Spark casts it (timestamps to their UTC date, strings parsed)."""
    if s.type.void or s.type == T.DATE:
        return tr.cast(s, T.DATE)
    if s.type.datetime or s.type.name == "string":
        return tr.cast(s, T.DATE)
    tr.invalid(f"{name}() takes a date, not {s.type}")


def as_wall(tr, s: Sql, name: str) -> Sql:
    """A function's timestamp argument as a UTC wall-clock DuckDB TIMESTAMP (dates at midnight)."""
    if s.type.void:
        return Sql("CAST(NULL AS TIMESTAMP)", T.TIMESTAMP_NTZ)
    if s.type.name == "string":
        if not s.constant:
            tr.refuse(f"{name}() of a string column", "Spark parses it as a timestamp; lakelog reads only timestamp literals")
        s = timestamp_literal(tr, s, T.TIMESTAMP)
    if s.type == T.DATE:
        return Sql(f"CAST({s.text} AS TIMESTAMP)", T.TIMESTAMP_NTZ, s.fails)
    if s.type.name in ("timestamp", "timestamp_ntz"):
        return Sql(wall(s.text, s.type), T.TIMESTAMP_NTZ, s.fails)
    tr.invalid(f"{name}() takes a timestamp, not {s.type}")


def _int_arg(tr, s: Sql, name: str) -> Sql:
    if s.type.void:
        return tr.cast(s, T.INT)
    if s.type.name not in ("tinyint", "smallint", "int"):
        if s.type.name == "string":
            tr.refuse(f"{name}() with a string count", "write the CAST you mean")
        tr.invalid(f"{name}() takes an int count, not {s.type}")
    return tr.cast(s, T.INT)


# ---------------------------------------------------------------- fields

def _field(duck: str, spark: str, note: str, on: str = "date") -> None:
    @function(spark, "datetime", note)
    def handler(tr, args, name):
        (a,) = tr.args(args, name, 1)
        a = as_date(tr, a, name) if on == "date" else as_wall(tr, a, name)
        return Sql(f"CAST({duck.format(a.text)} AS INTEGER)", T.INT, a.fails)


_field("year({})", "year", "the year (of the UTC date of a timestamp; a string is cast to a date)")
_field("month({})", "month", "1-12")
_field("day({})", ("day", "dayofmonth"), "1-31")
_field("dayofyear({})", "dayofyear", "1-366")
_field("quarter({})", "quarter", "1-4")
_field("(dayofweek({}) + 1)", "dayofweek", "1 = Sunday ... 7 = Saturday (DuckDB's dayofweek is 0-6)")
_field("(isodow({}) - 1)", "weekday", "0 = Monday ... 6 = Sunday")
_field("weekofyear({})", "weekofyear", "the ISO 8601 week, 1-53")
_field("hour({})", "hour", "0-23, of the UTC time of a timestamp (a date is midnight)", on="timestamp")
_field("minute({})", "minute", "0-59", on="timestamp")
_field("second({})", "second", "0-59, the fraction dropped", on="timestamp")

_EXTRACT = {
    "YEAR": ("year({})", "date"), "QUARTER": ("quarter({})", "date"), "MONTH": ("month({})", "date"),
    "WEEK": ("weekofyear({})", "date"), "DAY": ("day({})", "date"), "DOW": ("(dayofweek({}) + 1)", "date"),
    "DAYOFWEEK": ("(dayofweek({}) + 1)", "date"), "DAYOFWEEK_ISO": ("isodow({})", "date"), "DOW_ISO": ("isodow({})", "date"),
    "DOY": ("dayofyear({})", "date"), "HOUR": ("hour({})", "timestamp"), "MINUTE": ("minute({})", "timestamp"),
}
entry("EXTRACT", "datetime",
      f"fields {', '.join(_EXTRACT)} as the functions of the same name (int); SECOND as decimal(8,6) with the fraction")


def _extract(tr, field: str, value: Sql, name: str) -> Sql:
    f = field.upper()
    if f == "SECOND":
        w = as_wall(tr, value, name)
        us = f"(second({w.text}) * 1000000 + {micros_of_second(w.text)} % 1000000)"
        return Sql(f"CAST(CAST({us} AS DECIMAL(38,0)) / 1000000 AS DECIMAL(8,6))", T.decimal(8, 6), w.fails)
    if f not in _EXTRACT:
        tr.refuse(f"the field {field} of {name}")
    duck, on = _EXTRACT[f]
    a = as_date(tr, value, name) if on == "date" else as_wall(tr, value, name)
    return Sql(f"CAST({duck.format(a.text)} AS INTEGER)", T.INT, a.fails)


def extract_node(tr, n: exp.Extract) -> Sql:
    return _extract(tr, n.this.name, tr.node(n.expression), "EXTRACT")


NODES[exp.Extract] = extract_node


@function("date_part", "datetime", "date_part('field', x): EXTRACT(field FROM x), the field a string literal")
def date_part(tr, args, name):
    field, value = tr.args(args, name, 2)
    if not field.constant or not isinstance(field.value, str):
        tr.refuse("date_part with a field that is not a string literal")
    return _extract(tr, field.value, value, name)


# ---------------------------------------------------------------- arithmetic on dates

def _days(expr: str) -> str:
    return f"(({expr}) - DATE '1970-01-01')"


def _from_days_wrapped(days: str) -> str:
    # Spark adds days to an int without an overflow check: it wraps around
    return from_days(f"((({days}) + 2147483648) % 4294967296 + 4294967296) % 4294967296 - 2147483648")


@function(("date_add", "dateadd"), "datetime", "date + n days (n tinyint/smallint/int), wrapping around int as Spark does")
def date_add(tr, args, name):
    d, n = tr.args(args, name, 2)
    d, n = as_date(tr, d, name), _int_arg(tr, n, name)
    return tr.null_skip([d, n], lambda a, b: _from_days_wrapped(f"CAST({_days(a)} AS BIGINT) + {b}"), T.DATE)


@function("date_sub", "datetime", "date - n days")
def date_sub(tr, args, name):
    d, n = tr.args(args, name, 2)
    d, n = as_date(tr, d, name), _int_arg(tr, n, name)
    return tr.null_skip([d, n], lambda a, b: _from_days_wrapped(f"CAST({_days(a)} AS BIGINT) - {b}"), T.DATE)


@function("datediff", "datetime", "datediff(end, start): days from start to end, int")
def datediff(tr, args, name):
    end, start = tr.args(args, name, 2)
    end, start = as_date(tr, end, name), as_date(tr, start, name)
    return tr.null_skip([end, start], lambda a, b: f"CAST(({a} - {b}) AS INTEGER)", T.INT)


@function("add_months", "datetime", "months added, the day clamped to the month's last")
def add_months(tr, args, name):
    d, n = tr.args(args, name, 2)
    d, n = as_date(tr, d, name), _int_arg(tr, n, name)
    return tr.null_skip([d, n], lambda a, b: f"CAST(({a} + to_months({b})) AS DATE)", T.DATE)


@function("last_day", "datetime", "the last day of the date's month")
def last_day(tr, args, name):
    (d,) = tr.args(args, name, 1)
    d = as_date(tr, d, name)
    return Sql(f"last_day({d.text})", T.DATE, d.fails)


@function("make_date", "datetime", "an impossible date is an error (ANSI)")
def make_date(tr, args, name):
    parts = [_int_arg(tr, a, name) for a in tr.args(args, name, 3)]
    invalid = lambda: raise_sql("DATETIME_FIELD_OUT_OF_BOUNDS", "no such date")  # noqa: E731
    return tr.null_skip(parts, lambda y, m, d: make_date_sql(y, m, d, invalid), T.DATE, fails=True, propagates=False)


@function("unix_date", "datetime", "days since 1970-01-01, int")
def unix_date(tr, args, name):
    (d,) = tr.args(args, name, 1)
    if d.type != T.DATE and not d.type.void:
        tr.invalid(f"unix_date() takes a date, not {d.type}")
    d = tr.cast(d, T.DATE)
    return Sql(f"CAST({_days(d.text)} AS INTEGER)", T.INT, d.fails)


@function("date_from_unix_date", "datetime", "the date n days after 1970-01-01")
def date_from_unix_date(tr, args, name):
    (n,) = tr.args(args, name, 1)
    n = _int_arg(tr, n, name)
    return Sql(from_days(n.text), T.DATE, True)


def _epoch(divisor: int, floor: bool):
    def handler(tr, args, name):
        (a,) = tr.args(args, name, 1)
        if a.type.name not in ("timestamp", "void") and not (name == "unix_timestamp" and a.type.name in ("date", "timestamp_ntz")):
            tr.invalid(f"{name}() takes a timestamp, not {a.type}")
        w = as_wall(tr, a, name)
        us = f"epoch_us({w.text})"
        if divisor == 1:
            return Sql(us, T.LONG, w.fails)
        if floor:
            return Sql(f"(({us} - (({us} % {divisor}) + {divisor}) % {divisor}) // {divisor})", T.LONG, w.fails)
        return Sql(f"({us} // {divisor})", T.LONG, w.fails)

    return handler


function("unix_timestamp", "datetime", "seconds since the epoch of a timestamp or date, truncated toward zero "
         "(no argument, or a string to parse, is refused)")(_epoch(1_000_000, False))
function("unix_seconds", "datetime", "seconds since the epoch, rounded down")(_epoch(1_000_000, True))
function("unix_millis", "datetime", "milliseconds since the epoch, rounded down")(_epoch(1_000, True))
function("unix_micros", "datetime", "microseconds since the epoch")(_epoch(1, True))

_TRUNC_DATE = {"YEAR": "year", "YYYY": "year", "YY": "year", "QUARTER": "quarter", "MONTH": "month", "MM": "month",
               "MON": "month", "WEEK": "week"}
_TRUNC_TS = {**_TRUNC_DATE, "DAY": "day", "DD": "day", "HOUR": "hour", "MINUTE": "minute", "SECOND": "second",
             "MILLISECOND": "millisecond", "MICROSECOND": "microsecond"}


def _unit(tr, s: Sql, name: str, units: dict) -> str | None:
    if not s.constant or not isinstance(s.value, (str, type(None))):
        tr.refuse(f"{name}() with a unit that is not a string literal")
    return units.get(s.value.upper()) if s.value is not None else None


@function("trunc", "datetime", f"trunc(date, unit): unit one of {', '.join(_TRUNC_DATE)} (any case); another unit gives NULL")
def trunc(tr, args, name):
    d, unit = tr.args(args, name, 2)
    d = as_date(tr, d, name)
    u = _unit(tr, unit, name, _TRUNC_DATE)
    if u is None:
        return Sql("CAST(NULL AS DATE)", T.DATE, d.fails)
    return Sql(f"CAST(date_trunc('{u}', {d.text}) AS DATE)", T.DATE, d.fails)


@function("date_trunc", "datetime", f"date_trunc(unit, timestamp): unit one of {', '.join(_TRUNC_TS)}; another gives NULL; "
          "in UTC, the result a timestamp")
def date_trunc(tr, args, name):
    unit, ts = tr.args(args, name, 2)
    w = as_wall(tr, ts, name)
    u = _unit(tr, unit, name, _TRUNC_TS)
    if u is None:
        return Sql("CAST(NULL AS TIMESTAMP WITH TIME ZONE)", T.TIMESTAMP, w.fails)
    return Sql(f"CAST(date_trunc('{u}', {w.text}) AS TIMESTAMP WITH TIME ZONE)", T.TIMESTAMP, w.fails)


@function("to_date", "datetime", "to_date(x): CAST(x AS DATE); the two-argument form (a pattern to parse) is refused")
def to_date(tr, args, name):
    (a,) = tr.args(args, name, 1, 1) if len(args) == 1 else (tr.refuse("to_date() with a format pattern"),)
    if not (a.type.datetime or a.type.name == "string" or a.type.void):
        tr.invalid(f"to_date() takes a string, date or timestamp, not {a.type}")
    return tr.cast(a, T.DATE)




# ---------------------------------------------------------------- date_format

def _format_pieces(tr, pattern: str, w: str) -> list[str]:
    year = f"year({w})"
    hour12 = f"(CASE WHEN hour({w}) % 12 = 0 THEN 12 ELSE hour({w}) % 12 END)"
    fields = {
        # Spark formats y as the proleptic year (u) when the pattern has no era (G, refused here)
        ("y", 1): f"CAST({year} AS VARCHAR)", ("y", 2): pad(f"abs({year}) % 100", 2), ("y", 4): signed_year(year),
        ("M", 1): f"CAST(month({w}) AS VARCHAR)", ("M", 2): pad(f"month({w})", 2),
        ("M", 3): f"strftime({w}, '%b')", ("M", 4): f"strftime({w}, '%B')",
        ("d", 1): f"CAST(day({w}) AS VARCHAR)", ("d", 2): pad(f"day({w})", 2),
        ("D", 1): f"CAST(dayofyear({w}) AS VARCHAR)", ("D", 3): pad(f"dayofyear({w})", 3),
        ("H", 1): f"CAST(hour({w}) AS VARCHAR)", ("H", 2): pad(f"hour({w})", 2),
        ("h", 1): f"CAST({hour12} AS VARCHAR)", ("h", 2): pad(hour12, 2),
        ("m", 1): f"CAST(minute({w}) AS VARCHAR)", ("m", 2): pad(f"minute({w})", 2),
        ("s", 1): f"CAST(second({w}) AS VARCHAR)", ("s", 2): pad(f"second({w})", 2),
        ("a", 1): f"(CASE WHEN hour({w}) < 12 THEN 'AM' ELSE 'PM' END)",
        ("E", 1): f"strftime({w}, '%a')", ("E", 3): f"strftime({w}, '%a')", ("E", 4): f"strftime({w}, '%A')",
    }
    pieces, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "'":
            j = pattern.find("'", i + 1)
            if j == i + 1:
                pieces.append(quote("'"))
                i += 2
                continue
            if j < 0:
                tr.invalid(f"the date_format pattern {pattern!r} has an unclosed quote")
            text = pattern[i + 1:j]
            while j + 1 < len(pattern) and pattern[j + 1] == "'":  # '' inside quotes is a quote
                k = pattern.find("'", j + 2)
                if k < 0:
                    tr.invalid(f"the date_format pattern {pattern!r} has an unclosed quote")
                text += "'" + pattern[j + 2:k]
                j = k
            pieces.append(quote(text))
            i = j + 1
            continue
        if c.isascii() and c.isalpha():
            j = i
            while j < len(pattern) and pattern[j] == c:
                j += 1
            count = j - i
            if c == "S" and count <= 6:
                pieces.append(f"left({pad(micros_of_second(w), 6)}, {count})")
            elif (c, count) in fields:
                pieces.append(fields[(c, count)])
            else:
                tr.refuse(f"the date_format pattern letter {c * count!r}",
                          "lakelog formats y yy yyyy M MM MMM MMMM d dd D DDD H HH h hh m mm s ss S-SSSSSS a E EEE EEEE and quoted text")
            i = j
            continue
        if c in "[]{}#":
            tr.refuse(f"the date_format pattern character {c!r}")
        pieces.append(quote(c))
        i += 1
    return pieces


@function("date_format", "datetime",
          "date_format(timestamp, pattern): pattern a literal of the letters y yy yyyy (the proleptic year) M MM MMM MMMM d dd D DDD "
          "H HH h hh m mm s ss S-SSSSSS a E EEE EEEE, quoted text and punctuation, in UTC, English names; other letters refused")
def date_format(tr, args, name):
    ts, pattern = tr.args(args, name, 2)
    w = as_wall(tr, ts, name)
    if not pattern.constant or not isinstance(pattern.value, (str, type(None))):
        tr.refuse("date_format() with a pattern that is not a string literal")
    if pattern.value is None:
        return Sql("CAST(NULL AS VARCHAR)", T.STRING, w.fails)
    pieces = _format_pieces(tr, pattern.value, w.text)
    body = " || ".join(pieces) if pieces else "''"
    return Sql(f"(CASE WHEN {w.text} IS NULL THEN NULL ELSE ({body}) END)", T.STRING, w.fails)


__all__ = ["as_date", "as_wall", "extract_node"]

"""Spark's CAST in ANSI mode, one source/target pair at a time, and ``try_cast`` (NULL where CAST errors).

Every pair lakelog accepts is listed in ``CASTS`` (the spec's table). A pair Spark allows but lakelog
cannot compute exactly is refused by name, with the reason. A float or double cast to a string is
Java's ``Double.toString`` / ``Float.toString`` as Java 17 prints it (``lakelog.expressions.sql_java_floats``);
cast to a decimal (Spark rounds the digits of that text) it is refused."""

from __future__ import annotations

from sqlglot import exp

from . import types as T
from .catalog import NODES, Sql, entry, function, quote, raise_sql
from .literals import suffix_literal
from .texts import TRIM_ALL, trimmed
from .types import SparkType

_INVALID = "CAST_INVALID_INPUT"
_OVERFLOW = "CAST_OVERFLOW"
_JVM = "Spark rounds the digits of Java's Double.toString, which lakelog does not do for decimals"
_INT_NAMES = ("tinyint", "smallint", "int", "bigint")

CASTS: dict[tuple[str, str], str] = {}  # (source family, target family) -> note


def _pair(sources: tuple[str, ...], targets: tuple[str, ...], note: str) -> None:
    for s in sources:
        for t in targets:
            CASTS[(s, t)] = note


_NUMERIC = _INT_NAMES + ("float", "double", "decimal")
_pair(("void",), _NUMERIC + ("boolean", "string", "binary", "date", "timestamp", "timestamp_ntz"), "NULL of the target type")
_pair(("boolean",), _NUMERIC, "TRUE is 1, FALSE is 0 (an error where 1 does not fit the decimal)")
_pair(("boolean",), ("string",), "'true' / 'false'")
_pair(_INT_NAMES, _NUMERIC, "exact, or rounded to the nearest float/double; an error where the value does not fit (ANSI)")
_pair(("float", "double"), _INT_NAMES,
      "truncated toward zero; NaN, infinities and values out of range are errors, except that 2^63 as a float or double "
      "gives 9223372036854775807 for bigint, as Spark's range check lets it through")
_pair(("float", "double"), ("float", "double"), "widened exactly, or rounded to the nearest float (beyond its range: infinity, as in Spark)")
_pair(("float", "double"), ("string",),
      "Java 17's Double.toString / Float.toString, as Spark on Java 17: 1.0E7, 1234567.0, 0.001, 1.0E-4, -0.0, NaN, Infinity "
      "(Java 19 and later print the shortest digits, which differ for a few values: Spark's own text depends on its JVM)")
_pair(("decimal",), _INT_NAMES, "truncated toward zero; an error where it does not fit")
_pair(("decimal",), ("float", "double"), "the nearest float or double (correctly rounded)")
_pair(("decimal",), ("decimal",), "rounded HALF_UP to the target scale; an error where it does not fit")
_pair(_NUMERIC, ("boolean",), "x <> 0 (NaN is TRUE)")
_pair(_INT_NAMES + ("decimal",), ("string",), "decimal digits; decimals with all their scale digits, no exponent")
_pair(("string",), _INT_NAMES,
      "ASCII controls and spaces trimmed from both ends, then [+-]digits; anything else (a point, an exponent, other "
      "spaces) is an error, as is a value out of range")
_pair(("string",), ("decimal",),
      "ASCII controls and spaces but DEL trimmed, then Java BigDecimal syntax ([+-]digits[.digits][e[+-]digits]), rounded HALF_UP; an "
      "error otherwise (digits other than 0-9, which Java reads too, are refused: [UNSUPPORTED])")
_pair(("string",), ("boolean",), "trimmed, any case: t true y yes 1 / f false n no 0; anything else is an error")
_pair(("string",), ("date",),
      "trimmed, [+-]yyyy[yyy][-[m]m[-[d]d]], anything after the day following a space or T ignored, as Spark's stringToDate; "
      "an invalid date is an error")
_pair(("string",), ("binary",), "the UTF-8 bytes")
_pair(("string",), ("timestamp", "timestamp_ntz"),
      "a string literal only, of the forms TIMESTAMP '...' takes; a string column is refused")
_pair(("date",), ("string",), "yyyy-MM-dd; years past 9999 with +, before year 0 with -")
_pair(("date",), ("timestamp", "timestamp_ntz"), "midnight (UTC for timestamp)")
_pair(("timestamp", "timestamp_ntz"), ("date",), "the date (in UTC for timestamp)")
_pair(("timestamp", "timestamp_ntz"), ("string",), "yyyy-MM-dd HH:mm:ss[.f], the fraction without trailing zeros (in UTC for timestamp)")
_pair(("timestamp",), ("timestamp_ntz",), "the UTC wall-clock time")
_pair(("timestamp_ntz",), ("timestamp",), "the wall-clock time read in UTC")
_pair(("timestamp",), ("bigint",), "whole seconds since 1970-01-01 UTC, rounded down")

entry("CAST", "cast", "ANSI: an invalid or overflowing value is an error; try_cast gives NULL instead. Pairs: see the table below")
entry(("try_cast",), "cast", "CAST, with NULL where CAST would fail (errors inside its argument still fail)")
entry(("::",), "cast", "`x::type` is CAST(x AS type)")
_TYPE_FUNCTIONS = {"boolean": T.BOOLEAN, "tinyint": T.BYTE, "smallint": T.SHORT, "int": T.INT, "bigint": T.LONG,
                   "float": T.FLOAT, "double": T.DOUBLE, "string": T.STRING, "binary": T.BINARY, "date": T.DATE,
                   "timestamp": T.TIMESTAMP}


def family(t: SparkType) -> str:
    return t.name


def cast_node(tr, n: exp.Expression) -> Sql:
    suffixed = suffix_literal(n)
    if suffixed is not None:
        return suffixed
    to = n.args.get("to")
    target = T.parse_type_name(to.sql("spark")) if to is not None else None
    if target is None:
        tr.refuse(f"CAST to {to.sql('spark') if to is not None else '?'}")
    if n.args.get("format") is not None:
        tr.refuse("CAST ... FORMAT")
    value = tr.node(n.this)
    safe = isinstance(n, exp.TryCast) and bool(n.args.get("safe"))
    return cast(tr, value, _explicit_target(value, target), try_=safe)


def _explicit_target(value: Sql, target: SparkType) -> SparkType:
    # A string CAST to STRING keeps its collation's strength (a column's stays implicit), as in Spark.
    return target.with_strength(value.type.strength) if value.type.name == "string" else target


@function(tuple(_TYPE_FUNCTIONS), "cast", "`int(x)` and the like are CAST(x AS int)")
def type_function(tr, args, name):
    (value,) = tr.args(args, name, 1)
    return cast(tr, value, _explicit_target(value, _TYPE_FUNCTIONS[name]))


NODES[exp.Cast] = NODES[exp.TryCast] = cast_node


def cast(tr, s: Sql, t: SparkType, implicit: object = False, try_: bool = False) -> Sql:
    """Spark's ``CAST(s AS t)`` (ANSI), or ``try_cast`` with ``try_``."""
    if s.type == t:
        return s
    if s.type.name == t.name == "string":  # (a collation decides how strings compare, not their value)
        return Sql(s.text, t, s.fails, s.value, s.literal)
    key = (family(s.type), family(t))
    if key not in CASTS:
        _refuse_pair(tr, s.type, t, implicit)
    if s.type.void:
        return Sql(f"CAST(NULL AS {t.duckdb})", t, value=None)
    if key in (("string", "timestamp"), ("string", "timestamp_ntz")):
        if not s.constant:
            tr.refuse(f"{'an implicit ' if implicit else ''}CAST from a string column to {t}",
                      "Spark reads many timestamp forms (zone names among them); lakelog reads timestamp literals only")
        from .texts import timestamp_literal

        return timestamp_literal(tr, s, t)
    fail = (lambda error, detail: "NULL") if try_ else raise_sql
    duck_cast = "TRY_CAST" if try_ else "CAST"
    text, fails = _CAST_SQL(key, s, t, fail, duck_cast)
    out = Sql(text, t, s.fails or (fails and not try_))
    return out


def _refuse_pair(tr, source: SparkType, target: SparkType, implicit) -> None:
    what = f"{'an implicit ' if implicit else ''}CAST from {source} to {target}"
    if source.name in ("float", "double") and target.name == "decimal":
        tr.refuse(what, _JVM)
    if source.name in ("struct", "other") or target.name in ("struct", "other"):
        tr.refuse(what)
    tr.refuse(what)


def _guard(condition: str, fail, error: str, detail: str, value: str) -> str:
    return f"(CASE WHEN {condition} THEN {fail(error, detail)} ELSE {value} END)"


def _CAST_SQL(key: tuple[str, str], s: Sql, t: SparkType, fail, duck_cast: str) -> tuple[str, bool]:
    src, dst = key
    x = s.text
    if src == "boolean" and dst != "string":
        return f"{duck_cast}(CAST({x} AS TINYINT) AS {t.duckdb})", dst == "decimal"
    if src == "boolean":
        return f"CAST({x} AS VARCHAR)", False
    if dst == "boolean":
        if src == "string":
            v = f"lower({trimmed(x)})"
            return (f"(CASE WHEN {v} IN ('t', 'true', 'y', 'yes', '1') THEN TRUE WHEN {v} IN ('f', 'false', 'n', 'no', '0') THEN FALSE "
                    f"WHEN {x} IS NULL THEN NULL ELSE {fail(_INVALID, 'not a boolean')} END)"), True
        return f"(({x}) <> 0)", False
    if src in _INT_NAMES:
        # DuckDB raises where the value does not fit, as Spark does in ANSI mode
        return f"{duck_cast}({x} AS {t.duckdb})", dst in _INT_NAMES + ("decimal",)
    if src in ("float", "double"):
        if dst == "string":  # (Java's Double/Float.toString: lakelog.expressions.sql_java_floats)
            return f"{'spark_float_text' if src == 'float' else 'spark_double_text'}({x})", False
        if dst in ("float", "double"):
            if dst == "float":
                # Java rounds to the nearest float and overflows to infinity; DuckDB raises there
                big = "CAST('3.4028235677973366e38' AS DOUBLE)"
                return (f"(CASE WHEN isnan({x}) THEN CAST('nan' AS FLOAT) WHEN ({x}) >= {big} THEN CAST('inf' AS FLOAT) "
                        f"WHEN ({x}) <= -{big} THEN CAST('-inf' AS FLOAT) ELSE CAST({x} AS FLOAT) END)"), False
            return f"CAST({x} AS DOUBLE)", False
        lo, hi = T.INTEGRAL_RANGE[dst]
        ok = f"floor({x}) <= CAST('{hi}' AS DOUBLE) AND ceil({x}) >= CAST('{lo}' AS DOUBLE)"
        value = f"CAST(trunc({x}) AS {t.duckdb})"
        if dst == "bigint":  # 2^63 passes Spark's check (Long.MaxValue as a double is 2^63) and saturates
            value = f"(CASE WHEN ({x}) >= CAST('9223372036854775807' AS DOUBLE) THEN CAST(9223372036854775807 AS BIGINT) ELSE {value} END)"
        return f"(CASE WHEN NOT ({ok}) THEN {fail(_OVERFLOW, f'value out of the range of {dst}')} ELSE {value} END)", True
    if src == "decimal":
        if dst in _INT_NAMES:
            return f"{duck_cast}(trunc({x}) AS {t.duckdb})", True
        if dst in ("float", "double"):
            return f"CAST(CAST({x} AS VARCHAR) AS {t.duckdb})", False
        if dst == "decimal":
            return f"{duck_cast}({x} AS {t.duckdb})", True
        if dst == "string":
            return f"CAST({x} AS VARCHAR)", False
    if src == "string":
        v = trimmed(x)
        if dst in _INT_NAMES:
            return _guard(f"NOT regexp_full_match({v}, '[+-]?[0-9]+')", fail, _INVALID, f"not a {dst}",
                          f"{duck_cast}({v} AS {t.duckdb})"), True
        if dst == "decimal":
            v = trimmed(x, r"[\x00-\x20]")  # java.lang.String.trim, not trimAll
            syntax = r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?"
            # Java's BigDecimal reads any Unicode decimal digit (１２ is 12): refused rather than guessed
            other_digits = f"regexp_matches({v}, '[^\\x00-\\x7f]') AND regexp_matches({v}, '\\p{{Nd}}')"
            unsupported = raise_sql("UNSUPPORTED", "lakelog does not read digits other than 0-9 in a decimal")
            return (f"(CASE WHEN {other_digits} THEN {unsupported} WHEN NOT regexp_full_match({v}, '{syntax}') THEN "
                    f"{fail(_INVALID, 'not a decimal')} ELSE {duck_cast}({v} AS {t.duckdb}) END)"), True
        if dst == "binary":
            return f"encode({x})", False
        if dst == "date":
            from .texts import string_to_date

            return string_to_date(x, fail), True
    if src == "date":
        if dst == "string":
            from .texts import date_string

            return date_string(x), False
        return f"CAST({x} AS {t.duckdb})", False
    if src in ("timestamp", "timestamp_ntz"):
        if dst == "date":
            return f"CAST({x} AS DATE)", False
        if dst == "string":
            from .texts import timestamp_string

            return timestamp_string(x), False
        if dst == "bigint":
            return _floor_seconds(x), False
        return f"CAST({x} AS {t.duckdb})", False
    raise AssertionError(key)


def _floor_seconds(x: str) -> str:
    us = f"epoch_us({x})"
    return f"(({us} - (({us} % 1000000) + 1000000) % 1000000) // 1000000)"


__all__ = ["CASTS", "cast", "cast_node", "type_function", "trimmed", "TRIM_ALL", "quote"]

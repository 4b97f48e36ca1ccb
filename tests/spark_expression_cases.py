"""Inputs and expressions for the differential test of lakelog.spark_expressions against Spark.

``table(rng, n)`` makes n random rows over the columns below, drawn to hit the edges each entry has:
NULL, NaN, infinities, -0.0, 2^53 and 2^63 as doubles, the extreme integers, decimals at full
precision, empty, blank, unicode and case-special strings, numeric and date text, dates at year,
leap and calendar boundaries (year 0, 1582, 9999, 10000), timestamps far from 1970 with fractions.
``CASES`` maps each entry of the layer's table (its first name) to expressions exercising it; a test
checks every entry has cases and every cast pair is exercised."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import random

import pyarrow as pa

from lakelog.case_mapping import LOWER, UPPER

D = decimal.Decimal
I8, I16, I32, I64 = ((-(2 ** (b - 1)), 2 ** (b - 1) - 1) for b in (8, 16, 32, 64))

COLUMNS = {
    "b": pa.bool_(), "b2": pa.bool_(),
    "i8": pa.int8(), "i8b": pa.int8(), "i16": pa.int16(), "i16b": pa.int16(),
    "i32": pa.int32(), "i32b": pa.int32(), "i64": pa.int64(), "i64b": pa.int64(),
    "n": pa.int32(), "n2": pa.int32(), "k": pa.int32(),
    "f32": pa.float32(), "f32b": pa.float32(), "f64": pa.float64(), "f64b": pa.float64(),
    "d52": pa.decimal128(5, 2), "d52b": pa.decimal128(5, 2), "d183": pa.decimal128(18, 3), "d183b": pa.decimal128(18, 3),
    "d380": pa.decimal128(38, 0), "d3810": pa.decimal128(38, 10), "d2010": pa.decimal128(20, 10),
    "s": pa.string(), "s2": pa.string(), "num_s": pa.string(), "date_s": pa.string(), "bool_s": pa.string(),
    "like_s": pa.string(),
    "d": pa.date32(), "d2": pa.date32(),
    "ts": pa.timestamp("us", tz="UTC"), "ts2": pa.timestamp("us", tz="UTC"), "ntz": pa.timestamp("us"),
    "bin": pa.binary(),
    "st": pa.struct([("n", pa.int32()), ("s", pa.string())]),
    "arr": pa.list_(pa.int32()),
}

_SPECIAL_CHARS = sorted(set(UPPER) | set(LOWER))


def _int(rng: random.Random, lo: int, hi: int) -> int | None:
    r = rng.random()
    if r < 0.1:
        return None
    if r < 0.35:
        return rng.choice([lo, hi, 0, 1, -1, lo + 1, hi - 1, 2, -2, 10, -10, 100])
    if r < 0.7:
        return rng.randint(max(lo, -1000), min(hi, 1000))
    return rng.randint(lo, hi)


_DOUBLES = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 0.125, 0.1, 0.3, 2.675, 1e-5, 5e-324, -5e-324, 1e300, -1e300,
            1.7976931348623157e308, 2.0 ** 53, 2.0 ** 53 + 2, 2.0 ** 63, -(2.0 ** 63), 2.0 ** 64, 2.0 ** 31, -(2.0 ** 31),
            2147483647.5, -2147483648.9, 127.9, -128.9, 3.4028235677973366e38, 3.4028234663852886e38, 1e16, 123456789.125,
            float("nan"), float("inf"), float("-inf"), 6.198476455269489e17, 9007199254740993.0, 0.49999999999999994]


def _double(rng: random.Random) -> float | None:
    r = rng.random()
    if r < 0.1:
        return None
    if r < 0.45:
        return rng.choice(_DOUBLES)
    if r < 0.65:
        return round(rng.uniform(-1000, 1000), rng.randint(0, 4))
    if r < 0.85:
        return rng.uniform(-1e6, 1e6) * 10 ** rng.randint(-12, 12)
    import struct

    return struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]


def _decimal(rng: random.Random, p: int, s: int) -> D | None:
    r = rng.random()
    if r < 0.1:
        return None
    top = 10 ** p - 1
    if r < 0.3:
        u = rng.choice([top, -top, 0, 1, -1, 5, -5, 10 ** s // 2, -(10 ** s // 2), 10 ** s, top // 2])
    elif r < 0.6:
        u = rng.randint(-(10 ** min(p, s + 3)), 10 ** min(p, s + 3))
    else:
        u = rng.randint(-top, top)
    u = max(-top, min(top, u))
    return D((int(u < 0), tuple(int(c) for c in str(abs(u))), -s))


_STRINGS = ["", " ", "  ", "a", "abc", "ABC", "Hello World", "héllo", "é😀", "e\u0301", "straße", "İstanbul", "ΑΣ", "ΣΑΣ ΟΔΟΣ",
            "ǰ", "ﬁne", "a%b_c", "100%", "_x_", "\\", "a\\b", "tab\there", "line\nbreak", " padded ", "x", "xyx", "aaa",
            "l", "ll", "hello", "😀😀", "日本語", "\u0000nul", "1", "-", "+"]
_NUMBERS = ["0", "1", "-1", "+5", " 12 ", "\t7\n", "\u00a05", "\u30005", "\x005\x00", "\x1f5", "\x7f5", "1.5", "-1.50", "5.", ".5",
            "1e3", "1E+2", "-.5e1", "1e-50", "12345.6", "99999", "2147483647", "2147483648", "-2147483648", "9223372036854775807",
            "9223372036854775808", "127", "128", "-129", "32768", "nan", "NaN", "inf", "Infinity", "0x10", "1,000", "1_000",
            "", " ", "abc", "１２", "0.125", "-0.125", "99999999999999999999999999999999999999", "1.5d", "00012", "1e2.5"]
_DATES = ["2024-01-05", "2024-1-5", " 2024-02-29 ", "2023-02-29", "2024-13-01", "2024-00-10", "2024", "2024-03", "+2024-01-01",
          "-0001-12-31", "0000-01-01", "12345-01-01", "2024-01-05T12:00", "2024-01-05 garbage", "2024-01-05garbage",
          "2024-01-05-", "24-01-01", "2024-001-01", "2024-01-1", "1582-10-10", "9999-12-31", "", "x", "2024 01 05",
          "\t2024-06-30\n", "2024-06-31", "1970-01-01", "1969-12-31", "2024-01-05T", "2024-01-05 ", "2024-", "2024-1-"]
_BOOLS = ["true", "false", "TRUE", " t ", "F", "yes", "No", "y", "n", "1", "0", "2", "", "tru", "on", "\ttrue\n", "ｔｒｕｅ"]
_LIKES = ["abc", "a_c", "a%", "%b%", "a\\_c", "a_", "", "%", "_", "100%", "a%b_c", "é😀", "\\", "abcabc", "line\nbreak"]


def _string(rng: random.Random, pool: list[str], special: float = 0.0) -> str | None:
    r = rng.random()
    if r < 0.1:
        return None
    if r < 0.1 + special:
        return "".join(rng.choice(_SPECIAL_CHARS + ["a", "Σ", " "]) for _ in range(rng.randint(1, 4)))
    if r < 0.8:
        return rng.choice(pool)
    alphabet = "abcAB _%xyz012é😀ß\u0301-:."
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))


_EPOCH = dt.date(1970, 1, 1)
_DAY_EDGES = [dt.date(1, 1, 1), dt.date(1582, 10, 4), dt.date(1582, 10, 15), dt.date(1900, 2, 28), dt.date(1900, 3, 1),
              dt.date(1969, 12, 31), dt.date(1970, 1, 1), dt.date(2000, 2, 29), dt.date(2020, 12, 31), dt.date(2021, 1, 1),
              dt.date(2024, 1, 6), dt.date(2024, 1, 7), dt.date(2024, 2, 29), dt.date(2024, 12, 30), dt.date(2026, 1, 1),
              dt.date(9999, 12, 31)]
_DAY_RAW = [-719528, -719529, -719893, 2932897, 3000000]  # years 0 and -1, and past 9999


def _days(rng: random.Random) -> int | None:
    r = rng.random()
    if r < 0.1:
        return None
    if r < 0.4:
        return (rng.choice(_DAY_EDGES) - _EPOCH).days
    if r < 0.47:
        return rng.choice(_DAY_RAW)
    if r < 0.8:
        return rng.randint(-25000, 25000)
    return rng.randint(-719162, 2932896)


def _micros(rng: random.Random) -> int | None:
    days = _days(rng)
    if days is None:
        return None
    r = rng.random()
    if r < 0.3:
        within = rng.choice([0, 1, 999999, 1000000, 86399999999, 43200000000, 500000, 120000, 86399000000])
    else:
        within = rng.randint(0, 86400 * 10 ** 6 - 1)
    return days * 86400 * 10 ** 6 + within


def table(rng: random.Random, n: int) -> pa.Table:
    cols = {}
    for name, t in COLUMNS.items():
        if pa.types.is_boolean(t):
            vals = [None if rng.random() < 0.15 else rng.random() < 0.5 for _ in range(n)]
        elif name == "k":  # lengths to build strings of: never huge
            vals = [None if rng.random() < 0.1 else rng.randint(-3, 12) for _ in range(n)]
        elif name in ("n", "n2"):
            vals = [None if rng.random() < 0.1 else rng.choice([-2147483648, 2147483647] if rng.random() < 0.05 else range(-6, 14))
                    for _ in range(n)]
        elif pa.types.is_integer(t):
            lo, hi = {8: I8, 16: I16, 32: I32, 64: I64}[t.bit_width]
            vals = [_int(rng, lo, hi) for _ in range(n)]
        elif pa.types.is_floating(t):
            vals = [_double(rng) for _ in range(n)]
            if t == pa.float32():
                vals = [None if v is None else (v if abs(v) < 3.4e38 or math.isinf(v) or math.isnan(v) else math.copysign(math.inf, v))
                        for v in vals]
        elif pa.types.is_decimal(t):
            vals = [_decimal(rng, t.precision, t.scale) for _ in range(n)]
        elif pa.types.is_string(t):
            pool = {"num_s": _NUMBERS, "date_s": _DATES, "bool_s": _BOOLS, "like_s": _LIKES}.get(name, _STRINGS)
            vals = [_string(rng, pool, 0.15 if name in ("s", "s2") else 0.0) for _ in range(n)]
        elif pa.types.is_date32(t):
            cols[name] = pa.array([_days(rng) for _ in range(n)], pa.int32()).cast(pa.date32())
            continue
        elif pa.types.is_timestamp(t):
            cols[name] = pa.array([_micros(rng) for _ in range(n)], pa.int64()).cast(t)
            continue
        elif pa.types.is_list(t):
            vals = [None if rng.random() < 0.1 else [_int(rng, *I32) for _ in range(rng.randint(0, 3))] for _ in range(n)]
        elif pa.types.is_binary(t):
            vals = [None if rng.random() < 0.1 else rng.choice([b"", b"abc", "é".encode(), bytes([0, 255])]) for _ in range(n)]
        else:  # the struct
            vals = [None if rng.random() < 0.1 else {"n": _int(rng, *I32), "s": _string(rng, _STRINGS)} for _ in range(n)]
        cols[name] = pa.array(vals, t)
    return pa.table(cols)


_INTS = ["i8", "i16", "i32", "i64"]
_NUMS = _INTS + ["f32", "f64", "d52", "d183", "d380", "d3810", "d2010"]


def _pairs(op: str) -> list[str]:
    out = [f"{a} {op} {a}b" for a in ["i8", "i16", "i32", "i64", "f32", "f64", "d52", "d183"]]
    out += [f"i32 {op} i64", f"i8 {op} i32", f"i32 {op} f32", f"i64 {op} f64", f"f32 {op} f64", f"d52 {op} i32", f"i64 {op} d183",
            f"d52 {op} d183", f"d183 {op} d2010", f"d52 {op} f64", f"i32 {op} 3", f"i64 {op} 7", f"d52 {op} 2", f"d183 {op} 1.5",
            f"i32 {op} 0.25", f"f64 {op} 2", f"n {op} NULL", f"d2010 {op} d52", f"d380 {op} 1"]
    return out


CASES: dict[str, list[str]] = {
    "+": _pairs("+") + ["n2 + 10 div n", "(i32 + i32b) - i32b", "i64 * 2 - i64", "i8 + i8 + i8", "i32 + 1 > 0", "i64 - 1 < 0",
                        "i32 - i32b", "i64 - i64b", "d52 - d52b", "i8 * i8b", "i64 * i64b", "d183 * d52", "d52 * 1.5",
                        "f64 - f64b", "d2010 * d52b", "i32 * 100"],
    "/": _pairs("/") + ["i64 / 0", "f64 / 0.0D"],
    "div": ["i32 div i32b", "i64 div i64b", "i8 div i8b", "i32 div 2", "i64 div -1", "i16 div n", "NULL div i32"],
    "%": _pairs("%") + ["mod(i32, n)", "mod(f64, f64b)", "i64 % -1"],
    "unary -": ["-i8", "-i16", "-i32", "-i64", "-f32", "-f64", "-d52", "-d380", "+i32", "+d183", "-(-2147483648)", "-(i32 + 1)"],
    "CAST": [],  # filled below from the cast pairs
    "try_cast": ["try_cast(num_s AS INT)", "try_cast(num_s AS BIGINT)", "try_cast(num_s AS DECIMAL(5,2))", "try_cast(date_s AS DATE)",
                 "try_cast(f64 AS INT)", "try_cast(i64 AS TINYINT)", "try_cast(bool_s AS BOOLEAN)", "try_cast(d3810 AS DECIMAL(10,2))",
                 "try_cast(i32 + 1 AS STRING)"],
    "::": ["i32::bigint", "num_s::int", "d52::string", "date_s::date"],
    "boolean": ["boolean(i32)", "tinyint(i32)", "smallint(i64)", "int(num_s)", "bigint(f64)", "float(d183)", "double(i64)",
                "string(d)", "binary(s)", "date(date_s)", "timestamp(d)"],
    "AND": ["b AND b2", "b OR b2", "NOT b", "b AND i32 + 1 > 0", "b OR i32 + 1 > 0", "(i32 > 0) AND (i32b > 0)", "NOT (i64 < 0)",
            "b AND NULL", "NULL OR b", "i32 <> 0 AND 100 div i32 > 1", "i32 = 0 OR 100 div i32 > 1", "b AND (i32 * i32b > 0)"],
    "IS NULL": ["i32 IS NULL", "s IS NOT NULL", "b IS TRUE", "b IS NOT TRUE", "b IS FALSE", "b IS NOT FALSE", "b IS UNKNOWN",
                "(i32 + i32b) IS NULL", "st IS NULL", "st.n IS NOT NULL"],
    "=": [f"{a} {op} {a}b" for a in ["i8", "i32", "i64", "f32", "f64", "d52", "d183"] for op in ["=", "<"]] + ["b = b2", "b < b2"]
         + ["s = s2", "s < s2", "s >= s2", "s <> s2", "s != s2", "s == s2", "d <= d2", "ts > ts2", "ts = d", "ntz < ts", "d > ntz",
            "i32 = f32", "i64 = f64", "d380 = d3810", "d52 > i64", "f64 <= d183", "f64 <=> f64b", "i32 <=> NULL", "s <=> s2",
            "d IS DISTINCT FROM d2", "f64 IS NOT DISTINCT FROM f64b", "bin = bin", "bin < bin", "d > '2024-01-01'",
            "ts >= '2024-01-01 10:00:00'", "'2000-06-01' < d", "ntz = '2020-02-29T12:00'", "f64 = 0.1", "d52 = 1.5", "i8 > 100",
            "st.n > 0", "st.s = s", "d = date_s"],
    "BETWEEN": ["i32 BETWEEN n AND n2", "f64 BETWEEN -1 AND 1", "d BETWEEN '2000-01-01' AND d2", "s NOT BETWEEN 'a' AND 'm'",
                "d52 BETWEEN 0 AND 500.5", "i64 NOT BETWEEN i8 AND i16"],
    "IN": ["i32 IN (1, 2, 3)", "i32 IN (1, NULL)", "i32 NOT IN (0, 1)", "i32 NOT IN (0, NULL)", "s IN ('a', 'abc', '')", "f64 IN (0.0, 1.5, 2.5)",
           "d52 IN (1.5, 0, i8)", "d IN ('2024-01-06', d2)", "i8 IN (i16, i32, i64)", "f64 IN (f64b, 0.5)", "b IN (TRUE)",
           "n IN (1, 10 div n)", "ts IN (ts2, '2024-01-01 00:00:00')"],
    "CASE": ["CASE WHEN b THEN i32 ELSE i64 END", "CASE WHEN i32 > 0 THEN 'pos' WHEN i32 < 0 THEN 'neg' END",
             "CASE n WHEN 1 THEN 'one' WHEN 2 THEN 'two' ELSE s END", "CASE WHEN b THEN d52 ELSE f64 END", "CASE WHEN b THEN d52 ELSE d183 END",
             "CASE WHEN i32 = 0 THEN 0 ELSE 100 div i32 END", "CASE WHEN b THEN NULL ELSE d END", "CASE i8 WHEN 1 THEN 1.5 WHEN 127 THEN i64 END"],
    "if": ["if(b, i32, i64)", "if(i32 > 0, s, s2)", "if(b, d52, d183)", "if(i32 = 0, NULL, 100 div i32)", "if(NULL, 1, 2)"],
    "LIKE": [f"s LIKE '{p}'" for p in ["abc", "a%", "%b%", "_", "a_c", "%", "", "a\\_c", "a\\%b%", "é_", "%😀", "_%_", "\\\\%"]]
            + [f"like_s LIKE '{p}'" for p in ["a%", "%\\\\\\\\", "1__%", "%_"]] + ["s NOT LIKE 'a%'", "s LIKE 'a!_%' ESCAPE '!'",
                                                                                  "s LIKE 'a!!%' ESCAPE '!'", "s LIKE NULL"],
    "coalesce": ["coalesce(i32, i64)", "coalesce(s, s2, 'x')", "coalesce(i8, d52)", "coalesce(f32, i32)", "coalesce(d, ts)", "coalesce(n)",
                 "coalesce(n, 100 div n)", "coalesce(NULL, d183)"],
    "nvl": ["nvl(i32, 0)", "ifnull(s, '')", "nvl(d52, d3810)"],
    "nullif": ["nullif(i32, 0)", "nullif(s, '')", "nullif(i8, i64)", "nullif(d52, 1.5)", "nullif(f64, f64b)"],
    "nvl2": ["nvl2(i32, s, s2)", "nvl2(s, i8, d52)"],
    "isnull": ["isnull(i32)", "isnull(s)"],
    "isnotnull": ["isnotnull(d)", "isnotnull(f64)"],
    "year": ["year(d)", "year(ts)", "year(ntz)", "year(date_s)"],
    "month": ["month(d)", "month(ts)", "month(date_s)"],
    "day": ["day(d)", "dayofmonth(ts)", "day(ntz)"],
    "dayofyear": ["dayofyear(d)", "dayofyear(ts)"],
    "quarter": ["quarter(d)", "quarter(ntz)"],
    "dayofweek": ["dayofweek(d)", "dayofweek(ts)", "dayofweek(ntz)", "dayofweek(date_s)", "dayofweek(d) <> 7"],
    "weekday": ["weekday(d)", "weekday(ts)"],
    "weekofyear": ["weekofyear(d)", "weekofyear(ts)"],
    "hour": ["hour(ts)", "hour(ntz)", "hour(d)"],
    "minute": ["minute(ts)", "minute(ntz)"],
    "second": ["second(ts)", "second(ntz)"],
    "EXTRACT": [f"extract({f} FROM ts)" for f in ["YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "DOW", "DAYOFWEEK", "DAYOFWEEK_ISO", "DOY",
                                                  "HOUR", "MINUTE", "SECOND"]] + ["extract(YEAR FROM d)", "extract(SECOND FROM ntz)"],
    "date_part": ["date_part('year', d)", "date_part('SECOND', ts)", "date_part('dow', ntz)"],
    "date_add": ["date_add(d, n)", "date_add(d, i16)", "date_add(ts, 1)", "dateadd(d, i32)", "date_add(date_s, 3)"],
    "date_sub": ["date_sub(d, n)", "date_sub(d, i32)"],
    "datediff": ["datediff(d, d2)", "datediff(ts, ts2)", "datediff(d, ts)"],
    "add_months": ["add_months(d, n)", "add_months(d, i16)"],
    "last_day": ["last_day(d)", "last_day(ts)"],
    "make_date": ["make_date(2024, n, n2)", "make_date(i16, 2, 29)", "make_date(year(d), month(d), n)"],
    "unix_date": ["unix_date(d)"],
    "date_from_unix_date": ["date_from_unix_date(i16)", "date_from_unix_date(n)"],
    "unix_timestamp": ["unix_timestamp(ts)", "unix_timestamp(d)", "unix_timestamp(ntz)"],
    "unix_seconds": ["unix_seconds(ts)"],
    "unix_millis": ["unix_millis(ts)"],
    "unix_micros": ["unix_micros(ts)"],
    "trunc": [f"trunc(d, '{u}')" for u in ["YEAR", "yyyy", "YY", "QUARTER", "MONTH", "mm", "MON", "WEEK", "DAY", "Q"]] + ["trunc(ts, 'MM')"],
    "date_trunc": [f"date_trunc('{u}', ts)" for u in ["YEAR", "quarter", "MONTH", "WEEK", "DAY", "DD", "HOUR", "MINUTE", "SECOND",
                                                     "MILLISECOND", "MICROSECOND", "bad"]] + ["date_trunc('MONTH', d)", "date_trunc('HOUR', ntz)"],
    "to_date": ["to_date(date_s)", "to_date(ts)", "to_date(ntz)", "to_date(d)"],
    "date_format": [f"date_format(ts, '{p}')" for p in ["yyyy-MM-dd", "yyyy-MM-dd HH:mm:ss", "yy/M/d", "y", "MMM MMMM", "E EEE EEEE",
                                                       "h:mm a", "hh", "D DDD", "HH:mm:ss.SSS", "S SS SSSSSS",
                                                       "H m s", "dd.MM.yyyy", "yyyy''MM''"]]
                   + ["date_format(d, 'yyyy-MM-dd')", "date_format(ntz, 'yyyy')", "date_format(ts, \"'week' dd\")",
                      "date_format(ts, \"'at' HH 'o''clock'\")"],
    "abs": ["abs(i8)", "abs(i32)", "abs(i64)", "abs(f32)", "abs(f64)", "abs(d52)", "abs(d380)"],
    "ceil": ["ceil(f64)", "ceil(f32)", "ceiling(f64)", "floor(f64)", "ceil(d52)", "floor(d183)", "ceil(i32)", "floor(i8)", "ceil(d3810)"],
    "round": ["round(f64)", "round(f64, 2)", "round(f64, 15)", "round(f32, 1)", "round(d52, 1)", "round(d183)", "round(d3810, 5)",
              "round(d52, -1)", "round(d380, -5)", "round(i32, -1)", "round(i8, -1)", "round(i64, -2)", "round(i16, 2)"],
    "bround": ["bround(f64)", "bround(f64, 2)", "bround(f32, 3)", "bround(d52, 1)", "bround(d183, 0)", "bround(i32, -1)",
               "bround(d52, -1)", "bround(d3810, 9)"],
    "sqrt": ["sqrt(f64)", "sqrt(i32)", "sqrt(d183)", "sqrt(f32)"],
    "sign": ["sign(f64)", "signum(i32)", "sign(d52)"],
    "mod": ["mod(i32, i32b)", "mod(d52, d52b)"],
    "pmod": ["pmod(i32, i32b)", "pmod(i64, i64b)", "pmod(i8, i8b)", "pmod(f64, f64b)", "pmod(i32, n)", "pmod(i16, 7)"],
    "greatest": ["greatest(i32, i64, n)", "greatest(f64, f64b)", "greatest(s, s2)", "greatest(d, d2)", "greatest(i32, d52)"],
    "least": ["least(i32, i64, n)", "least(f64, f64b, 0.0D)", "least(d52, d183)", "least(ts, ts2)"],
    "isnan": ["isnan(f64)", "isnan(f32)", "isnan(i32)"],
    "nanvl": ["nanvl(f64, f64b)", "nanvl(f32, 0.0F)", "nanvl(f64, 1)"],
    "negative": ["negative(i32)", "negative(f64)", "negative(d52)"],
    "positive": ["positive(i64)", "positive(d183)"],
    "length": ["length(s)", "char_length(s)", "character_length(like_s)", "len(s2)", "length(i64)", "length(d52)"],
    "octet_length": ["octet_length(s)"],
    "bit_length": ["bit_length(s)"],
    "upper": ["upper(s)", "ucase(s2)", "upper(like_s)", "upper(concat(s, i32 + 1))"],
    "lower": ["lower(s)", "lcase(s2)", "lower(like_s)"],
    "trim": ["trim(s)", "ltrim(s)", "rtrim(s)", "btrim(s)", "btrim(s, 'xy')", "trim(BOTH 'ax' FROM s)", "trim(LEADING 'a' FROM s)",
             "trim(TRAILING FROM s)", "trim(num_s)"],
    "substring": [f"substring(s, {p})" for p in ["n", "1", "0", "-1", "-3"]]
                 + [f"substring(s, {p}, {q})" for p, q in [("n", "n2"), ("0", "2"), ("-3", "2"), ("-10", "8"), ("2", "-1"), ("n", "2147483647")]]
                 + ["substr(s2, n)", "substring(s FROM 2 FOR 3)", "substring(like_s, n, i8)",
                    "substring(s, 10 div n)", "substring(s, 1, 10 div n)"],
    "left": ["left(s, n)", "left(s2, 2)"],
    "right": ["right(s, n)", "right(s2, 3)"],
    "instr": ["instr(s, 'l')", "instr(s, s2)", "instr(s, '')", "instr(like_s, '%')"],
    "locate": ["locate('l', s)", "locate('l', s, n)", "locate(s2, s, 2)", "locate('', s, n)", "position('b' IN s)", "position(s2, s)"],
    "concat": ["concat(s, 10 div n)", "concat(s, s2)", "concat(s, i32)", "concat('n', i64, d52, d, b)", "concat(ts)", "concat()", "concat(s, NULL)", "s || s2",
               "s || d"],
    "||": ["s || '-' || s2"],
    "concat_ws": ["concat_ws(',', s, s2)", "concat_ws(s2, s, 'x')", "concat_ws('-', i32, d, NULL)", "concat_ws(',')", "concat_ws(NULL, s)"],
    "lpad": ["lpad(s, k)", "lpad(s, k, 'ab')", "lpad(s, 5, s2)", "lpad(s, k, '')"],
    "rpad": ["rpad(s, k)", "rpad(s, k, 'xy')", "rpad(s, 4, s2)"],
    "replace": ["replace(s, 'l')", "replace(s, 'l', 'L')", "replace(s, s2, '*')", "replace(s, '', 'x')"],
    "repeat": ["repeat(s, k)", "repeat(s2, 2)"],
    "startswith": ["startswith(s, 'a')", "startswith(s, s2)"],
    "COLLATE": ["s COLLATE UTF8_LCASE = 'ABC'", "s COLLATE UTF8_LCASE = s2", "s COLLATE UTF8_LCASE < s2", "s2 IN ('A', s COLLATE UTF8_LCASE)",
                "s COLLATE UTF8_BINARY = s2", "contains(s COLLATE UTF8_LCASE, 'A')", "s COLLATE UTF8_LCASE", "upper(s COLLATE UTF8_LCASE)",
                "s COLLATE UTF8_LCASE = s2 COLLATE UTF8_BINARY"],
    "endswith": ["endswith(s, 'c')", "endswith(s, s2)"],
    "contains": ["contains(s, 'l')", "contains(s, s2)"],
    "ascii": ["ascii(s)", "ascii(s2)"],
    "chr": ["chr(i16)", "char(n)", "chr(i64)"],
    "md5": ["md5(s)", "md5(bin)"],
    "sha1": ["sha1(s)", "sha(bin)"],
    "sha2": ["sha2(s, 256)", "sha2(bin, 0)"],
    "integer literals": ["2147483647 + 0", "-2147483648", "2147483648", "-9223372036854775808", "9223372036854775808", "5L + i32",
                         "5Y + i8", "5S", "-5 * i32"],
    "decimal literals": ["1.50 + d52", "0.000", ".5", "1.", "123.456BD", "-0.5 * d183", "99999999999999999999.5"],
    "double literals": ["1e3 + i32", "1.5D * f64", "1.5F", "-1.0E-5", "2.5e0"],
    "string literals": ["concat('a', \"b\")", "'it''s'", "'a' 'b'", "'tab\\tx'", "'back\\\\slash'", "'q\\'q'", "length('a\\nb')"],
    "DATE '...'": ["DATE '2024-02-29'", "d > DATE'2000-01-01'", "TIMESTAMP '2024-01-01 10:00:00'", "ts > TIMESTAMP'2024-01-01T10:00:00Z'",
                   "TIMESTAMP '2024-01-01 10:00:00+05:30'", "TIMESTAMP_NTZ '2024-01-01 10:00'", "TIMESTAMP '1900-01-01 00:00:00.5'",
                   "ntz < TIMESTAMP_NTZ '1970-01-01 00:00:00'", "TIMESTAMP '2024-1-1 1:2:3'"],
    "TRUE": ["TRUE", "FALSE AND b", "NULL", "coalesce(NULL, i32)", "i32 + NULL"],
    "column references": ["I32 + 1", "st.n", "st.s", "ST.N * 2", "`i64`"],
    "[]": ["arr[0]", "arr[1] + 1", "arr[n]", "arr[i8]", "coalesce(arr[0], -1)", "arr IS NULL"],
}

# every cast pair the layer accepts, from a column of the source type
_SOURCE = {"void": "NULL", "boolean": "b", "tinyint": "i8", "smallint": "i16", "int": "i32", "bigint": "i64", "float": "f32",
           "double": "f64", "decimal": "d183", "string": "s", "binary": "bin", "date": "d", "timestamp": "ts", "timestamp_ntz": "ntz"}
_STRING_SOURCE = {"tinyint": "num_s", "smallint": "num_s", "int": "num_s", "bigint": "num_s", "decimal": "num_s",
                  "boolean": "bool_s", "date": "date_s", "binary": "s", "timestamp": "'2024-01-01 10:00:00'",
                  "timestamp_ntz": "'2024-06-01T12:30:00.25'"}
_TARGET = {"decimal": ["DECIMAL(5,2)", "DECIMAL(38,10)", "DECIMAL(10,0)", "DECIMAL(2,1)"], "timestamp_ntz": ["TIMESTAMP_NTZ"],
           "string": ["STRING"], "binary": ["BINARY"]}


def cast_cases(pairs: dict[tuple[str, str], str]) -> list[str]:
    out = []
    for (src, dst) in sorted(pairs):
        value = _STRING_SOURCE.get(dst, "s") if src == "string" else _SOURCE[src]
        for target in _TARGET.get(dst, [dst.upper()]):
            out.append(f"CAST({value} AS {target})")
        if src == "decimal":
            out.append(f"CAST(d3810 AS {_TARGET.get(dst, [dst.upper()])[0]})")
            out.append(f"CAST(d52 AS {_TARGET.get(dst, [dst.upper()])[-1]})")
        if src == "double":
            out.append(f"CAST(f64b AS {_TARGET.get(dst, [dst.upper()])[0]})")
    if ("double", "string") in pairs:
        out.extend(FLOAT_TEXT_CASES)
    return out


# ---------------------------------------------------------------- CAST of a double or float to a string
# Java's Double.toString / Float.toString at the edges of its notations: plain from 1e-3 up to below 1e7,
# computerized scientific outside; NaN, infinities, -0.0, subnormals, the largest values, integers past
# 2^53 and 2^24, and values whose Java 17 digits are not the shortest ones (2.0E23 style).
_DOUBLE_TEXTS = ["0.0D", "-0.0D", "1.0D", "1.0E7D", "9999999.0D", "9999999.999999998D", "1.0000000000000002E7D", "0.001D",
                 "9.999999999999998E-4D", "0.0010000000000000002D", "1.0E-4D", "4.9E-324D", "-4.9E-324D", "2.2250738585072014E-308D",
                 "2.225073858507201E-308D", "1.7976931348623157E308D", "9.007199254740993E15D", "1.8446744073709552E19D",
                 "9.223372036854775807E18D", "1.0E21D", "1.0E22D", "1.0E23D", "2.0E23D", "8.41E21D", "5.0E-324D", "0.1D + 0.2D",
                 "1.0D / 3.0D", "2.0D / 3.0D", "100.0D", "123456.789D", "1234567.0D", "12345678.0D", "-1.5E-7D", "4.35D", "2.0E-3D",
                 "1.0E308D * 10.0D", "-1.0E308D * 10.0D", "1.0E308D * 10.0D - 1.0E308D * 10.0D"]
_FLOAT_TEXTS = ["0.0F", "-0.0F", "1.0E7F", "9999999.0F", "0.001F", "9.999999E-4F", "1.0E-4F", "0.1F", "1.17549435E-38F",
                "1.1754942E-38F", "1.4E-45F", "3.4028234E38F", "1.6777217E7F", "1.0E10F", "3.3333333F", "123456.79F", "2.0E-3F",
                "CAST(0.1D AS FLOAT)", "CAST(1.0E-45D AS FLOAT)", "CAST(3.4028234663852886E38D AS FLOAT)",
                "CAST(1.0E308D * 10.0D - 1.0E308D * 10.0D AS FLOAT)", "CAST(-1.0E308D * 10.0D AS FLOAT)"]
FLOAT_TEXT_CASES = ([f"CAST({v} AS STRING)" for v in _DOUBLE_TEXTS + _FLOAT_TEXTS]
                    + ["concat('x', f64)", "f32 || ''", "CAST(f64 * 1.0E7D AS STRING)", "CAST(f32 * 1.0E-3F AS STRING)",
                       "CAST(CAST(i64 AS DOUBLE) AS STRING)", "CAST(CAST(i32 AS FLOAT) AS STRING)"])


# ---------------------------------------------------------------- collated strings (a table of their own)

def _lcase_meta(path: str) -> dict:
    return {b"delta.collations": ('{"%s":"spark.UTF8_LCASE"}' % path).encode()}


# Columns under UTF8_LCASE (lc, lc2, the struct's f, the array's elements) beside a UTF8_BINARY one (s):
# lakelog reads their collations from the fields' __COLLATIONS, Spark from the DataFrame's collated types.
COLLATED_COLUMNS = [
    pa.field("lc", pa.string(), metadata=_lcase_meta("lc")), pa.field("lc2", pa.string(), metadata=_lcase_meta("lc2")),
    pa.field("s", pa.string()), pa.field("n", pa.int32()),
    pa.field("lst", pa.struct([pa.field("f", pa.string(), metadata=_lcase_meta("f"))])),
    pa.field("larr", pa.list_(pa.string()), metadata=_lcase_meta("larr.element")),
]
# Words whose case variants UTF8_LCASE equates, and the characters it treats specially: İ (lower-cased to
# i + U+0307), the sigmas (ς compares as σ), the Kelvin and Ohm signs, ß, and every character whose case
# mapping differs between Spark and DuckDB.
_LCASE_WORDS = ["abc", "b", "ab", "zz", "straße", "strasse", "i̇", "i", "ı", "İstanbul", "σας", "ΣΑΣ", "ς", "kelvin", "\u212a",
                "\u2126", "ω", "ǆ", "ǅ", "Ǆ", "", " ", "a b", "é", "e\u0301", "😀"]


def _case_variant(rng: random.Random, word: str) -> str:
    return "".join(c.upper() if rng.random() < 0.5 and len(c.upper()) == 1 else c for c in word)


def _lcase_string(rng: random.Random) -> str | None:
    r = rng.random()
    if r < 0.1:
        return None
    if r < 0.2:
        return "".join(rng.choice(_SPECIAL_CHARS + ["a", "Σ", "ς", "İ", "i"]) for _ in range(rng.randint(1, 3)))
    return _case_variant(rng, rng.choice(_LCASE_WORDS))


def collated_table(rng: random.Random, n: int) -> pa.Table:
    """``n`` random rows over ``COLLATED_COLUMNS``: case variants of the same words, so that UTF8_LCASE
    equates many of them."""
    cols = [
        [_lcase_string(rng) for _ in range(n)], [_lcase_string(rng) for _ in range(n)], [_lcase_string(rng) for _ in range(n)],
        [None if rng.random() < 0.1 else rng.randint(-2, 4) for _ in range(n)],
        [None if rng.random() < 0.1 else {"f": _lcase_string(rng)} for _ in range(n)],
        [None if rng.random() < 0.1 else [_lcase_string(rng) for _ in range(rng.randint(1, 2))] for _ in range(n)],
    ]
    return pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(cols, COLLATED_COLUMNS)], schema=pa.schema(COLLATED_COLUMNS))


# Expressions over collated_table: each must give Spark's value and type, or fail where Spark's analysis
# fails (a comparison of two columns' different collations: COLLATION_MISMATCH).
COLLATION_CASES = [
    # comparisons under UTF8_LCASE, with literals, columns of the same collation, struct fields and elements
    "lc = 'ABC'", "lc = 'abc'", "'İSTANBUL' = lc", "lc = 'ΣΑΣ'", "lc = lc2", "lc <> lc2", "lc < lc2", "lc <= 'M'", "lc > 'Z'",
    "lc >= lc2", "lc <=> lc2", "lc <=> NULL", "lc = NULL", "lc IN ('A', 'STRASSE', 'İ', 'ς')", "lc IN (lc2, 'b')", "lc NOT IN ('ab', 'Ǆ')",
    "'B' IN (lc, 'x')", "lc BETWEEN 'a' AND 'M'", "lc NOT BETWEEN lc2 AND 'zz'", "lst.f = 'AB'", "lst.f = lc", "larr[0] = lc2",
    "larr[0] IN ('ABC', 'b')",
    # the collation of results: CASE, IF, COALESCE, NULLIF, string functions keep it; new strings are UTF8_BINARY
    "CASE WHEN lc = 'ABC' THEN 'm' ELSE 'n' END", "CASE lc WHEN 'AB' THEN 1 WHEN 'B' THEN 2 ELSE 0 END", "CASE WHEN n > 0 THEN lc ELSE 'Z' END = 'z'",
    "if(n > 0, lc, lc2) = 'AB'", "coalesce(lc, 'ABC') = 'abc'", "nvl(lc, lc2) < 'C'", "nullif(lc, 'ABC')", "nullif('ABC', lc)",
    "upper(lc)", "upper(lc) = lc2", "lower(lc) = 'ABC'", "concat(lc, 'X') = concat(lc2, 'x')", "lc || '!' = 'ABC!'",
    "substring(lc, 1, 2) = 'AB'", "left(lc, 1) = right(lc2, 1)", "trim(lc) = lc2", "lpad(lc, 4, 'x') = 'XABC'", "repeat(lc, 2) = 'ABAB'",
    "concat_ws('-', lc, 'a') = 'ABC-A'", "md5(lc) = md5(lc2)", "CAST(lc AS STRING) = 'ABC'", "CAST(n AS STRING) = lc", "string(n) = lc",
    "lc", "lst", "larr", "coalesce(lc, 'x')",
    # searches under UTF8_LCASE
    "contains(lc, 'B')", "contains(lc, lc2)", "contains('xABCx', lc)", "startswith(lc, 'A')", "startswith(lc, lc2)", "endswith(lc, 'C')",
    "endswith(lc, 'Σ')", "contains(lc, 'I')", "instr(lc, 'B')", "instr(lc, lc2)", "locate('B', lc)", "locate('S', lc, 2)",
    "position('C' IN lc)", "instr(lc, 'i')",
    # COLLATE: explicit wins; a literal takes the column's
    "lc COLLATE UTF8_BINARY = 'abc'", "lc = s COLLATE UTF8_LCASE", "s COLLATE UTF8_LCASE = 'ABC'", "'ABC' COLLATE UTF8_LCASE = s",
    "lc COLLATE UTF8_BINARY IN ('abc', 'ABC')", "CAST(s AS STRING) = 'abc'", "s = 'ABC'",
    # refused by both: two columns' different collations (Spark: COLLATION_MISMATCH / INDETERMINATE_COLLATION_IN_EXPRESSION)
    "lc = s", "s < lc", "lc IN (s, 'a')", "s IN (lc)", "lst.f = s", "contains(lc, s)", "instr(s, lc)", "CAST(lc AS STRING) = lc2",
    "coalesce(lc, s) = 'a'", "CASE WHEN n > 0 THEN lc ELSE s END = 'a'", "nullif(lc, s)", "lc BETWEEN s AND 'z'",
    "lc COLLATE UTF8_LCASE = s COLLATE UTF8_BINARY",
]
# Operations Spark evaluates under UTF8_LCASE that lakelog refuses by name (UnsupportedExpressionError).
COLLATION_REFUSED = ["replace(lc, 'A', 'x')", "lc LIKE 'a%'", "btrim(lc, 'A')", "TRIM(BOTH 'A' FROM lc)", "upper(lc) LIKE 'A%'"]

"""JSON text to Variant bytes and back, as Spark 4's ``parse_json`` and ``to_json`` do it.

parse_json follows Spark's VariantBuilder over a default Jackson parser: integers to the smallest of
int8/16/32/64, then (beyond int64, or written with a '.') a decimal of up to 38 digits and scale 38,
otherwise (an exponent, more digits) a double; duplicate keys and lone surrogates are refused; text
after the first complete value is ignored, as Jackson does, except that a top-level number or literal
must end at a delimiter. to_json writes numbers, dates, timestamps, binary and strings as Spark's
``Variant.toJson`` (Java 17 ``Double.toString``, ``BigDecimal.stripTrailingZeros().toPlainString()``,
ISO dates, ``yyyy-MM-dd HH:mm:ss[.f]+00:00`` timestamps, base64 binary, Jackson string escapes).
"""

from __future__ import annotations

import base64
import json
import math
import re
from decimal import Decimal

from ..errors import VariantError
from . import codec as c
from .java_float import double_to_string, float_to_string

# Jackson's default StreamReadConstraints
_MAX_DEPTH = 1000
_MAX_NUMBER_LEN = 1000
_MAX_STRING_LEN = 20_000_000
_MAX_NAME_LEN = 50_000
_WS = re.compile(r"[ \t\n\r]*")
_DECIMAL_TEXT = re.compile(r"-?[0-9.]+\Z")


class _Num:
    """A JSON number kept as its text (typed later as Spark types it)."""

    __slots__ = ("is_int", "text")

    def __init__(self, text: str, is_int: bool):
        # Jackson's 1000-digit limit: integers count their digits; for other numbers this count (digits
        # after the first) matches Jackson's except right at the limit when both '.' and 'e' occur
        digits = sum(ch.isdigit() for ch in text) - (0 if is_int else 1)
        if digits > _MAX_NUMBER_LEN:
            raise VariantError(f"JSON number of {len(text)} characters has more than {_MAX_NUMBER_LEN} digits "
                               "(Jackson's limit Spark's parse_json applies); store it as a string.")
        self.text, self.is_int = text, is_int


class _Pairs(list):
    """A JSON object as its (key, value) pairs in document order (duplicates kept, refused later)."""


def _reject_constant(name: str):
    raise VariantError(f"Invalid JSON: {name} is not a JSON value (non-numeric numbers are not allowed).")


_DECODER = json.JSONDecoder(parse_float=lambda s: _Num(s, False), parse_int=lambda s: _Num(s, True),
                            parse_constant=_reject_constant, object_pairs_hook=_Pairs, strict=True)


def _number(b: c.VariantBuilder, n: _Num) -> bytes:
    text = n.text
    if n.is_int:
        i = int(text)
        if c._INT64_MIN <= i <= c._INT64_MAX:
            return c.int_value(i)
    if _DECIMAL_TEXT.match(text):
        sign, digits, exp = Decimal(text).as_tuple()
        if -exp <= c.MAX_DECIMAL16 and len(digits) <= c.MAX_DECIMAL16:
            unscaled = int("".join(map(str, digits)))
            return c.decimal_value(-unscaled if sign else unscaled, -exp)
    return c.double_value(float(text))


def _string(s: str, what: str = "string") -> bytes:
    if len(s) > (_MAX_NAME_LEN if what == "object key" else _MAX_STRING_LEN):
        raise VariantError(f"JSON {what} of {len(s)} characters is longer than Jackson's limit that Spark's "
                           "parse_json applies.")
    return c.utf8(s, what)


def _build(b: c.VariantBuilder, node, depth: int) -> bytes:
    t = type(node)
    if t is str:
        if len(node) > _MAX_STRING_LEN:
            _string(node)
        return c.string_value(c.utf8(node))
    if t is _Num:
        return _number(b, node)
    if t is _Pairs:
        if depth >= _MAX_DEPTH:
            raise VariantError(f"JSON nesting deeper than {_MAX_DEPTH} levels (Jackson's limit Spark applies).")
        fields = []
        add_key = b.add_key
        for k, v in node:
            if len(k) > _MAX_NAME_LEN:
                _string(k, "object key")
            fields.append((k, add_key(k), _build(b, v, depth + 1)))
        return b.object_value(fields)
    if t is list:
        if depth >= _MAX_DEPTH:
            raise VariantError(f"JSON nesting deeper than {_MAX_DEPTH} levels (Jackson's limit Spark applies).")
        return b.array_value([_build(b, e, depth + 1) for e in node])
    if node is None:
        return c.NULL_VALUE
    return _TRUE if node else _FALSE


_TRUE, _FALSE = c.primitive(c.TRUE), c.primitive(c.FALSE)


def _is_java_identifier_part(ch: str) -> bool:
    return ch.isalnum() or ch in "_$" or ("a" + ch).isidentifier()


def parse_json(text: str) -> tuple[bytes, bytes]:
    """(metadata, value) of JSON text, byte-identical to Spark's ``parse_json``. Invalid JSON, a
    duplicate key or a lone surrogate raises VariantError."""
    if not isinstance(text, str):
        raise VariantError(f"parse_json takes a str, not {type(text).__name__}.")
    start = _WS.match(text).end()
    if start == len(text):
        raise VariantError("Invalid JSON: the text is empty (Spark's parse_json: 'Unexpected null token'); "
                           "pass a JSON value, e.g. 'null'.")
    try:
        node, end = _parse(text, start)
    except json.JSONDecodeError as e:
        raise VariantError(f"Invalid JSON (Spark's parse_json refuses it too): {e.msg} at line {e.lineno} "
                           f"column {e.colno}; pass well-formed JSON text.") from None
    except RecursionError:
        raise VariantError("JSON nesting too deep to parse in Python.") from None
    # Jackson reads past a top-level number or literal to see where it ends: there it wants a delimiter
    if end < len(text) and not isinstance(node, (str, list, _Pairs)):
        ch = text[end]
        bad = ch not in " \t\n\r" if isinstance(node, _Num) else (
            ch >= "0" and ch not in "]}" and _is_java_identifier_part(ch))
        if bad:
            raise VariantError(f"Invalid JSON: unexpected character {ch!r} after the value at offset {end}; "
                               "pass one JSON value.")

    def build() -> tuple[bytes, bytes]:  # a fresh builder per attempt: deep_call may run it twice
        b = c.VariantBuilder()
        value = _build(b, node, 0)
        return b.metadata(), value

    try:
        return c.deep_call(build)
    except RecursionError:
        raise VariantError("JSON nesting too deep to build in Python.") from None


_STRING_LITERAL = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


def _parse(text: str, start: int):
    try:
        return _DECODER.raw_decode(text, start)
    except RecursionError:
        # only nesting within Jackson's limit is retried with a raised recursion limit
        depth, deepest = 0, 0
        for ch in _STRING_LITERAL.sub("", text[start:]):
            if ch in "[{":
                depth += 1
                deepest = max(deepest, depth)
            elif ch in "]}":
                depth -= 1
        if deepest > _MAX_DEPTH:
            raise VariantError(f"JSON nesting deeper than {_MAX_DEPTH} levels (Jackson's limit Spark applies).") from None
        return c.deep_call(_DECODER.raw_decode, text, start)


# ---- to_json --------------------------------------------------------------------------------------

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f"\\]')


def _escape(ch: re.Match) -> str:
    s = ch.group()
    return _ESCAPES.get(s) or f"\\u{ord(s):04X}"


def quote(s: str) -> str:
    """A JSON string literal as Jackson's JsonGenerator.writeString writes it."""
    return '"' + _NEEDS_ESCAPE.sub(_escape, s) + '"'


def _days_to_civil(z: int) -> tuple[int, int, int]:
    """Proleptic Gregorian (year, month, day) of days since 1970-01-01, for any int (Java's LocalDate range)."""
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (m <= 2), m, d


def iso_date(days: int) -> str:
    """Java's LocalDate.toString of an epoch day."""
    y, m, d = _days_to_civil(days)
    if abs(y) < 1000:
        year = ("-" if y < 0 else "") + f"{abs(y):04d}"
    else:
        year = ("+" if y > 9999 else "") + str(y)
    return f"{year}-{m:02d}-{d:02d}"


def iso_timestamp(micros: int, offset: bool, nanos: int | None = None) -> str:
    """Spark's TIMESTAMP(_NTZ)_FORMATTER text of a UTC instant: ``yyyy-MM-dd HH:mm:ss[.fraction]``
    (fraction without trailing zeros) and ``+00:00`` when offset."""
    if nanos is None:
        days, rem = divmod(micros, 86_400_000_000)
        secs, frac_ns = divmod(rem, 1_000_000)
        frac_ns *= 1000
    else:
        days, rem = divmod(nanos, 86_400_000_000_000)
        secs, frac_ns = divmod(rem, 1_000_000_000)
    text = f"{iso_date(days)} {secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}"
    if frac_ns:
        text += "." + f"{frac_ns:09d}".rstrip("0")
    return text + ("+00:00" if offset else "")


def plain_decimal(unscaled: int, scale: int) -> str:
    """BigDecimal.stripTrailingZeros().toPlainString() of unscaled x 10^-scale."""
    while scale > 0 and unscaled % 10 == 0:
        unscaled //= 10
        scale -= 1
    if unscaled == 0:
        return "0"
    sign = "-" if unscaled < 0 else ""
    digits = str(abs(unscaled))
    if scale == 0:
        return sign + digits
    digits = digits.rjust(scale + 1, "0")
    return f"{sign}{digits[:-scale]}.{digits[-scale:]}"


def _scalar_json(tid: int, x) -> str:
    if tid == c.NULL:
        return "null"
    if tid in (c.TRUE, c.FALSE):
        return "true" if tid == c.TRUE else "false"
    if tid in (c.INT1, c.INT2, c.INT4, c.INT8):
        return str(x)
    if tid == c.LONG_STR:
        return quote(c._text(x))
    if tid in (c.DOUBLE, c.FLOAT):
        if not math.isfinite(x):
            return '"' + ("NaN" if math.isnan(x) else "Infinity" if x > 0 else "-Infinity") + '"'
        return float_to_string(x) if tid == c.FLOAT else double_to_string(x)
    if tid in (c.DECIMAL4, c.DECIMAL8, c.DECIMAL16):
        return plain_decimal(*x)
    if tid == c.DATE:
        return '"' + iso_date(x) + '"'
    if tid in (c.TIMESTAMP, c.TIMESTAMP_NTZ):
        return '"' + iso_timestamp(x, tid == c.TIMESTAMP) + '"'
    if tid in (c.TIMESTAMP_NANOS, c.TIMESTAMP_NTZ_NANOS):  # Spark has no such type; same layout
        return '"' + iso_timestamp(0, tid == c.TIMESTAMP_NANOS, nanos=x) + '"'
    if tid == c.BINARY:
        return '"' + base64.b64encode(bytes(x)).decode("ascii") + '"'
    if tid == c.UUID:
        return '"' + str(x) + '"'
    if tid == c.TIME_NTZ:  # Spark has no such type: ISO local time
        s, us = divmod(x, 1_000_000)
        text = f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"
        return '"' + (text + "." + f"{us:06d}".rstrip("0") if us else text) + '"'
    raise c._bad(f"unknown primitive type id {tid}")  # pragma: no cover - scalar() refuses it first


def _to_json(v: bytes, pos: int, keys: list[str], out: list[str]) -> None:
    c._need(v, pos + 1)
    basic = v[pos] & 3
    if basic == c.OBJECT:
        out.append("{")
        for i, (k, p) in enumerate(c.object_fields(v, pos, keys)):
            if i:
                out.append(",")
            out.append(quote(k))
            out.append(":")
            _to_json(v, p, keys, out)
        out.append("}")
    elif basic == c.ARRAY:
        out.append("[")
        for i, p in enumerate(c.array_elements(v, pos)):
            if i:
                out.append(",")
            _to_json(v, p, keys, out)
        out.append("]")
    else:
        tid, x, _ = c.scalar(v, pos)
        out.append(_scalar_json(tid, x))


def to_json(metadata: bytes, value: bytes) -> str:
    """JSON text of a variant as Spark's ``to_json`` writes it with session time zone UTC. Malformed
    bytes raise VariantError."""
    keys = c.read_metadata(metadata)

    def write() -> str:  # a fresh buffer per attempt: deep_call may run it twice
        out: list[str] = []
        _to_json(bytes(value), 0, keys, out)
        return "".join(out)

    try:
        return c.deep_call(write)
    except RecursionError:
        raise VariantError("Variant nesting too deep to write as JSON in Python.") from None

"""The Parquet Variant binary encoding (parquet-format VariantEncoding.md): Python objects to
(metadata, value) bytes and back.

Bytes are laid out as Spark 4's ``VariantBuilder`` lays them out, so equal inputs give byte-identical
variants: one dictionary per variant with keys in first-seen order (``sorted_strings`` unset), the
smallest offset/id widths, object values in insertion order with field ids and offsets sorted by key
(Java ``String.compareTo``, i.e. UTF-16 code units, as Spark sorts).
"""

from __future__ import annotations

import datetime as _dt
import struct
import sys
import uuid as _uuid
from decimal import Decimal
from itertools import pairwise

from ..errors import VariantError

# basic types (low 2 bits of the value header byte)
PRIMITIVE, SHORT_STR, OBJECT, ARRAY = 0, 1, 2, 3
# primitive type ids
NULL, TRUE, FALSE, INT1, INT2, INT4, INT8, DOUBLE = 0, 1, 2, 3, 4, 5, 6, 7
DECIMAL4, DECIMAL8, DECIMAL16, DATE, TIMESTAMP, TIMESTAMP_NTZ, FLOAT = 8, 9, 10, 11, 12, 13, 14
BINARY, LONG_STR, TIME_NTZ, TIMESTAMP_NANOS, TIMESTAMP_NTZ_NANOS, UUID = 15, 16, 17, 18, 19, 20

MAX_SHORT_STR = 63
MAX_DECIMAL4, MAX_DECIMAL8, MAX_DECIMAL16 = 9, 18, 38
# Spark's VariantUtil.SIZE_LIMIT outside its own tests: larger values or metadata are refused
SIZE_LIMIT = 128 * 1024 * 1024
EMPTY_METADATA = b"\x01\x00\x00"
NULL_VALUE = b"\x00"

_EPOCH_DATE = _dt.date(1970, 1, 1)
_EPOCH_NAIVE = _dt.datetime(1970, 1, 1)
_EPOCH_UTC = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_MICRO = _dt.timedelta(microseconds=1)
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


class _VariantNullType:
    """The Variant null as a top-level value (``VARIANT_NULL``), distinct from a SQL NULL (``None``)
    where both can occur: in ``from_python`` / ``to_python`` rows."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "VARIANT_NULL"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self):
        return (_VariantNullType, ())


VARIANT_NULL = _VariantNullType()


def _int_size(n: int) -> int:
    """The smallest unsigned width (1, 2, 3 or 4 bytes) holding n, as Spark's getIntegerSize."""
    return 1 if n <= 0xFF else 2 if n <= 0xFFFF else 3 if n <= 0xFFFFFF else 4


def utf16_key(key: str) -> bytes:
    """Sort key ordering strings as Java's ``String.compareTo`` (UTF-16 code units)."""
    return key.encode("utf-16-be", "surrogatepass")


def utf8(text: str, what: str = "string") -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise VariantError(f"Variant {what} {text!r} is not valid Unicode (a lone surrogate at {e.start}); "
                           "Variant strings must be UTF-8: pass well-formed text.") from None


# ---- building values -------------------------------------------------------------------------------

def primitive(type_id: int, payload: bytes = b"") -> bytes:
    return bytes((type_id << 2,)) + payload


def int_value(n: int) -> bytes:
    """The smallest of int8/16/32/64 holding n (Spark's appendLong)."""
    if -0x80 <= n <= 0x7F:
        return primitive(INT1, n.to_bytes(1, "little", signed=True))
    if -0x8000 <= n <= 0x7FFF:
        return primitive(INT2, n.to_bytes(2, "little", signed=True))
    if -0x80000000 <= n <= 0x7FFFFFFF:
        return primitive(INT4, n.to_bytes(4, "little", signed=True))
    return primitive(INT8, n.to_bytes(8, "little", signed=True))


def decimal_value(unscaled: int, scale: int) -> bytes:
    """decimal4/8/16 as Spark's appendDecimal picks it: by the value's own precision and scale."""
    precision = len(str(abs(unscaled)))
    if scale < 0 or scale > MAX_DECIMAL16 or precision > MAX_DECIMAL16:
        raise VariantError(f"Decimal with unscaled value {unscaled} and scale {scale} does not fit a Variant "
                           "decimal (precision and scale at most 38, scale not negative).")
    if scale <= MAX_DECIMAL4 and precision <= MAX_DECIMAL4:
        return primitive(DECIMAL4, bytes((scale,)) + unscaled.to_bytes(4, "little", signed=True))
    if scale <= MAX_DECIMAL8 and precision <= MAX_DECIMAL8:
        return primitive(DECIMAL8, bytes((scale,)) + unscaled.to_bytes(8, "little", signed=True))
    return primitive(DECIMAL16, bytes((scale,)) + unscaled.to_bytes(16, "little", signed=True))


def unscaled(d: Decimal, scale: int) -> int:
    """The exact unscaled integer of a finite Decimal at a scale at least its own."""
    sign, digits, exp = d.as_tuple()
    n = int("".join(map(str, digits))) * 10 ** (exp + scale)
    return -n if sign else n


def string_value(data: bytes) -> bytes:
    if len(data) <= MAX_SHORT_STR:
        return bytes(((len(data) << 2) | SHORT_STR,)) + data
    return primitive(LONG_STR, len(data).to_bytes(4, "little")) + data


def binary_value(data: bytes) -> bytes:
    return primitive(BINARY, len(data).to_bytes(4, "little")) + bytes(data)


def double_value(x: float) -> bytes:
    return primitive(DOUBLE, struct.pack("<d", x))


def float_value(x: float) -> bytes:
    return primitive(FLOAT, struct.pack("<f", x))


def _check_size(n: int) -> None:
    if n > SIZE_LIMIT:
        raise VariantError(f"Variant of {n} bytes exceeds the size limit of {SIZE_LIMIT} bytes "
                           "(Spark's VARIANT_SIZE_LIMIT); store smaller values.")


class VariantBuilder:
    """Builds one variant: the key dictionary (first-seen order) and values from their parts."""

    __slots__ = ("_ids", "_keys")

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._keys: list[bytes] = []

    def add_key(self, key: str) -> int:
        kid = self._ids.get(key)
        if kid is None:
            kid = self._ids[key] = len(self._keys)
            self._keys.append(utf8(key, "object key"))
        return kid

    def object_value(self, fields: list[tuple[str, int, bytes]]) -> bytes:
        """An object from (key, id, value) in the order the values are laid out; ids and offsets are
        written sorted by key. A repeated key raises VariantError (Spark's VARIANT_DUPLICATE_KEY)."""
        offsets, pos = [], 0
        for _, _, v in fields:
            offsets.append(pos)
            pos += len(v)
        keys = [f[0] for f in fields]
        # below U+D800 code point order is UTF-16 order: sort the str; otherwise by UTF-16 units
        sort_key = keys.__getitem__ if all(not k or max(k) < "\ud800" for k in keys) \
            else (lambda i: utf16_key(keys[i]))
        order = sorted(range(len(fields)), key=sort_key)
        for a, b in pairwise(order):
            if fields[a][0] == fields[b][0]:
                raise VariantError(f"Duplicate object key {fields[a][0]!r}: a Variant object's keys must be "
                                   "unique (Spark's VARIANT_DUPLICATE_KEY); remove the repeated key.")
        n = len(fields)
        large = n > 0xFF
        id_size = _int_size(max((f[1] for f in fields), default=0))
        off_size = _int_size(pos)
        head = bytes(((int(large) << 6) | ((id_size - 1) << 4) | ((off_size - 1) << 2) | OBJECT,))
        parts = [head, n.to_bytes(4 if large else 1, "little")]
        parts.extend(fields[i][1].to_bytes(id_size, "little") for i in order)
        parts.extend(offsets[i].to_bytes(off_size, "little") for i in order)
        parts.append(pos.to_bytes(off_size, "little"))
        parts.extend(v for _, _, v in fields)
        out = b"".join(parts)
        _check_size(len(out))
        return out

    @staticmethod
    def array_value(elements: list[bytes]) -> bytes:
        n = len(elements)
        large = n > 0xFF
        size = sum(len(e) for e in elements)
        off_size = _int_size(size)
        parts = [bytes(((int(large) << 4) | ((off_size - 1) << 2) | ARRAY,)), n.to_bytes(4 if large else 1, "little")]
        pos = 0
        for e in elements:
            parts.append(pos.to_bytes(off_size, "little"))
            pos += len(e)
        parts.append(pos.to_bytes(off_size, "little"))
        parts.extend(elements)
        out = b"".join(parts)
        _check_size(len(out))
        return out

    def metadata(self) -> bytes:
        """The metadata as Spark's VariantBuilder.result writes it (offset width from the larger of the
        strings' total size and the key count)."""
        total = sum(len(k) for k in self._keys)
        n = len(self._keys)
        _check_size(max(total, n))
        size = _int_size(max(total, n))
        parts = [bytes((1 | ((size - 1) << 6),)), n.to_bytes(size, "little")]
        pos = 0
        for k in self._keys:
            parts.append(pos.to_bytes(size, "little"))
            pos += len(k)
        parts.append(pos.to_bytes(size, "little"))
        parts.extend(self._keys)
        out = b"".join(parts)
        _check_size(len(out))
        return out

    # -- Python objects

    def append(self, obj: object) -> bytes:
        """The value bytes of a Python object (see ``encode``)."""
        if obj is None or obj is VARIANT_NULL:
            return NULL_VALUE
        if obj is True or obj is False:
            return primitive(TRUE if obj else FALSE)
        if isinstance(obj, int) and not isinstance(obj, bool):
            if _INT64_MIN <= obj <= _INT64_MAX:
                return int_value(obj)
            if len(str(abs(obj))) <= MAX_DECIMAL16:
                return decimal_value(obj, 0)
            raise VariantError(f"Integer {obj} has more than 38 digits: no Variant integer or decimal holds it; "
                               "pass it as a float or a string.")
        if isinstance(obj, float):
            return double_value(obj)
        if isinstance(obj, str):
            return string_value(utf8(obj))
        if isinstance(obj, Decimal):
            return self._decimal(obj)
        if isinstance(obj, (bytes, bytearray, memoryview)):
            return binary_value(bytes(obj))
        if isinstance(obj, _dt.datetime):
            if obj.tzinfo is not None and obj.utcoffset() is not None:
                return primitive(TIMESTAMP, ((obj - _EPOCH_UTC) // _MICRO).to_bytes(8, "little", signed=True))
            return primitive(TIMESTAMP_NTZ, ((obj - _EPOCH_NAIVE) // _MICRO).to_bytes(8, "little", signed=True))
        if isinstance(obj, _dt.date):
            return primitive(DATE, (obj - _EPOCH_DATE).days.to_bytes(4, "little", signed=True))
        if isinstance(obj, _dt.time):
            if obj.tzinfo is not None:
                raise VariantError(f"Time {obj} has a time zone; a Variant time has none: pass a naive time.")
            micros = ((obj.hour * 60 + obj.minute) * 60 + obj.second) * 1_000_000 + obj.microsecond
            return primitive(TIME_NTZ, micros.to_bytes(8, "little", signed=True))
        if isinstance(obj, _uuid.UUID):
            return primitive(UUID, obj.bytes)
        if isinstance(obj, (list, tuple)):
            return self.array_value([self.append(e) for e in obj])
        if isinstance(obj, dict):
            fields = []
            for k, v in obj.items():
                if not isinstance(k, str):
                    raise VariantError(f"Object key {k!r} is a {type(k).__name__}; Variant object keys are strings.")
                kid = self.add_key(k)
                fields.append((k, kid, self.append(v)))
            return self.object_value(fields)
        raise VariantError(f"{type(obj).__name__} value {obj!r} has no Variant type; pass None, bool, int, float, "
                           "Decimal, str, bytes, date, datetime, time, UUID, list or dict.")

    def _decimal(self, d: Decimal) -> bytes:
        if not d.is_finite():
            raise VariantError(f"Decimal {d} is not finite; a Variant decimal holds finite values only.")
        exp = d.as_tuple().exponent
        scale = max(0, -exp)  # a negative scale: the same number with scale 0
        return decimal_value(unscaled(d, scale), scale)


def encode(obj: object) -> tuple[bytes, bytes]:
    """(metadata, value) of a Python object: None is the Variant null; bool; int as the smallest of
    int8/16/32/64 (beyond int64 a decimal of up to 38 digits); float as double; Decimal as
    decimal4/8/16 by precision; str; bytes as binary; date; datetime (aware: timestamp in UTC micros,
    naive: timestamp_ntz); time (naive) as time_ntz; UUID; list/tuple as array; dict (str keys) as
    object. Anything else raises VariantError."""
    b = VariantBuilder()
    value = b.append(obj)
    return b.metadata(), value


def deep_call(fn, *args):
    """fn(*args), retried with a raised recursion limit when the nesting exceeds Python's default:
    Spark nests variants up to 1000 levels (Jackson's depth limit), a few Python frames per level."""
    try:
        return fn(*args)
    except RecursionError:
        old = sys.getrecursionlimit()
        if old >= _DEEP_LIMIT:
            raise
        sys.setrecursionlimit(_DEEP_LIMIT)
        try:
            return fn(*args)
        finally:
            sys.setrecursionlimit(old)


_DEEP_LIMIT = 5000


# ---- reading values --------------------------------------------------------------------------------

def _bad(what: str) -> VariantError:
    return VariantError(f"Malformed Variant: {what}. The bytes are not a valid Parquet Variant encoding "
                        "(truncated or corrupt); rewrite the value from its source.")


def read_metadata(metadata: bytes) -> list[str]:
    """The dictionary keys of Variant metadata, checking its header, offsets and UTF-8."""
    m = bytes(metadata)
    if not m:
        raise _bad("empty metadata")
    if m[0] & 0x0F != 1:
        raise _bad(f"metadata version {m[0] & 0x0F} (only version 1 exists)")
    size = ((m[0] >> 6) & 3) + 1
    if len(m) < 1 + size:
        raise _bad("metadata shorter than its header")
    n = int.from_bytes(m[1:1 + size], "little")
    start = 1 + size + (n + 1) * size
    if start > len(m):
        raise _bad(f"metadata declares {n} keys but has {len(m)} bytes")
    offs = [int.from_bytes(m[1 + size + i * size:1 + size + (i + 1) * size], "little") for i in range(n + 1)]
    if offs[0] != 0 or any(a > b for a, b in pairwise(offs)) or start + offs[-1] > len(m):
        raise _bad("metadata key offsets out of order or past its end")
    try:
        return [m[start + a:start + b].decode("utf-8") for a, b in pairwise(offs)]
    except UnicodeDecodeError:
        raise _bad("a metadata key is not UTF-8") from None


def _need(v: bytes, end: int) -> None:
    if end > len(v):
        raise _bad(f"value needs {end} bytes but has {len(v)}")


def container_layout(v: bytes, pos: int) -> tuple[int, int, int, int, int, int]:
    """(count, id_size, off_size, ids_at, offsets_at, data_at) of the object or array at pos."""
    h = v[pos]
    basic, head = h & 3, h >> 2
    if basic == OBJECT:
        large, id_size, off_size = (head >> 4) & 1, ((head >> 2) & 3) + 1, (head & 3) + 1
    else:
        large, id_size, off_size = (head >> 2) & 1, 0, (head & 3) + 1
    nbytes = 4 if large else 1
    _need(v, pos + 1 + nbytes)
    n = int.from_bytes(v[pos + 1:pos + 1 + nbytes], "little")
    ids_at = pos + 1 + nbytes
    offs_at = ids_at + n * id_size
    data_at = offs_at + (n + 1) * off_size
    _need(v, data_at)
    return n, id_size, off_size, ids_at, offs_at, data_at


def _uint(v: bytes, at: int, size: int) -> int:
    return int.from_bytes(v[at:at + size], "little")


def object_fields(v: bytes, pos: int, keys: list[str]) -> list[tuple[str, int]]:
    """(key, value position) of the object at pos, in stored (sorted) order."""
    n, id_size, off_size, ids_at, offs_at, data_at = container_layout(v, pos)
    end = data_at + _uint(v, offs_at + n * off_size, off_size)
    _need(v, end)
    out = []
    for i in range(n):
        kid = _uint(v, ids_at + i * id_size, id_size)
        if kid >= len(keys):
            raise _bad(f"field id {kid} not in the metadata's {len(keys)} keys")
        off = _uint(v, offs_at + i * off_size, off_size)
        if data_at + off >= end:
            raise _bad(f"field offset {off} past the object's data")
        out.append((keys[kid], data_at + off))
    return out


def array_elements(v: bytes, pos: int) -> list[int]:
    n, _, off_size, _, offs_at, data_at = container_layout(v, pos)
    end = data_at + _uint(v, offs_at + n * off_size, off_size)
    _need(v, end)
    out = []
    for i in range(n):
        off = _uint(v, offs_at + i * off_size, off_size)
        if data_at + off >= end:
            raise _bad(f"element offset {off} past the array's data")
        out.append(data_at + off)
    return out


_FIXED = {NULL: 0, TRUE: 0, FALSE: 0, INT1: 1, INT2: 2, INT4: 4, INT8: 8, DOUBLE: 8, DECIMAL4: 5, DECIMAL8: 9,
          DECIMAL16: 17, DATE: 4, TIMESTAMP: 8, TIMESTAMP_NTZ: 8, FLOAT: 4, TIME_NTZ: 8, TIMESTAMP_NANOS: 8,
          TIMESTAMP_NTZ_NANOS: 8, UUID: 16}


def scalar(v: bytes, pos: int) -> tuple[int, object, int]:
    """(type id, payload, end) of the non-container value at pos; strings/binary payloads are bytes,
    numbers ints/floats, decimals (unscaled, scale); type id LONG_STR stands for both string forms."""
    _need(v, pos + 1)
    h = v[pos]
    basic, tid = h & 3, h >> 2
    if basic == SHORT_STR:
        end = pos + 1 + tid
        _need(v, end)
        return LONG_STR, v[pos + 1:end], end
    if basic != PRIMITIVE:
        raise _bad("expected a scalar")
    if tid in (BINARY, LONG_STR):
        _need(v, pos + 5)
        end = pos + 5 + _uint(v, pos + 1, 4)
        _need(v, end)
        return tid, v[pos + 5:end], end
    width = _FIXED.get(tid)
    if width is None:
        raise _bad(f"unknown primitive type id {tid}")
    end = pos + 1 + width
    _need(v, end)
    body = v[pos + 1:end]
    if tid in (NULL, TRUE, FALSE):
        return tid, None, end
    if tid in (DECIMAL4, DECIMAL8, DECIMAL16):
        scale = body[0]
        if scale > MAX_DECIMAL16:
            raise _bad(f"decimal scale {scale} above 38")
        return tid, (int.from_bytes(body[1:], "little", signed=True), scale), end
    if tid == DOUBLE:
        return tid, struct.unpack("<d", body)[0], end
    if tid == FLOAT:
        return tid, struct.unpack("<f", body)[0], end
    if tid == UUID:
        return tid, _uuid.UUID(bytes=bytes(body)), end
    return tid, int.from_bytes(body, "little", signed=True), end


def _text(b: bytes) -> str:
    try:
        return bytes(b).decode("utf-8")
    except UnicodeDecodeError:
        raise _bad("a string is not UTF-8") from None


def _decode(v: bytes, pos: int, keys: list[str], depth: int):
    _need(v, pos + 1)
    basic = v[pos] & 3
    if basic == OBJECT:
        return {k: _decode(v, p, keys, depth + 1) for k, p in object_fields(v, pos, keys)}
    if basic == ARRAY:
        return [_decode(v, p, keys, depth + 1) for p in array_elements(v, pos)]
    tid, x, _ = scalar(v, pos)
    if tid in (NULL, TRUE, FALSE):
        return None if tid == NULL else tid == TRUE
    if tid == LONG_STR:
        return _text(x)
    if tid == BINARY:
        return bytes(x)
    if tid in (DECIMAL4, DECIMAL8, DECIMAL16):
        return Decimal(f"{x[0]}E-{x[1]}")  # exact: no context rounding at 28 digits
    try:
        if tid == DATE:
            return _EPOCH_DATE + _dt.timedelta(days=x)
        if tid == TIMESTAMP:
            return _EPOCH_UTC + _dt.timedelta(microseconds=x)
        if tid == TIMESTAMP_NTZ:
            return _EPOCH_NAIVE + _dt.timedelta(microseconds=x)
        if tid == TIMESTAMP_NANOS:
            return _EPOCH_UTC + _dt.timedelta(microseconds=x // 1000)
        if tid == TIMESTAMP_NTZ_NANOS:
            return _EPOCH_NAIVE + _dt.timedelta(microseconds=x // 1000)
    except OverflowError:
        raise VariantError(f"Variant {('date', 'timestamp')[tid != DATE]} {x} is outside Python's datetime range "
                           "(years 1 to 9999); read it with to_json instead.") from None
    if tid == TIME_NTZ:
        if not 0 <= x < 86_400_000_000:
            raise _bad(f"time {x} micros outside a day")
        s, us = divmod(x, 1_000_000)
        return _dt.time(s // 3600, s // 60 % 60, s % 60, us)
    return x  # ints, floats, UUID


def decode(metadata: bytes, value: bytes) -> object:
    """The Python object of a variant (the inverse of ``encode``; timestamps are UTC-aware datetimes,
    timestamp_ntz naive ones, decimals ``Decimal`` with their stored scale; nanosecond timestamps are
    truncated to microseconds). Malformed bytes raise VariantError."""
    keys = read_metadata(metadata)
    v = bytes(value)
    try:
        return deep_call(_decode, v, 0, keys, 0)
    except RecursionError:
        raise VariantError("Variant nesting too deep to decode in Python; read it with to_json.") from None


def append_variant(b: VariantBuilder, v: bytes, pos: int, keys: list[str]) -> bytes:
    """Re-encode the value at pos (of a variant whose dictionary is keys) into builder b, as Spark's
    appendVariant: objects and arrays rebuilt with b's ids, scalars copied."""
    _need(v, pos + 1)
    basic = v[pos] & 3
    if basic == OBJECT:
        fields = []
        for k, p in object_fields(v, pos, keys):
            kid = b.add_key(k)
            fields.append((k, kid, append_variant(b, v, p, keys)))
        return b.object_value(fields)
    if basic == ARRAY:
        return b.array_value([append_variant(b, v, p, keys) for p in array_elements(v, pos)])
    _, _, end = scalar(v, pos)
    return bytes(v[pos:end])

"""Arrow scalars and arrays of Python values and NumPy arrays, built from buffers.

pyarrow's own conversion (``pa.scalar``, ``pa.array``, a Python literal handed to a compute function)
imports pandas the first time it runs, to recognise pandas' missing-value markers: ~0.3 s of a cold
start, paid by every filtered scan planning in a fresh process. The values filters use (booleans,
integers, floats, strings, binary, dates, timestamps) are laid out here directly, with pyarrow's results:
the same types, values and errors (``OverflowError`` or ``pa.ArrowInvalid`` for a value out of the
type's range), and structs, lists and maps of them (the log's action rows). Any other type or value
(NumPy scalars, decimals, ...), and any long list (``BULK_VALUES``), goes to pyarrow's conversion.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_US_PER_UNIT = {"s": 1_000_000, "ms": 1_000, "us": 1}
_INT64 = (-(2**63), 2**63 - 1)


# From this many values on, pyarrow's conversion (C, per value) is faster even with the pandas import it
# pays once per process (~0.3 s): laying values out here costs Python time per value.
BULK_VALUES = 100_000


def scalar(v: Any, t: pa.DataType) -> pa.Scalar:
    """``v`` (None: null) as a scalar of type ``t``, as ``pa.scalar(v, t)`` gives it."""
    return array([v], t)[0]


def null(t: pa.DataType) -> pa.Scalar:
    """The null scalar of type ``t``."""
    return pa.nulls(1, t)[0]


def from_numpy(a: np.ndarray) -> pa.Array:
    """A 1-D boolean or numeric NumPy array as an Arrow array (no nulls)."""
    a = np.ascontiguousarray(a)
    if a.dtype == np.bool_:
        return pa.Array.from_buffers(pa.bool_(), len(a), [None, pa.py_buffer(np.packbits(a, bitorder="little"))])
    return pa.Array.from_buffers(pa.from_numpy_dtype(a.dtype), len(a), [None, pa.py_buffer(a)])


def array(values: Sequence[Any], t: pa.DataType) -> pa.Array:
    """``values`` (None: null) as an array of type ``t``, as ``pa.array(values, t)`` gives it."""
    values = list(values)
    if len(values) >= BULK_VALUES:
        return pa.array(values, t)
    if pa.types.is_struct(t) or pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
        try:
            nested = _nested(values, t)
        except (pa.ArrowException, OverflowError, ValueError, TypeError):
            nested = None  # children are built column by column; pyarrow's row order decides which fault is named
        return pa.array(values, t) if nested is None else nested
    try:
        nulls = values.count(None)
    except (TypeError, ValueError):  # a value whose == is not a truth value (pyarrow's conversion decides)
        nulls = 1
    if nulls:
        valid = [v is not None for v in values]
        present = [v for v in values if v is not None]
    else:  # (a long column without nulls: no per-value Python work here)
        valid, present = None, values
    data = _data(present, t)
    if data is None:
        return pa.array(values, t)  # not a type or value laid out here
    n = len(values)
    if valid is None:
        mask = None
        full = data
    else:
        mask = pa.py_buffer(np.packbits(np.array(valid, bool), bitorder="little"))
        full = _spread(data, valid)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        offsets, blob = full
        return pa.Array.from_buffers(t, n, [mask, pa.py_buffer(offsets), pa.py_buffer(blob)])
    if pa.types.is_boolean(t):
        return pa.Array.from_buffers(t, n, [mask, pa.py_buffer(np.packbits(full, bitorder="little"))])
    return pa.Array.from_buffers(t, n, [mask, pa.py_buffer(full)])


def _nested(values: list, t: pa.DataType) -> pa.Array | None:
    """A struct, list or map array from its children, built by ``array``; None where pyarrow's
    conversion must decide (a value of another shape: a tuple for a struct, a dict for a list, ...)."""
    valid = [v is not None for v in values]
    mask = None if all(valid) else from_numpy(~np.array(valid, bool))
    if pa.types.is_struct(t):
        if not all(v is None or type(v) is dict for v in values):
            return None
        children = [array([None if v is None else v.get(f.name) for v in values], f.type) for f in t]
        return pa.StructArray.from_arrays(children, fields=list(t), mask=mask)
    if pa.types.is_map(t):
        if not all(v is None or type(v) is dict or (type(v) is list and all(type(i) is tuple and len(i) == 2 for i in v)) for v in values):
            return None
        pairs = [[] if v is None else list(v.items()) if type(v) is dict else v for v in values]
        if any(k is None for p in pairs for k, _ in p):
            return None  # pyarrow's error for a null key
        offsets = _list_offsets(pairs, np.int32)
        keys = array([k for p in pairs for k, _ in p], t.key_type)
        items = array([i for p in pairs for _, i in p], t.item_type)
        return pa.MapArray.from_arrays(offsets, keys, items, type=t, mask=mask)
    if not all(v is None or type(v) in (list, tuple) for v in values):
        return None
    lists = [() if v is None else v for v in values]
    offsets = _list_offsets(lists, np.int64 if pa.types.is_large_list(t) else np.int32)
    items = array([i for v in lists for i in v], t.value_type)
    cls = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
    return cls.from_arrays(offsets, items, type=t, mask=mask)


def _list_offsets(lists: list, dtype) -> pa.Array:
    offsets = np.zeros(len(lists) + 1, dtype)
    np.cumsum([len(v) for v in lists], out=offsets[1:])
    return from_numpy(offsets)


def _spread(data, valid: list[bool]):
    """The present values' layout widened to every slot (a null slot holds zero / an empty value)."""
    pos = np.flatnonzero(np.array(valid, bool))
    if isinstance(data, tuple):  # offsets and bytes: a null slot repeats the previous offset
        offsets, blob = data
        lengths = np.zeros(len(valid), offsets.dtype)
        lengths[pos] = np.diff(offsets)
        full = np.zeros(len(valid) + 1, offsets.dtype)
        np.cumsum(lengths, out=full[1:])
        return full, blob
    full = np.zeros(len(valid), data.dtype)
    full[pos] = data
    return full


def _data(values: list, t: pa.DataType):
    """The values buffer (a NumPy array; offsets and bytes for strings) of non-null ``values``, or None
    where pyarrow's conversion must decide."""
    if pa.types.is_boolean(t):
        if not _only(values, bool) and not all(isinstance(v, bool) for v in values):
            return None
        return np.array(values, bool)
    if pa.types.is_integer(t):
        exact = _only(values, int)
        if not exact and not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return None
        dtype = numpy_dtype(t)
        info = np.iinfo(dtype)
        if exact and values:  # a long column (the log's sizes, times): NumPy converts it, then its range is checked
            try:
                wide = np.array(values, np.int64)
            except OverflowError:
                wide = None
            if wide is not None and info.min <= wide.min() and wide.max() <= info.max:
                return wide.astype(dtype, copy=False)
        ints = [int(v) for v in values]
        for v in ints:
            if not info.min <= v <= info.max:
                if v < 0 and info.min == 0:
                    raise OverflowError("can't convert negative value to unsigned int")
                # pyarrow first converts to a C long (unsigned types: an unsigned one), then checks the width
                c_min, c_max = (0, 2**64 - 1) if info.min == 0 else _INT64
                if not c_min <= v <= c_max:
                    raise OverflowError("Python int too large to convert to C long")
                raise pa.ArrowInvalid(f"Value {v} too large to fit in C integer type")
        return np.array(ints, dtype)
    if pa.types.is_float32(t) or pa.types.is_float64(t):
        if not _only(values, float) and not all(isinstance(v, float) for v in values):
            return None  # e.g. an int: pyarrow refuses one no double equals exactly
        with np.errstate(over="ignore"):  # a double beyond float32 is inf, as in pyarrow
            return np.array([float(v) for v in values], numpy_dtype(t))
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        if not _only(values, str) and not all(isinstance(v, str) for v in values):
            return None
        joined = "".join(values)
        if joined.isascii():  # one encode of all of them: a character is a byte
            return _offsets_of(np.fromiter(map(len, values), np.int64, len(values)), joined.encode("ascii"), t)
        return _offsets([v.encode("utf-8") for v in values], t)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        if not all(isinstance(v, (bytes, bytearray, memoryview)) for v in values):
            return None
        return _offsets([bytes(v) for v in values], t)
    if pa.types.is_date32(t) or pa.types.is_date64(t):
        if not all(isinstance(v, dt.date) and not isinstance(v, dt.datetime) for v in values):
            return None
        days = [v.toordinal() - _EPOCH_ORDINAL for v in values]
        if pa.types.is_date32(t):
            return np.array(days, np.int32)
        return np.array([d * 86_400_000 for d in days], np.int64)
    if pa.types.is_timestamp(t):
        if not all(isinstance(v, dt.datetime) for v in values):
            return None
        out = []
        for v in values:
            us = _micros(v)
            value = us * 1000 if t.unit == "ns" else us // _US_PER_UNIT[t.unit]
            if not _INT64[0] <= value <= _INT64[1]:
                raise pa.ArrowInvalid(f"Could not convert {v!r} with type datetime.datetime: out of bounds for {t.unit} resolution")
            out.append(value)
        return np.array(out, np.int64)
    return None


def _micros(v: dt.datetime) -> int:
    """Microseconds since the epoch of a naive datetime's wall clock, or of an aware one's UTC instant."""
    off = v.utcoffset()
    days = v.toordinal() - _EPOCH_ORDINAL
    us = ((days * 24 + v.hour) * 3600 + v.minute * 60 + v.second) * 1_000_000 + v.microsecond
    if off is not None:
        us -= off // dt.timedelta(microseconds=1)
    return us


def _offsets(encoded: list[bytes], t: pa.DataType):
    return _offsets_of(np.fromiter(map(len, encoded), np.int64, len(encoded)), b"".join(encoded), t)


def _offsets_of(lengths: np.ndarray, blob: bytes, t: pa.DataType):
    large = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
    offsets = np.zeros(len(lengths) + 1, np.int64 if large else np.int32)
    if not large and len(blob) >= 2**31:
        return None  # pyarrow's conversion chunks or refuses it
    np.cumsum(lengths, out=offsets[1:])
    return offsets, blob


def _only(values: list, cls: type) -> bool:
    """Whether every value's type is exactly ``cls`` (checked at C speed; subclasses say no)."""
    return set(map(type, values)) <= {cls}


def to_numpy(a: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean or numeric array without nulls as a NumPy array (``Array.to_numpy`` imports pandas)."""
    if isinstance(a, pa.ChunkedArray):
        parts = [to_numpy(c) for c in a.chunks]
        if parts:
            return np.concatenate(parts) if len(parts) > 1 else parts[0]
        return to_numpy(pa.nulls(0, a.type))
    if a.null_count:
        return a.to_numpy(zero_copy_only=False)  # a null: pyarrow's conversion decides its value
    n, off = len(a), a.offset
    buf = a.buffers()[1]
    if pa.types.is_boolean(a.type):
        if not n:
            return np.empty(0, bool)
        bits = np.frombuffer(buf, np.uint8, count=(off + n + 7) // 8)
        return np.unpackbits(bits, count=off + n, bitorder="little")[off:].astype(bool)
    if pa.types.is_integer(a.type) or pa.types.is_floating(a.type):
        dtype = numpy_dtype(a.type)
        if not n:
            return np.empty(0, dtype)
        return np.frombuffer(buf, dtype, count=n, offset=off * dtype.itemsize)
    return a.to_numpy(zero_copy_only=False)


def numpy_dtype(t: pa.DataType) -> np.dtype:
    if pa.types.is_floating(t):
        return np.dtype(f"float{t.bit_width}")
    return np.dtype(f"{'u' if pa.types.is_unsigned_integer(t) else ''}int{t.bit_width}")

"""``lakelog.schema.arrow_values`` gives what pyarrow's own conversion gives (types, values, nulls, errors)."""

import datetime as dt
import os

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog.schema import arrow_values

UTC_MINUS = dt.timezone(dt.timedelta(hours=-5, minutes=-30))
INTS = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]
TIMESTAMPS = [pa.timestamp(u, tz) for u in ("s", "ms", "us", "ns") for tz in (None, "UTC", "Asia/Tokyo")]
datetimes = st.datetimes(min_value=dt.datetime(1677, 9, 22), max_value=dt.datetime(2262, 4, 11),
                         timezones=st.sampled_from([None, dt.timezone.utc, UTC_MINUS]))


def values_of(t: pa.DataType):
    if pa.types.is_boolean(t):
        v = st.booleans() | st.sampled_from([np.bool_(True), np.bool_(False)])
    elif pa.types.is_integer(t):
        v = st.integers(-(2**65), 2**65) | st.integers(-300, 300) | st.sampled_from([np.int32(-7), np.uint64(2**64 - 1)])
    elif pa.types.is_floating(t):
        v = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([-0.0, 1e300, np.float32(0.1)])
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        v = st.text()
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
        v = st.binary()
    elif pa.types.is_date(t):
        v = st.dates()
    else:
        v = datetimes
    return st.none() | v


def _same(a, b) -> bool:
    # NaN is not equal to itself: such arrays are compared by the text of their values
    return a.type == b.type and (a.equals(b) or repr(_values(a)) == repr(_values(b)))


def _values(a):
    return a.as_py() if isinstance(a, pa.Scalar) else a.to_pylist()


def _outcome(f):
    try:
        return f(), None
    except (pa.ArrowException, OverflowError, ValueError) as e:
        return None, type(e)


TYPES = [pa.bool_(), *INTS, pa.float32(), pa.float64(), pa.string(), pa.large_string(), pa.binary(), pa.large_binary(),
         pa.date32(), pa.date64(), *TIMESTAMPS]


EXAMPLES = int(os.environ.get("LAKELOG_FUZZ_EXAMPLES", "0") or 0)


@settings(max_examples=EXAMPLES or 300, deadline=None, derandomize=not EXAMPLES, database=None)
@given(st.sampled_from(TYPES).flatmap(lambda t: st.tuples(st.just(t), st.lists(values_of(t), max_size=6))))
def test_values_convert_as_pyarrow_converts_them(case):
    t, values = case
    if _converts_as_pyarrow(values, t) is not None:
        for v in values:
            assert _same(arrow_values.scalar(v, t), pa.scalar(v, t)), (v, t)


_EDGES = [0, 1, -1, 127, 128, -128, -129, 255, 256, 2**15, -(2**15) - 1, 2**16, 2**31, -(2**31) - 1, 2**32,
          2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64 - 1, 2**64, 2**65, -(2**65)]


@pytest.mark.parametrize("t", INTS, ids=str)
def test_integer_range_errors_as_pyarrow(t):
    """Out of range, pyarrow raises ``OverflowError`` past the C integer it converts to and ``ArrowInvalid`` past the width."""
    for v in _EDGES:
        _converts_as_pyarrow([v], t)
        _converts_as_pyarrow([1, v], t)


def _converts_as_pyarrow(values: list, t: pa.DataType) -> pa.Array | None:
    """Check that ``arrow_values.array`` gives what ``pa.array`` gives (or the same error); the array, or None."""
    ours, our_error = _outcome(lambda: arrow_values.array(values, t))
    theirs, their_error = _outcome(lambda: pa.array(values, t))
    assert our_error == their_error, (values, t)
    if ours is not None:
        ours.validate(full=True)
        assert _same(ours, theirs), (values, t, ours, theirs)
    return ours


def test_conversion_errors_and_fallback():
    assert _outcome(lambda: arrow_values.scalar(300, pa.int8()))[1] is pa.ArrowInvalid
    assert _outcome(lambda: arrow_values.scalar(-1, pa.uint8()))[1] is OverflowError
    assert _outcome(lambda: arrow_values.scalar(2**63, pa.int64()))[1] is OverflowError
    assert _outcome(lambda: arrow_values.scalar(dt.datetime(9999, 1, 1), pa.timestamp("ns")))[1] is pa.ArrowInvalid
    assert _outcome(lambda: arrow_values.scalar("\ud800", pa.string()))[1] is not None
    # Not laid out here: pyarrow's conversion decides (an int for a double, a decimal).
    assert _outcome(lambda: arrow_values.scalar(2**53 + 1, pa.float64()))[1] is pa.ArrowInvalid
    import decimal

    assert arrow_values.scalar(decimal.Decimal("1.50"), pa.decimal128(5, 2)).as_py() == decimal.Decimal("1.50")
    assert arrow_values.null(pa.string()).is_valid is False


@given(st.lists(st.booleans()) | st.lists(st.integers(-(2**63), 2**63 - 1)), st.integers(0, 3))
def test_numpy_round_trip(values, cut):
    a = np.array(values, bool if values and isinstance(values[0], bool) else np.int64)
    arr = arrow_values.from_numpy(a)
    assert arr.equals(pa.array(values, arr.type)) if values else len(arr) == 0
    sliced = arr.slice(min(cut, len(arr)))
    assert arrow_values.to_numpy(sliced).tolist() == values[min(cut, len(values)):]
    assert arrow_values.to_numpy(pa.chunked_array([arr, sliced], arr.type)).tolist() == values + values[min(cut, len(values)):]


LEAVES = [pa.bool_(), pa.int32(), pa.int64(), pa.float64(), pa.string(), pa.binary(), pa.timestamp("us", "UTC")]
nested_types = st.recursive(
    st.sampled_from(LEAVES),
    lambda inner: st.builds(pa.list_, inner)
    | st.builds(pa.large_list, inner)
    | st.builds(lambda k, v: pa.map_(k, v), st.sampled_from([pa.string(), pa.int64()]), inner)
    | st.lists(inner, min_size=1, max_size=3).map(lambda ts: pa.struct([(f"f{i}", t) for i, t in enumerate(ts)])),
    max_leaves=5,
)


def nested_values(t: pa.DataType):
    if pa.types.is_struct(t):
        v = st.fixed_dictionaries({}, optional={f.name: nested_values(f.type) for f in t})
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        v = st.lists(nested_values(t.value_type), max_size=3) | st.lists(nested_values(t.value_type), max_size=2).map(tuple)
    elif pa.types.is_map(t):
        pairs = st.lists(st.tuples(values_of(t.key_type), nested_values(t.item_type)), max_size=3)
        v = pairs | pairs.map(dict)
    else:
        return values_of(t)
    return st.none() | v


@settings(max_examples=EXAMPLES or 300, deadline=None, derandomize=not EXAMPLES, database=None)
@given(nested_types.filter(lambda t: t not in LEAVES).flatmap(lambda t: st.tuples(st.just(t), st.lists(nested_values(t), max_size=5))))
def test_nested_values_convert_as_pyarrow_converts_them(case):
    # Structs, lists and maps (the log's action rows) are built from their children, without pandas.
    t, values = case
    _converts_as_pyarrow(values, t)

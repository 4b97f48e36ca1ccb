"""Read filters: validation against the table schema, their SQL semantics, and the form pyarrow may prune by.

A filter is DNF tuples as pyarrow uses them (``[("p", "=", "a"), ("x", ">", 3)]`` is a conjunction,
a list of such lists a disjunction) or a ``pyarrow.compute`` expression.

DNF terms follow SQL three-valued logic: a term is true only for non-null column values (``!=`` and
``not in`` included), a term comparing with ``None`` is never true (``x = NULL`` in SQL), ``None`` in an
``in`` list never matches, and ``not in`` with ``None`` in its list is never true. Floating-point terms
follow Spark SQL: NaN equals NaN and is larger than every other value, and -0.0 equals 0.0.
An expression is evaluated exactly as pyarrow evaluates it.

Pruning must never drop a row the filter keeps. lakelog's own pruning (partition values and the
``stats`` of add actions) is exact for that. pyarrow's scanner also prunes Parquet row groups by the
footer's statistics, which are unsafe for floating-point columns (NaN is left out of min/max, and
-0.0/0.0 bounds break ``in``): the scanner gets a relaxed filter without such columns, and the exact
filter is applied to the rows afterwards.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..schema import arrow_values, collations, geospatial
from ..schema.collations import Collation
from ..errors import InvalidFilterError
from ..schema.types import ColumnNames

OPS = ("=", "==", "!=", "<", "<=", ">", ">=", "in", "not in")
NEGATED_OP = {"=": "!=", "==": "!=", "!=": "=", "<": ">=", ">=": "<", ">": "<=", "<=": ">", "in": "not in", "not in": "in"}


def _false(field: "pc.Expression | Values") -> "pc.Expression | Values":
    if isinstance(field, Values):
        return Values(arrow_values.from_numpy(np.zeros(len(field.array), bool)))
    return pc.scalar(arrow_values.scalar(False, pa.bool_()))


class Values:
    """A column's values standing in for ``pc.field`` in a term: each operator applies the compute
    kernel the expression would call (evaluating an expression needs ``pyarrow.dataset``, which imports
    pandas)."""

    def __init__(self, array: pa.Array):
        self.array = array

    def _op(self, kernel, other) -> "Values":
        return Values(kernel(self.array, other.array if isinstance(other, Values) else other))

    def __eq__(self, other):  # type: ignore[override]
        return self._op(pc.equal, other)

    def __ne__(self, other):  # type: ignore[override]
        return self._op(pc.not_equal, other)

    def __lt__(self, other):
        return self._op(pc.less, other)

    def __le__(self, other):
        return self._op(pc.less_equal, other)

    def __gt__(self, other):
        return self._op(pc.greater, other)

    def __ge__(self, other):
        return self._op(pc.greater_equal, other)

    def __and__(self, other):
        return self._op(pc.and_kleene, other)

    def __or__(self, other):
        return self._op(pc.or_kleene, other)

    def __invert__(self):
        return Values(pc.invert(self.array))

    def is_nan(self):
        return Values(pc.is_nan(self.array))

    def is_valid(self):
        return Values(pc.is_valid(self.array))

    def isin(self, values: pa.Array):
        return Values(pc.is_in(self.array, value_set=values))

    __hash__ = None  # type: ignore[assignment]


def term_mask(values: pa.Array, op: str, value: Any, t: pa.DataType, *, quoted: Any = None, collation: Collation | None = None) -> np.ndarray:
    """Where the DNF term ``(column, op, value)`` is TRUE over ``values`` (a column of type ``t``), with
    the kernels ``term_expression``'s expression would be evaluated by."""
    out = _term(Values(values), "", op, value, t, quoted, collation).array
    return arrow_values.to_numpy(pc.fill_null(out, arrow_values.scalar(False, pa.bool_())))


def resolve_filter_columns(filters: Any, schema: pa.Schema) -> Any:
    """DNF ``filters`` with each column name as the table spells it (names resolve ignoring case, as in
    Delta); expressions, unknown names and malformed filters are returned as they are."""
    if not isinstance(filters, (list, tuple)) or not filters:
        return filters
    index = ColumnNames(schema.names)

    def term(t: Any) -> Any:
        if isinstance(t, tuple) and len(t) == 3 and (found := index.find(t[0])) is not None:
            return (found, t[1], t[2])
        return t

    if isinstance(filters[0], tuple):
        return [term(t) for t in filters]
    return [[term(t) for t in conj] if isinstance(conj, (list, tuple)) else conj for conj in filters]


@dataclass(frozen=True)
class CompiledFilter:
    """``exact`` keeps exactly the filter's rows; ``scan`` (implied by ``exact``, or None for no filter) is
    what pyarrow's scanner may prune Parquet row groups by; ``columns`` are the columns ``exact`` reads."""

    exact: pc.Expression
    scan: pc.Expression | None
    columns: tuple[str, ...]

    @property
    def recheck(self) -> bool:
        """Whether rows the scanner returns still need ``exact`` applied."""
        return self.scan is not self.exact


def compile_filter(filters: Any, schema: pa.Schema, partition_columns: list[str] | tuple[str, ...] = ()) -> CompiledFilter | None:
    """Validate ``filters`` (DNF tuples or an expression) against ``schema``; None for no filter.

    A malformed filter raises ``InvalidFilterError`` quoting it."""
    if filters is None:
        return None
    if isinstance(filters, pc.Expression):
        return _compile_expression(filters, schema, partition_columns)
    if not isinstance(filters, (list, tuple)):
        raise InvalidFilterError(
            f"filters {filters!r} are neither DNF tuples ([('col', '=', value), ...]) nor a pyarrow.compute expression"
        )
    if not filters:
        return None
    dnf = [filters] if isinstance(filters[0], tuple) else filters
    disjuncts_exact, disjuncts_scan, columns = [], [], []
    index = ColumnNames(schema.names)
    for conj in dnf:
        if not isinstance(conj, (list, tuple)) or not conj or not all(isinstance(t, tuple) for t in conj):
            raise InvalidFilterError(
                f"filters {filters!r} are malformed: expected a list of (column, op, value) tuples, or a list of such "
                "non-empty lists (their disjunction)"
            )
        exact, scan = [], []
        for t in conj:
            if len(t) != 3:
                raise InvalidFilterError(f"filter {t!r} is not a (column, op, value) tuple")
            col = index.find(t[0])  # as Delta: ignoring case
            if col is None:
                raise InvalidFilterError(f"filter {t!r}: column {t[0]!r} is not in the table (columns: {schema.names})")
            collation = collations.of_field(schema.field(col))
            if collation is not None:
                collations.check_arrow_filterable(col, collation, t)
            e = term_expression(col, t[1], t[2], schema.field(col).type, quoted=t, collation=collation)
            exact.append(e)
            if (collation is None and not _stats_unsafe(schema.field(col).type)) or col in partition_columns:
                scan.append(e)
            if col not in columns:
                columns.append(col)
        disjuncts_exact.append(_all(exact))
        disjuncts_scan.append(disjuncts_exact[-1] if len(scan) == len(exact) else _all(scan) if scan else None)
    exact = _any(disjuncts_exact)
    if any(s is None for s in disjuncts_scan):
        scan = None  # a disjunct the scanner cannot see: it may keep any row
    elif all(a is b for a, b in zip(disjuncts_scan, disjuncts_exact)):
        scan = exact
    else:
        scan = _any(disjuncts_scan)
    return CompiledFilter(exact, scan, tuple(columns))


def term_expression(column: str, op: str, value: Any, t: pa.DataType, *, quoted: Any = None, collation: Collation | None = None) -> pc.Expression:
    """The expression of one DNF term with the semantics above (true only when the SQL term is TRUE);
    a string column under ``collation`` (UTF8_LCASE) compares as Spark compares under it.

    ``NEGATED_OP[op]`` gives the term that is true exactly when this one is FALSE (both are not true
    on null), which is how a ``NOT`` is translated."""
    return _term(pc.field(column), column, op, value, t, quoted, collation)


def _lcase(field):
    return Values(collations.lcase_key(field.array)) if isinstance(field, Values) else collations.lcase_key(field)


def _term(field, column: str, op: str, value: Any, t: pa.DataType, quoted: Any, collation: Collation | None = None):
    quoted = quoted if quoted is not None else (column, op, value)
    if not isinstance(op, str) or op.lower() not in OPS:
        raise InvalidFilterError(f"filter {quoted!r}: unknown operator {op!r} (use one of {', '.join(OPS)})")
    op = op.lower()
    if geospatial.is_geo(t):
        raise InvalidFilterError(
            f"filter {quoted!r}: column {column!r} is {geospatial.to_delta(t)}, whose values lakelog does not compare "
            "(equal WKB bytes are not the geometric equality, and there is no order); filter on other columns, or test "
            f"for null with an expression (pc.field({column!r}).is_null())"
        )
    if pa.types.is_nested(t):
        raise InvalidFilterError(
            f"filter {quoted!r}: column {column!r} has the nested type {t}, which DNF filters cannot compare; "
            "use a pyarrow.compute expression (e.g. pc.field('s', 'x') > 1)"
        )
    if op in ("in", "not in"):
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise InvalidFilterError(f"filter {quoted!r}: {op!r} takes a list of values, got {type(value).__name__}")
        values = list(value)
        has_null = any(v is None for v in values)
        members = _in_members(field, [v for v in values if v is not None], t, quoted, collation)
        if op == "in":
            return members
        if has_null:
            return _false(field)  # x NOT IN (..., NULL) is never TRUE
        return ~members & field.is_valid()
    if value is None:
        return _false(field)  # x = NULL (and every other comparison with NULL) is never TRUE
    if pa.types.is_floating(t):
        return _float_comparison(field, op, _float_value(value, t, quoted))
    lit = _literal(value, t, quoted)
    if collation is not None and collation.kind == "lcase":
        field, lit = _lcase(field), collations.lcase_literal(lit.as_py(), t)
    return {
        "=": lambda: field == lit,
        "==": lambda: field == lit,
        "!=": lambda: field != lit,
        "<": lambda: field < lit,
        "<=": lambda: field <= lit,
        ">": lambda: field > lit,
        ">=": lambda: field >= lit,
    }[op]()


def _all(es: list[pc.Expression]) -> pc.Expression:
    out = es[0]
    for e in es[1:]:
        out = out & e
    return out


def _any(es: list[pc.Expression]) -> pc.Expression:
    out = es[0]
    for e in es[1:]:
        out = out | e
    return out


def _stats_unsafe(t: pa.DataType) -> bool:
    """Whether Parquet footer statistics of a column of type ``t`` (any leaf) may prune wrongly."""
    if pa.types.is_floating(t):
        return True
    if pa.types.is_struct(t):
        return any(_stats_unsafe(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _stats_unsafe(t.value_type)
    if pa.types.is_map(t):
        return _stats_unsafe(t.key_type) or _stats_unsafe(t.item_type)
    return False


# ---------------------------------------------------------------- floating point (Spark SQL semantics)

def _float_value(v: Any, t: pa.DataType, quoted: Any) -> float:
    if isinstance(v, bool) or type(v).__name__ == "bool_" or not isinstance(v, (numbers.Real, decimal.Decimal)):
        raise _wrong_value(quoted, v, t, "a float or an int")
    return float(v)


def _float_comparison(field: pc.Expression, op: str, v: float) -> pc.Expression:
    # Compared as float64, as Spark compares a float column with a double literal.
    nan = field.is_nan()  # null for null
    if math.isnan(v):
        return {
            "=": lambda: nan,
            "==": lambda: nan,
            "!=": lambda: ~nan,
            "<": lambda: ~nan,
            "<=": lambda: field.is_valid(),
            ">": lambda: _false(field),
            ">=": lambda: nan,
        }[op]()
    lit = arrow_values.scalar(v, pa.float64())
    return {
        "=": lambda: field == lit,
        "==": lambda: field == lit,
        "!=": lambda: field != lit,  # NaN != v holds
        "<": lambda: field < lit,
        "<=": lambda: field <= lit,
        ">": lambda: (field > lit) | nan,
        ">=": lambda: (field >= lit) | nan,
    }[op]()


def _in_members(field: pc.Expression, values: list, t: pa.DataType, quoted: Any, collation: Collation | None = None) -> pc.Expression:
    """``field`` equals one of ``values`` (no None among them); false for null."""
    if pa.types.is_floating(t):
        floats = [_float_value(v, t, quoted) for v in values]
        with_nan = any(math.isnan(f) for f in floats)
        # is_in hashes values: -0.0 and 0.0 differ there, but are equal in SQL. (A set would merge them.)
        keep: dict[tuple, float] = {}
        for f in floats:
            if math.isnan(f) or (pa.types.is_float32(t) and arrow_values.scalar(f, pa.float32()).as_py() != f):
                continue  # NaN: matched below; a double no float32 equals: matches nothing
            for g in (0.0, -0.0) if f == 0.0 else (f,):
                keep[(g, math.copysign(1, g))] = g
        e = field.isin(arrow_values.array(list(keep.values()), t)) if keep else None
        if with_nan:
            e = field.is_nan() if e is None else e | field.is_nan()
        return e if e is not None else _false(field)
    lits = [_literal(v, t, quoted) for v in values]
    kept = [s for s in lits if s is not None and s.type == t]  # the others equal no value of the column
    if not kept:
        return _false(field)
    members = arrow_values.array([s.as_py() for s in kept], t)
    if collation is not None and collation.kind == "lcase":
        return _lcase(field).isin(collations.lcase_key(members))
    return field.isin(members)


# ---------------------------------------------------------------- literals

def _wrong_value(quoted: Any, v: Any, t: pa.DataType, expected: str) -> InvalidFilterError:
    return InvalidFilterError(
        f"filter {quoted!r}: value {v!r} ({type(v).__name__}) cannot be compared with a column of type {t}; pass {expected}"
    )


def _literal(v: Any, t: pa.DataType, quoted: Any) -> pa.Scalar | None:
    """``v`` as a scalar comparable with a column of type ``t``: of type ``t`` when it is exactly a value
    of ``t``; an integer beyond an integer type and a decimal with more digits are returned with their
    own type (no column value equals them)."""
    try:
        if pa.types.is_boolean(t):
            if isinstance(v, bool) or type(v).__name__ == "bool_":
                return arrow_values.scalar(bool(v), t)
            raise _wrong_value(quoted, v, t, "True or False")
        if pa.types.is_integer(t):
            if isinstance(v, bool) or type(v).__name__ == "bool_":
                raise _wrong_value(quoted, v, t, "an int")
            if isinstance(v, (float, decimal.Decimal)) and not isinstance(v, numbers.Integral):
                if not (math.isfinite(v) and v == int(v)):
                    raise _wrong_value(quoted, v, t, "an int")
                v = int(v)
            if not isinstance(v, numbers.Integral):
                raise _wrong_value(quoted, v, t, "an int")
            v = int(v)
            try:
                return arrow_values.scalar(v, t)
            except (pa.ArrowInvalid, OverflowError):
                if -(2**63) <= v < 2**63:
                    return arrow_values.scalar(v, pa.int64())
                raise _wrong_value(quoted, v, t, "an int within the 64-bit range") from None
        if pa.types.is_decimal(t):
            if isinstance(v, bool) or not isinstance(v, (numbers.Real, decimal.Decimal)):
                raise _wrong_value(quoted, v, t, "a decimal.Decimal or an int")
            d = v if isinstance(v, decimal.Decimal) else decimal.Decimal(int(v)) if isinstance(v, numbers.Integral) else decimal.Decimal(repr(float(v)))
            if not d.is_finite():
                raise _wrong_value(quoted, v, t, "a finite number")
            try:
                return pa.scalar(d, t)  # refuses a value with more digits than the column holds
            except (pa.ArrowInvalid, decimal.InvalidOperation):
                return pa.scalar(d)
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            if not isinstance(v, str):
                raise _wrong_value(quoted, v, t, "a str")
            return arrow_values.scalar(v, t)
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            if not isinstance(v, (bytes, bytearray, memoryview)):
                raise _wrong_value(quoted, v, t, "bytes")
            return arrow_values.scalar(bytes(v), t)
        if pa.types.is_date(t):
            if isinstance(v, str):
                v = _parse_iso(v, dt.date.fromisoformat, quoted, t)
            if isinstance(v, dt.datetime) or not isinstance(v, dt.date):
                raise _wrong_value(quoted, v, t, "a datetime.date or an ISO date string")
            return arrow_values.scalar(v, t)
        if pa.types.is_timestamp(t):
            if isinstance(v, str):
                v = _parse_iso(v, dt.datetime.fromisoformat, quoted, t)
            elif type(v).__name__ == "datetime64":
                v = pa.scalar(v).cast(pa.timestamp("us")).as_py()
            elif isinstance(v, dt.date) and not isinstance(v, dt.datetime):
                v = dt.datetime.combine(v, dt.time())
            if not isinstance(v, dt.datetime):
                raise _wrong_value(quoted, v, t, "a datetime.datetime or an ISO timestamp string")
            if t.tz is None and v.tzinfo is not None:
                raise _wrong_value(quoted, v, t, "a naive datetime (the column is a timestamp without time zone)")
            if t.tz is not None and v.tzinfo is None:
                v = v.replace(tzinfo=dt.timezone.utc)  # naive means UTC, as for time travel
            return arrow_values.scalar(v, t)
    except InvalidFilterError:
        raise
    except (pa.ArrowException, TypeError, ValueError, OverflowError, decimal.InvalidOperation) as e:
        raise InvalidFilterError(f"filter {quoted!r}: value {v!r} cannot be compared with a column of type {t} ({e})") from None
    raise InvalidFilterError(f"filter {quoted!r}: columns of type {t} cannot be filtered with DNF tuples; use a pyarrow.compute expression")


def _parse_iso(s: str, parse, quoted: Any, t: pa.DataType):
    try:
        return parse(s)
    except ValueError:
        raise InvalidFilterError(f"filter {quoted!r}: {s!r} is not an ISO-8601 value for a column of type {t}") from None


# ---------------------------------------------------------------- expressions

def _compile_expression(expr: pc.Expression, schema: pa.Schema, partition_columns) -> CompiledFilter:
    empty = schema.empty_table()
    try:
        empty.filter(expr)
    except (pa.ArrowException, TypeError, ValueError) as e:
        raise InvalidFilterError(f"filter {expr} cannot be applied to the table (columns: {schema.names}): {e}") from None
    for name, collation in collations.table_collations(schema).items():
        if _references(empty, expr, name):
            # pyarrow would compare the strings in binary order, not under the column's collation.
            raise InvalidFilterError(
                f"filter {expr} reads the column {name!r}, which has the collation {collation.identifier}; a pyarrow.compute "
                "expression compares it in binary order. Filter it with DNF tuples, e.g. [(name, '=', value)], which "
                "compare under the collation"
            )
    unsafe = [f.name for f in schema if f.name not in partition_columns and _stats_unsafe(f.type)]
    if not any(_references(empty, expr, c) for c in unsafe):
        return CompiledFilter(expr, expr, ())
    # The expression is opaque: no part of it is safe to hand to the scanner, which then reads every
    # column the exact filter needs.
    return CompiledFilter(expr, None, tuple(c for c in schema.names if _references(empty, expr, c)))


def _references(empty: pa.Table, expr: pc.Expression, column: str) -> bool:
    """Whether ``expr`` reads ``column`` (it no longer binds without it)."""
    try:
        empty.drop_columns([column]).filter(expr)
    except (pa.ArrowException, TypeError, ValueError):
        return True
    return False

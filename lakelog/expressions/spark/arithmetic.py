"""Spark's arithmetic operators (ANSI mode): + - * / div % and unary minus.

Integral operands are cast to their common type and DuckDB computes in that type: it raises on
overflow where Spark raises ARITHMETIC_OVERFLOW. ``/`` is always fractional (DOUBLE, or DECIMAL for
decimals); ``div`` is integral (BIGINT). A zero divisor raises, as Spark's DIVIDE_BY_ZERO, for every
type. Decimal results take Spark's result type and are computed exactly (on the unscaled integers where
DuckDB's own decimal operators differ), rounded HALF_UP; a result type Spark narrows below the exact
result's scale (past 38 digits) is refused, except for division, where the exact quotient is rounded
to it."""

from __future__ import annotations

from sqlglot import exp

from . import types as T
from .catalog import NODES, Sql, entry, fail_when, raise_sql
from .types import SparkType

entry(("+", "-", "*"), "operator",
      "numeric; integral types overflow with an error (ANSI), floats follow IEEE; decimals take Spark's result type "
      "(p1, s1) op (p2, s2) and are exact, an integer literal counting as decimal(its digits, 0); refused when Spark's "
      "result type is narrowed below the exact result's scale (past 38 digits)")
entry("/", "operator",
      "always fractional: DOUBLE, or DECIMAL(p1 - s1 + s2 + max(6, s1 + p2 + 1), max(6, s1 + p2 + 1)) rounded HALF_UP "
      "(narrowed past 38 digits as Spark narrows it; refused where the quotient would need to be rounded above the dividend's "
      "scale, or the divisor has 38 digits); a zero divisor is an error (DIVIDE_BY_ZERO), for doubles too")
entry("div", "operator", "integral division of integral operands, truncated toward zero, BIGINT; zero divisor and overflow are errors")
entry("%", "operator",
      "remainder with the dividend's sign (Java's %); integral, float, double and decimal (refused where the operands at "
      "a common scale need more than 38 digits); a zero divisor is an error")
entry(("unary -", "unary +"), "operator", "negation overflows with an error for the smallest integer; -0.0 for 0.0")

_ZERO = "DIVIDE_BY_ZERO"


def _operator(op: str):
    def handler(tr, n: exp.Expression) -> Sql:
        return binary(tr, op, tr.node(n.this), tr.node(n.expression))

    return handler


NODES.update({exp.Add: _operator("+"), exp.Sub: _operator("-"), exp.Mul: _operator("*"), exp.Div: _operator("/"),
              exp.IntDiv: _operator("div"), exp.Mod: _operator("%")})


def _check_numeric(tr, s: Sql, op: str) -> Sql:
    if not (s.type.numeric or s.type.void):
        if s.type.name == "string":
            tr.refuse(f"the operator {op} on a string", "Spark casts the string implicitly; write the CAST you mean")
        tr.refuse(f"the operator {op} on {s.type}")
    return s


def binary(tr, op: str, a: Sql, b: Sql) -> Sql:
    a, b = _check_numeric(tr, a, op), _check_numeric(tr, b, op)
    if a.type.void and b.type.void:
        tr.refuse(f"the operator {op} on two NULL literals")
    if a.type.void:
        a = tr.cast(a, b.type if op != "div" else T.LONG)
    if b.type.void:
        b = tr.cast(b, a.type if op != "div" else T.LONG)
    if op == "div":
        return _int_div(tr, a, b)
    decimal = (a.type.is_decimal or b.type.is_decimal) and not (a.type.fractional or b.type.fractional)
    if decimal:
        return _decimal(tr, op, a, b)
    t = T.wider(a.type, b.type)
    if op == "/":
        t = T.DOUBLE
    nonzero = _nonzero(b)
    a, b = tr.cast(a, t), tr.cast(b, t)
    if op in ("+", "-", "*"):
        if t.integral:
            return tr.null_skip([a, b], lambda x, y: checked(lambda u, v: f"{u} {op} {v}", [x, y], t, f"{op} overflows {t}"), t,
                                fails=True)
        return tr.null_skip([a, b], lambda x, y: f"({x} {op} {y})", t)
    return divide(tr, a, b, lambda x, y: f"({x} {op} {y})", t, f"{op} by zero", nonzero)


_WIDER = {"tinyint": "INTEGER", "smallint": "INTEGER", "int": "BIGINT", "bigint": "HUGEINT"}


def checked(build, operands: list[str], t: SparkType, what: str) -> str:
    """``build(*operands)`` (integral, of type ``t``) computed in a wider type and checked against ``t``'s
    range: ARITHMETIC_OVERFLOW as in Spark. (DuckDB raises on overflow itself, but its optimizer rewrites
    ``x + 1 > 0`` into ``x > -1``, losing the overflow Spark fails on.)"""
    lo, hi = T.INTEGRAL_RANGE[t.name]
    wide = build(*(f"CAST({o} AS {_WIDER[t.name]})" for o in operands))
    return f"(CASE WHEN ({wide}) NOT BETWEEN {lo} AND {hi} THEN {raise_sql('ARITHMETIC_OVERFLOW', what)} ELSE CAST(({wide}) AS {t.duckdb}) END)"


def divide(tr, a: Sql, b: Sql, body, t: SparkType, what: str, nonzero: bool = False, fails: bool = False) -> Sql:
    """Spark's DivModLike evaluation: the divisor first (NULL: NULL, the dividend not evaluated), then the
    dividend (NULL: NULL), then a zero divisor is an error."""
    if nonzero:
        return tr.null_skip([b, a], lambda y, x: body(x, y), t, fails=fails)
    return tr.null_skip([b, a], lambda y, x: (f"(CASE WHEN {x} IS NULL THEN NULL WHEN {y} = 0 THEN {raise_sql(_ZERO, what)} "
                                              f"ELSE {body(x, y)} END)"), t, fails=True)


def _nonzero(s: Sql) -> bool:
    """A literal divisor other than zero (no zero check needed)."""
    return s.constant and s.value is not None and not isinstance(s.value, (str, bool)) and s.value != 0


def _int_div(tr, a: Sql, b: Sql) -> Sql:
    if not ((a.type.integral or a.type.void) and (b.type.integral or b.type.void)):
        tr.refuse(f"div of {a.type} and {b.type}", "lakelog evaluates div on integral operands")
    nonzero = _nonzero(b)
    a, b = tr.cast(a, T.LONG), tr.cast(b, T.LONG)
    return divide(tr, a, b, lambda x, y: checked(lambda u, v: f"{u} // {v}", [x, y], T.LONG, "div overflows bigint"), T.LONG,
                  "div by zero", nonzero, fails=True)


def negate(tr, a: Sql, name: str) -> Sql:
    """Spark's unary minus: the smallest integer overflows (an error); a decimal of more than 34 digits is
    rounded to 34 significant digits HALF_EVEN, as Spark's Decimal negates through Scala's BigDecimal
    (MathContext.DECIMAL128)."""
    a = _check_numeric(tr, a, name)
    if a.type.void:
        tr.refuse(f"{name} of a NULL literal")
    t = a.type
    if t.integral:
        lo = T.INTEGRAL_RANGE[t.name][0]
        body = lambda x: fail_when(f"{x} = {lo}", "ARITHMETIC_OVERFLOW", f"-{lo} overflows {t}", f"CAST((0 - CAST({x} AS HUGEINT)) AS {t.duckdb})")  # noqa: E731
        return tr.null_skip([a], body, t, fails=True)
    if t.is_decimal and t.precision > 34:
        return tr.null_skip([a], lambda x: decimal128(f"(0 - {unscaled(Sql(x, t))})", t), t, fails=True)
    if t.is_decimal:
        return Sql(f"CAST((CAST(0 AS {t.duckdb}) - {a.text}) AS {t.duckdb})", t, a.fails)
    return Sql(f"(-({a.text}))", t, a.fails)


def decimal128(u: str, t: SparkType) -> str:
    """DECIMAL ``t`` from unscaled HUGEINT ``u`` rounded to 34 significant digits HALF_EVEN (Scala's BigDecimal
    arithmetic, MathContext.DECIMAL128)."""
    digits = f"length(CAST(abs({u}) AS VARCHAR))"
    extra = f"greatest({digits} - 34, 0)"
    p = f"CAST(power(CAST(10 AS HUGEINT), {extra}) AS HUGEINT)"
    q, r = f"({u} // {p})", f"abs({u} % {p})"
    half = f"({p} // 2)"
    up = f"(CASE WHEN {extra} > 0 AND ({r} > {half} OR ({r} = {half} AND {q} % 2 <> 0)) THEN sign({u}) ELSE 0 END)"
    return from_unscaled(f"(({q} + {up}) * {p})", t)


def positive(tr, args, name):
    (a,) = tr.args(args, name, 1)
    return _check_numeric(tr, a, name)


# ---------------------------------------------------------------- exact decimals

def unscaled(s: Sql) -> str:
    """The unscaled integer of a decimal as HUGEINT (its digits without the point: exact)."""
    if s.type.scale == 0:
        return f"CAST({s.text} AS HUGEINT)"
    return f"CAST(replace(CAST({s.text} AS VARCHAR), '.', '') AS HUGEINT)"


def from_unscaled(r: str, t: SparkType) -> str:
    """DECIMAL ``t`` from its unscaled HUGEINT ``r``; DuckDB raises when it does not fit ``t`` (Spark's
    NUMERIC_VALUE_OUT_OF_RANGE)."""
    d = f"CAST({r} AS DECIMAL(38,0))"
    if t.scale:
        d = f"({d} * CAST('{10 ** -t.scale:.{t.scale}f}' AS DECIMAL({t.scale},{t.scale})))"
    return f"CAST({d} AS {t.duckdb})"


def pow10(n: int) -> str:
    return f"CAST('1{'0' * n}' AS HUGEINT)"


def round_half_up_div(n: str, d: str) -> str:
    """``n / d`` for HUGEINTs rounded HALF_UP (away from zero at .5), without overflowing."""
    q = f"({n} // {d})"
    r = f"abs({n} % {d})"
    up = f"(CASE WHEN {r} >= abs({d}) - {r} THEN sign({n}) * sign({d}) ELSE 0 END)"
    return f"({q} + {up})"


def long_division(n: str, d: str, digits: int, chunk: int) -> str:
    """``n / d`` (HUGEINTs, |d| < 10^(38 - chunk)) times 10^digits, rounded HALF_UP: schoolbook division,
    ``chunk`` digits at a time so no remainder times a power of ten overflows."""
    acc, r = f"({n} // {d})", f"({n} % {d})"
    while digits > chunk:
        t = f"({r} * {pow10(chunk)})"
        acc, r = f"({acc} * {pow10(chunk)} + {t} // {d})", f"({t} % {d})"
        digits -= chunk
    return f"({acc} * {pow10(digits)} + {round_half_up_div(f'({r} * {pow10(digits)})', d)})"


def _decimal(tr, op: str, a: Sql, b: Sql) -> Sql:
    da = T.decimal_of(a.type, a.value if a.literal and a.type.integral else None)
    db = T.decimal_of(b.type, b.value if b.literal and b.type.integral else None)
    nonzero = _nonzero(b)
    a, b = tr.cast(a, da), tr.cast(b, db)
    result, precision, scale = T.decimal_result(op, da, db)
    p1, s1, p2, s2 = da.precision, da.scale, db.precision, db.scale
    if op in ("+", "-", "*"):
        if result.scale != scale:
            tr.refuse(f"decimal {op} of {da} and {db}",
                      f"Spark rounds the exact result to {result} (past 38 digits), which DuckDB cannot hold to round; "
                      "cast the operands to narrower decimals")
        if op == "*":
            # exact (p1 + p2 + 1 <= 38 digits); DuckDB multiplies in the operands' width, so widen them first
            body = lambda x, y: f"CAST((CAST({x} AS DECIMAL(38,{s1})) * CAST({y} AS DECIMAL(38,{s2}))) AS {result.duckdb})"  # noqa: E731
        else:
            body = lambda x, y: f"(CAST({x} AS {result.duckdb}) {op} CAST({y} AS {result.duckdb}))"  # noqa: E731
        return tr.null_skip([a, b], body, result, fails=True)
    if op == "/":
        # the exact quotient rounded HALF_UP to Spark's scale, by long division: q * 10^e + round(r * 10^e / B)
        e = result.scale + s2 - s1
        if e < 0 or p2 > 37:
            tr.refuse(f"decimal / of {da} and {db}", f"rounding the quotient to Spark's scale ({result}) needs more than 38 digits")

        def div(x, y):
            return from_unscaled(long_division(unscaled(Sql(x, da)), unscaled(Sql(y, db)), e, 38 - p2), result)

        return divide(tr, a, b, div, result, "/ by zero", nonzero, fails=True)
    # %: sign of the dividend, exact at the larger scale
    if max(p1 - s1, p2 - s2) + scale > 38:
        tr.refuse(f"decimal % of {da} and {db}", "the operands at a common scale need more than 38 digits")

    def mod(x, y):
        n = f"({unscaled(Sql(x, da))} * {pow10(scale - s1)})"
        d = f"({unscaled(Sql(y, db))} * {pow10(scale - s2)})"
        return from_unscaled(f"({n} % {d})", result)

    return divide(tr, a, b, mod, result, "% by zero", nonzero, fails=True)


__all__ = ["binary", "negate", "positive", "divide", "unscaled", "from_unscaled", "round_half_up_div", "pow10", "decimal128"]

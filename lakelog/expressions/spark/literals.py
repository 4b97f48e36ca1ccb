"""Spark's numeric literals: their types, and the range its parser checks each type's digits against."""

from __future__ import annotations

import decimal as _decimal
import struct
from fractions import Fraction

from sqlglot import exp

from ...errors import PredicateError
from . import types as T
from .catalog import Sql, quote


# Spark's parser compares a literal's digits with these bounds (Java's Float.MAX_VALUE and Double.MAX_VALUE
# as BigDecimals of their double text) and refuses a literal beyond them.
_FLOAT_BOUNDS = {"float": _decimal.Decimal("3.4028234663852886E38"), "double": _decimal.Decimal("1.7976931348623157E308")}


def _in_range(text: str, d: _decimal.Decimal, type_name: str) -> None:
    lo, hi = T.INTEGRAL_RANGE[type_name] if type_name in T.INTEGRAL_RANGE else (-_FLOAT_BOUNDS[type_name], _FLOAT_BOUNDS[type_name])
    if not lo <= d <= hi:
        raise PredicateError(f"the numeric literal {text} does not fit in range [{lo}, {hi}] for type {type_name} (as in Spark)")


def number_literal(text: str) -> Sql:
    """A numeric literal as Spark types it: INT, else BIGINT, else DECIMAL for integers; DECIMAL with a
    point; DOUBLE with an exponent."""
    if "e" in text.lower():
        _in_range(text, _decimal.Decimal(text), "double")
        v = float(text)
        return Sql(f"CAST({quote(repr(v))} AS DOUBLE)", T.DOUBLE, value=v, literal=True)
    d = _decimal.Decimal(text)
    if "." not in text:
        v = int(d)
        for t in (T.INT, T.LONG):
            lo, hi = T.INTEGRAL_RANGE[t.name]
            if lo <= v <= hi:
                return Sql(f"CAST({v} AS {t.duckdb})", t, value=v, literal=True)
    sign, digits, exponent = d.as_tuple()
    scale = max(0, -exponent)
    precision = max(len(digits), scale, 1)
    if precision > T.MAX_PRECISION:
        raise PredicateError(f"the numeric literal {text} has more than 38 digits")
    t = T.decimal(precision, scale)
    return Sql(f"CAST({quote(str(d))} AS {t.duckdb})", t, value=d, literal=True)


def suffix_literal(n: exp.Expression, negative: bool = False) -> Sql | None:
    """A literal with a type suffix (``5Y``, ``5S``, ``5L``, ``1.5F``, ``1.5D``; sqlglot reads them as a
    TRY_CAST not written as one) as Spark's parser types and range-checks it, ``negative`` when a minus
    precedes it (``-128Y`` is one literal); None for anything else."""
    if not isinstance(n, exp.TryCast) or n.args.get("safe") or not isinstance(n.this, exp.Literal) or n.this.is_string:
        return None
    target = T.parse_type_name(n.args["to"].sql("spark"))
    if target is None or target.name not in (*T.INTEGRAL_RANGE, "float", "double"):
        return None
    text = ("-" if negative else "") + n.this.this
    d = _decimal.Decimal(text)
    _in_range(text, d, target.name)
    if target.name in T.INTEGRAL_RANGE:
        return Sql(f"CAST({int(d)} AS {target.duckdb})", target, value=int(d), literal=True)
    v = float(text) if target.name == "double" else _nearest_float32(d)
    return Sql(f"CAST({quote(repr(v))} AS {target.duckdb})", target, value=v, literal=True)


def _nearest_float32(d: _decimal.Decimal) -> float:
    """The float nearest ``d`` (ties to even), as Java's Float.parseFloat rounds the digits once (through a
    double they could round twice). ``d`` is within the float range."""
    bits = struct.unpack("<I", struct.pack("<f", float(abs(d))))[0]
    candidates = [b for b in (bits - 1, bits, bits + 1) if 0 <= b < 0x7F800000]  # finite magnitudes only
    as_float = {b: struct.unpack("<f", struct.pack("<I", b))[0] for b in candidates}
    exact = abs(Fraction(d))
    best = min(candidates, key=lambda b: (abs(Fraction(as_float[b]) - exact), b & 1))
    return -as_float[best] if d.is_signed() else as_float[best]

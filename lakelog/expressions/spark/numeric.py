"""Spark's numeric functions (ANSI mode).

Rounding a float or double follows Spark: ``BigDecimal(x)`` (the shortest decimal that reads back as
``x``, which for every double below 2^53 is what Java 17 and 21 print alike; above it the value is an
integer and rounding to a scale >= 0 keeps it) rounded at the scale, then the nearest float/double. A
negative scale on a float or double is refused. Transcendental functions (exp, ln, pow, trigonometry)
are refused: Spark computes them with Java's StrictMath (fdlibm), DuckDB with the C library, and the
two differ in the last bit for some arguments."""

from __future__ import annotations

from sqlglot import exp

from . import types as T
from .arithmetic import binary, checked, decimal128, divide, from_unscaled, pow10, round_half_up_div, unscaled
from .catalog import NODES, Sql, function, raise_sql
from .types import SparkType

_TWO63 = "CAST('9223372036854775808' AS DOUBLE)"


def _numeric(tr, s: Sql, name: str) -> Sql:
    if not (s.type.numeric or s.type.void):
        if s.type.name == "string":
            tr.refuse(f"{name}() of a string", "Spark casts it implicitly; write the CAST you mean")
        tr.invalid(f"{name}() takes a number, not {s.type}")
    return s


@function("abs", "math", "same type; the smallest integer is an error (ANSI); abs(-0.0) is 0.0; a negative decimal of more "
          "than 34 digits is rounded to 34 significant digits (HALF_EVEN), as Spark's Decimal.abs negates it")
def abs_(tr, args, name):
    (x,) = tr.args(args, name, 1)
    x = _numeric(tr, x, name)
    if x.type.void:
        x = tr.cast(x, T.INT)
    if x.type.is_decimal and x.type.precision > 34:  # a negative one is negated, see unary minus
        t = x.type
        return tr.null_skip([x], lambda v: f"(CASE WHEN {v} < 0 THEN {decimal128(f'abs({unscaled(Sql(v, t))})', t)} ELSE {v} END)", t,
                            fails=True)
    if x.type.integral:
        return tr.null_skip([x], lambda v: checked(lambda u: f"abs({u})", [v], x.type, f"abs overflows {x.type}"), x.type, fails=True)
    return Sql(f"abs({x.text})", x.type, x.fails)


def _long_of_double(r: str) -> str:
    # Spark's ceil/floor of a double: NaN gives 0, beyond bigint an error
    return (f"(CASE WHEN isnan({r}) THEN CAST(0 AS BIGINT) "
            f"WHEN {r} >= {_TWO63} OR {r} < -{_TWO63} THEN {raise_sql('ARITHMETIC_OVERFLOW', 'out of the range of bigint')} "
            f"ELSE CAST({r} AS BIGINT) END)")


def _ceil_floor(tr, x: Sql, duck: str, name: str) -> Sql:
    x = _numeric(tr, x, name)
    if x.type.void:
        return Sql("CAST(NULL AS BIGINT)", T.LONG, x.fails)
    if x.type.integral:
        return tr.cast(x, T.LONG)
    if x.type.is_decimal:
        t = T.decimal(min(x.type.precision - x.type.scale + 1, 38), 0)
        return Sql(f"CAST({duck}({x.text}) AS {t.duckdb})", t, x.fails)
    d = tr.cast(x, T.DOUBLE)
    return Sql(_long_of_double(f"{duck}({d.text})"), T.LONG, True)


def ceil_node(tr, n: exp.Ceil) -> Sql:
    if n.args.get("decimals") is not None or n.args.get("to") is not None:
        tr.refuse("ceil() with a scale")
    return _ceil_floor(tr, tr.node(n.this), "ceil", "ceil")


def floor_node(tr, n: exp.Floor) -> Sql:
    if n.args.get("decimals") is not None or n.args.get("to") is not None:
        tr.refuse("floor() with a scale")
    return _ceil_floor(tr, tr.node(n.this), "floor", "floor")


@function(("ceil", "ceiling", "floor"), "math",
          "integral: bigint; decimal(p, s): decimal(p - s + 1, 0); float/double: bigint, NaN gives 0, beyond bigint an error "
          "(the two-argument form is refused)")
def ceil_floor(tr, args, name):
    (x,) = tr.args(args, name, 1)
    return _ceil_floor(tr, x, "floor" if name == "floor" else "ceil", name)


# ---------------------------------------------------------------- round / bround

def _round_unscaled(u: str, digits: int, half_even: bool) -> str:
    """HUGEINT ``u`` rounded to a multiple of 10^digits (digits > 0), HALF_UP or HALF_EVEN, as the quotient."""
    if digits <= 0:
        return u
    if not half_even:
        return round_half_up_div(u, pow10(digits))
    p = pow10(digits)
    q, r = f"({u} // {p})", f"abs({u} % {p})"
    half = f"({p} // 2)"
    up = f"(CASE WHEN {r} > {half} OR ({r} = {half} AND {q} % 2 <> 0) THEN sign({u}) ELSE 0 END)"
    return f"({q} + {up})"


def _round_decimal(tr, x: Sql, scale: int, half_even: bool, name: str) -> Sql:
    p, s = x.type.precision, x.type.scale
    if scale < 0:
        t = T.decimal(min(max(p - s + 1, -scale + 1), 38), 0)
        if s - scale > 38:
            tr.refuse(f"{name}() to a scale of {scale}")
        body = lambda v: from_unscaled(f"({_round_unscaled(unscaled(Sql(v, x.type)), s - scale, half_even)} * {pow10(-scale)})", t)  # noqa: E731
    else:
        new = min(s, scale)
        t = T.decimal(min(p - s + 1 + new, 38), new)
        body = lambda v: from_unscaled(_round_unscaled(unscaled(Sql(v, x.type)), s - new, half_even), t)  # noqa: E731
    return tr.null_skip([x], body, t, fails=True)


def _round_integral(tr, x: Sql, scale: int, half_even: bool) -> Sql:
    if scale >= 0:
        return x
    if -scale > 38:
        return Sql(f"(CASE WHEN {x.text} IS NULL THEN NULL ELSE CAST(0 AS {x.type.duckdb}) END)", x.type, x.fails)
    r = _round_unscaled(f"CAST({x.text} AS HUGEINT)", -scale, half_even)
    # a result beyond the type is an error (ANSI), as DuckDB's cast raises
    return Sql(f"CAST(({r} * {pow10(-scale)}) AS {x.type.duckdb})", x.type, True)


def _round_fractional(tr, x: Sql, scale: int, half_even: bool, name: str) -> Sql:
    if not 0 <= scale <= 15:
        tr.refuse(f"{name}() of a {x.type} to the scale {scale}", "lakelog rounds floats and doubles to scales 0 to 15")
    d = x.text if x.type.name == "double" else f"CAST({x.text} AS DOUBLE)"

    def at(work_scale: int) -> str:
        dec = T.decimal(38, work_scale)
        u = unscaled(Sql(f"CAST(CAST({d} AS VARCHAR) AS DECIMAL(38,{work_scale}))", dec))
        q = _round_unscaled(u, work_scale - scale, half_even)
        return f"CAST(CAST({from_unscaled(q, T.decimal(38, scale))} AS VARCHAR) AS {x.type.duckdb})"

    # below 1e-21 the value rounds to 0 at any scale <= 15 (BigDecimal's zero has no sign: 0.0); above, its
    # shortest digits fit DECIMAL(38,37)
    text = (f"(CASE WHEN isnan({d}) OR isinf({d}) OR abs({d}) >= CAST('9007199254740992' AS DOUBLE) THEN {x.text} "
            f"WHEN abs({d}) < CAST('1e-21' AS DOUBLE) THEN CAST(0 AS {x.type.duckdb}) WHEN abs({d}) < 1 THEN {at(37)} ELSE {at(21)} END)")
    return Sql(text, x.type, x.fails)


def _round(tr, args, name: str, half_even: bool) -> Sql:
    x, *scale = tr.args(args, name, 1, 2)
    x = _numeric(tr, x, name)
    if scale:
        sc = scale[0]
        if not sc.constant or not isinstance(sc.value, int) or isinstance(sc.value, bool) or not sc.type.integral:
            tr.invalid(f"{name}() takes an integer literal as its scale")
        d = sc.value
    else:
        d = 0
    if x.type.void:
        x = tr.cast(x, T.INT)
    if x.type.integral:
        return _round_integral(tr, x, d, half_even)
    if x.type.is_decimal:
        return _round_decimal(tr, x, d, half_even, name)
    return _round_fractional(tr, x, d, half_even, name)


@function("round", "math", "round(x[, d]) HALF_UP (away from zero at .5); same type, decimal(p, s) to decimal(p - s + 1 + "
          "min(s, d), min(s, d)); a float or double is rounded as its shortest decimal form (d from 0 to 15); integral overflow "
          "is an error")
def round_(tr, args, name):
    return _round(tr, args, name, False)


@function("bround", "math", "as round, HALF_EVEN (banker's rounding)")
def bround(tr, args, name):
    return _round(tr, args, name, True)


# ---------------------------------------------------------------- others

def _double_arg(tr, s: Sql, name: str) -> Sql:
    return tr.cast(_numeric(tr, s, name), T.DOUBLE)


@function("sqrt", "math", "double; NaN for a negative number, -0.0 for -0.0")
def sqrt(tr, args, name):
    (x,) = tr.args(args, name, 1)
    x = _double_arg(tr, x, name)
    return Sql(f"sqrt({x.text})", T.DOUBLE, x.fails)


@function(("sign", "signum"), "math", "double: -1.0, 0.0 (-0.0 for -0.0), 1.0 or NaN")
def signum(tr, args, name):
    (x,) = tr.args(args, name, 1)
    x = _double_arg(tr, x, name)
    return Sql(f"(CASE WHEN isnan({x.text}) THEN {x.text} WHEN {x.text} > 0 THEN CAST(1 AS DOUBLE) "
               f"WHEN {x.text} < 0 THEN CAST(-1 AS DOUBLE) ELSE {x.text} END)",
               T.DOUBLE, x.fails)


@function("mod", "math", "a % b")
def mod(tr, args, name):
    a, b = tr.args(args, name, 2)
    return binary(tr, "%", a, b)


def _wrap(text: str, t: SparkType) -> str:
    bits = {"int": 32, "bigint": 64}[t.name]
    m, h = 2 ** bits, 2 ** (bits - 1)
    return f"CAST(((({text}) + {h}) % {m} + {m}) % {m} - {h} AS {t.duckdb})"


@function("pmod", "math", "the non-negative remainder for a positive divisor: r = a % b, then (r + b) % b where r < 0 (with "
          "Java's int/long wrap-around in r + b, as Spark); integral and float/double; a zero divisor is an error")
def pmod(tr, args, name):
    a, b = tr.args(args, name, 2)
    a, b = _numeric(tr, a, name), _numeric(tr, b, name)
    if a.type.is_decimal or b.type.is_decimal:
        tr.refuse("pmod() of decimals")
    t = T.wider(a.type if not a.type.void else b.type, b.type if not b.type.void else a.type) or T.INT
    if t.void:
        t = T.INT
    a, b = tr.cast(a, t), tr.cast(b, t)

    def body(x, y):
        r = f"({x} % {y})"
        if t.name in ("int", "bigint"):
            wide = "BIGINT" if t.name == "int" else "HUGEINT"
            plus = _wrap(f"CAST({r} AS {wide}) + CAST({y} AS {wide})", t)
        elif t.integral:  # Spark adds tinyint/smallint in int: no overflow
            plus = f"(CAST({r} AS INTEGER) + CAST({y} AS INTEGER))"
        else:
            plus = f"({r} + {y})"
        return f"(CASE WHEN {r} < 0 THEN CAST(({plus} % {y}) AS {t.duckdb}) ELSE {r} END)"

    return divide(tr, a, b, body, t, "pmod by zero")


def _extreme(duck: str):
    def handler(tr, args, name):
        if len(args) < 2:
            tr.invalid(f"{name}() takes at least 2 arguments")
        items, t = tr.common([tr.node(a) for a in args], name)
        if not (t.atomic and t.name != "binary"):
            tr.refuse(f"{name}() of {t}")
        return Sql(f"{duck}({', '.join(i.text for i in items)})", t, any(i.fails for i in items))

    return handler


function("greatest", "math", "the largest non-NULL argument (NULL when all are); NaN is the largest number")(_extreme("greatest"))
function("least", "math", "the smallest non-NULL argument")(_extreme("least"))


@function("isnan", "math", "TRUE for NaN, FALSE otherwise (NULL too)")
def isnan(tr, args, name):
    (x,) = tr.args(args, name, 1)
    x = _double_arg(tr, x, name)
    return Sql(f"coalesce(isnan({x.text}), FALSE)", T.BOOLEAN, x.fails)


@function("nanvl", "math", "nanvl(a, b): b where a is NaN, else a")
def nanvl(tr, args, name):
    a, b = tr.args(args, name, 2)
    if not (a.type.fractional or a.type.void) or not (b.type.fractional or b.type.void):
        a, b = _double_arg(tr, a, name), _double_arg(tr, b, name)
    (a, b), t = tr.common([a, b], name)
    return Sql(f"(CASE WHEN {a.text} IS NULL THEN NULL WHEN isnan({a.text}) THEN {b.text} ELSE {a.text} END)", t, a.fails or b.fails)


@function(("negative",), "math", "unary minus")
def negative(tr, args, name):
    from .arithmetic import negate

    (x,) = tr.args(args, name, 1)
    return negate(tr, x, name)


@function(("positive",), "math", "the value itself")
def positive(tr, args, name):
    (x,) = tr.args(args, name, 1)
    return _numeric(tr, x, name)


NODES.update({exp.Ceil: ceil_node, exp.Floor: floor_node})

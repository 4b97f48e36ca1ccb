"""Spark's logical operators, comparisons, IN, BETWEEN, CASE / if() and LIKE (ANSI mode): operands cast
to their common type as Spark's type coercion casts them, three-valued logic, and Spark's laziness
(what it does not evaluate cannot fail)."""

from __future__ import annotations

from sqlglot import exp

from . import types as T
from .catalog import NODES, Sql, entry, quote
from .collation import keys, refuse_collated, resolve
from .translate import Translator, _describe

def _node(*classes):
    def register(handler):
        for c in classes:
            NODES[c] = handler
        return handler

    return register


# ---------------------------------------------------------------- logic

def _boolean_operand(tr: Translator, s: Sql, op: str) -> Sql:
    if s.type.void:
        return Sql("CAST(NULL AS BOOLEAN)", T.BOOLEAN, value=None)
    if s.type != T.BOOLEAN:
        tr.invalid(f"{op} takes boolean operands, not {s.type}")
    return s


def lazy_and(a: Sql, b: Sql) -> Sql:
    """Spark's ``a AND b``: ``b`` is not evaluated where ``a`` is FALSE (and is, to raise, elsewhere)."""
    if not b.fails:
        return Sql(f"({a.text} AND {b.text})", T.BOOLEAN, a.fails)
    return Sql(f"(CASE WHEN ({a.text}) IS FALSE THEN FALSE WHEN ({b.text}) IS FALSE THEN FALSE "
               f"WHEN ({a.text}) IS NULL OR ({b.text}) IS NULL THEN NULL ELSE TRUE END)", T.BOOLEAN, True)


@_node(exp.And)
def _and(tr: Translator, n: exp.And) -> Sql:
    a, b = (_boolean_operand(tr, tr.node(x), "AND") for x in (n.this, n.expression))
    return lazy_and(a, b)


@_node(exp.Or)
def _or(tr: Translator, n: exp.Or) -> Sql:
    a, b = (_boolean_operand(tr, tr.node(x), "OR") for x in (n.this, n.expression))
    if not b.fails:
        return Sql(f"({a.text} OR {b.text})", T.BOOLEAN, a.fails)
    return Sql(f"(CASE WHEN ({a.text}) IS TRUE THEN TRUE WHEN ({b.text}) IS TRUE THEN TRUE "
               f"WHEN ({a.text}) IS NULL OR ({b.text}) IS NULL THEN NULL ELSE FALSE END)", T.BOOLEAN, True)


@_node(exp.Not)
def _not(tr: Translator, n: exp.Not) -> Sql:
    a = _boolean_operand(tr, tr.node(n.this), "NOT")
    return Sql(f"(NOT {a.text})", T.BOOLEAN, a.fails)


@_node(exp.Is)
def _is(tr: Translator, n: exp.Is) -> Sql:
    a = tr.node(n.this)
    target = n.expression
    if isinstance(target, exp.Null):
        return Sql(f"(({a.text}) IS NULL)", T.BOOLEAN, a.fails)
    if isinstance(target, exp.Boolean):
        a = _boolean_operand(tr, a, "IS TRUE/FALSE")
        return Sql(f"(({a.text}) IS NOT DISTINCT FROM {'TRUE' if target.this else 'FALSE'})", T.BOOLEAN, a.fails)
    tr.refuse(_describe(n))


entry(("AND", "OR", "NOT"), "operator",
      "three-valued logic; as in Spark the right side of AND (OR) is not evaluated where the left is FALSE (TRUE)")
entry(("IS NULL", "IS NOT NULL", "IS TRUE", "IS NOT TRUE", "IS FALSE", "IS NOT FALSE", "IS UNKNOWN"), "operator",
      "never NULL; `x IS TRUE` is `x <=> TRUE`")


# ---------------------------------------------------------------- comparisons

_COMPARISONS = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
_COMPARABLE = {"boolean", "tinyint", "smallint", "int", "bigint", "float", "double", "decimal", "string", "binary",
               "date", "timestamp", "timestamp_ntz", "void"}


def compare(tr: Translator, a: Sql, b: Sql, op: str) -> Sql:
    """Spark's ``a op b`` (op one of = <> < <= > >= <=>): both sides cast to their common type; NaN equals
    NaN and is above every other number, -0.0 equals 0.0 (DuckDB orders floats the same way)."""
    (a, b), t = tr.common([a, b], f"the comparison {op}", sensitive=True)
    if t.name not in _COMPARABLE:
        tr.refuse(f"the comparison {op} of {t}")
    if t.name == "string":
        a, b = keys(tr, [a, b], t, f"the comparison {op}")
    if op == "<=>":
        return Sql(f"({a.text} IS NOT DISTINCT FROM {b.text})", T.BOOLEAN, a.fails or b.fails)
    return tr.null_skip([a, b], lambda x, y: f"({x} {op} {y})", T.BOOLEAN)


@_node(*_COMPARISONS)
def _comparison(tr: Translator, n: exp.Expression) -> Sql:
    return compare(tr, tr.node(n.this), tr.node(n.expression), _COMPARISONS[type(n)])


@_node(exp.NullSafeEQ)
def _null_safe_eq(tr: Translator, n: exp.NullSafeEQ) -> Sql:
    return compare(tr, tr.node(n.this), tr.node(n.expression), "<=>")


@_node(exp.NullSafeNEQ)
def _null_safe_neq(tr: Translator, n: exp.NullSafeNEQ) -> Sql:
    eq = compare(tr, tr.node(n.this), tr.node(n.expression), "<=>")
    return Sql(f"(NOT {eq.text})", T.BOOLEAN, eq.fails)


@_node(exp.Between)
def _between(tr: Translator, n: exp.Between) -> Sql:
    if n.args.get("symmetric"):
        tr.refuse("BETWEEN SYMMETRIC")
    value = tr.node(n.this)
    low = compare(tr, value, tr.node(n.args["low"]), ">=")
    high = compare(tr, value, tr.node(n.args["high"]), "<=")
    return lazy_and(low, high)


@_node(exp.In)
def _in(tr: Translator, n: exp.In) -> Sql:
    if n.args.get("query") or n.args.get("unnest") or n.args.get("field"):
        tr.refuse("IN with a subquery")
    value = tr.node(n.this)
    items = [tr.node(e) for e in n.expressions]
    if not items:
        tr.invalid("IN needs at least one value")
    (value, *items), t = tr.common([value, *items], "IN", sensitive=True)
    if t.name not in _COMPARABLE:
        tr.refuse(f"IN of {t}")
    if t.name == "string":
        value, *items = keys(tr, [value, *items], t, "IN")
    if not any(i.fails for i in items):
        return tr.null_skip([value], lambda v: f"({v} IN ({', '.join(i.text for i in items)}))", T.BOOLEAN,
                            fails=any(i.fails for i in items))
    # Spark stops at the first equal item: later ones are not evaluated
    whens = " ".join(f"WHEN ({value.text}) = ({i.text}) THEN TRUE" for i in items)
    nulls = " OR ".join(f"({i.text}) IS NULL" for i in items)
    return Sql(f"(CASE WHEN ({value.text}) IS NULL THEN NULL {whens} WHEN {nulls} THEN NULL ELSE FALSE END)", T.BOOLEAN, True)


entry(("=", "==", "<>", "!=", "<", "<=", ">", ">=", "<=>", "IS DISTINCT FROM", "IS NOT DISTINCT FROM"), "operator",
      "both sides cast to their common type (a string compared with a date or timestamp is cast to it); NaN = NaN "
      "and NaN is above every other number, -0.0 = 0.0; strings and binaries compare by bytes, strings under UTF8_LCASE "
      "as their lower-cased forms (see COLLATE)")
entry(("BETWEEN", "NOT BETWEEN"), "operator", "`a >= low AND a <= high`, each side coerced on its own, as Spark rewrites it")
entry(("IN", "NOT IN"), "operator",
      "a list of values (no subquery); NULL when no item equals and one is NULL; items after the first equal one are not evaluated")


# ---------------------------------------------------------------- conditionals

def case_when(tr: Translator, branches: list[tuple[Sql, Sql]], default: Sql | None) -> Sql:
    values = [v for _, v in branches] + ([default] if default is not None else [])
    values, t = tr.common(values, "CASE")
    conds = [_boolean_operand(tr, c, "CASE WHEN") for c, _ in branches]
    whens = " ".join(f"WHEN {c.text} THEN {v.text}" for c, v in zip(conds, values))
    tail = f" ELSE {values[-1].text}" if default is not None else ""
    text = f"(CASE {whens}{tail} END)" if not t.void else f"(CASE {whens}{tail} END)"
    return Sql(text, t, any(s.fails for s in conds) or any(v.fails for v in values))


@_node(exp.Case)
def _case(tr: Translator, n: exp.Case) -> Sql:
    subject = tr.node(n.this) if n.this is not None else None
    branches = []
    for i in n.args.get("ifs") or []:
        cond = tr.node(i.this)
        if subject is not None:
            cond = compare(tr, subject, cond, "=")  # CASE x WHEN v: Spark compares x = v
        branches.append((cond, tr.node(i.args["true"])))
    default = tr.node(n.args["default"]) if n.args.get("default") is not None else None
    return case_when(tr, branches, default)


@_node(exp.If)
def _if(tr: Translator, n: exp.If) -> Sql:
    if n.args.get("false") is None:
        tr.invalid("if() takes 3 arguments")
    return case_when(tr, [(tr.node(n.this), tr.node(n.args["true"]))], tr.node(n.args["false"]))


entry("CASE", "conditional", "searched and simple CASE; branches cast to their common type; only the chosen branch is evaluated")
entry("if", "conditional", "`if(c, a, b)`: `a` where `c` is TRUE, else `b` (NULL `c` chooses `b`)")


# ---------------------------------------------------------------- LIKE

def like_pattern(tr: Translator, pattern: str, escape: str) -> str:
    """Spark's LIKE pattern (escape character ``escape``) as a DuckDB LIKE pattern with ESCAPE '\\'.
    Spark refuses an escape before anything but _, % or itself, and a trailing escape."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == escape:
            if i + 1 >= len(pattern) or pattern[i + 1] not in ("_", "%", escape):
                tr.invalid(f"the LIKE pattern {pattern!r} has the escape character {escape!r} before "
                           f"{'its end' if i + 1 >= len(pattern) else repr(pattern[i + 1])} (Spark refuses it)")
            lit = pattern[i + 1]
            out.append("\\" + lit if lit in "_%\\" else lit)
            i += 2
            continue
        out.append(c if c in "_%" else ("\\" + c if c == "\\" else c))
        i += 1
    return "".join(out)


@_node(exp.Like, exp.ILike)
def _like(tr: Translator, n: exp.Expression, escape: str = "\\") -> Sql:
    if isinstance(n, exp.ILike):
        tr.refuse("ILIKE", "Spark lower-cases with Java's Unicode rules")
    value = tr.expect(tr.node(n.this), "LIKE", "string")
    pattern = tr.node(n.expression)
    if not pattern.constant or pattern.type.name not in ("string", "void"):
        tr.refuse("LIKE with a pattern that is not a string literal")
    if pattern.value is None:
        return Sql("CAST(NULL AS BOOLEAN)", T.BOOLEAN, value.fails)
    if n.args.get("escape") is not None:
        tr.refuse("LIKE ... ESCAPE in this form")
    refuse_collated(tr, resolve(tr, [value, pattern], "LIKE", sensitive=True), "LIKE",
                    "Spark matches it as a case-insensitive Java regular expression, character by character")
    duck = like_pattern(tr, pattern.value, escape)
    negate = "NOT " if n.args.get("negate") else ""
    return Sql(f"({value.text} {negate}LIKE {quote(duck)} ESCAPE '\\')", T.BOOLEAN, value.fails)


@_node(exp.Escape)
def _escape(tr: Translator, n: exp.Escape) -> Sql:
    esc = tr.node(n.expression)
    if not isinstance(n.this, exp.Like) or not esc.constant or not isinstance(esc.value, str) or len(esc.value) != 1:
        tr.invalid("ESCAPE takes one character")
    return _like(tr, n.this, esc.value)


entry(("LIKE", "NOT LIKE"), "operator",
      "pattern a string literal; `_` one character, `%` any characters (newlines too); escape `\\` unless ESCAPE says "
      "otherwise; Spark's refusal of an escape before another character is kept; refused under UTF8_LCASE (Spark matches "
      "case-insensitively character by character)")

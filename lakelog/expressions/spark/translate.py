"""Parsing a table's Spark SQL expression and walking its tree into DuckDB SQL with Spark's meaning.

sqlglot's Spark dialect parses the text, with its function builders switched off: every call stays an
``exp.Anonymous`` with the name and arguments as written, so the name Spark resolves is the name this
layer looks up (``catalog.FUNCTIONS``), and sqlglot's own rewrites (into DuckDB's or another engine's
idea of a function) never decide what an expression means. Syntax forms (CAST, CASE, IN, LIKE,
TRIM(... FROM ...), EXTRACT, ...) are typed nodes, handled here or in the function modules.

Every node gets Spark's type (``types``), its operands Spark's implicit casts (``casts.cast``), and its
DuckDB SQL exactly Spark's value, or Spark's error (ANSI mode) for the rows Spark fails on."""

from __future__ import annotations

from functools import lru_cache
from typing import Callable, NoReturn

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import SqlglotError

from ...errors import PredicateError, UnsupportedExpressionError
from . import types as T
from .catalog import FUNCTIONS, NODES, Sql, entry, quote, raise_sql
from .collation import resolve
from .literals import number_literal, suffix_literal
from .types import SparkType


class _Dialect(Spark):
    class Parser(Spark.Parser):
        FUNCTIONS: dict = {}  # every call an exp.Anonymous, as written


def parse(text: str, what: str) -> exp.Expression:
    """The sqlglot tree of one Spark SQL expression; PredicateError when ``text`` is not one."""
    if not isinstance(text, str) or not text.strip():
        raise PredicateError(f"the {what} must be a non-empty SQL expression, not {text!r}")
    try:
        trees = sqlglot.parse(text, read=_Dialect)
    except SqlglotError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PredicateError(f"the {what} {text!r} is not a Spark SQL expression: {first}") from None
    if len(trees) != 1 or trees[0] is None or isinstance(trees[0], (exp.Query, exp.Command, exp.DDL, exp.DML, exp.Alias)):
        raise PredicateError(f"the {what} {text!r} must be exactly one SQL expression")
    return trees[0]


@lru_cache(maxsize=512)
def referenced_columns(text: str) -> frozenset[str]:
    """The top-level column names a Spark SQL expression reads, lower-cased (Delta resolves names
    ignoring case); a struct field reference ``a.b`` reads column ``a``."""
    tree = parse(text, "expression")
    return frozenset(c.parts[0].name.lower() for c in tree.find_all(exp.Column))


def function_name(node: exp.Expression) -> str:
    """The Spark name of a function-call node, lower-cased."""
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    return type(node).key.lower()


class Translator:
    """Translates one expression over columns ``columns`` (lower-case name -> (name, Spark type))."""

    def __init__(self, text: str, columns: dict[str, tuple[str, SparkType]], what: str, now: bool = False):
        self.text = text
        self.columns = columns
        self.what = what
        self.now = now  # the time of the write may be read (column defaults)

    # ------------------------------------------------------------ errors
    def refuse(self, thing: str, why: str = "") -> NoReturn:
        raise UnsupportedExpressionError(
            f"the {self.what} ({self.text}) uses {thing}, which lakelog cannot evaluate exactly as Spark does"
            f"{': ' + why if why else ''}. lakelog evaluates the Spark functions and operators listed in "
            "specs/spark-expressions.md; nothing was written",
            thing, self.what,
        )

    def invalid(self, message: str) -> NoReturn:
        raise PredicateError(f"the {self.what} ({self.text}) is not valid Spark SQL: {message}")

    # ------------------------------------------------------------ walking
    def run(self) -> Sql:
        return self.node(parse(self.text, self.what))

    def node(self, n: exp.Expression) -> Sql:
        handler = NODES.get(type(n))
        if handler is not None:
            return handler(self, n)
        if isinstance(n, exp.Anonymous):
            name = function_name(n)
            fn = FUNCTIONS.get(name)
            if fn is None:
                self.refuse(f"function {name}()")
            if any(isinstance(a, (exp.Star, exp.Kwarg, exp.Lambda)) for a in n.expressions):
                self.invalid(f"{name}() takes plain arguments")
            return fn(self, list(n.expressions), name)
        if isinstance(n, (exp.CurrentTimestamp, exp.CurrentDate)):
            return _current(self, "current_date" if isinstance(n, exp.CurrentDate) else "current_timestamp")
        if isinstance(n, (exp.Window, exp.Subquery, exp.Select, exp.Exists)):
            self.refuse({exp.Window: "a window function"}.get(type(n), "a subquery"))
        self.refuse(f"{_describe(n)}")

    def args(self, nodes: list[exp.Expression], name: str, low: int, high: int | None = None) -> list[Sql]:
        high = low if high is None else high
        if not low <= len(nodes) <= high:
            want = f"{low}" if low == high else f"{low} to {high}"
            self.invalid(f"{name}() takes {want} arguments, not {len(nodes)}")
        return [self.node(a) for a in nodes]

    # ------------------------------------------------------------ typing helpers
    def cast(self, s: Sql, t: SparkType, context: str = "") -> Sql:
        """``s`` implicitly cast to ``t`` as Spark's type coercion casts it (an ANSI cast)."""
        from .casts import cast

        if s.type == t:
            return s
        return cast(self, s, t, implicit=context or True)

    def common(self, items: list[Sql], context: str, sensitive: bool = False) -> tuple[list[Sql], SparkType]:
        """``items`` cast to the one type Spark gives them all (CASE branches, COALESCE, IN, comparisons);
        strings take the collation Spark's collation coercion gives them (``collation.resolve``;
        ``sensitive``: the operation compares them)."""
        t = items[0].type
        for s in items[1:]:
            w = t if t.name == s.type.name == "string" else T.wider(t, s.type)
            if w is None:
                w = _string_to_datetime(t, s.type)
            if w is None:
                if "string" in (t.name, s.type.name):
                    self.refuse(f"{context} mixing {t} and {s.type}",
                                "Spark casts the string implicitly there; write the CAST you mean, e.g. CAST(x AS BIGINT)")
                self.invalid(f"{context} cannot mix {t} and {s.type}")
            t = w
        if t.name == "string":
            t = resolve(self, items, context, sensitive)
        return [self.cast(s, t, context) for s in items], t

    def expect(self, s: Sql, context: str, *kinds: str) -> Sql:
        """``s`` when its type is one of ``kinds`` (``numeric``, ``integral``, ``string``, ... or a type name)."""
        ok = s.type.void or any(getattr(s.type, k, False) if k in _FAMILIES else s.type.name == k for k in kinds)
        if not ok:
            if s.type.name == "string" or "string" in kinds:
                self.refuse(f"{context} on {s.type}", f"Spark casts it implicitly there; write the CAST you mean (it takes {' or '.join(kinds)})")
            self.invalid(f"{context} takes {' or '.join(kinds)}, not {s.type}")
        return s

    def null_skip(self, args: list[Sql], build: Callable[..., str], type: SparkType, fails: bool = False,
                  propagates: bool = True) -> Sql:
        """A NULL-intolerant Spark function of ``args``: NULL when an argument is NULL, and (as Spark's
        ``nullSafeEval``) an argument is only evaluated when the ones before it are not NULL.
        ``propagates``: DuckDB's ``build`` already yields NULL for a NULL argument."""
        texts = [a.text for a in args]
        body = build(*texts)
        if not propagates:
            body = f"(CASE WHEN {' OR '.join(f'({t}) IS NULL' for t in texts)} THEN NULL ELSE {body} END)"
        last = max((i for i, a in enumerate(args) if a.fails and i > 0), default=0)
        if last:
            guards = " ".join(f"WHEN ({t}) IS NULL THEN NULL" for t in texts[:last])
            body = f"(CASE {guards} ELSE {body} END)"
        return Sql(body, type, fails or any(a.fails for a in args))


_FAMILIES = {"numeric", "integral", "fractional", "is_decimal", "datetime", "atomic"}


def _string_to_datetime(a: SparkType, b: SparkType) -> SparkType | None:
    # ANSI coercion casts a string compared with a date or timestamp to that type.
    if a.name == "string" and b.datetime:
        return b
    if b.name == "string" and a.datetime:
        return a
    return None


def _current(tr: Translator, name: str) -> Sql:
    if not tr.now:
        tr.refuse(f"{name}()", "its value depends on when the expression runs (Delta refuses it in constraints and generated columns)")
    if name == "current_date":
        return Sql("CAST(current_timestamp AS DATE)", T.DATE)  # the UTC date: the engine's session time zone is UTC
    return Sql("CAST(current_timestamp AS TIMESTAMP WITH TIME ZONE)", T.TIMESTAMP)


def _now_function(tr: Translator, args: list, name: str) -> Sql:
    tr.args(args, name, 0)
    return _current(tr, "current_date" if name in ("current_date", "curdate") else "current_timestamp")


for _name in ("current_date", "curdate", "current_timestamp", "now"):
    FUNCTIONS[_name] = _now_function
entry(("current_timestamp", "current_date", "now"), "datetime",
      "column defaults only: the time of the write (UTC); refused in CHECK constraints and generated columns")


_NODE_NAMES = {exp.RegexpLike: "RLIKE", exp.Interval: "INTERVAL", exp.BitwiseAnd: "&",
               exp.BitwiseOr: "|", exp.BitwiseXor: "^", exp.BitwiseNot: "~", exp.BitwiseLeftShift: "<<", exp.BitwiseRightShift: ">>",
               exp.Lambda: "a lambda", exp.Star: "*", exp.Placeholder: "a parameter", exp.Array: "ARRAY[...]"}


def _describe(n: exp.Expression) -> str:
    for cls, name in _NODE_NAMES.items():
        if isinstance(n, cls):
            return name
    try:
        return f"{type(n).__name__} ({n.sql('spark')})"
    except Exception:  # noqa: BLE001 - only for the message
        return type(n).__name__


# ---------------------------------------------------------------- columns and literals

def _column(tr: Translator, n: exp.Column) -> Sql:
    parts = [p.name for p in n.parts]
    found = tr.columns.get(parts[0].lower())
    if found is None:
        known = ", ".join(sorted(name for name, _ in tr.columns.values()))
        tr.invalid(f"unknown column {parts[0]!r} (the table has {known or 'no columns'})")
    name, t = found
    sql = '"' + name.replace('"', '""') + '"'
    for p in parts[1:]:
        if t.name != "struct":
            tr.invalid(f"{'.'.join(parts)}: {name!r} is not a struct")
        field = next(((fname, ft) for fname, ft in t.fields if fname.lower() == p.lower()), None)
        if field is None:
            tr.invalid(f"{'.'.join(parts)}: no field {p!r} in {t}")
        name, t = field
        sql = f"struct_extract({sql}, {quote(name)})"
    return Sql(sql, t.with_strength(T.IMPLICIT))  # (a column's collation: implicit)


def _dot(tr: Translator, n: exp.Dot) -> Sql:
    base = tr.node(n.this)
    if base.type.name != "struct":
        tr.refuse(f"field access on {base.type}")
    field = next(((f, t) for f, t in base.type.fields if f.lower() == n.name.lower()), None)
    if field is None:
        tr.invalid(f"no field {n.name!r} in {base.type}")
    return Sql(f"struct_extract({base.text}, {quote(field[0])})", field[1].with_strength(T.IMPLICIT), base.fails)


def _bracket(tr: Translator, n: exp.Bracket) -> Sql:
    base = tr.node(n.this)
    if base.type.name != "array" or len(n.expressions) != 1:
        tr.refuse(f"[] on {base.type}" if base.type.name != "array" else "[] with several indexes")
    index = tr.node(n.expressions[0])
    if not (index.type.integral or index.type.void):
        tr.invalid(f"an array index is an integer, not {index.type}")
    index = tr.cast(index, T.LONG)
    element = base.type.fields[0][1].with_strength(T.IMPLICIT)
    # Spark (ANSI): 0-based; an index outside the array is an error (INVALID_ARRAY_INDEX)
    bad = raise_sql("INVALID_ARRAY_INDEX", "the index is outside the array")
    return tr.null_skip([base, index], lambda a, i: f"(CASE WHEN {i} < 0 OR {i} >= len({a}) THEN {bad} ELSE {a}[{i} + 1] END)", element,
                        fails=True)


entry("[]", "operator", "arr[i]: the element at 0-based index i of an array; an index outside it is an error (ANSI)")

_SAFE_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t", "r": "\r", "%": "\\%", "_": "\\_"}


def string_value(tr: Translator, n: exp.Literal) -> str:
    """The value Spark gives a string literal (its escapes, which sqlglot does not all read as Spark does,
    limited to a set both agree on)."""
    start, end = n.meta.get("start"), n.meta.get("end")
    raw = tr.text[start:end + 1] if start is not None and end is not None else None
    if raw is None or len(raw) < 2 or raw[0] not in "'\"" or raw[-1] != raw[0]:
        return n.this
    return _unescape(tr, raw)


def _unescape(tr: Translator, raw: str) -> str:
    body, out, i = raw[1:-1], [], 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt not in _SAFE_ESCAPES:
                tr.refuse(f"the escape sequence \\{nxt} in the string literal {raw}", "write the character itself")
            out.append(_SAFE_ESCAPES[nxt])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _raw_literals(text: str, start: int) -> list[tuple[str, bool]]:
    """The quoted literals written one after the other from ``start``: (raw text, whether it directly
    follows the previous one with the same quote, as in 'it''s')."""
    out: list[tuple[str, bool]] = []
    i, previous_end = start, -1
    while i < len(text) and text[i] in "'\"":
        q, j = text[i], i + 1
        while j < len(text) and text[j] != q:
            j += 2 if text[j] == "\\" else 1
        out.append((text[i:j + 1], bool(out) and i == previous_end and out[-1][0][-1] == q))
        i = previous_end = j + 1
        while i < len(text) and text[i].isspace():
            i += 1
    return out


def _literal(tr: Translator, n: exp.Literal) -> Sql:
    if n.is_string:
        v = string_value(tr, n)
        return Sql(quote(v), T.STRING, value=v, literal=True)
    return number_literal(n.this)


def _negative(tr: Translator, n: exp.Neg) -> Sql:
    inner = n.this
    if isinstance(inner, exp.Literal) and not inner.is_string:
        return number_literal("-" + inner.this)  # Spark reads -5 as one literal (so -2147483648 is an INT)
    suffixed = suffix_literal(inner, negative=True)  # (and -128Y a TINYINT)
    if suffixed is not None:
        return suffixed
    from .arithmetic import negate  # (arithmetic imports this module)

    return negate(tr, tr.node(inner), "unary -")


def _concat_literals(tr: Translator, n: exp.Concat) -> Sql:
    # sqlglot makes adjacent string literals a Concat: Spark joins 'a' 'b' into one literal, and reads 'it''s'
    # (no space between) as one literal holding a quote
    parts = n.expressions
    if not all(isinstance(e, exp.Literal) and e.is_string for e in parts) or parts[0].meta.get("start") is None:
        tr.refuse(_describe(n))
    raws = _raw_literals(tr.text, parts[0].meta["start"])
    if len(raws) != len(parts):
        tr.refuse(_describe(n))
    v = ""
    for raw, touching in raws:
        v += (raw[0] if touching else "") + _unescape(tr, raw)
    return Sql(quote(v), T.STRING, value=v, literal=True)


entry(("integer literals", "L Y S suffixes"), "literal",
      "5 is an int, beyond int a bigint, beyond bigint a decimal; -5 is one literal (so -2147483648 is an int); 5L bigint, "
      "5Y tinyint, 5S smallint; a suffixed literal beyond its type's range (128Y) is refused, as Spark's parser refuses it")
entry(("decimal literals", "BD suffix"), "literal", "1.50 is decimal(3,2) (its digits); 1.5BD the same")
entry(("double literals", "D F suffixes", "exponent"), "literal",
      "1e3 and 1.5D are doubles, 1.5F a float (its digits rounded once); beyond the type's range (3.4028235E38F, 1e309) refused, as in Spark")
entry(("string literals",), "literal",
      "'...' or \"...\"; adjacent literals are joined; escapes \\\\ \\' \\\" \\n \\t \\r and \\% \\_ (kept for LIKE) "
      "(other escapes are refused)")
entry(("DATE '...'", "TIMESTAMP '...'", "TIMESTAMP_NTZ '...'"), "literal",
      "a date as CAST(string AS DATE); a timestamp 'yyyy-MM-dd[ HH:mm[:ss[.ffffff]]]' with an optional Z, UTC or +hh:mm "
      "(UTC when none; other forms refused)")
entry(("TRUE", "FALSE", "NULL"), "literal", "NULL takes the type its context gives it")
entry(("column references", "struct fields a.b"), "literal", "names resolved ignoring case, as Delta does")


def _null(tr: Translator, n: exp.Null) -> Sql:
    return Sql("NULL", T.VOID, value=None, literal=True)


def _boolean(tr: Translator, n: exp.Boolean) -> Sql:
    return Sql("TRUE" if n.this else "FALSE", T.BOOLEAN, value=bool(n.this), literal=True)


def _paren(tr: Translator, n: exp.Paren) -> Sql:
    inner = tr.node(n.this)
    return Sql(f"({inner.text})", inner.type, inner.fails, inner.value, inner.literal)


# ---------------------------------------------------------------- the table of node types

NODES.update({
    exp.Column: _column,
    exp.Dot: _dot,
    exp.Bracket: _bracket,
    exp.Literal: _literal,
    exp.Neg: _negative,
    exp.Concat: _concat_literals,
    exp.Null: _null,
    exp.Boolean: _boolean,
    exp.Paren: _paren,
})

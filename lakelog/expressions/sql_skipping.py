"""A SQL predicate as a pyarrow expression for skipping files: a relaxation, never a restriction.

The parts of a predicate that map exactly onto pyarrow (comparisons of a column with a literal, ``IN``,
``BETWEEN``, ``IS [NOT] NULL``, ``LIKE 'prefix%'``, ``AND``/``OR``/``NOT``) are translated; everything
else becomes TRUE. Every row the SQL predicate selects satisfies the result, so files whose partition
values and stats exclude it hold no selected row. Literals are compared as the engine compares them
(``Engine.literal``); anything uncertain is not translated.
"""

from __future__ import annotations

from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from ..schema import collations
from ..schema.types import ColumnNames
from .sql import Engine

# A comparison's tree type with its sides swapped, and the pyarrow expression of each (shared with
# lakelog.dml.exact_predicate, which reads the same trees).
FLIPPED_COMPARISON = {
    "COMPARE_EQUAL": "COMPARE_EQUAL",
    "COMPARE_NOTEQUAL": "COMPARE_NOTEQUAL",
    "COMPARE_LESSTHAN": "COMPARE_GREATERTHAN",
    "COMPARE_GREATERTHAN": "COMPARE_LESSTHAN",
    "COMPARE_LESSTHANOREQUALTO": "COMPARE_GREATERTHANOREQUALTO",
    "COMPARE_GREATERTHANOREQUALTO": "COMPARE_LESSTHANOREQUALTO",
}
COMPARISON_OPS: dict[str, Callable[[pc.Expression, Any], pc.Expression]] = {
    "COMPARE_EQUAL": lambda f, v: f == v,
    "COMPARE_NOTEQUAL": lambda f, v: f != v,
    "COMPARE_LESSTHAN": lambda f, v: f < v,
    "COMPARE_GREATERTHAN": lambda f, v: f > v,
    "COMPARE_LESSTHANOREQUALTO": lambda f, v: f <= v,
    "COMPARE_GREATERTHANOREQUALTO": lambda f, v: f >= v,
}

Resolver = Callable[[tuple[str, ...]], str | None]


def prune_expression(tree: dict, schema: pa.Schema, engine: Engine, resolve: Resolver | None = None) -> pc.Expression | None:
    """A pyarrow expression that every row selected by the SQL predicate ``tree`` satisfies (None: no
    such restriction is known, every file is a candidate).

    ``resolve`` maps a column reference to a column of ``schema`` (None: not a table column, e.g. a
    source column in a merge); by default unqualified names of ``schema`` resolve to themselves.
    Float columns are never translated (NaN and signed zeros make bounds unsafe).
    """
    if resolve is None:
        index = ColumnNames(schema.names)
        resolve = lambda ref: index.find(ref[0]) if len(ref) == 1 else None  # noqa: E731
    return _Translator(schema, engine, resolve).relaxed(tree)


class _Translator:
    def __init__(self, schema: pa.Schema, engine: Engine, resolve: Resolver):
        self.schema, self.engine, self.resolve = schema, engine, resolve

    def column(self, node: dict) -> tuple[str, pa.DataType] | None:
        if node.get("class") != "COLUMN_REF":
            return None
        name = self.resolve(tuple(node["column_names"]))
        if name is None:
            return None
        t = self.schema.field(name).type
        if pa.types.is_floating(t) or pa.types.is_nested(t) or collations.of_field(self.schema.field(name)) is not None:
            return None  # (a collated column compares otherwise than pyarrow would)
        return name, t

    def relaxed(self, node: dict) -> pc.Expression | None:
        """Satisfied by every row the node selects (None: TRUE)."""
        kind = node.get("type")
        if kind == "CONJUNCTION_AND":
            parts = [p for p in (self.relaxed(c) for c in node["children"]) if p is not None]
            return _combine(parts, "and")
        if kind == "CONJUNCTION_OR":
            parts = [self.relaxed(c) for c in node["children"]]
            return None if any(p is None for p in parts) else _combine(parts, "or")
        if node.get("class") == "FUNCTION" and node.get("function_name") == "~~":
            return self._like_prefix(node)
        return self.exact(node)

    def exact(self, node: dict) -> pc.Expression | None:
        """Agrees with the node on every row where the node is TRUE or FALSE (None: cannot say)."""
        kind, cls = node.get("type"), node.get("class")
        if kind in ("CONJUNCTION_AND", "CONJUNCTION_OR"):
            parts = [self.exact(c) for c in node["children"]]
            if any(p is None for p in parts):
                return None
            return _combine(parts, "and" if kind == "CONJUNCTION_AND" else "or")
        if kind == "OPERATOR_NOT":
            inner = self.exact(node["children"][0])
            return None if inner is None else ~inner
        if kind in ("OPERATOR_IS_NULL", "OPERATOR_IS_NOT_NULL"):
            col = self.column(node["children"][0])
            if col is None:
                return None
            e = pc.field(col[0]).is_null()
            return e if kind == "OPERATOR_IS_NULL" else ~e
        if cls == "COMPARISON" and kind in COMPARISON_OPS:
            left, right, op = node["left"], node["right"], kind
            if self.column(left) is None:
                left, right, op = right, left, FLIPPED_COMPARISON[kind]
            col = self.column(left)
            if col is None:
                return None
            v = self.engine.literal(right, col[1])
            return None if v is None else COMPARISON_OPS[op](pc.field(col[0]), v)
        if kind == "COMPARE_IN":
            col = self.column(node["children"][0])
            if col is None:
                return None
            values = []
            for lit in node["children"][1:]:
                if lit.get("class") == "CONSTANT" and lit["literal"]["kind"] == "NULL_LITERAL":
                    continue  # never makes IN true
                v = self.engine.literal(lit, col[1])
                if v is None:
                    return None
                values.append(v.as_py())
            return pc.field(col[0]).isin(pa.array(values, col[1])) if values else None
        if kind == "COMPARE_BETWEEN":
            col = self.column(node["input"])
            if col is None:
                return None
            lo, hi = self.engine.literal(node["lower"], col[1]), self.engine.literal(node["upper"], col[1])
            if lo is None or hi is None:
                return None
            f = pc.field(col[0])
            return (f >= lo) & (f <= hi)
        return None

    def _like_prefix(self, node: dict) -> pc.Expression | None:
        args = [a["expression"] for a in node.get("arguments") or []]
        if len(args) != 2:
            return None
        col = self.column(args[0])
        lit = args[1]
        if col is None or not pa.types.is_string(col[1]) or lit.get("class") != "CONSTANT" or lit["literal"]["kind"] != "STRING":
            return None
        pattern = lit["literal"]["text"]
        prefix = ""
        for ch in pattern:
            if ch in "%_\\":
                break
            prefix += ch
        if not prefix:
            return None
        f = pc.field(col[0])
        e = f >= pa.scalar(prefix)
        nxt = ord(prefix[-1]) + 1
        if nxt <= 0x10FFFF and not 0xD800 <= nxt <= 0xDFFF:
            e = e & (f < pa.scalar(prefix[:-1] + chr(nxt)))
        return e


def _combine(parts: list[pc.Expression], how: str) -> pc.Expression | None:
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out = (out & p) if how == "and" else (out | p)
    return out

"""The simplest SQL predicates as pyarrow expressions that select exactly the rows the SQL engine does,
evaluated without a round trip through the engine (e.g. ``x < 0.01``).

Only what maps one to one is translated: a comparison of a signed-integer or double column with a
numeric literal that both sides read as the same number, ``IS [NOT] NULL``, ``AND``/``OR``/``NOT``
(pyarrow's Kleene logic is SQL's three-valued logic). The engine orders NaN above every number (NaN
> 1 is true there, false in IEEE arithmetic), so ``>`` and ``>=`` on a double also select NaN.
Anything else (other types, collations, functions, casts, wide literals) gives None: the engine
evaluates it.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from ..schema import arrow_values
from ..schema.types import ColumnNames
from ..expressions.filters import NEGATED_OP
from ..expressions.sql_skipping import COMPARISON_OPS, FLIPPED_COMPARISON

_NAN_ABOVE = ("COMPARE_GREATERTHAN", "COMPARE_GREATERTHANOREQUALTO")
# A plain decimal of at most 15 significant and 18 digits in all: the engine's DECIMAL literal (an int64
# over 10**scale, both exact doubles) converted to DOUBLE is the nearest double, as Python's float() of
# the text is.
_DECIMAL = re.compile(r"-?(\d+)(?:\.(\d+))?")
INTEGER_BITS = {pa.int8(): 8, pa.int16(): 16, pa.int32(): 32, pa.int64(): 64}  # the signed integer types, by width


def column_ref(node: dict, index: ColumnNames) -> str | None:
    """The table column a parse-tree node names, when it is a bare (unqualified) column reference."""
    if node.get("class") != "COLUMN_REF" or len(node.get("column_names") or ()) != 1:
        return None
    return index.find(node["column_names"][0])


def number_literal(node: dict, t: pa.DataType) -> int | float | None:
    """The number a numeric literal node is, exactly as the engine reads it against a column of type ``t``
    (double or a signed integer), or None when that is not certain: for an integer column an integer
    literal within int64; for a double column an integer literal of at most 2**53 or a plain decimal
    (``_DECIMAL``), a zero as +0.0 (a DECIMAL has no sign of zero). An integer column against a fraction
    compares as DECIMAL in the engine: None."""
    lit = node.get("literal") if node.get("class") == "CONSTANT" else None
    if not isinstance(lit, dict) or not isinstance(lit.get("text"), str):
        return None
    text, kind = lit["text"], lit.get("kind")
    if kind == "INTEGER" and re.fullmatch(r"-?\d+", text):
        v = int(text)
        if t == pa.float64():
            return float(v) if abs(v) <= 2**53 else None
        return v if t in INTEGER_BITS and -(2**63) <= v < 2**63 else None
    m = _DECIMAL.fullmatch(text) if kind == "NUMERIC" and t == pa.float64() else None
    if m is None:
        return None
    whole, fraction = m.group(1), m.group(2) or ""
    if len(whole) + len(fraction) > 18 or len((whole + fraction).lstrip("0")) > 15:
        return None
    v = float(text)
    return v if v != 0 else 0.0


def exact_expression(tree: dict, schema: pa.Schema) -> pc.Expression | None:
    """The pyarrow expression selecting exactly the rows the SQL predicate ``tree`` (DuckDB's parse tree)
    selects over a table of ``schema`` (rows where it is TRUE), or None when it is not that simple."""
    try:
        return _Exact(schema).of(tree)
    except _NotExact:
        return None


class _NotExact(Exception):
    pass


class _Exact:
    def __init__(self, schema: pa.Schema):
        self.schema = schema
        self.index = ColumnNames(schema.names)

    def of(self, node: dict) -> pc.Expression:
        cls, kind = node.get("class"), node.get("type")
        if cls == "CONJUNCTION" and kind in ("CONJUNCTION_AND", "CONJUNCTION_OR"):
            parts = [self.of(c) for c in node["children"]]
            out = parts[0]
            for p in parts[1:]:
                out = (out & p) if kind == "CONJUNCTION_AND" else (out | p)  # (and_kleene / or_kleene)
            return out
        if cls == "OPERATOR" and kind == "OPERATOR_NOT" and len(node.get("children") or ()) == 1:
            return ~self.of(node["children"][0])
        if cls == "OPERATOR" and kind in ("OPERATOR_IS_NULL", "OPERATOR_IS_NOT_NULL") and len(node.get("children") or ()) == 1:
            name, _ = self.column(node["children"][0])
            field = pc.field(name)
            return field.is_null() if kind == "OPERATOR_IS_NULL" else field.is_valid()  # (NaN is not NULL)
        if cls == "COMPARISON" and kind in COMPARISON_OPS:
            left, right = node["left"], node["right"]
            if left.get("class") == "CONSTANT":
                left, right, kind = right, left, FLIPPED_COMPARISON[kind]
            name, t = self.column(left)
            value = self.literal(right, t)
            out = COMPARISON_OPS[kind](pc.field(name), value)
            if pa.types.is_floating(t) and kind in _NAN_ABOVE:
                out = out | pc.field(name).is_nan()
            return out
        raise _NotExact

    def column(self, node: dict) -> tuple[str, pa.DataType]:
        name = column_ref(node, self.index)
        if name is None:
            raise _NotExact
        field = self.schema.field(name)
        if field.metadata:  # (collations, variants, geospatial types and other marked columns)
            raise _NotExact
        if field.type not in INTEGER_BITS and field.type != pa.float64():
            raise _NotExact
        return name, field.type

    def literal(self, node: dict, t: pa.DataType) -> pa.Scalar:
        v = number_literal(node, t)
        if v is None:
            raise _NotExact
        # (an integer compared in int64: exact for every signed integer column)
        return arrow_values.scalar(v, pa.float64() if t == pa.float64() else pa.int64())


_DNF_OPS = {"COMPARE_EQUAL": "=", "COMPARE_NOTEQUAL": "!=", "COMPARE_LESSTHAN": "<", "COMPARE_GREATERTHAN": ">",
            "COMPARE_LESSTHANOREQUALTO": "<=", "COMPARE_GREATERTHANOREQUALTO": ">="}
MAX_DNF_TERMS = 64


def fits_integer(v: int, t: pa.DataType) -> bool:
    """Whether the integer ``v`` is in the range of the signed integer type ``t``."""
    bits = INTEGER_BITS[t]
    return -(2 ** (bits - 1)) <= v < 2 ** (bits - 1)


def prune_filters(tree: dict, schema: pa.Schema) -> list[list[tuple]] | None:
    """DNF filter tuples that every row the simple predicate ``tree`` selects satisfies (a relaxation, as
    ``sql_skipping.prune_expression``), for skipping files by their stats without building a dataset;
    None: no restriction known. Comparisons of integer columns with integer literals in the column's
    range become terms; everything else (doubles, whose stats are never used, IS [NOT] NULL) is TRUE."""
    try:
        return _dnf(tree, schema, ColumnNames(schema.names), False)
    except _NotExact:
        return None


def _dnf(node: dict, schema: pa.Schema, index: ColumnNames, negated: bool) -> list[list[tuple]] | None:
    kind = node.get("type")
    if kind == "OPERATOR_NOT":
        return _dnf(node["children"][0], schema, index, not negated)
    if kind in ("CONJUNCTION_AND", "CONJUNCTION_OR"):
        parts = [_dnf(c, schema, index, negated) for c in node["children"]]
        if (kind == "CONJUNCTION_AND") != negated:  # (NOT (a OR b) is NOT a AND NOT b)
            out: list[list[tuple]] = [[]]
            for p in parts:
                if p is not None:  # (TRUE: no term)
                    out = [a + b for a in out for b in p]
                    if len(out) > MAX_DNF_TERMS:
                        raise _NotExact
            return out if out != [[]] else None
        if any(p is None for p in parts):
            return None
        return [c for p in parts for c in p]
    if node.get("class") == "COMPARISON" and kind in _DNF_OPS:
        left, right = node["left"], node["right"]
        if left.get("class") == "CONSTANT":
            left, right, kind = right, left, FLIPPED_COMPARISON[kind]
        name = column_ref(left, index)
        if name is None:
            return None
        field = schema.field(name)
        v = number_literal(right, field.type) if field.type in INTEGER_BITS and not field.metadata else None
        if v is None or not fits_integer(v, field.type):
            return None
        op = _DNF_OPS[kind]
        # (NOT (c < v) is TRUE only where c is not NULL and c >= v)
        return [[(name, NEGATED_OP[op] if negated else op, v)]]
    return None


def filter_table(table: pa.Table, expression: pc.Expression, columns: list[str]) -> pa.Table:
    """``columns`` of the rows of ``table`` where ``expression`` is TRUE, in no particular order. Run by
    Acero's own module: ``pyarrow.dataset`` (``ds.dataset(table).to_table``, ``Table.filter``) imports
    pandas, ~40 MiB and 0.2 s of a fresh process."""
    from pyarrow._acero import Declaration, FilterNodeOptions, ProjectNodeOptions, TableSourceNodeOptions

    plan = Declaration.from_sequence([
        Declaration("table_source", TableSourceNodeOptions(table)),
        Declaration("filter", FilterNodeOptions(expression)),
        Declaration("project", ProjectNodeOptions([pc.field(c) for c in columns], columns)),
    ])
    return plan.to_table(use_threads=False)

"""The simplest SQL predicates and values parsed without DuckDB, into the parse tree DuckDB's own parser
(``lakelog.expressions.sql.parse_expression``) gives for the same text.

The grammar is small: column references (an unquoted name that is no SQL keyword, or a double-quoted
one), integer and plain decimal literals (``-`` directly before the digits), string literals
(``''`` for a quote), the comparisons ``= == <> != < <= > >=``, ``IS [NOT] NULL``, ``NOT``, ``AND``,
``OR`` and parentheses, with SQL's precedence (comparisons, then ``NOT``, ``AND``, ``OR``). Any other
text (a function, a cast, an exponent, a comment, another operator, a keyword used as a name, ...) gives
None, and DuckDB parses it as before. ``tests/test_simple_sql.py`` checks the trees against DuckDB's.
"""

from __future__ import annotations

import re

# DuckDB's keywords other than its unreserved ones (``duckdb_keywords()``): as a bare name they are no
# column reference, so text using them is left to DuckDB. (Unreserved keywords are names there too.)
KEYWORDS = frozenset("""
all analyse analyze and anti any array as asc asof asymmetric at authorization between bigint binary bit
boolean both by case cast char character check coalesce collate collation column columns concurrently
constraint create cross dec decimal default deferrable desc describe distinct do else end except exists
extract false fetch float for foreign freeze from full generated glob group grouping grouping_id having
ilike in initially inner inout int integer intersect interval into is isnull join lambda lateral leading
left like limit map national natural nchar none not notnull null nullif numeric offset on only or order
out outer overlaps overlay pivot pivot_longer pivot_wider placing position positional precision primary
qualify real references returning right row select semi setof show similar smallint some struct
substring summarize symmetric table tablesample then time timestamp to trailing treat trim true
try_cast tuple union unique unpack unpivot using values varchar variadic verbose when where window with
xmlattributes xmlconcat xmlelement xmlexists xmlforest xmlnamespaces xmlparse xmlpi xmlroot
xmlserialize xmltable
""".split())

_TOKEN = re.compile(r"""
    (?P<space>[ \t\r\n]+)
  | (?P<number>-?\d{1,18}(?:\.\d{1,18})?)(?![\w.$])
  | (?P<string>'(?:[^']|'')*')(?![\w'$])
  | (?P<quoted>"(?:[^"]|"")+")
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)(?![\w$"'])
  | (?P<op>[-+*/<>=~!@#%^&|`?]+)
  | (?P<paren>[()])
""", re.VERBOSE)
_COMPARISONS = {"=": "COMPARE_EQUAL", "==": "COMPARE_EQUAL", "<>": "COMPARE_NOTEQUAL", "!=": "COMPARE_NOTEQUAL",
                "<": "COMPARE_LESSTHAN", "<=": "COMPARE_LESSTHANOREQUALTO", ">": "COMPARE_GREATERTHAN",
                ">=": "COMPARE_GREATERTHANOREQUALTO"}


class _NotSimple(Exception):
    pass


def _tokens(text: str) -> list[tuple[str, str]]:
    out, at = [], 0
    while at < len(text):
        m = _TOKEN.match(text, at)
        if m is None:
            raise _NotSimple
        kind = m.lastgroup
        value = m.group(kind)
        at = m.end()
        if kind == "space":
            continue
        if kind == "op" and value not in _COMPARISONS:
            raise _NotSimple  # (other operators, comments, or a sign that is not directly before a number)
        if kind == "name":
            if value.lower() in KEYWORDS:
                kind, value = "keyword", value.upper()
        out.append((kind, value))
    return out


def parse_simple(text: str, value: bool = False) -> dict | None:
    """DuckDB's parse tree of ``text`` when it is in the grammar above (None: not, or not certainly);
    ``value``: a value rather than a condition, i.e. one literal or column reference."""
    if not isinstance(text, str):
        return None
    try:
        parser = _Parser(_tokens(text))
        tree = parser.operand() if value else parser.disjunction()
        if parser.at != len(parser.tokens):
            raise _NotSimple
        return tree
    except _NotSimple:
        return None


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]):
        self.tokens, self.at = tokens, 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, kind: str, value: str | None = None) -> str:
        t = self.peek()
        if t is None or t[0] != kind or (value is not None and t[1] != value):
            raise _NotSimple
        self.at += 1
        return t[1]

    def _conjunction(self, word: str, part) -> dict:
        parts = [part()]
        while self.peek() == ("keyword", word):
            self.at += 1
            parts.append(part())
        if len(parts) == 1:
            return parts[0]
        kind = "CONJUNCTION_" + word
        children = [c for p in parts for c in (p["children"] if p.get("type") == kind else [p])]  # (DuckDB flattens)
        return {"class": "CONJUNCTION", "type": kind, "children": children}

    def disjunction(self) -> dict:
        return self._conjunction("OR", self.conjunction)

    def conjunction(self) -> dict:
        return self._conjunction("AND", self.negation)

    def negation(self) -> dict:
        if self.peek() == ("keyword", "NOT"):
            self.at += 1
            return {"class": "OPERATOR", "type": "OPERATOR_NOT", "children": [self.negation()]}
        return self.comparison()

    def comparison(self) -> dict:
        if self.peek() == ("paren", "("):
            self.at += 1
            inner = self.disjunction()
            self.take("paren", ")")
            return inner
        left = self.operand()
        t = self.peek()
        if t == ("keyword", "IS"):
            self.at += 1
            kind = "OPERATOR_IS_NULL"
            if self.peek() == ("keyword", "NOT"):
                self.at += 1
                kind = "OPERATOR_IS_NOT_NULL"
            self.take("keyword", "NULL")
            if left["class"] != "COLUMN_REF":
                raise _NotSimple
            return {"class": "OPERATOR", "type": kind, "children": [left]}
        if t is None or t[0] != "op":
            raise _NotSimple
        self.at += 1
        right = self.operand()
        if (left["class"] == "COLUMN_REF") == (right["class"] == "COLUMN_REF"):
            raise _NotSimple  # (a column against a literal only)
        return {"class": "COMPARISON", "type": _COMPARISONS[t[1]], "left": left, "right": right}

    def operand(self) -> dict:
        t = self.peek()
        if t is None:
            raise _NotSimple
        kind, value = t
        self.at += 1
        if kind == "name":
            return {"class": "COLUMN_REF", "type": "COLUMN_REF", "column_names": [value]}
        if kind == "quoted":
            return {"class": "COLUMN_REF", "type": "COLUMN_REF", "column_names": [value[1:-1].replace('""', '"')]}
        if kind == "number":
            return _constant("NUMERIC" if "." in value else "INTEGER", value)
        if kind == "string":
            return _constant("STRING", value[1:-1].replace("''", "'"))
        raise _NotSimple


def _constant(kind: str, text: str) -> dict:
    return {"class": "CONSTANT", "type": "VALUE_CONSTANT", "literal": {"kind": kind, "text": text}}


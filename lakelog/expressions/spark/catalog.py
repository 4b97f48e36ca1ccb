"""The table of what the layer accepts: every Spark function, operator and cast it translates, each
with a note on how DuckDB computes Spark's value. Handlers register here; ``specs/spark-expressions.md``
is generated from this table (a test keeps the two equal)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .types import SparkType

_NOTHING = object()


@dataclass(frozen=True)
class Sql:
    """A translated (sub)expression: DuckDB SQL text computing Spark's value, of Spark type ``type``.

    ``fails``: the SQL may raise for some rows (where Spark in ANSI mode raises too), so it must only
    run for the rows Spark evaluates it for (AND/OR, CASE branches, COALESCE and the arguments after a
    NULL one are lazy in Spark). ``value``: the Python value of a constant (a literal, or an expression
    of literals lakelog folded), for arguments that must be constant (patterns, formats)."""

    text: str
    type: SparkType
    fails: bool = False
    value: Any = field(default=_NOTHING, compare=False)
    literal: bool = False  # written as a literal (Spark types integer literals in decimal arithmetic by their digits)

    @property
    def constant(self) -> bool:
        return self.value is not _NOTHING


@dataclass(frozen=True)
class Entry:
    """One supported Spark function, operator or cast: ``names`` as Spark spells them, ``kind`` (the spec's
    section) and ``note`` (Spark's semantics and how DuckDB computes them)."""

    names: tuple[str, ...]
    kind: str
    note: str


ENTRIES: list[Entry] = []
FUNCTIONS: dict[str, Callable] = {}  # lower-case Spark function name -> handler(translator, args, name) -> Sql
NODES: dict[type, Callable] = {}  # sqlglot node class (an operator, CAST, ...) -> handler(translator, node) -> Sql

KINDS = {
    "operator": "Operators and predicates",
    "conditional": "Conditional functions",
    "cast": "Casts (CAST, try_cast, ::, and the type-named functions such as int(x))",
    "string": "String functions",
    "math": "Numeric functions",
    "datetime": "Date and time functions",
    "hash": "Hash functions",
    "literal": "Literals",
}


def entry(names: str | tuple[str, ...], kind: str, note: str) -> Entry:
    e = Entry(names if isinstance(names, tuple) else (names,), kind, note)
    ENTRIES.append(e)
    return e


def function(names: str | tuple[str, ...], kind: str, note: str) -> Callable[[Callable], Callable]:
    """Register a function handler under every spelling in ``names``."""

    def register(handler: Callable) -> Callable:
        e = entry(names, kind, note)
        for n in e.names:
            FUNCTIONS[n] = handler
        return handler

    return register


def quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def raise_sql(error: str, detail: str) -> str:
    """DuckDB SQL raising Spark's error ``error`` (its error class) for the row."""
    return f"error({quote(f'[{error}] {detail}')})"


def fail_when(condition: str, error: str, detail: str, value: str) -> str:
    """``value``, or Spark's error where ``condition`` is true."""
    return f"(CASE WHEN {condition} THEN {raise_sql(error, detail)} ELSE {value} END)"

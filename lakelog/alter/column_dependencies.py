"""Which table expressions read a column, decided as Delta decides it before it renames, drops or
changes the type of a column (``SchemaUtils.containsDependentExpression``): an expression reading
``a.b`` depends on ``a`` (renaming ``a`` breaks it), on ``a.b`` and on ``a.b.c``, but not on ``a.c``.
The expressions are CHECK constraints, generation expressions and (lakelog is stricter than Delta here,
whose invariants would stop resolving) column invariants.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..table_features.row_rules import Constraint, GeneratedColumn, WriterFeatures


def expression_paths(text: str) -> list[tuple[str, ...]] | None:
    """The column paths a Spark SQL expression reads, lower-cased (``b.d * 100 + arr[0]``: ``(b, d)``
    and ``(arr,)``; an element or value taken by subscript counts as its whole column). None when the
    expression does not parse (callers then treat every column as read)."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(text, read="spark")
    except sqlglot.errors.SqlglotError:
        return None
    return [tuple(p.name.lower() for p in c.parts) for c in tree.find_all(exp.Column)]


def reads(text: str, path: list[str]) -> bool:
    """Whether the expression ``text`` depends on the column at ``path`` (names, any case)."""
    wanted = [p.lower() for p in path]
    paths = expression_paths(text)
    if paths is None:
        return True
    return any(all(a == b for a, b in zip(p, wanted)) for p in paths)


@dataclass
class Dependents:
    """The expressions that read one column."""

    constraints: list[Constraint] = field(default_factory=list)
    invariants: list[Constraint] = field(default_factory=list)
    generated: list[GeneratedColumn] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.constraints or self.invariants or self.generated)


def dependents(features: WriterFeatures | None, path: list[str]) -> Dependents:
    """The CHECK constraints, invariants and generated columns of a table whose expressions read the
    column at ``path`` (a generated column does not read itself: it may be renamed or dropped)."""
    out = Dependents()
    if features is None:
        return out
    for c in features.constraints:
        if reads(c.expression, path):
            (out.constraints if c.kind == "CHECK constraint" else out.invariants).append(c)
    out.generated = [g for g in features.generated if reads(g.expression, path)]
    return out

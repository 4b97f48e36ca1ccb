"""Spark's NULL-handling and conditional functions (CASE and if() are in ``translate``)."""

from __future__ import annotations

from . import types as T
from .catalog import Sql, function
from .operators import case_when, compare


@function("coalesce", "conditional", "the first non-NULL argument, cast to their common type; later arguments not evaluated")
def coalesce(tr, args, name):
    if not args:
        tr.invalid("coalesce() takes at least 1 argument")
    items, t = tr.common([tr.node(a) for a in args], name)
    if len(items) == 1:
        return items[0]
    return Sql(f"coalesce({', '.join(i.text for i in items)})", t, any(i.fails for i in items))


@function(("nvl", "ifnull"), "conditional", "coalesce(a, b)")
def nvl(tr, args, name):
    a, b = tr.args(args, name, 2)
    (a, b), t = tr.common([a, b], name)
    return Sql(f"coalesce({a.text}, {b.text})", t, a.fails or b.fails)


@function("nullif", "conditional", "nullif(a, b): NULL where a = b, else a (of a's type)")
def nullif(tr, args, name):
    a, b = tr.args(args, name, 2)
    eq = compare(tr, a, b, "=")
    return case_when(tr, [(eq, Sql(f"CAST(NULL AS {a.type.duckdb})", a.type, value=None))], a) if not a.type.void else a


@function("nvl2", "conditional", "nvl2(a, b, c): b where a is not NULL, else c")
def nvl2(tr, args, name):
    a, b, c = tr.args(args, name, 3)
    return case_when(tr, [(Sql(f"(({a.text}) IS NOT NULL)", T.BOOLEAN, a.fails), b)], c)


@function("isnull", "conditional", "x IS NULL")
def isnull(tr, args, name):
    (a,) = tr.args(args, name, 1)
    return Sql(f"(({a.text}) IS NULL)", T.BOOLEAN, a.fails)


@function("isnotnull", "conditional", "x IS NOT NULL")
def isnotnull(tr, args, name):
    (a,) = tr.args(args, name, 1)
    return Sql(f"(({a.text}) IS NOT NULL)", T.BOOLEAN, a.fails)


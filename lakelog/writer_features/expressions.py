"""Delta stores CHECK constraints, invariants, generation expressions and column defaults as Spark SQL
text; lakelog evaluates them with its embedded engine (DuckDB). sqlglot translates one dialect into the
other (backticks, ``rlike``, ``date_format`` patterns, ...), so an expression means what Spark means by
it. Timestamps are evaluated in UTC (Spark uses its session time zone)."""

from __future__ import annotations

from functools import lru_cache

from ..errors import PredicateError


@lru_cache(maxsize=256)
def to_engine_sql(text: str, what: str) -> str:
    """``text`` (one Spark SQL expression) as DuckDB SQL; PredicateError when it is not one expression."""
    import sqlglot
    from sqlglot.errors import SqlglotError

    if not isinstance(text, str) or not text.strip():
        raise PredicateError(f"the {what} must be a non-empty SQL expression, not {text!r}")
    try:
        trees = sqlglot.parse(text, read="spark")
    except SqlglotError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PredicateError(f"the {what} {text!r} is not a Spark SQL expression: {first}") from None
    if len(trees) != 1 or trees[0] is None or not _is_expression(trees[0]):
        raise PredicateError(f"the {what} {text!r} must be exactly one SQL expression")
    return trees[0].sql(dialect="duckdb")


def _is_expression(tree) -> bool:
    from sqlglot import exp

    return not isinstance(tree, (exp.Query, exp.Command, exp.DDL, exp.DML))


@lru_cache(maxsize=256)
def referenced_columns(text: str) -> frozenset[str]:
    """The top-level column names a Spark SQL expression reads, lower-cased (Delta resolves names
    ignoring case); a struct field reference ``a.b`` reads column ``a``."""
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(text, read="spark")
    out = set()
    for c in tree.find_all(exp.Column):
        parts = [p.name for p in c.parts]
        out.add(parts[0].lower())
    return frozenset(out)

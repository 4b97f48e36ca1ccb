"""Delta stores CHECK constraints, invariants, generation expressions and column defaults as Spark SQL
text; ``lakelog.expressions.spark`` translates each into DuckDB SQL that computes exactly Spark's value
(ANSI mode, timestamps in UTC), refusing by name what it cannot (``UnsupportedExpressionError``). This
module applies that to a table's columns, and turns a row the expression fails on (an overflow, an
invalid cast: an error in Spark too) into ``ExpressionEvaluationError`` naming the rule and the row."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

import pyarrow as pa

from ..errors import ExpressionEvaluationError, PredicateError

# ``expressions.spark`` (and sqlglot under it) is imported by the functions that translate: a table
# without constraints, generated columns or defaults never needs it, and a script should not pay its import.


def referenced_columns(text: str) -> frozenset[str]:
    """The top-level column names a Spark SQL expression reads, lower-cased."""
    from ..expressions.spark import referenced_columns as of

    return of(text)


def condition_sql(text: str, schema: pa.Schema, what: str) -> str:
    """A CHECK constraint or invariant over ``schema``'s columns as DuckDB SQL (a boolean)."""
    from ..expressions.spark import columns_of, translate_condition

    return translate_condition(text, columns_of(schema), what).text


def value_sql(text: str, schema: pa.Schema, what: str, target: pa.DataType, *, default: bool = False) -> str:
    """A generation expression or column default over ``schema``'s columns, as DuckDB SQL of ``target``'s
    type (cast as Spark casts, ANSI). ``default``: a column default, which may read the time of the write."""
    from ..expressions.spark import columns_of, from_arrow, translate_value

    return translate_value(text, columns_of(schema), what, from_arrow(target), now=default).text


def constant_sql(text: str, what: str) -> str:
    """A column default that reads no column, as DuckDB SQL of its Spark type (it may read the time of the write)."""
    from ..expressions.spark import translate

    return translate(text, (), what, True).text


def value_type(text: str, schema: pa.Schema, what: str) -> pa.DataType:
    """The Arrow type of the column a generation expression over ``schema`` fills (its Spark type)."""
    from ..expressions.spark import columns_of, translate

    t = translate(text, columns_of(schema), what).type
    if t.void:
        raise PredicateError(f"the {what} ({text}) has no type (it is NULL); cast it, e.g. CAST(NULL AS STRING)")
    if t.name == "other":
        raise PredicateError(f"the {what} ({text}) has a type lakelog does not store")
    return t.arrow


def failing_row(table: pa.Table, runs: Callable[[pa.Table], Any]) -> dict | None:
    """The first row of ``table`` for which ``runs`` (a query over the rows it is given) raises
    ``PredicateError``, found by bisection; None when it raises for no rows (the query itself is wrong)."""
    try:
        runs(table.slice(0, 0))
    except PredicateError:
        return None
    lo, hi = 0, table.num_rows
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            runs(table.slice(lo, mid - lo))
        except PredicateError:
            hi = mid
            continue
        lo = mid
    return table.slice(lo, 1).to_pylist()[0] if table.num_rows else None


def evaluation_error(label: str, text: str, name: str, row: dict, cause: Exception, show: Callable[[dict], str]) -> ExpressionEvaluationError:
    reason = str(cause).split(": ", 1)[-1]
    return ExpressionEvaluationError(
        f"{label} ({text}) fails for the row {show(row)}: {reason}. Spark (in ANSI mode, its default) fails such a write too; "
        "nothing was committed",
        name, text, row,
    )


@lru_cache(maxsize=256)
def to_engine_sql(text: str, what: str) -> str:
    """``text`` (one Spark SQL expression a statement gives, e.g. INSERT ... REPLACE WHERE) as DuckDB SQL by
    sqlglot's dialect translation. Not for the expressions a table stores (``condition_sql``, ``value_sql``:
    those mean exactly what Spark means)."""
    import sqlglot
    from sqlglot.errors import SqlglotError

    if not isinstance(text, str) or not text.strip():
        raise PredicateError(f"the {what} must be a non-empty SQL expression, not {text!r}")
    try:
        trees = sqlglot.parse(text, read="spark")
    except SqlglotError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PredicateError(f"the {what} {text!r} is not a Spark SQL expression: {first}") from None
    if len(trees) != 1 or trees[0] is None or isinstance(trees[0], (sqlglot.exp.Query, sqlglot.exp.Command, sqlglot.exp.DDL, sqlglot.exp.DML)):
        raise PredicateError(f"the {what} {text!r} must be exactly one SQL expression")
    return trees[0].sql(dialect="duckdb")


__all__ = ["condition_sql", "value_sql", "value_type", "constant_sql", "referenced_columns", "failing_row", "evaluation_error",
           "to_engine_sql"]

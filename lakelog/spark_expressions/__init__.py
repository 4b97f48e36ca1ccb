"""Spark SQL expressions stored in a table (CHECK constraints, invariants, generation expressions,
column defaults), evaluated with Spark's meaning by DuckDB.

Delta stores these expressions as Spark SQL text and Spark evaluates them with its own semantics (ANSI
mode, Spark 4's default): ``dayofweek`` counts from Sunday = 1, ``substring`` from 1, ``/`` is always
fractional, integer overflow and invalid casts are errors, ``round`` rounds half up... This package
translates one expression into DuckDB SQL that computes exactly Spark's value, or raises where Spark
raises. It accepts only what is in its table (``catalog.ENTRIES``, rendered into
``specs/spark-expressions.md``); anything else is refused by name with ``UnsupportedExpressionError``,
never approximated. Timestamps are evaluated in UTC (Spark with ``spark.sql.session.timeZone=UTC``).

Strings compare under their collations as Spark's do (``collation``: a table column's ``__COLLATIONS``,
UTF8_LCASE lower-cased, two columns' different collations an error). Expressions users pass to the
Python API (``update``, ``merge``, predicates) are DuckDB SQL and do not come here (they compare
collated columns through ``lakelog.collations``)."""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable

import pyarrow as pa

from ..errors import PredicateError
from . import arithmetic, casts, collation, conditional, dates, numeric, operators, strings  # noqa: F401  (they register their functions)
from .catalog import ENTRIES, KINDS, Sql
from .casts import CASTS
from .translate import Translator, referenced_columns
from .types import SparkType, from_arrow, of_field

Columns = tuple[tuple[str, SparkType], ...]


def columns_of(schema: pa.Schema | Iterable[pa.Field]) -> Columns:
    """The (name, Spark type) of each column of an Arrow schema, as ``translate`` takes them: strings
    under the collations the fields' ``__COLLATIONS`` give (``lakelog.collations``)."""
    return tuple((f.name, of_field(f)) for f in schema)


@lru_cache(maxsize=1024)
def translate(text: str, columns: Columns, what: str, now: bool = False) -> Sql:
    """``text`` (one Spark SQL expression over ``columns``) as DuckDB SQL computing Spark's value.

    ``what`` names the expression in errors (``CHECK constraint positive``). ``PredicateError`` for text
    that is not a valid expression; ``UnsupportedExpressionError`` (also a ``PredicateError``) naming
    the function, operator or cast lakelog cannot evaluate exactly. ``now``: the expression may read the
    time of the write (current_timestamp(), current_date(): column defaults only)."""
    return _translator(text, columns, what, now).run()


def _translator(text: str, columns: Columns, what: str, now: bool) -> Translator:
    by_name: dict = {}
    for name, t in columns:
        by_name.setdefault(name.lower(), (name, t))
    return Translator(text, by_name, what, now)


def translate_condition(text: str, columns: Columns, what: str) -> Sql:
    """A CHECK constraint or invariant: a boolean expression."""
    out = translate(text, columns, what)
    if out.type.name not in ("boolean", "void"):
        raise PredicateError(f"the {what} ({text}) is of type {out.type}, not a boolean condition")
    return out


def translate_value(text: str, columns: Columns, what: str, target: SparkType, now: bool = False) -> Sql:
    """A generation expression or column default, cast (as Spark casts, ANSI) to its column's type."""
    out = translate(text, columns, what, now)
    if out.type == target:
        return out
    return _cast_to_column(text, columns, what, target, now)


@lru_cache(maxsize=512)
def _cast_to_column(text: str, columns: Columns, what: str, target: SparkType, now: bool) -> Sql:
    tr = _translator(text, columns, what, now)
    return casts.cast(tr, tr.run(), target, implicit=f"the {what} stored as {target}")


__all__ = ["translate", "translate_condition", "translate_value", "referenced_columns", "columns_of", "ENTRIES", "KINDS",
           "CASTS", "SparkType", "from_arrow", "Sql"]

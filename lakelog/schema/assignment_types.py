"""Assigned values (an update's SET, a merge clause's values) meet their column by write_table's rule.

An engine's cast to the column's type loses data without a word: DuckDB's CAST rounds a DOUBLE into
a BIGINT, rounds decimals to fewer places and drops the struct fields the column lacks; Spark's
truncates and matches struct fields by position. So an assignment's result type must first be one
``lakelog.schema.conform.merge_type`` accepts for the column's, as ``write_table`` accepts data: lossless
widenings only, struct fields matched by name at any depth. The cast then changes no value.

* A struct field the column lacks (at any depth, inside lists and maps too) is refused, unless the
  operation evolves the schema (a merge with ``schema_mode='merge'``), which adds it to the table;
  an update never does (Delta's UPDATE has no schema evolution).
* A literal (``5``, ``-2.5``, ``'2026-01-01'``, ``DATE '2026-01-01'``, ``CAST('2.5' AS DOUBLE)``:
  what an assignment's Python values become) is checked by value instead, since SQL types ``5`` as
  INTEGER whatever column it is meant for: it is stored when converting it to the column's type and
  back gives the literal itself (``5`` into a smallint column; not ``2.5`` into a bigint one, nor
  ``'2.5'`` into an integer one), for a number into a number column, a date or timestamp into a date
  or timestamp column, and a string into a number, date, timestamp or boolean column.
* With schema evolution, integers go into a double column as write_table stores them: only when
  every value is exact (|v| <= 2**53), which is checked on the values of a bare source column (what
  ``update_all``/``insert_all`` assign); other integer expressions must be cast.
"""

from __future__ import annotations

from typing import Callable

import pyarrow as pa

from .conform import added_fields, conform_array, merge_type
from ..errors import PredicateError, SchemaMismatchError
from .types import delta_type_string


def _family(t: pa.DataType) -> str | None:
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "number"
    if pa.types.is_date(t) or pa.types.is_timestamp(t):
        return "time"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_boolean(t):
        return "boolean"
    return None


def literal_may_fit(value: pa.DataType, target: pa.DataType) -> bool:
    """Whether a literal of type ``value`` is checked by value for a column of type ``target``."""
    v, t = _family(value), _family(target)
    return v is not None and t is not None and (v == t or (v == "string" and t != "string"))


def stored_type(column: str, target: pa.DataType, value: pa.DataType, *, what: str, text: str, cast_hint: Callable[[], str],
                evolve: bool, how_to_evolve: str | None, check_values: Callable[[pa.DataType], None] | None = None,
                literal_fits: Callable[[], bool] | None = None) -> pa.DataType:
    """The type of column ``column`` (now ``target``) once values of type ``value`` (those of the SQL
    ``text``) are stored in it: ``target``, or with the struct fields ``value`` adds when ``evolve``.

    Raises SchemaMismatchError when a value could be lost: a field the column lacks (``how_to_evolve``
    says how to let the operation add it; None: it cannot), or a type write_table would refuse
    (``cast_hint``: makes the sentence suggesting an explicit cast). ``check_values``: when the values
    are known (a bare source column), makes the checks write_table makes on values for a type (raises
    SchemaMismatchError); ``literal_fits``: for a literal, whether its value is stored exactly."""
    if pa.types.is_dictionary(value):
        value = value.value_type
    extra = added_fields(target, value, column)
    if extra and not evolve:
        if how_to_evolve is None:
            todo = ("an update cannot add fields to a table's struct (Delta's UPDATE has no schema evolution): leave them out of "
                    "the value, or add them to the table first (a write with schema_mode='merge')")
        else:
            todo = f"{how_to_evolve} to add them to the table, or leave them out of the value"
        raise SchemaMismatchError(
            f"{what}: the value {text!r} for column {column!r} has field(s) {extra} that the column's type "
            f"({delta_type_string(target)}) lacks, which storing it would drop; {todo}"
        )
    try:
        stored = merge_type(target, value, column, evolve)
        if evolve and check_values is None:
            # What merge_type accepts only value by value (integers into a double column) needs the values.
            merge_type(stored, value, column, False)
    except SchemaMismatchError as e:
        if e.table_type is None:  # (a struct lacking a required field, a field named in another case)
            raise SchemaMismatchError(f"{what}: the value {text!r} for column {column!r}: {e}") from None
        if literal_fits is not None and not pa.types.is_nested(value) and literal_may_fit(value, target) and literal_fits():
            return target
        raise _refusal(e, column, target, value, what, text, cast_hint, how_to_evolve, literal_fits is not None) from None
    if evolve and check_values is not None:
        try:
            merge_type(stored, value, column, False)
        except SchemaMismatchError:
            try:
                check_values(stored)
            except SchemaMismatchError as inexact:
                raise SchemaMismatchError(f"{what}: the value {text!r} for column {column!r}: {inexact} (a double holds "
                                          "integers exactly up to +-2**53; others are refused, never rounded)") from None
    return stored


def _refusal(e: SchemaMismatchError, column: str, target: pa.DataType, value: pa.DataType, what: str, text: str, cast_hint: Callable[[], str],
             how_to_evolve: str | None, literal: bool) -> SchemaMismatchError:
    show = delta_type_string
    if pa.types.is_null(e.table_type):
        todo = (f"{how_to_evolve} to give it the value's type" if how_to_evolve is not None else
                "an update cannot change a column's type; write such values with write_table(..., schema_mode='merge') first")
        return SchemaMismatchError(f"{what}: column {e.path!r} is void (it has only ever held nulls) and cannot take the value "
                                   f"{text!r} of type {show(e.data_type)}; {todo}", path=e.path, data_type=e.data_type, table_type=e.table_type)
    where = "" if e.path == column else f" (at {e.path!r}: {show(e.data_type)} into {show(e.table_type)})"
    if literal:
        problem = f"the literal {text} ({show(value)}) is not exactly a {show(target)} value, the type of column {column!r}"
    else:
        problem = f"the value {text!r} has type {show(value)}, which column {column!r} of type {show(target)} cannot store without loss"
    return SchemaMismatchError(f"{what}: {problem}{where}; write_table refuses such data too. {cast_hint()}",
                               path=e.path, data_type=e.data_type, table_type=e.table_type)


# ---------------------------------------------------------------- DuckDB (lakelog.dml)

def is_literal(tree: dict) -> bool:
    """Whether a parse tree (``lakelog.expressions.sql.parse_expression``) is a literal: a constant, or a cast of one
    (``DATE '2026-01-01'``, ``CAST('2.5' AS DOUBLE)``)."""
    if tree.get("class") == "CONSTANT":
        return True
    return tree.get("class") == "CAST" and not tree.get("try_cast") and is_literal(tree.get("child") or {})


def _duckdb_literal_fits(engine, text: str, target: pa.DataType) -> bool:
    (own,) = engine.result_types(f"SELECT ({text})", f"invalid value {text!r}")
    try:
        same = engine.query(f"SELECT CAST(CAST(({text}) AS {engine.sql_type(target)}) AS {own}) IS NOT DISTINCT FROM ({text})",
                            f"cannot store {text}")
    except PredicateError:  # out of the column type's range, or not a value of it
        return False
    return same.column(0)[0].as_py() is True


def value_types(engine, texts: list[str], from_sql: str, whats: list[str]) -> list[pa.DataType]:
    """The Arrow types of the SQL expressions ``texts`` over ``from_sql``, bound (not run) in one query
    (a ``lakelog.expressions.sql.Engine``); an expression that does not bind is a PredicateError naming its ``whats``."""
    if not texts:
        return []
    try:
        schema = engine.query(f"SELECT {', '.join(f'({t}) AS v{i}' for i, t in enumerate(texts))} FROM {from_sql} WHERE FALSE", "invalid values")
    except PredicateError:
        for text, what in zip(texts, whats):  # the one that fails, with its own message
            engine.query(f"SELECT ({text}) FROM {from_sql} WHERE FALSE", f"invalid {what} {text!r}")
        raise
    return [schema.field(i).type for i in range(len(texts))]


def check_assignment(engine, text: str, tree: dict, column: str, target: pa.DataType, value: pa.DataType, *, what: str,
                     evolve: bool = False, how_to_evolve: str | None = None, values: pa.ChunkedArray | None = None,
                     cast_hint: Callable[[], str] | None = None) -> pa.DataType:
    """``stored_type`` of the SQL ``text`` (parse tree ``tree``, type ``value`` from ``value_types``)
    assigned to ``column`` of type ``target``, literals checked with DuckDB (a ``lakelog.expressions.sql.Engine``);
    ``cast_hint`` defaults to suggesting ``CAST((text) AS <column type>)``."""
    if cast_hint is None:
        cast_hint = lambda: f"Cast it to say how to convert it: CAST(({text}) AS {engine.sql_type(target)})"  # noqa: E731
    fits = (lambda: _duckdb_literal_fits(engine, text, target)) if is_literal(tree) else None

    def check(t: pa.DataType) -> None:  # write_table's safe cast of ``values``
        conform_array(values, t, column)

    return stored_type(column, target, value, what=what, text=text, cast_hint=cast_hint, evolve=evolve, how_to_evolve=how_to_evolve,
                       check_values=check if values is not None else None, literal_fits=fits)


__all__ = ["stored_type", "check_assignment", "value_types", "is_literal", "literal_may_fit"]

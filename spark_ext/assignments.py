"""Update and merge values on Spark meet their column by write_table's rule, as on the Python path.

Spark types each value (its analysis of the expression); ``lakelog.assignment_types.stored_type``
decides, on the value's Arrow type, whether the column stores it without loss (or, for a merge with
schema evolution, which struct fields it adds). Spark's own cast would truncate a double into a
bigint and match struct fields by position (``named_struct('b', 1, 'a', 2)`` stored ``a`` = 1), so a
value that passes is converted by ``by_name``: struct fields by name at any depth (inside arrays and
maps too), missing ones null, then a plain cast of each leaf, which the check made lossless.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

from lakelog.assignment_types import stored_type
from lakelog.errors import SchemaMismatchError


def arrow_type(t: DataType) -> pa.DataType:
    """The Arrow type of Spark values of type ``t`` (as Spark hands them to Python: UTC timestamps)."""
    return to_arrow_schema(StructType([StructField("v", t, True)]), timezone="UTC").field(0).type


def value_types(frame: DataFrame, values: list[Column]) -> list[tuple[DataType, bool]]:
    """Per value (resolved against ``frame``, in one analysis): its Spark type, and whether Spark can
    compute it without a row (a literal, or an expression of literals)."""
    if not values:
        return []
    selected = frame.select(*[v.alias(f"v{i}") for i, v in enumerate(values)])
    types = [f.dataType for f in selected.schema.fields]
    try:
        exprs = selected._jdf.queryExecution().analyzed().expressions()
        foldable = [bool(exprs.apply(i).child().foldable()) for i in range(len(values))]  # (below the alias, which never is)
    except Exception:  # not a classic DataFrame (Spark Connect): treated as expressions
        foldable = [False] * len(values)
    return list(zip(types, foldable))


def _exact(frame: DataFrame, value: Column, own: DataType, target: DataType) -> bool:
    """Whether every value of ``value`` over ``frame`` converts to ``target`` and back to itself."""
    try:
        same = value.cast(target).cast(own).eqNullSafe(value)
        return frame.select(same.alias("same")).where(~F.col("same")).limit(1).count() == 0
    except Exception:  # out of the column type's range, or not a value of it (Spark's ANSI cast)
        return False


def checked_type(value: Column, own: DataType, column: str, target: pa.DataType, target_spark: DataType, *, what: str, text: str,
                 literals: DataFrame | None = None, evolve: bool = False, how_to_evolve: str | None = None,
                 source_column: tuple[DataFrame, str] | None = None, cast_hint: str | None = None) -> pa.DataType:
    """``stored_type`` of ``value`` (Spark type ``own``) assigned to ``column`` (Arrow type ``target``,
    Spark type ``target_spark``). ``literals``: the value is a literal (Spark computes it without a row:
    ``spark.range(1)``), or literals over those rows (an ``INSERT ... VALUES``), checked by value.
    ``source_column``: the value is that column of that DataFrame (its values are checked where
    write_table checks values); ``cast_hint`` replaces the suggested ``CAST((text) AS <column type>)``."""
    fits = (lambda: _exact(literals, value, own, target_spark)) if literals is not None else None
    check = None
    if source_column is not None:
        df, name = source_column

        def check(t: pa.DataType) -> None:  # integers into a double column: each must be exact, as write_table checks
            if not pa.types.is_floating(t):  # (integers in a struct's double field: not checked here)
                raise SchemaMismatchError(f"its integers would go into double fields of column {column!r}; cast them explicitly")
            c = F.col(f"`{name.replace('`', '``')}`")
            if df.where(c.isNotNull() & (F.abs(c) > 2**53)).limit(1).count():
                raise SchemaMismatchError(f"column {column!r} cannot be stored as double: an integer value is beyond +-2**53")

    return stored_type(
        column, target, arrow_type(own), what=what, text=text, evolve=evolve, how_to_evolve=how_to_evolve,
        cast_hint=lambda: cast_hint or f"Cast it to say how to convert it: CAST(({text}) AS {target_spark.simpleString()})",
        check_values=check, literal_fits=fits,
    )


def by_name(value: Column, own: DataType, target: DataType) -> Column:
    """``value`` (of Spark type ``own``) as ``target``: struct fields by name (fields ``own`` lacks are
    null) at any depth, leaves cast."""
    if own == target:
        return value
    if isinstance(own, StructType) and isinstance(target, StructType):
        have = {f.name.lower(): f for f in own.fields}
        fields = []
        for f in target.fields:
            src = have.get(f.name.lower())
            v = F.lit(None).cast(f.dataType) if src is None else by_name(value.getField(src.name), src.dataType, f.dataType)
            fields.append(v.alias(f.name))
        return F.when(value.isNull(), F.lit(None).cast(target)).otherwise(F.struct(*fields))
    if isinstance(own, ArrayType) and isinstance(target, ArrayType):
        return F.transform(value, lambda e: by_name(e, own.elementType, target.elementType))
    if isinstance(own, MapType) and isinstance(target, MapType):
        values = F.transform_values(value, lambda k, v: by_name(v, own.valueType, target.valueType))
        return F.transform_keys(values, lambda k, v: by_name(k, own.keyType, target.keyType))
    return value.cast(target)


__all__ = ["arrow_type", "value_types", "checked_type", "by_name"]

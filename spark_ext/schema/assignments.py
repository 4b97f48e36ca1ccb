"""Values meet their column on the Spark paths by Spark's store assignment, as Delta on Spark stores them.

``spark_ext.sql``'s INSERT, UPDATE and MERGE and ``LakelogTable``'s update and merge (explicit values
and ``*All``) convert each value to its column's type as Spark's ``TableOutputResolver`` does under
``spark.sql.storeAssignmentPolicy`` (``ANSI``, Spark's default; ``STRICT`` too; ``LEGACY`` is refused):

* ANSI: ``Cast.canANSIStoreAssign`` decides which types are stored, before any job: a number into any
  number column (``-1.0``, a ``decimal(2,1)``, into a ``double``; ``2.5`` into a ``bigint`` is 2), any
  atomic value into a string, a date or timestamp into a date or timestamp, NULL into anything; not a
  string into a number, date or boolean (write the ``CAST``), nor a string into a variant (write
  ``parse_json``). STRICT: only ``Cast.canUpCast``'s widenings.
* The conversion is Spark's ANSI cast whatever ``spark.sql.ansi.enabled`` says: decimals round half
  up, doubles truncate towards zero into integers, and a value out of the column type's range (NaN
  and infinities into an integer) fails the job with Spark's ``CAST_OVERFLOW_IN_TABLE_INSERT`` (Delta
  names the one of UPDATE and MERGE ``DELTA_CAST_OVERFLOW_IN_TABLE_WRITE``); nothing is committed.
* Struct fields go by position in an INSERT (without ``BY NAME``), by name (ignoring case) in BY NAME
  inserts, updates and merges, at any depth, inside arrays and maps too; a struct with more or fewer
  fields than its column's is refused (a merge with schema evolution first adds the fields a value
  brings; the ones a value lacks are then NULL). An array or map whose elements may be NULL does not
  go into one whose elements may not.

A refusal is a ``SchemaMismatchError`` naming Spark's error class (``INCOMPATIBLE_DATA_FOR_TABLE.*``),
the column, both types and the expression to write. The Python API keeps its stricter rule
(``lakelog.schema.assignment_types``: lossless conversions only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from lakelog.errors import SchemaMismatchError, UnsupportedFeatureError

POLICY_CONF = "spark.sql.storeAssignmentPolicy"
_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_DATETIME = (T.DateType, T.TimestampType, T.TimestampNTZType)
_DECIMAL_OF = {T.ByteType: (3, 0), T.ShortType: (5, 0), T.IntegerType: (10, 0), T.LongType: (20, 0)}  # DecimalType.forType


def arrow_type(t: T.DataType) -> pa.DataType:
    """The Arrow type of Spark values of type ``t`` (as Spark hands them to Python: UTC timestamps)."""
    return to_arrow_schema(T.StructType([T.StructField("v", t, True)]), timezone="UTC").field(0).type


def value_types(frame: DataFrame, values: list[Column]) -> list[T.DataType]:
    """The Spark type of each value, resolved against ``frame`` in one analysis."""
    if not values:
        return []
    return [f.dataType for f in frame.select(*[v.alias(f"v{i}") for i, v in enumerate(values)]).schema.fields]


@dataclass(frozen=True)
class Rule:
    """How values meet columns: ``what`` names the operation in messages; ``by_position``: struct fields
    by position (an INSERT without BY NAME); ``evolve``: struct fields a value lacks are NULL (a merge
    with schema evolution, whose column types already have the fields values bring)."""

    spark: Any = field(compare=False, repr=False)
    what: str
    policy: str = "ANSI"
    by_position: bool = False
    evolve: bool = False


def rule(spark, what: str, *, by_position: bool = False, evolve: bool = False) -> Rule:
    """The session's rule (``spark.sql.storeAssignmentPolicy``) for an operation."""
    policy = str(spark.conf.get(POLICY_CONF, "ANSI")).strip().upper()
    if policy not in ("ANSI", "STRICT"):
        raise UnsupportedFeatureError(f"{what}: {POLICY_CONF}={policy} is not supported on lakelog tables (LEGACY casts would "
                                      "store NULL or wrapped numbers for values out of range); use ANSI (Spark's default) or STRICT")
    return Rule(spark, what, policy, by_position, evolve)


def store(value: Column, own: T.DataType, target: T.DataType, column: str, rule: Rule, text: str) -> Column:
    """``value`` (Spark type ``own``, the SQL ``text``) converted for column ``column`` of type ``target``
    by ``rule`` (see the module doc); raises SchemaMismatchError, before any job, where Spark refuses."""
    return _Store(rule, column, text, own, target).convert(value, own, target, [column])


def ansi_cast(spark, value: Column, target: T.DataType, column: str, overflow: bool) -> Column:
    """Spark's cast of a table insertion (``TableOutputResolver.cast``): ``Cast`` in ANSI mode, whatever
    ``spark.sql.ansi.enabled`` says, and with ``overflow`` inside ``CheckOverflowInTableInsert``, whose
    error names ``column`` (a quoted path). Built in the JVM: no SQL function is Spark's ANSI cast."""
    jvm, session = getattr(spark, "_jvm", None), getattr(spark, "_jsparkSession", None)
    if jvm is None or session is None:
        raise UnsupportedFeatureError("lakelog's Spark writes need a classic (py4j) Spark session, not Spark Connect")
    expressions = jvm.org.apache.spark.sql.catalyst.expressions
    child = jvm.org.apache.spark.sql.classic.ExpressionUtils.expression(value._jc)
    zone = jvm.scala.Option.apply(spark.conf.get("spark.sql.session.timeZone"))
    expr = expressions.Cast(child, session.parseDataType(target.json()), zone, expressions.EvalMode.ANSI())
    if overflow:
        expr = expressions.CheckOverflowInTableInsert(expr, column)
    return Column(jvm.org.apache.spark.sql.Column(jvm.org.apache.spark.sql.classic.ExpressionColumnNode.apply(expr)))


def _quoted(path: list[str]) -> str:
    return ".".join("`" + p.replace("`", "``") + "`" for p in path)


def _same(a: T.DataType, b: T.DataType, names: bool, case: bool = False) -> bool:
    """Equal types ignoring nullability, and struct field names unless ``names`` (their case unless ``case``)."""
    if isinstance(a, T.StructType) and isinstance(b, T.StructType):
        def named(x: str, y: str) -> bool:
            return not names or (x == y if case else x.lower() == y.lower())
        return len(a.fields) == len(b.fields) and all(
            named(x.name, y.name) and _same(x.dataType, y.dataType, names, case) for x, y in zip(a.fields, b.fields))
    if isinstance(a, T.ArrayType) and isinstance(b, T.ArrayType):
        return _same(a.elementType, b.elementType, names, case)
    if isinstance(a, T.MapType) and isinstance(b, T.MapType):
        return _same(a.keyType, b.keyType, names, case) and _same(a.valueType, b.valueType, names, case)
    return a == b


def _wider_decimal(to: T.DecimalType, p: int, s: int) -> bool:
    return to.precision - to.scale >= p - s and to.scale >= s


def can_up_cast(src: T.DataType, dst: T.DataType) -> bool:
    """Spark's ``UpCastRule.canUpCast`` for atomic types: conversions that never lose a value or fail."""
    if src == dst or isinstance(src, T.NullType):
        return True
    if isinstance(src, T.VariantType):
        return False
    numeric = (*_INTEGRAL, T.FloatType, T.DoubleType)
    if type(src) in numeric and type(dst) in numeric:  # Spark's numeric precedence
        return numeric.index(type(src)) < numeric.index(type(dst))
    if isinstance(dst, T.DecimalType):  # (to.isWiderThan(from))
        if isinstance(src, T.DecimalType):
            return _wider_decimal(dst, src.precision, src.scale)
        return type(src) in _DECIMAL_OF and _wider_decimal(dst, *_DECIMAL_OF[type(src)])
    if isinstance(src, T.DecimalType):  # (from.isTighterThan(to))
        if type(dst) not in _DECIMAL_OF:
            return False
        p, s = _DECIMAL_OF[type(dst)]
        return src.precision - src.scale <= p - s and src.scale <= s
    if isinstance(src, _DATETIME) and isinstance(dst, (T.TimestampType, T.TimestampNTZType)):
        return True
    if (isinstance(src, T.TimestampType) and isinstance(dst, T.LongType)) or (isinstance(src, T.LongType) and isinstance(dst, T.TimestampType)):
        return True
    return dst == T.StringType() and isinstance(src, (T.AtomicType, T.CalendarIntervalType))


def can_ansi_store_assign(src: T.DataType, dst: T.DataType) -> bool:
    """Spark's ``Cast.canANSIStoreAssign`` for atomic types."""
    if src == dst or isinstance(src, T.NullType):
        return True
    if isinstance(src, T.NumericType) and isinstance(dst, T.NumericType):
        return True
    if isinstance(dst, T.StringType):
        return isinstance(src, T.AtomicType) or isinstance(src, T.CalendarIntervalType)
    return isinstance(src, _DATETIME) and isinstance(dst, _DATETIME)


class _Store:
    def __init__(self, rule: Rule, column: str, text: str, own: T.DataType, target: T.DataType):
        self.rule, self.column, self.text, self.own, self.target = rule, column, text, own, target

    def refuse(self, kind: str, path: list[str], problem: str, hint: str) -> SchemaMismatchError:
        where = "" if len(path) == 1 else f" (at {'.'.join(path)!r})"
        return SchemaMismatchError(
            f"{self.rule.what}: [INCOMPATIBLE_DATA_FOR_TABLE.{kind}] cannot store the value {self.text!r} of type "
            f"{self.own.simpleString()} in column {self.column!r} of type {self.target.simpleString()}{where}: {problem}; {hint}",
            path=".".join(path))

    def convert(self, value: Column, own: T.DataType, target: T.DataType, path: list[str]) -> Column:
        if _same(own, target, names=not self.rule.by_position):
            return value if _same(own, target, names=True, case=True) else value.cast(target)  # (the column's field names)
        if isinstance(own, T.NullType):
            return value.cast(target)
        if isinstance(target, T.StructType) and isinstance(own, T.StructType):
            return self._struct(value, own, target, path)
        if isinstance(target, T.ArrayType) and isinstance(own, T.ArrayType):
            self._nullable(own.containsNull, target.containsNull, "NULLABLE_ARRAY_ELEMENTS", "array elements", path)
            return F.transform(value, lambda e: self.convert(e, own.elementType, target.elementType, path + ["element"]))
        if isinstance(target, T.MapType) and isinstance(own, T.MapType):
            self._nullable(own.valueContainsNull, target.valueContainsNull, "NULLABLE_MAP_VALUES", "map values", path)
            out = value
            if not _same(own.valueType, target.valueType, names=not self.rule.by_position):
                out = F.transform_values(out, lambda k, v: self.convert(v, own.valueType, target.valueType, path + ["value"]))
            if not _same(own.keyType, target.keyType, names=not self.rule.by_position):
                out = F.transform_keys(out, lambda k, v: self.convert(k, own.keyType, target.keyType, path + ["key"]))
            return out
        return self._leaf(value, own, target, path)

    def _nullable(self, own: bool, target: bool, kind: str, what: str, path: list[str]) -> None:
        if own and not target:
            raise self.refuse(kind, path, f"its {what} may be NULL, the column's may not",
                              "filter the NULLs out (e.g. filter(a, x -> x IS NOT NULL)) or change the column to allow them")

    def _struct(self, value: Column, own: T.StructType, target: T.StructType, path: list[str]) -> Column:
        if self.rule.by_position:
            if len(own.fields) != len(target.fields):
                kind = "STRUCT_MISSING_FIELDS" if len(own.fields) < len(target.fields) else "EXTRA_STRUCT_FIELDS"
                raise self.refuse(kind, path, f"it has {len(own.fields)} field(s) where the column's struct has {len(target.fields)} "
                                  f"({[f.name for f in target.fields]}), matched by position",
                                  "give every field of the column's struct, in its order (or insert BY NAME)")
            pairs = [(value.getField(o.name), o.dataType, t) for o, t in zip(own.fields, target.fields)]
        else:
            have: dict[str, list[T.StructField]] = {}
            for f in own.fields:
                have.setdefault(f.name.lower(), []).append(f)
            wanted = {f.name.lower() for f in target.fields}
            extra = [f.name for f in own.fields if f.name.lower() not in wanted]
            if extra:
                raise self.refuse("EXTRA_STRUCT_FIELDS", path, f"it has field(s) {extra} that the column's struct lacks",
                                  "leave them out of the value" + ("" if self.rule.evolve else ", or add them to the table first "
                                                                   "(a merge withSchemaEvolution() adds them)"))
            pairs = []
            for t in target.fields:
                found = have.get(t.name.lower(), [])
                if len(found) > 1:
                    raise self.refuse("AMBIGUOUS_COLUMN_NAME", path + [t.name], f"it has {len(found)} fields named {t.name!r} (ignoring case)",
                                      "rename all but one")
                if not found and not self.rule.evolve:
                    raise self.refuse("CANNOT_FIND_DATA", path + [t.name], f"it lacks field {t.name!r} of the column's struct",
                                      "give every field (NULL for those to clear: named_struct(..., 'f', NULL))")
                pairs.append((value.getField(found[0].name) if found else None, found[0].dataType if found else T.NullType(), t))
        fields = []
        for v, o, t in pairs:
            v = F.lit(None).cast(t.dataType) if v is None else self.convert(v, o, t.dataType, path + [t.name])
            fields.append(v.alias(t.name))
        return F.when(value.isNull(), F.lit(None).cast(target)).otherwise(F.struct(*fields))

    def _leaf(self, value: Column, own: T.DataType, target: T.DataType, path: list[str]) -> Column:
        strict = self.rule.policy == "STRICT"
        ok = (isinstance(own, T.AtomicType) and isinstance(target, T.AtomicType)
              and (can_up_cast(own, target) if strict else can_ansi_store_assign(own, target)))
        if not ok:
            raise self.refuse("CANNOT_SAFELY_CAST", path, f"Spark's store assignment ({POLICY_CONF}={self.rule.policy}) does not convert "
                              f"{own.simpleString()} to {target.simpleString()}", self._hint(own, target, path, strict))
        return ansi_cast(self.rule.spark, value, target, _quoted(path), overflow=isinstance(target, (*_INTEGRAL, T.DecimalType))
                         and not can_up_cast(own, target))

    def _hint(self, own: T.DataType, target: T.DataType, path: list[str], strict: bool) -> str:
        text = self.text if len(path) == 1 else "<the value>"
        if isinstance(target, T.VariantType):
            if isinstance(own, T.StringType):
                return f"to store the string as JSON write parse_json({text}) (try_parse_json gives NULL for invalid JSON)"
            if isinstance(own, (T.StructType, T.MapType)):
                return f"write to_variant_object({text})"
            return f"write CAST(({text}) AS VARIANT)"
        if isinstance(own, T.VariantType):
            return f"write variant_get(({text}), '$', '{target.simpleString()}') or CAST(({text}) AS {target.simpleString()})"
        if strict:
            return f"{POLICY_CONF}=STRICT stores only widenings; write CAST(({text}) AS {target.simpleString()})"
        return f"write the conversion: CAST(({text}) AS {target.simpleString()})"


__all__ = ["POLICY_CONF", "ansi_cast", "Rule", "rule", "store", "arrow_type", "value_types", "can_up_cast", "can_ansi_store_assign"]

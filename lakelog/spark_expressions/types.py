"""Spark's data types as the expression layer sees them, their DuckDB and Arrow counterparts, and
Spark's rules for the type of a mixed expression (Spark 4, ANSI mode: ``AnsiTypeCoercion`` and
``DecimalPrecision`` with ``spark.sql.decimalOperations.allowPrecisionLoss=true``)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import orjson
import pyarrow as pa

from .. import collations

MAX_PRECISION = 38
BINARY_COLLATION = "UTF8_BINARY"
INDETERMINATE = "INDETERMINATE"  # two implicit collations met (Spark's indeterminate collation)
# How a string's collation was given (Spark's collation precedence: an explicit COLLATE wins over the
# implicit collation of a column, which wins over the default collation of a literal or a new string).
EXPLICIT, IMPLICIT, DEFAULT = "explicit", "implicit", "default"


@dataclass(frozen=True)
class SparkType:
    """A Spark SQL type: ``name`` as Spark's ``simpleString`` spells it (``int``, ``decimal``, ``struct``...).

    A string has a ``collation`` (Spark's name: ``UTF8_BINARY``, ``UTF8_LCASE``, ``UNICODE``...) and its
    ``strength`` (how it was given: ``explicit``, ``implicit`` or ``default``), which decide the
    collation an operation on several strings compares under; the strength is no part of the type's
    identity, as in Spark."""

    name: str
    precision: int = 0
    scale: int = 0
    fields: tuple[tuple[str, "SparkType"], ...] = ()
    collation: str = BINARY_COLLATION
    strength: str = field(default=DEFAULT, compare=False)

    def __str__(self) -> str:
        if self.name == "string" and self.collation != BINARY_COLLATION:
            return f"string collate {self.collation}"
        if self.name == "decimal":
            return f"decimal({self.precision},{self.scale})"
        if self.name == "struct":
            return "struct<" + ",".join(f"{n}:{t}" for n, t in self.fields) + ">"
        if self.name == "array":
            return f"array<{self.fields[0][1]}>"
        return self.name

    @property
    def duckdb(self) -> str:
        """DuckDB's name for this type (the type a translated expression yields)."""
        if self.name == "decimal":
            return f"DECIMAL({self.precision},{self.scale})"
        if self.name == "struct":
            return "STRUCT(" + ", ".join(f'"{n}" {t.duckdb}' for n, t in self.fields) + ")"
        if self.name == "array":
            return f"{self.fields[0][1].duckdb}[]"
        return _DUCKDB[self.name]

    @property
    def arrow(self) -> pa.DataType:
        """The Arrow type a Delta column of this type has in lakelog."""
        if self.name == "decimal":
            return pa.decimal128(self.precision, self.scale)
        if self.name == "struct":
            return pa.struct([(n, t.arrow) for n, t in self.fields])
        if self.name == "array":
            return pa.list_(self.fields[0][1].arrow)
        return _ARROW[self.name]

    # ---- families
    @property
    def integral(self) -> bool:
        return self.name in _INTEGRAL_RANK

    @property
    def fractional(self) -> bool:
        return self.name in ("float", "double")

    @property
    def is_decimal(self) -> bool:
        return self.name == "decimal"

    @property
    def numeric(self) -> bool:
        return self.integral or self.fractional or self.is_decimal

    @property
    def datetime(self) -> bool:
        return self.name in ("date", "timestamp", "timestamp_ntz")

    @property
    def void(self) -> bool:
        return self.name == "void"

    @property
    def atomic(self) -> bool:
        return self.name not in ("struct", "array", "other")

    @property
    def collated(self) -> bool:
        """A string under a collation other than UTF8_BINARY (comparisons and searches depend on it)."""
        return self.name == "string" and self.collation != BINARY_COLLATION

    def with_strength(self, strength: str) -> "SparkType":
        return self if self.name != "string" or self.strength == strength else replace(self, strength=strength)


def decimal(precision: int, scale: int) -> SparkType:
    return SparkType("decimal", precision, scale)


def bounded_decimal(precision: int, scale: int) -> SparkType:
    return decimal(min(precision, MAX_PRECISION), min(scale, MAX_PRECISION))


BOOLEAN, BYTE, SHORT, INT, LONG = (SparkType(n) for n in ("boolean", "tinyint", "smallint", "int", "bigint"))
FLOAT, DOUBLE, STRING, BINARY = (SparkType(n) for n in ("float", "double", "string", "binary"))
DATE, TIMESTAMP, TIMESTAMP_NTZ, VOID = (SparkType(n) for n in ("date", "timestamp", "timestamp_ntz", "void"))

_INTEGRAL_RANK = {"tinyint": 0, "smallint": 1, "int": 2, "bigint": 3}
_INTEGRAL_DECIMAL = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 20}  # DecimalType.forType
INTEGRAL_RANGE = {"tinyint": (-(2**7), 2**7 - 1), "smallint": (-(2**15), 2**15 - 1), "int": (-(2**31), 2**31 - 1), "bigint": (-(2**63), 2**63 - 1)}
_DUCKDB = {
    "boolean": "BOOLEAN", "tinyint": "TINYINT", "smallint": "SMALLINT", "int": "INTEGER", "bigint": "BIGINT",
    "float": "FLOAT", "double": "DOUBLE", "string": "VARCHAR", "binary": "BLOB", "date": "DATE",
    "timestamp": "TIMESTAMP WITH TIME ZONE", "timestamp_ntz": "TIMESTAMP", "void": "INTEGER",
}
_ARROW = {
    "boolean": pa.bool_(), "tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(), "bigint": pa.int64(),
    "float": pa.float32(), "double": pa.float64(), "string": pa.string(), "binary": pa.binary(), "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"), "timestamp_ntz": pa.timestamp("us"), "void": pa.null(),
}


def from_arrow(t: pa.DataType) -> SparkType:
    """The Spark type of a column lakelog reads as Arrow type ``t`` (``other`` for one no supported
    function takes, such as a map: a reference to it is allowed, any use is refused by name)."""
    if pa.types.is_boolean(t):
        return BOOLEAN
    for check, st in ((pa.types.is_int8, BYTE), (pa.types.is_int16, SHORT), (pa.types.is_int32, INT), (pa.types.is_int64, LONG),
                      (pa.types.is_float32, FLOAT), (pa.types.is_float64, DOUBLE), (pa.types.is_date32, DATE), (pa.types.is_null, VOID)):
        if check(t):
            return st
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return STRING
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return BINARY
    if pa.types.is_decimal(t) and t.precision <= MAX_PRECISION:
        return decimal(t.precision, t.scale)
    if pa.types.is_timestamp(t):
        return TIMESTAMP if t.tz is not None else TIMESTAMP_NTZ
    if pa.types.is_struct(t):
        return SparkType("struct", fields=tuple((t.field(i).name, from_arrow(t.field(i).type)) for i in range(t.num_fields)))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return SparkType("array", fields=(("element", from_arrow(t.value_type)),))
    return SparkType("other")


def string(collation: str = BINARY_COLLATION, strength: str = DEFAULT) -> SparkType:
    return SparkType("string", collation=collation, strength=strength)


def of_field(f: pa.Field) -> SparkType:
    """The Spark type of a table column read as Arrow field ``f``: its strings (at any depth) under the
    collations its ``__COLLATIONS`` gives (``lakelog.collations``), with a column's implicit strength."""
    raw = (f.metadata or {}).get(collations.ARROW_KEY)
    paths = orjson.loads(raw) if raw is not None else {}
    return _collated(f.type, f.name, paths if isinstance(paths, dict) else {})


def _collated(t: pa.DataType, path: str, paths: dict) -> SparkType:
    if pa.types.is_struct(t):
        return SparkType("struct", fields=tuple((t.field(i).name, of_field(t.field(i))) for i in range(t.num_fields)))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return SparkType("array", fields=(("element", _collated(t.value_type, f"{path}.element", paths)),))
    out = from_arrow(t)
    if out.name == "string":
        identifier = paths.get(path)
        c = collations.parse(identifier) if isinstance(identifier, str) else None
        return string(BINARY_COLLATION if c is None or c.binary else spark_collation_name(c), IMPLICIT)
    return out


def spark_collation_name(c: "collations.Collation") -> str:
    """Spark's name of a collation (``UTF8_LCASE``, ``UNICODE``, ``de``...): an identifier without its
    provider and version."""
    name = c.identifier.split(".")[1]
    return {"utf8_binary": BINARY_COLLATION, "utf8_lcase": "UTF8_LCASE", "unicode": "UNICODE"}.get(name.lower(), name)


def decimal_of(t: SparkType, literal: int | None = None) -> SparkType:
    """An integral or decimal type as the decimal Spark converts it to in decimal arithmetic; an integer
    literal (``literal``, its value) takes only the digits it has (``DecimalType.fromLiteral``)."""
    if t.is_decimal:
        return t
    if literal is not None:
        return decimal(max(1, len(str(abs(literal)))), 0)
    return decimal(_INTEGRAL_DECIMAL[t.name], 0)


def wider_decimal(a: SparkType, b: SparkType) -> SparkType:
    """``DecimalPrecision.widerDecimalType``: the larger integer part and both scales; past 38 digits the
    integer part is kept and the scale cut."""
    a, b = decimal_of(a), decimal_of(b)
    scale = max(a.scale, b.scale)
    integer = max(a.precision - a.scale, b.precision - b.scale)
    if integer + scale > MAX_PRECISION:
        return decimal(MAX_PRECISION, MAX_PRECISION - integer)
    return decimal(integer + scale, scale)


def wider(a: SparkType, b: SparkType) -> SparkType | None:
    """The type both sides of a comparison, a CASE or a COALESCE are cast to (``findWiderTypeForTwo``
    for the types this layer mixes); None when Spark would cast a string or refuse the pair, which
    lakelog refuses (the caller names it)."""
    if a == b:
        return a
    if a.void:
        return b
    if b.void:
        return a
    if a.numeric and b.numeric:
        if a.fractional or b.fractional:
            return FLOAT if a.name == b.name == "float" else DOUBLE
        if a.is_decimal or b.is_decimal:
            return wider_decimal(a, b)
        return a if _INTEGRAL_RANK[a.name] >= _INTEGRAL_RANK[b.name] else b
    if a.datetime and b.datetime:
        names = {a.name, b.name}
        return TIMESTAMP if "timestamp" in names else TIMESTAMP_NTZ
    return None


def adjust_decimal(precision: int, scale: int) -> SparkType:
    """``DecimalType.adjustPrecisionScale``: a result type wider than 38 digits keeps its integer part
    and at least 6 fractional digits."""
    if precision <= MAX_PRECISION:
        return decimal(precision, scale)
    int_digits = precision - scale
    min_scale = min(scale, 6)
    return decimal(MAX_PRECISION, max(MAX_PRECISION - int_digits, min_scale))


def decimal_result(op: str, a: SparkType, b: SparkType) -> tuple[SparkType, int, int]:
    """The result type of decimal ``a op b`` (both decimal: ``decimal_of`` first) and the exact result's
    (precision, scale) before Spark adjusts it to 38 digits."""
    p1, s1, p2, s2 = a.precision, a.scale, b.precision, b.scale
    if op in ("+", "-"):
        scale = max(s1, s2)
        precision = max(p1 - s1, p2 - s2) + scale + 1
    elif op == "*":
        precision, scale = p1 + p2 + 1, s1 + s2
    elif op == "/":
        scale = max(6, s1 + p2 + 1)
        precision = p1 - s1 + s2 + scale
    elif op == "%":
        scale = max(s1, s2)
        precision = min(p1 - s1, p2 - s2) + scale
        return bounded_decimal(precision, scale), precision, scale
    else:
        raise ValueError(op)
    return adjust_decimal(precision, scale), precision, scale


def parse_type_name(text: str) -> SparkType | None:
    """A Spark type as ``CAST(... AS <text>)`` spells it (sqlglot's rendering), or None."""
    t = text.strip().lower().replace(" ", "")
    simple = {
        "boolean": BOOLEAN, "tinyint": BYTE, "smallint": SHORT, "int": INT, "bigint": LONG, "float": FLOAT,
        "double": DOUBLE, "string": STRING, "binary": BINARY, "date": DATE, "timestamp": TIMESTAMP,
        "timestamp_ltz": TIMESTAMP, "timestamp_ntz": TIMESTAMP_NTZ, "decimal": decimal(10, 0),
    }
    if t in simple:
        return simple[t]
    if t.startswith("decimal(") and t.endswith(")"):
        parts = t[len("decimal("):-1].split(",")
        if len(parts) in (1, 2) and all(p.isdigit() for p in parts):
            p, s = int(parts[0]), int(parts[1]) if len(parts) == 2 else 0
            if 1 <= p <= MAX_PRECISION and s <= p:
                return decimal(p, s)
    return None

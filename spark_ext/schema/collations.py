"""Spark's collated string types (``STRING COLLATE UTF8_LCASE``) and lakelog's collation field metadata
(``lakelog.schema.collations``), both ways and at any depth (struct fields, array elements, map keys and
values): a table a DataFrame creates records them in ``__COLLATIONS``, as Delta does, and Spark reads a
table's collated strings as its collated string types, so it compares them under their collations."""

from __future__ import annotations

import orjson
import pyarrow as pa
from pyspark.sql.types import ArrayType, DataType, MapType, StringType, StructField, StructType

from lakelog.schema import collations


def _identifier(t: StringType) -> str | None:
    name = getattr(t, "collation", "UTF8_BINARY")
    if name.upper() == "UTF8_BINARY":
        return None
    return f"{StringType.collationProvider(name)}.{name}"


def _paths(key: str, t: DataType) -> dict[str, str]:
    """The ``__COLLATIONS`` entries of a field's type, keyed by path from the field (structs in it
    carry their own)."""
    if isinstance(t, StringType):
        identifier = _identifier(t)
        return {} if identifier is None else {key: identifier}
    if isinstance(t, ArrayType):
        return _paths(f"{key}.element", t.elementType)
    if isinstance(t, MapType):
        return {**_paths(f"{key}.key", t.keyType), **_paths(f"{key}.value", t.valueType)}
    return {}


def _type(a: pa.DataType, t: DataType) -> pa.DataType:
    if isinstance(t, StructType) and pa.types.is_struct(a):
        return pa.struct([_field(a.field(i), f) for i, f in enumerate(t.fields)])
    if isinstance(t, ArrayType) and pa.types.is_list(a):
        return pa.list_(a.value_field.with_type(_type(a.value_type, t.elementType)))
    if isinstance(t, ArrayType) and pa.types.is_large_list(a):
        return pa.large_list(a.value_field.with_type(_type(a.value_type, t.elementType)))
    if isinstance(t, MapType) and pa.types.is_map(a):
        return pa.map_(a.key_field.with_type(_type(a.key_type, t.keyType)), a.item_field.with_type(_type(a.item_type, t.valueType)),
                       a.keys_sorted)
    return a


def _field(a: pa.Field, f) -> pa.Field:
    out = a.with_type(_type(a.type, f.dataType))
    paths = _paths(f.name, f.dataType)
    if paths:
        out = out.with_metadata({**(out.metadata or {}), collations.ARROW_KEY: orjson.dumps(paths, option=orjson.OPT_SORT_KEYS)})
    return out


def with_collations(arrow: pa.Schema, spark: StructType) -> pa.Schema:
    """``arrow`` (``to_arrow_schema(spark)``, variants mapped) with the collations of ``spark``'s strings."""
    if "collate" not in spark.simpleString().lower():
        return arrow
    return pa.schema([_field(arrow.field(i), f) for i, f in enumerate(spark.fields)], metadata=arrow.metadata)


def _spark_type(t: DataType, a: pa.DataType, path: str, paths: dict) -> DataType:
    if isinstance(t, StringType):
        identifier = paths.get(path)
        c = collations.parse(identifier) if isinstance(identifier, str) else None
        # (Spark knows UTF8_LCASE and ICU's collations; the others lakelog reads as plain strings)
        return StringType(c.identifier.split(".")[1]) if c is not None and c.kind in ("lcase", "icu") else t
    if isinstance(t, StructType) and pa.types.is_struct(a):
        return StructType([_spark_field(f, a.field(f.name)) if a.get_field_index(f.name) >= 0 else f for f in t.fields])
    if isinstance(t, ArrayType) and (pa.types.is_list(a) or pa.types.is_large_list(a)):
        return ArrayType(_spark_type(t.elementType, a.value_type, f"{path}.element", paths), t.containsNull)
    if isinstance(t, MapType) and pa.types.is_map(a):
        return MapType(_spark_type(t.keyType, a.key_type, f"{path}.key", paths), _spark_type(t.valueType, a.item_type, f"{path}.value", paths),
                       t.valueContainsNull)
    return t


def _spark_field(f: StructField, a: pa.Field) -> StructField:
    raw = (a.metadata or {}).get(collations.ARROW_KEY)
    paths = orjson.loads(raw) if raw is not None else {}
    return StructField(f.name, _spark_type(f.dataType, a.type, f.name, paths if isinstance(paths, dict) else {}), f.nullable, f.metadata)


def spark_collations(spark: StructType, arrow: pa.Schema) -> StructType:
    """``spark`` (``from_arrow_schema`` of the lakelog schema ``arrow``) with the strings ``arrow``'s fields
    declare collated (``__COLLATIONS``) as Spark's collated strings."""
    if not collations.table_collations(arrow):
        return spark
    return StructType([_spark_field(f, arrow.field(f.name)) if arrow.get_field_index(f.name) >= 0 else f for f in spark.fields])


__all__ = ["with_collations", "spark_collations"]

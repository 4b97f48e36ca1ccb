"""Variant columns between lakelog and PySpark's Arrow form.

lakelog marks a variant on its field (the ``arrow.parquet.variant`` extension name, see
``lakelog.schema.types.variant_field``); PySpark marks it on the struct's ``metadata`` child
(``{"variant": "true"}``, ``pyspark.sql.pandas.types.is_variant``). Both hold the same two binaries in the
same order, so batches cross unchanged: only schemas are translated, at any depth.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema, is_variant

from lakelog.schema.types import VARIANT_STORAGE, has_variant, is_variant_field, variant_field

SPARK_VARIANT = pa.struct([pa.field("value", pa.binary(), False), pa.field("metadata", pa.binary(), False, metadata={b"variant": b"true"})])


def _map(f: pa.Field, leaf) -> pa.Field:
    out = leaf(f)
    if out is not None:
        return out
    t = f.type
    if pa.types.is_struct(t):
        t = pa.struct([_map(t.field(i), leaf) for i in range(t.num_fields)])
    elif pa.types.is_list(t):
        t = pa.list_(_map(t.value_field, leaf))
    elif pa.types.is_large_list(t):
        t = pa.large_list(_map(t.value_field, leaf))
    elif pa.types.is_map(t):
        t = pa.map_(t.key_field, _map(t.item_field, leaf), t.keys_sorted)
    else:
        return f
    return f.with_type(t)


def spark_arrow(schema: pa.Schema) -> pa.Schema:
    """A lakelog schema with its variants in PySpark's Arrow form (``from_arrow_schema`` makes them VariantType)."""
    if not has_variant(schema):
        return schema
    return pa.schema([_map(f, lambda x: pa.field(x.name, SPARK_VARIANT, x.nullable) if is_variant_field(x) else None) for f in schema])


def lakelog_arrow(schema: pa.Schema) -> pa.Schema:
    """A PySpark Arrow schema (``to_arrow_schema``) with its variants as lakelog's variant fields."""
    found = []

    def leaf(x: pa.Field) -> pa.Field | None:
        if pa.types.is_struct(x.type) and is_variant(x.type):
            found.append(x.name)
            return variant_field(x.name, x.nullable)
        return None

    mapped = pa.schema([_map(f, leaf) for f in schema], metadata=schema.metadata)
    return mapped if found else schema


def from_lakelog_schema(schema: pa.Schema, **kwargs):
    """``from_arrow_schema`` of a lakelog schema: variant columns become Spark's VariantType, collated
    strings Spark's collated strings (``collations``)."""
    from .collations import spark_collations

    return spark_collations(from_arrow_schema(spark_arrow(schema), **kwargs), schema)


__all__ = ["SPARK_VARIANT", "VARIANT_STORAGE", "from_lakelog_schema", "lakelog_arrow", "spark_arrow"]

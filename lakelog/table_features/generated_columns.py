"""Declaring generated columns and column defaults, and keeping field metadata (generation expressions,
invariants, defaults, comments) when a schema is rewritten."""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa

from ..errors import InvalidArgumentError, InvalidArgumentTypeError, SchemaMismatchError
from .row_rules import DEFAULT_KEY, GENERATION_KEY
from .table_expressions import constant_sql, referenced_columns, value_sql, value_type


def check_generated_columns(generated: Any) -> dict[str, str]:
    if not isinstance(generated, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in generated.items()):
        raise InvalidArgumentTypeError(f"generated_columns must be a dict of column name -> Spark SQL expression, not {generated!r}")
    if not generated:
        raise InvalidArgumentError("generated_columns is empty; pass None for a table without generated columns")
    return generated


def with_generated_columns(schema: pa.Schema, generated: Any) -> pa.Schema:
    """``schema`` plus the generated columns it lacks, typed as their expressions' results (nullable).

    An expression may read only columns that are not generated, as in Delta."""
    generated = check_generated_columns(generated)
    lower = {n.lower() for n in generated}
    from ..expressions.sql import Engine

    engine = Engine()
    try:
        base = pa.schema([f for f in schema if f.name.lower() not in lower])
        rel = engine.empty_relation(base)
        fields = list(schema)
        for name, text in generated.items():
            what = f"generation expression of column {name!r}"
            reads = referenced_columns(text)
            bad = sorted(reads & lower)
            if bad:
                raise SchemaMismatchError(f"the {what} ({text}) reads generated column(s) {bad}; a generation expression may read only other columns")
            t = schema.field(name).type if name in schema.names else value_type(text, base, what)  # Spark's type of the expression
            engine.query(f"SELECT ({value_sql(text, base, what, t)}) AS v FROM {rel}", f"invalid {what} ({text})")
            if name not in schema.names:
                fields.append(pa.field(name, t, True))
        return pa.schema(fields)
    finally:
        engine.close()


def add_generation_expressions(schema_string: str, generated: dict[str, str]) -> str:
    """``schema_string`` with ``delta.generationExpression`` on the named top-level fields."""
    if not generated:
        return schema_string
    schema = orjson.loads(schema_string)
    by_name = {k.lower(): v for k, v in generated.items()}
    for f in schema["fields"]:
        text = by_name.get(f["name"].lower())
        if text is not None:
            f["metadata"] = {**(f.get("metadata") or {}), GENERATION_KEY: text}
    return orjson.dumps(schema).decode()


def check_column_defaults(defaults: Any, schema: pa.Schema, generated: dict[str, str] | None, identity: Any) -> dict[str, str]:
    """``column_defaults`` of ``write_table`` ({column: Spark SQL expression}), checked against the new
    table's ``schema``: top-level columns that are neither generated nor identity columns."""
    if not isinstance(defaults, dict) or not all(isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in defaults.items()):
        raise InvalidArgumentTypeError(f"column_defaults must be a dict of column name -> Spark SQL expression, not {defaults!r}")
    if not defaults:
        raise InvalidArgumentError("column_defaults is empty; pass None for a table without column defaults")
    names = {n.lower(): n for n in schema.names}
    computed = {n.lower() for n in (generated or {})} | {n.lower() for n in (identity or {})}
    out = {}
    for name, text in defaults.items():
        if name.lower() not in names:
            raise SchemaMismatchError(f"column_defaults names column {name!r}, which the table does not have (columns: {schema.names})")
        if name.lower() in computed:
            raise SchemaMismatchError(f"column {name!r} is a generated or identity column; it cannot also have a default")
        check_default(text, schema.field(names[name.lower()]))
        out[names[name.lower()]] = text
    return out


def check_default(text: str, field: pa.Field) -> None:
    """Refuse a default for ``field`` that is not one constant Spark SQL expression whose value the column
    stores by ``write_table``'s rule (no lossy cast: ``1.5`` is no bigint default)."""
    from ..schema.conform import cast_batch
    from ..expressions.sql import Engine, quote_ident

    what = f"default of column {field.name!r}"
    if referenced_columns(text):
        raise SchemaMismatchError(f"the {what} ({text}) reads columns {sorted(referenced_columns(text))}; a default is a constant expression")
    sql = constant_sql(text, what)  # Spark's value, or UnsupportedExpressionError naming what lakelog cannot evaluate
    engine = Engine()
    try:
        value = engine.query(f"SELECT ({sql}) AS {quote_ident(field.name)}", f"invalid {what} ({text})")
    finally:
        engine.close()
    if not pa.types.is_null(value.schema.field(0).type):
        try:
            cast_batch(value.to_batches()[0], pa.schema([field.with_nullable(True)]))
        except SchemaMismatchError as e:
            raise SchemaMismatchError(f"the {what} ({text}) does not fit the column: {e}") from None


def add_column_defaults(schema_string: str, defaults: dict[str, str]) -> str:
    """``schema_string`` with ``CURRENT_DEFAULT`` on the named top-level fields."""
    if not defaults:
        return schema_string
    schema = orjson.loads(schema_string)
    by_name = {k.lower(): v for k, v in defaults.items()}
    for f in schema["fields"]:
        text = by_name.get(f["name"].lower())
        if text is not None:
            f["metadata"] = {**(f.get("metadata") or {}), DEFAULT_KEY: text}
    return orjson.dumps(schema).decode()


def declare_columns(schema_string: str, generated: dict[str, str] | None, identity: dict[str, dict] | None,
                    defaults: dict[str, str] | None = None) -> str:
    """``schema_string`` with the generated, identity and defaulted columns a write creating the table declares."""
    from .identity_columns import add_identity_metadata

    schema_string = add_column_defaults(add_generation_expressions(schema_string, generated or {}), defaults or {})
    return add_identity_metadata(schema_string, identity) if identity else schema_string


def keep_field_metadata(schema_string: str, previous: str) -> str:
    """``schema_string`` (a schema rebuilt from Arrow, e.g. evolved by a write) with the field metadata
    each field had in ``previous`` (generation expressions, invariants, defaults, comments); metadata
    already in ``schema_string`` wins."""
    old = orjson.loads(previous)
    new = orjson.loads(schema_string)

    def merge(new_fields: list[dict], old_fields: list[dict]) -> None:
        by_name = {f["name"]: f for f in old_fields}
        for f in new_fields:
            o = by_name.get(f["name"])
            if o is None:
                continue
            if o.get("metadata"):
                f["metadata"] = {**o["metadata"], **(f.get("metadata") or {})}
            nt, ot = f.get("type"), o.get("type")
            if isinstance(nt, dict) and isinstance(ot, dict) and nt.get("type") == "struct" and ot.get("type") == "struct":
                merge(nt["fields"], ot["fields"])

    merge(new["fields"], old["fields"])
    return orjson.dumps(new).decode()

"""The simplest update values computed by pyarrow, exactly as the SQL engine's ``CAST(<value> AS <column
type>)`` computes them, without a round trip through the engine (e.g. ``s = 'updated'``).

Only what is certain is taken: a string literal for a string column, an integer literal within range
for a signed-integer column, an integer literal of at most 2**53 or a plain decimal literal of at most
15 significant digits for a double column (the engine's DECIMAL, an exact integer over an exact power
of ten, converts to the nearest double, as Python's float() of the text does; a zero is +0.0 there,
since a DECIMAL has no sign of zero), TRUE/FALSE for a boolean column, or another column of the same
type. Columns with field metadata (collations, variants, geospatial types) and everything else (NULL,
casts, functions, arithmetic, other types) give None: the engine computes the values. Only the values
are computed here: generated columns, constraints and the rest apply to the new rows as they do to the
engine's.
"""

from __future__ import annotations

import pyarrow as pa

from ..schema import arrow_values
from ..schema.types import ColumnNames
from .exact_predicate import INTEGER_BITS, column_ref, fits_integer, number_literal

_TYPES = (*INTEGER_BITS, pa.float64(), pa.string(), pa.bool_())


class ExactValues:
    """Per assigned column, a constant (a scalar of the column's type) or the name of a column of the
    same type whose values it takes."""

    def __init__(self, values: dict[str, pa.Scalar | str], types: dict[str, pa.DataType]):
        self.values = values
        self.types = types

    def columns(self, rows: pa.Table) -> pa.Table | None:
        """The new values for ``rows`` (one row each, in order): the engine's ``SELECT CAST(...) AS col``,
        or None when a column read is not of the expected type there."""
        out = {}
        for col, value in self.values.items():
            if isinstance(value, str):
                if value not in rows.column_names or rows.schema.field(value).type != self.types[col]:
                    return None
                out[col] = rows.column(value)
            else:
                out[col] = pa.repeat(value, rows.num_rows)
        return pa.table(out)


def exact_values(trees: dict[str, dict], schema: pa.Schema) -> ExactValues | None:
    """The values ``trees`` (column -> DuckDB's parse tree of its new value) give, when each is that
    simple for its column of ``schema``; None otherwise."""
    index = ColumnNames(schema.names)
    out: dict[str, pa.Scalar | str] = {}
    for col, tree in trees.items():
        field = schema.field(col)
        if field.metadata or field.type not in _TYPES:
            return None
        value = _value(tree, field.type, schema, index)
        if value is None:
            return None
        out[col] = value
    return ExactValues(out, {col: schema.field(col).type for col in out})


def _value(tree: dict, t: pa.DataType, schema: pa.Schema, index: ColumnNames) -> pa.Scalar | str | None:
    if tree.get("class") == "COLUMN_REF":
        name = column_ref(tree, index)
        if name is None:
            return None
        source = schema.field(name)
        return name if source.type == t and not source.metadata else None
    lit = tree.get("literal") if tree.get("class") == "CONSTANT" else None
    if not isinstance(lit, dict) or not isinstance(lit.get("text"), str):
        return None
    kind, text = lit.get("kind"), lit["text"]
    if kind == "STRING":
        return arrow_values.scalar(text, pa.string()) if t == pa.string() else None
    if kind == "BOOLEAN":
        return arrow_values.scalar(text == "true", pa.bool_()) if t == pa.bool_() and text in ("true", "false") else None
    if t not in (pa.float64(), *INTEGER_BITS):
        return None
    v = number_literal(tree, t)
    if v is None or (t in INTEGER_BITS and not fits_integer(v, t)):
        return None
    return arrow_values.scalar(v, t)

"""Spark's text of a double or float (``CAST(x AS STRING)``, ``concat`` of one: Java's
``Double.toString`` / ``Float.toString``) in lakelog's SQL, as the DuckDB functions
``spark_double_text(DOUBLE)`` and ``spark_float_text(FLOAT)``, registered on each connection of the
engine (``lakelog.sql.Engine``). The text comes from lakelog's port of Java 17's algorithm
(``lakelog.variant.java_float``, which also writes variants' JSON): ``1.0E7``, ``0.001``, ``1.0E-4``,
``-0.0``, ``NaN``, ``Infinity``; a float's text is that of the float, not of its widening to double."""

from __future__ import annotations

import duckdb
import pyarrow as pa

DOUBLE_TEXT, FLOAT_TEXT = "spark_double_text", "spark_float_text"


def _texts(values: pa.Array, to_string) -> pa.Array:
    return pa.array([None if v is None else to_string(v) for v in values.to_pylist()], pa.string())


def _double_text(values: pa.Array) -> pa.Array:
    from .variant.java_float import double_to_string

    return _texts(values, double_to_string)


def _float_text(values: pa.Array) -> pa.Array:
    from .variant.java_float import float_to_string

    return _texts(values, float_to_string)


def register(con: duckdb.DuckDBPyConnection) -> None:
    """Make ``spark_double_text`` and ``spark_float_text`` callable on ``con`` (vectorised over Arrow arrays)."""
    for name, fn, kind in ((DOUBLE_TEXT, _double_text, "DOUBLE"), (FLOAT_TEXT, _float_text, "FLOAT")):
        con.create_function(name, fn, [duckdb.sqltype(kind)], duckdb.sqltype("VARCHAR"), type="arrow", null_handling="special",
                            side_effects=False)

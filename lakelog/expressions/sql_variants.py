"""``parse_json`` in lakelog's SQL: Spark's function of that name (JSON text to a variant), registered
on each DuckDB connection of a row-level operation so that update and merge assignments can set a
variant column from a JSON literal or a string column.

The function returns the variant's two binaries (``struct<value, metadata>``) computed by the Parquet
Variant codec (``lakelog.variant.parse_json``), byte for byte what Spark's ``parse_json`` stores. A
NULL string is a SQL NULL; text that is not JSON fails the operation (nothing is committed), as in
Spark. Variants have no equality or order, so the result is allowed only as the whole value of an
assignment to a variant column (``Engine.check_value``)."""

from __future__ import annotations

import pyarrow as pa

NAME = "parse_json"


def _parse_json(texts: pa.Array) -> pa.Array:
    # (the codec is loaded only when the function runs)
    from ..variant import from_json_array

    return from_json_array(texts)


def register(con) -> None:
    """Make ``parse_json(VARCHAR)`` callable on ``con`` (a DuckDB connection; vectorised over Arrow arrays)."""
    import duckdb

    con.create_function(NAME, _parse_json, [duckdb.sqltype("VARCHAR")], duckdb.sqltype("STRUCT(value BLOB, metadata BLOB)"),
                        type="arrow", null_handling="special", side_effects=False)


def is_call(node: dict) -> bool:
    """Whether a parse-tree node is a call of ``parse_json``."""
    return node.get("class") == "FUNCTION" and str(node.get("function_name", "")).lower() == NAME and not node.get("schema")

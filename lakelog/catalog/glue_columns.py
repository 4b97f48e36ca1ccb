"""Delta's schema as Glue (Hive) columns: the type names Athena, Glue and Spark's Hive client read."""

from __future__ import annotations

import re
from typing import Any

import orjson

from ..errors import CorruptLogError

_PRIMITIVES = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint", "timestamp_ntz": "timestamp"}
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9_]+$")


def glue_columns(schema_string: str) -> list[dict[str, str]]:
    """``StorageDescriptor.Columns`` for a Delta ``schemaString``: logical names, Hive types, comments."""
    try:
        schema = orjson.loads(schema_string)
    except orjson.JSONDecodeError:
        raise CorruptLogError(f"the table's schemaString is not JSON: {schema_string[:200]!r}") from None
    out = []
    for f in schema.get("fields", []):
        column = {"Name": f["name"], "Type": hive_type(f["type"])}
        comment = (f.get("metadata") or {}).get("comment")
        if isinstance(comment, str) and comment:
            column["Comment"] = comment
        out.append(column)
    return out


def hive_type(t: Any) -> str:
    """A Delta type (its JSON form) as a Hive type string (``bigint``, ``struct<a:int>``...)."""
    if isinstance(t, str):
        return _PRIMITIVES.get(t, t)  # decimal(p,s), string, double, date, timestamp, binary, boolean, variant... as spelt
    kind = t.get("type")
    if kind == "array":
        return f"array<{hive_type(t['elementType'])}>"
    if kind == "map":
        return f"map<{hive_type(t['keyType'])},{hive_type(t['valueType'])}>"
    if kind == "struct":
        return "struct<" + ",".join(f"{_field_name(f['name'])}:{hive_type(f['type'])}" for f in t.get("fields", [])) + ">"
    raise CorruptLogError(f"the table's schema has a type lakelog does not know: {t!r}")


def _field_name(name: str) -> str:
    return name if _PLAIN_NAME.match(name) else "`" + name.replace("`", "``") + "`"

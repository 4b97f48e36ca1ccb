"""A check of a ``metaData.schemaString`` that needs no Arrow, so opening a table validates its schema
without importing pyarrow.

``plain_fields`` vouches only for schemas of the plain types (primitives, decimals, structs, arrays,
maps) that ``lakelog.schema.types.schema_from_string`` accepts; anything else (variant, geospatial and
``void`` columns, and every schema it would refuse) gives None, and the caller parses the schema with
Arrow, which accepts it or raises the error that names what is wrong."""

from __future__ import annotations

import re
from typing import Any

import orjson

DECIMAL_RE = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_PLAIN = frozenset({"string", "long", "integer", "short", "byte", "float", "double", "boolean", "binary", "date", "timestamp", "timestamp_ntz", "decimal"})


def plain_fields(schema_string: Any) -> list[dict] | None:
    """The top-level Delta fields of a valid schema of plain types; None otherwise (see the module)."""
    try:
        d = orjson.loads(schema_string)
    except (orjson.JSONDecodeError, TypeError):
        return None
    if not isinstance(d, dict) or d.get("type") != "struct":
        return None
    fields = d.get("fields")
    return fields if isinstance(fields, list) and _fields_ok(fields) else None


def _flag_ok(d: dict, key: str) -> bool:
    return isinstance(d.get(key, True), bool)


def _fields_ok(fields: list) -> bool:
    seen: set[str] = set()
    for f in fields:
        if not isinstance(f, dict) or not isinstance(name := f.get("name"), str) or not name or "type" not in f:
            return False
        if not _flag_ok(f, "nullable") or not _type_ok(f["type"]) or name.lower() in seen:
            return False
        seen.add(name.lower())
    return True


def _type_ok(t: Any) -> bool:
    if isinstance(t, str):
        if t in _PLAIN:
            return True
        m = DECIMAL_RE.match(t)
        return m is not None and 1 <= int(m.group(1)) <= 38 and int(m.group(2)) <= int(m.group(1))
    if not isinstance(t, dict):
        return False
    kind = t.get("type")
    if kind == "struct":
        return isinstance(t.get("fields"), list) and _fields_ok(t["fields"])
    if kind == "array":
        return "elementType" in t and _flag_ok(t, "containsNull") and _type_ok(t["elementType"])
    if kind == "map":
        return "keyType" in t and "valueType" in t and _flag_ok(t, "valueContainsNull") and _type_ok(t["keyType"]) and _type_ok(t["valueType"])
    return False


def is_nested(delta_type: Any) -> bool:
    """Whether a Delta type of a plain schema is a struct, array or map."""
    return isinstance(delta_type, dict)

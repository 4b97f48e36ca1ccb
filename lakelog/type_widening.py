"""Type widening (Delta's ``typeWidening`` feature, ``typeWidening-preview`` in Spark 3.x tables).

A column's type may have been widened after files were written with the narrower type; readers cast
those values to the table's type (``lakelog.column_mapping`` casts every column it reads, and pyarrow's
dataset scanner casts to the dataset's schema). The changes are recorded in the field metadata
``delta.typeChanges`` (``[{fromType, toType, fieldPath?}]``, Spark also writes ``tableVersion``);
``check_type_changes`` refuses a table that records a change lakelog does not know to be lossless.

Accepted changes: ``byte -> short -> integer -> long``, ``float -> double``, ``byte|short|integer ->
double``, ``date -> timestamp_ntz``, ``decimal(p, s) -> decimal(p + k1, s + k2)`` with ``k1 >= k2 >= 0``,
and integers to a decimal with room for all their digits (``p - s`` at least 3, 5, 10 or 20 for byte,
short, integer and long: Spark writes ``byte -> decimal(4,1)``, which the protocol text does not list).
"""

from __future__ import annotations

import re
from typing import Any, Iterator

import orjson

from .errors import CorruptLogError, UnsupportedFeatureError

TYPE_CHANGES = "delta.typeChanges"
FEATURES = ("typeWidening", "typeWidening-preview")
_INTEGERS = ("byte", "short", "integer", "long")
_DIGITS = {"byte": 3, "short": 5, "integer": 10, "long": 20}
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")


def _decimal(t: str) -> tuple[int, int] | None:
    m = _DECIMAL.match(t)
    return (int(m.group(1)), int(m.group(2))) if m else None


def is_widening(from_type: Any, to_type: Any) -> bool:
    """Whether reading ``from_type`` values as ``to_type`` is one of the accepted widenings."""
    if not isinstance(from_type, str) or not isinstance(to_type, str):
        return False
    if from_type in _INTEGERS and to_type in _INTEGERS:
        return _INTEGERS.index(from_type) < _INTEGERS.index(to_type)
    if to_type == "double" and from_type in ("float", "byte", "short", "integer"):
        return True
    if (from_type, to_type) == ("date", "timestamp_ntz"):
        return True
    to_dec = _decimal(to_type)
    if to_dec is None:
        return False
    from_dec = _decimal(from_type)
    if from_dec is not None:
        k1, k2 = to_dec[0] - from_dec[0], to_dec[1] - from_dec[1]
        return k1 >= k2 >= 0
    return from_type in _DIGITS and to_dec[0] - to_dec[1] >= _DIGITS[from_type]


def recorded_type_changes(schema_string: str) -> Iterator[tuple[str, Any, Any]]:
    """Every type change ``delta.typeChanges`` records in a schema, as ``(column path, fromType,
    toType)`` (nested fields as ``a.b``, ``a.element``, ``m.key``, ``m.value``); a malformed record is a
    ``CorruptLogError`` when the walk reaches it."""
    if TYPE_CHANGES not in schema_string:
        return
    try:
        root = orjson.loads(schema_string)
    except orjson.JSONDecodeError as e:
        raise CorruptLogError(f"metaData.schemaString is not JSON ({e})") from None
    yield from _walk(root, "")


def check_type_changes(schema_string: str) -> None:
    """Refuse (``UnsupportedFeatureError``) a schema whose ``delta.typeChanges`` record a change that is
    not an accepted widening; a malformed record is a ``CorruptLogError``."""
    for path, from_type, to_type in recorded_type_changes(schema_string):
        if not is_widening(from_type, to_type):
            raise UnsupportedFeatureError(
                f"column {path!r} was changed from {from_type!r} to {to_type!r}, which is not a type "
                "widening lakelog reads (see specs/PROTOCOL.md); read the table with the engine that changed it"
            )


def _walk(t: Any, where: str) -> Iterator[tuple[str, Any, Any]]:
    if not isinstance(t, dict):
        return
    kind = t.get("type")
    if kind == "struct":
        for f in t.get("fields") or []:
            if not isinstance(f, dict):
                continue
            name = f"{where}{f.get('name')}"
            changes = (f.get("metadata") or {}).get(TYPE_CHANGES)
            if changes is not None:
                for c in _changes(changes, name):
                    path = f"{name}.{c['fieldPath']}" if c.get("fieldPath") else name
                    yield path, c.get("fromType"), c.get("toType")
            yield from _walk(f.get("type"), name + ".")
    elif kind == "array":
        yield from _walk(t.get("elementType"), where + "element.")
    elif kind == "map":
        yield from _walk(t.get("keyType"), where + "key.")
        yield from _walk(t.get("valueType"), where + "value.")


def _changes(changes: Any, column: str) -> list[dict]:
    if isinstance(changes, str):  # some writers store the list as JSON text
        try:
            changes = orjson.loads(changes)
        except orjson.JSONDecodeError:
            changes = None
    if not isinstance(changes, list) or not all(isinstance(c, dict) for c in changes):
        raise CorruptLogError(f"column {column!r} has a malformed {TYPE_CHANGES} field metadata: {changes!r}")
    return changes

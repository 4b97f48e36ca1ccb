"""Type widening (Delta's ``typeWidening`` feature, ``typeWidening-preview`` in Spark 3.x tables).

A column's type may have been widened after files were written with the narrower type; readers cast
those values to the table's type (``lakelog.table_features.column_mapping`` casts every column it reads, and pyarrow's
dataset scanner casts to the dataset's schema), and partition values and stats logged before the change
are parsed as the wider type (a date ``2024-01-01`` of a column now ``timestamp_ntz`` is its midnight).
The changes are recorded in the field metadata ``delta.typeChanges`` (``[{fromType, toType,
fieldPath?}]`` on the nearest struct field; Spark also writes ``tableVersion``).

``is_widening`` is Delta's list (PROTOCOL.md "Type Widening", Delta 4.0): ``byte -> short -> integer
-> long``, ``float -> double``, ``byte|short|integer -> double``, ``date -> timestamp_ntz``,
``decimal(p, s) -> decimal(p + k1, s + k2)`` with ``k1 >= k2 >= 0``, ``byte|short|integer ->
decimal(10 + k1, k2)`` and ``long -> decimal(20 + k1, k2)`` (``k1 >= k2 >= 0``). These are what
``Table.alter_column_type`` applies, to data and partition columns alike (as Delta does). Readers also
accept what Delta 3.x previews recorded: an integer to a decimal with room for all its digits
(``p - s`` at least 3, 5, 10 or 20 for byte, short, integer and long; Spark wrote ``byte ->
decimal(4,1)``), which is just as lossless.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

import orjson

from ..errors import CorruptLogError, SchemaMismatchError, UnsupportedFeatureError

TYPE_CHANGES = "delta.typeChanges"
ENABLE = "delta.enableTypeWidening"
FEATURES = ("typeWidening", "typeWidening-preview")
_INTEGERS = ("byte", "short", "integer", "long")
_DIGITS = {"byte": 3, "short": 5, "integer": 10, "long": 20}  # decimal digits every value fits in
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")


def _decimal(t: str) -> tuple[int, int] | None:
    m = _DECIMAL.match(t)
    return (int(m.group(1)), int(m.group(2))) if m else None


def is_widening(from_type: Any, to_type: Any) -> bool:
    """Whether changing a column from ``from_type`` to ``to_type`` (Delta type names) is one of Delta's
    type widenings."""
    if not isinstance(from_type, str) or not isinstance(to_type, str) or from_type == to_type:
        return False
    if from_type in _INTEGERS and to_type in _INTEGERS:
        return _INTEGERS.index(from_type) < _INTEGERS.index(to_type)
    if to_type == "double":
        return from_type in ("float", "byte", "short", "integer")
    if (from_type, to_type) == ("date", "timestamp_ntz"):
        return True
    to_dec = _decimal(to_type)
    if to_dec is None:
        return False
    from_dec = _decimal(from_type)
    if from_dec is not None:
        k1, k2 = to_dec[0] - from_dec[0], to_dec[1] - from_dec[1]
        return k1 >= k2 >= 0
    if from_type in ("byte", "short", "integer"):  # stored as 32-bit integers: decimal(10, 0) and wider
        return to_dec[0] - to_dec[1] >= 10
    return from_type == "long" and to_dec[0] - to_dec[1] >= 20


def is_iceberg_widening(from_type: Any, to_type: Any) -> bool:
    """Whether the change is also one Iceberg V2 allows (required of tables with Iceberg compatibility):
    integer widening, ``float -> double`` and a decimal precision increase at the same scale."""
    if not is_widening(from_type, to_type):
        return False
    from_dec, to_dec = _decimal(from_type), _decimal(to_type)
    if from_dec is not None and to_dec is not None:
        return from_dec[1] == to_dec[1]
    return (from_type in _INTEGERS and to_type in _INTEGERS) or (from_type, to_type) == ("float", "double")


def widenings_of(from_type: str) -> str:
    """The types Delta widens ``from_type`` to, in words (for messages)."""
    if from_type in _INTEGERS:
        wider = list(_INTEGERS[_INTEGERS.index(from_type) + 1:])
        if from_type != "long":
            wider.append("double")
        digits = 20 if from_type == "long" else 10
        return ", ".join(wider + [f"decimal(p,s) with p - s >= {digits}"])
    if from_type == "float":
        return "double"
    if from_type == "date":
        return "timestamp_ntz"
    if _decimal(from_type) is not None:
        p, s = _decimal(from_type)
        return f"decimal(p + k1, s + k2) with k1 >= k2 >= 0 (here decimal({p}+k1,{s}+k2))"
    return "nothing (Delta widens only byte, short, integer, long, float, date and decimal columns)"


def is_readable_change(from_type: Any, to_type: Any) -> bool:
    """Whether lakelog reads values written as ``from_type`` as ``to_type`` exactly: Delta's widenings,
    and integers to any decimal with room for their digits (recorded by Delta 3.x previews)."""
    if is_widening(from_type, to_type):
        return True
    to_dec = _decimal(to_type) if isinstance(to_type, str) else None
    return to_dec is not None and from_type in _DIGITS and to_dec[0] - to_dec[1] >= _DIGITS[from_type]


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
    not a widening lakelog reads; a malformed record is a ``CorruptLogError``."""
    for path, from_type, to_type in recorded_type_changes(schema_string):
        if not is_readable_change(from_type, to_type):
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


class TypeTarget:
    """Where a type change applies in a schema (JSON, changed in place by ``widen``): the type at
    ``path`` (struct fields by name, ``element`` of an array, ``key`` or ``value`` of a map), held under
    ``key`` of the dict ``holder``; ``field`` is the nearest struct field, which records the change, and
    ``field_path`` the path from it (``element.value``; empty for the field itself)."""

    def __init__(self, names: list[str], field: dict, field_path: list[str], holder: dict, key: str):
        self.names, self.field, self.field_path, self.holder, self.key = names, field, field_path, holder, key

    @property
    def path(self) -> str:
        return ".".join(self.names)

    @property
    def type(self) -> Any:
        return self.holder[self.key]

    def widen(self, to_type: str) -> None:
        """Set the type and append ``{fromType, toType[, fieldPath]}`` to the field's ``delta.typeChanges``."""
        change = {"fromType": self.type, "toType": to_type}
        if self.field_path:
            change["fieldPath"] = ".".join(self.field_path)
        self.holder[self.key] = to_type
        meta = dict(self.field.get("metadata") or {})
        meta[TYPE_CHANGES] = [*_changes(meta.get(TYPE_CHANGES, []), self.names[0]), change]
        self.field["metadata"] = meta


def locate(fields: list[dict], path: str) -> TypeTarget:
    """The ``TypeTarget`` of ``path`` among the schema's top-level ``fields``: ``a`` (a whole name is
    looked up first, so a column named ``a.b`` is found), ``a.b`` (a struct's field), ``arr.element``,
    ``m.key``, ``m.value``, and any nesting of these (``a.element.value``, ``a.element.f``). Names
    resolve ignoring case, as Delta resolves them; ``SchemaMismatchError`` when nothing is there."""
    whole = next((f for f in fields if f.get("name") == path), None)
    parts = [path] if whole is not None else path.split(".")
    names: list[str] = []
    field: dict | None = None
    field_path: list[str] = []
    holder: dict = {"type": "struct", "fields": fields}
    key = "type"
    for part in parts:
        t = holder[key] if field is not None else holder
        kind = t.get("type") if isinstance(t, dict) else None
        where = repr(".".join(names)) if names else "the table"
        if kind == "struct":
            found = next((f for f in t.get("fields") or [] if f.get("name") == part), None)
            if found is None:
                found = next((f for f in t.get("fields") or [] if str(f.get("name")).lower() == part.lower()), None)
            if found is None:
                raise SchemaMismatchError(f"column {path!r} does not exist: no field {part!r} in {where}")
            field, field_path, holder, key = found, [], found, "type"
            names.append(found["name"])
        elif kind == "array" and part.lower() == "element":
            field_path, holder, key = field_path + ["element"], t, "elementType"
            names.append("element")
        elif kind == "map" and part.lower() in ("key", "value"):
            field_path, holder, key = field_path + [part.lower()], t, f"{part.lower()}Type"
            names.append(part.lower())
        else:
            what = {"array": "an array (name its elements 'element')", "map": "a map (name its 'key' or 'value')"}.get(
                kind, "not a struct, array or map")
            raise SchemaMismatchError(f"column {path!r} does not exist: {where} is {what}")
    assert field is not None
    return TypeTarget(names, field, field_path, holder, key)

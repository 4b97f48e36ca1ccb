"""The Iceberg schema, partition spec and name mapping of a Delta table's metadata (plain JSON, no pyiceberg).

Field ids are Delta's column mapping ids (``delta.columnMapping.id``); list elements and map keys and
values take theirs from ``delta.columnMapping.nested.ids`` on the nearest enclosing struct field,
keyed ``<physical name>.element`` / ``.key`` / ``.value`` (nested: ``<physical>.element.key``...).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from ..errors import UnsupportedFeatureError

FIELD_ID = "delta.columnMapping.id"
PHYSICAL_NAME = "delta.columnMapping.physicalName"
NESTED_IDS = "delta.columnMapping.nested.ids"
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_PRIMITIVES = {
    "boolean": "boolean", "byte": "int", "short": "int", "integer": "int", "long": "long", "float": "float",
    "double": "double", "date": "date", "timestamp": "timestamptz", "timestamp_ntz": "timestamp",
    "string": "string", "binary": "binary",
}


class IcebergColumn:
    """One Iceberg field with what converting stats and partition values needs: its id, its Delta type
    (a primitive type name, or a dict) and its physical name (the key of its stats and partition values)."""

    __slots__ = ("id", "name", "physical", "delta_type", "iceberg_type", "children")

    def __init__(self, id: int, name: str, physical: str, delta_type: Any, iceberg_type: Any, children: list["IcebergColumn"]):
        self.id, self.name, self.physical = id, name, physical
        self.delta_type, self.iceberg_type, self.children = delta_type, iceberg_type, children


class IcebergSchema:
    """A Delta schema string converted: ``json`` (Iceberg's schema JSON, without ``schema-id``),
    ``columns`` (top level), ``name_mapping`` (``schema.name-mapping.default``) and ``last_column_id``."""

    def __init__(self, schema_string: str):
        self.last_column_id = 0
        try:
            fields = orjson.loads(schema_string)["fields"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            raise UnsupportedFeatureError("UniForm: the table's schema is not a Delta schema") from None
        self.columns: list[IcebergColumn] = []
        self.json = {"type": "struct", "fields": [self._field(f) for f in fields]}
        self.name_mapping = [_mapping(f, c) for f, c in zip(self.json["fields"], self.columns)]

    def _field(self, f: dict, into: list[IcebergColumn] | None = None) -> dict:
        meta = f.get("metadata") or {}
        fid = meta.get(FIELD_ID)
        if not isinstance(fid, int) or isinstance(fid, bool):
            raise UnsupportedFeatureError(
                f"UniForm: column {f.get('name')!r} has no column mapping id; Iceberg needs field ids. "
                "Enable column mapping (delta.columnMapping.mode = 'id' or 'name') before enabling UniForm."
            )
        physical = meta.get(PHYSICAL_NAME, f["name"])
        nested = meta.get(NESTED_IDS) or {}
        self.last_column_id = max(self.last_column_id, fid)
        children: list[IcebergColumn] = []
        itype = self._type(f["type"], physical, nested, children, f["name"])
        col = IcebergColumn(fid, f["name"], physical, f["type"], itype, children)
        (self.columns if into is None else into).append(col)
        return {"id": fid, "name": f["name"], "required": not f.get("nullable", True), "type": itype}

    def _nested_id(self, nested: dict, key: str, column: str) -> int:
        fid = nested.get(key)
        if not isinstance(fid, int) or isinstance(fid, bool):
            raise UnsupportedFeatureError(
                f"UniForm: column {column!r} has a list or map without a nested field id for {key!r} "
                "(delta.columnMapping.nested.ids, which icebergCompatV2 assigns); Iceberg needs one"
            )
        self.last_column_id = max(self.last_column_id, fid)
        return fid

    def _type(self, t: Any, path: str, nested: dict, children: list[IcebergColumn], column: str) -> Any:
        if isinstance(t, str):
            if t in _PRIMITIVES:
                return _PRIMITIVES[t]
            m = _DECIMAL.match(t)
            if m:
                return f"decimal({int(m.group(1))}, {int(m.group(2))})"
            raise UnsupportedFeatureError(f"UniForm: column {column!r} has type {t!r}, which Iceberg format version 2 has no type for")
        kind = t.get("type")
        if kind == "struct":
            return {"type": "struct", "fields": [self._field(f, children) for f in t["fields"]]}
        if kind == "array":
            eid = self._nested_id(nested, f"{path}.element", column)
            return {"type": "list", "element-id": eid, "element": self._type(t["elementType"], f"{path}.element", nested, [], column),
                    "element-required": not t.get("containsNull", True)}
        if kind == "map":
            kid, vid = self._nested_id(nested, f"{path}.key", column), self._nested_id(nested, f"{path}.value", column)
            return {"type": "map", "key-id": kid, "key": self._type(t["keyType"], f"{path}.key", nested, [], column),
                    "value-id": vid, "value": self._type(t["valueType"], f"{path}.value", nested, [], column),
                    "value-required": not t.get("valueContainsNull", True)}
        raise UnsupportedFeatureError(f"UniForm: column {column!r} has a type lakelog cannot convert to Iceberg: {t!r}")

    def column(self, name: str) -> IcebergColumn:
        for c in self.columns:
            if c.name == name:
                return c
        raise UnsupportedFeatureError(f"UniForm: partition column {name!r} is not in the schema")


def _mapping(field: dict, col: IcebergColumn | None) -> dict:
    """Iceberg's name mapping entry of ``field``: files written without field ids are read by name, the
    logical one or (column mapping) the physical one."""
    names = [field["name"]] + ([col.physical] if col is not None and col.physical != field["name"] else [])
    entry: dict[str, Any] = {"field-id": field["id"], "names": names}
    sub = _type_mapping(field["type"], col)
    if sub:
        entry["fields"] = sub
    return entry


def _type_mapping(t: Any, col: IcebergColumn | None) -> list[dict]:
    if not isinstance(t, dict):
        return []
    if t["type"] == "struct":
        kids = col.children if col is not None else []
        return [_mapping(f, kids[i] if i < len(kids) else None) for i, f in enumerate(t["fields"])]
    if t["type"] == "list":
        return [_leaf("element", t["element-id"], t["element"])]
    return [_leaf("key", t["key-id"], t["key"]), _leaf("value", t["value-id"], t["value"])]


def _leaf(name: str, fid: int, t: Any) -> dict:
    entry: dict[str, Any] = {"field-id": fid, "names": [name]}
    sub = _type_mapping(t, None)
    if sub:
        entry["fields"] = sub
    return entry


def partition_spec(schema: IcebergSchema, partition_columns: list[str], spec_id: int) -> dict:
    """Iceberg's identity partition spec on the Delta partition columns (partition field ids from 1000)."""
    return {"spec-id": spec_id, "fields": [
        {"name": c, "transform": "identity", "source-id": schema.column(c).id, "field-id": 1000 + i}
        for i, c in enumerate(partition_columns)
    ]}

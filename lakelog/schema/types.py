"""Delta's schema and types as Arrow's, and back: ``schemaString`` to a ``pyarrow.Schema`` and the reverse, variant
fields, column names a table may hold, and the canonical Arrow type of each Delta type."""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa

from . import collations, geospatial
from .plain import DECIMAL_RE as _DECIMAL_RE
from ..errors import CorruptLogError, SchemaMismatchError, UnsupportedFeatureError

_PRIMITIVE_TO_ARROW = {
    "string": pa.string(),
    "long": pa.int64(),
    "integer": pa.int32(),
    "short": pa.int16(),
    "byte": pa.int8(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
    "void": pa.null(),  # Spark's NullType: a column that has only ever held nulls
}
# A variant column (Delta type ``variant``) is, in Arrow, the struct of its two Parquet Variant binaries,
# marked by the canonical Arrow extension name in its field's metadata (pyarrow registers no class for
# it, so it stays a plain struct any engine can read; the name marks it through IPC and the C interface).
VARIANT_EXTENSION = "arrow.parquet.variant"
VARIANT_METADATA = {b"ARROW:extension:name": VARIANT_EXTENSION.encode(), b"ARROW:extension:metadata": b""}
# (the field order Spark writes, as lakelog.variant.VARIANT_ARROW_TYPE; files are read by name)
VARIANT_STORAGE = pa.struct([pa.field("value", pa.binary(), False), pa.field("metadata", pa.binary(), False)])
# Characters Spark/Delta refuse in column names of tables without column mapping.
_BAD_NAME_CHARS = set(" ,;{}()\n\t=")


# ---------------------------------------------------------------- Delta -> Arrow

def is_variant_type(t: Any) -> bool:
    """Whether a Delta type (from a schema string) is ``variant`` (also in its object form)."""
    return t == "variant" or (isinstance(t, dict) and t.get("type") == "variant")


def variant_field(name: str, nullable: bool = True) -> pa.Field:
    """An Arrow field that declares a Delta ``variant`` column (or struct field, list element, map value)."""
    return pa.field(name, VARIANT_STORAGE, nullable, metadata=VARIANT_METADATA)


def is_variant_field(f: pa.Field) -> bool:
    """Whether ``f`` is a variant field (a struct marked with the ``arrow.parquet.variant`` extension name)."""
    return bool(f.metadata) and f.metadata.get(b"ARROW:extension:name") == VARIANT_METADATA[b"ARROW:extension:name"] and pa.types.is_struct(f.type)


def has_variant(t: pa.Schema | pa.DataType | pa.Field) -> bool:
    """Whether a schema, type or field holds a variant at any depth."""
    if isinstance(t, pa.Schema):
        return any(has_variant(f) for f in t)
    if isinstance(t, pa.Field):
        if is_variant_field(t):
            return True
        t = t.type
    if pa.types.is_struct(t):
        return any(has_variant(t.field(i)) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return has_variant(t.value_field)
    if pa.types.is_map(t):
        return has_variant(t.item_field)
    return False


def _arrow_field(name: str, t: Any, nullable: bool) -> pa.Field:
    if is_variant_type(t):
        return variant_field(name, nullable)
    return pa.field(name, delta_type_to_arrow(t), nullable)


def delta_type_to_arrow(t: Any) -> pa.DataType:
    """The Arrow type of a Delta type (a type name or a struct/array/map object from a schema string).

    ``UnsupportedFeatureError`` for a well-formed type lakelog does not read;
    ``ValueError`` for a malformed one (``decimal(5,9)``, ``decimal(40,2)``, an array without
    ``elementType``, ...).
    """
    if is_variant_type(t):
        return VARIANT_STORAGE  # (the field carries the mark: see variant_field)
    if isinstance(t, str):
        if t in _PRIMITIVE_TO_ARROW:
            return _PRIMITIVE_TO_ARROW[t]
        m = _DECIMAL_RE.match(t)
        if m:
            precision, scale = int(m.group(1)), int(m.group(2))
            if not 1 <= precision <= 38 or scale > precision:
                raise ValueError(f"{t!r} is not a valid Delta type: a decimal's precision is 1 to 38 and its scale at most the precision")
            return pa.decimal128(precision, scale)
        if t == "decimal":
            return pa.decimal128(10, 0)
        geo = geospatial.parse_delta_type(t)
        if geo is not None:
            return geo
        raise UnsupportedFeatureError(f"column type {t!r} is not supported by lakelog (see specs/PROTOCOL.md for the supported types)")
    if not isinstance(t, dict):
        raise ValueError(f"{t!r} is not a Delta type")
    kind = t.get("type")
    if kind == "struct":
        fields = t.get("fields")
        if not isinstance(fields, list):
            raise ValueError(f"a struct type needs a list of fields, got {fields!r}")
        return pa.struct(_delta_fields(fields))
    if kind == "array":
        return pa.list_(_arrow_field("element", _required(t, "elementType"), _flag(t, "containsNull")))
    if kind == "map":
        return pa.map_(
            delta_type_to_arrow(_required(t, "keyType")),
            _arrow_field("value", _required(t, "valueType"), _flag(t, "valueContainsNull")),
        )
    if not isinstance(kind, str):
        raise ValueError(f"{t!r} is not a Delta type")
    raise UnsupportedFeatureError(f"column type {kind!r} is not supported by lakelog")


def _required(t: dict, key: str) -> Any:
    if key not in t:
        raise ValueError(f"a {t.get('type')} type needs {key!r}")
    return t[key]


def _flag(d: dict, key: str) -> bool:
    v = d.get(key, True)
    if not isinstance(v, bool):
        raise ValueError(f"{key!r} must be true or false, got {v!r}")
    return v


def delta_field_to_arrow(f: Any) -> pa.Field:
    if not isinstance(f, dict) or not isinstance(f.get("name"), str) or not f["name"]:
        raise ValueError(f"{f!r} is not a Delta struct field (an object with a non-empty string 'name')")
    # A field's collations ride along as Arrow field metadata (see lakelog.schema.collations).
    field = _arrow_field(f["name"], _required(f, "type"), _flag(f, "nullable"))
    meta = collations.arrow_metadata(f)
    return field if meta is None else field.with_metadata({**(field.metadata or {}), **meta})


def _delta_fields(fields: list) -> list[pa.Field]:
    out = [delta_field_to_arrow(f) for f in fields]
    seen: set[str] = set()
    for f in out:
        if f.name.lower() in seen:
            raise ValueError(f"the field name {f.name!r} appears twice (Delta names are case-insensitive)")
        seen.add(f.name.lower())
    return out


def schema_from_string(schema_string: str) -> pa.Schema:
    """Parse a ``metaData.schemaString`` into an Arrow schema (column order preserved).

    ``CorruptLogError`` when it is not a valid Delta schema, ``UnsupportedFeatureError`` when it uses a
    type lakelog does not read."""
    try:
        d = orjson.loads(schema_string)
        if not isinstance(d, dict) or d.get("type") != "struct" or not isinstance(d.get("fields"), list):
            raise ValueError("it is not a struct type with a list of fields")
        return pa.schema(_delta_fields(d["fields"]))
    except (orjson.JSONDecodeError, ValueError, TypeError, KeyError, AttributeError, pa.ArrowException) as e:
        raise CorruptLogError(f"metaData.schemaString is not a valid Delta schema ({e}); the table metadata is damaged") from None


# ---------------------------------------------------------------- Arrow -> Delta

def arrow_type_to_delta(t: pa.DataType) -> Any:
    if geospatial.is_geo(t):
        return geospatial.to_delta(t)
    if pa.types.is_null(t):
        return "void"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_int8(t):
        return "byte"
    if pa.types.is_int16(t):
        return "short"
    if pa.types.is_int32(t):
        return "integer"
    if pa.types.is_int64(t):
        return "long"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t):
        return "binary"
    if pa.types.is_date32(t) or pa.types.is_date64(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz is not None else "timestamp_ntz"
    if pa.types.is_decimal(t):
        if t.precision > 38:
            raise SchemaMismatchError(f"decimal precision {t.precision} exceeds Delta's maximum of 38; cast the column to decimal(38, s) or less")
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_struct(t):
        return {"type": "struct", "fields": [arrow_field_to_delta(t.field(i)) for i in range(t.num_fields)]}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) or pa.types.is_list_view(t):
        return {"type": "array", "elementType": _field_type(t.value_field), "containsNull": _nullable(t.value_field)}
    if pa.types.is_map(t):
        return {
            "type": "map",
            "keyType": arrow_type_to_delta(t.key_type),
            "valueType": _field_type(t.item_field),
            "valueContainsNull": _nullable(t.item_field),
        }
    if pa.types.is_dictionary(t):
        return arrow_type_to_delta(t.value_type)
    if pa.types.is_unsigned_integer(t):
        widened = {8: "short", 16: "integer", 32: "long"}.get(t.bit_width)
        if widened:
            return widened
    raise SchemaMismatchError(
        f"Arrow type {t} has no Delta equivalent; cast the column to a supported type "
        "(integers, floats, bool, string, binary, date, timestamp, decimal, struct, list, map)"
    )


def _field_type(f: pa.Field) -> Any:
    return "variant" if is_variant_field(f) else arrow_type_to_delta(f.type)


def _nullable(f: pa.Field) -> bool:
    return f.nullable or pa.types.is_null(f.type)  # a void field holds nulls whatever it says


def arrow_field_to_delta(f: pa.Field) -> dict:
    return {"name": f.name, "type": _field_type(f), "nullable": _nullable(f), "metadata": collations.delta_metadata(f)}


def delta_type_string(t: pa.DataType) -> str:
    """A Delta type as Spark prints it (``long``, ``array<integer>``, ``struct<a: string>``), for messages."""
    try:
        d = arrow_type_to_delta(t)
    except SchemaMismatchError:
        return str(t)

    def show(d: Any) -> str:
        if isinstance(d, str):
            return d
        if d["type"] == "struct":
            return "struct<" + ", ".join(f"{f['name']}: {show(f['type'])}" for f in d["fields"]) + ">"
        if d["type"] == "array":
            return f"array<{show(d['elementType'])}>"
        return f"map<{show(d['keyType'])}, {show(d['valueType'])}>"

    return show(d)


def schema_to_string(schema: pa.Schema) -> str:
    """Serialize an Arrow schema to Delta's JSON schema string."""
    check_column_names(schema)
    return orjson.dumps({"type": "struct", "fields": [arrow_field_to_delta(f) for f in schema]}).decode()


class ColumnNames:
    """Column-name resolution as Delta does it: a name refers to the column it equals, else to the one
    it equals ignoring case (a table never has two names differing only in case)."""

    def __init__(self, names):
        self.names = list(names)
        self._exact = set(self.names)
        self._lower: dict[str, str] = {}
        for n in self.names:
            self._lower.setdefault(n.lower(), n)

    def find(self, name: Any) -> str | None:
        """The column ``name`` refers to, or None."""
        if not isinstance(name, str):
            return None
        return name if name in self._exact else self._lower.get(name.lower())

    def __contains__(self, name: Any) -> bool:
        return self.find(name) is not None


def check_column_names(schema: pa.Schema | list[pa.Field], prefix: str = "", *, mapped: bool = False) -> None:
    """Refuse names that are empty or equal ignoring case and, unless the table has column mapping
    (``mapped``: names are then free text, spaces and ``,;{}()=`` included), names with a character Delta
    does not allow without it; at every depth, as Spark does."""
    seen: dict[str, str] = {}
    for f in schema:
        if not f.name or (not mapped and set(f.name) & _BAD_NAME_CHARS):
            raise SchemaMismatchError(
                f"column name {prefix + f.name!r} contains a character Delta does not allow without column mapping "
                f"(one of {sorted(_BAD_NAME_CHARS)!r}); rename the column, or give the table column mapping "
                "(configuration={'delta.columnMapping.mode': 'name'}), which allows any name"
            )
        low = f.name.lower()
        if low in seen:
            raise SchemaMismatchError(f"column names {prefix + seen[low]!r} and {prefix + f.name!r} differ only by case; Delta requires unique names")
        seen[low] = f.name
        t = f.type.value_type if pa.types.is_dictionary(f.type) else f.type
        while pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) or pa.types.is_map(t):
            if pa.types.is_map(t):
                check_column_names([pa.field("key", t.key_type)], f"{prefix}{f.name}.", mapped=mapped)
                t = t.item_type
            else:
                t = t.value_type
        if pa.types.is_struct(t):
            check_column_names([t.field(i) for i in range(t.num_fields)], f"{prefix}{f.name}.", mapped=mapped)


def canonical_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type lakelog stores and returns for ``t`` (one Arrow type per Delta type)."""
    return delta_type_to_arrow(arrow_type_to_delta(t))


def canonical_schema(schema: pa.Schema) -> pa.Schema:
    fields = []
    for f in schema:
        try:
            fields.append(collations.keep(variant_field(f.name, _nullable(f)) if is_variant_field(f) else pa.field(f.name, canonical_type(f.type), _nullable(f)), f))
        except (SchemaMismatchError, UnsupportedFeatureError) as e:
            raise SchemaMismatchError(f"column {f.name!r}: {e}") from None
    return pa.schema(fields)


def uses_timestamp_ntz(schema: pa.Schema) -> bool:
    def walk(t: pa.DataType) -> bool:
        if pa.types.is_timestamp(t):
            return t.tz is None
        if pa.types.is_struct(t):
            return any(walk(t.field(i).type) for i in range(t.num_fields))
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return walk(t.value_type)
        if pa.types.is_map(t):
            return walk(t.key_type) or walk(t.item_type)
        return False

    return any(walk(f.type) for f in schema)


def _widening_ok(src: pa.DataType, dst: pa.DataType) -> bool:
    if src == dst:
        return True
    if pa.types.is_integer(src) and pa.types.is_integer(dst) and pa.types.is_signed_integer(dst):
        return src.bit_width < dst.bit_width or (pa.types.is_signed_integer(src) and src.bit_width <= dst.bit_width)
    if pa.types.is_float32(src) and pa.types.is_float64(dst):
        return True
    return False


def _strip_nullability(t: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(t):
        return pa.struct([pa.field(t.field(i).name, _strip_nullability(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_list(t):
        return pa.list_(_strip_nullability(t.value_type))
    if pa.types.is_map(t):
        return pa.map_(_strip_nullability(t.key_type), _strip_nullability(t.item_type))
    return t

"""Arrow <-> Delta schema conversion, partition value serialization and input normalization."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
from typing import Any

import orjson
import pyarrow as pa

from . import arrow_values, collations, geospatial
from .errors import CorruptLogError, InvalidArgumentTypeError, PartitionValueError, SchemaMismatchError, UnsupportedFeatureError

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
_DECIMAL_RE = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
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
    # A field's collations ride along as Arrow field metadata (see lakelog.collations).
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


# ---------------------------------------------------------------- data normalization

def _from_pandas(df: Any) -> pa.Table:
    """A pandas DataFrame as Arrow: named index levels become columns (after the others, as pyarrow and
    deltalake place them); unnamed ones (a default RangeIndex, a filtered frame's row labels) are dropped."""
    if not hasattr(df, "index") or not hasattr(df, "columns"):
        raise InvalidArgumentTypeError(f"cannot write a pandas {type(df).__name__}; pass a DataFrame (e.g. series.to_frame())")
    named = [n for n in df.index.names if n is not None]
    try:
        t = pa.Table.from_pandas(df, preserve_index=bool(named))
    except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError) as e:
        raise SchemaMismatchError(f"the DataFrame cannot be converted to Arrow: {e}") from None
    if named:
        meta = t.schema.pandas_metadata or {}
        index_fields = {c for c in meta.get("index_columns", []) if isinstance(c, str)}
        unnamed = []
        for c in meta.get("columns", []):
            if c.get("field_name") not in index_fields:
                continue
            if c.get("name") is None:
                unnamed.append(c["field_name"])
            elif c["field_name"] != str(c["name"]):  # pyarrow renames a level that shares a column's name
                raise SchemaMismatchError(
                    f"the DataFrame's index level {c['name']!r} has the name of one of its columns; "
                    "rename the level, or drop the index with df.reset_index(drop=True)"
                )
        if unnamed:
            t = t.drop_columns(unnamed)
    return t.replace_schema_metadata(None)


def to_arrow_stream(data: Any) -> tuple[pa.Schema, Any]:
    """Accept pyarrow Table/RecordBatch/RecordBatchReader or pandas DataFrame; return (schema, batch iterator)."""
    if isinstance(data, pa.Table):
        return data.schema, iter(data.to_batches())
    if isinstance(data, pa.RecordBatch):
        return data.schema, iter([data])
    if isinstance(data, pa.RecordBatchReader):
        return data.schema, iter(data)
    mod = type(data).__module__
    if mod.startswith("pandas"):
        t = _from_pandas(data)
        return t.schema, iter(t.to_batches())
    if hasattr(data, "__arrow_c_stream__"):
        r = pa.RecordBatchReader.from_stream(data)
        return r.schema, iter(r)
    raise InvalidArgumentTypeError(f"cannot write data of type {type(data).__name__}; pass a pyarrow Table, RecordBatch, RecordBatchReader or pandas DataFrame")


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


# ---------------------------------------------------------------- partition values

# Years are written with four digits; fewer are accepted on read (such values were written unpadded).
_DATE_FORM = re.compile(r"^(\d{1,4})(-\d{2}-\d{2})$")
_TIMESTAMP_FORM = re.compile(r"^(\d{1,4})(-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?)(Z|[+-]\d{2}:\d{2})?$")
_INTEGER_FORM = re.compile(r"^[+-]?\d+$")
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = _EPOCH.replace(tzinfo=dt.timezone.utc)
_US = dt.timedelta(microseconds=1)


def format_timestamp(value: dt.datetime, sep: str = "T") -> str:
    """``YYYY-MM-DD<sep>HH:MM:SS.ffffff`` (four-digit year), plus ``Z`` for an aware value (converted to UTC)."""
    if value.tzinfo is not None:
        return (value - value.utcoffset()).replace(tzinfo=None).isoformat(sep=sep, timespec="microseconds") + "Z"
    return value.isoformat(sep=sep, timespec="microseconds")


def parse_date(s: str) -> dt.date:
    """A Delta date (``YYYY-MM-DD``); ValueError for anything else."""
    m = _DATE_FORM.match(s)
    if not m:
        raise ValueError(f"{s!r} is not a date of the form YYYY-MM-DD")
    return dt.date.fromisoformat(m.group(1).zfill(4) + m.group(2))


def parse_timestamp(s: str) -> dt.datetime:
    """A Delta timestamp (``YYYY-MM-DD HH:MM:SS[.ffffff]``, ``T`` for the space, optional ``Z`` or
    ``+HH:MM``): aware when it carries an offset; ValueError for anything else."""
    m = _TIMESTAMP_FORM.match(s)
    if not m:
        raise ValueError(f"{s!r} is not a timestamp of the form YYYY-MM-DD HH:MM:SS[.ffffff][Z]")
    year, md, clock, offset = m.groups()
    return dt.datetime.fromisoformat(f"{year.zfill(4)}{md}T{clock}{'+00:00' if offset == 'Z' else offset or ''}")


def timestamp_micros(s: str, utc: bool) -> int:
    """Microseconds since the epoch of a Delta timestamp string (no datetime range limit on the result).
    ``utc``: for a ``timestamp`` column (no offset means UTC); else ``timestamp_ntz`` (no offset, or ``Z``),
    where a date is its midnight (see ``parse_partition_value``)."""
    if not utc and _DATE_FORM.match(s):
        return (dt.datetime.combine(parse_date(s), dt.time()) - _EPOCH) // _US
    v = parse_timestamp(s)
    if v.tzinfo is None:
        return (v - _EPOCH) // _US
    if not utc and v.utcoffset():
        raise ValueError(f"{s!r} has a time zone offset, which a timestamp without time zone cannot have")
    return (v - _EPOCH_UTC) // _US


def serialize_partition_value(value: Any, t: pa.DataType) -> str | None:
    """Delta partition value serialization (PROTOCOL.md, 'Partition Value Serialization')."""
    if value is None:
        return None
    if pa.types.is_boolean(t):
        return "true" if value else "false"
    if pa.types.is_timestamp(t):
        if t.tz is not None:
            return format_timestamp(value)
        return format_timestamp(value, sep=" ")
    if pa.types.is_date(t):
        return value.isoformat()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return bytes(value).decode("latin-1")
    if pa.types.is_floating(t):
        f = float(value)
        if math.isnan(f):
            return "NaN"  # Java's forms, which Spark writes and reads
        if math.isinf(f):
            return "Infinity" if f > 0 else "-Infinity"
        return repr(f)
    if pa.types.is_decimal(t):
        return format(value, "f")
    if isinstance(value, str):
        return value
    if pa.types.is_integer(t):
        return str(int(value))
    raise SchemaMismatchError(f"cannot partition by a column of type {t}; partition columns must be primitive")


def parse_partition_value(s: str | None, t: pa.DataType) -> Any:
    """Inverse of serialize_partition_value; accepts every form the protocol allows. '' means null.

    A value that is not in a form the protocol allows for ``t`` raises ``PartitionValueError``."""
    if s is None or s == "":
        return None
    if not isinstance(s, str):
        raise PartitionValueError(f"partition value {s!r} is a JSON {type(s).__name__}, not a string as the protocol requires")
    try:
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return s
        if pa.types.is_integer(t):
            if not _INTEGER_FORM.match(s):
                raise ValueError("expected an integer")
            v = int(s)
            arrow_values.scalar(v, t)  # in range
            return v
        if pa.types.is_floating(t):
            return float(s)
        if pa.types.is_boolean(t):
            if s.lower() not in ("true", "false"):
                raise ValueError("expected true or false")
            return s.lower() == "true"
        if pa.types.is_date(t):
            return parse_date(s)
        if pa.types.is_timestamp(t):
            if t.tz is None and _DATE_FORM.match(s):
                # Logged while the column was a date, before a type widening to timestamp_ntz: the
                # widened value is the date's midnight (as Delta casts it).
                return dt.datetime.combine(parse_date(s), dt.time())
            v = parse_timestamp(s)
            if t.tz is not None:
                # Without an offset, taken as UTC (as modern writers write it; the protocol recommends UTC).
                return v.replace(tzinfo=dt.timezone.utc) if v.tzinfo is None else v.astimezone(dt.timezone.utc)
            if v.tzinfo is not None and v.utcoffset():
                raise ValueError("a timestamp without time zone cannot have an offset")
            return v.replace(tzinfo=None)
        if pa.types.is_decimal(t):
            v = decimal.Decimal(s)
            pa.scalar(v, t)  # fits the precision and scale
            return v
        if pa.types.is_binary(t):
            return s.encode("latin-1")
    except (ValueError, OverflowError, decimal.InvalidOperation, UnicodeEncodeError, pa.ArrowException) as e:
        raise PartitionValueError(f"partition value {s!r} is not a valid {arrow_type_to_delta(t)} ({e})") from None
    raise UnsupportedFeatureError(f"partition column of type {t} is not supported")


def partition_scalars(values: dict[str, str | None], schema: pa.Schema, partition_columns: list[str], path: str) -> dict[str, pa.Scalar]:
    """The typed partition values of the data file ``path`` (its ``partitionValues``), one Arrow scalar per
    partition column (a null scalar for null). ``CorruptLogError`` naming the file when a partition column
    has no entry or its value is not of the column's type: reading it would give wrong or no rows."""
    out: dict[str, pa.Scalar] = {}
    for c in partition_columns:
        t = schema.field(c).type
        if c not in values:
            raise CorruptLogError(
                f"data file {path!r} has no partition value for column {c!r} (its partitionValues are {values!r}); "
                "the log is damaged. Restore the commit that added it from a backup."
            )
        raw = values[c]
        try:
            if pa.types.is_boolean(t) and raw not in (None, "") and raw.lower() not in ("true", "false"):
                raise ValueError("not true or false")
            out[c] = arrow_values.scalar(parse_partition_value(raw, t), t)
        except (ValueError, TypeError, ArithmeticError, OverflowError, pa.ArrowException) as e:
            raise PartitionValueError(
                f"data file {path!r} has the partition value {raw!r} for column {c!r}, which is not a valid {t} ({e}); "
                "the log is damaged. Restore the commit that added it from a backup."
            ) from None
    return out


def partition_value_arrays(values: dict[str, str | None], schema: pa.Schema, partition_columns: list[str], path: str, n: int) -> dict[str, pa.Array]:
    """``n`` rows of each partition column holding the logged ``values`` as readers decode them (an
    empty string is null); errors as ``partition_scalars``."""
    scalars = partition_scalars(values, schema, partition_columns, path)
    return {c: pa.repeat(v, n) if v.is_valid else pa.nulls(n, schema.field(c).type) for c, v in scalars.items()}


_HIVE_ESCAPE = set('"#%\'*/:=?\\\x7f{[]^') | {chr(c) for c in range(0, 32)}
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


def hive_escape(s: str | None) -> str:
    """Escape a partition value for a ``k=v`` directory name, as Hive and Spark do."""
    if s is None:
        return HIVE_NULL
    return "".join(f"%{ord(c):02X}" if c in _HIVE_ESCAPE else c for c in s)

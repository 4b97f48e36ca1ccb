"""Variant columns in tables: data given for them made into their binaries, shredded files reassembled,
and the forms other consumers get (Python values for pandas, JSON text for DuckDB and Polars).

A variant column is, in Arrow, ``struct<value: binary, metadata: binary>`` marked as a variant field
(``lakelog.schema.types.variant_field``). Data written to one may be that struct (fields in any order, as
Spark writes them: ``value`` first), JSON text (parsed by the Parquet Variant codec, ``lakelog.variant``)
or other Arrow values without structs (encoded from their Python values). The binaries given are stored byte for byte.
Variants nested in structs, lists and maps are handled at every depth.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidArgumentTypeError, SchemaMismatchError
from .types import VARIANT_STORAGE, has_variant, is_variant_field, variant_field

Convert = Callable[[pa.Array], pa.Array]


def _codec():
    from .. import variant  # noqa: I001  (the codec: imported only where variant values are encoded or decoded)

    return variant


def _is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _is_variant_struct(t: pa.DataType) -> bool:
    """A struct of exactly ``metadata`` and ``value`` binaries (the unshredded physical form, any order)."""
    return pa.types.is_struct(t) and sorted(t.names) == ["metadata", "value"] and all(
        pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type) or pa.types.is_binary_view(f.type) for f in t
    )


def to_variant(arr: pa.Array, path: str) -> pa.Array:
    """``arr`` (given for the variant column ``path``) as variant binaries: a variant struct as it is
    (reordered), JSON text parsed, null nulls, anything else encoded from its Python values."""
    if isinstance(arr, pa.ChunkedArray):
        return pa.chunked_array([to_variant(c, path) for c in arr.chunks], VARIANT_STORAGE)
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    t = arr.type
    if t == VARIANT_STORAGE:
        out = arr
    elif pa.types.is_null(t):
        return _all_null(len(arr))
    elif _is_variant_struct(t):
        mask = arr.is_null() if arr.null_count else None
        children = [arr.field(f.name).cast(pa.binary()) for f in VARIANT_STORAGE]
        out = pa.StructArray.from_arrays(children, fields=list(VARIANT_STORAGE), mask=mask)
    elif pa.types.is_struct(t) and "typed_value" in t.names and "metadata" in t.names:
        return unshred(arr)
    elif _is_string(t):
        try:
            out = _codec().from_json_array(arr.cast(pa.string()))
        except ValueError as e:
            raise SchemaMismatchError(f"column {path!r} is a variant column and its text is not JSON ({e}); give JSON text, "
                                      "Python values (lakelog.with_variants) or variant binaries") from None
    elif _has_struct(t):
        # (pandas and pyarrow infer one struct type for all rows, giving each row every key: its values
        # would not be the objects given)
        raise SchemaMismatchError(f"column {path!r} is a variant column and its data is an Arrow {t}, whose structs would be "
                                  "stored with every field of the type in every row; give the objects as Python values "
                                  "(lakelog.with_variants(data, [column])) or as JSON text")
    else:
        try:
            out = _codec().from_python(arr.to_pylist())
        except (ValueError, TypeError, OverflowError) as e:
            raise SchemaMismatchError(f"column {path!r} is a variant column and its {t} values cannot be encoded as variants ({e})") from None
    return _check_binaries(out, path)


def _has_struct(t: pa.DataType) -> bool:
    if pa.types.is_struct(t):
        return True
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) or pa.types.is_list_view(t):
        return _has_struct(t.value_type)
    if pa.types.is_map(t):
        return _has_struct(t.item_type)
    return False


def _check_binaries(arr: pa.Array, path: str) -> pa.Array:
    """``arr`` with nulls under null rows made empty binaries (Parquet refuses a null in a required field);
    a valid row with a null binary is refused."""
    children = [arr.field(f.name) for f in VARIANT_STORAGE]
    if not any(c.null_count for c in children):
        return arr
    missing = pc.or_(children[0].is_null(), children[1].is_null())
    bad = pc.and_(arr.is_valid(), missing).true_count
    if bad:
        raise SchemaMismatchError(f"column {path!r} is a variant column and {bad} row(s) have no metadata or value binary; "
                                  "a variant needs both (a SQL NULL is a null struct)")
    empty = pa.scalar(b"", pa.binary())
    mask = arr.is_null() if arr.null_count else None
    return pa.StructArray.from_arrays([pc.fill_null(c, empty) for c in children], fields=list(VARIANT_STORAGE), mask=mask)


def _all_null(n: int) -> pa.Array:
    empty = pa.repeat(pa.scalar(b"", pa.binary()), n)
    return pa.StructArray.from_arrays([empty, empty], fields=list(VARIANT_STORAGE), mask=pa.repeat(pa.scalar(True), n))


def unshred(arr: pa.Array) -> pa.Array:
    """A variant column as a Parquet file stores it, shredded (``typed_value``) or not, as variant binaries."""
    if isinstance(arr, pa.ChunkedArray):
        return pa.chunked_array([unshred(c) for c in arr.chunks], VARIANT_STORAGE)
    if "typed_value" not in arr.type.names:
        return to_variant(arr, "")
    out = _codec().unshred(arr)
    return out if out.type == VARIANT_STORAGE else out.cast(VARIANT_STORAGE)


def variant_sources(source: pa.Table, target: pa.Schema) -> pa.Table:
    """A merge source with its columns named as the target's top-level variant columns made variants
    (JSON text parsed, other values encoded as ``to_variant`` does), so clauses assign them as variants."""
    wanted = {f.name.lower() for f in target if is_variant_field(f)}
    if not wanted:
        return source
    for i, f in enumerate(source.schema):
        if f.name.lower() in wanted and not is_variant_field(f):
            source = source.set_column(i, variant_field(f.name, f.nullable), to_variant(source.column(i), f.name))
    return source


# ---------------------------------------------------------------- other consumers


def map_variants(arr: pa.Array, field: pa.Field, fn: Convert, out_type: pa.DataType) -> tuple[pa.Array, pa.Field]:
    """``arr`` (of ``field``) with ``fn`` applied to every variant at any depth (each becoming ``out_type``)."""
    if isinstance(arr, pa.ChunkedArray):
        pairs = [map_variants(c, field, fn, out_type) for c in arr.chunks]
        f = pairs[0][1] if pairs else map_variants(pa.array([], field.type), field, fn, out_type)[1]
        return pa.chunked_array([a for a, _ in pairs], f.type), f
    if is_variant_field(field):
        return fn(arr), pa.field(field.name, out_type, field.nullable)
    t = field.type
    if not has_variant(t):
        return arr, field
    mask = arr.is_null() if arr.null_count else None
    if pa.types.is_struct(t):
        pairs = [map_variants(arr.field(i), t.field(i), fn, out_type) for i in range(t.num_fields)]
        return pa.StructArray.from_arrays([a for a, _ in pairs], fields=[f for _, f in pairs], mask=mask), field.with_type(pa.struct([f for _, f in pairs]))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        offsets = pc.subtract(arr.offsets, arr.offsets[0])
        values = arr.values.slice(arr.offsets[0].as_py(), arr.offsets[-1].as_py() - arr.offsets[0].as_py())
        v, vf = map_variants(values, t.value_field, fn, out_type)
        lt = pa.list_(vf) if pa.types.is_list(t) else pa.large_list(vf)
        cls = pa.ListArray if pa.types.is_list(t) else pa.LargeListArray
        return cls.from_arrays(offsets, v, type=lt, mask=mask), field.with_type(lt)
    if pa.types.is_map(t):
        start, end = arr.offsets[0].as_py(), arr.offsets[-1].as_py()
        offsets = pc.subtract(arr.offsets, arr.offsets[0])
        v, vf = map_variants(arr.items.slice(start, end - start), t.item_field, fn, out_type)
        mt = pa.map_(t.key_field, vf)
        return pa.MapArray.from_arrays(offsets, arr.keys.slice(start, end - start), v, type=mt, mask=mask), field.with_type(mt)
    return arr, field


def _map_table(table: pa.Table, fn: Convert, out_type: pa.DataType) -> pa.Table:
    if not has_variant(table.schema):
        return table
    arrays, fields = [], []
    for col, f in zip(table.columns, table.schema):
        a, nf = map_variants(col, f, fn, out_type)
        arrays.append(a)
        fields.append(nf)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def without_marks(table: pa.Table) -> pa.Table:
    """``table`` with its variants as plain structs of binaries (no extension name): what the SQL engine
    gets, as DuckDB would otherwise decode the values into its own VARIANT type and re-encode them."""
    return _map_table(table, lambda a: a, VARIANT_STORAGE)


def with_json_text(table: pa.Table) -> pa.Table:
    """``table`` with every variant as its JSON text (null for SQL NULL): what DuckDB and Polars get."""
    return _map_table(table, lambda a: _codec().to_json_array(a), pa.string())


def to_pandas(table: pa.Table, **kwargs: Any):
    """``table.to_pandas()`` with every variant column decoded to Python values (objects)."""
    if not has_variant(table.schema):
        return table.to_pandas(**kwargs)
    names = [f.name for f in table.schema if is_variant_field(f)]
    plain = table.drop_columns(names)
    df = plain.to_pandas(**kwargs)
    for name in names:
        df.insert(table.schema.names.index(name), name, _codec().to_python(table.column(name).combine_chunks()))
    if any(has_variant(f) for f in plain.schema):
        for f in plain.schema:
            if has_variant(f):
                df[f.name] = _python_values(table.column(f.name), f)
    return df


def _python_values(col: pa.ChunkedArray, field: pa.Field) -> list:
    """The Python values of a column holding variants inside structs, lists or maps, variants decoded."""
    def value(v: Any, f: pa.Field) -> Any:
        if v is None:
            return None
        if is_variant_field(f):
            obj = _codec().decode(v["metadata"], v["value"])
            return _codec().VARIANT_NULL if obj is None else obj  # (as to_python: the JSON null is no SQL NULL)
        t = f.type
        if pa.types.is_struct(t):
            return {t.field(i).name: value(v.get(t.field(i).name), t.field(i)) for i in range(t.num_fields)}
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return [value(x, t.value_field) for x in v]
        if pa.types.is_map(t):
            return [(k, value(x, t.item_field)) for k, x in v]
        return v

    return [value(v, field) for v in col.to_pylist()]


def with_variants(data: Any, columns: list[str]) -> pa.Table:
    """``data`` (a pandas DataFrame, Arrow table or dict of lists) with ``columns`` made variant columns.
    Python values (a DataFrame's or a list's: dicts, lists, numbers, strings, ...) are encoded as they
    are (a ``str`` is a variant string); an Arrow string column is JSON text (parsed as Spark's
    ``parse_json``), an Arrow variant struct is kept. Pass it to ``write_table`` to create a table with
    these variant columns (a string column written to an existing variant column is JSON text too)."""
    if isinstance(columns, str) or not isinstance(columns, (list, tuple)):
        raise InvalidArgumentTypeError(f"columns must be a list of column names, not {columns!r}")
    if isinstance(data, dict):
        data = {k: (list(v) if k in columns else v) for k, v in data.items()}
        values = {k: data[k] for k in columns if k in data}
        rest = pa.table({k: v for k, v in data.items() if k not in columns}) if len(values) < len(data) else None
        names = list(data)
    elif type(data).__module__.startswith("pandas"):
        values = {k: [None if _is_na(x) else x for x in data[k].tolist()] for k in columns if k in data.columns}
        from .input_data import to_arrow_stream

        others = [c for c in data.columns if c not in columns]
        if others:
            schema, batches = to_arrow_stream(data[others])
            rest = pa.Table.from_batches(list(batches), schema=schema)
        names = [str(c) for c in data.columns]
    elif isinstance(data, (pa.Table, pa.RecordBatch)):
        t = pa.table(data) if isinstance(data, pa.RecordBatch) else data
        values = {k: t.column(k) for k in columns if k in t.column_names}
        rest = t.drop_columns([k for k in columns if k in t.column_names])
        names = t.column_names
    else:
        raise InvalidArgumentTypeError(f"cannot make variant columns of a {type(data).__name__}; pass a pandas DataFrame, Arrow table or dict of lists")
    missing = [c for c in columns if c not in values]
    if missing:
        raise SchemaMismatchError(f"column(s) {missing} are not in the data (columns: {names})")
    arrays, fields = [], []
    for name in names:
        if name in values:
            v = values[name]
            if isinstance(v, list):
                try:
                    arr = _codec().from_python(v)
                except (ValueError, TypeError, OverflowError) as e:
                    raise SchemaMismatchError(f"column {name!r} holds a value that cannot be encoded as a variant ({e})") from None
            else:
                arr = to_variant(v, name)
            arrays.append(arr)
            fields.append(variant_field(name))
        else:
            arrays.append(rest.column(name))
            fields.append(rest.schema.field(name))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _is_na(x: Any) -> bool:
    try:
        import pandas as pd

        return x is None or (not isinstance(x, (list, dict, tuple)) and bool(pd.isna(x)))
    except (TypeError, ValueError):
        return False

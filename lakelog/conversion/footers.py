"""The Parquet footers of a converted data set: its unified schema and each file's stats."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from .. import geospatial
from ..data_files import nanosecond_columns
from ..errors import (
    ConvertError,
    LakelogError,
    MissingDataFileError,
    NanosecondTimestampError,
    SchemaMismatchError,
    UnsupportedFeatureError,
)
from ..parquet_read import parquet_file
from ..schema import _strip_nullability, _widening_ok, canonical_type
from ..storage import Storage
from ..write import stats_from_parquet_metadata
from .sources import SourceFile


MAX_INDEXED_COLS = 32  # delta.dataSkippingNumIndexedCols default; converted tables have no configuration
FOOTER_THREADS = 16


def _leaf_count(t: pa.DataType) -> int:
    if pa.types.is_struct(t):
        return sum(_leaf_count(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _leaf_count(t.key_type) + _leaf_count(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _leaf_count(t.value_type)
    return 1


def _with_int96_as_utc(schema: pa.Schema, md: pq.FileMetaData) -> pa.Schema:
    """INT96 columns (Spark's default timestamp encoding) hold UTC instants: give them the UTC time zone."""
    physical = [md.schema.column(i).physical_type for i in range(md.num_columns)]
    if "INT96" not in physical:
        return schema
    idx = 0

    def fix(t: pa.DataType) -> pa.DataType:
        nonlocal idx
        if pa.types.is_struct(t):
            return pa.struct([pa.field(t.field(i).name, fix(t.field(i).type), t.field(i).nullable) for i in range(t.num_fields)])
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            vf = t.value_field
            inner = pa.field(vf.name, fix(vf.type), vf.nullable)
            return pa.list_(inner) if pa.types.is_list(t) else pa.large_list(inner)
        if pa.types.is_map(t):
            kf, itf = t.key_field, t.item_field
            return pa.map_(pa.field(kf.name, fix(kf.type), kf.nullable), pa.field(itf.name, fix(itf.type), itf.nullable))
        if pa.types.is_nested(t):
            idx += _leaf_count(t)
            return t
        p = physical[idx] if idx < len(physical) else None
        idx += 1
        if p == "INT96" and pa.types.is_timestamp(t) and t.tz is None:
            return pa.timestamp(t.unit, tz="UTC")
        return t

    return pa.schema([pa.field(f.name, fix(f.type), f.nullable) for f in schema])


@dataclass
class Footer:
    schema: pa.Schema  # the file's Arrow schema (INT96 timestamps as UTC)
    metadata: pq.FileMetaData


def _read_footer(storage: Storage, rel: str) -> Footer:
    try:
        with storage.arrow_fs.open_input_file(storage.join(rel)) as f:
            pf = parquet_file(f)
            md = pf.metadata
            schema = pf.schema_arrow
    except FileNotFoundError:
        raise MissingDataFileError(f"{rel!r} disappeared while converting; retry") from None
    except (pa.ArrowException, OSError, ValueError) as e:
        storage.raise_if_unanswered(e, storage.join(rel))
        raise ConvertError(f"{rel!r} is not a readable Parquet file ({e}); remove or repair it before converting") from None
    return Footer(_with_geo_types(_with_int96_as_utc(schema, md), md, rel), md)


def _with_geo_types(schema: pa.Schema, md: pq.FileMetaData, rel: str) -> pa.Schema:
    """Top-level GEOMETRY / GEOGRAPHY columns (which pyarrow reads as binary) as their geo types."""
    for i in range(md.num_columns):
        col = md.schema.column(i)
        if col.path not in schema.names or col.logical_type.type not in ("GEOMETRY", "GEOGRAPHY"):
            continue
        try:
            t = geospatial.from_parquet(col.logical_type.to_json())
        except LakelogError as e:
            raise ConvertError(f"{rel!r} column {col.path!r}: {e}") from None
        if t is not None:
            j = schema.get_field_index(col.path)
            schema = schema.set(j, schema.field(j).with_type(t))
    return schema


def read_footers(storage: Storage, files: list[SourceFile]) -> dict[str, Footer]:
    if len(files) == 1:
        return {files[0].rel: _read_footer(storage, files[0].rel)}
    with ThreadPoolExecutor(max_workers=min(FOOTER_THREADS, len(files))) as pool:
        results = list(pool.map(lambda f: _read_footer(storage, f.rel), files))
    return {f.rel: r for f, r in zip(files, results)}


def refuse_nanosecond_timestamps(footers: dict[str, "Footer"]) -> None:
    """Parquet ``TIMESTAMP(NANOS)`` columns (pandas' default unit) have no Delta type: adopting them in
    place would make a table Spark cannot read and delta-rs reads truncated."""
    nanos = {rel: cols for rel in sorted(footers) if (cols := nanosecond_columns(footers[rel].metadata))}
    if not nanos:
        return
    rel, cols = next(iter(nanos.items()))
    more = f" (and {len(nanos) - 1} more file(s), e.g. {list(nanos)[1:4]})" if len(nanos) > 1 else ""
    raise NanosecondTimestampError(
        f"{rel!r} stores column(s) {cols} as nanosecond timestamps (Parquet TIMESTAMP(NANOS), pandas' default unit){more}. "
        "Delta timestamps are microseconds: Spark refuses such files and delta-rs truncates them, so convert does not "
        "adopt them in place. Rewrite the files with microsecond timestamps (pandas: df.to_parquet(path, "
        "coerce_timestamps='us'); pyarrow: pq.write_table(table, path, coerce_timestamps='us')) and convert again, or "
        "load the data with lakelog.write_table(), which stores microseconds.",
        rel,
        cols,
    )


def unify_schemas(footers: dict[str, Footer]) -> pa.Schema:
    """Union of the files' columns (first appearance order); same-named columns must have one Delta type.

    Integers may widen (int -> long) and float to double; columns of Arrow's null type take the type
    other files give them. Any other difference is a SchemaMismatchError naming two files.
    """
    types: dict[str, pa.DataType | None] = {}
    origin: dict[str, str] = {}
    for rel, footer in footers.items():
        for f in footer.schema:
            if pa.types.is_null(f.type):
                types.setdefault(f.name, None)
                continue
            try:
                t = canonical_type(f.type)
            except (SchemaMismatchError, UnsupportedFeatureError) as e:
                raise SchemaMismatchError(f"column {f.name!r} of {rel!r}: {e}") from None
            cur = types.get(f.name)
            if cur is None:
                types[f.name], origin[f.name] = t, rel
            elif cur == t or _widening_ok(t, cur):
                continue
            elif _strip_nullability(cur) == _strip_nullability(t):
                types[f.name] = _strip_nullability(t)
            elif _widening_ok(cur, t):
                types[f.name], origin[f.name] = t, rel
            else:
                raise SchemaMismatchError(
                    f"column {f.name!r} is {cur} in {origin[f.name]!r} but {t} in {rel!r}; the files cannot form one table. "
                    "Rewrite the odd files with a common type, or convert the directories separately."
                )
    untyped = [n for n, t in types.items() if t is None]
    if untyped:
        raise SchemaMismatchError(
            f"column(s) {untyped} hold only nulls of Arrow's null type in every file, so their type is unknown; "
            "rewrite one file with a typed column or drop the column"
        )
    return pa.schema([pa.field(n, t, True) for n, t in types.items()])


def file_stats(footer: Footer) -> str:
    """Delta stats for one file from its footer's row-group statistics, by the writer's own function.

    The file's own Arrow schema lines the leaves up with its Parquet columns, so a file whose columns
    are ordered differently from the table, or that lacks some, still gets exact stats for the columns
    it has (the first 32 leaves in the file's order). Footer statistics that cannot be turned into
    values leave the file with ``numRecords`` only.
    """
    try:
        return stats_from_parquet_metadata(footer.schema, footer.metadata, MAX_INDEXED_COLS)
    except (ValueError, TypeError, UnicodeDecodeError, OverflowError, pa.ArrowException):
        n = footer.metadata.num_rows
        return orjson.dumps({"numRecords": n, "minValues": {}, "maxValues": {}, "nullCount": {}}).decode()

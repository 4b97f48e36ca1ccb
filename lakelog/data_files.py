"""Data files as Parquet: what a file's footer says about whether the table can read it.

Readers never open footers up front (pyarrow reads each one as it scans). These checks run where a
whole-table answer is wanted without reading data: ``lakelog check``, ``convert``, and the error path
of a scan that failed, to name the file at fault.

* Nanosecond timestamps (Parquet ``INT64 TIMESTAMP(NANOS)``, pandas' default unit) have no Delta
  type: Delta timestamps are microseconds. Spark refuses such files (``PARQUET_TYPE_ILLEGAL``),
  delta-rs silently truncates them to microseconds, pyarrow refuses values that would lose precision.
  INT96 timestamps (Spark's legacy encoding) are read as microseconds (``lakelog.parquet_read``) and are fine.
* A column whose stored type is not the table's type, nor one the table's type can hold without loss
  (wider integers, float to double, integers to double, date to ``timestamp_ntz``, wider decimals,
  any timestamp unit to microseconds), is a file the table cannot read as it says.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from .parquet_read import parquet_file
from .schema import canonical_type

FOOTER_THREADS = 16


def physical_rows(storage, add) -> int:
    """The rows physically in ``add``'s data file (rows its deletion vector deletes included):
    ``numRecords`` from its stats, else its Parquet footer."""
    n = add.num_records()
    if n is not None:
        return n
    with storage.arrow_fs.open_input_file(storage.join(add.relative_path)) as f:
        return parquet_file(f).metadata.num_rows


def nanosecond_columns(metadata: pq.FileMetaData) -> list[str]:
    """Dotted paths of the leaf columns stored as ``INT64 TIMESTAMP(NANOS)``."""
    out = []
    schema = metadata.schema
    for i in range(len(schema)):
        col = schema.column(i)
        if col.physical_type != "INT64" or col.logical_type.type != "TIMESTAMP":
            continue
        try:
            unit = orjson.loads(col.logical_type.to_json()).get("timeUnit")
        except (orjson.JSONDecodeError, AttributeError):
            continue
        if unit == "nanoseconds":
            out.append(col.path)
    return out


def readable_as(stored: pa.DataType, table: pa.DataType) -> bool:
    """Whether values stored as ``stored`` read as the table type ``table`` without loss."""
    if pa.types.is_dictionary(stored):
        stored = stored.value_type
    if pa.types.is_timestamp(stored) and pa.types.is_timestamp(table):
        return True  # the unit is checked separately (nanoseconds), the time zone is the table's
    if pa.types.is_date(stored):
        return pa.types.is_date(table) or (pa.types.is_timestamp(table) and table.tz is None)
    if pa.types.is_struct(stored):
        if not pa.types.is_struct(table):
            return False
        wanted = {table.field(i).name: table.field(i).type for i in range(table.num_fields)}
        # Fields the table lacks are not read; fields the file lacks read as null.
        return all(readable_as(stored.field(i).type, wanted[stored.field(i).name]) for i in range(stored.num_fields) if stored.field(i).name in wanted)
    if _is_list(stored):
        return _is_list(table) and readable_as(stored.value_type, table.value_type)
    if pa.types.is_map(stored):
        return pa.types.is_map(table) and readable_as(stored.key_type, table.key_type) and readable_as(stored.item_type, table.item_type)
    if pa.types.is_decimal(stored) and pa.types.is_decimal(table):
        return table.scale >= stored.scale and table.precision - table.scale >= stored.precision - stored.scale
    if pa.types.is_integer(stored):
        if pa.types.is_integer(table):
            signed = pa.types.is_signed_integer(stored)
            return pa.types.is_signed_integer(table) and (table.bit_width > stored.bit_width or (signed and table.bit_width == stored.bit_width))
        if pa.types.is_float64(table):
            return stored.bit_width <= 32
        if pa.types.is_decimal(table):
            digits = {8: 3, 16: 5, 32: 10, 64: 19}[stored.bit_width]
            return table.precision - table.scale >= digits
        return False
    if pa.types.is_float32(stored) and pa.types.is_floating(table):
        return True
    try:
        return canonical_type(stored) == table
    except Exception:  # noqa: BLE001 - a type lakelog has no Delta type for cannot be the table's
        return False


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) or pa.types.is_list_view(t)


@dataclass
class FileReport:
    """What one data file's footer says: ``problems`` are (kind, message) pairs."""

    path: str
    problems: list[tuple[str, str]] = field(default_factory=list)


def inspect_footer(path: str, file_schema: pa.Schema, metadata: pq.FileMetaData, table_schema: pa.Schema, partition_columns: list[str]) -> FileReport:
    """Check one footer against the table schema (``path`` is for messages)."""
    report = FileReport(path)
    nanos = nanosecond_columns(metadata)
    if nanos:
        report.problems.append((
            "nanosecond_timestamps",
            f"data file {path!r} stores column(s) {nanos} as nanosecond timestamps (Parquet TIMESTAMP(NANOS)); Delta "
            "timestamps are microseconds, Spark cannot read the file and delta-rs truncates it. Rewrite it with "
            "microsecond timestamps (pyarrow: coerce_timestamps='us').",
        ))
    wanted = {f.name: f.type for f in table_schema if f.name not in partition_columns}
    for f in file_schema:
        t = wanted.get(f.name)
        if t is not None and not readable_as(f.type, t):
            report.problems.append((
                "incompatible_file",
                f"data file {path!r} stores column {f.name!r} as {f.type}, which the table's type {t} cannot hold "
                "without loss; the file does not belong to this schema (or the schema was changed without rewriting it)",
            ))
    return report


def inspect_files(storage, rels: list[str], table_schema: pa.Schema, partition_columns: list[str]) -> list[FileReport]:
    """Read the footers of the table files ``rels`` (in parallel) and check them; an unreadable footer
    is a ``corrupt_file`` problem, a missing file is left to the caller (it lists files anyway)."""

    def one(rel: str) -> FileReport:
        try:
            with storage.arrow_fs.open_input_file(storage.join(rel)) as f:
                pf = parquet_file(f)
                return inspect_footer(rel, pf.schema_arrow, pf.metadata, table_schema, partition_columns)
        except FileNotFoundError:
            return FileReport(rel)
        except (OSError, pa.ArrowException, ValueError) as e:
            storage.raise_if_unanswered(e, storage.join(rel))
            return FileReport(rel, [("corrupt_file", f"data file {rel!r} is not readable Parquet ({e})")])

    if len(rels) <= 1:
        return [one(r) for r in rels]
    with ThreadPoolExecutor(max_workers=min(FOOTER_THREADS, len(rels))) as pool:
        return list(pool.map(one, rels))

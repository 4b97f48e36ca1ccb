"""Reading a snapshot: file pruning by partition values and stats, then pyarrow datasets.

Each file becomes a pyarrow fragment whose ``partition_expression`` states what is known of it:
partition values as equalities (pyarrow materializes them as columns) and, when filtering, stats
as bounds. pyarrow then skips fragments that cannot match and never opens them.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from .actions import AddFile, stats_count, stats_dict
from .data_files import inspect_files
from .errors import CorruptDataFileError, CorruptLogError, IncompatibleDataFileError, MissingDataFileError, SchemaMismatchError  # noqa: F401  (lakelog.scan.MissingDataFileError stays importable)
from .schema import partition_scalars
from .snapshot import Snapshot

STRING_STATS_PREFIX = 32
_MS = dt.timedelta(milliseconds=1)


def to_expression(filters: Any, schema: pa.Schema) -> pc.Expression | None:
    """DNF tuples (as pyarrow uses them) or a pyarrow.compute expression -> expression."""
    if filters is None:
        return None
    if isinstance(filters, pc.Expression):
        return _fits(filters, filters, schema)
    if not filters:
        return None
    flat = [filters] if isinstance(filters[0], tuple) else filters
    for conj in flat:
        for term in conj:
            if len(term) != 3:
                raise ValueError(f"filter {term!r} is not a (column, op, value) tuple")
            if term[0] not in schema.names:
                raise SchemaMismatchError(f"filter column {term[0]!r} is not in the table (columns: {schema.names})")
    return _fits(pq.filters_to_expression(filters), filters, schema)


def _fits(expr: pc.Expression, filters: Any, schema: pa.Schema) -> pc.Expression:
    """``expr``, once it evaluates against the table's columns (on no rows): a value of another type than
    its column (``("s", ">", 3)`` on a string column) is a SchemaMismatchError, not pyarrow's error."""
    try:
        schema.empty_table().filter(expr)
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowInvalid) as e:
        raise SchemaMismatchError(
            f"filter {filters!r} does not fit the table's columns ({e}); compare each column with a value of its "
            f"type (schema: {', '.join(f'{f.name} {f.type}' for f in schema)})"
        ) from None
    return expr


def _partition_guarantee(add: AddFile, schema: pa.Schema, partition_columns: list[str]) -> pc.Expression | None:
    expr = None
    for c, v in partition_scalars(add.partition_values, schema, partition_columns, add.path).items():
        e = pc.field(c).is_null() if not v.is_valid else (pc.field(c) == v)
        expr = e if expr is None else expr & e
    return expr


def _stat_literal(v: Any, t: pa.DataType, is_max: bool) -> pa.Scalar | None:
    """A stats value as a bound usable for pruning, or None where it would not be a safe bound."""
    if v is None or isinstance(v, (dict, list)):
        return None
    try:
        if pa.types.is_integer(t) and isinstance(v, int):
            return pa.scalar(v, type=t)
        if pa.types.is_string(t) and isinstance(v, str):
            if is_max and len(v) >= STRING_STATS_PREFIX:
                return None  # possibly truncated: not an upper bound
            return pa.scalar(v, type=t)
        if pa.types.is_date(t) and isinstance(v, str):
            return pa.scalar(dt.date.fromisoformat(v[:10]), type=t)
        if pa.types.is_timestamp(t) and isinstance(v, str):
            ts = dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
            if t.tz is not None:
                ts = ts.replace(tzinfo=dt.timezone.utc) if ts.tzinfo is None else ts
            else:
                ts = ts.replace(tzinfo=None)
            if is_max:
                ts += _MS  # writers may truncate timestamp stats to milliseconds
            return pa.scalar(ts, type=t)
        if pa.types.is_decimal(t) and isinstance(v, (int, float)) and t.precision <= 15:
            d = decimal.Decimal(repr(v)) if isinstance(v, float) else decimal.Decimal(v)
            return pa.scalar(d.quantize(decimal.Decimal(1).scaleb(-t.scale)), type=t)
    except (ValueError, TypeError, decimal.InvalidOperation, pa.ArrowException):
        return None
    return None  # floats (NaN makes bounds unsafe for '!='), booleans, binary, nested: no stats pruning


def _stats_guarantee(add: AddFile, schema: pa.Schema, partition_columns: list[str]) -> pc.Expression | None:
    stats = stats_dict(add.stats)
    if stats is None:
        return None
    n = stats_count(stats.get("numRecords"))
    mins, maxs, nulls = (m if isinstance(m := stats.get(k), dict) else {} for k in ("minValues", "maxValues", "nullCount"))
    expr = None
    for f in schema:
        if f.name in partition_columns:
            continue
        nc = stats_count(nulls.get(f.name))
        field = pc.field(f.name)
        if n is not None and nc is not None and nc == n and n > 0:
            e = field.is_null()
        else:
            lo = _stat_literal(mins.get(f.name), f.type, False)
            hi = _stat_literal(maxs.get(f.name), f.type, True)
            parts = []
            # With possible nulls each bound is stated as '(bound) or is_null': pyarrow can use that form.
            maybe_null = nc is None or nc > 0
            if lo is not None:
                parts.append((field >= lo) | field.is_null() if maybe_null else field >= lo)
            if hi is not None:
                parts.append((field <= hi) | field.is_null() if maybe_null else field <= hi)
            if not parts:
                continue
            e = parts[0]
            for p in parts[1:]:
                e = e & p
        expr = e if expr is None else expr & e
    return expr


def files_dataset(storage, schema: pa.Schema, partition_columns: list[str], adds: Iterable[AddFile], filters: Any = None) -> ds.FileSystemDataset:
    """A pyarrow dataset over the given add actions; with ``filters`` their stats become pruning bounds."""
    expr = to_expression(filters, schema)
    fmt = ds.ParquetFileFormat()
    fragments = []
    for add in adds:
        g = _partition_guarantee(add, schema, partition_columns)
        if expr is not None:
            s = _stats_guarantee(add, schema, partition_columns)
            g = s if g is None else (g if s is None else g & s)
        path = storage.join(add.relative_path)
        fragments.append(fmt.make_fragment(path, storage.arrow_fs, partition_expression=g if g is not None else pc.scalar(True)))
    return ds.FileSystemDataset(fragments, schema, fmt, storage.arrow_fs)


def dataset(snapshot: Snapshot, filters: Any = None) -> ds.FileSystemDataset:
    """A pyarrow dataset of the snapshot's files; with ``filters`` the stats become pruning bounds."""
    return files_dataset(snapshot.storage, snapshot.schema, snapshot.partition_columns, snapshot.files.values(), filters)


def pruned_files(snapshot: Snapshot, filters: Any = None) -> list[str]:
    """Relative paths of files that may hold rows matching ``filters`` (no data file is opened)."""
    if filters is None:
        return snapshot.file_paths()
    d = dataset(snapshot, filters)
    expr = to_expression(filters, snapshot.schema)
    rel_of = {snapshot.storage.join(rel): rel for rel in snapshot.files}
    return [rel_of[frag.path] for frag in d.get_fragments(filter=expr)]


def to_table(snapshot: Snapshot, columns: list[str] | None = None, filters: Any = None, limit: int | None = None) -> pa.Table:
    """The snapshot's rows (the first ``limit`` of them when given); a data file that is missing or not
    Parquet is a typed error naming it."""
    if columns is not None:
        unknown = [c for c in columns if c not in snapshot.schema.names]
        if unknown:
            raise SchemaMismatchError(f"column(s) {unknown} are not in the table (columns: {snapshot.schema.names})")
    d = dataset(snapshot, filters)
    expr = to_expression(filters, snapshot.schema)
    try:
        return d.to_table(columns=columns, filter=expr) if limit is None else d.head(limit, columns=columns, filter=expr)
    except (OSError, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        err = _data_file_error(snapshot, e)
        if err is None:
            raise
        raise err from None


def _data_file_error(snapshot: Snapshot, e: BaseException) -> CorruptLogError | None:
    """The typed error, naming the file(s), for a failure to read the snapshot's data files (None: not a
    data-file problem). Only called on the error path: it may list the table to find missing files, or
    read footers to find files the table's schema cannot read."""
    storage, text = snapshot.storage, str(e)
    named = [rel for rel in snapshot.files if storage.join(rel) in text]
    if named:
        missing = [rel for rel in named if not storage.exists(storage.join(rel))]
    elif isinstance(e, FileNotFoundError) or "No such file" in text:
        present = {f.name for f in storage.list_files(storage.root)}
        missing = [rel for rel in snapshot.files if rel not in present]
    else:
        missing = []
    where = f"named by the log at version {snapshot.version}"
    if missing:
        return MissingDataFileError(
            f"data file(s) {missing[:5]}{' and more' if len(missing) > 5 else ''} {where} are missing from {storage.uri!r}; "
            "restore them from a backup, or read a version that does not reference them ('lakelog check' lists every "
            "missing file)",
            missing,
        )
    dirs = [rel for rel in named if storage.fs.isdir(storage.join(rel))]
    if dirs:
        return CorruptDataFileError(f"the log at version {snapshot.version} names {dirs[:5]} as data files, but they are directories", dirs)
    if named and isinstance(e, pa.ArrowInvalid):
        return CorruptDataFileError(
            f"data file(s) {named[:5]} {where} cannot be read as Parquet ({e}); the file was truncated or overwritten. "
            "Restore it from a backup, or read a version that does not reference it",
            named,
        )
    if isinstance(e, pa.ArrowException):
        reports = inspect_files(storage, named or snapshot.file_paths(), snapshot.schema, snapshot.partition_columns)
        bad = [(r.path, msg) for r in reports for kind, msg in r.problems if kind in ("incompatible_file", "nanosecond_timestamps")]
        corrupt = [r.path for r in reports if any(kind == "corrupt_file" for kind, _ in r.problems)]
        if corrupt:
            return CorruptDataFileError(f"data file(s) {corrupt[:5]} {where} cannot be read as Parquet ({e})", corrupt)
        if bad:
            paths = sorted({p for p, _ in bad})
            return IncompatibleDataFileError(f"{bad[0][1]}; reading failed with: {e}", paths)
    return None

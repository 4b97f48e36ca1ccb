"""Reading a snapshot: file pruning by partition values and stats, then pyarrow datasets.

Each file becomes a pyarrow fragment whose ``partition_expression`` states what is known of it:
partition values as equalities (pyarrow materializes them as columns) and, when filtering, stats
as bounds. pyarrow then skips fragments that cannot match and never opens them. Filters are compiled
by ``lakelog.predicates``: where Parquet footer statistics are unsafe (floats), the scanner gets a
relaxed filter and the exact one is applied to the rows afterwards.
"""

from __future__ import annotations

import decimal
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from .actions import AddFile, stats_count, stats_dict
from .data_files import inspect_files
from .errors import CorruptDataFileError, CorruptLogError, IncompatibleDataFileError, MissingDataFileError, PartitionValueError, SchemaMismatchError  # noqa: F401  (lakelog.scan.MissingDataFileError stays importable)
from .predicates import CompiledFilter, compile_filter
from .schema import parse_date, partition_scalars, timestamp_micros
from .snapshot import Snapshot

if TYPE_CHECKING:  # imported where a dataset is built: pyarrow.dataset imports pandas, too slow for a cold start
    import pyarrow.dataset as ds

STRING_STATS_PREFIX = 32


def to_expression(filters: Any, schema: pa.Schema) -> pc.Expression | None:
    """DNF tuples (as pyarrow uses them) or a pyarrow.compute expression -> the exact expression
    (see ``lakelog.predicates`` for the semantics); a malformed filter raises ``InvalidFilterError``."""
    compiled = compile_filter(filters, schema)
    return None if compiled is None else compiled.exact


def _partition_guarantee(add: AddFile, schema: pa.Schema, partition_columns: list[str]) -> pc.Expression | None:
    expr = None
    for c, v in partition_scalars(add.partition_values, schema, partition_columns, add.path).items():
        e = pc.field(c).is_null() if not v.is_valid else (pc.field(c) == v)
        expr = e if expr is None else expr & e
    return expr


def _stat_literal(v: Any, t: pa.DataType, is_max: bool) -> pa.Scalar | None:
    """A stats value as a bound usable for pruning, or None where it would not be a safe bound."""
    if v is None or isinstance(v, (dict, list, bool)):
        return None
    try:
        if pa.types.is_integer(t) and isinstance(v, int):
            return pa.scalar(v, type=t)
        if pa.types.is_string(t) and isinstance(v, str):
            if is_max and len(v) >= STRING_STATS_PREFIX:
                return None  # possibly truncated: not an upper bound
            return pa.scalar(v, type=t)
        if pa.types.is_date(t) and isinstance(v, str):
            return pa.scalar(parse_date(v[:10]), type=t)
        if pa.types.is_timestamp(t) and isinstance(v, str):
            us = timestamp_micros(v, utc=t.tz is not None)
            if is_max:
                us += 1000  # writers may truncate timestamp stats to milliseconds
            # As integer microseconds: the widened bound may lie past year 9999, where datetime ends.
            return pa.scalar(us, type=t)
        if pa.types.is_decimal(t) and isinstance(v, (int, float)) and t.precision <= 15:
            d = decimal.Decimal(repr(v)) if isinstance(v, float) else decimal.Decimal(v)
            return pa.scalar(d.quantize(decimal.Decimal(1).scaleb(-t.scale)), type=t)
    except (ValueError, TypeError, OverflowError, decimal.InvalidOperation, pa.ArrowException):
        return None
    return None  # floats (NaN makes bounds unsafe), booleans, binary, nested: no stats pruning


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


def _fragments_dataset(storage, schema: pa.Schema, partition_columns: list[str], adds: Iterable[AddFile], with_stats: bool) -> ds.FileSystemDataset:
    import pyarrow.dataset as ds

    fmt = ds.ParquetFileFormat()
    fragments = []
    for add in adds:
        g = _partition_guarantee(add, schema, partition_columns)
        if with_stats:
            s = _stats_guarantee(add, schema, partition_columns)
            g = s if g is None else (g if s is None else g & s)
        path = storage.join(add.relative_path)
        fragments.append(fmt.make_fragment(path, storage.arrow_fs, partition_expression=g if g is not None else pc.scalar(True)))
    return ds.FileSystemDataset(fragments, schema, fmt, storage.arrow_fs)


def files_dataset(storage, schema: pa.Schema, partition_columns: list[str], adds: Iterable[AddFile], filters: Any = None) -> ds.FileSystemDataset:
    """A pyarrow dataset over the given add actions; with ``filters`` their stats become pruning bounds."""
    compiled = compile_filter(filters, schema, partition_columns)
    return _fragments_dataset(storage, schema, partition_columns, adds, compiled is not None)


def dataset(snapshot: Snapshot, filters: Any = None) -> ds.FileSystemDataset:
    """A pyarrow dataset of the snapshot's files; with ``filters`` the stats become pruning bounds.

    Scanning it with a filter lets pyarrow also prune Parquet row groups by their footer statistics,
    which can drop float rows (NaN, -0.0); ``to_table`` and ``read_batches`` never do."""
    return files_dataset(snapshot.storage, snapshot.schema, snapshot.partition_columns, snapshot.files.values(), filters)


def pruned_files(snapshot: Snapshot, filters: Any = None) -> list[str]:
    """Relative paths of files that may hold rows matching ``filters`` (no data file is opened)."""
    compiled = compile_filter(filters, snapshot.schema, snapshot.partition_columns)
    if compiled is None:
        return snapshot.file_paths()
    d = _fragments_dataset(snapshot.storage, snapshot.schema, snapshot.partition_columns, snapshot.files.values(), True)
    rel_of = {snapshot.storage.join(rel): rel for rel in snapshot.files}
    return [rel_of[frag.path] for frag in d.get_fragments(filter=compiled.exact)]


def read_batches(
    storage, schema: pa.Schema, partition_columns: list[str], adds: Iterable[AddFile], columns: list[str] | None = None, filters: Any = None
) -> Iterator[pa.RecordBatch]:
    """The rows of the given add actions that ``filters`` keeps (exactly: see ``lakelog.predicates``), as batches
    of ``columns`` (default: all)."""
    compiled = compile_filter(filters, schema, partition_columns)
    d = _fragments_dataset(storage, schema, partition_columns, adds, compiled is not None)
    return _batches(d, columns, compiled)


def _batches(d: ds.FileSystemDataset, columns: list[str] | None, compiled: CompiledFilter | None) -> Iterator[pa.RecordBatch]:
    import pyarrow.dataset as ds

    if compiled is None or not compiled.recheck:
        yield from d.to_batches(columns=columns, filter=None if compiled is None else compiled.exact)
        return
    # Only lakelog's own bounds prune files here; the scanner gets the relaxed filter and the exact one
    # is applied to the rows it returns.
    kept = ds.FileSystemDataset(list(d.get_fragments(filter=compiled.exact)), d.schema, d.format, d.filesystem)
    wanted = list(columns) if columns is not None else d.schema.names
    read = wanted + [c for c in (compiled.columns or d.schema.names) if c not in wanted]
    for batch in kept.to_batches(columns=read, filter=compiled.scan):
        batch = batch.filter(compiled.exact)
        if batch.num_rows:
            yield batch.select(wanted)


def to_table(snapshot: Snapshot, columns: list[str] | None = None, filters: Any = None, limit: int | None = None) -> pa.Table:
    """The snapshot's rows (the first ``limit`` of them when given); a data file that is missing or not
    Parquet is a typed error naming it."""
    if columns is not None:
        unknown = [c for c in columns if c not in snapshot.schema.names]
        if unknown:
            raise SchemaMismatchError(f"column(s) {unknown} are not in the table (columns: {snapshot.schema.names})")
    compiled = compile_filter(filters, snapshot.schema, snapshot.partition_columns)
    d = _fragments_dataset(snapshot.storage, snapshot.schema, snapshot.partition_columns, snapshot.files.values(), compiled is not None)
    try:
        if compiled is None or not compiled.recheck:
            expr = None if compiled is None else compiled.exact
            return d.to_table(columns=columns, filter=expr) if limit is None else d.head(limit, columns=columns, filter=expr)
        out_schema = pa.schema([d.schema.field(c) for c in columns]) if columns is not None else d.schema
        batches, n = [], 0
        for b in _batches(d, columns, compiled):
            if limit is not None and n + b.num_rows >= limit:
                batches.append(b.slice(0, limit - n))
                break
            batches.append(b)
            n += b.num_rows
        return pa.Table.from_batches(batches, schema=out_schema)
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

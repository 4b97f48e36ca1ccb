"""Reading a snapshot: file pruning by partition values and stats, then pyarrow datasets.

A filter first prunes the snapshot's files over all of them at once (``lakelog.pruning``); only the
files kept get ``AddFile`` objects. Each becomes a pyarrow fragment whose ``partition_expression``
states what is known of it: partition values as equalities (pyarrow materializes them as columns) and,
when filtering, stats as bounds. pyarrow then skips fragments that cannot match and never opens them
(the only pruning for an expression that reads a data column). Filters are compiled
by ``lakelog.predicates``: where Parquet footer statistics are unsafe (floats), the scanner gets a
relaxed filter and the exact one is applied to the rows afterwards.

Files pyarrow's scanner cannot read as they are go through ``read_data_file`` instead, one file per
task on a small thread pool: files with a deletion vector (their deleted rows are dropped by file
row index, so the file is read whole and in order, then filtered) and every file of a table with
column mapping (columns are found by physical name or field id and renamed). Both kinds are pruned
by the same partition values and stats first (keyed by physical names under column mapping).
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .actions import AddFile, stats_count, stats_dict
from .column_mapping import ColumnMapping
from .data_files import inspect_files
from .parquet_read import parquet_file, parquet_format
from .deletion_vectors import DeletionVectors, check_row_count, keep_mask
from .errors import CorruptDataFileError, CorruptLogError, IncompatibleDataFileError, InvalidArgumentError, InvalidArgumentTypeError, MissingDataFileError, PartitionValueError, SchemaMismatchError, UnsupportedFeatureError  # noqa: F401  (lakelog.scan.MissingDataFileError stays importable)
from . import collations, row_tracking
from .predicates import CompiledFilter, compile_filter, resolve_filter_columns
from .pruning import STRING_STATS_PREFIX, Kept, LiveFiles, prune, stat_literal  # noqa: F401  (scan.STRING_STATS_PREFIX stays importable)
from .schema import ColumnNames, has_variant, partition_scalars, partition_value_arrays
from .snapshot import Snapshot

if TYPE_CHECKING:  # imported where a dataset is built: pyarrow.dataset imports pandas, too slow for a cold start
    import pyarrow.dataset as ds

READ_THREADS = 4  # files read at once by read_data_file


def shredding(protocol) -> bool:
    """Whether a table's files may store variants shredded (its protocol lists variantShredding)."""
    return bool({"variantShredding", "variantShredding-preview"} & set(protocol.reader_features or []))


def _mapping(mapping: ColumnMapping | None, schema: pa.Schema) -> ColumnMapping:
    return mapping if mapping is not None else ColumnMapping("none", "")


def needs_file_reader(add: AddFile, mapping: ColumnMapping | None, variants: bool = False) -> bool:
    """Whether ``add`` must be read by ``read_data_file`` (not pyarrow's scanner). ``variants``: the table
    has variant columns, which a file may store shredded (reassembled only there)."""
    return variants or add.deletion_vector is not None or (mapping is not None and mapping.active)


def to_expression(filters: Any, schema: pa.Schema) -> pc.Expression | None:
    """DNF tuples (as pyarrow uses them) or a pyarrow.compute expression -> the exact expression
    (see ``lakelog.predicates`` for the semantics); a malformed filter raises ``InvalidFilterError``."""
    compiled = compile_filter(filters, schema)
    return None if compiled is None else compiled.exact


def partition_values(add: AddFile, partition_columns: list[str], mapping: ColumnMapping | None) -> dict[str, str | None]:
    """``add.partitionValues`` keyed by logical column names."""
    if mapping is None or not mapping.active:
        return add.partition_values
    return mapping.logical_partition_values(add.partition_values, partition_columns)


def partition_arrays(add: AddFile, schema: pa.Schema, partition_columns: list[str], mapping: ColumnMapping | None, n: int) -> dict[str, pa.Array]:
    """The partition columns of ``n`` rows of ``add``'s file, from its logged partition values."""
    if not partition_columns:
        return {}
    return partition_value_arrays(partition_values(add, partition_columns, mapping), schema, partition_columns, add.path, n)


def _partition_guarantee(add: AddFile, schema: pa.Schema, partition_columns: list[str], mapping: ColumnMapping | None = None) -> pc.Expression | None:
    expr = None
    for c, v in partition_scalars(partition_values(add, partition_columns, mapping), schema, partition_columns, add.path).items():
        e = pc.field(c).is_null() if not v.is_valid else (pc.field(c) == v)
        expr = e if expr is None else expr & e
    return expr


def _stats_guarantee(add: AddFile, schema: pa.Schema, partition_columns: list[str], mapping: ColumnMapping | None = None) -> pc.Expression | None:
    """What a file's stats say of its rows. With a deletion vector ``numRecords`` counts the physical rows
    and Spark re-commits the file's stats with ``tightBounds`` false: min/max are still bounds of the live
    rows, and a ``nullCount`` equal to ``numRecords`` still means every row is null; other null counts
    only ever widen the guarantee (``maybe_null``)."""
    stats = stats_dict(add.stats)
    if stats is None:
        return None
    n = stats_count(stats.get("numRecords"))
    mins, maxs, nulls = (m if isinstance(m := stats.get(k), dict) else {} for k in ("minValues", "maxValues", "nullCount"))
    active = mapping is not None and mapping.active
    expr = None
    for f in schema:
        if f.name in partition_columns:
            continue
        key = mapping.stats_key(f.name) if active else f.name
        nc = stats_count(nulls.get(key))
        field = pc.field(f.name)
        if n is not None and nc is not None and nc == n and n > 0:
            e = field.is_null()
        elif collations.of_field(f) is not None:
            continue  # min/max in binary order bound nothing under the column's collation
        else:
            lo = stat_literal(mins.get(key), f.type, False)
            hi = stat_literal(maxs.get(key), f.type, True)
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


def _fragments_dataset(
    storage, schema: pa.Schema, partition_columns: list[str], adds: Iterable[AddFile], with_stats: bool, mapping: ColumnMapping | None = None
) -> ds.FileSystemDataset:
    import pyarrow.dataset as ds

    fmt = parquet_format()
    fragments = []
    by_values: dict[tuple, pc.Expression | None] = {}  # most files share their partition values with many others
    for add in adds:
        pv = partition_values(add, partition_columns, mapping)
        key = tuple((c in pv, pv.get(c)) for c in partition_columns)
        if key in by_values:
            g = by_values[key]
        else:
            g = by_values[key] = _partition_guarantee(add, schema, partition_columns, mapping)
        if with_stats:
            s = _stats_guarantee(add, schema, partition_columns, mapping)
            g = s if g is None else (g if s is None else g & s)
        path = storage.join(add.relative_path)
        fragments.append(fmt.make_fragment(path, storage.arrow_fs, partition_expression=g if g is not None else pc.scalar(True)))
    return ds.FileSystemDataset(fragments, schema, fmt, storage.arrow_fs)


def files_dataset(
    storage, schema: pa.Schema, partition_columns: list[str], adds: Iterable[AddFile], filters: Any = None, mapping: ColumnMapping | None = None
) -> ds.FileSystemDataset:
    """A pyarrow dataset over the given add actions; with ``filters`` their stats become pruning bounds.
    Only for pruning (``get_fragments``) when a file needs ``read_data_file`` (see ``needs_file_reader``)."""
    compiled = compile_filter(filters, schema, partition_columns)
    return _fragments_dataset(storage, schema, partition_columns, adds, compiled is not None, mapping)


def _kept(snapshot: Snapshot, filters: Any, compiled: CompiledFilter | None) -> Kept | None:
    """The files ``filters`` keeps, decided over all files at once (None: no filter, or one that must be
    decided file by file)."""
    return None if compiled is None else prune(snapshot, resolve_filter_columns(filters, snapshot.schema))


def candidate_adds(snapshot: Snapshot, filters: Any = None) -> list[AddFile]:
    """The ``add`` actions of the files that may hold rows matching ``filters`` (validated first); only
    their ``AddFile`` objects are built when the filter is decided over all files at once."""
    compiled = compile_filter(filters, snapshot.schema, snapshot.partition_columns)
    kept = _kept(snapshot, filters, compiled)
    return list(snapshot.files.values()) if kept is None else kept.adds()


def dataset(snapshot: Snapshot, filters: Any = None) -> ds.FileSystemDataset:
    """A pyarrow dataset of the snapshot's files; with ``filters`` only the files that may hold matching
    rows (pruned by partition values and stats).

    Scanning it with a filter lets pyarrow also prune Parquet row groups by their footer statistics,
    which can drop float rows (NaN, -0.0); ``to_table`` and ``read_batches`` never do. A table whose
    files pyarrow cannot read as they are (deletion vectors, column mapping, variant shredding) is refused with
    ``UnsupportedFeatureError``: the dataset would return deleted rows or physical column names."""
    mapping = snapshot.column_mapping
    why = None
    if mapping.active:
        why = f"column mapping (mode {mapping.mode!r}): its files name columns by physical names a dataset would return"
    else:
        n = LiveFiles.of(snapshot.file_set).deletion_vector_count()
        if n:
            why = f"deletion vectors ({n} file(s) have deleted rows that a pyarrow dataset would return)"
        elif shredding(snapshot.protocol):
            why = "variant shredding (a dataset would not reassemble the variants that files store shredded)"
    if why:
        raise UnsupportedFeatureError(
            f"the table uses {why}, so lakelog cannot offer it as a pyarrow dataset. Read it with Table.to_pyarrow() or "
            "Table.to_pandas(), or stream it with Table.read_batches(); DuckDB and Polars read "
            "pa.RecordBatchReader.from_batches(table.schema, table.read_batches())"
        )
    compiled = compile_filter(filters, snapshot.schema, snapshot.partition_columns)
    kept = _kept(snapshot, filters, compiled)
    if kept is None:
        return files_dataset(snapshot.storage, snapshot.schema, snapshot.partition_columns, snapshot.files.values(), filters)
    # The stats already pruned: the fragments state only their partition values.
    return _fragments_dataset(snapshot.storage, snapshot.schema, snapshot.partition_columns, kept.adds(), False)


def pruned_files(snapshot: Snapshot, filters: Any = None) -> list[str]:
    """Relative paths of files that may hold rows matching ``filters`` (no data file is opened)."""
    compiled = compile_filter(filters, snapshot.schema, snapshot.partition_columns)
    if compiled is None:
        return snapshot.file_paths()
    kept = _kept(snapshot, filters, compiled)
    if kept is not None:
        return kept.paths
    d = _fragments_dataset(snapshot.storage, snapshot.schema, snapshot.partition_columns, snapshot.files.values(), True, snapshot.column_mapping)
    rel_of = {snapshot.storage.join(rel): rel for rel in snapshot.files}
    return [rel_of[frag.path] for frag in d.get_fragments(filter=compiled.exact)]


def read_batches(
    storage,
    schema: pa.Schema,
    partition_columns: list[str],
    adds: Iterable[AddFile],
    columns: list[str] | None = None,
    filters: Any = None,
    mapping: ColumnMapping | None = None,
) -> Iterator[pa.RecordBatch]:
    """The rows of the given add actions that ``filters`` keeps (exactly: see ``lakelog.predicates``), as batches
    of ``columns`` (default: all). Rows deleted by deletion vectors are never returned; ``mapping``: the
    table's column mapping (None: none)."""
    compiled = compile_filter(filters, schema, partition_columns)
    return _scan(storage, schema, partition_columns, list(adds), columns, compiled, mapping)


def _scan(storage, schema, partition_columns, adds: list[AddFile], columns, compiled, mapping) -> Iterator[pa.RecordBatch]:
    variants = has_variant(schema)
    special = [a for a in adds if needs_file_reader(a, mapping, variants)]
    if len(special) < len(adds):
        plain = [a for a in adds if not needs_file_reader(a, mapping, variants)] if special else adds
        yield from _batches(_fragments_dataset(storage, schema, partition_columns, plain, compiled is not None), columns, compiled)
    if special:
        yield from _file_batches(storage, schema, partition_columns, special, columns, compiled, mapping)


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


def _file_batches(storage, schema, partition_columns, adds, columns, compiled, mapping) -> Iterator[pa.RecordBatch]:
    """The rows of files read by ``read_data_file`` (several at once, in order), pruned and filtered."""
    if compiled is not None:
        d = _fragments_dataset(storage, schema, partition_columns, adds, True, mapping)
        keep = {frag.path for frag in d.get_fragments(filter=compiled.exact)}
        adds = [a for a in adds if storage.join(a.relative_path) in keep]
    wanted = list(columns) if columns is not None else schema.names
    read = wanted if compiled is None else wanted + [c for c in (compiled.columns or schema.names) if c not in wanted]
    dvs = DeletionVectors(storage)

    def one(add: AddFile) -> pa.Table:
        t = read_data_file(storage, add, schema, partition_columns, read, mapping, dvs)
        if compiled is not None:
            t = t.filter(compiled.exact).select(wanted)
        return t

    if not adds:
        return
    pool = ThreadPoolExecutor(max_workers=min(READ_THREADS, len(adds)))
    pending: deque = deque()
    try:
        for add in adds:
            pending.append(pool.submit(one, add))
            if len(pending) > READ_THREADS:
                yield from pending.popleft().result().to_batches()
        while pending:
            yield from pending.popleft().result().to_batches()
    finally:
        for f in pending:
            f.cancel()
        pool.shutdown(wait=True)


def read_data_file(
    storage,
    add: AddFile,
    schema: pa.Schema,
    partition_columns: list[str],
    names: list[str],
    mapping: ColumnMapping | None = None,
    dvs: DeletionVectors | None = None,
    row_index: str | None = None,
    extra: tuple[str, ...] = (),
    use_threads: bool = True,
) -> pa.Table:
    """The live rows of one data file as the table's logical columns ``names`` (partition columns from
    the log, columns the file lacks as nulls, values cast to the table's types), in file order; rows its
    deletion vector deletes are dropped. ``row_index``: also a column of that name holding each row's
    file row index. ``use_threads``: decode on Arrow's threads (False when the caller reads files in parallel). A missing or unreadable file, or deletion vector, is a typed error naming it."""
    rel = add.relative_path
    data_names = [c for c in names if c not in partition_columns]
    m = _mapping(mapping, schema)
    deleted = (dvs or DeletionVectors(storage)).rows(add) if add.deletion_vector is not None else None
    live = None
    try:
        with storage.open_input(storage.join(rel)) as f:
            pf = parquet_file(f)
            cols = m.file_columns(pf.schema_arrow, data_names, rel)
            n = pf.metadata.num_rows
            check_row_count(deleted, n, add, storage)
            mask = keep_mask(deleted, 0, n)
            live = None if mask is None else np.flatnonzero(mask)  # file row indexes of the live rows
            # columns outside the table's schema, as stored (a change data file's _change_type, row
            # tracking's materialized columns); those the file lacks are left out. One read for both.
            present = [c for c in extra if c in pf.schema_arrow.names and c not in cols.to_read]
            wanted = list(cols.to_read) + present
            if not wanted:
                both = None
            elif live is None:
                both = pf.read(columns=wanted, use_threads=use_threads)
            else:
                both = _read_live(pf, wanted, live)
            data = both.select(list(cols.to_read)) if both is not None and cols.to_read else None
            extras = both.select(present) if both is not None and present else None
    except FileNotFoundError:
        raise MissingDataFileError(
            f"data file {rel!r} is missing from {storage.uri!r}; restore it from a backup, or read a version that does not "
            "reference it ('lakelog check' lists every missing file)",
            [rel],
        ) from None
    except (OSError, pa.ArrowInvalid) as e:
        storage.raise_if_unanswered(e, storage.join(rel))
        if "No such file" in str(e) or "not found" in str(e).lower():
            raise MissingDataFileError(f"data file {rel!r} is missing from {storage.uri!r} ({e})", [rel]) from None
        raise CorruptDataFileError(f"data file {rel!r} cannot be read as Parquet ({e}); restore it from a backup", [rel]) from None
    kept = n if live is None else len(live)
    converted = cols.convert(data, schema) if data is not None else [pa.chunked_array([pa.nulls(kept, schema.field(c).type)]) for c in data_names]
    by_name = dict(zip(data_names, converted))
    parts = partition_arrays(add, schema, [c for c in partition_columns if c in names], mapping, kept)
    arrays, fields = [], []
    for c in names:
        f = schema.field(c)
        if c in partition_columns:
            arrays.append(parts[c])
        else:
            arrays.append(by_name[c])
        fields.append(f)
    if row_index is not None:
        arrays.append(pa.array(np.arange(n, dtype=np.int64) if live is None else live.astype(np.int64)))
        fields.append(pa.field(row_index, pa.int64()))
    if extras is not None:
        for name in extras.column_names:
            arrays.append(extras.column(name))
            fields.append(extras.schema.field(name))
    if not arrays:
        return pa.table({"_": pa.nulls(kept)}).drop_columns(["_"])
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


LIVE_BATCH_ROWS = 64 * 1024


def _read_live(pf: pq.ParquetFile, columns: list[str], live: np.ndarray) -> pa.Table:
    """The rows at file row indexes ``live`` (ascending) of ``columns``. Read in batches, each cut down
    by one take as it is decoded: the deleted rows never pile up, and memory is reused batch to batch."""
    out, start = [], 0
    for batch in pf.iter_batches(batch_size=LIVE_BATCH_ROWS, columns=columns, use_threads=True):
        lo, hi = np.searchsorted(live, [start, start + batch.num_rows])
        if hi > lo:
            out.append(pc.take(batch, pa.array(live[lo:hi] - start), boundscheck=False))
        start += batch.num_rows
    return pa.Table.from_batches(out) if out else pf.schema_arrow.empty_table().select(columns)


def selected_columns(columns: Any, schema: pa.Schema) -> list[str] | None:
    """``columns`` of a read as the table names them (resolved ignoring case, as Delta does; None: all);
    not a list of names is ``InvalidArgumentTypeError``, an unknown name ``SchemaMismatchError``."""
    if columns is None:
        return None
    if isinstance(columns, str) or not isinstance(columns, (list, tuple)) or not all(isinstance(c, str) for c in columns):
        raise InvalidArgumentTypeError(f"columns must be a list of column names (e.g. ['id']), not {columns!r}")
    index = ColumnNames(schema.names)
    unknown = [c for c in columns if c not in index]
    if unknown:
        raise SchemaMismatchError(f"column(s) {unknown} are not in the table (columns: {schema.names})")
    return [index.find(c) for c in columns]


def row_tracking_batches(snapshot: Snapshot, adds: list[AddFile], columns: list[str] | None, filters: Any) -> Iterator[pa.RecordBatch]:
    """The rows of ``adds`` as ``read_batches`` gives them, plus their stable row ids (``_row_id``) and row
    commit versions (``_row_commit_version``), as Delta readers reconstruct them (materialized value,
    else the file's ``baseRowId`` + physical row index and its ``defaultRowCommitVersion``)."""
    materialized = row_tracking.materialized_columns(snapshot.metadata)
    if materialized is None:
        raise InvalidArgumentError(
            "with_row_tracking=True needs a table with row tracking enabled (delta.enableRowTracking); enable it with "
            "Table.set_properties({'delta.enableRowTracking': True})"
        )
    schema, parts, storage = snapshot.schema, snapshot.partition_columns, snapshot.storage
    compiled = compile_filter(filters, schema, parts)
    wanted = list(columns) if columns is not None else schema.names
    read = wanted if compiled is None else wanted + [c for c in (compiled.columns or schema.names) if c not in wanted]
    dvs = DeletionVectors(storage)
    position = "__lakelog_position"
    for add in adds:
        t = read_data_file(storage, add, schema, parts, read, snapshot.column_mapping, dvs, row_index=position, extra=materialized)
        ids, versions = row_tracking.row_ids(add, t.column(position), t, materialized)
        t = t.append_column(row_tracking.ROW_ID, ids).append_column(row_tracking.ROW_COMMIT_VERSION, versions)
        if compiled is not None:
            t = t.filter(compiled.exact)
        yield from t.select(wanted + [row_tracking.ROW_ID, row_tracking.ROW_COMMIT_VERSION]).to_batches()


def to_table(snapshot: Snapshot, columns: list[str] | None = None, filters: Any = None, limit: int | None = None,
             with_row_tracking: bool = False) -> pa.Table:
    """The snapshot's rows (the first ``limit`` of them when given); a data file that is missing or not
    Parquet is a typed error naming it. ``with_row_tracking``: also ``_row_id`` and ``_row_commit_version``."""
    columns = selected_columns(columns, snapshot.schema)
    if with_row_tracking:
        names = columns if columns is not None else snapshot.schema.names
        out = pa.schema([snapshot.schema.field(c) for c in names] + [pa.field(row_tracking.ROW_ID, pa.int64()), pa.field(row_tracking.ROW_COMMIT_VERSION, pa.int64())])
        return pa.Table.from_batches(list(row_tracking_batches(snapshot, candidate_adds(snapshot, filters), columns, filters)), schema=out)
    compiled = compile_filter(filters, snapshot.schema, snapshot.partition_columns)
    mapping = snapshot.column_mapping
    kept = _kept(snapshot, filters, compiled)
    adds = list(snapshot.files.values()) if kept is None else kept.adds()
    out_schema = pa.schema([snapshot.schema.field(c) for c in columns]) if columns is not None else snapshot.schema
    try:
        variants = has_variant(snapshot.schema)
        if not any(needs_file_reader(a, mapping, variants) for a in adds):
            d = _fragments_dataset(snapshot.storage, snapshot.schema, snapshot.partition_columns, adds, compiled is not None)
            if compiled is None or not compiled.recheck:
                expr = None if compiled is None else compiled.exact
                return d.to_table(columns=columns, filter=expr) if limit is None else d.head(limit, columns=columns, filter=expr)
        batches, n = [], 0
        for b in _scan(snapshot.storage, snapshot.schema, snapshot.partition_columns, adds, columns, compiled, mapping):
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
    storage.raise_if_unanswered(e, storage.join(named[0]) if named else storage.root)
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

"""Writing data: Parquet files (partitioned, with stats) and ``write_table`` through the one transaction path."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Iterable

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .actions import Action, AddFile, Metadata, Protocol, Txn, encode_path, now_ms
from .log import DeltaLog
from .errors import LakelogError, SchemaMismatchError, TableExistsError, TableNotFoundError
from .schema import (
    canonical_schema,
    cast_batch,
    check_column_names,
    conform_type,
    format_timestamp,
    hive_escape,
    schema_to_string,
    serialize_partition_value,
    to_arrow_stream,
    uses_timestamp_ntz,
)
from .snapshot import Snapshot
from .storage import Storage
from .transaction import DuplicateTransaction, Transaction

STRING_STATS_PREFIX = 32
ROLL_FILE_BYTES = 256 * 1024 * 1024  # in-memory Arrow bytes per file before starting a new one
ROW_GROUP_ROWS = 1024 * 1024
ROW_GROUP_BYTES = 64 * 1024 * 1024
MODES = ("append", "overwrite", "error", "ignore")
ABORT_CLOCK_SKEW_MS = 15 * 60 * 1000


# ---------------------------------------------------------------- stats

def _stat_value(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        return format_timestamp(v)
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return orjson.Fragment(format(v, "f").encode())  # exact digits, as a JSON number
    return v


def _has_minmax(t: pa.DataType) -> bool:
    return (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_decimal(t)
        or pa.types.is_string(t)
        or pa.types.is_boolean(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
    )


def _string_upper_bound(s: str) -> str | None:
    """A string of at most STRING_STATS_PREFIX characters that is >= ``s`` (None if there is none)."""
    if len(s) <= STRING_STATS_PREFIX:
        return s
    for i in range(STRING_STATS_PREFIX - 1, -1, -1):
        c = ord(s[i]) + 1
        if 0xD800 <= c <= 0xDFFF:
            c = 0xE000  # no surrogates in UTF-8
        if c <= 0x10FFFF:
            return s[:i] + chr(c)
    return None


def _leaves(schema: pa.Schema) -> list[tuple[tuple[str, ...], pa.DataType | None]]:
    """Parquet leaf columns in file order: (path, type), type None for leaves under a list or map."""
    out: list[tuple[tuple[str, ...], pa.DataType | None]] = []

    def walk(path: tuple[str, ...], t: pa.DataType, in_collection: bool) -> None:
        if pa.types.is_struct(t):
            for i in range(t.num_fields):
                walk(path + (t.field(i).name,), t.field(i).type, in_collection)
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            walk(path, t.value_type, True)
        elif pa.types.is_map(t):
            walk(path, t.key_type, True)
            walk(path, t.item_type, True)
        else:
            out.append((path, None if in_collection else t))

    for f in schema:
        walk((f.name,), f.type, False)
    return out


def stats_from_parquet_metadata(schema: pa.Schema, metadata: pq.FileMetaData, max_indexed_cols: int = 32) -> str:
    """Delta ``stats`` JSON (numRecords, minValues, maxValues, nullCount) from a Parquet footer.

    Only the first ``max_indexed_cols`` eligible leaf columns (``delta.dataSkippingNumIndexedCols``;
    -1 = all) get stats; list and map contents get none. A bound is left out when some row group lacks
    it, when it is infinite, or when no upper bound fits in 32 characters.
    """
    mins: dict = {}
    maxs: dict = {}
    nulls: dict = {}

    def put(d: dict, path: tuple[str, ...], v: Any) -> None:
        for name in path[:-1]:
            d = d.setdefault(name, {})
        d[path[-1]] = v

    leaves = _leaves(schema)
    indexed = 0
    for j, (path, t) in enumerate(leaves):
        if t is None:
            continue
        if max_indexed_cols >= 0 and indexed >= max_indexed_cols:
            break
        indexed += 1
        lo = hi = None
        null_count, bounds_known = 0, _has_minmax(t)
        for r in range(metadata.num_row_groups):
            rg = metadata.row_group(r)
            st = rg.column(j).statistics
            if st is None or not st.has_null_count:
                null_count, bounds_known = None, False
                break
            null_count += st.null_count
            if st.null_count == rg.num_rows:
                continue  # all null: no values to bound
            if not st.has_min_max:
                bounds_known = False
                continue
            try:
                st_min, st_max = st.min, st.max
            except (OverflowError, ValueError):  # a date or timestamp beyond Python's years 1..9999
                bounds_known = False
                continue
            lo = st_min if lo is None else min(lo, st_min)
            hi = st_max if hi is None else max(hi, st_max)
        if null_count is None:
            continue
        put(nulls, path, null_count)
        if not bounds_known or lo is None:
            continue
        if isinstance(lo, str):
            lo, hi = lo[:STRING_STATS_PREFIX], _string_upper_bound(hi)
        if isinstance(lo, float) and math.isinf(lo):
            lo = None
        if isinstance(hi, float) and math.isinf(hi):
            hi = None
        if lo is not None:
            put(mins, path, _stat_value(lo))
        if hi is not None:
            put(maxs, path, _stat_value(hi))
    return orjson.dumps({"numRecords": metadata.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}).decode()


# ---------------------------------------------------------------- file writing

@dataclass
class _OpenFile:
    rel_path: str
    partition_values: dict[str, str | None]
    writer: pq.ParquetWriter
    sink: Any
    nbytes: int = 0
    pending: list = field(default_factory=list)
    pending_rows: int = 0
    pending_bytes: int = 0


@dataclass
class DataWriter:
    """Writes batches into uniquely named Parquet files under ``k=v/`` directories; returns add actions.

    Nothing written here is visible until a commit names the files.
    """

    storage: Storage
    schema: pa.Schema  # full table schema (canonical types)
    partition_columns: list[str]
    max_indexed_cols: int = 32
    file_prefix: str = "part"
    use_dictionary: bool | list[str] = True  # Parquet dictionary encoding: all columns, or only these
    _open: dict[tuple, _OpenFile] = field(default_factory=dict)
    _done: list[AddFile] = field(default_factory=list)
    _counter: int = 0
    _made_dirs: set = field(default_factory=set)

    def __post_init__(self) -> None:
        self.data_schema = pa.schema([f for f in self.schema if f.name not in self.partition_columns])
        self._ptypes = {c: self.schema.field(c).type for c in self.partition_columns}

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        if not self.partition_columns:
            self._write_part((), {}, batch)
            return
        # Group rows by partition: sort on dictionary codes (cheap integers, not the values themselves),
        # one take, then zero-copy slices per run of equal codes. Nulls get code -1 so runs compare plainly.
        codes = [pc.fill_null(pc.dictionary_encode(batch.column(c)).indices, -1) for c in self.partition_columns]
        coded = pa.record_batch(codes, names=[f"k{i}" for i in range(len(codes))])
        order = pc.sort_indices(coded, sort_keys=[(n, "ascending") for n in coded.schema.names])
        ordered = batch.take(order)
        n = batch.num_rows
        changed = None
        for col in coded.take(order).columns:
            step = pc.not_equal(col.slice(1), col.slice(0, n - 1))
            changed = step if changed is None else pc.or_(changed, step)
        starts = [0] + [i + 1 for i in pc.indices_nonzero(changed).to_pylist()]
        for start, end in zip(starts, starts[1:] + [n]):
            first = ordered.slice(start, 1)
            pvals = {c: serialize_partition_value(first.column(c)[0].as_py(), self._ptypes[c]) for c in self.partition_columns}
            pvals = {c: (None if v == "" else v) for c, v in pvals.items()}  # '' means null in Delta
            self._write_part(tuple(pvals.values()), pvals, ordered.slice(start, end - start))

    def _write_part(self, key: tuple, pvals: dict[str, str | None], batch: pa.RecordBatch) -> None:
        data = batch.select(self.data_schema.names)
        f = self._open.get(key)
        if f is None:
            f = self._open[key] = self._new_file(pvals)
        # Small incoming batches (Spark sends 10k rows) are buffered into large row groups.
        f.pending.append(data)
        f.pending_rows += data.num_rows
        f.pending_bytes += data.nbytes
        if f.pending_rows >= ROW_GROUP_ROWS or f.pending_bytes >= ROW_GROUP_BYTES:
            self._flush(f)
        if f.nbytes >= ROLL_FILE_BYTES:
            self._close(key)

    def _flush(self, f: "_OpenFile") -> None:
        if not f.pending:
            return
        table = pa.Table.from_batches(f.pending, schema=self.data_schema)
        f.writer.write_table(table, row_group_size=max(table.num_rows, 1))
        f.nbytes += f.pending_bytes
        f.pending, f.pending_rows, f.pending_bytes = [], 0, 0

    def _new_file(self, pvals: dict[str, str | None]) -> _OpenFile:
        directory = "/".join(f"{hive_escape(c)}={hive_escape(v)}" for c, v in pvals.items())
        name = f"{self.file_prefix}-{self._counter:05d}-{uuid.uuid4()}.snappy.parquet"
        self._counter += 1
        rel = f"{directory}/{name}" if directory else name
        full = self.storage.join(rel)
        parent = full.rsplit("/", 1)[0]
        if parent not in self._made_dirs:
            self.storage.makedirs(parent)
            self._made_dirs.add(parent)
        sink = self.storage.open_output(full)
        writer = pq.ParquetWriter(sink, self.data_schema, compression="snappy", use_dictionary=self.use_dictionary)
        return _OpenFile(rel, dict(pvals), writer, sink)

    def _close(self, key: tuple) -> None:
        f = self._open.pop(key)
        self._flush(f)
        f.writer.close()
        size = f.sink.tell()
        f.sink.close()
        self._done.append(
            AddFile(
                path=encode_path(f.rel_path),
                partition_values=f.partition_values,
                size=size,
                modification_time=now_ms(),
                data_change=True,
                stats=stats_from_parquet_metadata(self.data_schema, f.writer.writer.metadata, self.max_indexed_cols),
            )
        )

    def finish(self) -> list[AddFile]:
        keys = list(self._open)
        if len(keys) > 1:
            # Files of different partitions are independent; pyarrow writes them without holding the GIL.
            with ThreadPoolExecutor(max_workers=min(len(keys), os.cpu_count() or 1)) as pool:
                list(pool.map(self._close, keys))
        else:
            for key in keys:
                self._close(key)
        return list(self._done)

    def abort(self) -> None:
        """Delete every file this writer created (none of them is committed)."""
        for f in self._open.values():
            try:
                f.writer.close()
                f.sink.close()
            except Exception:
                pass
        paths = [f.rel_path for f in self._open.values()] + [a.relative_path for a in self._done]
        self._open.clear()
        for rel in paths:
            try:
                self.storage.delete(self.storage.join(rel))
            except (FileNotFoundError, OSError):
                pass


# ---------------------------------------------------------------- schema planning

def _plan_schema(
    data_schema: pa.Schema,
    snapshot: Snapshot | None,
    mode: str,
    partition_by: list[str] | None,
    schema_mode: str | None,
) -> tuple[pa.Schema, list[str], bool]:
    """Return (table schema, partition columns, metadata_changed)."""
    if snapshot is None or (mode == "overwrite" and schema_mode == "overwrite"):
        check_column_names(data_schema)
        schema = canonical_schema(data_schema)
        parts = list(partition_by or [])
        for c in parts:
            if c not in schema.names:
                raise SchemaMismatchError(f"partition column {c!r} is not in the data (columns: {schema.names})")
            t = schema.field(c).type
            if pa.types.is_nested(t):
                raise SchemaMismatchError(f"cannot partition by {c!r} of type {t}; partition columns must be primitive")
        if len(parts) == len(schema):
            raise SchemaMismatchError("a table needs at least one column that is not a partition column")
        changed = snapshot is None or schema != snapshot.schema or parts != snapshot.partition_columns
        return schema, parts, changed

    current = snapshot.schema
    if partition_by is not None and list(partition_by) != snapshot.partition_columns:
        raise SchemaMismatchError(
            f"partition_by={list(partition_by)} differs from the table's partitioning {snapshot.partition_columns}; "
            "omit partition_by, or overwrite with schema_mode='overwrite' to repartition"
        )
    by_lower = {f.name.lower(): f for f in current}
    new_fields = list(current)
    added = []
    for f in data_schema:
        existing = by_lower.get(f.name.lower())
        if existing is None:
            if schema_mode != "merge":
                raise SchemaMismatchError(
                    f"column {f.name!r} is not in the table (columns: {current.names}); "
                    "pass schema_mode='merge' to add it"
                )
            added.append(pa.field(f.name, canonical_schema(pa.schema([f])).field(0).type, True))
            continue
        if existing.name != f.name:
            raise SchemaMismatchError(f"column {f.name!r} differs in case from the table's column {existing.name!r}; rename it")
        conform_type(f.type, existing.type, f.name)
    data_names = set(data_schema.names)
    for f in current:
        if f.name not in data_names and not f.nullable:
            raise SchemaMismatchError(f"the data lacks column {f.name!r}, which is not nullable in the table")
    if added:
        check_column_names(pa.schema(new_fields + added))
    return pa.schema(new_fields + added), snapshot.partition_columns, bool(added)


def _plan_protocol(schema: pa.Schema, current: Protocol | None) -> Protocol | None:
    """The protocol the table needs (None when ``current`` already suffices)."""
    if not uses_timestamp_ntz(schema):
        return Protocol(1, 2) if current is None else None
    if current is not None and current.min_reader_version >= 3 and "timestampNtz" in (current.reader_features or []):
        return None
    writer = set((current.writer_features or []) if current and current.min_writer_version >= 7 else [])
    reader = set((current.reader_features or []) if current and current.min_reader_version >= 3 else [])
    if current is not None and current.min_writer_version < 7:
        # Features implied by the legacy writer version must be listed once on version 7.
        legacy = {2: ["appendOnly", "invariants"], 3: ["checkConstraints"], 4: ["changeDataFeed", "generatedColumns"], 5: ["columnMapping"], 6: ["identityColumns"]}
        for v in range(2, current.min_writer_version + 1):
            writer.update(legacy.get(v, []))
    return Protocol(3, 7, sorted(reader | {"timestampNtz"}), sorted(writer | {"timestampNtz"}))


# ---------------------------------------------------------------- two-phase write

@dataclass
class WritePlan:
    """A planned write: made where the job starts, shipped (pickled) to whoever writes the files.

    Two phases, as in a distributed file sink: ``write`` (any process, any number of times) writes
    uniquely named Parquet files and returns their add actions without making anything visible;
    ``commit`` (once, on the coordinator) makes all of them visible in one atomic log entry.
    """

    path: str
    storage_options: dict[str, Any] | None
    mode: str
    schema: pa.Schema  # the schema data files are written with (table columns, canonical types)
    partition_columns: list[str]
    partition_by: list[str] | None
    schema_mode: str | None
    configuration: dict[str, str] | None
    read_version: int  # -1: no table when planned
    max_indexed_cols: int = 32
    skip: bool = False  # mode="ignore" on an existing table: nothing to do
    txn_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    snapshot: Snapshot | None = field(default=None, repr=False, compare=False)  # in-process only

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["snapshot"] = None  # tasks need no table state; the coordinator reloads it
        return state

    def _latest(self, storage: Storage) -> Snapshot | None:
        if self.snapshot is not None:
            return self.snapshot.updated()
        return _load_or_none(storage)

    @property
    def storage(self) -> Storage:
        return Storage(self.path, self.storage_options)

    def write(self, data: Any, file_prefix: str = "part") -> list[AddFile]:
        """Write ``data`` (Arrow/pandas, or an iterable of RecordBatches) as uncommitted data files."""
        if self.skip:
            return []
        if isinstance(data, (pa.Table, pa.RecordBatch, pa.RecordBatchReader)) or type(data).__module__.startswith("pandas"):
            _, data = to_arrow_stream(data)
        w = DataWriter(self.storage, self.schema, self.partition_columns, self.max_indexed_cols, file_prefix)
        try:
            for b in data:
                w.write(cast_batch(b, self.schema))
            return w.finish()
        except BaseException:
            w.abort()
            raise

    def commit(
        self,
        adds: list[AddFile],
        *,
        app_id: str | None = None,
        app_version: int | None = None,
        user_metadata: str | None = None,
        operation: str | None = None,
        extra_parameters: dict[str, Any] | None = None,
    ) -> int:
        """Commit ``adds`` in one atomic log entry; return the committed (or already-current) version.

        Appends rebase onto the latest version (blind appends never conflict). An overwrite keeps the
        version it was planned on, so data committed after that is a conflict, not silently replaced.
        When nothing is committed (idempotent duplicate, mode="ignore"), the files are deleted.
        """
        storage = self.storage
        if (app_id is None) != (app_version is None):
            raise ValueError("pass app_id and app_version together")
        for _ in range(3):  # more rounds only when the table is created concurrently
            snapshot = self._latest(storage)
            if snapshot is not None:
                if self.mode == "error":
                    _discard(storage, adds)
                    raise TableExistsError(f"a table already exists at {self.path!r} (version {snapshot.version}); use mode='append' or 'overwrite'")
                if self.mode == "ignore":
                    _discard(storage, adds)
                    return snapshot.version
                if app_id is not None and app_id in snapshot.txns and snapshot.txns[app_id].version >= app_version:
                    _discard(storage, adds)
                    return snapshot.version
                if self.mode == "overwrite" and 0 <= self.read_version < snapshot.version:
                    snapshot = Snapshot.load(storage, version=self.read_version, listing=snapshot.listing)
            try:
                schema, parts, meta_changed = _plan_schema(self.schema, snapshot, self.mode, self.partition_by, self.schema_mode)
                if parts != self.partition_columns:
                    raise SchemaMismatchError(f"the table's partitioning changed to {parts} after this write was planned with {self.partition_columns}")
                actions = self._actions(snapshot, schema, parts, meta_changed, adds, app_id, app_version)
                params: dict[str, Any] = {"mode": {"overwrite": "Overwrite", "error": "ErrorIfExists"}.get(self.mode, "Append")}
                if parts:
                    params["partitionBy"] = parts
                if self.schema_mode:
                    params["schemaMode"] = self.schema_mode
                params.update(extra_parameters or {})
                op = operation or ("CREATE TABLE" if snapshot is None else "WRITE")
                overwrite = self.mode == "overwrite" and snapshot is not None
                txn = Transaction(storage, snapshot, op, params, read_whole_table=overwrite, user_metadata=user_metadata)
                txn.txn_id = self.txn_id  # lets abort() recognise a commit that landed
                return txn.commit(actions).version
            except DuplicateTransaction as d:
                _discard(storage, adds)
                return d.version
            except TableExistsError:
                if snapshot is not None:
                    _discard(storage, adds)
                    raise
                continue  # created concurrently: plan again against the new table
            except LakelogError:
                # Raised before our commit file was written (conflict, schema, protocol): the files are
                # unreferenced. Other exceptions leave the outcome unknown, so the files stay.
                _discard(storage, adds)
                raise
        _discard(storage, adds)
        raise TableExistsError(f"the table at {self.path!r} was created and changed concurrently; retry the write")

    def abort(self, adds: list[AddFile]) -> None:
        """Delete the given data files, except any that a commit references.

        A commit may have landed even when the caller saw an error, possibly made by another plan
        object (a streaming sink commits through a fresh one), so every commit written since the
        files were (allowing for clock skew between machines) is checked for their paths.
        """
        if not adds:
            return
        storage = self.storage
        try:
            listing = DeltaLog(storage).list()
        except TableNotFoundError:
            _discard(storage, adds)
            return
        since = min(a.modification_time for a in adds) - ABORT_CLOCK_SKEW_MS
        times = listing.commit_timestamps()
        recent = [v for v, t in times.items() if t >= since]
        referenced: set[str] = set()
        for actions in DeltaLog(storage).read_commits(recent).values():
            referenced.update(a.path for a in actions if isinstance(a, AddFile))
        _discard(storage, [a for a in adds if a.path not in referenced])

    def _actions(self, snapshot, schema, parts, meta_changed, adds, app_id, app_version) -> list[Action]:
        configuration = self.configuration
        actions: list[Action] = []
        protocol = _plan_protocol(schema, snapshot.protocol if snapshot else None)
        if protocol is not None:
            actions.append(protocol)
        if snapshot is None:
            actions.append(Metadata(id=str(uuid.uuid4()), schema_string=schema_to_string(schema), partition_columns=parts, configuration=dict(configuration or {}), created_time=now_ms()))
        elif meta_changed or (configuration and {**snapshot.configuration, **configuration} != snapshot.configuration):
            m = snapshot.metadata
            actions.append(
                Metadata(
                    id=m.id,
                    schema_string=schema_to_string(schema) if meta_changed else m.schema_string,
                    partition_columns=parts,
                    configuration={**m.configuration, **(configuration or {})},
                    created_time=m.created_time,
                    name=m.name,
                    description=m.description,
                    format_provider=m.format_provider,
                    format_options=m.format_options,
                )
            )
        if app_id is not None:
            actions.append(Txn(app_id, int(app_version), now_ms()))
        if self.mode == "overwrite" and snapshot is not None:
            ts = now_ms()
            actions.extend(a.remove(ts) for a in snapshot.files.values())
        actions.extend(adds)
        return actions


def plan_write(
    path: str,
    schema: pa.Schema,
    *,
    mode: str = "append",
    partition_by: list[str] | str | None = None,
    schema_mode: str | None = None,
    configuration: dict[str, str] | None = None,
    storage_options: dict[str, Any] | None = None,
) -> WritePlan:
    """Check a write of data with ``schema`` against the table and return its plan (see ``WritePlan``)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    if schema_mode not in (None, "merge", "overwrite"):
        raise ValueError(f"schema_mode must be None, 'merge' or 'overwrite', not {schema_mode!r}")
    if schema_mode == "overwrite" and mode != "overwrite":
        raise ValueError("schema_mode='overwrite' requires mode='overwrite'")
    if isinstance(partition_by, str):
        partition_by = [partition_by]
    storage = Storage(path, storage_options)
    storage.check_atomic_commits()
    snapshot = _load_or_none(storage)
    if snapshot is not None:
        if mode == "error":
            raise TableExistsError(f"a table already exists at {path!r} (version {snapshot.version}); use mode='append' or 'overwrite'")
        snapshot.check_writable()
    if snapshot is not None and mode == "ignore":
        # The table exists: the data is ignored whole, schema and partitioning included.
        return WritePlan(str(path), storage_options, mode, snapshot.schema, snapshot.partition_columns, None, None, None, snapshot.version, skip=True, snapshot=snapshot)
    table_schema, parts, _ = _plan_schema(schema, snapshot, mode, partition_by, schema_mode)
    conf = snapshot.configuration if snapshot is not None else (configuration or {})
    return WritePlan(
        path=str(path),
        storage_options=storage_options,
        mode=mode,
        schema=table_schema,
        partition_columns=parts,
        partition_by=list(partition_by) if partition_by is not None else None,
        schema_mode=schema_mode,
        configuration=configuration,
        read_version=snapshot.version if snapshot is not None else -1,
        max_indexed_cols=int(conf.get("delta.dataSkippingNumIndexedCols", 32)),
        snapshot=snapshot,
    )


# ---------------------------------------------------------------- public API

def write_table(
    path: str,
    data: Any,
    *,
    mode: str = "append",
    partition_by: list[str] | str | None = None,
    schema_mode: str | None = None,
    configuration: dict[str, str] | None = None,
    storage_options: dict[str, Any] | None = None,
    app_id: str | None = None,
    app_version: int | None = None,
    user_metadata: str | None = None,
) -> int:
    """Write ``data`` to the table at ``path`` in one atomic commit and return the committed version.

    mode: "append" | "overwrite" | "error" (fail if the table exists) | "ignore" (do nothing if it exists).
    schema_mode: None (schema must match) | "merge" (add new nullable columns) | "overwrite" (with mode="overwrite").
    app_id/app_version: idempotent writes; nothing is committed when the table's txn for app_id is >= app_version.
    """
    if (app_id is None) != (app_version is None):
        raise ValueError("pass app_id and app_version together")
    data_schema, batches = to_arrow_stream(data)
    plan = plan_write(path, data_schema, mode=mode, partition_by=partition_by, schema_mode=schema_mode, configuration=configuration, storage_options=storage_options)
    if plan.skip:
        return plan.read_version
    if app_id is not None and plan.snapshot is not None:
        txn = plan.snapshot.txns.get(app_id)
        if txn is not None and txn.version >= app_version:
            return plan.read_version
    return plan.commit(plan.write(batches), app_id=app_id, app_version=app_version, user_metadata=user_metadata)


def _load_or_none(storage: Storage) -> Snapshot | None:
    try:
        return Snapshot.load(storage)
    except TableNotFoundError:
        return None


def _discard(storage: Storage, files: list[AddFile]) -> None:
    for a in files:
        try:
            storage.delete(storage.join(a.relative_path))
        except (FileNotFoundError, OSError, LakelogError):
            pass

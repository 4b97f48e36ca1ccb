"""Writing data files: Parquet files per partition, rolled by size, with stats, bounded in open files and
buffered bytes (``DataWriter``)."""

from __future__ import annotations

import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..actions import AddFile, Protocol, encode_path, now_ms
from ..column_mapping import ColumnMapping, physical_schema, to_physical
from ..errors import SchemaMismatchError
from ..geospatial import check_writable as check_geo_writable
from ..features import is_supported
from ..properties import TableProperties
from ..schema import hive_escape, partition_value_arrays, serialize_partition_value
from ..storage import Storage
from .stats import stats_from_parquet_metadata

MATERIALIZE = "materializePartitionColumns"
ROLL_FILE_BYTES = 256 * 1024 * 1024  # in-memory Arrow bytes per file before starting a new one
ROW_GROUP_ROWS = 1024 * 1024
ROW_GROUP_BYTES = 64 * 1024 * 1024
MAX_OPEN_FILES = 64  # data files one writer keeps open at once (fewer under a low file-descriptor limit)
MAX_BUFFERED_BYTES = 512 * 1024 * 1024  # rows one writer keeps in memory across all partitions


@dataclass
class _PartFile:
    """The data file being written for one partition: rows buffered in memory, and the Parquet file
    itself once the first row group is written (a file is opened only when it has data to take)."""

    rel_path: str
    partition_values: dict[str, str | None]
    writer: pq.ParquetWriter | None = None
    sink: Any = None
    nbytes: int = 0
    pending: list = field(default_factory=list)
    pending_rows: int = 0
    pending_bytes: int = 0


def default_max_open_files() -> int:
    """Data files one writer keeps open at once: a small share of the process's file-descriptor limit."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return MAX_OPEN_FILES
    if soft == resource.RLIM_INFINITY:
        return MAX_OPEN_FILES
    return max(2, min(MAX_OPEN_FILES, soft // 8))


def materializes_partitions(protocol: Protocol | None, configuration: dict[str, str] | None) -> bool:
    """Whether new data files carry the partition columns under ``materializePartitionColumns``: required
    once the protocol lists the feature (or ``delta.enableMaterializePartitionColumnsFeature`` is about to
    list it); otherwise as ``delta.writePartitionColumnsToParquet`` asks (unset: not written). Iceberg
    compatibility asks for them too (``iceberg_compat.partitions_in_files``)."""
    props = TableProperties(configuration)
    if protocol is not None and is_supported(protocol, MATERIALIZE):
        return True
    return bool(props.get("delta.enableMaterializePartitionColumnsFeature") or props.get("delta.writePartitionColumnsToParquet"))


@dataclass
class DataWriter:
    """Writes batches into uniquely named Parquet files under ``k=v/`` directories; returns add actions.

    With ``column_mapping`` (a table whose mode is name or id) files name columns by physical name and
    carry Parquet field ids, and partition values are keyed by physical names (so are the stats, which
    are read from the files' footers).

    Nothing written here is visible until a commit names the files. Rows are buffered per partition
    into large row groups; at most ``max_open_files`` files are open at once (the least recently
    written one is finished when another must open, and its partition continues in a new file) and at
    most ``max_buffered_bytes`` of rows wait in memory (the largest buffers are written out first).
    """

    storage: Storage
    schema: pa.Schema  # full table schema (canonical types)
    partition_columns: list[str]
    max_indexed_cols: int = 32
    file_prefix: str = "part"
    use_dictionary: bool | list[str] = True  # Parquet dictionary encoding: all columns, or only these
    max_open_files: int = 0  # 0: default_max_open_files()
    max_buffered_bytes: int = 0  # 0: MAX_BUFFERED_BYTES
    column_mapping: ColumnMapping | None = None
    features: Any = None  # the table's WriterFeatures, applied to every batch (None: rows are copies, or there are none)
    directory: str = ""  # where under the table the files go ("_change_data" for change data files)
    extra_columns: tuple[str, ...] = ()  # last columns of ``schema`` written as they are, outside column mapping
    stats_columns: tuple[str, ...] = ()  # columns that always get stats (a clustered table's clustering columns)
    clustering_provider: str | None = None  # the adds' clusteringProvider (files an OPTIMIZE clustered)
    partitions_in_files: bool = False  # also write the partition columns, after the data columns (Iceberg compatibility)
    _parts: dict[tuple, _PartFile] = field(default_factory=dict)  # insertion order = least recently written first
    _open_lru: dict[tuple, None] = field(default_factory=dict)  # keys with an open file, least recently written first
    _created: list[str] = field(default_factory=list)
    _done: list[AddFile] = field(default_factory=list)
    _buffered: int = 0
    _counter: int = 0
    _made_dirs: set = field(default_factory=set)

    def __post_init__(self) -> None:
        check_geo_writable(self.schema)
        self.data_schema = pa.schema([f for f in self.schema if f.name not in self.partition_columns])
        in_files = [self.schema.field(c) for c in self.partition_columns] if self.partitions_in_files else []
        self._ptypes = {c: self.schema.field(c).type for c in self.partition_columns}
        self._required_partitions = [c for c in self.partition_columns if not self.schema.field(c).nullable]
        self.max_open_files = self.max_open_files or default_max_open_files()
        self.max_buffered_bytes = self.max_buffered_bytes or MAX_BUFFERED_BYTES
        mapped = self.column_mapping is not None and self.column_mapping.active
        # (the stats cover the table's data columns only: partition values are in the log)
        table_columns = [f for f in self.data_schema if f.name not in self.extra_columns]
        if mapped:
            self._stats_schema = physical_schema(self.column_mapping.schema_string, pa.schema(table_columns))
            self.file_schema = physical_schema(self.column_mapping.schema_string, pa.schema(table_columns + in_files))
        else:
            self._stats_schema = pa.schema(table_columns)
            self.file_schema = pa.schema(table_columns + in_files)
        for name in self.extra_columns:
            self.file_schema = self.file_schema.append(self.data_schema.field(name))
        self._file_columns = [f.name for f in table_columns + in_files] + list(self.extra_columns)
        self._partition_keys = {c: (self.column_mapping.physical_name(c) if mapped else c) for c in self.partition_columns}
        self._always_stats = frozenset(self.column_mapping.physical_name(c) if mapped else c for c in self.stats_columns)
        self._mapped = mapped

    @property
    def open_files(self) -> int:
        return len(self._open_lru)

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        if self.features is not None:
            batch = self.features.apply(batch)
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
            for c in self._required_partitions:
                if pvals[c] is None:
                    raise SchemaMismatchError(
                        f"partition column {c!r} is not nullable, but the data has an empty value there, which Delta "
                        "stores as null (an empty partition value means null); use another value"
                    )
            self._write_part(tuple(pvals.values()), pvals, ordered.slice(start, end - start))

    def _write_part(self, key: tuple, pvals: dict[str, str | None], batch: pa.RecordBatch) -> None:
        missing = [name for name in self.extra_columns if batch.schema.get_field_index(name) < 0]
        for name in missing:  # (rows without values there: new rows in row tracking's materialized columns)
            batch = batch.append_column(self.data_schema.field(name), pa.nulls(batch.num_rows, self.data_schema.field(name).type))
        data = batch.select(self._file_columns)
        if self.partitions_in_files and pvals:
            # The files' copy holds the partition values as the log records them (an empty string is
            # null there, as Spark logs it), not the raw values: Iceberg readers read this copy.
            logged = partition_value_arrays(pvals, self.schema, self.partition_columns, "(new data file)", data.num_rows)
            data = pa.RecordBatch.from_arrays([logged.get(n, data.column(n)) for n in data.schema.names], schema=data.schema)
        if self._mapped:
            data = to_physical(data, self.file_schema)
        f = self._parts.pop(key, None)
        if f is None:
            f = self._new_part(pvals)
        self._parts[key] = f  # now the most recently written
        if key in self._open_lru:
            self._open_lru[key] = self._open_lru.pop(key)
        # Small incoming batches (Spark sends 10k rows) are buffered into large row groups.
        f.pending.append(data)
        f.pending_rows += data.num_rows
        f.pending_bytes += data.nbytes
        self._buffered += data.nbytes
        if f.pending_rows >= ROW_GROUP_ROWS or f.pending_bytes >= ROW_GROUP_BYTES:
            self._flush(key, f)
        if f.nbytes >= ROLL_FILE_BYTES:
            self._close(key)
        while self._buffered > self.max_buffered_bytes:
            biggest = max(self._parts, key=lambda k: self._parts[k].pending_bytes)
            self._flush(biggest, self._parts[biggest])

    def _flush(self, key: tuple, f: _PartFile) -> None:
        if not f.pending:
            return
        if f.writer is None:
            while len(self._open_lru) >= self.max_open_files:
                self._close(next(iter(self._open_lru)))
            self._open(f)
            self._open_lru[key] = None
        self._write_pending(f)

    def _write_pending(self, f: _PartFile) -> None:
        table = pa.Table.from_batches(f.pending, schema=self.file_schema)
        f.writer.write_table(table, row_group_size=max(table.num_rows, 1))
        f.nbytes += f.pending_bytes
        self._buffered -= f.pending_bytes
        f.pending, f.pending_rows, f.pending_bytes = [], 0, 0

    def _new_part(self, pvals: dict[str, str | None]) -> _PartFile:
        pvals = {self._partition_keys[c]: v for c, v in pvals.items()}
        directory = "/".join(f"{hive_escape(c)}={hive_escape(v)}" for c, v in pvals.items())
        name = f"{self.file_prefix}-{self._counter:05d}-{uuid.uuid4()}.snappy.parquet"
        self._counter += 1
        rel = f"{directory}/{name}" if directory else name
        return _PartFile(f"{self.directory}/{rel}" if self.directory else rel, dict(pvals))

    def _open(self, f: _PartFile) -> None:
        full = self.storage.join(f.rel_path)
        parent = full.rsplit("/", 1)[0]
        if parent not in self._made_dirs:
            self.storage.makedirs(parent)
            self._made_dirs.add(parent)
        self._created.append(f.rel_path)
        f.sink = self.storage.open_output(full)
        f.writer = pq.ParquetWriter(f.sink, self.file_schema, compression="snappy", use_dictionary=self.use_dictionary)

    def _close(self, key: tuple) -> None:
        f = self._parts.pop(key)
        self._open_lru.pop(key, None)
        self._finish_file(f)

    def _finish_file(self, f: _PartFile) -> None:
        if f.writer is None:
            self._open(f)
        if f.pending:
            self._write_pending(f)
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
                stats=stats_from_parquet_metadata(self._stats_schema, f.writer.writer.metadata, self.max_indexed_cols, self._always_stats),
                clustering_provider=self.clustering_provider,
            )
        )

    def finish(self) -> list[AddFile]:
        """Write out every buffer and close every file; return the add actions of all files written."""
        for key in list(self._open_lru):
            self._close(key)
        rest = list(self._parts.values())
        workers = min(len(rest), os.cpu_count() or 1)
        if workers > 1:
            # Files of different partitions are independent; pyarrow writes them without holding the GIL.
            # In chunks of max_open_files: the chunk's files are opened here, in a fixed order (as every
            # storage call is), then written and closed on the pool.
            with ThreadPoolExecutor(max_workers=workers) as pool:
                for i in range(0, len(rest), self.max_open_files):
                    chunk = rest[i : i + self.max_open_files]
                    for f in chunk:
                        if f.writer is None:
                            self._open(f)
                    list(pool.map(self._finish_file, chunk))
        else:
            for f in rest:
                self._finish_file(f)
        self._parts.clear()
        self._buffered = 0
        return list(self._done)

    def abort(self) -> None:
        """Delete every file this writer created (none of them is committed)."""
        for f in self._parts.values():
            if f.writer is not None:
                try:
                    f.writer.close()
                    f.sink.close()
                except Exception:
                    pass
        self._parts.clear()
        self._open_lru.clear()
        for rel in self._created:
            try:
                self.storage.delete(self.storage.join(rel))
            except (FileNotFoundError, OSError):
                pass

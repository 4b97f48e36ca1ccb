"""Reading a table's change data feed over a range of versions (Delta's ``table_changes``).

Per version, as the protocol says: a commit with ``cdc`` actions has its changes in those change data
files (``_change_type`` in each row); otherwise its ``add`` actions (``dataChange``) are inserts and its
``remove`` actions deletes. An add and a remove of the same file with different deletion vectors (a
deletion-vector DELETE or UPDATE written without change files) change only the rows whose deletion
state differs: rows the new vector deletes are deletes, rows it restores are inserts.
Rows are read with the schema of the range's last version (older files cast, missing columns NULL).
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Iterator

import numpy as np
import pyarrow as pa

from ..actions import AddCDCFile, AddFile, Metadata, RemoveFile, decode_path
from ..table_features.deletion_vectors import DeletionVectors
from ..errors import ChangeFeedUnavailableError, ConflictingBoundsError, CorruptLogError, DataFileError, InvalidArgumentError, VersionNotFoundError
from ..log.delta_log import DeltaLog
from ..storage.parquet_read import parquet_format
from ..table_features.properties import TableProperties
from ..read.scan import partition_arrays, read_data_file
from ..log.snapshot import Snapshot, commit_times
from ..storage import Storage

CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP = "_change_type", "_commit_version", "_commit_timestamp"
ROW = "__lakelog_cdf_row"


def feed_enabled(metadata: Metadata) -> bool:
    """Whether ``delta.enableChangeDataFeed`` (or the legacy ``delta.enableChangeDataCapture``) is on."""
    return bool(TableProperties(metadata.configuration).change_data_feed)


def change_schema(schema: pa.Schema) -> pa.Schema:
    return schema.append(pa.field(CHANGE_TYPE, pa.string())).append(pa.field(COMMIT_VERSION, pa.int64())).append(
        pa.field(COMMIT_TIMESTAMP, pa.timestamp("us", tz="UTC")))


PYTHON_BOUNDS = ("starting_version", "starting_timestamp", "ending_version", "ending_timestamp")


def check_bounds(starting_version, ending_version, starting_timestamp, ending_timestamp, names: tuple[str, ...] = PYTHON_BOUNDS) -> None:
    """Refuse a bound given both as a version and as a timestamp (``ConflictingBoundsError`` naming each
    such pair, by ``names``: the starting version, starting timestamp, ending version and ending
    timestamp arguments as the caller spells them), as Delta does."""
    given = [(names[0], starting_version, names[1], starting_timestamp), (names[2], ending_version, names[3], ending_timestamp)]
    both = [(vn, v, tn, t) for vn, v, tn, t in given if v is not None and t is not None]
    if both:
        said = " and ".join(f"{vn}={v!r} with {tn}={t!r}" for vn, v, tn, t in both)
        choose = "; ".join(f"give {vn} or {tn}, not both" for vn, _, tn, _ in both)
        raise ConflictingBoundsError(
            f"the change data feed was given {said}: a bound is a version or a timestamp, so one would be ignored. {choose}",
            [(vn, tn) for vn, _, tn, _ in both],
        )


def version_range(storage: Storage, starting_version, ending_version, starting_timestamp, ending_timestamp,
                  names: tuple[str, ...] = PYTHON_BOUNDS) -> tuple[int, int | None]:
    """Versions from the arguments of ``Table.changes`` (a timestamp: the first version committed at or
    after the start, the last at or before the end; no start: version 0). A bound given both ways is a
    ``ConflictingBoundsError`` (see ``check_bounds``; ``names``: how the caller spells the arguments)."""
    from ..log.commit_times import CommitTimes
    from ..log.snapshot import _latest_for_times
    from ..log.versions import to_epoch_ms

    check_bounds(starting_version, ending_version, starting_timestamp, ending_timestamp, names)
    if starting_timestamp is None and ending_timestamp is None:
        return (0 if starting_version is None else starting_version), ending_version
    log = DeltaLog(storage)
    listing = log.list()
    times = CommitTimes(log, listing, *_latest_for_times(storage, listing))
    start, end = (0 if starting_version is None else starting_version), ending_version
    if starting_timestamp is not None:
        first = times.first_at_or_after(to_epoch_ms(starting_timestamp))
        if first is None:
            raise VersionNotFoundError(f"no version was committed at or after {names[1]} {starting_timestamp!r}")
        start = first
    if ending_timestamp is not None:
        end = times.latest_at_or_before(to_epoch_ms(ending_timestamp))
    return start, end


READ_AHEAD = 4  # versions whose change files are read at once
SCAN_BYTES = 64 * 1024 * 1024  # change data file bytes read in one scan
_TIMESTAMP = pa.timestamp("us", tz="UTC")


class ChangeReader:
    """The changes of versions ``start``..``end`` of the table at ``storage``."""

    def __init__(self, storage: Storage, start: int, end: int | None = None, latest: Snapshot | None = None):
        for v, what in ((start, "starting_version"), (end, "ending_version")):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise InvalidArgumentError(f"{what} must be an integer >= 0, not {v!r}")
        self.storage = storage
        self.log = DeltaLog(storage)
        latest_snapshot = latest  # the caller's snapshot (a Table's): used when the range ends at its version
        known = latest.listing if latest is not None else None
        # A range that ends at a version the caller's listing has needs no new listing of the log.
        fresh = known is None or end is None or known.latest_version is None or end > known.latest_version or start < known.listed_from
        self.listing = self.log.list() if fresh else known
        self._reused = not fresh
        latest = self.listing.latest_version
        if latest is None:
            raise VersionNotFoundError(f"no table at {storage.uri!r}")
        end = latest if end is None else end
        if start > latest:
            raise VersionNotFoundError(f"starting_version {start} is past the table's latest version {latest}")
        if end > latest:
            raise VersionNotFoundError(f"ending_version {end} is past the table's latest version {latest}")
        if start > end:
            raise InvalidArgumentError(f"starting_version {start} is after ending_version {end}")
        self.start, self.end = start, end
        # (the caller's snapshot of the latest version, when the range ends there: no second log replay)
        same = latest_snapshot is not None and latest_snapshot.version == end
        self.last = latest_snapshot if same else Snapshot.load(storage, version=end, listing=self.listing)
        self.schema = self.last.schema
        self.partition_columns = self.last.partition_columns
        self.mapping = self.last.column_mapping
        self.dvs = DeletionVectors(storage)
        self._commits: dict[int, list] = {}

    @property
    def output_schema(self) -> pa.Schema:
        return change_schema(self.schema)

    def schema_of(self, columns: list[str] | None) -> pa.Schema:
        """The schema of ``batches(columns)``."""
        return self.output_schema if columns is None else change_schema(pa.schema([self.schema.field(c) for c in columns]))

    def batches(self, columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
        """The changes, version by version, as record batches of ``columns`` (default: all) and the
        three change columns."""
        self._check_commits()
        metadata = self._metadata_before_start()
        times = commit_times(self.last, self.listing)
        wanted = list(self.schema.names) if columns is None else list(columns)
        out_schema = self.schema_of(columns)
        # Versions are read a few at a time on a small pool (their files are independent), yielded in order:
        # at most READ_AHEAD versions' rows are held at once.
        pool: ThreadPoolExecutor | None = None  # (started only when a version has files left to read)
        pending: deque = deque()

        def emit(v: int, stamp: int, changes: list[pa.Table]) -> Iterator[pa.RecordBatch]:
            for table in changes:
                n = table.num_rows
                if not n:
                    continue
                table = table.select(wanted + [CHANGE_TYPE])
                table = table.append_column(COMMIT_VERSION, pa.repeat(pa.scalar(v, pa.int64()), n))
                table = table.append_column(COMMIT_TIMESTAMP, pa.repeat(pa.scalar(stamp * 1000, _TIMESTAMP), n))
                yield from (table if table.schema.equals(out_schema) else table.cast(out_schema)).to_batches()

        try:
            for v0 in range(self.start, self.end + 1, 64):
                versions = list(range(v0, min(self.end, v0 + 63) + 1))
                commits = self._read_commits(versions)
                stamps = times.of(versions, commits)
                for group in self._groups(versions, commits):
                    read = self._scan_change_files([c for v in group for c in commits[v] if isinstance(c, AddCDCFile)])
                    for v in group:
                        actions = commits[v]
                        metadata = next((a for a in actions if isinstance(a, Metadata)), metadata)
                        if self._all_read(actions, read):
                            future: Future = Future()  # (nothing left to read: no thread needed)
                            try:
                                future.set_result(self._changes(v, actions, metadata, read))
                            except BaseException as e:  # raised in order, when its turn comes
                                future.set_exception(e)
                        else:
                            if pool is None:
                                pool = ThreadPoolExecutor(max_workers=READ_AHEAD)
                            future = pool.submit(self._changes, v, actions, metadata, read)
                        pending.append((v, stamps[v], future))
                        if len(pending) >= READ_AHEAD:
                            done_v, stamp, future = pending.popleft()
                            yield from emit(done_v, stamp, future.result())

            while pending:
                done_v, stamp, future = pending.popleft()
                yield from emit(done_v, stamp, future.result())
        finally:
            for _, _, future in pending:
                future.cancel()
            if pool is not None:
                pool.shutdown(wait=True)

    @staticmethod
    def _all_read(actions: list, read: dict[str, pa.Table]) -> bool:
        """Whether a version's changes need no more reading: its change data files (which alone say its
        changes when it has any) were all read by the scan, or it has no file actions at all."""
        cdcs = [a for a in actions if type(a) is AddCDCFile]
        if cdcs:
            return all(c.path in read for c in cdcs)
        return all(type(a) is not AddFile and type(a) is not RemoveFile for a in actions)

    def _metadata_before_start(self) -> Metadata | None:
        """The metadata in effect just before ``start`` (None at version 0). When no commit after
        ``start`` in a short range changes the metadata, that of the last version serves, without a
        second replay of the log."""
        if self.start == 0:
            return None
        if self.end - self.start < 256:
            commits = self._read_commits(list(range(self.start + 1, self.end + 1)))
            if not any(isinstance(a, Metadata) for actions in commits.values() for a in actions):
                return self.last.metadata  # (a metaData at ``start`` itself replaces it when read)
        return Snapshot.load(self.storage, version=self.start, listing=self.listing).metadata

    def _check_commits(self) -> None:
        missing = [v for v in range(self.start, self.end + 1) if v not in self.listing.commits]
        if missing:
            raise ChangeFeedUnavailableError(
                f"the commit of version {missing[0]} is no longer in the log (log cleanup removed it), so its changes "
                f"cannot be read; read from version {max(missing) + 1} on"
            )

    def _read_commits(self, versions: list[int]) -> dict[int, list]:
        """Commits of the range, read once: a short range's are kept (the metadata check and the
        changes read the same ones)."""
        cache = self._commits
        missing = [v for v in versions if v not in cache]
        if missing:
            try:
                got = self.log.read_commits(missing)
            except CorruptLogError:
                if not self._reused:
                    raise
                # The caller's listing was out of date (log cleanup since): list again, say which is gone.
                self.listing, self._reused = self.log.list(), False
                self._check_commits()
                got = self.log.read_commits(missing)
            if self.end - self.start < 64:
                cache.update(got)
            else:
                return {v: cache.get(v) or got[v] for v in versions}
        return {v: cache[v] for v in versions}

    # ------------------------------------------------------------ change data files, many at once
    @staticmethod
    def _groups(versions: list[int], commits: dict[int, list]) -> Iterator[list[int]]:
        """``versions`` in runs whose change data files add up to at most SCAN_BYTES (one scan each)."""
        run: list[int] = []
        size = 0
        for v in versions:
            n = sum(a.size for a in commits[v] if isinstance(a, AddCDCFile))
            if run and size + n > SCAN_BYTES:
                yield run
                run, size = [], 0
            run.append(v)
            size += n
        if run:
            yield run

    def _scan_change_files(self, cdcs: list[AddCDCFile]) -> dict[str, pa.Table]:
        """The rows of change data files (path -> table), read in one Arrow dataset scan: the files are
        decoded on Arrow's threads with no Python per file. Only files whose columns are the table's
        (names and types; absent columns are null) go this way: {} for a column-mapped table, a file
        stored differently or any read error, and those files are read one by one (``_cdc_file``)."""
        if len(cdcs) < 2 or self.mapping.active:
            return {}
        import pyarrow.dataset as ds

        data_fields = [f for f in self.schema if f.name not in self.partition_columns]
        schema = pa.schema(data_fields + [pa.field(CHANGE_TYPE, pa.string())])
        by_path = {self.storage.join(c.relative_path): c for c in cdcs}
        try:
            d = ds.dataset(list(by_path), schema=schema, format=parquet_format(), filesystem=self.storage.arrow_fs)
            for frag in d.get_fragments():
                stored = frag.physical_schema
                if frag.path not in by_path or any(
                    stored.get_field_index(f.name) >= 0 and stored.field(f.name).type != f.type for f in schema
                ) or stored.get_field_index(CHANGE_TYPE) < 0:
                    return {}
            parts: dict[str, list[pa.RecordBatch]] = {}
            for tagged in d.scanner(use_threads=True).scan_batches():
                parts.setdefault(tagged.fragment.path, []).append(tagged.record_batch)
        except (pa.ArrowException, OSError):
            return {}
        out = {}
        for path, c in by_path.items():
            t = pa.Table.from_batches(parts.get(path, []), schema=schema)
            partitions = partition_arrays(AddFile(c.path, c.partition_values, c.size, 0, False), self.schema, self.partition_columns, None, t.num_rows)
            for name, values in partitions.items():
                t = t.append_column(self.schema.field(name), values)
            out[c.path] = t.select(list(self.schema.names) + [CHANGE_TYPE])
        return out

    # ------------------------------------------------------------ one version
    def _changes(self, v: int, actions: list, metadata: Metadata | None, read: dict[str, pa.Table] | None = None) -> list[pa.Table]:
        cdcs = [a for a in actions if isinstance(a, AddCDCFile)]
        adds = [a for a in actions if isinstance(a, AddFile) and a.data_change]
        removes = [a for a in actions if isinstance(a, RemoveFile) and a.data_change]
        if not cdcs and not adds and not removes:
            return []
        if metadata is None or not feed_enabled(metadata):
            raise ChangeFeedUnavailableError(
                f"version {v} changed data while the change data feed was off (delta.enableChangeDataFeed was not true), so "
                "its changes were not recorded; read a range of versions where it was on"
            )
        try:
            if cdcs:
                return [read[c.path] if read and c.path in read else self._cdc_file(c) for c in cdcs]
            out = []
            removed = {decode_path(r.path): r for r in removes}
            for a in adds:
                r = removed.pop(decode_path(a.path), None)
                out.extend(self._dv_change(a, r, v) if r is not None else [self._file(a, "insert")])
            for r in removed.values():
                out.append(self._file(self._as_add(r, v), "delete"))
            return out
        except DataFileError as e:
            raise ChangeFeedUnavailableError(f"the changes of version {v} cannot be read: {e}") from None

    def _file(self, add: AddFile, kind: str) -> pa.Table:
        t = read_data_file(self.storage, add, self.schema, self.partition_columns, self.schema.names, self.mapping, self.dvs)
        return t.append_column(CHANGE_TYPE, pa.array([kind] * t.num_rows, pa.string()))

    def _dv_change(self, add: AddFile, remove: RemoveFile, v: int) -> list[pa.Table]:
        before = read_data_file(self.storage, self._as_add(remove, v), self.schema, self.partition_columns, self.schema.names,
                                self.mapping, self.dvs, row_index=ROW)
        after = read_data_file(self.storage, add, self.schema, self.partition_columns, self.schema.names, self.mapping, self.dvs, row_index=ROW)
        b, a = before.column(ROW).to_numpy(), after.column(ROW).to_numpy()
        gone = before.filter(pa.array(~np.isin(b, a))).drop_columns([ROW])
        back = after.filter(pa.array(~np.isin(a, b))).drop_columns([ROW])
        return [gone.append_column(CHANGE_TYPE, pa.array(["delete"] * gone.num_rows, pa.string())),
                back.append_column(CHANGE_TYPE, pa.array(["insert"] * back.num_rows, pa.string()))]

    def _as_add(self, r: RemoveFile, v: int) -> AddFile:
        pv = r.partition_values
        if pv is None:  # a remove without extended metadata: the partition values are the file's at v - 1
            known = Snapshot.load(self.storage, version=v - 1, listing=self.listing).files.get(decode_path(r.path))
            pv = dict(known.partition_values) if known is not None else {}
        return AddFile(r.path, pv, r.size or 0, 0, True, None, None, r.deletion_vector)

    def _cdc_file(self, c: AddCDCFile) -> pa.Table:
        add = AddFile(c.path, c.partition_values, c.size, 0, False)
        t = read_data_file(self.storage, add, self.schema, self.partition_columns, self.schema.names, self.mapping, self.dvs, extra=(CHANGE_TYPE,),
                           use_threads=False)
        return t.set_column(t.schema.get_field_index(CHANGE_TYPE), CHANGE_TYPE, t.column(CHANGE_TYPE).cast(pa.string()))

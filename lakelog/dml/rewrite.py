"""The machinery every row-level operation shares: predicates, candidate files, bounded reads with row
positions (``dml/file_reads.py``), the "delete these rows of file F" seam, and one commit with a read
predicate.

Rows are always tracked by their position in their data file (``ROW``, the file row index of the
Delta protocol), so that marking rows deleted is one call per file, ``RowDeleter.delete_rows``.
Copy-on-write (``CopyOnWrite``) implements it by rewriting the file without those rows;
merge-on-read (``MergeOnRead``, tables with deletion vectors enabled) by marking them in the file's
deletion vector.

Rules that keep rows paired with their values:

* A row's identity is its (FILE, ROW), or a position column carried through the query: SQL results come
  back in any order (see ``lakelog.expressions.sql``), so nothing pairs a result row with an input row by position.
  ``Group.selected`` selects by carried positions, an update's new values come from ``Engine.evaluate``,
  a merge's joins carry FILE, ROW and the source row's number.

What the pool's threads (``pool``: ``read_file``, ``complete`` and copy-on-write rewrites) share, and how:

* The operation's ``Engine`` is used by the calling thread only; the pool never queries it (the engine
  would serialize them anyway). The writer features' own engine (``WriterFeatures.apply``, run by
  rewrites) is behind the features' lock, and identity values are drawn under it.
* Threads only set keys of ``read_files``, ``dictionary_columns`` and ``_file_columns`` (one assignment
  each, atomic in CPython; a file's value is the same whoever sets it); a rewrite reads back only its own
  file's entries, and the rest is read after the pool is done (``commit``).
* ``DeletionVectors`` caches each vector under its lock; each rewrite has its own ``DataWriter``.
* Results (new files, copied-row counts) are collected by the calling thread from the futures.
"""

from __future__ import annotations

import dataclasses
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ..actions import Action, AddCDCFile, AddFile, Metadata, RemoveFile, Txn, decode_path, now_ms
from ..errors import InvalidArgumentError, LakelogError, StorageUnavailableError, SymlinkManifestError, UnsupportedFeatureError
from ..environment import positive_int
from ..table_features.deletion_vectors import DeletionVectors
from ..read.scan import candidate_adds, files_dataset
from ..log.snapshot import Snapshot
from ..expressions.sql import Engine
from ..storage import Storage
from ..transaction import DuplicateTransaction, Transaction, check_user_metadata
from ..table_features.column_mapping import ColumnMapping
from ..table_features import iceberg_compat
from ..table_features.clustering import clustering_columns
from ..table_features.row_rules import WriterFeatures
from ..change_feed.read import feed_enabled
from ..change_feed.write import ChangeRecorder
from ..table_features.identity_columns import high_water_marks, with_high_water_marks
from ..write import DataWriter, materializes_partitions
from .copy_on_write import CopyOnWrite, rows_at, table_rows  # noqa: F401  (rows_at re-exported)
from .internal_columns import FILE, POS, ROW, ROW_ID, internal_name  # noqa: F401  (re-exported)
from .predicate import Predicate, compile_predicate, reads_only_partitions, select_positions  # noqa: F401  (re-exported)
from .file_reads import FileReads
from .memory_pool import system_allocator
from .merge_on_read import MergeOnRead
from .stable_ids import materialize
from ..table_features import row_tracking
from ..table_features.row_tracking import writer_schema

RowDeleter = CopyOnWrite | MergeOnRead
from ..table_features.registry import is_supported

# Files read or rewritten at once: from an object store 4; locally at most one per core, since decoding
# is CPU-bound (on 2 cores 4 threads took 20% longer and held 15% more memory).
READ_THREADS = 4
THREADS_VARIABLE = "LAKELOG_DML_THREADS"  # overrides the pool size (e.g. 1 to run every read and rewrite in turn)


def pool_threads(is_local: bool) -> int:
    """Threads of an operation's pool: ``LAKELOG_DML_THREADS`` if set, else READ_THREADS (at most one per
    core on a local disk)."""
    n = positive_int(THREADS_VARIABLE, "threads reading and rewriting files")
    if n is not None:
        return n
    return min(READ_THREADS, os.cpu_count() or 1) if is_local else READ_THREADS


# ---------------------------------------------------------------- the seam: delete rows of a file


def uses_deletion_vectors(snapshot: Snapshot) -> bool:
    """Whether row-level changes mark rows in deletion vectors: ``delta.enableDeletionVectors=true`` on a
    table whose protocol has the ``deletionVectors`` feature (the property alone does not allow them)."""
    return bool(snapshot.properties.get("delta.enableDeletionVectors")) and is_supported(snapshot.protocol, "deletionVectors")


# ---------------------------------------------------------------- one operation


class RowLevelOperation(FileReads):
    """One delete/update/merge/overwrite on the latest version: reads candidate files, writes new ones
    through the table's ``DataWriter`` and commits once, with the files it read as its read set."""

    def __init__(self, storage: Storage, *, app_id: str | None = None, app_version: int | None = None, user_metadata: str | None = None,
                 snapshot: Snapshot | None = None, worker: bool = False):
        """``worker``: a worker of a distributed operation, which writes files but never commits (its
        driver does): the store's commit safety is the driver's concern."""
        if (app_id is None) != (app_version is None):
            raise InvalidArgumentError("pass app_id and app_version together")
        if app_version is not None and (isinstance(app_version, bool) or not isinstance(app_version, int) or app_version < 0):
            raise InvalidArgumentError(f"app_version must be an integer >= 0, not {app_version!r}")
        check_user_metadata(user_metadata)
        self.started = time.perf_counter()
        self.storage = storage
        if not worker:
            storage.check_atomic_commits()
        self.snapshot = snapshot if snapshot is not None else Snapshot.load(storage)
        self.snapshot.check_writable()
        self.app_id, self.app_version, self.user_metadata = app_id, app_version, user_metadata
        self.schema = self.snapshot.schema
        self.partition_columns = self.snapshot.partition_columns
        self.engine = Engine()
        # One pool reads and rewrites files: Arrow's allocator keeps memory per thread, so every thread
        # that decodes or encodes files holds its own (~18 MiB each, measured): few threads, few holds.
        self.threads = pool_threads(storage.is_local)
        self.file_prefix = "part"  # of the data files it writes (a distributed operation's own, to find them again)
        self._pool: ThreadPoolExecutor | None = None
        self.deleter: RowDeleter = MergeOnRead(self) if uses_deletion_vectors(self.snapshot) else CopyOnWrite(self)
        self.removes: dict[str, RemoveFile] = {}
        self.read_files: dict[str, AddFile] = {}
        self.read_prunes: list[pc.Expression | None] = []
        self.read_checks: list[Callable[[AddFile], bool]] = []  # other "this file matters" tests
        self.metadata: Metadata | None = None
        self.extra_actions: list[Action] = []
        self._writer: DataWriter | None = None
        self.dictionary_columns: dict[str, list[str]] = {}  # per file read whole: its dictionary-encoded leaves
        self._file_columns: dict[str, set[str]] = {}  # per file read whole: its top-level columns
        self.deletion_vectors = DeletionVectors(storage)
        # What new rows (updated, inserted, overwriting) must meet; rows copied unchanged are not checked.
        self.features: WriterFeatures | None = self.snapshot.writer_features
        # The change data feed: every row this operation changes is recorded in change data files.
        self.records_changes = feed_enabled(self.snapshot.metadata)
        # Row tracking enabled: rewritten rows keep their stable ids in these materialized columns.
        self.row_tracking = row_tracking.materialized_columns(self.snapshot.metadata)
        self.stats_columns = tuple(clustering_columns(self.snapshot))  # (a clustered table: stats always kept for them)
        self._changes: ChangeRecorder | None = None
        self._cdc: list[AddCDCFile] = []
        self._adds: list[AddFile] | None = None
        self._written: list[AddFile] = []  # files written elsewhere (e.g. by Spark tasks) that this commit adds
        self._committing = False  # from here on a failure leaves the outcome unknown: files stay

    # ------------------------------------------------------------ state
    @property
    def duplicate(self) -> bool:
        """This app_id already committed app_version (or later): nothing must be done."""
        txn = self.snapshot.txns.get(self.app_id) if self.app_id is not None else None
        return txn is not None and txn.version >= self.app_version

    @property
    def pool(self) -> ThreadPoolExecutor:
        """The operation's worker threads (``threads`` of them), for reading and rewriting files."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="lakelog-dml")
        return self._pool

    def _close_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    @property
    def writer(self) -> DataWriter:
        """The writer of new rows (updated, inserted, overwriting data)."""
        if self._writer is None:
            self._writer = self.new_writer()
        return self._writer

    def new_writer(self, like: AddFile | None = None) -> DataWriter:
        """A writer of new files; ``like``: a file read whole, whose columns' dictionary encoding the new
        files keep (dictionary-encoding a column whose values are mostly distinct only costs time)."""
        w = DataWriter(self.storage, writer_schema(self.schema, self.row_tracking), self.partition_columns, self.snapshot.properties.num_indexed_cols,
                       file_prefix=self.file_prefix, column_mapping=self.column_mapping, features=self.features if like is None else None,
                       stats_columns=self.stats_columns, extra_columns=self.row_tracking or (), partitions_in_files=self.partitions_in_files)
        if like is not None and self.column_mapping is None:  # (the kept leaves are physical paths under column mapping)
            kept = self.dictionary_columns.get(decode_path(like.path))
            if kept is not None:  # columns the file lacks (added since) keep the default
                missing = [c for c in w.data_schema.names if not any(p == c or p.startswith(c + ".") for p in kept)
                           and c not in self._file_columns.get(decode_path(like.path), ())]
                w.use_dictionary = list(kept) + missing
        return w

    @property
    def partitions_in_files(self) -> bool:
        """Whether new files hold the partition columns too (Iceberg compatibility of the table written, or
        materializePartitionColumns)."""
        configuration = (self.metadata or self.snapshot.metadata).configuration
        return iceberg_compat.partitions_in_files(configuration) or materializes_partitions(self.snapshot.protocol, configuration)

    @property
    def column_mapping(self) -> ColumnMapping | None:
        """How new files name their columns (None without column mapping), for the schema being written."""
        mapping = self.snapshot.column_mapping
        if not mapping.active:
            return None
        return ColumnMapping(mapping.mode, self.metadata.schema_string) if self.metadata is not None else mapping

    def evolve_schema(self, schema: pa.Schema, metadata: Metadata, extra: list[Action]) -> None:
        """Write with ``schema`` and commit ``metadata`` (and ``extra``, e.g. a protocol upgrade)."""
        if self._writer is not None:
            raise RuntimeError("the schema must be set before any row is written")
        self.schema, self.metadata, self.extra_actions = schema, metadata, list(extra)
        features = WriterFeatures.of(metadata.schema_string, metadata.configuration)
        self.features = features.computing(self.features.computed) if features is not None and self.features is not None else features

    # ------------------------------------------------------------ files
    def candidates(self, prune: pc.Expression | None, filters: list | None = None) -> list[AddFile]:
        """Files that may hold rows satisfying ``prune`` (by partition values and stats); ``filters``: the
        same as DNF filter tuples, decided over all files at once without a pyarrow dataset."""
        self.read_prunes.append(prune)
        if prune is not None and filters:
            return candidate_adds(self.snapshot, filters)
        files = list(self.snapshot.files.values())
        if prune is None or not files:
            return files
        snap = self.snapshot
        d = files_dataset(snap.storage, snap.schema, snap.partition_columns, files, filters=prune, mapping=snap.column_mapping)
        keep = {frag.path for frag in d.get_fragments(filter=prune)}
        return [a for a in files if snap.storage.join(a.relative_path) in keep]

    def may_match(self, add: AddFile) -> bool:
        """Whether a (concurrently added) file may hold rows this operation would have read."""
        if decode_path(add.path) in self.read_files:
            return True
        for check in self.read_checks:
            try:
                if check(add):
                    return True
            except LakelogError:
                return True  # (a malformed partition value): cannot tell, assume it matters
        snap = self.snapshot
        for prune in self.read_prunes:
            if prune is None:
                return True
            try:
                d = files_dataset(snap.storage, snap.schema, snap.partition_columns, [add], filters=prune, mapping=snap.column_mapping)
                if any(True for _ in d.get_fragments(filter=prune)):
                    return True
            except (pa.ArrowException, LakelogError, ValueError, KeyError):
                return True  # cannot tell: assume it matters
        return False

    # ------------------------------------------------------------ changes
    def remove(self, add: AddFile) -> None:
        path = decode_path(add.path)
        self.read_files[path] = add
        self.removes[path] = add.remove(now_ms())

    def delete_rows(self, add: AddFile, rows: np.ndarray, content: pa.Table | None = None, num_rows: int | None = None,
                    replacement: pa.Table | None = None, known: pa.Table | None = None) -> None:
        """``known``: columns of the file already read (see ``complete``)."""
        self.deleter.delete_rows(add, rows, content, num_rows, replacement, known)

    def write(self, table: pa.Table) -> None:
        """Write rows (any column order; internal and unknown columns are dropped) as new files."""
        for batch in table.to_batches():
            self.writer.write(self.materialized(table_rows(batch, self.schema, self.features), batch, copied=False))

    def materialized(self, rows: pa.RecordBatch, source: pa.RecordBatch, *, copied: bool) -> pa.RecordBatch:
        """``rows`` to write, with the materialized row tracking columns when the table has them: the
        stable ids ``source`` carries, and its commit versions if the rows are ``copied`` unchanged."""
        return rows if self.row_tracking is None else materialize(rows, source, self.row_tracking, copied)

    def add_files(self, adds: list[AddFile], inserts: bool = False) -> None:
        """Commit files already written with this operation's schema and partitioning (``WritePlan.write``,
        or a Spark task's ``DataWriter`` on this table) with the operation; ``abort`` deletes them.
        ``inserts``: also record their rows as inserted (the change data feed)."""
        if self._adds is not None:
            raise RuntimeError("files must be added before finish()")
        self._written.extend(adds)
        if inserts and self.records_changes:
            for a in adds:
                self.record_changes(self.read_file(a), "insert")

    # ------------------------------------------------------------ change data feed
    def record_changes(self, rows: pa.Table, kind: str) -> None:
        """Record ``rows`` (table columns; others ignored) as changes of ``kind`` when the feed is on."""
        if not self.records_changes or rows.num_rows == 0:
            return
        if self._changes is None:
            self._changes = ChangeRecorder(self.storage, self.schema, self.partition_columns, self.column_mapping)
        self._changes.record(rows, kind)

    def add_change_files(self, files: list[AddCDCFile]) -> None:
        """Commit change data files written elsewhere (Spark tasks) with the operation; ``abort`` deletes them."""
        self._cdc.extend(files)

    def record_deleted(self, add: AddFile, rows: np.ndarray | None, content: pa.Table | None = None, kind: str = "delete") -> pa.Table | None:
        """Record the rows at file row indexes ``rows`` of ``add`` (None: all its live rows) as ``kind``;
        returns the file's content when it had to be read (None when the feed is off)."""
        if not self.records_changes:
            return content
        if content is None:
            content = self.read_file(add)
        if rows is None:
            self.record_changes(content, kind)
        else:
            self.record_changes(rows_at(content, rows), kind)
        return content

    def new_rows(self, table: pa.Table) -> pa.Table:
        """``table`` with the writer features applied (generated, identity values), as the rows to both
        write and record: applying them again when writing changes nothing."""
        if self.features is None or not self.records_changes or table.num_rows == 0:
            return table
        batches = [self.features.apply(table_rows(b, self.schema, self.features)) for b in table.to_batches()]
        out = pa.Table.from_batches(batches, schema=batches[0].schema) if batches else table
        if ROW_ID in table.column_names and ROW_ID not in out.column_names:  # (updated rows keep their stable ids)
            out = out.append_column(ROW_ID, table.column(ROW_ID))
        return out

    @property
    def copied_rows(self) -> int:
        return self.deleter.copied_rows

    # ------------------------------------------------------------ commit
    def finish(self) -> None:
        """Close the new files (``num_added_files`` is final from here on)."""
        if self._adds is None:
            try:
                self._adds = list(self._written) + (self._writer.finish() if self._writer is not None else []) + self.deleter.finish()
            finally:
                self._close_pool()

    def commit(self, operation: str, parameters: dict[str, Any], metrics: dict[str, Any]) -> int | None:
        """Commit the changes (None when there are none and no txn to record); returns the version."""
        self.finish()
        adds = self._adds
        if self._changes is not None:
            self._cdc = self._cdc + self._changes.finish()
            self._changes = None
        if self.removes and self.snapshot.append_only:
            # As Spark: an append-only table takes what only adds rows (an insert-only merge, a delete or
            # update that matches nothing), never a change to committed rows.
            self._discard(adds)
            self._discard_changes()
            raise UnsupportedFeatureError(
                f"the table has delta.appendOnly=true: this {operation} would delete, update or replace rows of {len(self.removes)} "
                "file(s), which an append-only table refuses; nothing was committed. Only inserts are allowed "
                "(set delta.appendOnly=false to change rows)"
            )
        # The rows inserted drew identity values beyond the mark: it moves in this commit (before the
        # commit is attempted: a mark past the bigint range fails with the new files deleted).
        marks = high_water_marks(self.features.identity, adds, self.storage, self.column_mapping) \
            if self.features is not None and self.features.identity and adds else {}
        self._committing = True
        actions: list[Action] = list(self.extra_actions)
        if self.metadata is not None:
            actions.append(self.metadata)
        if self.app_id is not None:
            actions.append(Txn(self.app_id, int(self.app_version), now_ms()))
        actions.extend(self.removes.values())
        actions.extend(adds)
        actions.extend(self._cdc)
        if not self.removes and not adds and self.metadata is None and self.app_id is None:
            self._discard_changes()
            return None
        if marks:
            base = self.metadata if self.metadata is not None else self.snapshot.metadata
            self.metadata = dataclasses.replace(base, schema_string=with_high_water_marks(base.schema_string, marks))
            actions = [self.metadata] + [a for a in actions if not isinstance(a, Metadata)]
        metrics = {**metrics, **self.dv_metrics}
        if self.records_changes:  # (as Delta counts the change data files of a commit)
            metrics["numAddedChangeFiles"] = len(self._cdc)
        metrics.setdefault("executionTimeMs", int((time.perf_counter() - self.started) * 1000))
        txn = Transaction(
            self.storage, self.snapshot, operation, parameters,
            read_predicate=self.may_match, user_metadata=self.user_metadata, operation_metrics=metrics,
        )
        try:
            return txn.commit(actions).version
        except DuplicateTransaction as d:
            self._discard(adds)
            self._discard_changes()
            return d.version
        except SymlinkManifestError:
            raise  # after the commit: its files are referenced
        except StorageUnavailableError:
            raise  # the store did not answer: the commit may have landed, so its files stay
        except LakelogError:
            self._discard(adds)  # nothing was committed: the new files are unreferenced
            self._discard_changes()
            raise

    @property
    def num_added_files(self) -> int:
        """New data files (files re-added with a new deletion vector are not new)."""
        if self._adds is None:
            raise RuntimeError("call finish() first")
        return len(self._adds) - self.deleter.readded

    @property
    def num_removed_files(self) -> int:
        """Files removed or rewritten (files that only got a new deletion vector stay)."""
        return len(self.removes) - self.deleter.readded

    @property
    def dv_metrics(self) -> dict[str, int]:
        """Delta's deletion-vector commit metrics (empty without deletion vectors)."""
        return dict(self.deleter.dv_metrics)

    def abort(self) -> None:
        """Delete the files written so far (unless a commit was attempted) and close the engine."""
        rewritten = self.deleter.abort()
        self._close_pool()
        if not self._committing:
            if self._writer is not None:
                self._writer.abort()
            self._discard(rewritten + self._written)
            if self._changes is not None:
                self._changes.abort()
            self._discard_changes()
        self.engine.close()

    def close(self) -> None:
        """Release the threads and the SQL engine (after ``commit``, or a worker's last write)."""
        self._close_pool()
        self.engine.close()

    def _discard(self, adds: list[AddFile]) -> None:
        self.deleter.discard()
        for a in adds:
            if a.deletion_vector is not None and decode_path(a.path) in self.removes:
                continue  # an existing file re-added with a new deletion vector: not ours to delete
            try:
                self.storage.delete(self.storage.join(a.relative_path))
            except (OSError, LakelogError):
                pass


    def _discard_changes(self) -> None:
        for c in self._cdc:
            try:
                self.storage.delete(self.storage.join(c.relative_path))
            except (OSError, LakelogError):
                pass
        self._cdc = []


def predicate_parameter(*texts: str | None) -> str:
    """Delta's ``operationParameters.predicate`` for DELETE/UPDATE/MERGE: a JSON list of SQL strings."""
    return orjson.dumps([t for t in texts if t is not None]).decode()


def run(op: RowLevelOperation, body) -> Any:
    """Run ``body(op)`` (pyarrow allocating from the system allocator: ``memory_pool``); on any error,
    delete the files it wrote and close the engine."""
    try:
        with system_allocator():
            out = body(op)
    except BaseException:
        op.abort()
        raise
    op.engine.close()
    return out


__all__ = [
    "FILE", "ROW", "POS", "internal_name", "Predicate", "compile_predicate", "select_positions", "CopyOnWrite", "MergeOnRead", "RowDeleter",
    "uses_deletion_vectors",
    "RowLevelOperation", "predicate_parameter", "run",
]

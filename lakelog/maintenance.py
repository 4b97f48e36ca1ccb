"""Table maintenance: vacuum, optimize (bin-packing compaction), restore and log cleanup.

Every operation works on the latest version of the table and commits through
``lakelog.transaction.Transaction``, so the usual conflict rules apply.

Vacuum rules (Delta's, see ``vacuum``):

* Only files under the table root are listed; ``_delta_log`` is never listed. Symbolic links are
  neither followed nor deleted, and a sub-directory that holds its own ``_delta_log`` (a nested
  table) is left alone.
* Names starting with ``_`` or ``.`` (files or directories, at any depth) are hidden and never
  deleted, except partition directories ``<partition column>=...``, ``_change_data`` and
  ``_delta_index`` (as Delta's ``isHiddenDirectory``); a directory named ``metadata`` is hidden too.
  lakelog's own temporary files live only in ``_delta_log``; a crashed lakelog writer leaves plain
  ``part-*.parquet`` files behind, which are orphans that vacuum deletes once they are old enough.
* A file is kept when the latest version references it, when a tombstone (``remove``) for it is
  younger than the retention (or has no ``deletionTimestamp``), or when a commit made after the
  retention cutoff removed it (so every version inside the retention window stays readable even if
  a checkpoint dropped its tombstones). Any other file is deleted when its last modification is older
  than the retention; a file whose modification time the store does not report is kept.
* The retention is ``delta.deletedFileRetentionDuration`` (default 7 days); a shorter one is refused
  unless ``enforce_retention_duration=False``.
* A run that deletes files commits ``VACUUM START`` before deleting and ``VACUUM END`` after
  (``commitInfo``-only entries, as Delta and delta-rs do); a dry run, or a run with nothing to delete,
  commits nothing. Directories are not removed (as delta-rs): removing an emptied partition directory
  could break a concurrent writer that just created it.

Log cleanup follows the Delta protocol's "Metadata Cleanup" (see ``cleanup_log``).
"""

from __future__ import annotations

import datetime as dt
import numbers
import os
import stat
from collections import defaultdict
from typing import Any, Callable

import orjson
import pyarrow.compute as pc

from .actions import Action, AddFile, CommitInfo, Metadata, RemoveFile, decode_path, dv_id, now_ms
from .errors import CommitConflictError, CorruptLogError, InvalidArgumentError, LakelogError, RetentionDurationError, SchemaMismatchError, VersionNotFoundError  # noqa: F401 (re-exported)
from .log_cleanup import HOUR_MS, cleanup_expired_logs, cleanup_log, expired_log_files, log_retention_ms  # noqa: F401 (re-exported)
from .properties import DEFAULT_LOG_RETENTION_MS  # noqa: F401 (re-exported)
from .conform import cast_batch
from .deletion_vectors import referenced_dv_file
from .schema import hive_escape, parse_partition_value
from .snapshot import Snapshot, commit_times
from .storage import Storage
from .transaction import Transaction
from .write import DataWriter, discard_files

DEFAULT_TARGET_FILE_SIZE = 100 * 1024 * 1024  # as delta-rs: delta.targetFileSize, else 100 MiB
_DELETE_CHUNK = 500  # files per bulk delete on object stores
_VACUUM_COMMIT_ATTEMPTS = 5

Progress = Callable[[int, int], None]  # (done, total)


# ---------------------------------------------------------------- commits with operationMetrics

class _MaintenanceTransaction(Transaction):
    """A Transaction whose commitInfo also carries ``operationMetrics`` (string values, as Spark writes them)."""

    def __init__(self, *args: Any, metrics: dict[str, Any] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.metrics = metrics or {}

    def _commit_info(self, actions: list[Action]) -> CommitInfo:
        info = super()._commit_info(actions)
        if self.metrics:
            info.info["operationMetrics"] = {k: _metric_str(v) for k, v in self.metrics.items()}
        return info


def _metric_str(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    return orjson.dumps(v).decode()


def _commit_info_only(storage: Storage, snapshot: Snapshot, operation: str, parameters: dict, metrics: dict) -> int:
    """Commit a commitInfo-only entry (VACUUM START/END). Such an entry conflicts with nothing it could
    invalidate, so a conflict from a concurrent metadata or protocol change is retried on the new
    version (which must still be writable)."""
    snap = snapshot
    for attempt in range(_VACUUM_COMMIT_ATTEMPTS):
        try:
            txn = _MaintenanceTransaction(storage, snap, operation, parameters, metrics=metrics)
            return txn.commit([]).version
        except CommitConflictError:
            if attempt == _VACUUM_COMMIT_ATTEMPTS - 1:
                raise
            snap = Snapshot.load(storage)
    raise AssertionError("unreachable")


# ---------------------------------------------------------------- vacuum

def _is_hidden(name: str, partition_columns: list[str]) -> bool:
    """Delta's ``isHiddenDirectory`` rule, applied to every path component."""
    if name == "metadata":
        return True
    if not name.startswith(("_", ".")):
        return False
    if name.startswith(("_delta_index", "_change_data")):
        return False
    return not any(name.startswith(f"{c}=") or name.startswith(f"{hive_escape(c)}=") for c in partition_columns)


def _walk_table_files(storage: Storage, partition_columns: list[str]) -> list[tuple[str, int, int]]:
    """(relative path, size, mtime ms) of every vacuum candidate under the table root (see module doc)."""
    root = storage.root.rstrip("/")
    out: list[tuple[str, int, int]] = []
    if storage.is_local:
        if not os.path.isdir(root):
            return out
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            keep = []
            for d in dirnames:
                full = os.path.join(dirpath, d)
                if dirpath == root and d == "_delta_log":
                    continue
                if _is_hidden(d, partition_columns) or os.path.islink(full):
                    continue
                if os.path.isdir(os.path.join(full, "_delta_log")):
                    continue  # a nested table: not ours
                keep.append(d)
            dirnames[:] = keep
            rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
            for f in filenames:
                if _is_hidden(f, partition_columns):
                    continue
                full = os.path.join(dirpath, f)
                try:
                    st = os.lstat(full)
                except FileNotFoundError:
                    continue
                if not stat.S_ISREG(st.st_mode):
                    continue  # symlinks, sockets, ...: never deleted
                rel = f if rel_dir == "." else f"{rel_dir}/{f}"
                out.append((rel, st.st_size, int(st.st_mtime * 1000)))
        return out

    from .storage import _mtime_ms

    storage.fs.invalidate_cache(root)
    try:
        found = storage.fs.find(root, detail=True, withdirs=False)
    except FileNotFoundError:
        return out
    prefix = root + "/"
    entries = []
    nested: set[str] = set()
    for name, info in found.items():
        name = name.rstrip("/")
        if not name.startswith(prefix) or info.get("type") == "directory" or info.get("islink"):
            continue  # never anything outside the root
        rel = name[len(prefix):]
        parts = rel.split("/")
        if "_delta_log" in parts[1:]:
            nested.add("/".join(parts[: parts.index("_delta_log", 1)]) + "/")
        entries.append((rel, parts, info))
    for rel, parts, info in entries:
        if parts[0] == "_delta_log" or any(_is_hidden(p, partition_columns) for p in parts):
            continue
        if any(rel.startswith(n) for n in nested):
            continue
        out.append((rel, int(info.get("size") or 0), _mtime_ms(info)))
    return out


def _files_in_retention(snapshot: Snapshot, cutoff_ms: int) -> set[str]:
    """Decoded paths that the latest version or any version inside the retention window references:
    data files and the deletion vector files their adds and removes name."""
    storage = snapshot.storage
    keep = set(snapshot.file_paths())
    for add in snapshot.files.values():
        if add.deletion_vector is not None and (dv := referenced_dv_file(storage, add)) is not None:
            keep.add(dv)
    for (path, _), r in snapshot.tombstones.items():
        if r.deletion_timestamp is None or r.deletion_timestamp >= cutoff_ms:
            keep.add(path)
            if (dv := referenced_dv_file(storage, r)) is not None:
                keep.add(dv)
    # Every file of a version inside the window that the latest version lacks was removed by a commit
    # made after the cutoff; those commits are read directly because checkpoints drop old tombstones.
    listing = snapshot.listing or snapshot.log.list()
    times = listing.commit_timestamps()
    recent = sorted(v for v, t in times.items() if t >= cutoff_ms and v <= snapshot.version)
    for actions in snapshot.log.read_commits(recent).values():
        for a in actions:
            if isinstance(a, (AddFile, RemoveFile)):
                keep.add(decode_path(a.path))
                if (dv := referenced_dv_file(storage, a)) is not None:
                    keep.add(dv)
    return keep


def _retention_ms(snapshot: Snapshot, retention_hours: float | None, enforce: bool) -> tuple[int, int]:
    default_ms = snapshot.properties.deleted_file_retention_ms
    if retention_hours is None:
        return default_ms, default_ms
    try:
        hours = float(retention_hours)
    except (TypeError, ValueError):
        raise ValueError(f"retention_hours must be a number of hours, not {retention_hours!r}") from None
    if hours < 0 or hours != hours:
        raise ValueError(f"retention_hours must be zero or positive, not {retention_hours!r}")
    ms = int(hours * HOUR_MS)
    if enforce and ms < default_ms:
        raise RetentionDurationError(
            f"a retention of {hours:g} hours is shorter than the table's delta.deletedFileRetentionDuration "
            f"({default_ms / HOUR_MS:g} hours): vacuum could delete files that running readers, writers or time "
            "travel still need. Use a longer retention, or pass enforce_retention_duration=False "
            "(CLI: --no-enforce-retention) if no such readers or writers exist."
        )
    return ms, default_ms


def vacuum(
    storage: Storage,
    *,
    retention_hours: float | None = None,
    dry_run: bool = True,
    enforce_retention_duration: bool = True,
    progress: Progress | None = None,
) -> list[str]:
    """Delete data files no version inside the retention window needs; return their relative paths.

    With ``dry_run`` (the default) nothing is deleted or committed: the list says what would be.
    """
    snapshot = Snapshot.load(storage)
    # Delta's vacuumProtocolCheck: the reader and writer protocol must be fully understood (an unknown
    # feature may reference files vacuum would delete). Vacuum writes no data, so constraints, generated
    # columns, change data feed and the like need no enforcing.
    snapshot.check_writer_protocol()
    retention_ms, default_ms = _retention_ms(snapshot, retention_hours, enforce_retention_duration)
    cutoff = now_ms() - retention_ms
    keep = _files_in_retention(snapshot, cutoff)
    doomed = sorted(
        (rel, size) for rel, size, mtime in _walk_table_files(storage, snapshot.partition_columns)
        if rel not in keep and 0 < mtime < cutoff
    )
    paths = [rel for rel, _ in doomed]
    if dry_run or not doomed:
        return paths
    storage.check_atomic_commits()
    params = {
        "retentionCheckEnabled": enforce_retention_duration,
        "defaultRetentionMillis": default_ms,
        "specifiedRetentionMillis": retention_ms,
    }
    if retention_hours is None:
        del params["specifiedRetentionMillis"]
    _commit_info_only(
        storage, snapshot, "VACUUM START", params,
        {"numFilesToDelete": len(doomed), "sizeOfDataToDelete": sum(s for _, s in doomed)},
    )
    deleted = 0
    status = "FAILED"
    try:
        deleted = _delete_files(storage, paths, progress)
        status = "COMPLETED"
    finally:
        try:
            _commit_info_only(
                storage, Snapshot.load(storage), "VACUUM END", {"status": status},
                {"numDeletedFiles": deleted, "numVacuumedDirectories": 0},
            )
        except Exception:
            if status == "COMPLETED":
                raise
    return paths


def _delete_files(storage: Storage, rels: list[str], progress: Progress | None) -> int:
    total, done = len(rels), 0
    if storage.is_local:
        for rel in rels:
            try:
                os.unlink(storage.join(rel))
            except FileNotFoundError:
                pass  # a concurrent vacuum got there first
            done += 1
            if progress and (done % 100 == 0 or done == total):
                progress(done, total)
        return done
    for i in range(0, total, _DELETE_CHUNK):
        chunk = [storage.join(r) for r in rels[i : i + _DELETE_CHUNK]]
        try:
            storage.fs.rm(chunk)
        except FileNotFoundError:
            for p in chunk:
                try:
                    storage.fs.rm_file(p)
                except FileNotFoundError:
                    pass
        done += len(chunk)
        if progress:
            progress(done, total)
    return done


# ---------------------------------------------------------------- optimize

def _file_stats(sizes: list[int]) -> dict[str, Any]:
    if not sizes:
        return {"avg": 0.0, "max": 0, "min": 0, "totalFiles": 0, "totalSize": 0}
    return {"avg": sum(sizes) / len(sizes), "max": max(sizes), "min": min(sizes), "totalFiles": len(sizes), "totalSize": sum(sizes)}


def _check_partition_filters(snapshot: Snapshot, filters: Any) -> None:
    if filters is None:
        return
    if isinstance(filters, pc.Expression):
        raise ValueError("optimize takes DNF filter tuples on partition columns, e.g. [('day', '=', '2024-01-01')]")
    flat = [filters] if filters and isinstance(filters[0], tuple) else filters
    for conj in flat:
        for term in conj:
            if len(term) != 3:
                raise ValueError(f"filter {term!r} is not a (column, op, value) tuple")
            if term[0] not in snapshot.partition_columns:
                raise SchemaMismatchError(
                    f"optimize filters may only name partition columns ({snapshot.partition_columns}); "
                    f"{term[0]!r} is not one"
                )


def target_file_size(snapshot: Snapshot, target_size: int | None = None) -> int:
    """The bin size: ``target_size``, else the table's ``delta.targetFileSize``, else 100 MiB."""
    if target_size is None:
        return snapshot.properties.target_file_size or DEFAULT_TARGET_FILE_SIZE
    if isinstance(target_size, bool) or not isinstance(target_size, numbers.Integral) or target_size <= 0:
        raise InvalidArgumentError(f"target_size must be a positive integer number of bytes, not {target_size!r}")
    return int(target_size)


def plan_bins(files: list[AddFile], target_size: int) -> tuple[list[list[AddFile]], int]:
    """Bin-pack files smaller than ``target_size`` per partition, in insertion order. A file with a
    deletion vector is always a candidate, and a bin holding one is kept even alone: compaction
    rewrites it without its deleted rows and drops the deletion vector.

    Returns (bins with at least two files or a deletion vector, number of candidate files considered).
    """
    by_partition: dict[tuple, list[AddFile]] = defaultdict(list)
    for a in files:
        if a.size < target_size or a.deletion_vector is not None:
            by_partition[tuple(sorted(a.partition_values.items(), key=lambda kv: kv[0]))].append(a)
    bins: list[list[AddFile]] = []
    for key in sorted(by_partition, key=repr):
        current: list[AddFile] = []
        size = 0
        for a in sorted(by_partition[key], key=lambda a: (a.modification_time, a.path)):
            if current and size + a.size > target_size:
                bins.append(current)
                current, size = [], 0
            current.append(a)
            size += a.size
        if current:
            bins.append(current)
    keep = [b for b in bins if len(b) > 1 or any(a.deletion_vector is not None for a in b)]
    return keep, sum(len(v) for v in by_partition.values())


def optimize(
    storage: Storage,
    *,
    target_size: int | None = None,
    filters: Any = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Compact small files per partition into files near ``target_size`` bytes, in one commit.

    The commit (operation ``OPTIMIZE``) removes the small files and adds the new ones, all with
    ``dataChange=false``: the data at the new version equals the data before, and older versions are
    untouched. A concurrent commit that removes one of the compacted files makes this one fail with
    ``CommitConflictError`` (the new files are then deleted); concurrent appends do not conflict.
    Returns metrics named as delta-rs names them, plus ``version`` (None when nothing was compacted).
    """
    from . import scan

    snapshot = Snapshot.load(storage)
    snapshot.check_writable()
    target = target_file_size(snapshot, target_size)
    _check_partition_filters(snapshot, filters)
    selected = [snapshot.files[p] for p in scan.pruned_files(snapshot, filters)]
    bins, considered = plan_bins(selected, target)
    metrics: dict[str, Any] = {
        "numFilesAdded": 0,
        "numFilesRemoved": 0,
        "filesAdded": _file_stats([]),
        "filesRemoved": _file_stats([]),
        "partitionsOptimized": len({tuple(sorted(b[0].partition_values.items())) for b in bins}),
        "numBatches": len(bins),
        "totalConsideredFiles": len(selected),
        "totalFilesSkipped": len(selected) - sum(len(b) for b in bins),
        "preserveInsertionOrder": True,
        "targetSize": target,
        "version": None,
    }
    if not bins:
        return metrics
    storage.check_atomic_commits()
    max_indexed = snapshot.properties.num_indexed_cols
    schema, parts = snapshot.schema, snapshot.partition_columns
    new_files: list[AddFile] = []
    committing = False
    try:
        for i, group in enumerate(bins):
            writer = DataWriter(storage, schema, parts, max_indexed, "part", column_mapping=snapshot.column_mapping)
            try:
                # read_batches drops the rows deletion vectors delete; the new files have no DV
                for batch in scan.read_batches(storage, schema, parts, group, mapping=snapshot.column_mapping):
                    writer.write(cast_batch(batch, schema))
                added = writer.finish()
            except BaseException:
                writer.abort()
                raise
            for a in added:
                a.data_change = False
            new_files.extend(added)
            if progress:
                progress(i + 1, len(bins))
        ts = now_ms()
        removed = [a for group in bins for a in group]
        actions: list[Action] = [a.remove(ts, data_change=False) for a in removed]
        actions.extend(new_files)
        metrics.update(
            numFilesAdded=len(new_files),
            numFilesRemoved=len(removed),
            filesAdded=_file_stats([a.size for a in new_files]),
            filesRemoved=_file_stats([a.size for a in removed]),
        )
        commit_metrics = {k: v for k, v in metrics.items() if k not in ("version", "targetSize")}
        params = {"targetSize": str(target), "predicate": orjson.dumps(filters or [], default=str).decode()}
        txn = _MaintenanceTransaction(storage, snapshot, "OPTIMIZE", params, metrics=commit_metrics)
        committing = True
        metrics["version"] = txn.commit(actions).version
    except BaseException as e:
        # Before the commit, or a LakelogError from it (conflict, protocol: raised before our commit file
        # was written), the new files are unreferenced. Other errors during the commit leave its outcome
        # unknown, so the files stay (vacuum deletes them if they turn out to be orphans).
        if not committing or isinstance(e, LakelogError):
            discard_files(storage, new_files)
        raise
    return metrics


# ---------------------------------------------------------------- restore

def _missing_files(storage: Storage, rels: list[str]) -> list[str]:
    """Which of ``rels`` do not exist, with one listing per directory."""
    by_dir: dict[str, list[str]] = defaultdict(list)
    for rel in rels:
        d, _, name = rel.rpartition("/")
        by_dir[d].append(name)
    missing = []
    for d, names in by_dir.items():
        full = storage.join(d) if d else storage.root
        try:
            storage.fs.invalidate_cache(full)
            present = {p.rstrip("/").rsplit("/", 1)[-1] for p in storage.fs.ls(full, detail=False)}
        except (FileNotFoundError, NotADirectoryError):
            present = set()
        missing.extend(f"{d}/{n}" if d else n for n in names if n not in present)
    return sorted(missing)


def restore(storage: Storage, *, version: int | None = None, timestamp: Any = None) -> dict[str, Any]:
    """Commit a new version (operation ``RESTORE``) whose data equals that of an older version.

    Files of the current version that the old one lacks are removed, files of the old version that the
    current one lacks are re-added (they must still exist: a vacuumed version cannot be restored,
    ``VersionNotFoundError`` names the missing files), and the old metadata (schema, partitioning,
    properties) comes back when it differs. The protocol is never downgraded. Restoring the current
    version commits nothing. Returns Spark's RESTORE metrics plus ``version`` and ``restoredVersion``.
    """
    current = Snapshot.load(storage)
    current.check_writable()
    if version is None and timestamp is None:
        raise ValueError("pass the version or timestamp to restore")
    if version is not None and int(version) > current.version:
        raise VersionNotFoundError(f"cannot restore version {version}: the latest version is {current.version}")
    old = Snapshot.load(storage, version=version, timestamp=timestamp, listing=current.listing)
    # Logical files are (path, deletion vector): a file whose DV changed since is removed and re-added.
    to_add = [a for p, a in old.files.items() if p not in current.files or dv_id(current.files[p]) != dv_id(a)]
    to_remove = [a for p, a in current.files.items() if p not in old.files or dv_id(old.files[p]) != dv_id(a)]
    metrics: dict[str, Any] = {
        "tableSizeAfterRestore": sum(a.size for a in old.files.values()),
        "numOfFilesAfterRestore": len(old.files),
        "numRemovedFiles": len(to_remove),
        "numRestoredFiles": len(to_add),
        "removedFilesSize": sum(a.size for a in to_remove),
        "restoredFilesSize": sum(a.size for a in to_add),
    }
    result = dict(metrics, restoredVersion=old.version, version=current.version)
    meta_changed = _metadata_differs(old.metadata, current.metadata)
    if old.version == current.version or (not to_add and not to_remove and not meta_changed):
        return result
    dv_files = {dv for a in to_add if (dv := referenced_dv_file(storage, a)) is not None}
    missing = _missing_files(storage, [a.relative_path for a in to_add] + sorted(dv_files))
    if missing:
        raise VersionNotFoundError(
            f"cannot restore version {old.version}: {len(missing)} of its data or deletion vector file(s) no longer exist "
            f"(removed by vacuum?), e.g. {missing[:3]}. Restore a later version."
        )
    ts = now_ms()
    actions: list[Action] = []
    if meta_changed:
        actions.append(old.metadata)
    actions.extend(a.remove(ts, data_change=True) for a in to_remove)
    actions.extend(
        AddFile(a.path, dict(a.partition_values), a.size, a.modification_time, True, a.stats, a.tags, a.deletion_vector) for a in to_add
    )
    params: dict[str, Any] = {"version": old.version}
    if timestamp is not None:
        params["timestamp"] = timestamp if isinstance(timestamp, str) else str(timestamp)
    txn = _MaintenanceTransaction(storage, current, "RESTORE", params, read_whole_table=True, metrics=metrics)
    result["version"] = txn.commit(actions).version
    return result


def _metadata_differs(a: Metadata, b: Metadata) -> bool:
    return (a.schema_string, list(a.partition_columns), dict(a.configuration), a.name, a.description) != (
        b.schema_string, list(b.partition_columns), dict(b.configuration), b.name, b.description
    )


def commit_time(snapshot: Snapshot, version: int) -> dt.datetime | None:
    ms = commit_times(snapshot).of([version]).get(version)
    return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)

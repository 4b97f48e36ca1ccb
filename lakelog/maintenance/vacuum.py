"""``vacuum``: delete files no version inside the retention window needs. Delta's rules:

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
"""

from __future__ import annotations

import os
import stat

from ..actions import AddFile, RemoveFile, decode_path, now_ms
from ..deletion_vectors import referenced_dv_file
from ..schema import hive_escape
from ..snapshot import Snapshot
from ..storage import Storage
from ..errors import InvalidArgumentError, RetentionDurationError
from ..log_cleanup import HOUR_MS
from .commits import Progress, commit_info_only


_DELETE_CHUNK = 500  # files per bulk delete on object stores


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

    from ..storage import _mtime_ms

    storage.fs.invalidate_cache(root)
    try:
        with storage.store.answering("list_files", root):
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
    listing = snapshot.log.whole(snapshot.listing)
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
        raise InvalidArgumentError(f"retention_hours must be a number of hours, not {retention_hours!r}") from None
    if hours < 0 or hours != hours:
        raise InvalidArgumentError(f"retention_hours must be zero or positive, not {retention_hours!r}")
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
    commit_info_only(
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
            commit_info_only(
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
            with storage.store.answering("delete", chunk[0]):
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

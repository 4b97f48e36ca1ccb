"""``restore``: make a past version the latest, by a commit that removes and re-adds files."""

from __future__ import annotations

from dataclasses import replace

import datetime as dt
from collections import defaultdict
from typing import Any

from ..actions import Action, AddFile, Metadata, dv_id, now_ms
from ..deletion_vectors import referenced_dv_file
from ..snapshot import Snapshot, commit_times
from ..versions import as_version
from ..storage import Storage
from ..errors import InvalidArgumentError, VersionNotFoundError
from ..writer_features.identity import with_merged_high_water_marks
from .commits import MaintenanceTransaction


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
    properties) comes back when it differs, except that identity columns keep the current version's
    high water marks where they are further on (as Delta: values issued since are never issued again).
    The protocol is never downgraded. Restoring the current version commits nothing. Returns Spark's
    RESTORE metrics plus ``version`` and ``restoredVersion``.
    """
    current = Snapshot.load(storage)
    current.check_writable()
    if version is None and timestamp is None:
        raise InvalidArgumentError("pass the version or timestamp to restore")
    if version is not None:
        version = as_version(version)
    if version is not None and version > current.version:
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
    # The identity values issued since stay issued: the restored schema keeps the newest high water marks.
    restored = replace(old.metadata, schema_string=with_merged_high_water_marks(old.metadata.schema_string, current.metadata.schema_string))
    meta_changed = _metadata_differs(restored, current.metadata)
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
        actions.append(restored)
    actions.extend(a.remove(ts, data_change=True) for a in to_remove)
    actions.extend(
        # (row tracking: a restored file keeps its baseRowId and defaultRowCommitVersion, so its rows get
        # back their row ids and commit versions, as the protocol asks)
        replace(a, partition_values=dict(a.partition_values), data_change=True) for a in to_add
    )
    params: dict[str, Any] = {"version": old.version}
    if timestamp is not None:
        params["timestamp"] = timestamp if isinstance(timestamp, str) else str(timestamp)
    txn = MaintenanceTransaction(storage, current, "RESTORE", params, read_whole_table=True, metrics=metrics)
    result["version"] = txn.commit(actions).version
    return result


def _metadata_differs(a: Metadata, b: Metadata) -> bool:
    return (a.schema_string, list(a.partition_columns), dict(a.configuration), a.name, a.description) != (
        b.schema_string, list(b.partition_columns), dict(b.configuration), b.name, b.description
    )


def commit_time(snapshot: Snapshot, version: int) -> dt.datetime | None:
    ms = commit_times(snapshot).of([version]).get(version)
    return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)

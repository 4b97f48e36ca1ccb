"""Bring a table's Iceberg metadata up to its latest Delta version (see ``lakelog.iceberg``)."""

from __future__ import annotations

import time

from ..actions import CommitInfo, Metadata
from ..errors import CorruptLogError, LakelogError, VersionNotFoundError
from ..log.delta_log import DeltaLog, commit_name
from ..table_features.properties import TableProperties
from ..log.snapshot import Snapshot
from ..storage import Storage, _mtime_ms
from .convert import Converter, table_uuid, version_change
from .files import table_location
from .metadata import IcebergMetadata, read_latest, write_next


class _Live:
    """The decoded paths live at a version, listed only if a commit needs to know (not for blind appends)."""

    def __init__(self, snapshot: Snapshot):
        self._snapshot = snapshot
        self._paths: set[str] | None = None

    def paths(self) -> set[str]:
        if self._paths is None:
            self._paths = set(self._snapshot.file_paths())
        return self._paths

    def __contains__(self, path: object) -> bool:
        return path in self.paths()


def _commit_time(storage: Storage, version: int, actions: list) -> int:
    info = next((a for a in actions if isinstance(a, CommitInfo)), None)
    ts = info.info.get("inCommitTimestamp") if info is not None else None
    if isinstance(ts, int) and not isinstance(ts, bool):
        return ts
    try:
        return _mtime_ms(storage.fs.info(storage.log_file(commit_name(version))))
    except (FileNotFoundError, KeyError, TypeError, ValueError):
        return int(time.time() * 1000)


def sync_table(storage: Storage, before: Snapshot | None, committed: dict[int, list] | None) -> int | None:
    location = table_location(storage)
    log = DeltaLog(storage)
    if committed:
        target = max(committed)
        latest: Snapshot | None = None
    else:
        latest = Snapshot.load(storage)
        target = latest.version
        before, committed = None, {}
    meta = read_latest(storage)
    metadata_now = _metadata_at(storage, before, committed, latest, target)
    uuid = table_uuid(metadata_now)
    done = meta.delta_version if meta is not None and meta.uuid == uuid else None
    if done is not None and done >= target:
        return done
    if meta is None or meta.uuid != uuid:  # none yet, or the Delta table was replaced: start a new history
        fresh = IcebergMetadata.new(uuid, location)
        fresh.n = meta.n if meta is not None else 0
        meta = fresh
    conv = Converter(storage, meta)
    start = _snapshot_at(storage, before, done) if done is not None else None
    commits: dict[int, list] | None = None
    if start is not None:
        missing = [v for v in range(done + 1, target + 1) if v not in committed]
        try:
            commits = {**(log.read_commits(missing) if missing else {}), **{v: committed[v] for v in committed if v > done}}
        except (FileNotFoundError, CorruptLogError):
            commits = None  # the commits since are gone (log cleanup): convert the latest version whole
    if commits is None or start is None:
        snap = latest if latest is not None and latest.version == target else _snapshot_at(storage, before, target, committed)
        if snap is None:
            snap = Snapshot.load(storage, version=target)
        if target in committed:
            actions = committed[target]
        else:
            try:
                actions = log.read_commits([target])[target]
            except (FileNotFoundError, CorruptLogError):
                actions = []  # a checkpoint-only version: its time is the file's or now
        ts = max(_commit_time(storage, target, actions), meta.last_timestamp_ms())
        conv.full(target, ts, snap.metadata, list(snap.files.values()))
    else:
        live = _Live(start)
        paths: set[str] | None = None
        metadata = start.metadata
        last_ts = meta.last_timestamp_ms()
        for v in range(done + 1, target + 1):
            ts = max(_commit_time(storage, v, commits[v]), last_ts)
            change = version_change(v, commits[v], metadata, live if paths is None else paths, ts)
            conv.incremental(change)
            metadata, last_ts = change.metadata, ts
            if v < target:  # the next version's re-adds need this version's live paths
                paths = set(live.paths()) if paths is None else paths
                paths -= change.removed
                paths.update(a.relative_path for a in change.adds)
    try:
        retention = TableProperties(metadata_now.configuration).log_retention_ms
    except LakelogError:
        retention = None  # unparseable (another writer's): keep every snapshot
    if retention is not None:
        meta.expire_before(meta.last_timestamp_ms() - retention)
    write_next(storage, meta, location, int(time.time() * 1000))
    return target


def _metadata_at(storage: Storage, before: Snapshot | None, committed: dict[int, list], latest: Snapshot | None, target: int) -> Metadata:
    if latest is not None:
        return latest.metadata
    for v in sorted(committed, reverse=True):
        m = next((a for a in committed[v] if isinstance(a, Metadata)), None)
        if m is not None:
            return m
    if before is not None:
        return before.metadata
    return Snapshot.load(storage, version=target).metadata


def _snapshot_at(storage: Storage, before: Snapshot | None, version: int, committed: dict[int, list] | None = None) -> Snapshot | None:
    """The Delta snapshot at ``version``: ``before`` (advanced through ``committed``) when it is that or
    leads there, else loaded; None when the version can no longer be loaded."""
    if before is not None:
        if before.version == version:
            return before
        steps = {v: committed[v] for v in range(before.version + 1, version + 1) if committed and v in committed}
        if len(steps) == version - before.version:
            return before.advance(steps)
    try:
        return Snapshot.load(storage, version=version)
    except VersionNotFoundError:
        return None

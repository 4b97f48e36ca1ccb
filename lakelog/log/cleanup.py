"""Log cleanup: the protocol's Metadata Cleanup, on request (``cleanup_log``) and after checkpoints.

Cleanup truncates the history at a checkpoint: every commit, checkpoint and CRC file of an older version
goes, commits first. On a table listing ``checkpointProtection`` with
``delta.requireCheckpointProtectionBeforeVersion`` P, a truncation that stops short of P (at a checkpoint
before P) happens only when lakelog supports the protocol of every version it removes; otherwise the
history stays whole until one cleanup can remove everything before P (Delta's Checkpoint Protection).

Commits call ``cleanup_expired_logs`` after writing a checkpoint, so this module sits below the
transaction; ``lakelog.maintenance`` re-exports it with the other maintenance operations.
"""

from __future__ import annotations

import re

from .checkpoint import checkpoint_sidecars, read_checkpoint_state
from ..errors import CorruptLogError, InvalidArgumentError, UnsupportedFeatureError
from ..actions import Protocol, now_ms
from ..table_features.registry import check_read, check_write, is_supported
from .delta_log import SIDECARS, CheckpointFiles, DeltaLog
from .snapshot import Snapshot
from ..storage import Storage

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS

_LOG_FILE_RE = re.compile(
    r"^(?P<v>\d{20})\.(?:json|crc|checkpoint\.parquet|checkpoint\.\d{10}\.\d{10}\.parquet|checkpoint\.[^.]+\.(?:json|parquet))$"
)
_COMPACTED_RE = re.compile(r"^(?P<v>\d{20})\.(\d{20})\.compacted\.json$")
_TEMP_RE = re.compile(r"^\..+\.[0-9a-f]{32}\.tmp$")  # lakelog's put-if-absent temp files
_COMMIT_RE = re.compile(r"^\d{20}\.json$")
PROTECTION = "checkpointProtection"


def log_retention_ms(snapshot: Snapshot) -> int:
    """``delta.logRetentionDuration`` in milliseconds (default 30 days)."""
    return snapshot.properties.log_retention_ms


def protected_before(snapshot: Snapshot) -> int:
    """``delta.requireCheckpointProtectionBeforeVersion`` when the protocol lists ``checkpointProtection``
    (the property means nothing without the feature, as in Delta), else 0."""
    if not is_supported(snapshot.protocol, PROTECTION):
        return 0
    return snapshot.properties.get("delta.requireCheckpointProtectionBeforeVersion")


def _supported(p: Protocol) -> bool:
    try:
        check_read(p)
        check_write(p)
    except UnsupportedFeatureError:
        return False
    return True


def _history_supported(storage: Storage, listing, first: int, end: int) -> bool:
    """Whether lakelog reads and writes the protocol of every version in ``[first, end)``: the protocol
    in force at ``first`` (from the newest usable checkpoint at or before it, or commit 0) and every
    protocol committed after it. Undeterminable counts as unsupported."""
    start = 0
    if first > 0:
        cps = [v for v in listing.checkpoints if v <= first]
        start = next((v for v in sorted(cps, reverse=True) if any(_usable_checkpoint(storage, cp) for cp in listing.checkpoints[v])), None)
        if start is None:
            return False
        cp = next(cp for cp in listing.checkpoints[start] if _usable_checkpoint(storage, cp))
        if not all(_supported(a) for a in read_checkpoint_state(storage, cp).actions if isinstance(a, Protocol)):
            return False
        start += 1
    versions = list(range(start, end))
    if any(v not in listing.commits for v in versions):
        return False
    commits = DeltaLog(storage).read_commits(versions)
    return all(_supported(a) for actions in commits.values() for a in actions if isinstance(a, Protocol))


def _usable_checkpoint(storage: Storage, cp: CheckpointFiles) -> bool:
    try:
        actions = read_checkpoint_state(storage, cp).actions
    except (CorruptLogError, FileNotFoundError):
        return False
    kinds = {type(a).__name__ for a in actions}
    return "Protocol" in kinds and "Metadata" in kinds


def expired_log_files(storage: Storage, cutoff_ms: int, max_version: int | None = None, protect_before: int = 0) -> list[str]:
    """Names in ``_delta_log`` that the protocol's Metadata Cleanup may delete for ``cutoff_ms``.

    ``protect_before``: the table's checkpoint protection version (``protected_before``); when the
    cutoff checkpoint is older and lakelog does not support every protocol before it, no commit,
    checkpoint, CRC or compacted file is expired. The cutoff commit is the newest commit not newer than the cutoff (and not above ``max_version``); the
    cutoff checkpoint is the newest usable checkpoint not newer than that commit. Everything from that
    checkpoint on is kept (its JSON commit included); commits, checkpoints and CRC files of older versions,
    compacted log files starting at or below it, and lakelog temp files older than the cutoff are expired.
    Temp files first, then the commits, then the rest, each oldest first: commits go before the
    checkpoints they lead to (as Checkpoint Protection requires).
    """
    log = DeltaLog(storage)
    listing = log.list()
    times = listing.commit_timestamps()
    candidates = [v for v, t in times.items() if t <= cutoff_ms and (max_version is None or v <= max_version)]
    if not candidates:
        return []
    cutoff_commit = max(candidates)
    checkpoint = next(
        (
            v
            for v in sorted((c for c in listing.checkpoints if c <= cutoff_commit), reverse=True)
            if any(_usable_checkpoint(storage, cp) for cp in listing.checkpoints[v])
        ),
        None,
    )
    if checkpoint is None:
        return []
    first = min([*listing.commits, *listing.checkpoints])
    kept_whole = checkpoint < protect_before and first < checkpoint and not _history_supported(storage, listing, first, checkpoint)
    if kept_whole:
        checkpoint = first  # the history before the protected version stays whole
    # Sidecars are kept while any checkpoint from the cutoff one on names them.
    referenced: set[str] = set()
    for v, cps in listing.checkpoints.items():
        if v >= checkpoint:
            for cp in cps:
                try:
                    referenced.update(checkpoint_sidecars(storage, cp))
                except (CorruptLogError, FileNotFoundError):
                    pass  # a damaged checkpoint protects nothing, but the cutoff one is usable
    expired: list[tuple[int, str]] = []
    for info in storage.list_log():
        m = _LOG_FILE_RE.match(info.name)
        if m and int(m.group("v")) < checkpoint:
            expired.append((int(m.group("v")), info.name))
            continue
        m = _COMPACTED_RE.match(info.name)
        if m and int(m.group("v")) <= checkpoint and not kept_whole:
            expired.append((int(m.group("v")), info.name))
            continue
        if _TEMP_RE.match(info.name) and 0 < info.mtime_ms < cutoff_ms:
            expired.append((-1, info.name))
    # The protocol keeps every sidecar less than a day old (as of midnight UTC), whatever the retention: a
    # writer may be between writing sidecars and creating the checkpoint file that names them.
    sidecar_cutoff = now_ms() - DAY_MS
    sidecar_cutoff = min(cutoff_ms, sidecar_cutoff - sidecar_cutoff % DAY_MS)
    for info in storage.list_dir(storage.log_file(SIDECARS)):
        if info.name not in referenced and 0 < info.mtime_ms < sidecar_cutoff:
            expired.append((checkpoint, f"{SIDECARS}/{info.name}"))  # after the checkpoints naming them
    expired.sort(key=lambda e: (e[0] >= 0, not _COMMIT_RE.match(e[1]), e[0], e[1]))
    return [name for _, name in expired]


def _delete_log_files(storage: Storage, names: list[str]) -> list[str]:
    deleted = []
    for name in names:
        try:
            storage.delete(storage.log_file(name))
        except FileNotFoundError:
            pass  # a concurrent cleanup got there first
        deleted.append(name)
    return deleted


def cleanup_log(storage: Storage, *, retention_hours: float | None = None, dry_run: bool = False) -> list[str]:
    """Delete log files older than the log retention, keeping the table readable; return their names.

    Delta's Metadata Cleanup: the cutoff is now minus ``delta.logRetentionDuration`` (default 30 days)
    truncated to midnight UTC, as Delta does; an explicit ``retention_hours`` is used exactly (no
    truncation). See ``expired_log_files`` for what is kept. Time travel to a version whose commits were
    removed then raises ``VersionNotFoundError``.
    """
    snapshot = Snapshot.load(storage)
    snapshot.check_writer_protocol()  # it deletes log files: only on a protocol and properties it can trust
    if retention_hours is None:
        cutoff = now_ms() - log_retention_ms(snapshot)
        cutoff -= cutoff % DAY_MS
    else:
        try:
            hours = float(retention_hours)
        except (TypeError, ValueError):
            raise InvalidArgumentError(f"retention_hours must be a number of hours, not {retention_hours!r}") from None
        if hours < 0 or hours != hours:
            raise InvalidArgumentError(f"retention_hours must be zero or positive, not {retention_hours!r}")
        cutoff = now_ms() - int(hours * HOUR_MS)
    names = expired_log_files(storage, cutoff, snapshot.version, protected_before(snapshot))
    if dry_run:
        return names
    return _delete_log_files(storage, names)


def cleanup_expired_logs(storage: Storage, snapshot: Snapshot) -> list[str]:
    """Automatic log cleanup after a checkpoint, when ``delta.enableExpiredLogCleanup`` is true (the default).

    Meant to be called right after ``write_checkpoint(snapshot)``: it keeps the newest usable checkpoint not
    newer than the cutoff commit (at most ``snapshot.version``) and everything after it. Returns the
    deleted names; does nothing when the property is false.
    """
    if not snapshot.properties.expired_log_cleanup:
        return []
    cutoff = now_ms() - log_retention_ms(snapshot)
    cutoff -= cutoff % DAY_MS
    return _delete_log_files(storage, expired_log_files(storage, cutoff, snapshot.version, protected_before(snapshot)))

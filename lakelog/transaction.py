"""The single commit path: optimistic concurrency with conflict checks, idempotent txns and retries.

A transaction read the table at ``read_version`` and tries to create commit ``read_version + 1`` with
put-if-absent. When another writer created that version first, the winning commit is read and checked:

* its ``commitInfo.txnId`` is ours: our earlier attempt landed and only its reply was lost -> done;
* it holds a ``txn`` for one of our app ids at or above our version: we are a duplicate -> nothing is
  committed (``DuplicateTransaction``, handled by the write path);
* it changed ``metaData``/``protocol``, removed a file we remove, or (for a transaction that read the
  table: overwrite, delete, replaceWhere) added or removed data it read -> ``CommitConflictError``;
* otherwise (blind appends, compaction beside appends) we rebase: retry at the next version.

Losing a race means another writer made progress, so retries continue (with jittered exponential
backoff) up to ``max_attempts`` lost races; transient store errors (S3 409 ConditionalRequestConflict,
timeouts) make the writer look at the same version again.
"""

from __future__ import annotations

import errno
import random
import time
import uuid
import warnings
from dataclasses import dataclass
from typing import Any, Callable

from . import __version__
from .log.checkpoint import write_checkpoint
from .actions import Action, AddFile, CommitInfo, Metadata, Protocol, RemoveFile, Txn, decode_path, now_ms
from .log.commit_times import ict_enabled, stamp
from .read.data_files import physical_rows
from .errors import CommitConflictError, CorruptLogError, InvalidArgumentError, InvalidArgumentTypeError, LakelogError, StorageUnavailableError, TableExistsError, TableNotFoundError, UnsupportedFeatureError
from .log.delta_log import DeltaLog, commit_name
from .log.cleanup import cleanup_expired_logs
from .table_features.properties import TableProperties
from .schema import collations
from . import catalog, iceberg
from .table_features import iceberg_compat, row_tracking, symlink_manifest
from .log.snapshot import Snapshot
from .storage import ConditionalWriteConflict, Storage

DEFAULT_MAX_ATTEMPTS = 10_000  # lost races (each one means another writer committed) before giving up
MAX_TRANSIENT_ERRORS = 10  # store errors with an unknown outcome (timeouts, 5xx) in one commit
# Backoff unit: the duration of one round (put + reading the winners), clamped to this range; the
# jitter window doubles per lost race up to BACKOFF_CAP_ROUNDS rounds.
BACKOFF_MIN_UNIT_S = 0.001
BACKOFF_MAX_UNIT_S = 0.05
BACKOFF_CAP_ROUNDS = 8


class DuplicateTransaction(Exception):
    """Internal: the (app_id, version) of this transaction is already committed at ``version``."""

    def __init__(self, version: int):
        self.version = version


@dataclass
class CommitResult:
    version: int
    attempts: int


def backoff_delay(losses: int, unit: float = BACKOFF_MIN_UNIT_S) -> float:
    """Full-jitter exponential backoff after ``losses`` lost races of one commit (none after the first).

    A loss already includes catching up to the latest version, so the first retry goes at once; later
    ones spread out so that writers racing for the same version do not collide again in step. ``unit``
    is how long one round takes on this store (about 1 ms on a local disk, tens of ms on S3): the
    window is ``unit * 2**(losses-2)``, at most ``BACKOFF_CAP_ROUNDS`` units.
    """
    if losses <= 1:
        return 0.0
    unit = min(max(unit, BACKOFF_MIN_UNIT_S), BACKOFF_MAX_UNIT_S)
    return random.uniform(0, unit * min(BACKOFF_CAP_ROUNDS, 2 ** min(losses - 2, 16)))


def _is_transient(e: OSError | StorageUnavailableError) -> bool:
    """A store error after which the write may or may not have happened, and a retry may succeed."""
    if isinstance(e, (ConditionalWriteConflict, TimeoutError, ConnectionError, StorageUnavailableError)):
        return True
    if isinstance(e, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)):
        return False
    return e.errno in (errno.EBUSY, errno.EAGAIN, errno.ETIMEDOUT, getattr(errno, "EREMOTEIO", errno.EIO)) or (
        "ConditionalRequestConflict" in str(e)
    )



def check_user_metadata(value: Any) -> str | None:
    """``user_metadata`` as a commit records it (Delta's ``commitInfo.userMetadata``: a string)."""
    if value is not None and not isinstance(value, str):
        raise InvalidArgumentTypeError(f"user_metadata must be a str (Delta's commitInfo.userMetadata), not {type(value).__name__}: {value!r}")
    return value

class Transaction:
    """Stage actions against a read snapshot and commit them as one atomic log entry.

    ``read_whole_table``: the transaction's outcome depends on all current data (overwrite), so a
    concurrent commit that changes data conflicts. ``read_predicate``: the transaction read only the
    files for which it returns True (delete or overwrite of some partitions), so only concurrent adds
    or removes of such files conflict. Blind appends set neither and never conflict on data.
    ``max_attempts``: lost races before giving up (default: the storage option
    ``lakelog.max_commit_attempts``, else ``DEFAULT_MAX_ATTEMPTS``).
    """

    def __init__(
        self,
        storage: Storage,
        snapshot: Snapshot | None,
        operation: str,
        parameters: dict[str, Any] | None = None,
        *,
        read_whole_table: bool = False,
        read_predicate: Callable[[AddFile], bool] | None = None,
        max_attempts: int | None = None,
        user_metadata: str | None = None,
        operation_metrics: dict[str, Any] | None = None,
    ):
        self.storage = storage
        self.log = DeltaLog(storage)
        self.snapshot = snapshot
        self.read_version = snapshot.version if snapshot is not None else -1
        self.operation = operation
        self.parameters = parameters or {}
        self.read_whole_table = read_whole_table
        self.read_predicate = read_predicate
        if max_attempts is None:
            max_attempts = getattr(storage, "max_commit_attempts", None) or DEFAULT_MAX_ATTEMPTS
        if max_attempts < 1:
            raise InvalidArgumentError(f"max_attempts must be at least 1, not {max_attempts}")
        self.max_attempts = max_attempts
        self.user_metadata = check_user_metadata(user_metadata)
        self.operation_metrics = operation_metrics  # commitInfo.operationMetrics (string values, as Spark writes them)
        self.txn_id = uuid.uuid4().hex

    @property
    def reads_data(self) -> bool:
        return self.read_whole_table or self.read_predicate is not None

    def _commit_info(self, actions: list[Action]) -> CommitInfo:
        blind = not self.reads_data and not any(isinstance(a, RemoveFile) for a in actions)
        info: dict[str, Any] = {
            "timestamp": now_ms(),
            "operation": self.operation,
            "operationParameters": {k: v if isinstance(v, str) else _json_param(v) for k, v in self.parameters.items()},
            "isBlindAppend": blind,
            "engineInfo": f"lakelog/{__version__}",
            "txnId": self.txn_id,
        }
        if self.read_version >= 0:
            info["readVersion"] = self.read_version
        if self.user_metadata is not None:
            info["userMetadata"] = self.user_metadata
        if self.operation_metrics:
            info["operationMetrics"] = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in self.operation_metrics.items()}
        return CommitInfo(info)

    def commit(self, actions: list[Action]) -> CommitResult:
        """Commit ``actions`` at the next free version; raise CommitConflictError on a real conflict.

        Raises ``DuplicateTransaction`` when a concurrent commit already holds this transaction's txn.
        """
        self.storage.check_atomic_commits()
        new_metadata = next((a for a in actions if isinstance(a, Metadata)), None)
        if self.snapshot is None and new_metadata is not None:
            TableProperties(new_metadata.configuration).check_writable()
        if new_metadata is not None:
            iceberg.check_enablement(new_metadata.configuration)
            catalog.check_properties(new_metadata.configuration)
        if self.snapshot is not None:
            if any(isinstance(a, (AddFile, RemoveFile, Metadata, Protocol)) for a in actions):
                self.snapshot.check_writable(new_metadata.configuration if new_metadata is not None else None)
            else:  # commitInfo/txn only (VACUUM START/END): writes no data, so nothing to enforce
                self.snapshot.check_writer_protocol()
            # removes first: a commit repairing an unparseable delta.appendOnly must not trip over it
            if any(isinstance(a, RemoveFile) and a.data_change for a in actions) and self.snapshot.append_only:
                raise UnsupportedFeatureError("table has delta.appendOnly=true: it cannot remove or overwrite data")
        iceberg_compat.check_commit(self.snapshot, actions)
        if any(isinstance(a, (AddFile, RemoveFile, Metadata, Protocol)) for a in actions):
            symlink_manifest.check_commit(self.snapshot, actions)
        metadata = new_metadata or (self.snapshot.metadata if self.snapshot is not None else None)
        # (decided before the commit: a bad LAKELOG_UNIFORM_ICEBERG_SYNC_CONVERT is refused while nothing is written)
        convert_now = metadata is not None and iceberg.enabled(metadata.configuration) and iceberg.converts_in_commit(
            self.snapshot.metadata.configuration if self.snapshot is not None else None)
        if metadata is not None:
            mapped = TableProperties(metadata.configuration).column_mapping_mode != "none"
            actions = collations.without_binary_bounds(actions, collations.stats_paths(metadata.schema_string, mapped))
        version = self.read_version + 1
        attempts = losses = transient = 0
        round_s = 0.0
        ict = self._ict_state(actions)
        # Row ids live only in the log: assigned per attempt, above the latest high water mark.
        row_ids = self._row_id_mark(actions)
        sent: dict[int, list[Action]] = {}  # what each attempt wrote (row ids and timestamps differ per version)
        while True:
            attempts += 1
            started = time.perf_counter()
            staged = actions if row_ids is None else row_tracking.assign(actions, version, row_ids, lambda a: physical_rows(self.storage, a))
            payload = [self._commit_info(staged), *staged]
            if ict is not None:
                payload = stamp(payload, version, self._previous_time(version), *ict)
            sent[version] = payload
            try:
                self.log.write_commit(version, payload)
                break
            except FileExistsError:
                pass
            except (OSError, StorageUnavailableError) as e:
                if not _is_transient(e):
                    raise
                # The store answered neither "created" nor "exists" (409 ConditionalRequestConflict,
                # timeout, 5xx): the object may exist now, possibly ours. Look at the same version again.
                if not isinstance(e, ConditionalWriteConflict):
                    transient += 1
                    if transient > MAX_TRANSIENT_ERRORS:
                        raise
            winners = self._winners_from(version)
            landed = None
            for v in sorted(winners):
                if self._is_ours(winners[v]):
                    landed = v  # an earlier attempt of ours landed but its acknowledgement was lost
                    break
                self._check_conflict(v, winners[v], actions)
                if row_ids is not None:
                    row_ids = max(row_ids, row_tracking.committed_mark(winners[v]) or -1)
            if landed is not None:
                version = landed
                payload = sent.get(landed, payload)
                break
            if winners:
                version = max(winners) + 1  # rebase: no winner touches what we read or remove
            losses += 1
            if losses >= self.max_attempts:
                raise CommitConflictError(
                    f"{self.operation} gave up after losing the race for a new version {losses} times "
                    f"(read version {self.read_version}, last tried {version}); the table is under heavy contention. "
                    "Retry later or raise the storage option lakelog.max_commit_attempts.",
                    read_version=self.read_version,
                    winning_version=version - 1 if version - 1 > self.read_version else None,
                )
            took = time.perf_counter() - started
            round_s = took if round_s == 0 else 0.7 * round_s + 0.3 * took
            delay = backoff_delay(losses, round_s)
            if delay:
                time.sleep(delay)
        self._maybe_checkpoint(version, payload)
        self._maybe_uniform(version, payload, convert_now)
        self._maybe_catalogs(version, payload)
        # Last: raises SymlinkManifestError (the commit stands) when the manifests could not be updated.
        symlink_manifest.after_commit(self.storage, self.snapshot, payload, version, lambda: self._snapshot_at(version, payload))
        return CommitResult(version, attempts)

    def _snapshot_at(self, version: int, actions: list[Action]) -> Snapshot:
        """The table as of our commit ``version`` (``actions``: what it wrote)."""
        if self.snapshot is not None and self.snapshot.version == version - 1:
            return self.snapshot.advance({version: actions})  # no race: no need to read the log again
        return Snapshot.load(self.storage, version=version)

    def _row_id_mark(self, actions: list[Action]) -> int | None:
        """The row id high water mark to assign above when the table assigns row ids after this commit
        (the ``rowTracking`` feature, not suspended); None when it does not."""
        snap = self.snapshot
        protocol = next((a for a in actions if isinstance(a, Protocol)), None) or (snap.protocol if snap else None)
        metadata = next((a for a in actions if isinstance(a, Metadata)), None) or (snap.metadata if snap else None)
        if not row_tracking.assigns(protocol, metadata):
            return None
        return row_tracking.high_water_mark(snap.domains) if snap is not None else -1

    def _ict_state(self, actions: list[Action]) -> tuple[bool, Protocol, Metadata] | None:
        """(enabled before this commit, protocol and metadata after it) when the table has in-commit
        timestamps after this commit; None when it does not (nothing to stamp)."""
        snap = self.snapshot
        protocol = next((a for a in actions if isinstance(a, Protocol)), None) or (snap.protocol if snap else None)
        metadata = next((a for a in actions if isinstance(a, Metadata)), None) or (snap.metadata if snap else None)
        if not ict_enabled(protocol, metadata):
            return None
        return (snap is not None and ict_enabled(snap.protocol, snap.metadata), protocol, metadata)

    def _previous_time(self, version: int) -> tuple[int, bool] | None:
        """The time of commit ``version - 1`` for in-commit timestamps: its own in-commit timestamp, or,
        before the feature was on, its file's modification time. None for version 0."""
        if version == 0:
            return None
        prev = version - 1
        try:
            actions = self.log.read_commit(prev)
        except CorruptLogError:
            actions = []  # unreadable or gone (log cleanup): its file time, if any, is all there is
        info = next((a for a in actions if isinstance(a, CommitInfo)), None)
        ts = info.info.get("inCommitTimestamp") if info is not None else None
        if isinstance(ts, int) and not isinstance(ts, bool):
            return ts, True
        mtime = self.log.list().commit_timestamps().get(prev)
        return (mtime, False) if mtime is not None else None

    def _winners_from(self, version: int) -> dict[int, list[Action]]:
        """Every commit from ``version`` up to the latest one (one listing, one bulk read); {} if none.

        A writer that is several versions behind catches up in one step instead of losing a race per version.
        """
        try:
            commits = self.log.list().commits
        except TableNotFoundError:  # a 409 on the very first commit: nothing is listed yet
            commits = {}
        if version not in commits:
            # Just created and not listed yet, or absent after a 409: read it directly if it exists.
            winner = self._read_winner(version)
            return {} if winner is None else {version: winner}
        last = version
        while last + 1 in commits:
            last += 1
        return self.log.read_commits(list(range(version, last + 1)))

    def _read_winner(self, version: int) -> list[Action] | None:
        """The actions of commit ``version``, or None when it does not exist (yet)."""
        path = self.storage.log_file(commit_name(version))
        try:
            return self.log.read_commit(version)
        except FileNotFoundError:
            return None
        except CorruptLogError:
            # read_commits reports a vanished file as corrupt; tell that apart from a torn commit
            if not self.storage.exists(path):
                return None
            raise

    def _is_ours(self, actions: list[Action]) -> bool:
        return any(isinstance(a, CommitInfo) and a.info.get("txnId") == self.txn_id for a in actions)

    def _reads(self, add: AddFile) -> bool:
        """Whether this transaction's outcome depends on the (added or removed) file ``add``."""
        if self.read_whole_table:
            return True
        return self.read_predicate is not None and bool(self.read_predicate(add))

    def _check_conflict(self, version: int, winner: list[Action], ours: list[Action]) -> None:
        def conflict(reason: str) -> CommitConflictError:
            return CommitConflictError(
                f"{self.operation} read version {self.read_version} but version {version} was committed concurrently "
                f"and {reason}; nothing was committed. Retry the operation on the new version.",
                read_version=self.read_version,
                winning_version=version,
            )

        our_txns = {a.app_id: a.version for a in ours if isinstance(a, Txn)}
        our_removes = {decode_path(a.path) for a in ours if isinstance(a, RemoveFile)}
        for a in winner:
            if isinstance(a, Txn) and a.app_id in our_txns and a.version >= our_txns[a.app_id]:
                raise DuplicateTransaction(version)
        for a in winner:
            if isinstance(a, (Metadata, Protocol)):
                if self.read_version < 0:
                    raise TableExistsError(
                        f"the table at {self.storage.uri!r} was created concurrently (version {version}); retry the write"
                    )
                raise conflict(f"changed the table's {'metadata' if isinstance(a, Metadata) else 'protocol'}")
            if isinstance(a, RemoveFile):
                path = decode_path(a.path)
                if path in our_removes:
                    raise conflict(f"removed {a.path!r}, which this transaction also removes")
                if a.data_change and self.reads_data:
                    read = self.snapshot.files.get(path) if self.snapshot is not None else None
                    if read is not None and self._reads(read):
                        raise conflict(f"removed {a.path!r}, which this {self.operation} read")
            elif isinstance(a, AddFile) and a.data_change and self.reads_data and self._reads(a):
                raise conflict(f"added {a.path!r}, which this {self.operation} would have read")

    def _maybe_uniform(self, version: int, actions: list[Action], now: bool) -> None:
        """UniForm: the Iceberg step of the new version (then the Iceberg catalog's), after the commit and
        never failing it: queued for the worker thread, or run here when ``now`` (``lakelog.iceberg``)."""
        metadata = next((a for a in actions if isinstance(a, Metadata)), None) or (self.snapshot and self.snapshot.metadata)
        if metadata is None or not iceberg.enabled(metadata.configuration):
            return
        before = self.snapshot if self.snapshot is not None and self.snapshot.version == version - 1 else None
        storage, configuration = self.storage, metadata.configuration
        iceberg.after_commit(storage, version, before=before, committed={version: actions} if before is not None or version == 0 else None, now=now,
                             then=lambda: catalog.after_iceberg_step(storage, version, configuration, stacklevel=7))

    def _maybe_catalogs(self, version: int, actions: list[Action]) -> None:
        """The catalog entries ``lakelog.catalog.sync`` lists, registered again after a commit that changed the
        table's metadata; never failing the commit (``lakelog.catalog.sync``)."""
        new = next((a for a in actions if isinstance(a, Metadata)), None)
        catalog.after_commit(self.storage, version, new or (self.snapshot and self.snapshot.metadata), new is not None)

    def _maybe_checkpoint(self, version: int, actions: list[Action]) -> None:
        metadata = next((a for a in actions if isinstance(a, Metadata)), None) or (self.snapshot and self.snapshot.metadata)
        try:
            interval = TableProperties(metadata.configuration if metadata else {}).checkpoint_interval
        except LakelogError as e:  # set by a concurrent writer of another engine: report, never fail the commit
            warnings.warn(f"lakelog: no checkpoint after version {version}: {e}", stacklevel=3)
            return
        if version == 0 or version % interval:
            return
        try:
            snap = self._snapshot_at(version, actions)
            write_checkpoint(snap)
            cleanup_expired_logs(self.storage, snap)
        except Exception as e:  # a checkpoint is an optimization: never fail the commit over it
            warnings.warn(f"lakelog: checkpoint after version {version} failed: {e!r}", stacklevel=3)


def _json_param(v: Any) -> str:
    import orjson

    return orjson.dumps(v, default=str).decode()

"""The single commit path: optimistic concurrency with conflict checks, idempotent txns and retries."""

from __future__ import annotations

import random
import time
import uuid
import warnings
from dataclasses import dataclass
from typing import Any

from . import __version__
from .checkpoint import write_checkpoint
from .actions import Action, AddFile, CommitInfo, Metadata, Protocol, RemoveFile, Txn, decode_path, now_ms
from .errors import CommitConflictError, TableExistsError, UnsupportedFeatureError
from .log import DeltaLog
from .snapshot import Snapshot, checkpoint_interval
from .storage import Storage

DEFAULT_MAX_ATTEMPTS = 10_000


class DuplicateTransaction(Exception):
    """Internal: the (app_id, version) of this transaction is already committed at ``version``."""

    def __init__(self, version: int):
        self.version = version


@dataclass
class CommitResult:
    version: int
    attempts: int


class Transaction:
    """Stage actions against a read snapshot and commit them as one atomic log entry.

    ``read_whole_table``: the transaction's outcome depends on all current data (overwrite), so a
    concurrent commit that changes data conflicts. Blind appends leave it False and never conflict.
    """

    def __init__(
        self,
        storage: Storage,
        snapshot: Snapshot | None,
        operation: str,
        parameters: dict[str, Any] | None = None,
        *,
        read_whole_table: bool = False,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        user_metadata: str | None = None,
    ):
        self.storage = storage
        self.log = DeltaLog(storage)
        self.snapshot = snapshot
        self.read_version = snapshot.version if snapshot is not None else -1
        self.operation = operation
        self.parameters = parameters or {}
        self.read_whole_table = read_whole_table
        self.max_attempts = max_attempts
        self.user_metadata = user_metadata
        self.txn_id = uuid.uuid4().hex

    def _commit_info(self, actions: list[Action]) -> CommitInfo:
        blind = not self.read_whole_table and not any(isinstance(a, RemoveFile) for a in actions)
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
        return CommitInfo(info)

    def commit(self, actions: list[Action]) -> CommitResult:
        """Commit ``actions`` at the next free version; raise CommitConflictError on a real conflict."""
        self.storage.check_atomic_commits()
        if self.snapshot is not None:
            self.snapshot.check_writable()
            if self.snapshot.append_only and any(isinstance(a, RemoveFile) and a.data_change for a in actions):
                raise UnsupportedFeatureError("table has delta.appendOnly=true: it cannot remove or overwrite data")
        payload = [self._commit_info(actions), *actions]
        version = self.read_version + 1
        for attempt in range(1, self.max_attempts + 1):
            try:
                self.log.write_commit(version, payload)
            except FileExistsError:
                winner = self.log.read_commit(version)
                if self._is_ours(winner):
                    break  # our write landed but its acknowledgement was lost
                self._check_conflict(version, winner, actions)
                version += 1
                if attempt > 2:
                    time.sleep(random.uniform(0, min(0.05, 0.0005 * 2 ** min(attempt, 7))))
                continue
            except OSError as e:
                # S3 answers a concurrent conditional PUT with 409 ConditionalRequestConflict: look again.
                if "ConditionalRequestConflict" in str(e) or "409" in str(e):
                    time.sleep(random.uniform(0.001, 0.02))
                    try:
                        if self._is_ours(self.log.read_commit(version)):
                            break
                    except FileNotFoundError:
                        pass
                    continue
                raise
            break
        else:
            raise CommitConflictError(
                f"gave up committing after {self.max_attempts} attempts under contention (read version {self.read_version})",
                read_version=self.read_version,
            )
        self._maybe_checkpoint(version, actions)
        return CommitResult(version, attempt)

    def _is_ours(self, actions: list[Action]) -> bool:
        return any(isinstance(a, CommitInfo) and a.info.get("txnId") == self.txn_id for a in actions)

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
                raise conflict("changed the table's metadata or protocol")
            if isinstance(a, RemoveFile) and decode_path(a.path) in our_removes:
                raise conflict(f"removed {a.path!r}, which this transaction also removes")
            if self.read_whole_table and isinstance(a, (AddFile, RemoveFile)) and a.data_change:
                raise conflict(f"changed data ({type(a).__name__} {a.path!r}) that this {self.operation} depends on")

    def _maybe_checkpoint(self, version: int, actions: list[Action]) -> None:
        metadata = next((a for a in actions if isinstance(a, Metadata)), None) or (self.snapshot and self.snapshot.metadata)
        if version == 0 or version % checkpoint_interval(metadata.configuration if metadata else {}):
            return
        try:
            write_checkpoint(Snapshot.load(self.storage, version=version))
        except Exception as e:  # a checkpoint is an optimization: never fail the commit over it
            warnings.warn(f"lakelog: checkpoint after version {version} failed: {e!r}", stacklevel=3)


def _json_param(v: Any) -> str:
    import orjson

    return orjson.dumps(v, default=str).decode()

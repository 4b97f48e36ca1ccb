"""Commits of maintenance operations: ``commitInfo`` with ``operationMetrics`` (string values, as Spark
writes them), and ``commitInfo``-only entries such as ``VACUUM START`` / ``VACUUM END``."""

from __future__ import annotations

from typing import Any, Callable

import orjson

from ..actions import Action, CommitInfo
from ..log.snapshot import Snapshot
from ..storage import Storage
from ..transaction import Transaction
from ..errors import CommitConflictError


_VACUUM_COMMIT_ATTEMPTS = 5
Progress = Callable[[int, int], None]  # (done, total)


class MaintenanceTransaction(Transaction):
    """A Transaction whose commitInfo also carries ``operationMetrics`` (string values, as Spark writes them)."""

    def __init__(self, *args: Any, metrics: dict[str, Any] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.metrics = metrics or {}

    def _commit_info(self, actions: list[Action]) -> CommitInfo:
        info = super()._commit_info(actions)
        if self.metrics:
            info.info["operationMetrics"] = {k: metric_str(v) for k, v in self.metrics.items()}
        return info


def metric_str(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    return orjson.dumps(v).decode()


def commit_info_only(storage: Storage, snapshot: Snapshot, operation: str, parameters: dict, metrics: dict) -> int:
    """Commit a commitInfo-only entry (VACUUM START/END). Such an entry conflicts with nothing it could
    invalidate, so a conflict from a concurrent metadata or protocol change is retried on the new
    version (which must still be writable)."""
    snap = snapshot
    for attempt in range(_VACUUM_COMMIT_ATTEMPTS):
        try:
            txn = MaintenanceTransaction(storage, snap, operation, parameters, metrics=metrics)
            return txn.commit([]).version
        except CommitConflictError:
            if attempt == _VACUUM_COMMIT_ATTEMPTS - 1:
                raise
            snap = Snapshot.load(storage)
    raise AssertionError("unreachable")

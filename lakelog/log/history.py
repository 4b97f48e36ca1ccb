"""Commit history: one entry per version, newest first, as Spark's ``DESCRIBE HISTORY`` shows it.

Read from the log listing and the JSON commits only (plus, to tell whether commits carry in-commit
timestamps, the newest protocol and metadata: from a version checksum file at or after the newest
checkpoint when no later commit holds them, else from that checkpoint's rows), so ``lakelog history``
needs no replay of the table's files, and no pyarrow unless only a checkpoint holds them.
"""

from __future__ import annotations

import datetime as dt
import numbers

from ..actions import CommitInfo
from .commit_times import CommitTimes, latest_protocol_and_metadata
from ..errors import InvalidArgumentError
from .delta_log import DeltaLog, LogListing
from ..storage import Storage


def check_limit(limit: object) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, numbers.Integral) or limit < 0):
        raise InvalidArgumentError(f"history(limit=...) takes a number of commits (an integer >= 0) or None, not {limit!r}")


def entries(log: DeltaLog, listing: LogListing, version: int, limit: int | None, times: CommitTimes) -> list[dict]:
    """The history of versions up to ``version`` (``listing`` covers the whole log), at most ``limit`` entries."""
    versions = sorted((v for v in listing.commits if v <= version), reverse=True)
    if limit is not None:
        versions = versions[: int(limit)]
    commits = log.read_commits(versions)
    when = times.of(versions, commits)
    out = []
    for v in versions:
        info = next((a.info for a in commits[v] if isinstance(a, CommitInfo)), {})
        entry = {
            "version": v,
            "timestamp": dt.datetime.fromtimestamp(when[v] / 1000, dt.timezone.utc),
            "operation": info.get("operation"),
            "operationParameters": params if isinstance(params := info.get("operationParameters"), dict) else {},
        }
        entry.update((k, val) for k, val in info.items() if k not in entry)
        out.append(entry)
    return out


def read_history(storage: Storage, limit: int | None = None) -> list[dict]:
    """The history of the table's latest version (see ``Table.history``) without loading the table's state:
    a table lakelog cannot read (an unsupported feature, a damaged checkpoint) still shows its commits."""
    check_limit(limit)
    log = DeltaLog(storage)
    listing = log.list()
    times = CommitTimes(log, listing, *latest_protocol_and_metadata(log, listing))
    return entries(log, listing, listing.latest_version, limit, times)

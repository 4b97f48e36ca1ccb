"""Commit times: when each version was committed, as time travel, history and streaming use it.

Without in-commit timestamps a version's time is its commit file's modification time, made strictly
increasing (``LogListing.commit_timestamps``). With them (the ``inCommitTimestamp`` writer feature and
``delta.enableInCommitTimestamps=true`` in the *latest* metadata), versions from the enablement version
on (``delta.inCommitTimestampEnablementVersion``; every version when the property is absent) take
``commitInfo.inCommitTimestamp`` from their commit file instead, and file times are ignored there. The
protocol makes the two ranges one increasing sequence (the enabling commit's timestamp is after the
previous commit file's time), so a search by timestamp is one bisection over the versions.

Writers stamp commits with ``stamp``: ``commitInfo`` first, ``inCommitTimestamp`` = max(now, previous
commit's time + 1), and, when a table with earlier commits turns the feature on, the enablement
version and timestamp in the same commit's metadata.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from ..actions import Action, CommitInfo, Metadata, Protocol, now_ms, stated_in_commit_timestamp
from ..errors import CorruptLogError, VersionNotFoundError
from .checksum import newest_checksum
from ..table_features.registry import ict_enabled
from .delta_log import DeltaLog, LogListing
from ..table_features.properties import TableProperties

ENABLEMENT_VERSION = "delta.inCommitTimestampEnablementVersion"
ENABLEMENT_TIMESTAMP = "delta.inCommitTimestampEnablementTimestamp"


def latest_protocol_and_metadata(log: DeltaLog, listing: LogListing) -> tuple[Protocol | None, Metadata | None]:
    """The latest protocol and metadata, cheaply: the commits after the newest checkpoint when they hold
    both, or a version checksum file at or after it with the commits after that (no checkpoint is read:
    history then needs no Parquet reader), else the non-file actions of the
    newest usable checkpoint (no add or remove rows, no sidecars) and the commits after it. (None, None)
    when the log cannot tell (commits missing and no usable checkpoint): callers then use file times."""
    newest = max(listing.checkpoints, default=-1)
    tail = _commits_after(log, listing, newest) if newest >= 0 else None
    if tail is not None:
        protocol, metadata = latest_of(tail, None, None)
        if protocol is not None and metadata is not None:
            return protocol, metadata
        # a version checksum file at or after the checkpoint holds them too (lakelog.log.checksum)
        checksum = newest_checksum(log.storage, listing.checksums, newest)
        if checksum is not None:
            return latest_of({v: a for v, a in tail.items() if v > checksum.version}, checksum.protocol, checksum.metadata)
    start, protocol, metadata = -1, None, None
    for v in sorted(listing.checkpoints, reverse=True):
        from .checkpoint import read_checkpoint_state  # a Parquet reader: only where a checkpoint is read

        for cp in listing.checkpoints[v]:
            try:
                actions = read_checkpoint_state(log.storage, cp, file_actions=False).actions
            except (CorruptLogError, FileNotFoundError):
                continue
            protocol = next((a for a in actions if type(a) is Protocol), None)
            metadata = next((a for a in actions if type(a) is Metadata), None)
            if protocol is not None and metadata is not None:
                start = v
                break
        if start >= 0:
            break
    commits = tail if start == newest and tail is not None else _commits_after(log, listing, start)
    if commits is None:
        return None, None
    return latest_of(commits, protocol, metadata)


def _commits_after(log: DeltaLog, listing: LogListing, start: int) -> dict[int, list[Action]] | None:
    """The commits after version ``start`` up to the latest; None when one is missing or unreadable."""
    needed = [v for v in listing.commits if start < v <= listing.latest_version]
    if len(needed) != listing.latest_version - start:
        return None
    try:
        return log.read_commits(sorted(needed))
    except CorruptLogError:
        return None


def latest_of(commits: dict[int, list[Action]], protocol: Protocol | None, metadata: Metadata | None) -> tuple[Protocol | None, Metadata | None]:
    """The protocol and metadata after ``commits`` (version -> actions), starting from those given."""
    for v in sorted(commits):
        for a in commits[v]:
            if type(a) is Protocol:
                protocol = a
            elif type(a) is Metadata:
                metadata = a
    return protocol, metadata


def in_commit_timestamp(actions: list[Action], version: int) -> int:
    """``commitInfo.inCommitTimestamp`` of a commit that must have one; CorruptLogError otherwise."""
    ts = stated_in_commit_timestamp(actions)
    if ts is not None:
        return ts
    raise CorruptLogError(
        f"commit {version} has no commitInfo.inCommitTimestamp, but the table has in-commit timestamps from "
        "that version on; the commit was written by an engine that ignored the inCommitTimestamp feature"
    )


class CommitTimes:
    """The commit time (ms since the epoch) of the versions of ``listing`` that have a commit file, with
    in-commit timestamps when ``protocol``/``metadata`` (the latest ones) enable them. Commits are read
    only for the versions asked about (cached)."""

    def __init__(self, log: DeltaLog, listing: LogListing, protocol: Protocol | None, metadata: Metadata | None):
        self.log, self.listing = log, listing
        self.file_times = listing.commit_timestamps()
        self.versions = sorted(self.file_times)
        self.ict_from: int | None = None  # first version whose time is its in-commit timestamp
        if ict_enabled(protocol, metadata):
            props = TableProperties(metadata.configuration)
            enablement = props.ict_enablement
            self.ict_from = enablement[0] if enablement is not None else 0
        self._ict: dict[int, int] = {}

    def uses_ict(self, version: int) -> bool:
        return self.ict_from is not None and version >= self.ict_from

    def of(self, versions, commits: dict[int, list[Action]] | None = None) -> dict[int, int]:
        """Times of ``versions`` (those with a commit file); ``commits``: parsed commits already at hand."""
        wanted = [v for v in versions if v in self.file_times]
        missing = [v for v in wanted if self.uses_ict(v) and v not in self._ict and not (commits and v in commits)]
        read = self.log.read_commits(missing) if missing else {}
        out = {}
        for v in wanted:
            if not self.uses_ict(v):
                out[v] = self.file_times[v]
            elif v in self._ict:
                out[v] = self._ict[v]
            else:
                actions = commits[v] if commits and v in commits else read[v]
                out[v] = self._ict[v] = in_commit_timestamp(actions, v)
        return out

    def time(self, version: int) -> int:
        return self.of([version])[version]

    def _bisect(self, ts: int) -> int:
        """Index of the first version (in ``self.versions``) whose time is after ``ts``."""
        lo, hi = 0, len(self.versions)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.time(self.versions[mid]) <= ts:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def latest_at_or_before(self, ts: int) -> int:
        """The latest version committed at or before ``ts``; VersionNotFoundError when ``ts`` is before
        the earliest available commit."""
        if not self.versions:
            raise VersionNotFoundError("the table has no commit files with timestamps; time travel by timestamp is impossible")
        i = self._bisect(ts)
        if i == 0:
            first_v = self.versions[0]
            first = _iso(self.time(first_v))
            raise VersionNotFoundError(
                f"timestamp {_iso(ts)} is before the earliest available commit (version {first_v} at {first}); use a later timestamp"
            )
        return self.versions[i - 1]

    def first_at_or_after(self, ts: int) -> int | None:
        """The first version committed at or after ``ts``; None when every commit is before it."""
        i = self._bisect(ts - 1)
        return self.versions[i] if i < len(self.versions) else None


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat()


def stamp(
    actions: list[Action],
    version: int,
    previous: tuple[int, bool] | None,
    was_enabled: bool,
    protocol: Protocol | None,
    metadata: Metadata | None,
) -> list[Action]:
    """The actions of the commit of ``version`` with in-commit timestamps applied, when the table has them
    after this commit (``protocol``/``metadata``: its state after it). ``previous``: the previous commit's
    (time, whether it is an in-commit timestamp), None for version 0; ``was_enabled``: the table had
    in-commit timestamps before this commit. ``actions[0]`` is the commitInfo. Unchanged otherwise."""
    if not ict_enabled(protocol, metadata):
        return actions
    ts = now_ms()
    if previous is not None:
        ts = max(ts, previous[0] + 1)
    info = actions[0]
    assert type(info) is CommitInfo
    out: list[Action] = [CommitInfo({**info.info, "timestamp": ts, "inCommitTimestamp": ts})]
    rest = list(actions[1:])
    if not was_enabled and version > 0:
        # The enabling commit of a table with earlier commits records where in-commit timestamps start.
        config = {**metadata.configuration, ENABLEMENT_VERSION: str(version), ENABLEMENT_TIMESTAMP: str(ts)}
        new_md = dataclasses.replace(metadata, configuration=config)
        idx = next((i for i, a in enumerate(rest) if type(a) is Metadata), None)
        if idx is None:
            rest.insert(0, new_md)
        else:
            rest[idx] = new_md
    return out + rest

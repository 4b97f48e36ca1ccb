"""Snapshot reconstruction: newest usable checkpoint + later JSON commits, at a version or a timestamp."""

from __future__ import annotations

import datetime as dt
import warnings
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from .actions import AddFile, CommitInfo, Metadata, Protocol, RemoveFile, Txn, decode_path
from .checkpoint import CheckpointState, read_checkpoint_state
from .errors import CorruptLogError, UnsupportedFeatureError, VersionNotFoundError
from .log import DeltaLog, LogListing, checkpoint_name
from .properties import TableProperties
from .schema import schema_from_string
from .storage import Storage

# Reader features whose semantics lakelog implements (others are refused).
SUPPORTED_READER_FEATURES = {"timestampNtz", "vacuumProtocolCheck"}
# Writer features lakelog can honour, provided the 'in use' checks in check_writable pass.
SUPPORTED_WRITER_FEATURES = {
    "appendOnly",
    "invariants",
    "timestampNtz",
    "checkConstraints",
    "changeDataFeed",
    "generatedColumns",
    "columnMapping",
    "identityColumns",
    "vacuumProtocolCheck",
}


def to_epoch_ms(ts: Any) -> int:
    """datetime / ISO string / pandas Timestamp -> ms since epoch (naive means UTC)."""
    if isinstance(ts, str):
        ts = dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    if isinstance(ts, dt.datetime):
        if ts.tzinfo is None:
            ts = ts.replace(tzinfo=dt.timezone.utc)
        return int(ts.timestamp() * 1000)
    if isinstance(ts, dt.date):
        return int(dt.datetime(ts.year, ts.month, ts.day, tzinfo=dt.timezone.utc).timestamp() * 1000)
    raise TypeError(f"timestamp must be a datetime or an ISO-8601 string, not {type(ts).__name__}")


@dataclass
class Snapshot:
    """The table state at one version."""

    storage: Storage
    log: DeltaLog
    version: int
    protocol: Protocol
    metadata: Metadata
    file_set: "FileSet"
    tombstones: dict[str, RemoveFile] = field(default_factory=dict)
    txns: dict[str, Txn] = field(default_factory=dict)
    listing: LogListing | None = None
    _schema: pa.Schema | None = None

    # ------------------------------------------------------------ derived
    @property
    def files(self) -> dict[str, AddFile]:
        """Decoded relative path -> ``add`` of every live file (built on first use; treat as read-only)."""
        return self.file_set.as_dict()

    def file_paths(self) -> list[str]:
        """Decoded relative paths of the live files (cheap: no ``AddFile`` objects are built)."""
        return self.file_set.paths()

    @property
    def num_files(self) -> int:
        return len(self.file_set)

    @property
    def schema(self) -> pa.Schema:
        if self._schema is None:
            self._schema = schema_from_string(self.metadata.schema_string)
        return self._schema

    @property
    def partition_columns(self) -> list[str]:
        return list(self.metadata.partition_columns)

    @property
    def configuration(self) -> dict[str, str]:
        return self.metadata.configuration

    @property
    def properties(self) -> TableProperties:
        """The table properties, typed (see ``lakelog.properties``)."""
        return TableProperties(self.metadata.configuration)

    # ------------------------------------------------------------ protocol checks
    def check_readable(self) -> None:
        p = self.protocol
        if p.min_reader_version > 3:
            raise UnsupportedFeatureError(f"table needs reader version {p.min_reader_version}; lakelog reads versions 1 to 3")
        if p.min_reader_version == 3:
            unknown = sorted(set(p.reader_features or []) - SUPPORTED_READER_FEATURES)
            if unknown:
                raise UnsupportedFeatureError(
                    f"table uses reader feature(s) {unknown} that lakelog does not implement "
                    f"(supported: {sorted(SUPPORTED_READER_FEATURES)}); read it with an engine that supports them"
                )
        mode = self.properties.column_mapping_mode
        if mode != "none":
            raise UnsupportedFeatureError(f"table uses column mapping (mode {mode!r}), which lakelog does not read")
        self.schema  # parse now: a damaged schema fails when the table is opened, not on first read

    def check_writable(self, configuration: dict[str, str] | None = None) -> None:
        """Raise unless lakelog can write this table: its protocol, and its properties (``configuration``
        when given: the properties the commit being made leaves the table with) must be ones it honours."""
        self.check_readable()
        p = self.protocol
        if p.min_writer_version > 7:
            raise UnsupportedFeatureError(f"table needs writer version {p.min_writer_version}; lakelog writes versions up to 7")
        if p.min_writer_version == 7:
            unknown = sorted(set(p.writer_features or []) - SUPPORTED_WRITER_FEATURES)
            if unknown:
                raise UnsupportedFeatureError(f"table uses writer feature(s) {unknown} that lakelog cannot honour; write it with an engine that supports them")
        props = self.properties if configuration is None else TableProperties(configuration)
        props.check_writable()
        in_use = props.features_in_use()
        if '"delta.generationExpression"' in self.metadata.schema_string:
            in_use.append("generated columns")
        if '"delta.identity.' in self.metadata.schema_string:
            in_use.append("identity columns")
        if '"delta.invariants"' in self.metadata.schema_string:
            in_use.append("column invariants")
        if in_use:
            raise UnsupportedFeatureError(f"table uses {', '.join(in_use)}, which lakelog cannot honour on write")

    @property
    def append_only(self) -> bool:
        return self.properties.append_only

    # ------------------------------------------------------------ loading
    @classmethod
    def load(
        cls,
        storage: Storage,
        version: int | None = None,
        timestamp: Any = None,
        listing: LogListing | None = None,
    ) -> "Snapshot":
        log = DeltaLog(storage)
        listing = listing or log.list()
        latest = listing.latest_version
        if timestamp is not None:
            if version is not None:
                raise ValueError("pass version or timestamp, not both")
            version = version_at_timestamp(listing, timestamp)
        target = latest if version is None else int(version)
        if target < 0 or target > latest:
            raise VersionNotFoundError(f"version {target} does not exist; the table's versions are up to {latest}")

        state = _Replay()
        start = -1
        skipped: list[tuple[int, Exception]] = []  # unusable checkpoints, newest first
        for cp in sorted((v for v in listing.checkpoints if v <= target), reverse=True):
            try:
                probe = _Replay.from_checkpoint(read_checkpoint_state(storage, cp))
                if probe.protocol is None or probe.metadata is None:
                    raise CorruptLogError(f"checkpoint {cp} has no protocol or metaData")
            except (CorruptLogError, FileNotFoundError) as e:
                # Documented fallback: an older checkpoint, or JSON replay, when those files exist.
                warnings.warn(f"lakelog: skipping unusable checkpoint at version {cp}: {e}", stacklevel=2)
                skipped.append((cp, e))
                continue
            state, start = probe, cp
            break

        needed = list(range(start + 1, target + 1))
        missing = [v for v in needed if v not in listing.commits]
        if missing:
            covering = [(cp, e) for cp, e in skipped if cp >= missing[-1]]
            if covering:
                # Only an unusable checkpoint covered the missing commits: no fallback exists.
                cp, err = covering[0]
                error_type = type(err) if isinstance(err, CorruptLogError) else CorruptLogError
                raise error_type(
                    f"version {target} cannot be reconstructed: checkpoint {checkpoint_name(cp)} is unusable ({err}) "
                    f"and commit file(s) for version(s) {missing[:5]} it covers are gone, so there is nothing to fall "
                    "back to. Restore the checkpoint or those commits from a backup."
                )
            earliest = min(listing.commits) if listing.commits else None
            if start == -1 and missing[0] == 0 and (earliest is None or all(v < earliest for v in missing)):
                raise VersionNotFoundError(
                    f"version {target} cannot be reconstructed: commits before version {earliest} were removed and no "
                    "checkpoint at or before it is usable. Read a later version."
                )
            raise CorruptLogError(
                f"the log has a gap: commit file(s) for version(s) {missing[:5]} are missing between "
                f"{start + 1} and {target}; the table cannot be read safely. Restore the missing files from a backup."
            )
        commits = log.read_commits(needed)
        for v in needed:
            state.apply(commits[v])

        if state.protocol is None:
            raise CorruptLogError(f"no protocol action found in the log up to version {target}; the table is incomplete")
        if state.metadata is None:
            raise CorruptLogError(f"no metaData action found in the log up to version {target}; the table is incomplete")
        snap = cls(storage, log, target, state.protocol, state.metadata, state.file_set, state.tombstones, state.txns, listing)
        snap.check_readable()
        return snap

    def updated(self) -> "Snapshot":
        """The latest snapshot, reading only the commits added since this one when possible."""
        listing = self.log.list()
        latest = listing.latest_version
        if latest == self.version:
            self.listing = listing
            return self
        newer = list(range(self.version + 1, latest + 1))
        if latest < self.version or not all(v in listing.commits for v in newer):
            return Snapshot.load(self.storage, listing=listing)
        snap = self.advance(self.log.read_commits(newer))
        snap.listing = listing
        return snap

    def advance(self, new_actions: dict[int, list]) -> "Snapshot":
        """A new snapshot: this one plus the given later commits (contiguous, in order)."""
        state = _Replay(self.file_set.copy())
        state.protocol, state.metadata = self.protocol, self.metadata
        state.tombstones, state.txns = dict(self.tombstones), dict(self.txns)
        version = self.version
        for v in sorted(new_actions):
            if v != version + 1:
                raise CorruptLogError(f"cannot advance snapshot {self.version} by non-contiguous version {v}")
            state.apply(new_actions[v])
            version = v
        snap = Snapshot(self.storage, self.log, version, state.protocol, state.metadata, state.file_set, state.tombstones, state.txns, None)
        snap.check_readable()
        return snap


class FileSet:
    """The live files of a snapshot: the add rows of the checkpoint it started from, kept as Arrow
    columns, plus the changes of the JSON commits after it (path -> add, or None when removed).

    Listing paths never builds per-file objects; ``as_dict`` builds them once, when a caller needs them.
    """

    __slots__ = ("base", "changes", "_dict")

    def __init__(self, base: CheckpointState | None = None, changes: dict[str, AddFile | None] | None = None) -> None:
        self.base = base
        self.changes: dict[str, AddFile | None] = {} if changes is None else changes
        self._dict: dict[str, AddFile] | None = None

    def copy(self) -> "FileSet":
        return FileSet(self.base, dict(self.changes))

    def add(self, path: str, add: AddFile) -> None:
        self.changes[path] = add
        self._dict = None

    def remove(self, path: str) -> None:
        if self.base is None:
            self.changes.pop(path, None)
        else:
            self.changes[path] = None  # the path may be a checkpoint row
        self._dict = None

    def paths(self) -> list[str]:
        base = self.base.paths if self.base is not None else []
        changes = self.changes
        if not changes:
            return list(base)
        out = [p for p in base if p not in changes]
        out.extend(p for p, a in changes.items() if a is not None)
        return out

    def __len__(self) -> int:
        if not self.changes:
            return len(self.base.paths) if self.base is not None else 0
        return len(self.paths())

    def as_dict(self) -> dict[str, AddFile]:
        if self._dict is None:
            out: dict[str, AddFile] = {}
            if self.base is not None:
                changes = self.changes
                out = {p: a for p, a in zip(self.base.paths, self.base.add_actions()) if p not in changes}
            out.update((p, a) for p, a in self.changes.items() if a is not None)
            self._dict = out
        return self._dict

    def base_rows_kept(self) -> pa.StructArray | None:
        """The checkpoint add rows still live (for writing the next checkpoint without Python objects)."""
        if self.base is None:
            return None
        if not self.changes:
            return self.base.adds
        changes = self.changes
        return self.base.adds.filter(pa.array([p not in changes for p in self.base.paths], pa.bool_()))

    def changed_adds(self) -> list[AddFile]:
        return [a for a in self.changes.values() if a is not None]


class _Replay:
    """Action reconciliation: latest protocol/metaData win, latest action per path wins, latest txn per appId."""

    __slots__ = ("protocol", "metadata", "file_set", "tombstones", "txns")

    def __init__(self, file_set: FileSet | None = None) -> None:
        self.protocol: Protocol | None = None
        self.metadata: Metadata | None = None
        self.file_set = FileSet() if file_set is None else file_set
        self.tombstones: dict[str, RemoveFile] = {}
        self.txns: dict[str, Txn] = {}

    @classmethod
    def from_checkpoint(cls, cp: CheckpointState) -> "_Replay":
        """The state a checkpoint describes. Its removes go to the tombstones only, so the file set's
        changes stay empty (they would otherwise name every tombstone)."""
        tombstones = {decode_path(a.path): a for a in cp.actions if type(a) is RemoveFile}
        if tombstones and not tombstones.keys().isdisjoint(cp.paths):
            cp = cp.without(tombstones)  # a path both added and removed: the remove wins, as in replay
        state = cls(FileSet(cp))
        state.apply([a for a in cp.actions if type(a) is not RemoveFile])
        state.tombstones = tombstones
        return state

    @property
    def files(self) -> dict[str, AddFile]:
        return self.file_set.as_dict()

    def apply(self, actions: list) -> None:
        file_set, tombstones = self.file_set, self.tombstones
        for a in actions:
            t = type(a)
            if t is AddFile:
                key = decode_path(a.path)
                file_set.add(key, a)
                tombstones.pop(key, None)
            elif t is RemoveFile:
                key = decode_path(a.path)
                file_set.remove(key)
                tombstones[key] = a
            elif t is Metadata:
                self.metadata = a
            elif t is Protocol:
                self.protocol = a
            elif t is Txn:
                self.txns[a.app_id] = a
            elif t is CommitInfo:
                pass


def version_at_timestamp(listing: LogListing, timestamp: Any) -> int:
    """The latest version committed at or before ``timestamp``."""
    ts = to_epoch_ms(timestamp)
    times = listing.commit_timestamps()
    if not times:
        raise VersionNotFoundError("the table has no commit files with timestamps; time travel by timestamp is impossible")
    candidates = [v for v, t in times.items() if t <= ts]
    if not candidates:
        first_v = min(times)
        first = dt.datetime.fromtimestamp(times[first_v] / 1000, dt.timezone.utc)
        raise VersionNotFoundError(
            f"timestamp {dt.datetime.fromtimestamp(ts / 1000, dt.timezone.utc).isoformat()} is before the earliest "
            f"available commit (version {first_v} at {first.isoformat()}); use a later timestamp"
        )
    return max(candidates)

"""Snapshot reconstruction: newest usable checkpoint + later JSON commits, at a version or a timestamp."""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..actions import AddFile, DomainMetadata, Metadata, Protocol, RemoveFile, Txn, decode_path, dv_id
from .checksum import Checksum, newest_checksum
from .commit_columns import ParsedCommit, decode_path_list, gc_paused
from .commit_times import CommitTimes, latest_of, latest_protocol_and_metadata
from ..errors import CorruptLogError, InvalidArgumentError, LakelogError, TableWithoutSchemaError, UnsupportedFeatureError, VersionNotFoundError
from ..table_features.registry import NO_DATA_WRITES, check_read, check_variant_protocol, check_write
from .delta_log import DeltaLog, LogListing
from ..table_features.properties import TableProperties
from ..schema.plain import is_nested, plain_fields
from ..table_features.type_widening import check_type_changes
from ..storage import Storage
from .file_set import NOT_LIVE, FileSet
from .versions import as_version, version_at_timestamp

if TYPE_CHECKING:  # Arrow is imported where the schema or a checkpoint is read: opening a table may need neither
    import pyarrow as pa

    from .checkpoint import CheckpointState
    from ..table_features.column_mapping import ColumnMapping

def missing_ranges(lo: int, hi: int, present: list[int]) -> list[tuple[int, int]]:
    """The ranges of versions in ``lo..hi`` that are not in ``present`` (sorted), in order; computed from
    ``present`` alone, so a huge ``hi`` (a stray ``99999999999999999999.json``) costs nothing."""
    out: list[tuple[int, int]] = []
    nxt = lo
    for v in present:
        if v < lo:
            continue
        if v > hi:
            break
        if v > nxt:
            out.append((nxt, v - 1))
        nxt = v + 1
    if nxt <= hi:
        out.append((nxt, hi))
    return out


def describe_ranges(ranges: list[tuple[int, int]], limit: int = 3) -> str:
    """'3, 5..9 and 2 more ranges' for [(3, 3), (5, 9), ...]."""
    parts = [str(a) if a == b else f"{a}..{b}" for a, b in ranges[:limit]]
    more = f" and {len(ranges) - limit} more range(s)" if len(ranges) > limit else ""
    return ", ".join(parts) + more


class Snapshot:
    """The table state at one version: protocol and metadata, and the state replayed from the log's file
    actions (``file_set``, ``tombstones``, ``txns``, ``domains``), which ``load`` may leave to be built on
    first use."""

    def __init__(
        self,
        storage: Storage,
        log: DeltaLog,
        version: int,
        protocol: Protocol,
        metadata: Metadata,
        file_set: FileSet | None,
        tombstones: dict[tuple[str, str | None], RemoveFile] | None = None,  # by logical file key
        txns: dict[str, Txn] | None = None,
        listing: LogListing | None = None,
        domains: dict[str, DomainMetadata] | None = None,
    ) -> None:
        self.storage, self.log, self.version = storage, log, version
        self.protocol, self.metadata, self.listing = protocol, metadata, listing
        self._file_set = FileSet() if file_set is None else file_set
        self._tombstones = {} if tombstones is None else tombstones
        self._txns = {} if txns is None else txns
        self._domains = {} if domains is None else domains
        self._schema: pa.Schema | None = None
        self._column_mapping: ColumnMapping | None = None
        self._pending: _Pending | None = None

    def __repr__(self) -> str:
        return f"Snapshot({self.storage.uri!r}, version={self.version})"

    # ------------------------------------------------------------ replayed state
    @property
    def file_set(self) -> FileSet:
        return self._replayed()._file_set

    @property
    def tombstones(self) -> dict[tuple[str, str | None], RemoveFile]:
        return self._replayed()._tombstones

    @property
    def txns(self) -> dict[str, Txn]:
        return self._replayed()._txns

    @property
    def domains(self) -> dict[str, DomainMetadata]:
        return self._replayed()._domains

    def _replayed(self) -> "Snapshot":
        """This snapshot, with the replayed state ``load`` left for first use built: the checkpoint, then
        the commits it already parsed and checked. The checkpoint's protocol and metadata, with the
        commits', must be those the checksum file gave."""
        if self._pending is not None:
            with self._pending_lock:  # one replay when threads share a Table
                if self._pending is not None:
                    self._replay_pending(self._pending)
        return self

    def _replay_pending(self, pending: "_Pending") -> None:
        state, listing = _replay(self.storage, self.log, pending.listing, self.version, pending.commits)
        checksum = pending.checksum
        if not _same_protocol_and_metadata(state, self):
            raise _checksum_disagrees(checksum, "its protocol or metadata differ from those the checkpoint and the commits give")
        if checksum.version == self.version:
            counts = (len(state.file_set), state.file_set.total_size())
            if counts != (checksum.num_files, checksum.table_size_bytes):
                raise _checksum_disagrees(
                    checksum, f"it counts {checksum.num_files} live file(s) of {checksum.table_size_bytes} bytes, the checkpoint and the commits {counts[0]} of {counts[1]} bytes"
                )
        self._file_set, self._tombstones, self._txns, self._domains = state.file_set, state.tombstones, state.txns, state.domains
        if listing is not pending.listing and self.listing is pending.listing:
            self.listing = listing  # the replay needed the whole log (no usable checkpoint in the listed tail)
        self._pending = None

    # ------------------------------------------------------------ derived
    @property
    def files(self) -> dict[str, AddFile]:
        """Decoded relative path -> ``add`` of every live file (built on first use; treat as read-only)."""
        return self.file_set.as_dict()

    def live_adds(self) -> list[AddFile]:
        """The ``add`` actions of the live files: those of ``files``, or, while the checkpoint is left for
        first use (``load``), those the version checksum file lists (``allFiles``) with the commits after
        it applied, which reads no checkpoint. For what the checksum counts (``describe``), never to read
        data."""
        pending = self._pending
        if pending is not None and pending.checksum.all_files is not None:
            state = _checksum_files(pending)
            if state is not None:
                return list(state.files.values())
        return list(self.files.values())

    def file_paths(self) -> list[str]:
        """Decoded relative paths of the live files (cheap: no ``AddFile`` objects are built)."""
        return self.file_set.paths()

    @property
    def num_files(self) -> int:
        return len(self.file_set)

    @property
    def schema(self) -> pa.Schema:
        if self._schema is None:
            if not self.metadata.schema_string:
                raise TableWithoutSchemaError(
                    f"the table's metadata (version {self.version}) has no schema (metaData.schemaString is absent), as a Delta Live "
                    "Tables table has before its pipeline first updates it; nothing can be read or written until a writer that "
                    "owns the table (the pipeline) sets its schema"
                )
            from ..schema.types import schema_from_string

            self._schema = schema_from_string(self.metadata.schema_string)
        return self._schema

    @property
    def partition_columns(self) -> list[str]:
        return list(self.metadata.partition_columns)

    @property
    def column_mapping(self) -> ColumnMapping:
        """How the logical columns are found in the data files (``delta.columnMapping.mode``)."""
        if self._column_mapping is None:
            from ..table_features.column_mapping import ColumnMapping

            self._column_mapping = ColumnMapping.of(self.metadata, self.properties.column_mapping_mode)
        return self._column_mapping

    @property
    def configuration(self) -> dict[str, str]:
        return self.metadata.configuration

    @property
    def properties(self) -> TableProperties:
        """The table properties, typed (see ``lakelog.table_features.properties``)."""
        return TableProperties(self.metadata.configuration)

    # ------------------------------------------------------------ protocol checks
    def check_readable(self) -> None:
        check_read(self.protocol)
        fields = plain_fields(self.metadata.schema_string) if self._schema is None else None
        if fields is None:  # a schema of other types is parsed with Arrow now: a damaged one fails when the table is opened
            self.column_mapping  # the mode must parse
            schema = self.schema
            check_type_changes(self.metadata.schema_string)
            check_variant_protocol(schema, self.protocol)
            import pyarrow as pa

            names, nested = schema.names, {f.name for f in schema if pa.types.is_nested(f.type)}
        else:  # plain types (``lakelog.schema.plain``): valid as Arrow would find it, and no variant column
            self.properties.column_mapping_mode  # the mode must parse
            check_type_changes(self.metadata.schema_string)
            names, nested = [f["name"] for f in fields], {f["name"] for f in fields if is_nested(f["type"])}
        parts = self.metadata.partition_columns
        unknown = [c for c in parts if c not in names]
        if unknown or len(set(parts)) != len(parts):
            what = f"column(s) {unknown} that are not in the schema {names}" if unknown else f"a column twice ({parts})"
            raise CorruptLogError(f"metaData.partitionColumns names {what}; the table metadata is damaged")
        if nested & set(parts):
            raise CorruptLogError(f"metaData.partitionColumns names nested column(s) {[c for c in parts if c in nested]}; partition columns must be primitive")

    def check_writer_protocol(self, configuration: dict[str, str] | None = None) -> TableProperties:
        """Refuse tables whose reader or writer protocol lakelog does not implement, or whose properties
        that writers use do not parse (``configuration`` when given: the properties the commit being made
        leaves the table with). This is what every operation that changes the table needs, VACUUM and log
        cleanup included (Delta's ``vacuumProtocolCheck``: an old client must not delete files a newer
        feature still uses). Returns the properties checked. The replayed state is built now if it was
        not yet (``load``): nothing is written on top of a checkpoint that was never read."""
        self.check_readable()
        self.file_set
        check_write(self.protocol)
        props = self.properties if configuration is None else TableProperties(configuration)
        props.check_writable()
        return props

    def check_writable(self, configuration: dict[str, str] | None = None) -> None:
        """``check_writer_protocol`` plus what writing data needs: properties lakelog honours
        (``configuration`` when given: the properties the commit being made leaves the table with), and no
        constraint, generated or identity column, invariant or change data feed that lakelog would have to
        enforce or produce (CHECK constraints, invariants, generated columns and defaults are enforced by
        ``lakelog.table_features.row_rules``)."""
        props = self.check_writer_protocol(configuration)
        in_use = props.features_in_use()
        features = set(self.protocol.writer_features or [])
        in_use.extend(sorted({what for f, what in NO_DATA_WRITES.items() if f in features}))
        if in_use:
            raise UnsupportedFeatureError(f"table uses {', '.join(in_use)}, which lakelog cannot honour on write")

    @property
    def append_only(self) -> bool:
        return self.properties.append_only

    @property
    def writer_features(self):
        """The ``WriterFeatures`` every new row must meet (None when the table has none)."""
        from ..table_features.row_rules import WriterFeatures

        return WriterFeatures.of(self.metadata.schema_string, self.configuration)

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
        if listing is None:
            listing = log.list_latest() if version is None and timestamp is None else log.list()
        elif listing.partial and (timestamp is not None or (version is not None and as_version(version) < listing.listed_from)):
            listing = log.list()
        latest = listing.latest_version
        if timestamp is not None:
            if version is not None:
                raise InvalidArgumentError("pass version or timestamp, not both")
            version = version_at_timestamp(listing, timestamp, log)
        target = latest if version is None else as_version(version)
        if target < 0 or target > latest:
            raise VersionNotFoundError(f"version {target} does not exist; the table's versions are up to {latest}")

        found = _from_checksum(storage, log, listing, target)
        if found is not None:
            protocol, metadata, pending = found
            snap = cls(storage, log, target, protocol, metadata, None, listing=listing)
            snap._pending, snap._pending_lock = pending, threading.Lock()
        else:
            state, listing = _replay(storage, log, listing, target)
            snap = cls(storage, log, target, state.protocol, state.metadata, state.file_set, state.tombstones, state.txns, listing, state.domains)
        snap.check_readable()
        return snap

    def updated(self) -> "Snapshot":
        """The latest snapshot, reading only the commits added since this one when possible."""
        listing = self.log.list(self.version) if self.storage.store.lists_from else self.log.list()
        latest = listing.latest_version
        if latest == self.version:
            self.listing = listing
            return self
        newer = sorted(v for v in listing.commits if v > self.version)
        if latest < self.version or len(newer) != latest - self.version:
            return Snapshot.load(self.storage, listing=listing)
        with gc_paused():
            snap = self.advance(dict(self.log.read_commits_for_replay(newer)))
        snap.listing = listing
        return snap

    def advance(self, new_actions: dict[int, list | ParsedCommit]) -> "Snapshot":
        """A new snapshot: this one plus the given later commits (contiguous, in order): lists of actions,
        or commits parsed by ``DeltaLog.read_commits_for_replay``."""
        state = _Replay(self.file_set.copy())
        state.protocol, state.metadata = self.protocol, self.metadata
        state.tombstones, state.txns, state.domains = dict(self.tombstones), dict(self.txns), dict(self.domains)
        version = self.version
        for v in sorted(new_actions):
            if v != version + 1:
                raise CorruptLogError(f"cannot advance snapshot {self.version} by non-contiguous version {v}")
            state.apply(new_actions[v], v)
            version = v
        snap = Snapshot(self.storage, self.log, version, state.protocol, state.metadata, state.file_set, state.tombstones, state.txns, None, state.domains)
        snap.check_readable()
        return snap



def _replay(storage: Storage, log: DeltaLog, listing: LogListing, target: int, parsed: dict | None = None) -> tuple["_Replay", LogListing]:
    """The state of version ``target``: the newest usable checkpoint at or before it (unusable ones are
    skipped with a warning) and the commits after it; ``parsed``: commits already parsed and checked
    (version -> (commit, ``check_files``)). Also the listing used (the whole log when ``listing`` was a
    tail without a usable checkpoint)."""
    parsed = parsed or {}
    state = _Replay()
    start = -1
    skipped: list[tuple[int, Exception]] = []  # unusable checkpoints, newest first
    candidates = [cp for v in sorted((v for v in listing.checkpoints if v <= target), reverse=True) for cp in listing.checkpoints[v]]
    for cp in candidates:
        from .checkpoint import read_checkpoint_state  # a Parquet reader: only where a checkpoint is read

        try:
            probe = _Replay.from_checkpoint(read_checkpoint_state(storage, cp))
            if probe.protocol is None or probe.metadata is None:
                raise CorruptLogError(f"checkpoint {cp.name} has no protocol or metaData")
        except (CorruptLogError, FileNotFoundError) as e:
            # Documented fallback: another checkpoint of the version, an older one, or JSON replay.
            warnings.warn(f"lakelog: skipping unusable checkpoint at version {cp.version} ({cp.name}): {e}", stacklevel=2)
            skipped.append((cp, e))
            continue
        state, start = probe, cp.version
        break
    if listing.partial and start < listing.listed_from:
        # no usable checkpoint in the listed tail: what came before it is needed after all
        return _replay(storage, log, log.list(), target, parsed)

    # Only the commit files that exist are enumerated: a stray far-future name must not cost time.
    needed = sorted(v for v in listing.commits if start < v <= target)
    if len(needed) != target - start:
        gaps = missing_ranges(start + 1, target, needed)
        last_missing = gaps[-1][1]
        covering = [(cp, e) for cp, e in skipped if cp.version >= last_missing]
        if covering:
            # Only an unusable checkpoint covered the missing commits: no fallback exists.
            cp, err = covering[0]
            error_type = type(err) if isinstance(err, CorruptLogError) else CorruptLogError
            raise error_type(
                f"version {target} cannot be reconstructed: checkpoint {cp.name} is unusable ({err}) "
                f"and commit file(s) for version(s) {describe_ranges(gaps)} it covers are gone, so there is nothing to "
                "fall back to. Restore the checkpoint or those commits from a backup."
            )
        earliest = min(listing.commits) if listing.commits else None
        if start == -1 and len(gaps) == 1 and gaps[0][0] == 0 and (earliest is None or gaps[0][1] < earliest):
            raise VersionNotFoundError(
                f"version {target} cannot be reconstructed: commits before version {earliest} were removed and no "
                "checkpoint at or before it is usable. Read a later version."
            )
        raise CorruptLogError(
            f"the log has a gap: commit file(s) for version(s) {describe_ranges(gaps)} are missing between "
            f"{start + 1} and {target}; the table cannot be read safely. Restore the missing files from a backup "
            "(or remove a commit file that does not belong to this table)."
        )
    with gc_paused():
        fresh = log.read_commits_for_replay([v for v in needed if v not in parsed])
        for v in needed:
            if v in parsed:
                state.apply(parsed[v][0], v, parsed[v][1])
            else:
                state.apply(next(fresh)[1], v)

    if state.protocol is None:
        raise CorruptLogError(f"no protocol action found in the log up to version {target}; the table is incomplete")
    if state.metadata is None:
        raise CorruptLogError(f"no metaData action found in the log up to version {target}; the table is incomplete")
    return state, listing


@dataclass
class _Pending:
    """What ``Snapshot.load`` keeps to build the replayed state on first use: the listing, the commits after
    the checkpoint (parsed and checked), and the version of the checksum file the protocol and metadata
    came from."""

    listing: LogListing
    commits: dict[int, tuple[ParsedCommit, tuple]]
    checksum: Checksum


def _from_checksum(storage: Storage, log: DeltaLog, listing: LogListing, target: int) -> tuple[Protocol, Metadata, _Pending] | None:
    """The protocol and metadata of version ``target`` without reading a checkpoint: from the newest checksum
    file at or after the newest checkpoint at or before ``target`` (``lakelog.log.checksum``), then the
    commits after it, which are all read, parsed and checked (``check_files``) now. None when there is no
    such checkpoint or checksum, a commit is missing, or the checksum does not parse: then the table is
    replayed from its checkpoint at once."""
    checkpoints = [v for v in listing.checkpoints if v <= target]
    if not checkpoints:
        return None
    cp = max(checkpoints)
    needed = sorted(v for v in listing.commits if cp < v <= target)
    if len(needed) != target - cp:
        return None
    checksum = newest_checksum(storage, listing.checksums, cp, target)
    if checksum is None:
        return None
    commits: dict[int, tuple[ParsedCommit, tuple]] = {}
    with gc_paused():
        for v, commit in log.read_commits_for_replay(needed):
            commits[v] = (commit, check_files(commit, v))
    later = {v: commit.actions for v, (commit, _) in commits.items() if v > checksum.version}
    protocol, metadata = latest_of(later, checksum.protocol, checksum.metadata)
    return protocol, metadata, _Pending(listing, commits, checksum)


def _checksum_files(pending: _Pending) -> "_Replay | None":
    """The checksum's ``allFiles`` and the commits after it, replayed; None when they do not parse or
    name a file twice (the checkpoint is read instead)."""
    checksum = pending.checksum
    try:
        adds = [AddFile.from_json(d) for d in checksum.all_files]
        state = _Replay()
        state.apply(adds, checksum.version)
    except (KeyError, TypeError, ValueError, AttributeError, LakelogError):
        return None
    for v in sorted(pending.commits):
        if v > checksum.version:
            commit, checked = pending.commits[v]
            state.apply(commit, v, checked)
    return state


def _checksum_disagrees(checksum: Checksum, why: str) -> CorruptLogError:
    return CorruptLogError(
        f"the version checksum file {checksum.name} disagrees with the log: {why}. One of them is damaged (or the "
        "checksum was left by another table): `lakelog check` compares the checkpoint with the commits; restore the damaged "
        "file from a backup, or delete the checksum file if it is the one (lakelog then reads the protocol and metadata from the checkpoint)."
    )


def _same_protocol_and_metadata(state: "_Replay", snap: Snapshot) -> bool:
    """Whether a replay gave the protocol and metadata ``snap`` was opened with (as the log states them:
    fields a checkpoint and a JSON file may spell differently, absent or empty, compare equal)."""
    a, b = state.protocol, snap.protocol
    c, d = state.metadata, snap.metadata
    if a is None or c is None:
        return False
    return (
        (a.min_reader_version, a.min_writer_version, sorted(a.reader_features or []), sorted(a.writer_features or []))
        == (b.min_reader_version, b.min_writer_version, sorted(b.reader_features or []), sorted(b.writer_features or []))
        and (c.id, c.schema_string, list(c.partition_columns), dict(c.configuration)) == (d.id, d.schema_string, list(d.partition_columns), dict(d.configuration))
    )


class _Replay:
    """Action reconciliation (the protocol's "Action Reconciliation"): latest protocol/metaData win; a
    logical file is keyed by (path, deletion vector id), at most one per path is live (the newest add),
    a remove cancels only the logical file it names; latest txn per appId."""

    __slots__ = ("protocol", "metadata", "file_set", "tombstones", "txns", "domains")

    def __init__(self, file_set: FileSet | None = None) -> None:
        self.protocol: Protocol | None = None
        self.metadata: Metadata | None = None
        self.file_set = FileSet() if file_set is None else file_set
        self.tombstones: dict[tuple[str, str | None], RemoveFile] = {}
        self.txns: dict[str, Txn] = {}
        self.domains: dict[str, DomainMetadata] = {}  # domain -> latest action (tombstones included)

    @classmethod
    def from_checkpoint(cls, cp: CheckpointState) -> "_Replay":
        """The state a checkpoint describes. Its removes go to the tombstones only, so the file set's
        changes stay empty (they would otherwise name every tombstone); reading the checkpoint made sure
        no logical file is both live and removed."""
        tombstones = {logical_file_key(decode_path(a.path), a): a for a in cp.actions if type(a) is RemoveFile}
        state = cls(FileSet(cp))
        state.apply([a for a in cp.actions if type(a) is not RemoveFile])
        state.tombstones = tombstones
        return state

    @property
    def files(self) -> dict[str, AddFile]:
        return self.file_set.as_dict()

    def apply(self, actions: list | ParsedCommit, version: int | None = None, checked: tuple | None = None) -> None:
        """Apply the actions of one commit (``version``, for messages): a list of actions, or a commit
        parsed with its adds as columns; ``checked``: what ``check_files`` gave for it, when already called.
        Actions in a commit are not ordered: its removes apply first, so ``remove(p, old DV)`` +
        ``add(p, new DV)`` leaves the new one."""
        commit = actions if isinstance(actions, ParsedCommit) else ParsedCommit.of(actions)
        removes, paths, dv_ids = check_files(commit, version) if checked is None else checked
        file_set, tombstones = self.file_set, self.tombstones
        for a in commit.actions:
            t = type(a)
            if t is Metadata:
                self.metadata = a
            elif t is Protocol:
                self.protocol = a
            elif t is Txn:
                self.txns[a.app_id] = a
            elif t is DomainMetadata:
                self.domains[a.domain] = a
        for key, r in removes:
            live = file_set.live_dv_id(key[0])
            if live is not NOT_LIVE and live == key[1]:
                file_set.remove(key[0])
            tombstones[key] = r
        n = len(paths)
        if n:
            file_set.add_columns(commit.adds, paths)
            if tombstones:
                keys = zip(paths, dv_ids) if dv_ids is not None else ((p, None) for p in paths)
                if len(tombstones) < n:
                    added = set(keys)
                    for key in [k for k in tombstones if k in added]:
                        del tombstones[key]
                else:
                    for key in keys:
                        tombstones.pop(key, None)


def check_files(commit: ParsedCommit, version: int | None) -> tuple[list, list[str], list | None]:
    """What one commit alone must satisfy: a commit that names a path in two adds or two removes, or adds
    and removes the same logical file, is a ``CorruptLogError`` (the protocol forbids it, and engines
    disagree about which action wins). Returns its removes as (logical file key, action), its adds'
    decoded paths and their deletion vector ids (None when no add has one)."""
    removes: list[tuple[tuple, RemoveFile]] = []
    removed: set[str] = set()
    for a in commit.actions:
        if type(a) is RemoveFile:
            path = decode_path(a.path)
            if path in removed:
                raise _conflicting_actions(version, a.path, "removes it twice")
            removed.add(path)
            removes.append((logical_file_key(path, a), a))
    adds = commit.adds
    n = len(adds)
    paths = decode_path_list(adds.path) if n else []
    if len(set(paths)) != n:
        seen: set[str] = set()
        for p, logged in zip(paths, adds.path):
            if p in seen:
                raise _conflicting_actions(version, logged, "adds it twice")
            seen.add(p)
    dv_ids = adds.dv_ids() if n else None
    if removes and n:
        position = {p: i for i, p in enumerate(paths)}
        for key, r in removes:
            i = position.get(key[0])
            if i is not None and (None if dv_ids is None else dv_ids[i]) == key[1]:
                raise _conflicting_actions(version, r.path, "both adds and removes it")
    return removes, paths, dv_ids


def logical_file_key(path: str, action: Any) -> tuple[str, str | None]:
    """The protocol's key of a logical file: (decoded path, ``deletionVector.uniqueId`` or None). An add
    and a remove of one path with different deletion vectors name different logical files."""
    return (path, None if action is None else dv_id(action))


def _conflicting_actions(version: int | None, path: str, what: str) -> CorruptLogError:
    where = f"commit {version}" if version is not None else "a commit"
    return CorruptLogError(
        f"{where} {what}: {path!r}. A valid commit names each file at most once per action type and never adds "
        "and removes the same file; the log was written by a broken writer or edited. Restore the commit from a backup."
    )


def _latest_for_times(storage: Storage, listing: LogListing) -> tuple[Protocol | None, Metadata | None]:
    """The latest protocol and metadata, which say whether commit times are in-commit timestamps."""
    return latest_protocol_and_metadata(DeltaLog(storage), listing)


def commit_times(snapshot: Snapshot, listing: LogListing | None = None) -> CommitTimes:
    """The commit times of ``snapshot``'s table (in-commit timestamps as its latest version says)."""
    listing = snapshot.log.whole(listing or snapshot.listing)
    if snapshot.version == listing.latest_version:
        protocol, metadata = snapshot.protocol, snapshot.metadata
    else:
        protocol, metadata = _latest_for_times(snapshot.storage, listing)
    return CommitTimes(snapshot.log, listing, protocol, metadata)

"""``lakelog check``: verify a table's log and data files without changing anything.

``check_table(path)`` reports, in a ``CheckReport``:

* problems (``ok`` is False when there is any):

  - ``corrupt_commit``: a commit file that does not parse (torn line, malformed action) or that uses a
    feature lakelog does not read;
  - ``invalid_path``: an ``add``/``remove`` path that is absolute, has a scheme or escapes the table;
  - ``unreadable_checkpoint``: a checkpoint that cannot be read (readers fall back to an older
    checkpoint or to the JSON commits when those exist);
  - ``checkpoint_mismatch``: a checkpoint whose files, protocol, metadata or txns differ from the replay
    of the JSON commits it covers (checked whenever those commits still exist, from version 0 or from an
    earlier checkpoint);
  - ``version_gap``: versions after the earliest reconstructable one that cannot be reconstructed
    (missing or unreadable commit files not covered by a usable checkpoint);
  - ``in_commit_timestamp``: a commit from the in-commit timestamp enablement version on that has no
    ``commitInfo.inCommitTimestamp`` (history and timestamp time travel fail on it);
  - ``unreadable_version``: the checked version (default: the latest) cannot be opened; the message is
    the error a reader gets;
  - ``missing_file`` / ``size_mismatch``: a data file the checked version references is absent, or its
    size differs from the size in the log;
  - ``invalid_partition_values``: a file's ``partitionValues`` lack a partition column or hold a value
    that is not of the column's type (reads fail on it);
  - ``missing_deletion_vector`` / ``corrupt_deletion_vector``: a deletion vector of a data file the
    checked version references is absent, or damaged (size, checksum, magic number, cardinality);
  - ``corrupt_file``: a referenced data file whose footer is not readable Parquet;
  - ``nanosecond_timestamps``: a data file storing Parquet ``TIMESTAMP(NANOS)`` columns, which Delta
    timestamps (microseconds) cannot hold: Spark refuses the file, delta-rs truncates it;
  - ``incompatible_file``: a data file storing a column as a type the table's type cannot hold without
    loss (reads fail or coerce).

  Every data file of the checked version has its footer read (in parallel); no data is read.

* warnings (do not affect ``ok``): a ``_last_checkpoint`` hint that is unparseable or names a checkpoint
  that does not exist (readers only use it as a hint), multi-part checkpoints missing parts
  (``incomplete_checkpoint``: readers ignore them), change data files a commit names that are gone
  (``missing_change_file``: that version's change feed cannot be read; a wrong size is a ``size_mismatch``
  problem), in-commit timestamps that do not increase
  (``in_commit_timestamp``), and temp files in ``_delta_log`` left by writers
  that crashed (readers ignore them; delete them when no writer runs).

* orphans: files under the table root, outside ``_delta_log`` and hidden (``_``/``.``) paths, that no
  ``add`` or ``remove`` in any commit or checkpoint still in the log names: written but never committed
  (a crashed or failed writer), or removed so long ago that the log no longer mentions them. They are
  not a problem (``vacuum`` deletes them).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

from .actions import Action, AddCDCFile, AddFile, Metadata, RemoveFile, decode_path, dv_id, parse_actions
from .log.checkpoint import read_checkpoint
from .log.commit_times import CommitTimes, in_commit_timestamp, latest_protocol_and_metadata
from .table_features.deletion_vectors import DeletionVectors, referenced_dv_file
from .errors import CorruptLogError, DeletionVectorError, InvalidPathError, LakelogError, MissingDeletionVectorError, StorageUnavailableError, VersionNotFoundError
from .log.delta_log import LAST_CHECKPOINT, CheckpointFiles, DeltaLog, commit_name
from .read.data_files import inspect_files
from .schema.partition_values import hive_escape, partition_scalars
from .log.snapshot import Snapshot, _Replay, describe_ranges, logical_file_key, missing_ranges
from .log.versions import as_version
from .storage import Storage

_TEMP_RE = re.compile(r"^\..+\.tmp$")  # lakelog's temp files: .<final name>.<uuid>.tmp
_READ_CHUNK = 1000  # commit files per bulk read


@dataclass
class Problem:
    kind: str
    message: str
    version: int | None = None
    path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class CheckReport:
    """What ``check_table`` found. ``ok``: no problems (orphans and warnings do not count)."""

    path: str
    version: int | None  # the version whose files were checked
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "version": self.version,
            "ok": self.ok,
            "problems": [p.to_dict() for p in self.problems],
            "warnings": [w.to_dict() for w in self.warnings],
            "orphans": list(self.orphans),
            "counts": dict(self.counts),
        }

    def format(self) -> str:
        c = self.counts
        lines = [f"lakelog check {self.path}"]
        readable = "none" if c.get("earliest_version") is None else f"{c['earliest_version']}..{c['latest_version']}"
        lines.append(
            f"  log: {c.get('commits', 0)} commit(s), {c.get('checkpoints', 0)} checkpoint(s) "
            f"({c.get('checkpoints_verified', 0)} verified against the JSON commits); readable versions {readable}"
        )
        if self.version is not None and c.get("files") is not None:
            state = "all present with their logged sizes" if not any(p.kind in ("missing_file", "size_mismatch") for p in self.problems) else "see problems"
            lines.append(f"  version {self.version}: {c['files']} data file(s), {c.get('bytes', 0)} bytes; {state}")
        if self.orphans:
            lines.append(f"  orphans: {len(self.orphans)} file(s) that no version in the log references (vacuum deletes them):")
            lines.extend(f"    {o}" for o in self.orphans[:20])
            if len(self.orphans) > 20:
                lines.append(f"    ... and {len(self.orphans) - 20} more")
        else:
            lines.append("  orphans: none")
        if self.warnings:
            lines.append(f"  warnings ({len(self.warnings)}):")
            lines.extend(f"    - {w.kind}: {w.message}" for w in self.warnings)
        if self.problems:
            lines.append(f"  PROBLEMS ({len(self.problems)}):")
            lines.extend(f"    - {p.kind}: {p.message}" for p in self.problems)
            lines.append(f"result: {len(self.problems)} problem(s) found")
        else:
            lines.append("result: OK")
        return "\n".join(lines) + "\n"

    __str__ = format


def check_table(
    path: str,
    storage_options: dict[str, Any] | None = None,
    version: int | None = None,
    *,
    storage: Storage | None = None,
) -> CheckReport:
    """Check the table at ``path`` (its whole log; the data files of ``version``, default the latest).

    Raises ``TableNotFoundError`` when there is no table, and ``VersionNotFoundError`` for a version
    outside the log; everything else found is reported, never raised.
    """
    storage = storage or Storage(path, storage_options)
    log = DeltaLog(storage)
    listing = log.list()  # TableNotFoundError: nothing to check
    latest = listing.latest_version
    target = latest if version is None else as_version(version)
    if not 0 <= target <= latest:
        raise VersionNotFoundError(f"version {target} does not exist; the table's versions are up to {latest}")
    report = CheckReport(str(path), target)
    problems, warns = report.problems, report.warnings

    # ---------------------------------------------------------------- every commit parses
    commits: dict[int, list[Action]] = {}
    for v, data in _read_commits(storage, sorted(listing.commits)).items():
        if data is None:
            problems.append(Problem("corrupt_commit", f"commit file {commit_name(v)} vanished while being checked", v, commit_name(v)))
            continue
        try:
            commits[v] = parse_actions(data, commit_name(v))
        except LakelogError as e:
            problems.append(Problem("corrupt_commit", str(e), v, commit_name(v)))
            continue
        try:
            _Replay().apply(commits[v], v)  # what one commit alone must satisfy (no file named twice)
        except InvalidPathError:
            pass  # reported with every other path below
        except LakelogError as e:
            problems.append(Problem("corrupt_commit", str(e), v, commit_name(v)))
            del commits[v]

    referenced: set[str] = set()
    partition_columns: set[str] = set()

    def note_paths(actions: list[Action], v: int, where: str) -> None:
        bad = None
        for a in actions:
            if isinstance(a, (AddFile, RemoveFile)):
                try:
                    referenced.add(decode_path(a.path))
                except InvalidPathError as e:
                    bad = bad or e
                if a.deletion_vector is not None and (dv := referenced_dv_file(storage, a)) is not None:
                    referenced.add(dv)
            elif isinstance(a, Metadata):
                partition_columns.update(a.partition_columns)
        if bad is not None:
            problems.append(Problem("invalid_path", f"{where}: {bad}", v, where))

    for v in sorted(commits):
        note_paths(commits[v], v, commit_name(v))

    # ---------------------------------------------------------------- checkpoints and continuity
    # Only versions that have a file are visited: a stray far-future commit name must not cost time.
    versions = sorted(set(listing.commits) | set(listing.checkpoints))
    state: _Replay | None = None
    covered: list[int] = []
    verified = 0
    prev = None
    for v in versions:
        if prev is not None and v != prev + 1:
            state = None  # chain broken: a gap in the version numbers
        prev = v
        if v in commits and (state is not None or v == 0):
            state = state or _Replay()
            try:
                state.apply(commits[v], v)
            except LakelogError:
                state = None  # reported above (invalid path)
        else:
            state = None  # chain broken: missing or unreadable commit
        replayed = state
        for cp in listing.checkpoints.get(v, ()):
            cp_state = _read_checkpoint_state(storage, cp, problems, note_paths)
            if cp_state is not None:
                if replayed is not None:
                    verified += 1
                    diff = _differences(replayed, cp_state)
                    if diff:
                        problems.append(
                            Problem(
                                "checkpoint_mismatch",
                                f"checkpoint {cp.name} differs from the JSON commits up to version {v}: {'; '.join(diff)}. "
                                "Readers starting from this checkpoint see a different table than the log describes.",
                                v,
                                cp.name,
                            )
                        )
                elif state is None:
                    state = cp_state
        if state is not None:
            covered.append(v)

    earliest = covered[0] if covered else None
    if earliest is not None:
        commit_versions = sorted(listing.commits)
        for lo, hi in missing_ranges(earliest, latest, covered):
            absent = missing_ranges(lo, hi, commit_versions)
            broken = [v for v in commit_versions if lo <= v <= hi and v not in commits]
            why = []
            if absent:
                why.append(f"commit file(s) for version(s) {describe_ranges(absent)} are missing")
            if broken:
                why.append(f"commit(s) {broken[:5]} are unreadable")
            if not why:
                why.append("a commit in that range names an invalid path")
            span = f"version {lo}" if lo == hi else f"versions {lo}..{hi}"
            problems.append(Problem("version_gap", f"{span} cannot be reconstructed: {' and '.join(why)}, and no usable checkpoint covers them", lo))
    else:
        problems.append(Problem("version_gap", "no version of the table can be reconstructed from the log", None))

    # ---------------------------------------------------------------- _last_checkpoint and temp files
    names = {f.name for f in storage.list_log()}
    if LAST_CHECKPOINT in names:
        try:
            hint = orjson.loads(storage.read(storage.log_file(LAST_CHECKPOINT)))
            named = int(hint["version"])
        except (FileNotFoundError, orjson.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            warns.append(Problem("last_checkpoint", f"_last_checkpoint is unparseable ({e!r}); readers ignore it and list the log", None, LAST_CHECKPOINT))
        else:
            if named not in listing.checkpoints:
                warns.append(
                    Problem(
                        "last_checkpoint",
                        f"_last_checkpoint names version {named}, which has no checkpoint; readers ignore the hint and list the log. "
                        "The next checkpoint rewrites it.",
                        named,
                        LAST_CHECKPOINT,
                    )
                )
    for cp in listing.incomplete_checkpoints:
        warns.append(
            Problem(
                "incomplete_checkpoint",
                f"checkpoint {cp.name} has only {len(cp.files)} of its {cp.parts} parts (a writer stopped mid-write, or a part "
                "was deleted); readers ignore it",
                cp.version,
                cp.files[0].name,
            )
        )
    # ---------------------------------------------------------------- in-commit timestamps
    try:
        ict_from = CommitTimes(log, listing, *latest_protocol_and_metadata(log, listing)).ict_from
    except StorageUnavailableError:
        raise  # no answer says nothing about the table: never reported as a problem of it
    except LakelogError:
        ict_from = None  # the latest metadata is reported above if it is unreadable
    if ict_from is not None:
        prev: tuple[int, int] | None = None
        for v in sorted(c for c in commits if c >= ict_from):
            try:
                ts = in_commit_timestamp(commits[v], v)
            except CorruptLogError as e:
                problems.append(Problem("in_commit_timestamp", f"{e}; history and timestamp time travel fail on it", v, commit_name(v)))
                prev = None
                continue
            if prev is not None and prev[0] == v - 1 and ts <= prev[1]:
                warns.append(
                    Problem(
                        "in_commit_timestamp",
                        f"commit {v}'s inCommitTimestamp {ts} is not after commit {v - 1}'s ({prev[1]}); writers must keep them "
                        "increasing, and timestamp time travel near these versions may pick either",
                        v,
                        commit_name(v),
                    )
                )
            prev = (v, ts)
    temps = sorted(n for n in names if _TEMP_RE.match(n))
    for n in temps:
        warns.append(Problem("stale_temp_file", f"_delta_log/{n} was left by a writer that stopped mid-write; readers ignore it", None, f"_delta_log/{n}"))

    # ---------------------------------------------------------------- the checked version's data files
    files = {f.name: f for f in storage.list_files(storage.root)}
    snapshot = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loaded = Snapshot.load(storage, version=target, listing=listing)
            loaded.file_set  # its checkpoint is read now, if the load left it for first use: its errors are this step's
            snapshot = loaded
    except StorageUnavailableError:
        raise
    except LakelogError as e:
        problems.append(Problem("unreadable_version", f"version {target} cannot be opened: {e}", target))
    n_files = n_bytes = None
    if snapshot is not None:
        partition_columns.update(snapshot.partition_columns)
        n_files, n_bytes = len(snapshot.files), 0
        deletion_vectors = DeletionVectors(storage)
        present = []
        for rel, add in sorted(snapshot.files.items()):
            n_bytes += add.size
            try:
                values = snapshot.column_mapping.logical_partition_values(add.partition_values, snapshot.partition_columns)
                partition_scalars(values, snapshot.schema, snapshot.partition_columns, add.path)
            except CorruptLogError as e:
                problems.append(Problem("invalid_partition_values", str(e), target, rel))
            if add.deletion_vector is not None:
                try:
                    deletion_vectors.rows(add)
                except MissingDeletionVectorError as e:
                    problems.append(Problem("missing_deletion_vector", str(e), target, e.paths[0]))
                except (DeletionVectorError, InvalidPathError) as e:
                    problems.append(Problem("corrupt_deletion_vector", str(e), target, rel))
            info = files.get(rel)
            if info is None:
                problems.append(Problem("missing_file", f"data file {rel!r} named by version {target} is missing", target, rel))
                continue
            present.append(rel)
            if info.size != add.size:
                problems.append(
                    Problem("size_mismatch", f"data file {rel!r} is {info.size} bytes but version {target} logged {add.size} bytes", target, rel)
                )
        # Footers: files that are not Parquet, nanosecond timestamps, columns the schema cannot hold.
        for file_report in inspect_files(storage, present, snapshot.schema, snapshot.partition_columns):
            for kind, message in file_report.problems:
                problems.append(Problem(kind, message, target, file_report.path))

    # ---------------------------------------------------------------- change data files
    for v in sorted(commits):
        for a in commits[v]:
            if not isinstance(a, AddCDCFile):
                continue
            try:
                rel = a.relative_path
            except InvalidPathError as e:
                problems.append(Problem("invalid_path", f"{commit_name(v)}: {e}", v, commit_name(v)))
                continue
            info = files.get(rel)
            if info is None:
                warns.append(Problem("missing_change_file", f"change data file {rel!r} of version {v} is missing (vacuumed after "
                                     f"the retention?): the change data feed of version {v} can no longer be read", v, rel))
            elif info.size != a.size:
                problems.append(Problem("size_mismatch", f"change data file {rel!r} is {info.size} bytes but version {v} logged "
                                        f"{a.size} bytes", v, rel))

    # ---------------------------------------------------------------- orphans
    nested = {rel.split("/_delta_log/", 1)[0] + "/" for rel in files if "/_delta_log/" in rel}
    report.orphans = sorted(
        rel
        for rel in files
        if rel not in referenced
        and not rel.startswith("_delta_log/")
        and not any(_is_hidden(part, partition_columns) for part in rel.split("/"))
        and not any(rel.startswith(n) for n in nested)
    )

    report.counts = {
        "commits": len(listing.commits),
        "checkpoints": len(listing.checkpoints),
        "checkpoints_verified": verified,
        "earliest_version": earliest,
        "latest_version": latest,
        "files": n_files,
        "bytes": n_bytes,
        "orphans": len(report.orphans),
        "orphan_bytes": sum(files[o].size for o in report.orphans),
        "problems": len(problems),
        "warnings": len(warns),
    }
    return report


# ---------------------------------------------------------------- helpers


def _read_commits(storage: Storage, versions: list[int]) -> dict[int, bytes | None]:
    """Raw bytes of each commit (None when it vanished), in bulk reads of ``_READ_CHUNK`` files."""
    out: dict[int, bytes | None] = {}
    for i in range(0, len(versions), _READ_CHUNK):
        chunk = versions[i : i + _READ_CHUNK]
        paths = {storage.log_file(commit_name(v)): v for v in chunk}
        try:
            for p, data in storage.read_many(list(paths)).items():
                out[paths[p]] = data
        except (FileNotFoundError, KeyError):
            for p, v in paths.items():  # one vanished (log cleanup running): read them one by one
                try:
                    out[v] = storage.read(p)
                except FileNotFoundError:
                    out[v] = None
    return out


def _read_checkpoint_state(storage: Storage, cp: CheckpointFiles, problems: list[Problem], note_paths) -> _Replay | None:
    name, v = cp.name, cp.version
    try:
        actions = read_checkpoint(storage, cp)
    except FileNotFoundError:
        problems.append(Problem("unreadable_checkpoint", f"checkpoint {name} vanished while being checked", v, name))
        return None
    except StorageUnavailableError:
        raise
    except LakelogError as e:
        problems.append(Problem("unreadable_checkpoint", f"{e}; readers fall back to an older checkpoint or the JSON commits", v, name))
        return None
    note_paths(actions, v, name)
    # A checkpoint keeps tombstones, and a file whose deletion vector changed has several (one per old
    # DV): they are not one commit's removes, so they are compared, not replayed.
    state = _Replay()
    try:
        state.apply([a for a in actions if type(a) is not RemoveFile])
    except InvalidPathError:
        return None  # reported by note_paths
    except CorruptLogError as e:
        problems.append(Problem("unreadable_checkpoint", f"checkpoint {name} is inconsistent: {e}", v, name))
        return None
    state.tombstones = {logical_file_key(decode_path(a.path), a): a for a in actions if type(a) is RemoveFile}
    live = [k for k in state.tombstones if k[0] in state.files and logical_file_key(k[0], state.files[k[0]]) == k]
    if live:
        problems.append(Problem("unreadable_checkpoint", f"checkpoint {name} both adds and removes {live[0][0]!r}", v, name))
        return None
    if state.protocol is None or state.metadata is None:
        problems.append(Problem("unreadable_checkpoint", f"checkpoint {name} has no protocol or metaData", v, name))
        return None
    return state


def _protocol_key(p) -> tuple | None:
    if p is None:  # JSON commits without a protocol action (reported as a reader would see them)
        return None
    return (p.min_reader_version, p.min_writer_version, sorted(p.reader_features or []), sorted(p.writer_features or []))


def _metadata_key(m) -> tuple | None:
    if m is None:
        return None
    try:
        schema: Any = orjson.loads(m.schema_string)
    except (orjson.JSONDecodeError, TypeError):
        schema = m.schema_string
    conf = {k: v for k, v in (m.configuration or {}).items() if v is not None}
    return (m.id, schema, list(m.partition_columns), conf, m.format_provider)


def _file_key(a: AddFile) -> tuple:
    return (a.size, tuple(sorted((k, v) for k, v in (a.partition_values or {}).items())), dv_id(a))


def _differences(replay: _Replay, checkpoint: _Replay) -> list[str]:
    out = []
    if _protocol_key(replay.protocol) != _protocol_key(checkpoint.protocol):
        out.append("the protocol differs")
    if _metadata_key(replay.metadata) != _metadata_key(checkpoint.metadata):
        out.append("the metadata differs")
    only_log = sorted(set(replay.files) - set(checkpoint.files))
    only_cp = sorted(set(checkpoint.files) - set(replay.files))
    changed = sorted(p for p in set(replay.files) & set(checkpoint.files) if _file_key(replay.files[p]) != _file_key(checkpoint.files[p]))
    if only_log:
        out.append(f"{len(only_log)} file(s) in the log are missing from the checkpoint (e.g. {only_log[0]!r})")
    if only_cp:
        out.append(f"{len(only_cp)} file(s) in the checkpoint are not in the log (e.g. {only_cp[0]!r})")
    if changed:
        out.append(f"{len(changed)} file(s) have another size, other partition values or another deletion vector (e.g. {changed[0]!r})")
    txns_log = {k: t.version for k, t in replay.txns.items()}
    txns_cp = {k: t.version for k, t in checkpoint.txns.items()}
    if txns_log != txns_cp:
        out.append("the txn (idempotent writer) versions differ")
    return out


def _is_hidden(name: str, partition_columns: set[str]) -> bool:
    """Delta's hidden-file rule: names starting with ``_`` or ``.``, except partition directories."""
    if not name.startswith(("_", ".")):
        return False
    return not any(name.startswith(f"{c}=") or name.startswith(f"{hive_escape(c)}=") for c in partition_columns)


__all__ = ["CheckReport", "Problem", "check_table"]

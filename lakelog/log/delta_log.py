"""The ``_delta_log`` directory: naming, listing, reading and writing versions.

File kinds in ``_delta_log`` (versions zero-padded to 20 digits):

* ``n.json``: the commit of version ``n``;
* ``n.checkpoint.parquet``: a classic checkpoint (V1 spec, or V2 spec with a ``checkpointMetadata`` row);
* ``n.checkpoint.o.p.parquet``: part ``o`` of a ``p``-part (multi-part) checkpoint, always V1 spec; a
  set with a missing part is incomplete and never used;
* ``n.checkpoint.<uuid>.json|parquet``: a UUID-named checkpoint, always V2 spec (its ``sidecar``
  actions name files in ``_delta_log/_sidecars/``);
* ``x.y.compacted.json``: a log compaction of commits ``x..y`` (optional; lakelog replays the commits
  themselves and never needs one);
* ``_last_checkpoint``: a hint naming a recent checkpoint (see ``lakelog.log.last_checkpoint``);
* ``n.crc``: the version checksum of version ``n`` (see ``lakelog.log.checksum``).

Anything else (Hadoop ``.*.crc`` side files, temp files of crashed writers) is ignored.
Listing never recurses: ``_sidecars/`` and ``_staged_commits/`` are not part of the log listing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import orjson

from ..actions import Action, parse_actions, serialize_actions
from ..errors import CorruptLogError, TableNotFoundError
from ..storage import FileInfo, Storage

if TYPE_CHECKING:  # commit_columns builds Arrow columns: history and listing need none of it
    from .commit_columns import ParsedCommit

COMMIT_RE = re.compile(r"^(\d{20})\.json$")
CHECKPOINT_RE = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
MULTIPART_RE = re.compile(r"^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$")
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
UUID_CHECKPOINT_RE = re.compile(rf"^(\d{{20}})\.checkpoint\.({_UUID})\.(json|parquet)$")
COMPACTED_RE = re.compile(r"^(\d{20})\.(\d{20})\.compacted\.json$")
CHECKSUM_RE = re.compile(r"^(\d{20})\.crc$")
LAST_CHECKPOINT = "_last_checkpoint"
SIDECARS = "_sidecars"
REPLAY_FETCH_COMMITS = 128  # commit files fetched at once while replaying


def commit_name(version: int) -> str:
    return f"{version:020d}.json"


def checkpoint_name(version: int) -> str:
    return f"{version:020d}.checkpoint.parquet"


def uuid_checkpoint_name(version: int, uuid: str, fmt: str = "parquet") -> str:
    return f"{version:020d}.checkpoint.{uuid}.{fmt}"


@dataclass(frozen=True)
class CheckpointFiles:
    """The files of one checkpoint of ``version``: ``kind`` is ``classic`` (one file, V1 or V2 spec),
    ``multipart`` (``parts`` files, V1 spec) or ``uuid`` (one file, V2 spec, ``fmt`` json or parquet).
    ``files`` are in part order; an incomplete multi-part set lists the parts present."""

    version: int
    kind: str
    files: tuple[FileInfo, ...]
    parts: int = 1
    fmt: str = "parquet"

    @property
    def name(self) -> str:
        """A name for messages: the file name, or the first part's name with the part count."""
        if self.kind == "multipart":
            return f"{self.version:020d}.checkpoint.*.{self.parts:010d}.parquet ({self.parts}-part checkpoint)"
        return self.files[0].name

    @property
    def complete(self) -> bool:
        return len(self.files) == self.parts

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


# Within one version, the checkpoint tried first: one file to read beats several.
_KIND_ORDER = {"classic": 0, "uuid": 1, "multipart": 2}


@dataclass
class LogListing:
    """One listing of ``_delta_log``: every later step of an operation reuses it.

    ``checkpoints`` maps a version to its complete checkpoints (several kinds may coexist for one
    version; any complete one describes the same state), in the order readers try them;
    ``incomplete_checkpoints`` are multi-part sets with missing parts, which readers ignore.
    """

    commits: dict[int, FileInfo] = field(default_factory=dict)
    checkpoints: dict[int, list[CheckpointFiles]] = field(default_factory=dict)
    incomplete_checkpoints: list[CheckpointFiles] = field(default_factory=list)
    compactions: dict[tuple[int, int], FileInfo] = field(default_factory=dict)
    checksums: dict[int, FileInfo] = field(default_factory=dict)  # version checksum files (``n.crc``)
    last_checkpoint: FileInfo | None = None
    listed_from: int = 0  # versions below it were not listed (``DeltaLog.list_latest``)

    @property
    def partial(self) -> bool:
        return self.listed_from > 0

    @property
    def latest_version(self) -> int | None:
        versions = list(self.commits) + list(self.checkpoints)
        return max(versions) if versions else None

    def commit_timestamps(self) -> dict[int, int]:
        """Commit time per version (ms): the commit file's modification time, made strictly increasing."""
        out: dict[int, int] = {}
        prev = None
        for v in sorted(self.commits):
            ts = self.commits[v].mtime_ms
            if prev is not None and ts <= prev:
                ts = prev + 1
            out[v] = ts
            prev = ts
        return out



_DATA_FILE_KINDS = {".csv": "CSV", ".tsv": "CSV", ".json": "JSON", ".jsonl": "JSON", ".ndjson": "JSON", ".txt": "text"}


def _what_file(path: str) -> str:
    """The diagnosis of a table path that names a file: what kind of file, and how its rows become a table."""
    name = path.lower()
    for suffix in (".gz", ".bz2", ".zst"):
        name = name.removesuffix(suffix)
    not_table = "not a table directory (a table is a directory holding _delta_log/)"
    if name.endswith((".parquet", ".pq")):
        return (
            f"it is a Parquet file, {not_table}. To make a table of Parquet files without copying them, put them in "
            "a directory and convert it with lakelog.convert(); or write their rows into a new table with lakelog.write_table()."
        )
    kind = next((k for ext, k in _DATA_FILE_KINDS.items() if name.endswith(ext)), None)
    if kind is not None:
        return f"it is a {kind} file, {not_table}. Write its rows into a new table with lakelog.write_table()."
    return f"it is a file, {not_table}. Check the path; a table's path is the directory above its _delta_log/."


class DeltaLog:
    def __init__(self, storage: Storage, explain_missing: bool = True):
        self.storage = storage
        # False where a missing table is expected (a write creating one): no listings to say why
        self.explain_missing = explain_missing

    def list(self, from_version: int = 0) -> LogListing:
        """List the log: all of it, or (``from_version`` > 0) only the files of versions >= ``from_version``
        (and the names after the versions: ``_last_checkpoint``), a partial listing."""
        listing = LogListing(listed_from=max(from_version, 0))
        found: list[CheckpointFiles] = []
        parts: dict[tuple[int, int], dict[int, FileInfo]] = {}
        start = "%020d" % from_version if from_version > 0 else ""
        for info in self.storage.list_log(start):
            name = info.name
            if m := COMMIT_RE.match(name):
                listing.commits[int(m.group(1))] = info
            elif m := CHECKPOINT_RE.match(name):
                found.append(CheckpointFiles(int(m.group(1)), "classic", (info,)))
            elif m := MULTIPART_RE.match(name):
                part, total = int(m.group(2)), int(m.group(3))
                if 1 <= part <= total and total > 1:  # anything else names no checkpoint
                    parts.setdefault((int(m.group(1)), total), {})[part] = info
            elif m := UUID_CHECKPOINT_RE.match(name):
                found.append(CheckpointFiles(int(m.group(1)), "uuid", (info,), fmt=m.group(3)))
            elif m := COMPACTED_RE.match(name):
                lo, hi = int(m.group(1)), int(m.group(2))
                if hi > lo:
                    listing.compactions[(lo, hi)] = info
            elif m := CHECKSUM_RE.match(name):
                listing.checksums[int(m.group(1))] = info
            elif name == LAST_CHECKPOINT:
                listing.last_checkpoint = info
        for (version, total), present in parts.items():
            cp = CheckpointFiles(version, "multipart", tuple(present[i] for i in sorted(present)), parts=total)
            (found if cp.complete else listing.incomplete_checkpoints).append(cp)
        for cp in sorted(found, key=lambda c: (c.version, _KIND_ORDER[c.kind], c.parts, c.files[0].name)):
            listing.checkpoints.setdefault(cp.version, []).append(cp)
        if not listing.commits and not listing.checkpoints:
            if listing.partial:
                return self.list()
            why = self._what_is_there() if self.explain_missing else f"{self.storage.log_dir} has no commits"
            raise TableNotFoundError(f"no table at {self.storage.uri!r}: {why}")
        return listing

    def list_latest(self) -> LogListing:
        """A listing enough to load the latest version: on stores that can begin a listing at a name, only
        from the checkpoint ``_last_checkpoint`` names (one small read, then a listing of the log's tail
        rather than of every commit ever kept); else, or without a usable hint, the whole log."""
        if not self.storage.store.lists_from:
            return self.list()
        hint = self.read_last_checkpoint()
        version = hint.get("version") if isinstance(hint, dict) else None
        if not isinstance(version, int) or isinstance(version, bool) or version <= 0:
            return self.list()
        listing = self.list(version)
        return listing if version in listing.checkpoints else self.list()

    def whole(self, listing: LogListing | None) -> LogListing:
        """``listing`` if it covers the whole log, else a fresh listing of all of it."""
        return listing if listing is not None and not listing.partial else self.list()

    def _what_is_there(self) -> str:
        """Why there is no table at the root: what the path is instead, and what to do about it.
        Only called when there is no table, so the few extra listings cost nothing on the happy path."""
        fs, root = self.storage.fs, self.storage.root
        create = "Check the path, or create a table there with lakelog.write_table()."
        try:
            fs.invalidate_cache()
            if not fs.exists(root):
                if not self.storage.store.scope_exists():
                    return f"{self.storage.store.missing_scope_text()}. Check the path and the endpoint"
                return f"the path does not exist. {create}"
            if fs.isfile(root):
                return _what_file(root)
            if fs.isdir(self.storage.log_dir):
                return f"{self.storage.log_dir} has no commits. {create}"
            if self._holds_parquet(root, depth=4):
                return (
                    "it is a plain Parquet directory (no _delta_log), not a table. Make it a table in place, "
                    "without copying data, with lakelog.convert()."
                )
            return f"the directory has no _delta_log. {create}"
        except Exception:  # noqa: BLE001 - the diagnosis is a courtesy; never hide the real error behind it
            return f"{self.storage.log_dir} has no commits. {create}"

    def _holds_parquet(self, directory: str, depth: int) -> bool:
        """Whether ``directory`` has a ``*.parquet`` file at its top or down ``k=v`` partition directories
        (one per level, so a huge tree costs a few listings), or a Spark ``_spark_metadata`` log."""
        entries = self.storage.fs.ls(directory, detail=True)
        names = {e["name"].rstrip("/").rsplit("/", 1)[-1]: e for e in entries}
        if any(n.endswith(".parquet") and e.get("type") != "directory" for n, e in names.items()) or "_spark_metadata" in names:
            return True
        sub = next((e["name"] for n, e in sorted(names.items()) if e.get("type") == "directory" and "=" in n), None)
        return depth > 1 and sub is not None and self._holds_parquet(sub.rstrip("/"), depth - 1)

    def read_commits(self, versions: list[int]) -> dict[int, list[Action]]:
        """Read and parse several commits with one bulk fetch."""
        return {v: parse_actions(data, commit_name(v)) for v, data in self._read_many(versions).items()}

    def read_commits_for_replay(self, versions: list[int]) -> Iterator[tuple[int, ParsedCommit]]:
        """(version, commit) in version order, each commit's adds as columns (``lakelog.log.commit_columns``):
        what replay needs. Bulk fetches of ``REPLAY_FETCH_COMMITS`` files, each file's bytes dropped once
        parsed: the bytes of a long log are never all in memory at once."""
        from .commit_columns import parse_commit

        versions = sorted(versions)
        for i in range(0, len(versions), REPLAY_FETCH_COMMITS):
            blobs = self._read_many(versions[i : i + REPLAY_FETCH_COMMITS])
            for v in sorted(blobs):
                yield v, parse_commit(blobs.pop(v), commit_name(v))

    def _read_many(self, versions: list[int]) -> dict[int, bytes]:
        if not versions:
            return {}
        paths = {self.storage.log_file(commit_name(v)): v for v in versions}
        try:
            blobs = self.storage.read_many(list(paths))
        except FileNotFoundError as e:
            raise CorruptLogError(f"log file disappeared while reading: {e}; retry the operation") from None
        return {paths[p]: data for p, data in blobs.items()}

    def read_commit(self, version: int) -> list[Action]:
        return self.read_commits([version])[version]

    def write_commit(self, version: int, actions: list[Action]) -> None:
        """Atomically create commit ``version``; FileExistsError if another writer created it first."""
        self.storage.put_if_absent(self.storage.log_file(commit_name(version)), serialize_actions(actions))

    def read_last_checkpoint(self) -> dict | None:
        try:
            return orjson.loads(self.storage.read(self.storage.log_file(LAST_CHECKPOINT)))
        except (FileNotFoundError, orjson.JSONDecodeError):
            return None

"""The ``_delta_log`` directory: naming, listing, reading and writing versions."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import orjson

from .actions import Action, parse_actions, serialize_actions
from .errors import CorruptLogError, TableNotFoundError
from .storage import FileInfo, Storage

COMMIT_RE = re.compile(r"^(\d{20})\.json$")
CHECKPOINT_RE = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
LAST_CHECKPOINT = "_last_checkpoint"


def commit_name(version: int) -> str:
    return f"{version:020d}.json"


def checkpoint_name(version: int) -> str:
    return f"{version:020d}.checkpoint.parquet"


@dataclass
class LogListing:
    """One listing of ``_delta_log``: every later step of an operation reuses it."""

    commits: dict[int, FileInfo] = field(default_factory=dict)
    checkpoints: dict[int, FileInfo] = field(default_factory=dict)
    last_checkpoint: FileInfo | None = None

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


class DeltaLog:
    def __init__(self, storage: Storage):
        self.storage = storage

    def list(self) -> LogListing:
        listing = LogListing()
        for info in self.storage.list_log():
            m = COMMIT_RE.match(info.name)
            if m:
                listing.commits[int(m.group(1))] = info
                continue
            m = CHECKPOINT_RE.match(info.name)
            if m:
                listing.checkpoints[int(m.group(1))] = info
            elif info.name == LAST_CHECKPOINT:
                listing.last_checkpoint = info
        if not listing.commits and not listing.checkpoints:
            raise TableNotFoundError(
                f"no table at {self.storage.uri!r}: {self.storage.log_dir} has no commits. "
                "Check the path, or create the table with lakelog.write_table()."
            )
        return listing

    def read_commits(self, versions: list[int]) -> dict[int, list[Action]]:
        """Read and parse several commits with one bulk fetch."""
        if not versions:
            return {}
        paths = {self.storage.log_file(commit_name(v)): v for v in versions}
        try:
            blobs = self.storage.read_many(list(paths))
        except FileNotFoundError as e:
            raise CorruptLogError(f"log file disappeared while reading: {e}; retry the operation") from None
        return {paths[p]: parse_actions(data, commit_name(paths[p])) for p, data in blobs.items()}

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

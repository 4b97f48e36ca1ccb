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
            raise TableNotFoundError(f"no table at {self.storage.uri!r}: {self._what_is_there()}")
        return listing

    def _what_is_there(self) -> str:
        """Why there is no table at the root: what the path is instead, and what to do about it.
        Only called when there is no table, so the few extra listings cost nothing on the happy path."""
        fs, root = self.storage.fs, self.storage.root
        create = "Check the path, or create a table there with lakelog.write_table()."
        try:
            fs.invalidate_cache()
            if not fs.exists(root):
                return f"the path does not exist. {create}"
            if fs.isfile(root):
                return (
                    "it is a file, not a table directory (a table is a directory holding _delta_log/). "
                    "To make a table from Parquet files, put them in a directory and convert it with lakelog.convert()."
                )
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

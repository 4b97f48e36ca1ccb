"""V2 spec checkpoints: the ``checkpointMetadata`` and ``sidecar`` actions, and sidecar files.

A V2 spec checkpoint (UUID-named ``n.checkpoint.<uuid>.json|parquet``, or a classic-named
``n.checkpoint.parquet`` that has a ``checkpointMetadata`` row) holds exactly one ``checkpointMetadata``
action and every non-file action of the snapshot; its ``add`` and ``remove`` actions are either inline
or in Parquet sidecar files under ``_delta_log/_sidecars/``, named by ``sidecar`` actions. The
checkpoint is the file plus all its sidecars: a missing or damaged sidecar makes it unusable.

This module reads sidecars (``read_sidecars``) and writes them row group by row group
(``SidecarWriter``); ``lakelog.checkpoint.write`` assembles whole checkpoints.
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.parquet as pq

from ..actions import now_ms, string_map
from ..errors import CorruptLogError
from ..log import SIDECARS
from ..parquet_read import parquet_file

_STR_MAP = pa.map_(pa.string(), pa.string())
CHECKPOINT_METADATA_TYPE = pa.struct([("version", pa.int64()), ("tags", _STR_MAP)])
SIDECAR_TYPE = pa.struct([("path", pa.string()), ("sizeInBytes", pa.int64()), ("modificationTime", pa.int64()), ("tags", _STR_MAP)])
SIDECAR_ROW_GROUP_ROWS = 65_536  # file actions per row group (and per batch held in memory while writing)
SIDECAR_MAX_ACTIONS = 1_000_000  # file actions per sidecar file
_READ_THREADS = 8


def _int(d: dict, key: str) -> int:
    v = d.get(key)
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{key} must be an integer, got {v!r}")
    return v


@dataclass(frozen=True)
class CheckpointMetadata:
    version: int
    tags: dict[str, str | None] | None = None

    def to_json(self) -> dict:
        d: dict[str, Any] = {"version": self.version}
        if self.tags:
            d["tags"] = dict(self.tags)
        return {"checkpointMetadata": d}

    @classmethod
    def from_json(cls, d: dict) -> "CheckpointMetadata":
        return cls(_int(d, "version"), string_map(d.get("tags"), "tags"))


@dataclass(frozen=True)
class Sidecar:
    """A ``sidecar`` action: ``path`` as logged (URI-encoded, normally just the file name)."""

    path: str
    size_in_bytes: int
    modification_time: int
    tags: dict[str, str | None] | None = None

    def to_json(self) -> dict:
        d: dict[str, Any] = {"path": self.path, "sizeInBytes": self.size_in_bytes, "modificationTime": self.modification_time}
        if self.tags:
            d["tags"] = dict(self.tags)
        return {"sidecar": d}

    @classmethod
    def from_json(cls, d: dict) -> "Sidecar":
        path = d.get("path")
        if not isinstance(path, str):
            raise TypeError(f"sidecar path must be a string, got {path!r}")
        return cls(path, _int(d, "sizeInBytes"), _int(d, "modificationTime"), string_map(d.get("tags"), "tags"))

    @property
    def name(self) -> str:
        """The sidecar's file name in ``_delta_log/_sidecars`` (the path decoded once)."""
        return sidecar_name(self.path)


def sidecar_name(logged: str) -> str:
    """The file name a ``sidecar.path`` names. Sidecars live only in the table's own
    ``_delta_log/_sidecars``: a plain name, or a path ending in ``_delta_log/_sidecars/<name>``;
    anything else (``..``, other directories) is a ``CorruptLogError``."""
    try:
        decoded = unquote(logged, errors="strict")
    except UnicodeDecodeError:
        decoded = ""
    name = decoded.rsplit("/", 1)[-1]
    inside = "/" not in decoded or decoded.rsplit("/", 3)[-3:-1] == ["_delta_log", SIDECARS]
    if not inside or name in ("", ".", "..") or "\\" in name or "\x00" in name:
        raise CorruptLogError(f"sidecar path {logged!r} does not name a file in _delta_log/{SIDECARS}/; the checkpoint is damaged")
    return name


def sidecar_file(storage, name: str) -> str:
    return storage.log_file(f"{SIDECARS}/{name}")


def _read_one(storage, sidecar: Sidecar, checkpoint: str, columns: list[str]) -> pa.Table:
    path = sidecar_file(storage, sidecar.name)
    try:
        with storage.open_input(path) as f:
            size = f.size()
            if size != sidecar.size_in_bytes:
                raise CorruptLogError(
                    f"sidecar {sidecar.name} of checkpoint {checkpoint} is {size} bytes but the checkpoint says "
                    f"{sidecar.size_in_bytes}: it was truncated or replaced"
                )
            pf = parquet_file(f)
            present = [c for c in columns if c in pf.schema_arrow.names]
            return pf.read(columns=present)
    except FileNotFoundError:
        raise CorruptLogError(f"sidecar {sidecar.name} of checkpoint {checkpoint} is missing from _delta_log/{SIDECARS}/") from None
    except (OSError, pa.ArrowException) as e:
        storage.raise_if_unanswered(e, path)
        raise CorruptLogError(f"sidecar {sidecar.name} of checkpoint {checkpoint} is unreadable ({e})") from None


def read_sidecars(storage, sidecars: list[Sidecar], checkpoint: str, columns: tuple[str, ...] = ("add", "remove")) -> list[pa.Table]:
    """The ``columns`` of every sidecar (those a sidecar has), read in parallel, in order. A missing,
    resized or unreadable sidecar is a ``CorruptLogError`` naming it and the checkpoint."""
    if not sidecars:
        return []
    cols = list(columns)
    if len(sidecars) == 1:
        return [_read_one(storage, sidecars[0], checkpoint, cols)]
    with ThreadPoolExecutor(min(_READ_THREADS, len(sidecars))) as pool:
        return list(pool.map(lambda s: _read_one(storage, s, checkpoint, cols), sidecars))


class SidecarWriter:
    """Writes file actions (tables with ``add`` and ``remove`` columns of ``schema``) into sidecar files
    of the checkpoint of ``version``, each batch as one row group, a new file every ``max_actions``
    actions. Memory: the batch being written plus the Parquet writer's buffers, whatever the total.

    ``close()`` returns the ``sidecar`` actions of the files written; ``abort()`` deletes them.
    """

    def __init__(self, storage, version: int, schema: pa.Schema, max_actions: int | None = None):
        self.storage, self.version, self.schema = storage, version, schema
        self.max_actions = SIDECAR_MAX_ACTIONS if max_actions is None else max_actions
        self.sidecars: list[Sidecar] = []
        self.paths: list[str] = []
        self.num_actions = 0
        self._writer: pq.ParquetWriter | None = None
        self._sink = None
        self._name = ""
        self._in_file = 0

    def _open(self) -> None:
        self._name = f"{self.version:020d}.checkpoint.{len(self.sidecars) + 1:010d}.{uuid.uuid4()}.parquet"
        path = sidecar_file(self.storage, self._name)
        if not self.paths:
            self.storage.makedirs(self.storage.log_file(SIDECARS))
        self.paths.append(path)
        self._sink = self.storage.open_output(path)
        self._writer = pq.ParquetWriter(self._sink, self.schema, compression="snappy")
        self._in_file = 0

    def _finish_file(self) -> None:
        self._writer.close()
        size = self._sink.tell()
        self._sink.close()
        self.sidecars.append(Sidecar(quote(self._name), size, now_ms()))
        self._writer = self._sink = None

    def write(self, batch: pa.Table) -> None:
        step = SIDECAR_ROW_GROUP_ROWS
        for start in range(0, batch.num_rows, step):
            part = batch.slice(start, step)
            while part.num_rows:
                if self._writer is None:
                    self._open()
                room = self.max_actions - self._in_file
                chunk, part = part.slice(0, room), part.slice(room)
                self._writer.write_table(chunk, row_group_size=step)
                self._in_file += chunk.num_rows
                self.num_actions += chunk.num_rows
                if self._in_file >= self.max_actions:
                    self._finish_file()

    def close(self) -> list[Sidecar]:
        if self._writer is not None:
            self._finish_file()
        return list(self.sidecars)

    def abort(self) -> None:
        """Best effort: the sidecars are not referenced by any checkpoint yet, so removing them is safe
        (metadata cleanup would delete them a day later otherwise)."""
        try:
            if self._writer is not None:
                self._writer.close()
                self._sink.close()
        except Exception:  # noqa: BLE001 - already failing; the original error matters
            pass
        for path in self.paths:
            try:
                self.storage.delete(path)
            except Exception:  # noqa: BLE001
                pass

"""Storage access through fsspec, with the put-if-absent primitive commits rely on.

Commits never use rename: on the local filesystem a temp file is hard-linked to the final name
(``os.link`` fails if the name exists); on object stores the file is written directly with a
conditional PUT (``If-None-Match: *``, fsspec ``mode="create"``).
"""

from __future__ import annotations

import datetime as dt
import os
import threading
import uuid
from dataclasses import dataclass
from typing import Any

import fsspec
import pyarrow.fs as pafs

from .errors import StorageError

# Protocols whose put-if-absent is atomic (two writers cannot both create the same name).
_ATOMIC_CREATE = {"file", "local", "s3", "s3a", "memory"}
_memory_lock = threading.Lock()


@dataclass(frozen=True)
class FileInfo:
    name: str  # base name
    path: str  # fs-native full path
    size: int
    mtime_ms: int


def _mtime_ms(entry: dict) -> int:
    for key in ("mtime", "LastModified", "last_modified", "created", "updated"):
        v = entry.get(key)
        if v is None:
            continue
        if isinstance(v, dt.datetime):
            return int(v.timestamp() * 1000)
        if isinstance(v, str):
            return int(dt.datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp() * 1000)
        return int(float(v) * 1000)
    return 0


class Storage:
    """A table root on some fsspec filesystem.

    ``storage_options`` go to ``fsspec.filesystem(protocol, **storage_options)``; the key
    ``"lakelog.single_writer"`` (not passed on) allows committing on stores without atomic
    put-if-absent, which is only safe when a single process ever writes the table.
    """

    def __init__(self, uri: str, storage_options: dict[str, Any] | None = None):
        opts = dict(storage_options or {})
        self.single_writer = str(opts.pop("lakelog.single_writer", "false")).lower() in ("1", "true", "yes")
        uri = os.fspath(uri)
        self.fs, root = fsspec.core.url_to_fs(uri, **opts)
        protos = self.fs.protocol if isinstance(self.fs.protocol, (tuple, list)) else (self.fs.protocol,)
        self.protocol = protos[0]
        self.is_local = "file" in protos or "local" in protos
        self.uri = uri
        self.root = root.rstrip("/") if root not in ("/", "") else root
        self.log_dir = self.join("_delta_log")
        self._arrow_fs: pafs.FileSystem | None = None

    # ------------------------------------------------------------ paths
    def join(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *[p.strip("/") for p in parts if p]])

    def log_file(self, name: str) -> str:
        return f"{self.log_dir}/{name}"

    @property
    def arrow_fs(self) -> pafs.FileSystem:
        if self._arrow_fs is None:
            if self.is_local:
                self._arrow_fs = pafs.LocalFileSystem()
            else:
                self._arrow_fs = pafs.PyFileSystem(pafs.FSSpecHandler(self.fs))
        return self._arrow_fs

    # ------------------------------------------------------------ reads
    def read(self, path: str) -> bytes:
        return self.fs.cat_file(path)

    def exists(self, path: str) -> bool:
        return self.fs.exists(path)

    def list_dir(self, path: str) -> list[FileInfo]:
        """List files directly in ``path`` (fresh, no cached listing); missing dir -> []."""
        self.fs.invalidate_cache(path)
        try:
            entries = self.fs.ls(path, detail=True)
        except (FileNotFoundError, NotADirectoryError):
            return []
        out = []
        for e in entries:
            if e.get("type") == "directory":
                continue
            name = e["name"].rstrip("/")
            out.append(FileInfo(name.rsplit("/", 1)[-1], name, int(e.get("size") or 0), _mtime_ms(e)))
        return out

    def list_log(self) -> list[FileInfo]:
        return self.list_dir(self.log_dir)

    # ------------------------------------------------------------ writes
    def check_atomic_commits(self) -> None:
        if self.protocol not in _ATOMIC_CREATE and not self.single_writer:
            raise StorageError(
                f"the {self.protocol!r} filesystem has no atomic put-if-absent, so concurrent commits could "
                "overwrite each other. Use a local path, s3:// or memory://, or pass "
                "storage_options={'lakelog.single_writer': 'true'} if only one process ever writes this table."
            )

    def put_if_absent(self, path: str, data: bytes) -> None:
        """Create ``path`` with ``data`` atomically; raise FileExistsError if it already exists."""
        self.check_atomic_commits()
        if self.is_local:
            self._local_link_create(path, data)
        elif self.protocol == "memory":
            with _memory_lock:
                self.fs.pipe_file(path, data, mode="create")
        elif self.protocol in ("s3", "s3a"):
            self.fs.pipe_file(path, data, mode="create")
            self.fs.invalidate_cache(path.rsplit("/", 1)[0])
        else:
            if self.fs.exists(path):
                raise FileExistsError(path)
            self.fs.pipe_file(path, data)

    def put(self, path: str, data: bytes) -> None:
        """Write (or replace) ``path`` so readers see the old or the new content, never a torn one."""
        if self.is_local:
            tmp = self._local_temp(path, data)
            os.replace(tmp, path)  # a hint file may be replaced; commits never go through here
        else:
            self.fs.pipe_file(path, data)

    def makedirs(self, path: str) -> None:
        if self.is_local:
            os.makedirs(path, exist_ok=True)
        else:
            self.fs.makedirs(path, exist_ok=True)

    def delete(self, path: str) -> None:
        self.fs.rm_file(path)

    def _local_temp(self, path: str, data: bytes) -> str:
        d, name = os.path.split(path)
        os.makedirs(d, exist_ok=True)
        tmp = os.path.join(d, f".{name}.{uuid.uuid4().hex}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        return tmp

    def _local_link_create(self, path: str, data: bytes) -> None:
        tmp = self._local_temp(path, data)
        try:
            os.link(tmp, path)  # atomic: fails with FileExistsError when another writer won
        finally:
            os.unlink(tmp)
        dfd = os.open(os.path.dirname(path), os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

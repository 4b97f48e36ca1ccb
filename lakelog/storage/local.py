"""The local filesystem: commits are hard links of a fsynced temp file (``os.link`` fails if the name exists)."""

from __future__ import annotations

import errno
import os
import uuid

import pyarrow.fs as pafs

from ..errors import StorageError
from .base import Store, exists_error


class LocalStore(Store):
    atomic_create = True

    def arrow_fs(self) -> pafs.FileSystem:
        return pafs.LocalFileSystem()

    def put(self, path: str, data: bytes) -> None:
        tmp = _temp_file(path, data)
        os.replace(tmp, path)  # a hint file may be replaced; commits never go through here

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def create(self, path: str, data: bytes) -> None:
        self.put_if_absent(path, data, single_writer=False)

    def put_if_absent(self, path: str, data: bytes, single_writer: bool) -> None:
        if os.path.lexists(path):  # cheap early answer for a writer that is behind; os.link decides
            raise exists_error(path)
        tmp = _temp_file(path, data)
        try:
            os.link(tmp, path)  # atomic: fails with FileExistsError when another writer won
        except FileExistsError:
            raise
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS):
                raise
            if not single_writer:
                raise StorageError(
                    f"the filesystem holding {os.path.dirname(path)!r} does not support hard links ({e}), which lakelog "
                    "uses for atomic put-if-absent commits. Put the table on another filesystem, or pass "
                    "storage_options={'lakelog.single_writer': 'true'} if only one process ever writes this table."
                ) from e
            if os.path.lexists(path):
                raise exists_error(path) from None
            os.replace(tmp, path)  # single writer: nobody else creates this name
        finally:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        dfd = os.open(os.path.dirname(path), os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def _temp_file(path: str, data: bytes) -> str:
    """``data`` written and fsynced to a new hidden file beside ``path``; its name."""
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

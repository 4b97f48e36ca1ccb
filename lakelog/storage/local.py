"""The local filesystem: commits are hard links of a fsynced temp file (``os.link`` fails if the name exists).

Reading and listing the log go straight to ``os``: fsspec (which imports asyncio and ssl) is imported
only when something asks for the filesystem object (``fs``), as data file operations do."""

from __future__ import annotations

import errno
import os
import uuid
from typing import TYPE_CHECKING, Any

from ..errors import StorageError
from .base import FileInfo, Store, exists_error

if TYPE_CHECKING:
    import pyarrow.fs as pafs


class LocalStore(Store):
    atomic_create = True

    @classmethod
    def at(cls, location: str) -> "LocalStore | None":
        """The store of a plain local path, opened without fsspec (its root as fsspec names it), or None
        where only fsspec knows (a URL, a name with a colon, a non-POSIX system)."""
        if os.sep != "/" or ":" in location or not location:
            return None
        if location.startswith("~"):
            path = os.path.expanduser(location)
        elif location.startswith("/"):
            path = location
        else:
            rest = "" if location == "." else location.removeprefix("./")
            path = f"{os.getcwd()}/{rest}"
        return cls(None, path.rstrip("/") or "/")

    @property
    def fs(self) -> Any:
        if self._fs is None:
            from fsspec.implementations.local import LocalFileSystem

            self._fs = LocalFileSystem(use_listings_cache=False)  # as fsspec.core.url_to_fs opens it for Store.connect
        return self._fs

    @fs.setter
    def fs(self, fs: Any) -> None:
        self._fs = fs

    @property
    def protocols(self) -> tuple[str, ...]:
        return ("file", "local")

    def read(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def read_each(self, paths: list[str], on_error: str) -> list:
        out: list = []
        for p in paths:
            try:
                out.append(self.read(p))
            except Exception as e:  # noqa: BLE001 - as fsspec's cat_ranges: the error in its place
                if on_error == "raise":
                    raise
                out.append(e)
        return out

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def list_dir(self, path: str) -> list[FileInfo]:
        """As fsspec's ``ls``: a symbolic link counts as a file (its target's size, the link's time)."""
        if not os.path.isdir(path):
            st = os.stat(path)  # FileNotFoundError when missing; a file lists as itself, as in fsspec
            return [FileInfo(path.rsplit("/", 1)[-1], path, st.st_size, int(st.st_mtime * 1000))]
        out = []
        prefix = path.rstrip("/") + "/"
        with os.scandir(path) as entries:
            for e in entries:
                try:
                    if e.is_dir(follow_symlinks=False):
                        continue
                    st = e.stat(follow_symlinks=False)
                    size = st.st_size
                    if e.is_symlink():
                        try:
                            size = e.stat(follow_symlinks=True).st_size
                        except OSError:
                            size = 0
                except FileNotFoundError:
                    continue  # removed while listing
                out.append(FileInfo(e.name, prefix + e.name, size, int(st.st_mtime * 1000)))
        return out

    def arrow_fs(self) -> pafs.FileSystem:
        import pyarrow.fs as pafs

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

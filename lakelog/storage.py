"""Storage access through fsspec, with the put-if-absent primitive commits rely on.

Commits never use rename: on the local filesystem a temp file is hard-linked to the final name
(``os.link`` fails if the name exists); on object stores the file is written directly with a
conditional PUT (``If-None-Match: *``, fsspec ``mode="create"``). Before the first commit to an S3
bucket, a process checks once that the endpoint really refuses a second conditional PUT of the same
object (some S3-compatible stores ignore the header), and refuses to commit if it does not.

``storage_options`` keys that start with ``lakelog.`` are lakelog's own and are not passed to fsspec:

* ``lakelog.single_writer`` ("true"/"false"): allow committing on a store without atomic
  put-if-absent. Only safe when a single process ever writes the table.
* ``lakelog.max_commit_attempts`` (int): how many times a commit may lose the race for a version
  before giving up with ``CommitConflictError`` (default: ``transaction.DEFAULT_MAX_ATTEMPTS``).
* ``lakelog.fault_injector`` (callable, for tests): ``injector(op, path)`` is called before every storage
  operation (``OPS``), and ``injector(op + ":done", path)`` after a ``put_if_absent``, ``put`` or
  ``delete`` succeeded. Whatever it raises propagates as if the store had failed: raised before, the
  operation did not happen; raised at ``":done"``, it happened but its reply was lost.

The injection points are the public methods of ``Storage`` (``read``, ``read_many``, ``exists``,
``list_dir``, ``list_files``, ``open_input``, ``open_output``, ``put_if_absent``, ``put``, ``delete``,
``makedirs``). The write path uses them for the log listing, checkpoint reads, data files
(``open_output``), commits, checkpoints and ``_last_checkpoint``. Scans read data files through
pyarrow datasets on ``arrow_fs`` and are not injection points.
"""

from __future__ import annotations

import datetime as dt
import errno
import os
import re
import threading
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow.fs as pafs

from .errors import InvalidArgumentError, InvalidArgumentTypeError, StorageError

# Protocols whose put-if-absent is atomic (two writers cannot both create the same name).
_ATOMIC_CREATE = {"file", "local", "s3", "s3a", "memory"}
_memory_lock = threading.Lock()
_LAKELOG_OPTIONS = ("lakelog.single_writer", "lakelog.max_commit_attempts", "lakelog.fault_injector")
# Operations reported to a fault injector (``lakelog.fault_injector``); those in DONE_OPS are reported
# again as "<op>:done" once they succeeded.
OPS = ("read", "read_many", "exists", "list_dir", "list_files", "open_input", "open_output", "put_if_absent", "put", "delete", "makedirs")
DONE_OPS = ("put_if_absent", "put", "delete")
# (filesystem token, bucket) pairs whose conditional PUT was checked in this process.
_verified_conditional_put: set[tuple[str, str]] = set()
_verify_lock = threading.Lock()


class ConditionalWriteConflict(OSError):
    """The store refused a conditional create because another conditional write of the same object was
    in progress (S3: 409 ``ConditionalRequestConflict``). Nothing was written by this request; the
    object may or may not exist now, so the caller looks again and retries."""


def _client_error_info(e: BaseException) -> tuple[str, int | None]:
    """(error code, HTTP status) of the botocore ClientError behind an s3fs exception, if any."""
    seen = 0
    while e is not None and seen < 5:
        resp = getattr(e, "response", None)
        if isinstance(resp, dict):
            code = str((resp.get("Error") or {}).get("Code") or "")
            status = (resp.get("ResponseMetadata") or {}).get("HTTPStatusCode")
            return code, int(status) if status is not None else None
        e = e.__cause__ or e.__context__
        seen += 1
    return "", None


def _is_precondition_failed(e: BaseException) -> bool:
    code, status = _client_error_info(e)
    return code == "PreconditionFailed" or status == 412


def _is_conditional_conflict(e: BaseException) -> bool:
    code, status = _client_error_info(e)
    return code == "ConditionalRequestConflict" or status == 409 or "ConditionalRequestConflict" in str(e)


def _rejects_conditional_header(e: BaseException) -> bool:
    """The store answered that it does not implement the conditional header (rather than failing otherwise)."""
    code, status = _client_error_info(e)
    return code in ("NotImplemented", "InvalidArgument") or status == 501 or getattr(e, "errno", None) == errno.ENOSYS


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


_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):(.*)$", re.DOTALL)


def resolve_location(uri: str) -> str:
    """The location fsspec opens for the table ``uri``, naming the same place delta-rs does.

    A URL's path is percent-decoded once, as delta-rs (object_store) decodes it: ``file:///tmp/my%20table``
    is the directory ``/tmp/my table`` and ``s3://bucket/my%20table`` the prefix ``my table``.
    ``file:/abs`` and ``file://localhost/abs`` are local paths too. A plain path is taken literally
    (``~`` expands, a relative path is relative to the working directory). Refused, with
    ``InvalidArgumentError``: a ``file:`` URL with another host or a relative path, a query or fragment
    (percent-encode ``?`` and ``#`` in names), and escapes that are not UTF-8.
    """
    m = _SCHEME_RE.match(uri)
    if not m or "::" in uri:
        return uri  # a plain path (a Windows drive letter is one character), or an fsspec chained URL
    scheme = m.group(1).lower()
    parts = urlsplit(uri)
    if parts.query or parts.fragment or uri.endswith(("?", "#")):
        raise InvalidArgumentError(
            f"table location {uri!r} has a query or fragment ('?' or '#'), which table locations do not take; "
            "percent-encode '?' as %3F and '#' as %23 if they are part of a name"
        )
    try:
        path = unquote(parts.path, errors="strict")
        host = unquote(parts.netloc, errors="strict")
    except UnicodeDecodeError:
        raise InvalidArgumentError(f"table location {uri!r} has percent-escapes that are not UTF-8") from None
    if scheme in ("file", "local"):
        if parts.netloc not in ("", "localhost"):
            raise InvalidArgumentError(
                f"table location {uri!r} names the host {parts.netloc!r}; file URLs name local paths: "
                "file:///absolute/path (three slashes), or a plain path"
            )
        if not path.startswith("/"):
            raise InvalidArgumentError(f"table location {uri!r} is a relative file URL; use file:///absolute/path or a plain path")
        return path
    if not uri[len(m.group(1)) + 1 :].startswith("//"):
        return uri  # not a URL with an authority (e.g. a local file name with a colon)
    return f"{scheme}://{host}{path}"


class Storage:
    """A table root on some fsspec filesystem.

    ``storage_options`` go to ``fsspec.filesystem(protocol, **storage_options)``, except the
    ``lakelog.*`` keys described in this module's docstring (``lakelog.single_writer`` allows
    committing on stores without atomic put-if-absent, which is only safe when a single process ever
    writes the table; ``lakelog.max_commit_attempts`` bounds the commit retries;
    ``lakelog.fault_injector`` is the tests' hook into every operation, see ``_before``).
    """

    def __init__(self, uri: str, storage_options: dict[str, Any] | None = None):
        if not isinstance(uri, (str, os.PathLike)):
            raise InvalidArgumentTypeError(f"a table path must be a str (a local path or a URL) or a path object, not {type(uri).__name__}: {uri!r}")
        if storage_options is not None and not isinstance(storage_options, dict):
            raise InvalidArgumentTypeError(
                f"storage_options must be a dict of fsspec options (e.g. {{'endpoint_url': ...}}), not {type(storage_options).__name__}"
            )
        opts = dict(storage_options or {})
        unknown = sorted(k for k in opts if isinstance(k, str) and k.startswith("lakelog.") and k not in _LAKELOG_OPTIONS)
        if unknown:
            raise InvalidArgumentError(f"unknown lakelog storage option(s) {unknown}; known: {list(_LAKELOG_OPTIONS)}")
        self.single_writer = str(opts.pop("lakelog.single_writer", "false")).lower() in ("1", "true", "yes")
        self.fault_injector = opts.pop("lakelog.fault_injector", None)
        if self.fault_injector is not None and not callable(self.fault_injector):
            raise InvalidArgumentError(f"lakelog.fault_injector must be a callable(op, path), not {self.fault_injector!r}")
        attempts = opts.pop("lakelog.max_commit_attempts", None)
        try:
            self.max_commit_attempts: int | None = None if attempts in (None, "") else int(attempts)
        except (TypeError, ValueError):
            raise InvalidArgumentError(f"lakelog.max_commit_attempts must be a positive integer, not {attempts!r}") from None
        if self.max_commit_attempts is not None and self.max_commit_attempts < 1:
            raise InvalidArgumentError(f"lakelog.max_commit_attempts must be a positive integer, not {attempts!r}")
        uri = os.fspath(uri)
        location = resolve_location(uri)
        # No listings cache: lakelog always needs the store's current answer. With s3fs's cache, a listing
        # of a directory (vacuum, check) made later reads treat files created since then as missing.
        opts.setdefault("use_listings_cache", False)
        import fsspec  # here, not at module level: keeps ``import lakelog`` cheap (fsspec pulls in ssl and asyncio)

        try:
            self.fs, root = fsspec.core.url_to_fs(location, **opts)
        except TypeError:  # a filesystem class that does not take the option
            opts.pop("use_listings_cache")
            self.fs, root = fsspec.core.url_to_fs(location, **opts)
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

    # ------------------------------------------------------------ fault injection
    def _before(self, op: str, path: str) -> None:
        """The injection point every public operation passes before touching the store.

        With ``lakelog.fault_injector`` set, it is called as ``injector(op, path)``; an exception it raises
        fails the operation before anything happened. Without one this does nothing.
        """
        if self.fault_injector is not None:
            self.fault_injector(op, path)

    def _after(self, op: str, path: str) -> None:
        """Called once a write operation succeeded: ``injector(op + ":done", path)`` (a lost reply)."""
        if self.fault_injector is not None:
            self.fault_injector(f"{op}:done", path)

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
        self._before("read", path)
        return self.fs.cat_file(path)

    def read_many(self, paths: list[str]) -> dict[str, bytes]:
        """Read several files in one bulk fetch: {path as given: bytes}; FileNotFoundError if one is missing."""
        if not paths:
            return {}
        self._before("read_many", paths[0])
        return dict(zip(paths, self.read_each(paths, on_error="raise")))

    def read_each(self, paths: list[str], on_error: str = "raise") -> list:
        """The bytes of each of ``paths``, in order, fetched concurrently where the store allows; with
        ``on_error="return"`` a failed read is its exception in the list. Never globs: fsspec's ``cat``
        expands ``[``, ``*`` and ``?`` in paths, which a table path may hold."""
        return self.fs.cat_ranges(list(paths), None, None, on_error=on_error)

    def exists(self, path: str) -> bool:
        self._before("exists", path)
        return self.fs.exists(path)

    def open_input(self, path: str):
        """A seekable binary input file (pyarrow ``NativeFile``) for reading ``path``."""
        self._before("open_input", path)
        return self.arrow_fs.open_input_file(path)

    def open_output(self, path: str):
        """A binary output stream (pyarrow ``NativeFile``) creating or replacing ``path``.

        Used for data files only: they become visible when a commit names them, never by being written.
        """
        self._before("open_output", path)
        return self.arrow_fs.open_output_stream(path)

    def list_files(self, path: str) -> list[FileInfo]:
        """Every file under ``path``, recursively (fresh listing; ``FileInfo.name`` is the path relative to
        ``path``); a missing directory -> []."""
        self._before("list_files", path)
        base = path.rstrip("/")
        self.fs.invalidate_cache(base)
        try:
            found = self.fs.find(base, detail=True, withdirs=False)
        except (FileNotFoundError, NotADirectoryError):
            return []
        out = []
        prefix = base + "/"
        for name, e in found.items():
            name = name.rstrip("/")
            if e.get("type") == "directory" or not name.startswith(prefix):
                continue
            out.append(FileInfo(name[len(prefix):], name, int(e.get("size") or 0), _mtime_ms(e)))
        return out

    def list_dir(self, path: str) -> list[FileInfo]:
        """List files directly in ``path`` (fresh, no cached listing); missing dir -> []."""
        self._before("list_dir", path)
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
    @property
    def is_s3(self) -> bool:
        return self.protocol in ("s3", "s3a")

    def check_atomic_commits(self) -> None:
        """Raise StorageError unless commits to this store are safe against concurrent writers.

        Known stores only; on S3 the endpoint is also probed once per process and bucket: a store that
        accepts a second conditional PUT of the same object cannot do put-if-absent.
        """
        if self.protocol not in _ATOMIC_CREATE:
            if not self.single_writer:
                raise StorageError(
                    f"the {self.protocol!r} filesystem has no atomic put-if-absent, so concurrent commits could "
                    "overwrite each other. Use a local path, s3:// or memory://, or pass "
                    "storage_options={'lakelog.single_writer': 'true'} if only one process ever writes this table."
                )
            return
        if self.is_s3 and not self.single_writer:
            self._verify_conditional_put()

    def put_if_absent(self, path: str, data: bytes) -> None:
        """Create ``path`` with ``data`` atomically; raise FileExistsError if it already exists.

        On S3 a ``ConditionalWriteConflict`` (409) means nothing was written by this call; other
        OSErrors leave the outcome unknown (the object may have been created): callers look again.
        """
        self.check_atomic_commits()
        self._before("put_if_absent", path)
        self._put_if_absent(path, data)
        self._after("put_if_absent", path)

    def _put_if_absent(self, path: str, data: bytes) -> None:
        if self.is_local:
            self._local_link_create(path, data)
        elif self.protocol == "memory":
            with _memory_lock:
                self.fs.pipe_file(path, data, mode="create")
        elif self.is_s3:
            if self.single_writer and self.fs.exists(path):
                raise FileExistsError(errno.EEXIST, f"{path} already exists", path)  # the store may ignore If-None-Match
            try:
                self._s3_create(path, data)
            except OSError as e:
                if not (self.single_writer and _rejects_conditional_header(e)):
                    raise
                self.fs.pipe_file(path, data)  # single writer on a store that rejects conditional PUT
        else:
            self._unsafe_create(path, data)

    def _unsafe_create(self, path: str, data: bytes) -> None:
        """Check-then-write: only used with ``lakelog.single_writer`` on stores without put-if-absent."""
        if self.fs.exists(path):
            raise FileExistsError(path)
        # The first commit creates _delta_log: stores with real directories (a local disk behind
        # fsspec's dir:// or a mounted filesystem) need it to exist before a file is written into it.
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        self.fs.pipe_file(path, data)

    def _s3_create(self, path: str, data: bytes) -> None:
        """One conditional PUT (``If-None-Match: *``), with the store's answers made typed."""
        try:
            self.fs.pipe_file(path, data, mode="create")
        except FileExistsError:
            raise
        except OSError as e:
            if _is_precondition_failed(e):  # 412 without the Condition detail s3fs looks for
                raise FileExistsError(errno.EEXIST, f"{path} already exists", path) from e
            if _is_conditional_conflict(e):
                raise ConditionalWriteConflict(errno.EBUSY, f"concurrent conditional write to {path}: {e}", path) from e
            raise
        finally:
            self.fs.invalidate_cache(path.rsplit("/", 1)[0])

    def _verify_conditional_put(self) -> None:
        bucket = self.root.lstrip("/").split("/", 1)[0]
        key = (str(getattr(self.fs, "_fs_token", id(self.fs))), bucket)
        if key in _verified_conditional_put:
            return
        with _verify_lock:
            if key in _verified_conditional_put:
                return
            probe = self.log_file(f".lakelog-put-if-absent-probe-{uuid.uuid4().hex}")
            advice = (
                "Use an S3 service that supports conditional writes (AWS S3 does since 2024), or pass "
                "storage_options={'lakelog.single_writer': 'true'} if only one process ever writes this table."
            )
            try:
                try:
                    self._s3_create(probe, b"1")
                except OSError as e:
                    if _rejects_conditional_header(e):
                        raise StorageError(
                            f"the S3 endpoint for bucket {bucket!r} does not support conditional PUT (If-None-Match: *): "
                            f"{e}. lakelog cannot commit safely there. {advice}"
                        ) from e
                    raise
                try:
                    self._s3_create(probe, b"2")
                except (FileExistsError, ConditionalWriteConflict):
                    _verified_conditional_put.add(key)
                    return
                raise StorageError(
                    f"the S3 endpoint for bucket {bucket!r} ignores If-None-Match: * (a second conditional PUT of the same "
                    f"object succeeded), so it has no put-if-absent and concurrent commits could overwrite each other. {advice}"
                )
            finally:
                try:
                    self.fs.rm_file(probe)
                except Exception:
                    pass

    def put(self, path: str, data: bytes) -> None:
        """Write (or replace) ``path`` so readers see the old or the new content, never a torn one."""
        self._before("put", path)
        if self.is_local:
            tmp = self._local_temp(path, data)
            os.replace(tmp, path)  # a hint file may be replaced; commits never go through here
        else:
            self.fs.pipe_file(path, data)
        self._after("put", path)

    def makedirs(self, path: str) -> None:
        self._before("makedirs", path)
        if self.is_local:
            os.makedirs(path, exist_ok=True)
        else:
            self.fs.makedirs(path, exist_ok=True)

    def delete(self, path: str) -> None:
        self._before("delete", path)
        self.fs.rm_file(path)
        self._after("delete", path)

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
        if os.path.lexists(path):  # cheap early answer for a writer that is behind; os.link decides
            raise FileExistsError(errno.EEXIST, f"{path} already exists", path)
        tmp = self._local_temp(path, data)
        try:
            os.link(tmp, path)  # atomic: fails with FileExistsError when another writer won
        except FileExistsError:
            raise
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS):
                raise
            if not self.single_writer:
                raise StorageError(
                    f"the filesystem holding {os.path.dirname(path)!r} does not support hard links ({e}), which lakelog "
                    "uses for atomic put-if-absent commits. Put the table on another filesystem, or pass "
                    "storage_options={'lakelog.single_writer': 'true'} if only one process ever writes this table."
                ) from e
            if os.path.lexists(path):
                raise FileExistsError(errno.EEXIST, f"{path} already exists", path) from None
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

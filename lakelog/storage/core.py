"""``Storage``: a table root on some store, with lakelog's options and the fault-injection points."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgumentError, InvalidArgumentTypeError, StorageError, StorageUnavailableError
from .base import FileInfo, Store, _mtime_ms
from .conditional import SINGLE_WRITER_ADVICE, verify_conditional_create
from .local import LocalStore
from .location import CATALOG_SCHEMES, resolve_location, url_scheme
from .memory import MemoryStore
from .policy import unanswered
from .s3 import S3Store
from .upload import BufferedUpload

if TYPE_CHECKING:  # pyarrow is imported where a file is opened: listing and reading the log need none of it
    import pyarrow.fs as pafs

_LAKELOG_OPTIONS = ("lakelog.single_writer", "lakelog.max_commit_attempts", "lakelog.fault_injector")
# Operations reported to a fault injector (``lakelog.fault_injector``); those in DONE_OPS are reported
# again as "<op>:done" once they succeeded.
OPS = ("read", "read_many", "exists", "list_dir", "list_files", "open_input", "open_output", "put_if_absent", "put", "delete", "makedirs")
DONE_OPS = ("put_if_absent", "put", "delete")
AZURE_SCHEMES = ("az", "abfs", "abfss")
GCS_SCHEMES = ("gs", "gcs")
S3_SCHEMES = ("s3", "s3a")
_BY_PROTOCOL: dict[str, type[Store]] = {"file": LocalStore, "local": LocalStore, "memory": MemoryStore, "s3": S3Store, "s3a": S3Store}


def open_store(location: str, options: dict[str, Any]) -> Store:
    """The store for ``location`` (a resolved location), opened with fsspec ``options``."""
    scheme = url_scheme(location)
    if scheme in AZURE_SCHEMES:
        # imports adlfs and the Azure SDK (gcsfs and Google's for GCS): only for such locations
        from .azure import AzureStore

        return AzureStore.connect(location, options)
    if scheme in GCS_SCHEMES:
        from .gcs import GcsStore

        return GcsStore.connect(location, options)
    if scheme in S3_SCHEMES:
        return S3Store.connect(location, options)
    if not options:
        local = LocalStore.at(location)
        if local is not None:
            return local
    store = Store.connect(location, options)
    for proto in store.protocols:
        if proto in _BY_PROTOCOL:
            return _BY_PROTOCOL[proto](store.fs, store.root)
    return store


class Storage:
    """A table root on some store (an fsspec filesystem).

    ``storage_options`` go to the store's fsspec filesystem, except the ``lakelog.*`` keys described in
    the package docstring (``lakelog.single_writer`` allows committing on stores without atomic
    put-if-absent, which is only safe when a single process ever writes the table;
    ``lakelog.max_commit_attempts`` bounds the commit retries; ``lakelog.fault_injector`` is the tests'
    hook into every operation, see ``_before``).
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
        if url_scheme(uri) in CATALOG_SCHEMES:
            raise InvalidArgumentError(
                f"{uri!r} is a table's name in a catalog, not a storage location: open it with lakelog.Table, read_table, "
                "write_table, plan_write, convert or the lakelog CLI, which look its location up"
            )
        self.options = opts  # the store's options (lakelog's own taken out): catalogs on the same cloud use them too
        self.store = open_store(resolve_location(uri), opts)
        self.single_writer = self.single_writer or self.store.unsafe_commits
        self.protocol = self.store.protocols[0]
        self.is_local = isinstance(self.store, LocalStore)
        self.uri = uri
        root = self.store.root
        self.root = root.rstrip("/") if root not in ("/", "") else root
        self.log_dir = self.join("_delta_log")
        self._arrow_fs: pafs.FileSystem | None = None

    @property
    def location(self) -> str:
        """The table's location as any process names the same place: a local table's absolute path (a
        relative one names another directory in a process with another working directory, such as a
        Spark executor), else the URL as given. What a plan shipped to other processes holds."""
        return self.root if self.is_local else self.uri

    @property
    def fs(self) -> Any:
        """The store's fsspec filesystem (a local table's is created on first use: reading the log needs none)."""
        return self.store.fs

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

    @contextlib.contextmanager
    def _writing(self, op: str, path: str) -> Iterator[None]:
        """A write to the store: an endpoint that does not answer raises its typed error
        (``Store.answering``), and so does a bucket (container) that does not exist."""
        try:
            with self.store.answering(op, path):
                yield
        except StorageUnavailableError:
            raise
        except OSError as e:
            missing = self.store.missing_scope(e)
            if missing is None:
                raise
            raise missing from e

    def raise_if_unanswered(self, e: BaseException, path: str, op: str = "read") -> None:
        """Raise the store's ``StorageTimeoutError`` / ``StorageUnavailableError`` when ``e`` is an endpoint
        that did not answer (Arrow's own cloud clients report it as a plain ``OSError``); return otherwise.
        Readers call it before taking a failed read for a damaged or missing file."""
        if self.store.object_store and not isinstance(e, StorageUnavailableError) and (kind := unanswered(e)) is not None:
            raise self.store.unanswered_error(kind, op, path, e) from e

    @property
    def arrow_fs(self) -> pafs.FileSystem:
        if self._arrow_fs is None:
            self._arrow_fs = self.store.arrow_fs()
        return self._arrow_fs

    # ------------------------------------------------------------ reads
    def read(self, path: str) -> bytes:
        self._before("read", path)
        with self.store.answering("read", path):
            return self.store.read(path)

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
        paths = list(paths)
        with self.store.answering("read", paths[0] if paths else self.root):
            out = self.store.read_each(paths, on_error)
        for p, got in zip(paths, out):  # a read that got no answer is no missing file: it fails the whole read
            if isinstance(got, BaseException):
                self.raise_if_unanswered(got, p)
        return out

    def exists(self, path: str) -> bool:
        self._before("exists", path)
        with self.store.answering("exists", path):
            return self.store.exists(path)

    def open_input(self, path: str):
        """A seekable binary input file (pyarrow ``NativeFile``) for reading ``path``."""
        self._before("open_input", path)
        with self.store.answering("read", path):
            return self.arrow_fs.open_input_file(path)

    def open_output(self, path: str):
        """A binary output stream (pyarrow ``NativeFile``) creating or replacing ``path``.

        Used for data files only: they become visible when a commit names them, never by being written.
        """
        self._before("open_output", path)
        if self.store.object_store:
            import pyarrow as pa

            def put(data: bytes) -> None:
                with self._writing("put", path):
                    self.store.put(path, data)

            def stream() -> Any:
                with self._writing("put", path):
                    return _AnsweredUpload(self.fs.open(path, "wb"), self, path)

            return pa.PythonFile(BufferedUpload(put, stream), mode="w")
        return self.arrow_fs.open_output_stream(path)

    def list_files(self, path: str) -> list[FileInfo]:
        """Every file under ``path``, recursively (fresh listing; ``FileInfo.name`` is the path relative to
        ``path``); a missing directory -> []."""
        self._before("list_files", path)
        base = path.rstrip("/")
        self.fs.invalidate_cache(base)
        try:
            with self.store.answering("list_files", base):
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
        try:
            with self.store.answering("list_dir", path):
                return self.store.list_dir(path)
        except (FileNotFoundError, NotADirectoryError):
            return []

    def list_log(self, start: str = "") -> list[FileInfo]:
        """The files directly in ``_delta_log/`` whose names are >= ``start``. Stores that can begin a
        listing at a name (S3 ``StartAfter``, GCS ``startOffset``, Azure ``startFrom``) are asked to, so
        a long log costs only its tail; elsewhere the whole folder is listed and filtered."""
        if start and self.store.lists_from:
            self._before("list_dir", self.log_dir)
            try:
                with self.store.answering("list_dir", self.log_dir):
                    return sorted(self.store.list_from(self.log_dir, start), key=lambda f: f.name)
            except StorageUnavailableError:
                raise  # the plain listing would wait as long again
            except Exception:  # noqa: BLE001 - e.g. a service too old for the parameter: the plain listing
                pass  # below answers, and reports a real failure (a missing bucket, no access) as it always has
        return [f for f in self.list_dir(self.log_dir) if f.name >= start]

    # ------------------------------------------------------------ writes
    @property
    def is_s3(self) -> bool:
        return isinstance(self.store, S3Store)

    def check_atomic_commits(self) -> None:
        """Raise StorageError unless commits to this store are safe against concurrent writers.

        Known stores only; object stores whose endpoint may ignore the condition are also probed once
        per process and bucket: a store that accepts a second conditional create of one object cannot
        do put-if-absent.
        """
        if not self.store.atomic_create:
            if not self.single_writer:
                raise StorageError(
                    f"the {self.protocol!r} filesystem has no atomic put-if-absent, so concurrent commits could "
                    "overwrite each other. Use a local path, s3://, az://, abfs[s]://, gs:// or memory://, or pass "
                    f"{SINGLE_WRITER_ADVICE}."
                )
            return
        if self.store.probe_once and not self.single_writer:
            with self._writing("probe", self.log_dir):
                verify_conditional_create(self.store, self.log_dir)

    def put_if_absent(self, path: str, data: bytes) -> None:
        """Create ``path`` with ``data`` atomically; raise FileExistsError if it already exists.

        A ``ConditionalWriteConflict`` means nothing was written by this call; other OSErrors leave the
        outcome unknown (the object may have been created): callers look again.
        """
        self.check_atomic_commits()
        self._before("put_if_absent", path)
        with self._writing("put_if_absent", path):
            self.store.put_if_absent(path, data, self.single_writer)
        self._after("put_if_absent", path)

    def put(self, path: str, data: bytes) -> None:
        """Write (or replace) ``path`` so readers see the old or the new content, never a torn one."""
        self._before("put", path)
        with self._writing("put", path):
            self.store.put(path, data)
        self._after("put", path)

    def makedirs(self, path: str) -> None:
        self._before("makedirs", path)
        with self._writing("makedirs", path):
            self.store.makedirs(path)

    def delete(self, path: str) -> None:
        self._before("delete", path)
        with self.store.answering("delete", path):
            self.fs.rm_file(path)
        self._after("delete", path)


class _AnsweredUpload:
    """A streaming upload (an fsspec file open for writing) whose writes raise ``Storage``'s typed errors."""

    def __init__(self, f: Any, storage: Storage, path: str):
        self._f, self._storage, self._path = f, storage, path

    def write(self, data: Any) -> int:
        with self._storage._writing("put", self._path):
            return self._f.write(data)

    def close(self) -> None:
        with self._storage._writing("put", self._path):
            self._f.close()

"""What every store shares: listing entries, the typed conflict answer, and the ``Store`` seam.

A ``Store`` is one kind of filesystem behind ``Storage``: how it is opened from a location and
storage options, and how it creates a file only if absent. ``Storage`` (``core.py``) holds the
lakelog options, fault injection and the operations; it asks its store for the rest.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import errno
import functools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import BucketNotFoundError, StorageTimeoutError, StorageUnavailableError
from .policy import RequestPolicy, unanswered

if TYPE_CHECKING:  # pyarrow is imported where a file is opened: listing and reading the log need none of it
    import pyarrow.fs as pafs


class ConditionalWriteConflict(OSError):
    """The store refused a conditional create because another conditional write of the same object was
    in progress (S3: 409 ``ConditionalRequestConflict``). Nothing was written by this request; the
    object may or may not exist now, so the caller looks again and retries."""


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


def exists_error(path: str, cause: BaseException | None = None) -> FileExistsError:
    e = FileExistsError(errno.EEXIST, f"{path} already exists", path)
    e.__cause__ = cause
    return e


class Store:
    """One kind of store behind ``Storage``. This base is any fsspec filesystem: no atomic create.

    Subclasses with a conditional create set ``atomic_create``; those whose endpoint may not honour the
    condition (S3-compatible services, emulators) also set ``probe_once``, and name the condition in
    ``label``, ``create_word``, ``condition`` and ``scope_word`` for the probe's messages.
    """

    atomic_create = False
    probe_once = False
    lists_from = False  # the store can start a listing at a name (``list_from``)
    object_store = False  # reads are ranged requests, data files are uploaded whole (``upload.py``)
    label = "store"
    create_word = "create"
    condition = ""
    scope_word = "bucket"
    probe_advice = ""
    policy = RequestPolicy()  # the request timeouts and retries the store was opened with (object stores)
    unsafe_commits = False  # the options allow commits without concurrency protection (S3: AWS_S3_ALLOW_UNSAFE_RENAME)

    def __init__(self, fs: Any, root: str, secrets: tuple[str, ...] = ()):
        self.fs = fs
        self.root = root
        self.secrets = tuple(s for s in secrets if s)  # values never to show in an error message

    @classmethod
    def connect(cls, location: str, options: dict[str, Any]) -> "Store":
        """Open ``location`` with fsspec; ``options`` are the fsspec options (lakelog's own removed)."""
        import fsspec  # here, not at module level: keeps ``import lakelog`` cheap (fsspec pulls in ssl and asyncio)

        opts = dict(options)
        # No listings cache: lakelog always needs the store's current answer. With s3fs's cache, a listing
        # of a directory (vacuum, check) made later reads treat files created since then as missing.
        opts.setdefault("use_listings_cache", False)
        try:
            fs, root = fsspec.core.url_to_fs(location, **opts)
        except TypeError:  # a filesystem class that does not take the option
            opts.pop("use_listings_cache")
            fs, root = fsspec.core.url_to_fs(location, **opts)
        return cls(fs, root)

    # ------------------------------------------------------------ identity
    @property
    def protocols(self) -> tuple[str, ...]:
        p = self.fs.protocol
        return tuple(p) if isinstance(p, (tuple, list)) else (p,)

    def scope(self) -> str:
        """The bucket (or container) a root lies in: the unit whose conditional create is probed."""
        return self.root.lstrip("/").split("/", 1)[0]

    def token(self) -> str:
        return str(getattr(self.fs, "_fs_token", id(self.fs)))

    def redact(self, text: str) -> str:
        for s in self.secrets:
            text = text.replace(s, "***")
        return text

    def endpoint(self) -> str:
        """Where the store's requests go, for messages (never with credentials)."""
        return str(self.protocols[0])

    # ------------------------------------------------------------ endpoints that do not answer
    @contextlib.contextmanager
    def answering(self, op: str, path: str) -> Iterator[None]:
        """Run one operation of an object store: an endpoint that did not answer in time, or could not
        be reached, raises ``StorageTimeoutError`` / ``StorageUnavailableError`` naming the operation,
        never the SDK's own error (which readers would take for a damaged file)."""
        if not self.object_store:
            yield
            return
        try:
            yield
        except StorageUnavailableError:
            raise
        except Exception as e:
            kind = unanswered(e)
            if kind is None:
                raise
            raise self.unanswered_error(kind, op, path, e) from e

    def unanswered_error(self, kind: str, op: str, path: str, cause: BaseException) -> StorageUnavailableError:
        endpoint, p = self.endpoint(), self.policy
        what = self.redact(" ".join(f"{type(cause).__name__}: {cause}".split()))[:500]
        action = f"{_OP_WORDS.get(op, op)} of {path!r}"
        after = (" The commit may or may not have landed: open the table to see its latest version (a write retried "
                 "with app_id and app_version is committed once)." if op == "put_if_absent" else "")
        if kind == "timeout":
            return StorageTimeoutError(
                f"the {self.label} {endpoint} did not answer {action} in time ({p.describe()}): {what}. Check that the "
                f"endpoint is up and reachable; for a slow one raise the storage option timeout or max_retries.{after}",
                endpoint=endpoint, operation=op, path=path)
        return StorageUnavailableError(
            f"the {self.label} {endpoint} could not be reached for {action} ({p.attempts} attempt(s)): {what}. "
            f"Check the endpoint's address and that the service (or emulator) is running.{after}", endpoint=endpoint, operation=op, path=path)

    def scope_exists(self) -> bool:
        """Whether the bucket (container) of the root exists; True where the store has none."""
        return not self.object_store or bool(self.fs.exists(self.scope()))

    def missing_scope(self, e: BaseException) -> BucketNotFoundError | None:
        """The typed error for a write that failed (``e``) because the root's bucket (container) does not
        exist; None when it exists or cannot be asked."""
        # a missing bucket is a 404: s3fs and gcsfs raise FileNotFoundError, lakelog's Azure create names the code
        if not self.object_store or not (isinstance(e, FileNotFoundError) or "ContainerNotFound" in str(e)):
            return None
        try:
            if self.scope_exists():
                return None
        except Exception:  # noqa: BLE001 - the diagnosis is a courtesy: the original error stands
            return None
        return BucketNotFoundError(f"{self.missing_scope_text()}, so nothing can be written to the table {self.root!r}: create "
                                   f"the {self.scope_word} first (lakelog never creates one), or check the table's path", bucket=self.scope())

    def missing_scope_text(self) -> str:
        return f"the {self.scope_word} {self.scope()!r} does not exist on the {self.label} {self.endpoint()}"

    # ------------------------------------------------------------ reading the log
    def read(self, path: str) -> bytes:
        return self.fs.cat_file(path)

    def read_each(self, paths: list[str], on_error: str) -> list:
        return self.fs.cat_ranges(paths, None, None, on_error=on_error)

    def exists(self, path: str) -> bool:
        return self.fs.exists(path)

    def list_dir(self, path: str) -> list[FileInfo]:
        """The files directly in ``path`` (fresh, no cached listing); FileNotFoundError or NotADirectoryError
        when it is not there."""
        self.fs.invalidate_cache(path)
        out = []
        for e in self.fs.ls(path, detail=True):
            if e.get("type") == "directory":
                continue
            name = e["name"].rstrip("/")
            out.append(FileInfo(name.rsplit("/", 1)[-1], name, int(e.get("size") or 0), _mtime_ms(e)))
        return out

    # ------------------------------------------------------------ access
    def arrow_fs(self) -> pafs.FileSystem:
        import pyarrow.fs as pafs

        return pafs.PyFileSystem(_range_reads()(self) if self.object_store else pafs.FSSpecHandler(self.fs))

    def put(self, path: str, data: bytes) -> None:
        self.fs.pipe_file(path, data)

    def makedirs(self, path: str) -> None:
        self.fs.makedirs(path, exist_ok=True)

    def list_from(self, directory: str, start: str) -> list[FileInfo]:
        """The files directly in ``directory`` whose names are >= ``start``, asking the store to begin
        its listing there (stores with ``lists_from``); a missing directory -> []."""
        bucket, key, _ = self.fs.split_path(directory)
        prefix = key.rstrip("/") + "/" if key else ""
        out = []
        for object_key, size, mtime_ms in self._list_keys_from(bucket, prefix, prefix + start):
            name = object_key[len(prefix):]
            # ">= start" also holds where a service ignored the start parameter; "/" ends a "directory"
            if name >= start and not object_key.endswith("/"):
                out.append(FileInfo(name, f"{bucket}/{object_key}", size, mtime_ms))
        return out

    def _list_keys_from(self, bucket: str, prefix: str, start_key: str) -> list[tuple[str, int, int]]:
        """(key, size, modification time in ms) of the objects directly under ``prefix`` in ``bucket``,
        the store's listing begun at ``start_key``."""
        raise NotImplementedError

    # ------------------------------------------------------------ put-if-absent
    def create(self, path: str, data: bytes) -> None:
        """One conditional create with the store's answers typed: ``FileExistsError`` (the name exists),
        ``ConditionalWriteConflict`` (nothing written, look again), other ``OSError`` (outcome unknown)."""
        raise NotImplementedError

    def rejects_condition(self, e: BaseException) -> bool:
        """The store answered that it does not implement the condition (rather than failing otherwise)."""
        return False

    def put_if_absent(self, path: str, data: bytes, single_writer: bool) -> None:
        if not self.atomic_create:
            self._unsafe_create(path, data)
        elif single_writer and self.probe_once:
            if self.fs.exists(path):
                raise exists_error(path)  # the store may ignore the condition
            try:
                self.create(path, data)
            except OSError as e:
                if not self.rejects_condition(e):
                    raise
                self.fs.pipe_file(path, data)  # single writer on a store that rejects the condition
        else:
            self.create(path, data)

    def _unsafe_create(self, path: str, data: bytes) -> None:
        """Check-then-write: only used with ``lakelog.single_writer`` on stores without put-if-absent."""
        if self.fs.exists(path):
            raise FileExistsError(path)
        # The first commit creates _delta_log: stores with real directories (a local disk behind
        # fsspec's dir:// or a mounted filesystem) need it to exist before a file is written into it.
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        self.fs.pipe_file(path, data)


def class_made_on_first_use(module_globals: dict[str, Any], name: str) -> Callable[[Callable[[], type]], Callable[[], type]]:
    """Decorate a store module's function that makes the filesystem class ``name`` (importing its SDK):
    the class is made once, on first use, and is the module's attribute ``name`` (through the module's
    ``__getattr__``), where pickles look for it."""

    def decorate(factory: Callable[[], type]) -> Callable[[], type]:
        @functools.cache
        def make() -> type:
            cls = factory()
            cls.__qualname__ = name
            return cls

        def module_getattr(attr: str) -> Any:
            if attr == name:
                return make()
            raise AttributeError(f"module {module_globals['__name__']!r} has no attribute {attr!r}")

        module_globals["__getattr__"] = module_getattr
        return make

    return decorate


# What each operation of ``Storage`` is called in messages.
_OP_WORDS = {"read": "a read", "exists": "a lookup", "list_dir": "a listing", "list_files": "a listing", "put": "a write",
             "makedirs": "a write", "put_if_absent": "the commit (a conditional create)", "delete": "a delete",
             "probe": "the check that it refuses a second conditional create"}

class _ArrowCalls:
    """The calls Arrow's threads make into the stores' Python filesystems (``Store.arrow_fs``), so that the
    interpreter never shuts down under one.

    A scan stopped early (a limit, a failed read) leaves Arrow's read-ahead at work. A thread that is
    in Python, or enters it, once the interpreter finalizes is ended mid-call by CPython, which aborts
    the process ("terminate called without an active exception"). So at exit (``atexit``, before
    finalizing) new calls are refused at once, and the exit waits until no call is running and none
    was made for ``QUIET_S``: the read-ahead Arrow had queued has then run (each call is bounded by
    its store's request options, the whole wait by ``LIMIT_S``).
    """

    QUIET_S = 0.25
    LIMIT_S = 300.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._last = 0.0
        self._closing = False
        self._registered = False

    @contextlib.contextmanager
    def call(self, store: Store, op: str, path: str) -> Iterator[None]:
        with self._lock:
            if self._closing:
                raise StorageUnavailableError(f"{_OP_WORDS.get(op, op)} of {path!r} was not started: the interpreter is exiting",
                                              endpoint=store.endpoint(), operation=op, path=path)
            if not self._registered:
                atexit.register(self.drain)
                self._registered = True
            self._running += 1
            self._last = time.monotonic()
        try:
            with store.answering(op, path):
                yield
        finally:
            with self._lock:
                self._running -= 1
                self._last = time.monotonic()

    def drain(self) -> None:
        deadline = time.monotonic() + self.LIMIT_S
        with self._lock:
            self._closing = True
        while time.monotonic() < deadline:
            with self._lock:
                if not self._running and time.monotonic() - self._last >= self.QUIET_S:
                    return
            time.sleep(0.02)


_arrow_calls = _ArrowCalls()

_RANGE_READS: list[type] = []


def _range_reads() -> type:
    """The ``FSSpecHandler`` of object stores (defined on first use, when pyarrow is imported)."""
    if not _RANGE_READS:
        import pyarrow as pa
        import pyarrow.fs as pafs

        class _RangeReads(pafs.FSSpecHandler):
            """Random-access files read with one ranged request per read and no read-ahead cache: Parquet
            readers ask for exactly the ranges they need (footer, coalesced column chunks), which a cache or
            background prefetch (gcsfs's default) would only add requests and threads to. An endpoint
            that does not answer raises the store's typed error (``Store.answering``), which Arrow
            passes through to the reader unchanged."""

            def __init__(self, store: Store):
                super().__init__(store.fs)
                self.store = store

            def get_file_info(self, paths):
                with _arrow_calls.call(self.store, "read", paths[0] if paths else ""):
                    return super().get_file_info(paths)

            def get_file_info_selector(self, selector):
                with _arrow_calls.call(self.store, "list_files", selector.base_dir):
                    return super().get_file_info_selector(selector)

            def open_input_stream(self, path: str):
                return self.open_input_file(path)

            def open_input_file(self, path: str):
                with _arrow_calls.call(self.store, "read", path):
                    f = self.fs.open(path, mode="rb", cache_type="none")
                return pa.PythonFile(_AnsweredFile(f, self.store, path), mode="r")

        _RANGE_READS.append(_RangeReads)
    return _RANGE_READS[0]


class _AnsweredFile:
    """An fsspec file whose reads raise the store's typed error for an endpoint that does not answer, and
    count as Arrow's calls into Python (``_ArrowCalls``)."""

    def __init__(self, f: Any, store: Store, path: str):
        self._f, self._store, self._path = f, store, path

    def read(self, n: int = -1) -> bytes:
        with _arrow_calls.call(self._store, "read", self._path):
            return self._f.read(n)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)

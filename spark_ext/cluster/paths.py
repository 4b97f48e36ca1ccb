"""Table paths resolved on the driver, before anything is shipped to executors.

A Spark job's processes have different working directories (on a cluster each executor runs in its
own work directory), so a relative path would name a different directory in each of them: the
driver would commit a log whose files the executors wrote elsewhere. As Spark's own file sources do,
a local path is made absolute against the driver JVM's working directory; that absolute path is the
one every task, plan and commit then uses. A catalog name (``glue://database/table``) is resolved here
too, once, to the location its catalog holds: tasks get the location and never call the catalog.
"""

from __future__ import annotations

import os
import re
from urllib.parse import quote, unquote

from lakelog.catalog import catalog_name, resolve
from lakelog.errors import InvalidArgumentError
from lakelog.storage.location import url_scheme

# A URL or other scheme-prefixed location (Windows drive letters are one character: plain paths).
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")
_LOCAL_SCHEMES = ("file", "local")


def absolute_path(path: str, cwd: str | None = None, storage_options: dict | None = None) -> str:
    """``path`` naming the same place in every process of a job: a local path made absolute against
    ``cwd`` (default: this process's working directory), as Hadoop qualifies it (``..`` and ``.``
    resolved by name); URLs unchanged. A ``file:`` URL with a relative path (``file:events``), which
    Spark reads against the working directory, becomes ``file://<cwd>/events``. ``~`` expands to the
    home directory as in lakelog's Python API (Spark's file sources would make a directory named ``~``).
    A catalog name becomes its location (``catalog_location``)."""
    if catalog_name(path) is not None:
        return catalog_location(path, storage_options)
    if _unresolved(path):
        return path
    path = os.fspath(path)
    cwd = os.getcwd() if cwd is None else cwd
    m = _SCHEME_RE.match(path)
    if m is None:
        return os.path.normpath(os.path.join(cwd, os.path.expanduser(path)))
    scheme, rest = m.group(0)[:-1].lower(), path[m.end():]
    if scheme in _LOCAL_SCHEMES and not rest.startswith("/"):
        # (percent escapes in ``rest`` stay escapes: lakelog decodes a file URL's path once)
        return f"file://{quote(os.path.normpath(cwd))}/{rest}"
    return path


def catalog_location(name: str, storage_options: dict | None = None) -> str:
    """The location AWS Glue holds for ``glue://database/table`` (AWS settings from ``storage_options``, in
    delta-rs' names, else the ``AWS_*`` variables); ``CatalogTableNotFoundError`` when there is none. Spark
    writes create no catalog entry: create the table with ``lakelog.write_table(name, data, location=...)``."""
    return resolve(name, storage_options)[0]


def driver_cwd(spark) -> str:
    """The driver JVM's working directory, against which Spark's file sources resolve relative paths
    (this process's may have changed since the JVM started); this process's where there is no JVM
    gateway (Spark Connect)."""
    try:
        jvm = spark._jvm
    except Exception:  # noqa: BLE001 - Spark Connect refuses JVM attributes
        return os.getcwd()
    return str(jvm.java.lang.System.getProperty("user.dir")) if jvm is not None else os.getcwd()


def driver_path(spark, path: str, storage_options: dict | None = None) -> str:
    """``path`` as every process of ``spark``'s jobs names the table (see ``absolute_path``)."""
    if catalog_name(path) is not None:
        return catalog_location(path, storage_options)
    return path if _unresolved(path) else absolute_path(path, driver_cwd(spark))


def local_path(path: str, spark=None, storage_options: dict | None = None) -> str:
    """A table location as lakelog takes it: ``file:/x`` and ``file:///x`` as ``/x``; a relative path made
    absolute as Spark's file sources make it (``absolute_path``); a catalog name its location; other URLs unchanged."""
    if catalog_name(path) is not None:
        path = catalog_location(path, storage_options)
    if path.startswith("file:") and (path.startswith("file:/") or path.startswith("file:///")):
        rest = path[len("file:"):]
        if rest.startswith("//"):
            rest = rest[2:]
            if not rest.startswith("/"):
                raise InvalidArgumentError(f"{path!r}: a file URL names a local path (file:/path or file:///path)")
        return unquote(rest)
    return driver_path(spark, path, storage_options) if spark is not None else absolute_path(path, storage_options=storage_options)


def _unresolved(path) -> bool:
    """Whether ``path`` stays as given: a URL with an authority (``s3://``, ``file:///abs``, ``memory://``),
    an fsspec chain, an empty path, or no path at all (lakelog refuses the last two by type)."""
    if not isinstance(path, (str, os.PathLike)):
        return True
    path = os.fspath(path)
    return not isinstance(path, str) or not path or "::" in path or url_scheme(path) is not None

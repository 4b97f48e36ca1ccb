"""Where the Iceberg files go: the table's locations as Iceberg names them, and whole-file writes through
lakelog's ``Storage`` (so the metadata goes wherever the table is, with the same storage options)."""

from __future__ import annotations

import os
import uuid

from ..storage import Storage
from ..storage.location import table_url, url_scheme


def table_location(storage: Storage) -> str:
    """The table root as an Iceberg location: the table's own URL, as Delta's UniForm writes it
    (``storage.location.table_url``: ``file:/absolute/path`` locally, else the URL the table was opened
    with, e.g. ``abfss://container@account.dfs.core.windows.net/path`` or ``s3a://bucket/path``).
    ``az://`` (fsspec's name, which Iceberg readers do not know) is written ``abfs://``."""
    if not storage.is_local and url_scheme(storage.uri) == "az":
        return f"abfs://{storage.root.strip('/')}"
    return table_url(storage.uri, storage.root if storage.is_local else None)


def path_part(location: str) -> str:
    """A location's path, without its scheme and authority: what stays the same however a writer
    spelled the table's URL (``abfs://c/t`` and ``abfss://c@account.dfs.core.windows.net/t``: ``/t``)."""
    if "://" in location:
        rest = location.split("://", 1)[1]
        i = rest.find("/")
        return rest[i:] if i >= 0 else ""
    if location.startswith("file:"):
        return location[len("file:"):]
    return location


def write_file(storage: Storage, path: str, data: bytes, *, exclusive: bool = False, unique: bool = False) -> None:
    """Write ``path`` whole (readers never see a torn file); ``exclusive``: FileExistsError if it exists;
    ``unique``: a new name nothing refers to yet (a manifest), written in place.

    Locally without fsync, as data files are written: Iceberg metadata is derived from the Delta log,
    which is synced, and a file lost to a crash is written again by the next catch-up."""
    if not storage.is_local:
        (storage.put_if_absent if exclusive else storage.put)(path, data)
        return
    storage._before("put_if_absent" if exclusive else "put", path)
    d, name = os.path.split(path)
    if unique:
        try:
            f = open(path, "xb")
        except FileNotFoundError:
            os.makedirs(d, exist_ok=True)
            f = open(path, "xb")
        with f:
            f.write(data)
        return
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, f".{name}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    if not exclusive:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)  # atomic, FileExistsError when another writer made it first
    except FileExistsError:
        raise
    except OSError:  # no hard links here: the store's own put-if-absent knows what to do
        storage.put_if_absent(path, data)
    finally:
        os.unlink(tmp)


def to_storage_path(storage: Storage, location: str) -> str:
    """The store's path of a file the Iceberg metadata names by ``location`` (under the table root,
    whichever form of the table's URL named it)."""
    root = path_part(table_location(storage)).rstrip("/")
    path = path_part(location)
    if path.startswith(root + "/"):
        return storage.join(path[len(root) + 1:])
    if not storage.is_local and "://" in location:
        return location.split("://", 1)[1]
    return location

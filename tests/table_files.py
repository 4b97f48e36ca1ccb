"""Raw access to a table's files on any store, for tests that damage or inspect them.

The filesystem is the one lakelog opens for the location (``Storage(path).fs``), so bare ``az://`` and
``gs://`` paths reach the test emulators as they do for lakelog; the reads, writes and listings here are
the filesystem's own, not lakelog's log code.
"""

from __future__ import annotations


def table_fs(path: str, storage_options: dict | None = None):
    """(filesystem, root without trailing slash) for a table URI, with a fresh listing cache."""
    from lakelog.storage import Storage

    storage = Storage(path, storage_options)
    storage.fs.invalidate_cache()
    return storage.fs, storage.root.rstrip("/")


def log_file(path: str, name: str) -> str:
    """The store path of ``_delta_log/<name>`` of the table at ``path``."""
    return f"{table_fs(path)[1]}/_delta_log/{name}"


def log_names(path: str) -> list[str]:
    """The names directly in ``_delta_log`` (no directories), sorted."""
    fs, root = table_fs(path)
    return sorted(e["name"].rstrip("/").rsplit("/", 1)[-1] for e in fs.ls(f"{root}/_delta_log", detail=True) if e["type"] != "directory")


def remove_commits(path: str, versions) -> None:
    """Delete the JSON commits of ``versions``, as log cleanup (or a lost file) would."""
    fs, root = table_fs(path)
    for v in versions:
        fs.rm_file(f"{root}/_delta_log/{v:020d}.json")


def move(path: str, src: str, dst: str) -> None:
    """Move the file ``src`` to ``dst`` (both relative to the table root), by copy and delete."""
    fs, root = table_fs(path)
    fs.pipe_file(f"{root}/{dst}", fs.cat_file(f"{root}/{src}"))
    fs.rm_file(f"{root}/{src}")

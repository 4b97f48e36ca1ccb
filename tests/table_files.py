"""Raw access to a table's files on any fsspec store, for tests that damage or inspect them."""

from __future__ import annotations

import fsspec


def table_fs(path: str):
    """(filesystem, root without trailing slash) for a table URI, with a fresh listing cache."""
    fs, root = fsspec.core.url_to_fs(path)
    fs.invalidate_cache()
    return fs, root.rstrip("/")


def log_file(path: str, name: str) -> str:
    """The store path of ``_delta_log/<name>`` of the table at ``path``."""
    return f"{table_fs(path)[1]}/_delta_log/{name}"

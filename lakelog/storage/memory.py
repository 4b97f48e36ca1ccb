"""``memory://``: fsspec's in-process filesystem, its create-if-absent made atomic by a lock."""

from __future__ import annotations

import threading

from .base import Store

_memory_lock = threading.Lock()


class MemoryStore(Store):
    atomic_create = True

    def create(self, path: str, data: bytes) -> None:
        with _memory_lock:
            self.fs.pipe_file(path, data, mode="create")

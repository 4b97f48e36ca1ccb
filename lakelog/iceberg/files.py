"""pyiceberg's file interface over lakelog's ``Storage`` (so Iceberg metadata goes wherever the table is,
with the same storage options), and the Iceberg locations of the table's files."""

from __future__ import annotations

import io
from typing import Any

from pyiceberg.io import FileIO, InputFile, OutputFile

from ..storage import Storage


def table_location(storage: Storage) -> str:
    """The table root as an Iceberg location: an absolute path locally, else ``scheme://bucket/path``."""
    return storage.root if storage.is_local else f"{storage.protocol}://{storage.root}"


def to_storage_path(storage: Storage, location: str) -> str:
    if not storage.is_local and "://" in location:
        return location.split("://", 1)[1]
    return location


class _Input(InputFile):
    def __init__(self, storage: Storage, location: str):
        super().__init__(location)
        self._storage = storage
        self._data: bytes | None = None

    def _bytes(self) -> bytes:
        if self._data is None:
            self._data = self._storage.read(to_storage_path(self._storage, self.location))
        return self._data

    def __len__(self) -> int:
        return len(self._bytes())

    def exists(self) -> bool:
        return self._storage.exists(to_storage_path(self._storage, self.location))

    def open(self, seekable: bool = True) -> Any:
        return io.BytesIO(self._bytes())


class _Buffer(io.BytesIO):
    """Collects a file's bytes and writes them in one put when closed (object stores have no appends)."""

    def __init__(self, on_close):
        super().__init__()
        self._on_close = on_close

    def close(self) -> None:
        if not self.closed:
            self._on_close(self.getvalue())
        super().close()


class _Output(OutputFile):
    def __init__(self, storage: Storage, location: str):
        super().__init__(location)
        self._storage = storage
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def exists(self) -> bool:
        return self._storage.exists(to_storage_path(self._storage, self.location))

    def to_input_file(self) -> InputFile:
        return _Input(self._storage, self.location)

    def create(self, overwrite: bool = False) -> Any:
        def put(data: bytes) -> None:
            self._size = len(data)
            self._storage.put(to_storage_path(self._storage, self.location), data)

        return _Buffer(put)


class StorageFileIO(FileIO):
    def __init__(self, storage: Storage):
        super().__init__({})
        self.storage = storage

    def new_input(self, location: str) -> InputFile:
        return _Input(self.storage, location)

    def new_output(self, location: str) -> OutputFile:
        return _Output(self.storage, location)

    def delete(self, location: Any) -> None:
        loc = location if isinstance(location, str) else location.location
        self.storage.delete(to_storage_path(self.storage, loc))

"""Data files on object stores: written in memory and sent in one request, streamed only when large.

A Parquet writer makes many small writes; through an fsspec file each object store turns them into
staged blocks or resumable chunks, several requests per file. A file that stays under
``SINGLE_REQUEST_BYTES`` is kept in memory and sent with one ``put`` when closed (s3fs and adlfs hold
50 MiB per open file before sending anything, so this holds no more than they do); a larger one is
handed to the store's streaming upload once it passes the threshold, with what was written so far.
"""

from __future__ import annotations

import io
from typing import Any, Callable

SINGLE_REQUEST_BYTES = 32 * 2**20


class BufferedUpload(io.RawIOBase):
    """A write-only file for ``pyarrow.PythonFile``: ``put(bytes)`` on close, or ``open_stream()`` (an
    fsspec file opened for writing) once more than ``limit`` bytes were written."""

    def __init__(self, put: Callable[[bytes], None], open_stream: Callable[[], Any], limit: int | None = None):
        super().__init__()
        self._put, self._open_stream = put, open_stream
        self._limit = SINGLE_REQUEST_BYTES if limit is None else limit
        self._buffer: io.BytesIO | None = io.BytesIO()
        self._stream: Any = None
        self._written = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        n = len(memoryview(data).cast("B"))
        if self._stream is None and self._written + n > self._limit:
            self._stream = self._open_stream()
            self._stream.write(self._buffer.getbuffer())
            self._buffer = None
        (self._stream if self._stream is not None else self._buffer).write(data)
        self._written += n
        return n

    def tell(self) -> int:
        return self._written

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self._stream is not None:
                self._stream.close()
            else:
                self._put(self._buffer.getvalue())
        finally:
            self._buffer = self._stream = None
            super().close()

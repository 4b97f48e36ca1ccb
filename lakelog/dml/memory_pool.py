"""Arrow's system allocator for pyarrow's allocations during a row-level change, unless the user chose
an allocator.

pyarrow's default allocator (mimalloc) keeps freed memory for a while and backs it with huge pages: a
fresh process deleting 1% of 4M rows peaked at 172-180 MiB with it, 159-161 MiB with pyarrow's
allocations in the system allocator (the Parquet writer's and Acero's own buffers stay in Arrow's
process-wide default, which only ``ARROW_DEFAULT_MEMORY_POOL`` set before pyarrow's import changes, as
the ``lakelog`` command does). pyarrow's default pool is one per process: operations running at once
share one switch, and the first pool is back when the last of them ends. Buffers remember the pool
they came from, so arrays made during the operation stay valid after it.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Iterator

import pyarrow as pa

_lock = threading.Lock()
_active = 0
_previous: pa.MemoryPool | None = None


def _chosen_by_user() -> bool:
    # (the variable, or a pool set with pa.set_memory_pool: anything but pyarrow's default mimalloc)
    return "ARROW_DEFAULT_MEMORY_POOL" in os.environ or pa.default_memory_pool().backend_name != "mimalloc"


@contextmanager
def system_allocator() -> Iterator[None]:
    """pyarrow's default pool is the system allocator inside the block (unless the user chose one)."""
    global _active, _previous
    with _lock:
        if _active == 0:
            _previous = None if _chosen_by_user() else pa.default_memory_pool()
            if _previous is not None:
                pa.set_memory_pool(pa.system_memory_pool())
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _previous is not None:
                pa.set_memory_pool(_previous)
                _previous = None

"""UniForm's Iceberg step after the commit has returned: one worker thread per process, one pending step per
table (a burst of commits converts once, up to the newest version), as Delta's converter does.

Each table's pending work carries what its commits wrote (so the step need not read them back) and a
ticket; a flush waits until the tickets it saw are done. A failed step is a warning at once and an
``IcebergSyncError`` on the next flush, unless a later step of that table caught it up. The worker is a
daemon thread; at interpreter exit (before Python's ``atexit`` handlers, so the stores still answer) the
pending steps are finished, for at most ``EXIT_TIMEOUT_S``.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import IcebergSyncError, IcebergSyncTimeoutError, IcebergSyncWarning

IDLE_S = 5.0  # the worker ends after this long without work (a new commit starts another)
EXIT_TIMEOUT_S = 300.0  # the longest the interpreter's exit waits for pending steps


@dataclass
class _Pending:
    storage: Any
    version: int
    before: Any  # the snapshot ``committed`` applies to (None: load the latest)
    committed: dict[int, list] | None
    then: Callable[[], BaseException | None]  # the newest commit's catalog publication
    ticket: int


class _Worker:
    def __init__(self) -> None:
        self.cond = threading.Condition(threading.Lock())
        self.queue: dict[str, _Pending] = {}  # table location -> its pending step, oldest first
        self.tickets: dict[str, int] = {}  # table location -> the ticket of its newest commit
        self.done: dict[str, int] = {}  # table location -> the ticket its last finished step covered
        self.errors: dict[str, tuple[int, BaseException]] = {}  # table location -> (version, error) of a failed step not caught up
        self.thread: threading.Thread | None = None
        self.exiting = False
        self.next_ticket = 0

    def submit(self, key: str, storage: Any, version: int, before: Any, committed: dict[int, list] | None,
               then: Callable[[], BaseException | None]) -> bool:
        """Queue the step after commit ``version``; False when the interpreter is exiting (convert now)."""
        with self.cond:
            if self.exiting or (self.thread is None and not _exit_hook_registered()):
                return False
            self.next_ticket += 1
            queued = self.queue.get(key)
            if queued is not None and committed is not None and queued.committed is not None and max(queued.committed) == version - 1:
                committed = {**queued.committed, **committed}  # contiguous after the queued step's snapshot
                before = queued.before
            elif queued is not None:
                before = committed = None  # a gap (another writer's commits): the step loads the latest version
            self.queue[key] = _Pending(storage, version, before, committed, then, self.next_ticket)
            self.tickets[key] = self.next_ticket
            if self.thread is None:
                self.thread = threading.Thread(target=self.run, name="lakelog-iceberg", daemon=True)
                self.thread.start()
            self.cond.notify_all()
            return True

    def run(self) -> None:
        from . import run_step

        while True:
            with self.cond:
                if not self.queue:
                    self.cond.wait(IDLE_S)
                    if not self.queue:
                        self.thread = None
                        return
                key = next(iter(self.queue))
                job = self.queue.pop(key)
            try:
                error = run_step(job.storage, job.version, job.before, job.committed, job.then)
            except BaseException as e:  # noqa: BLE001 - (a warning turned into an error by a filter): kept for the flush
                error = e
            with self.cond:
                self.done[key] = job.ticket
                if error is None:
                    self.errors.pop(key, None)  # caught up: an earlier failure of this table is moot
                else:
                    self.errors[key] = (job.version, error)
                self.cond.notify_all()

    def wait(self, keys: list[str] | None, timeout: float | None) -> None:
        """Wait until the steps of ``keys`` (None: every table) queued so far are done; raise what failed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.cond:
            targets = {k: t for k, t in self.tickets.items() if (keys is None or k in keys) and self.done.get(k, 0) < t}
            while True:
                left = [k for k, t in targets.items() if self.done.get(k, 0) < t]
                if not left:
                    break
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise IcebergSyncTimeoutError(
                        f"the Iceberg step (UniForm) of {', '.join(sorted(left))} had not finished after {timeout} s; it goes on in "
                        "the background (the Delta commits stand). Flush again, or run Table.sync_iceberg()")
                self.cond.wait(remaining)
            failed = {k: self.errors.pop(k) for k in list(self.errors) if keys is None or k in keys}
        if failed:
            detail = "; ".join(f"{k} at version {v}: {e!r}" for k, (v, e) in sorted(failed.items()))
            raise IcebergSyncError(
                f"the Iceberg step (UniForm) after a commit failed: {detail}. The Delta commits stand; the next commit, "
                "Table.sync_iceberg() or `lakelog uniform PATH` writes the Iceberg metadata", {k: e for k, (_, e) in failed.items()})

    def at_exit(self) -> None:
        with self.cond:
            self.exiting = True  # a commit made from now on converts in its own thread
        try:
            self.wait(None, EXIT_TIMEOUT_S)
        except IcebergSyncTimeoutError as e:
            warnings.warn(IcebergSyncWarning(f"lakelog: exiting without the Iceberg metadata (UniForm) of the latest commits: {e}"))
        except IcebergSyncError:
            pass  # each failure was a warning when it happened


_worker = _Worker()
_hook: list[bool] = []


def _exit_hook_registered() -> bool:
    """Register the exit flush once: with ``threading``'s exit hooks, which run before daemon threads are
    abandoned and before ``atexit`` handlers (lakelog's stores stop answering in one of those)."""
    if _hook:
        return True
    register = getattr(threading, "_register_atexit", None)
    try:
        (register or atexit.register)(lambda: _worker.at_exit())
    except RuntimeError:  # the interpreter is already shutting down
        return False
    _hook.append(True)
    return True


def _reset_in_child() -> None:
    """A forked child has no worker thread, and none of the parent's pending steps (they are the parent's)."""
    global _worker
    _worker = _Worker()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_in_child)


def submit(key: str, storage: Any, version: int, before: Any, committed: dict[int, list] | None, then: Callable[[], BaseException | None]) -> bool:
    return _worker.submit(key, storage, version, before, committed, then)


def wait(keys: list[str] | None, timeout: float | None) -> None:
    _worker.wait(keys, timeout)

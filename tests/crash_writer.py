"""A writer process for the crash tests (tests/test_crash.py): appends identifiable batches until killed.

    python -m tests.crash_writer PATH FIRST_BATCH [--max-batches N] [--kill-at SPEC]

Prints (flushed) one line per event on stdout:

* ``ready``               imports done, about to write;
* ``start <b>``           about to call write_table for batch b;
* ``ack <b> <version>``   write_table returned for batch b (the batch is acknowledged);
* ``dying <op> <path>``   with --kill-at: the process SIGKILLs itself now, before that storage operation.

Batch ``b`` has ``batch_rows(b)`` rows (columns ``batch``, ``row``, ``part``, ``payload``), partitioned by
``part`` so one commit names several data files, and its commit carries ``userMetadata`` ``batch-<b>``.
The table is created with ``delta.checkpointInterval`` 2, so every other commit also writes a checkpoint
and ``_last_checkpoint``.

``--kill-at OP[@SUBSTRING]#K`` kills the process just before the K-th storage operation named OP (e.g.
``put_if_absent``, ``put_if_absent:done``, ``open_output``) whose path contains SUBSTRING, through the
``lakelog.fault_injector`` storage option.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

CONFIGURATION = {"delta.checkpointInterval": "2"}


def batch_rows(b: int) -> int:
    return 3 + (b * 7) % 11  # at least 3 rows: every batch writes one file per partition (part = row % 3)


def batch_table(b: int):
    import pyarrow as pa

    n = batch_rows(b)
    return pa.table(
        {
            "batch": pa.array([b] * n, pa.int64()),
            "row": pa.array(range(n), pa.int64()),
            "part": pa.array([r % 3 for r in range(n)], pa.int64()),
            "payload": pa.array([f"b{b}-r{r}" for r in range(n)], pa.string()),
        }
    )


def expected_rows(batches) -> list[tuple]:
    """(batch, row, part, payload) of every row of the given batches, sorted."""
    return sorted((b, r, r % 3, f"b{b}-r{r}") for b in batches for r in range(batch_rows(b)))


def _emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class KillAt:
    """A fault injector that SIGKILLs this process before the K-th matching storage operation."""

    def __init__(self, spec: str):
        target, _, k = spec.partition("#")
        self.op, _, self.substring = target.partition("@")
        self.remaining = int(k or 1)

    def __call__(self, op: str, path: str) -> None:
        if op != self.op or self.substring not in path:
            return
        self.remaining -= 1
        if self.remaining == 0:
            _emit(f"dying {op} {path}")
            os.kill(os.getpid(), signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("first_batch", type=int)
    ap.add_argument("--max-batches", type=int, default=10_000)
    ap.add_argument("--kill-at", default=None)
    args = ap.parse_args(argv)

    import fsspec  # noqa: F401

    import lakelog

    # "ready" promises the imports are done: lakelog imports fsspec when a table is opened, and pyarrow
    # imports pandas on the first conversion of Python values, so both happen here, not in the kill window.
    batch_table(args.first_batch)
    options = {"lakelog.fault_injector": KillAt(args.kill_at)} if args.kill_at else None
    _emit("ready")
    for b in range(args.first_batch, args.first_batch + args.max_batches):
        _emit(f"start {b}")
        version = lakelog.write_table(
            args.path,
            batch_table(b),
            partition_by=["part"],
            configuration=CONFIGURATION,
            storage_options=options,
            user_metadata=f"batch-{b}",
        )
        _emit(f"ack {b} {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

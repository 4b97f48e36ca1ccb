"""Worker processes for tests/test_dml_concurrency.py.

    python -m tests.dml_worker increment PATH N       # N times: x = x + 1 where id < 5, retrying conflicts
    python -m tests.dml_worker merge PATH [--kill-at SPEC]

``increment`` prints ``done <conflicts>``; ``merge`` runs the test's merge (see ``merge_source``) and
prints ``merged <version>``; ``--kill-at`` SIGKILLs the process before a storage operation (the
syntax of tests/crash_writer.py).
"""

from __future__ import annotations

import argparse
import sys


def merge_source():
    import pyarrow as pa

    # Every partition of the table gets updates, deletes and inserts.
    ids = list(range(0, 400, 7))
    return pa.table({"id": pa.array(ids, pa.int64()), "part": pa.array([i % 8 for i in ids], pa.int64()), "x": pa.array([-i for i in ids], pa.int64())})


def run_merge(path: str, storage_options=None):
    import lakelog

    t = lakelog.Table(path, storage_options=storage_options)
    return (
        t.merge(merge_source(), "target.id = source.id")
        .when_matched_delete("source.id % 2 = 0")
        .when_matched_update({"x": "source.x"})
        .when_not_matched_insert_all()
        .execute()
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["increment", "merge"])
    ap.add_argument("path")
    ap.add_argument("n", type=int, nargs="?", default=1)
    ap.add_argument("--kill-at")
    args = ap.parse_args(argv)

    import lakelog
    from lakelog.errors import CommitConflictError

    if args.mode == "increment":
        conflicts = 0
        print("ready", flush=True)
        for _ in range(args.n):
            while True:
                try:
                    lakelog.Table(args.path).update({"x": "x + 1"}, "id < 5")
                    break
                except CommitConflictError:
                    conflicts += 1
        print(f"done {conflicts}", flush=True)
        return 0
    options = None
    if args.kill_at:
        from tests.crash_writer import KillAt

        options = {"lakelog.fault_injector": KillAt(args.kill_at)}
    m = run_merge(args.path, options)
    print(f"merged {m['version']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

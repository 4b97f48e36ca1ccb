"""Commit throughput: commits/second for 1 and for 6 concurrent writer processes, local and S3 (moto).

    python -m benchmarks.commits            # everything (about half a minute on 2 cores)
    python -m benchmarks.commits --no-s3    # local disk only
    python -m benchmarks.commits --scale 2  # twice as many commits per writer

Two workloads per backend and writer count:

* ``write_table``: each commit is a whole ``lakelog.write_table`` append of one row (snapshot load,
  Parquet file, commit), i.e. what an application sees;
* ``log``: each commit is a ``Transaction.commit`` of one add action on the writer's refreshed snapshot
  (no data file), i.e. the log protocol alone: put-if-absent, lost races, rebase, checkpoints.

Writers are separate processes released together; the clock runs from their release until the last
one finishes. The S3 endpoint is moto's ThreadedMotoServer on 127.0.0.1 (a free port) in this
process, so S3 numbers measure lakelog + s3fs + moto over real HTTP, not AWS latency.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------- worker (a subprocess)

def _worker(cfg: dict) -> None:
    import pyarrow as pa

    import lakelog
    from lakelog.actions import AddFile, now_ms
    from lakelog.log.snapshot import Snapshot
    from lakelog.storage import Storage
    from lakelog.transaction import Transaction

    path, opts, w, n = cfg["path"], cfg.get("storage_options"), cfg["writer"], cfg["count"]
    storage = Storage(path, opts)
    storage.check_atomic_commits()  # the once-per-process S3 probe happens before the clock starts
    snap = Snapshot.load(storage)
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        if cfg["workload"] == "write_table":
            lakelog.write_table(path, pa.table({"writer": [w], "seq": [i]}), storage_options=opts)
            attempts = None
        else:
            snap = snap.updated()
            add = AddFile(path=f"bench-{w}-{i}-{uuid.uuid4().hex}.parquet", partition_values={}, size=1,
                          modification_time=now_ms(), data_change=True, stats=None)
            attempts = Transaction(storage, snap, "WRITE", {}).commit([add]).attempts
        out.append({"seconds": time.perf_counter() - t0, "attempts": attempts})
    print(json.dumps(out), flush=True)


# ---------------------------------------------------------------- driver

def _run(path: str, opts, workload: str, writers: int, per_writer: int) -> dict:
    cfgs = [{"path": path, "storage_options": opts, "writer": w, "count": per_writer, "workload": workload} for w in range(writers)]
    procs = [
        subprocess.Popen([sys.executable, "-m", "benchmarks.commits", "--worker", json.dumps(c)], cwd=ROOT,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for c in cfgs
    ]
    try:
        for p in procs:
            line = p.stdout.readline().strip()
            if line != "ready":
                raise RuntimeError(f"benchmark worker failed to start: {line!r}")
        t0 = time.perf_counter()
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        results = []
        for p in procs:
            out, _ = p.communicate(timeout=300)
            if p.returncode:
                raise RuntimeError(f"benchmark worker failed with exit code {p.returncode}")
            results += json.loads(out.strip().splitlines()[-1])
        elapsed = time.perf_counter() - t0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    lat = sorted(r["seconds"] * 1000 for r in results)
    attempts = [r["attempts"] for r in results if r["attempts"] is not None]
    return {
        "commits": len(results),
        "seconds": elapsed,
        "commits_per_s": len(results) / elapsed,
        "p50_ms": statistics.median(lat),
        "p95_ms": lat[min(len(lat) - 1, int(len(lat) * 0.95))],
        "max_ms": lat[-1],
        "mean_attempts": statistics.mean(attempts) if attempts else None,
    }


def _new_table(path: str, opts) -> None:
    import pyarrow as pa

    import lakelog

    lakelog.write_table(path, pa.table({"writer": pa.array([], pa.int64()), "seq": pa.array([], pa.int64())}), storage_options=opts)


class _LockConditionalWrites:
    """moto checks If-None-Match and then stores without a lock; AWS S3 lets exactly one conditional PUT win.
    Serializing conditional writes gives the local endpoint S3's guarantee."""

    def __init__(self, app):
        self.app, self.lock = app, threading.Lock()

    def __call__(self, environ, start_response):
        if "HTTP_IF_NONE_MATCH" in environ and environ.get("REQUEST_METHOD") in ("PUT", "POST"):
            with self.lock:
                return list(self.app(environ, start_response))
        return self.app(environ, start_response)


def _start_moto():
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    if getattr(server, "_server", None) is not None:
        server._server.app = _LockConditionalWrites(server._server.app)
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_ENDPOINT_URL=url,
                      AWS_DEFAULT_REGION="us-east-1", AWS_REGION="us-east-1")
    import fsspec

    fsspec.filesystem("s3").mkdir("lakelog-bench")
    return server, url


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--no-s3", action="store_true", help="skip the S3 (moto) runs")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the number of commits per writer")
    args = ap.parse_args(argv)
    if args.worker:
        _worker(json.loads(args.worker))
        return

    # (backend, workload, writers, commits per writer)
    plan = [
        ("local", "log", 1, 60), ("local", "log", 6, 20),
        ("local", "write_table", 1, 40), ("local", "write_table", 6, 10),
    ]
    if not args.no_s3:
        plan += [
            ("s3", "log", 1, 20), ("s3", "log", 6, 6),
            ("s3", "write_table", 1, 12), ("s3", "write_table", 6, 4),
        ]
    server = None
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for backend, workload, writers, n in plan:
                n = max(1, round(n * args.scale))
                if backend == "s3":
                    if server is None:
                        server, _ = _start_moto()
                    path, opts = f"s3://lakelog-bench/{uuid.uuid4().hex}", None
                else:
                    path, opts = os.path.join(tmp, uuid.uuid4().hex), None
                _new_table(path, opts)
                r = _run(path, opts, workload, writers, n)
                rows.append((backend, workload, writers, r))
                att = f"{r['mean_attempts']:.2f}" if r["mean_attempts"] is not None else "-"
                print(f"{backend:6} {workload:12} writers={writers}  {r['commits']:4d} commits in {r['seconds']:6.2f}s  "
                      f"{r['commits_per_s']:7.1f} commits/s   latency p50 {r['p50_ms']:7.1f} ms  p95 {r['p95_ms']:7.1f} ms  "
                      f"max {r['max_ms']:7.1f} ms   attempts/commit {att}", flush=True)
        finally:
            if server is not None:
                server.stop()
    print(f"\n(machine: {os.cpu_count()} cores; commits/s counts every commit of every writer)")


if __name__ == "__main__":
    main()

"""python -m benchmarks.checkpoints [--files N]: classic against V2 (sidecar) checkpoints on a large table.

Builds two tables with N files each (commits of 10,000 adds, no checkpoint yet), one with
``delta.checkpointPolicy=v2``, then, each in a fresh subprocess: load the snapshot from the JSON commits,
write the checkpoint (time, and peak RSS growth while writing), then load the snapshot again from the
checkpoint alone (time). Prints one JSON line per table kind.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

COMMIT_FILES = 10_000


def build(path: str, files: int, v2: bool) -> None:
    import pyarrow as pa

    import lakelog
    from lakelog.actions import AddFile, CommitInfo
    from lakelog.log.delta_log import DeltaLog
    from lakelog.storage import Storage

    config = {"delta.checkpointInterval": "1000000"}
    if v2:
        config["delta.checkpointPolicy"] = "v2"
    lakelog.write_table(path, pa.table({"id": pa.array([0], pa.int64()), "p": ["x"]}), partition_by=["p"], configuration=config)
    log = DeltaLog(Storage(path))
    version, done = 1, 0
    while done < files:
        n = min(COMMIT_FILES, files - done)
        adds = [
            AddFile(
                path=f"p=x/part-{done + i:08d}.parquet",
                partition_values={"p": "x"},
                size=1000 + i,
                modification_time=1_700_000_000_000,
                data_change=True,
                stats=json.dumps({"numRecords": 10, "minValues": {"id": done + i}, "maxValues": {"id": done + i + 9}, "nullCount": {"id": 0}}),
            )
            for i in range(n)
        ]
        log.write_commit(version, [CommitInfo({"operation": "WRITE"}), *adds])
        version += 1
        done += n


def measure(path: str) -> dict:
    from lakelog.log.checkpoint import write_checkpoint
    from lakelog.log.delta_log import DeltaLog
    from lakelog.log.snapshot import Snapshot
    from lakelog.storage import Storage

    storage = Storage(path)
    snap = Snapshot.load(storage)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    write_checkpoint(snap)
    write_s = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    listing = DeltaLog(storage).list()
    for v in list(listing.commits):  # only the checkpoint may serve the next load
        if v < snap.version:
            os.remove(os.path.join(path, "_delta_log", f"{v:020d}.json"))
    t0 = time.perf_counter()
    again = Snapshot.load(storage)
    load_s = time.perf_counter() - t0
    assert again.num_files == snap.num_files and again.file_set.base is not None
    return {"files": snap.num_files, "write_s": round(write_s, 2), "write_rss_growth_mib": round((peak - base) / 1024, 1), "load_s": round(load_s, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=300_000)
    ap.add_argument("--measure", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("classic", "v2"):
            path = os.path.join(tmp, kind)
            build(path, args.files, kind == "v2")
            out = subprocess.run([sys.executable, "-m", "benchmarks.checkpoints", "--measure", path], capture_output=True, text=True, check=True)
            print(json.dumps({"checkpoint": kind, **json.loads(out.stdout)}))


if __name__ == "__main__":
    main()

"""Reading a table where 10% of the rows are deleted through deletion vectors, against reading the same
live rows from a table without deletion vectors (the target: within 1.3x).

Both tables hold the mixed-type rows of benchmarks.suite in 8 files. The DV table keeps every row in its
files and one on-disk deletion vector per file (a random 10% of its rows, in one shared DV file, as
Spark writes them); the plain table's files hold only the live rows.

    python -m benchmarks.deletion_vectors [--quick]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import struct
import tempfile
import time
import uuid
import zlib

import numpy as np
import orjson
import pyarrow as pa
from pyroaring import BitMap64

import lakelog
from benchmarks.suite import mixed_table

FILES = 8
PORTABLE_MAGIC = 1681511377
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def _z85(data: bytes) -> str:
    out = []
    for i in range(0, len(data), 4):
        v = int.from_bytes(data[i : i + 4], "big")
        block = []
        for _ in range(5):
            v, d = divmod(v, 85)
            block.append(_Z85[d])
        out.append("".join(reversed(block)))
    return "".join(out)


def build(root: str, rows: int, fraction: float = 0.1, seed: int = 7) -> tuple[str, str, int]:
    """(DV table path, plain table path, live rows)."""
    data = mixed_table(rows)
    per_file = rows // FILES
    dv_path, plain_path = os.path.join(root, "dv"), os.path.join(root, "plain")
    rng = np.random.default_rng(seed)
    for i in range(FILES):
        lakelog.write_table(dv_path, data.slice(i * per_file, per_file), mode="append")
    adds = sorted(lakelog.Table(dv_path).snapshot.files.values(), key=lambda a: a.modification_time)
    blob, descs, live = bytearray([1]), [], []
    dv_uuid = uuid.uuid4()
    for i, add in enumerate(adds):
        deleted = np.sort(rng.choice(per_file, int(per_file * fraction), replace=False)).astype(np.uint64)
        bitmap = struct.pack("<i", PORTABLE_MAGIC) + BitMap64(deleted.tolist()).serialize()
        descs.append({"storageType": "u", "pathOrInlineDv": _z85(dv_uuid.bytes), "offset": len(blob), "sizeInBytes": len(bitmap), "cardinality": len(deleted)})
        blob += struct.pack(">i", len(bitmap)) + bitmap + struct.pack(">I", zlib.crc32(bitmap))
        keep = np.ones(per_file, bool)
        keep[deleted.astype(np.int64)] = False
        live.append(data.slice(i * per_file, per_file).filter(pa.array(keep)))
    with open(os.path.join(dv_path, f"deletion_vector_{dv_uuid}.bin"), "wb") as f:
        f.write(blob)
    actions = [
        {"commitInfo": {"operation": "DELETE"}},
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"], "writerFeatures": ["deletionVectors"]}},
    ]
    for add, desc in zip(adds, descs):
        actions.append({"remove": {"path": add.path, "deletionTimestamp": 1, "dataChange": True, "size": add.size, "partitionValues": {}}})
        actions.append({"add": dict(add.to_json()["add"], deletionVector=desc)})
    version = lakelog.Table(dv_path).version + 1
    with open(os.path.join(dv_path, "_delta_log", f"{version:020d}.json"), "wb") as f:
        f.write(b"\n".join(orjson.dumps(a) for a in actions) + b"\n")
    for t in live:
        lakelog.write_table(plain_path, t, mode="append")
    return dv_path, plain_path, sum(t.num_rows for t in live)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)  # every thread of the process
    return r.ru_utime + r.ru_stime


def _times(fns, runs: int) -> tuple[list[float], list[float]]:
    """Median wall and CPU time of each function, runs interleaved after one warm-up each (CPU time is
    the steadier figure on a shared machine: it does not count the time other processes hold the cores)."""
    for fn in fns:
        fn()
    wall: list[list[float]] = [[] for _ in fns]
    cpu: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for i, fn in enumerate(fns):
            c0, t0 = _cpu(), time.perf_counter()
            fn()
            wall[i].append(time.perf_counter() - t0)
            cpu[i].append(_cpu() - c0)
    return [statistics.median(t) for t in wall], [statistics.median(t) for t in cpu]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.deletion_vectors")
    ap.add_argument("--quick", action="store_true", help="1M rows and 3 runs (default: 4M rows, 5 runs)")
    args = ap.parse_args(argv)
    rows, runs = (1_000_000, 3) if args.quick else (4_000_000, 5)
    root = tempfile.mkdtemp(prefix="lakelog-bench-dv-")
    try:
        dv_path, plain_path, live = build(root, rows)
        dv_table, plain_table = lakelog.Table(dv_path), lakelog.Table(plain_path)
        assert dv_table.to_pyarrow().num_rows == plain_table.to_pyarrow().num_rows == live
        filt = [("id", "<", rows // 2)]
        contenders = [dv_table.to_pyarrow, plain_table.to_pyarrow, lambda: dv_table.to_pyarrow(filters=filt), lambda: plain_table.to_pyarrow(filters=filt)]
        wall, cpu = _times(contenders, runs)
        print(f"{rows:,} rows in {FILES} files, 10% deleted by deletion vectors ({live:,} live), median of {runs} runs")
        for label, i in (("read all rows", 0), (f"read with id < {rows // 2:,}", 2)):
            print(
                f"  {label:<26} wall: DV {wall[i]:.3f}s plain {wall[i + 1]:.3f}s ratio {wall[i] / wall[i + 1]:.2f}x   "
                f"CPU: DV {cpu[i]:.3f}s plain {cpu[i + 1]:.3f}s ratio {cpu[i] / cpu[i + 1]:.2f}x"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

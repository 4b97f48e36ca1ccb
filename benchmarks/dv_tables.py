"""The tables benchmarks compare deletion-vector reads on: a table whose deletion vectors delete a
fraction of the rows, and a table holding only the live rows."""

from __future__ import annotations

import os

import numpy as np
import orjson
import pyarrow as pa

import lakelog
from lakelog.table_features.deletion_vectors import write_deletion_vectors
from lakelog.storage import Storage

FILES = 8


def build(root: str, data: pa.Table, fraction: float = 0.1, seed: int = 7) -> tuple[str, str, int]:
    """Two tables of ``data``'s rows in FILES files: one whose deletion vectors (one per file, a random
    ``fraction`` of its rows, in one shared DV file as Spark writes them) delete rows, one holding only
    the live rows. Returns (DV table path, plain table path, live rows)."""
    rows = data.num_rows
    per_file = rows // FILES
    dv_path, plain_path = os.path.join(root, "dv"), os.path.join(root, "plain")
    rng = np.random.default_rng(seed)
    for i in range(FILES):
        lakelog.write_table(dv_path, data.slice(i * per_file, per_file), mode="append")
    adds = sorted(lakelog.Table(dv_path).snapshot.files.values(), key=lambda a: a.modification_time)
    bitmaps, live = [], []
    for i in range(len(adds)):
        deleted = np.sort(rng.choice(per_file, int(per_file * fraction), replace=False)).astype(np.uint64)
        bitmaps.append(deleted)
        keep = np.ones(per_file, bool)
        keep[deleted.astype(np.int64)] = False
        live.append(data.slice(i * per_file, per_file).filter(pa.array(keep)))
    _, descs = write_deletion_vectors(Storage(dv_path), bitmaps)  # one shared DV file, as Spark writes them
    actions = [
        {"commitInfo": {"operation": "DELETE"}},
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"], "writerFeatures": ["deletionVectors"]}},
    ]
    for add, desc in zip(adds, descs):
        actions.append({"remove": {"path": add.path, "deletionTimestamp": 1, "dataChange": True, "size": add.size, "partitionValues": {}}})
        actions.append({"add": dict(add.to_json()["add"], deletionVector=desc.to_json())})
    version = lakelog.Table(dv_path).version + 1
    with open(os.path.join(dv_path, "_delta_log", f"{version:020d}.json"), "wb") as f:
        f.write(b"\n".join(orjson.dumps(a) for a in actions) + b"\n")
    for t in live:
        lakelog.write_table(plain_path, t, mode="append")
    return dv_path, plain_path, sum(t.num_rows for t in live)

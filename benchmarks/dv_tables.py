"""The tables benchmarks compare deletion-vector reads on: a table whose deletion vectors delete a
fraction of the rows, and a table holding only the live rows."""

from __future__ import annotations

import os
import struct
import uuid
import zlib

import numpy as np
import orjson
import pyarrow as pa
from pyroaring import BitMap64

import lakelog

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

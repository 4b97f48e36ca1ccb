"""An encoder of Delta deletion vectors written from the specifications alone (no roaring library),
so that tests can check lakelog's reader against an independent implementation:

* Z85 (ZeroMQ RFC 32), as Delta uses it for inline DVs and UUID file names;
* the 32-bit Roaring portable format (github.com/RoaringBitmap/RoaringFormatSpec): array, bitmap and
  run containers, with and without the offset header;
* Delta's RoaringBitmapArray: magic 1681511377 (int32 little-endian), the bucket count (uint64), then
  each bucket's high 32 bits (uint32) and its 32-bit bitmap;
* a DV file: version byte 1, then per DV a big-endian int32 size, the bitmap and a big-endian CRC-32.
"""

from __future__ import annotations

import struct
import uuid
import zlib

Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
MAGIC = 1681511377
SERIAL_COOKIE_NO_RUNCONTAINER = 12346
SERIAL_COOKIE = 12347
NO_OFFSET_THRESHOLD = 4


def z85_encode(data: bytes) -> str:
    """Z85 of ``data`` zero-padded to a multiple of 4 bytes (as Delta's Spark writer pads)."""
    data = data + b"\0" * (-len(data) % 4)
    out = []
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i : i + 4], "big")
        block = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            block.append(Z85[digit])
        out.append("".join(reversed(block)))
    return "".join(out)


def _runs(values: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for v in values:
        if runs and runs[-1][0] + runs[-1][1] + 1 == v:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((v, 0))
    return runs


def roaring32(values: list[int], use_runs: bool | list[bool] = False) -> bytes:
    """The portable serialization of a set of uint32 values; ``use_runs``: run containers (for all, or per
    container)."""
    values = sorted(set(values))
    containers: dict[int, list[int]] = {}
    for v in values:
        containers.setdefault(v >> 16, []).append(v & 0xFFFF)
    keys = sorted(containers)
    n = len(keys)
    runs = use_runs if isinstance(use_runs, list) else [use_runs] * n
    any_runs = any(runs[:n])
    head = bytearray()
    if any_runs:
        head += struct.pack("<I", SERIAL_COOKIE | ((n - 1) << 16))
        flags = bytearray((n + 7) // 8)
        for i in range(n):
            if runs[i]:
                flags[i // 8] |= 1 << (i % 8)
        head += flags
    else:
        head += struct.pack("<II", SERIAL_COOKIE_NO_RUNCONTAINER, n)
    for k in keys:
        head += struct.pack("<HH", k, len(containers[k]) - 1)
    bodies = []
    for i, k in enumerate(keys):
        low = containers[k]
        if runs[i]:
            rs = _runs(low)
            bodies.append(struct.pack("<H", len(rs)) + b"".join(struct.pack("<HH", s, length) for s, length in rs))
        elif len(low) <= 4096:
            bodies.append(struct.pack(f"<{len(low)}H", *low))
        else:
            words = [0] * 1024
            for v in low:
                words[v >> 6] |= 1 << (v & 63)
            bodies.append(struct.pack("<1024Q", *words))
    if not any_runs or n >= NO_OFFSET_THRESHOLD:
        offset = len(head) + 4 * n
        for b in bodies:
            head += struct.pack("<I", offset)
            offset += len(b)
    return bytes(head) + b"".join(bodies)


def roaring_bitmap_array(rows: list[int], use_runs: bool = False) -> bytes:
    """Delta's portable RoaringBitmapArray of 64-bit row indexes."""
    buckets: dict[int, list[int]] = {}
    for r in sorted(set(rows)):
        buckets.setdefault(r >> 32, []).append(r & 0xFFFFFFFF)
    out = struct.pack("<i", MAGIC) + struct.pack("<Q", len(buckets))
    for high in sorted(buckets):
        out += struct.pack("<I", high) + roaring32(buckets[high], use_runs)
    return out


def dv_file(bitmaps: list[bytes]) -> tuple[bytes, list[int]]:
    """A DV file holding ``bitmaps``, and each one's offset."""
    out = bytearray([1])
    offsets = []
    for b in bitmaps:
        offsets.append(len(out))
        out += struct.pack(">i", len(b)) + b + struct.pack(">I", zlib.crc32(b))
    return bytes(out), offsets


def uuid_dv(u: uuid.UUID, prefix: str = "") -> tuple[str, str]:
    """(``pathOrInlineDv`` of a ``u`` descriptor, the DV file's table-relative path)."""
    name = f"deletion_vector_{u}.bin"
    return prefix + z85_encode(u.bytes), f"{prefix}/{name}" if prefix else name

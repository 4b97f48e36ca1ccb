"""Deletion vectors: which rows of a data file are deleted (Delta's ``deletionVectors`` reader feature).

A descriptor (``lakelog.actions.DeletionVectorDescriptor``) names a serialized bitmap of file row
indexes (0-based positions in the Parquet file, across row groups):

* ``u``: a file in the table, ``[<prefix>/]deletion_vector_<uuid>.bin``, the UUID z85-encoded in the
  last 20 characters of ``pathOrInlineDv`` and the optional prefix before them;
* ``p``: a file at an absolute URI. lakelog reads only files inside the table root (the rule it
  applies to data files): a ``p`` path elsewhere is an ``InvalidPathError``, never followed;
* ``i``: the bitmap itself, z85-encoded (Spark pads the last block with zeros and ``sizeInBytes``
  gives the real length; the Rust z85 crate writes a short last block as ``#`` characters followed by
  the remaining digits: both are read).

A DV file holds a version byte (1), then at each DV's ``offset`` a big-endian int32 size (equal to
``sizeInBytes``), the bitmap, and a big-endian CRC-32 of the bitmap. The bitmap is Delta's
"RoaringBitmapArray": a little-endian magic number (1681511377) followed by the 64-bit portable
Roaring format, which ``pyroaring.BitMap64`` reads; the older "native" layout (magic 1681511376, one
32-bit bitmap per bucket) is read too. Every check (version, size, checksum, magic, cardinality, row
indexes within the file) fails with a ``DeletionVectorError`` naming the DV file, the data file and
the offset: a file whose deleted rows are unknown is never read.
"""

from __future__ import annotations

import struct
import threading
import uuid
import zlib
from urllib.parse import unquote, urlsplit

import numpy as np
from pyroaring import BitMap, BitMap64

from .actions import AddFile, DeletionVectorDescriptor, decode_path
from .errors import CorruptDeletionVectorError, InvalidPathError, MissingDeletionVectorError

PORTABLE_MAGIC = 1681511377
NATIVE_MAGIC = 1681511376
FORMAT_VERSION = 1
INLINE = "<inline>"

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {c: i for i, c in enumerate(_Z85)}


# ---------------------------------------------------------------- z85

def z85_decode(text: str) -> bytes:
    """Decode Z85 text (a multiple of 5 characters; a last block starting with ``#`` is the short-tail
    form). ``ValueError`` for characters outside the alphabet or a block beyond 32 bits."""
    if len(text) % 5:
        raise ValueError(f"z85 text has {len(text)} characters, not a multiple of 5")
    out = bytearray()
    for i in range(0, len(text), 5):
        block = text[i : i + 5]
        pad = 0
        if block[0] == "#" and i + 5 == len(text):
            # No 32-bit value starts with the last digit: this is a tail of 4 - pad bytes, encoded as the
            # low bytes of a block whose first pad digits (zeros) are written as '#'.
            pad = len(block) - len(block.lstrip("#"))
            if pad >= 4:
                raise ValueError("z85 tail block without digits")
            block = "0" * pad + block[pad:]
        value = 0
        for c in block:
            v = _Z85_VALUE.get(c)
            if v is None:
                raise ValueError(f"{c!r} is not a z85 character")
            value = value * 85 + v
        if value >= 1 << (32 - 8 * pad):
            raise ValueError(f"z85 block {text[i : i + 5]!r} exceeds {4 - pad} bytes")
        out += value.to_bytes(4, "big")[pad:]
    return bytes(out)


# ---------------------------------------------------------------- where a DV is

def uuid_relative_path(path_or_inline_dv: str) -> str:
    """The table-relative file of a ``u`` descriptor: ``[<prefix>/]deletion_vector_<uuid>.bin``."""
    if len(path_or_inline_dv) < 20:
        raise ValueError(f"{path_or_inline_dv!r} is too short for a z85-encoded UUID (20 characters)")
    prefix, encoded = path_or_inline_dv[:-20], path_or_inline_dv[-20:]
    name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded))}.bin"
    return f"{prefix}/{name}" if prefix else name


def _inside_root(storage, uri: str) -> str | None:
    """The table-relative path of an absolute DV URI inside the table root, else None."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if storage.is_local:
        if scheme not in ("", "file") or parts.netloc not in ("", "localhost"):
            return None
        where = unquote(parts.path)
    else:
        protos = storage.fs.protocol if isinstance(storage.fs.protocol, (tuple, list)) else (storage.fs.protocol,)
        if scheme not in protos and not ({scheme, *protos} <= {"s3", "s3a", "s3n"}):
            return None
        where = unquote(parts.netloc) + unquote(parts.path)
    root = storage.root.rstrip("/") + "/"
    if not where.startswith(root):
        return None
    rel = where[len(root):]
    if any(p in ("", ".", "..") for p in rel.split("/")):
        return None
    return rel


def dv_file(storage, dv: DeletionVectorDescriptor, data_path: str) -> str:
    """The table-relative path of the file holding an on-disk (``u``/``p``) deletion vector."""
    try:
        if dv.storage_type == "u":
            rel = uuid_relative_path(dv.path_or_inline_dv)
            decode_path(rel)  # a prefix must not escape the table
            return rel
    except (ValueError, InvalidPathError) as e:
        raise CorruptDeletionVectorError(
            f"data file {data_path!r} names the deletion vector {dv.path_or_inline_dv!r}, which is not a valid "
            f"z85-encoded UUID file name ({e}); the log is damaged",
            [dv.path_or_inline_dv, data_path],
        ) from None
    rel = _inside_root(storage, dv.path_or_inline_dv)
    if rel is None:
        raise InvalidPathError(
            f"data file {data_path!r} has its deletion vector at the absolute path {dv.path_or_inline_dv!r}, outside "
            f"the table root {storage.uri!r}; lakelog only reads files inside the table (as for data files). Rewrite "
            "the file without its deletion vector (e.g. REORG TABLE ... APPLY (PURGE)) with the engine that wrote it."
        )
    return rel


def referenced_dv_file(storage, action) -> str | None:
    """The table-relative DV file an add/remove needs (None: no DV, inline, or outside the table)."""
    dv = action.deletion_vector
    if dv is None or dv.storage_type == "i":
        return None
    try:
        return dv_file(storage, dv, action.path)
    except (CorruptDeletionVectorError, InvalidPathError):
        return None


# ---------------------------------------------------------------- the bitmap

def decode_bitmap(data: bytes) -> np.ndarray:
    """Sorted row indexes (uint64) of a serialized RoaringBitmapArray; ``ValueError`` if malformed."""
    if len(data) < 4:
        raise ValueError(f"{len(data)} bytes are too few for a RoaringBitmapArray")
    (magic,) = struct.unpack_from("<i", data, 0)
    if magic == PORTABLE_MAGIC:
        if len(data) < 12:
            raise ValueError("the bitmap ends before its bucket count")
        try:
            bm = BitMap64.deserialize(data[4:])
        except (ValueError, IndexError, OverflowError) as e:
            raise ValueError(f"the 64-bit Roaring bitmap does not deserialize ({e})") from None
        rows = np.frombuffer(bm.to_array(), dtype=np.uint64)
    elif magic == NATIVE_MAGIC:
        rows = _decode_native(data)
    else:
        raise ValueError(f"magic number {magic} is not a RoaringBitmapArray's ({PORTABLE_MAGIC})")
    if len(rows) and rows[-1] >= 2**63:
        raise ValueError("a row index is beyond 2^63")
    return rows


def _decode_native(data: bytes) -> np.ndarray:
    (count,) = struct.unpack_from("<i", data, 4)
    if count < 0:
        raise ValueError(f"negative bucket count {count}")
    pos, parts = 8, []
    for bucket in range(count):
        if pos + 4 > len(data):
            raise ValueError("the bitmap ends inside its buckets")
        (size,) = struct.unpack_from("<i", data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise ValueError(f"bucket {bucket} has an impossible size {size}")
        try:
            values = np.frombuffer(BitMap.deserialize(data[pos : pos + size]).to_array(), dtype=np.uint32)
        except (ValueError, IndexError, OverflowError) as e:
            raise ValueError(f"bucket {bucket} does not deserialize ({e})") from None
        parts.append(values.astype(np.uint64) | np.uint64(bucket << 32))
        pos += size
    return np.concatenate(parts) if parts else np.empty(0, np.uint64)


# ---------------------------------------------------------------- reading

def read_deletion_vector(storage, dv: DeletionVectorDescriptor, data_path: str) -> np.ndarray:
    """The sorted file row indexes (uint64) a descriptor deletes, after every check (see module doc).
    ``data_path``: the data file's logged path, for messages."""
    if dv.storage_type == "i":
        where, offset = INLINE, None
        try:
            data = z85_decode(dv.path_or_inline_dv)
        except ValueError as e:
            raise _corrupt(dv, where, data_path, offset, f"its inline z85 text does not decode ({e})") from None
        if len(data) < dv.size_in_bytes:
            raise _corrupt(dv, where, data_path, offset, f"it decodes to {len(data)} bytes, fewer than its sizeInBytes {dv.size_in_bytes}")
        data = data[: dv.size_in_bytes]
    else:
        where = dv_file(storage, dv, data_path)
        if dv.offset is None:
            raise _corrupt(dv, where, data_path, None, "its descriptor has no offset (engines disagree on the default; lakelog does not guess)")
        offset = dv.offset
        data = _read_framed(storage, dv, where, data_path, offset)
    try:
        rows = decode_bitmap(data)
    except ValueError as e:
        raise _corrupt(dv, where, data_path, offset, str(e)) from None
    if len(rows) != dv.cardinality:
        raise _corrupt(dv, where, data_path, offset, f"it deletes {len(rows)} rows but its descriptor's cardinality is {dv.cardinality}")
    return rows


def _read_framed(storage, dv: DeletionVectorDescriptor, where: str, data_path: str, offset: int) -> bytes:
    full = storage.join(where)
    try:
        with storage.open_input(full) as f:
            head = f.read(1)
            f.seek(offset)
            frame = f.read(dv.size_in_bytes + 8)
    except FileNotFoundError:
        raise MissingDeletionVectorError(
            f"deletion vector file {where!r} of data file {data_path!r} is missing from {storage.uri!r}; the file's "
            "deleted rows are unknown, so it cannot be read. Restore the file from a backup, or read a version "
            "that does not reference it ('lakelog check' lists every missing file)",
            [where, data_path],
            offset,
        ) from None
    except OSError as e:
        storage.raise_if_unanswered(e, full)
        if "No such file" in str(e) or "not found" in str(e).lower():
            raise MissingDeletionVectorError(
                f"deletion vector file {where!r} of data file {data_path!r} is missing from {storage.uri!r} ({e})", [where, data_path], offset
            ) from None
        raise
    if head != bytes([FORMAT_VERSION]):
        raise _corrupt(dv, where, data_path, offset, f"the file starts with {head!r}, not the format version byte 1")
    if len(frame) < dv.size_in_bytes + 8:
        raise _corrupt(dv, where, data_path, offset, f"the file ends {dv.size_in_bytes + 8 - len(frame)} byte(s) early (truncated)")
    (size,) = struct.unpack_from(">i", frame, 0)
    if size != dv.size_in_bytes:
        raise _corrupt(dv, where, data_path, offset, f"the stored size is {size} bytes, not the descriptor's sizeInBytes {dv.size_in_bytes}")
    data = frame[4 : 4 + size]
    (crc,) = struct.unpack_from(">I", frame, 4 + size)
    if zlib.crc32(data) != crc:
        raise _corrupt(dv, where, data_path, offset, "its CRC-32 checksum does not match (the file is damaged)")
    return data


def _corrupt(dv: DeletionVectorDescriptor, where: str, data_path: str, offset: int | None, why: str) -> CorruptDeletionVectorError:
    at = f" at offset {offset}" if offset is not None else ""
    return CorruptDeletionVectorError(
        f"deletion vector {where!r}{at} of data file {data_path!r} is damaged: {why}. The file's deleted rows are "
        "unknown, so it cannot be read; restore the deletion vector from a backup, or read a version that does not use it",
        [where, data_path],
        offset,
    )


class DeletionVectors:
    """The deletion vectors of one read, each read and checked once (many files may share one)."""

    def __init__(self, storage):
        self.storage = storage
        self._rows: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def rows(self, add: AddFile) -> np.ndarray | None:
        """Sorted deleted row indexes of ``add`` (None when it has no deletion vector)."""
        dv = add.deletion_vector
        if dv is None:
            return None
        key = dv.unique_id
        rows = self._rows.get(key)
        if rows is None:
            rows = read_deletion_vector(self.storage, dv, add.path)
            with self._lock:
                self._rows[key] = rows
        return rows


def keep_mask(deleted: np.ndarray | None, start: int, n: int) -> np.ndarray | None:
    """Which of the rows ``start .. start + n - 1`` of a file survive ``deleted`` (None: all of them)."""
    if deleted is None or n == 0 or not len(deleted):
        return None
    lo, hi = np.searchsorted(deleted, [start, start + n])
    if lo == hi:
        return None
    mask = np.ones(n, dtype=bool)
    mask[(deleted[lo:hi] - np.uint64(start)).astype(np.int64)] = False
    return mask


def check_row_count(deleted: np.ndarray | None, num_rows: int, add: AddFile, storage) -> None:
    """A deletion vector naming rows past the end of its data file belongs to another file: refuse."""
    if deleted is not None and len(deleted) and int(deleted[-1]) >= num_rows:
        dv = add.deletion_vector
        where = INLINE if dv.storage_type == "i" else dv_file(storage, dv, add.path)
        raise _corrupt(dv, where, add.path, dv.offset, f"it deletes row {int(deleted[-1])}, but the data file has only {num_rows} rows")


# ---------------------------------------------------------------- writing

def z85_encode(data: bytes) -> str:
    """Z85 of ``data`` (a multiple of 4 bytes, as UUIDs are)."""
    if len(data) % 4:
        raise ValueError(f"z85 encodes multiples of 4 bytes, not {len(data)}")
    out = []
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i : i + 4], "big")
        block = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            block.append(_Z85[digit])
        out.append("".join(reversed(block)))
    return "".join(out)


def encode_bitmap(rows: np.ndarray) -> bytes:
    """The portable RoaringBitmapArray of the row indexes ``rows`` (any order, uint64-convertible)."""
    return struct.pack("<i", PORTABLE_MAGIC) + BitMap64(np.asarray(rows, dtype=np.uint64)).serialize()


def write_deletion_vectors(storage, bitmaps: list[np.ndarray]) -> tuple[str | None, list[DeletionVectorDescriptor]]:
    """Write one ``u`` DV file in the table root holding a deletion vector per entry of ``bitmaps`` (sorted
    unique row indexes); returns its table-relative path (None when ``bitmaps`` is empty) and their
    descriptors, in order. The file is new (a random UUID names it), so no reader can see it half-written:
    only a later commit refers to it."""
    if not bitmaps:
        return None, []
    u = uuid.uuid4()
    rel = f"deletion_vector_{u}.bin"
    name = z85_encode(u.bytes)
    out = bytearray([FORMAT_VERSION])
    descriptors = []
    for rows in bitmaps:
        data = encode_bitmap(rows)
        descriptors.append(DeletionVectorDescriptor(
            storage_type="u", path_or_inline_dv=name, size_in_bytes=len(data), cardinality=len(rows), offset=len(out),
        ))
        out += struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data))
    storage.put(storage.join(rel), bytes(out))
    return rel, descriptors

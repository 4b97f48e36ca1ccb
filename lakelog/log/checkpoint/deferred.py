"""Checkpoint add fields read when first needed: ``stats`` (and ``stats_parsed``) are most of a
checkpoint's bytes, yet opening a table and listing its files never reads them; only planning with a
data filter, building ``AddFile`` objects and writing the next checkpoint do.

When the checkpoint is read, the compressed bytes of those fields' column chunks (and the file's footer)
are kept, read from the same open file as the rest: decoding them later reads nothing from storage, so
a snapshot stays usable if its checkpoint is removed or replaced after it was loaded, and its stats are
those of the rows it read. They cost their compressed size (about a seventh of the decoded strings).
"""

from __future__ import annotations

import bisect
import io
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from ...errors import CorruptLogError
from ...storage.parquet_read import parquet_file

DEFERRED_FIELDS = ("stats", "stats_parsed")  # add fields read when first asked for
# The types a deferred field may have: only its values are checked when it is read later.
_TYPE_CHECKS = {"stats": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t), "stats_parsed": pa.types.is_struct}


def valid_rows(col: pa.ChunkedArray) -> list[pa.Array]:
    """The non-null rows of a column, chunk by chunk: a zero-copy slice where they form one run (lakelog
    and Spark write the actions of each kind as one block), a filtered copy only where they do not."""
    out = []
    for c in col.chunks:
        nulls = c.null_count
        if nulls == len(c):
            continue
        if nulls == 0:
            out.append(c)
            continue
        valid = c.is_valid()
        rows = pc.indices_nonzero(valid)
        first, last = rows[0].as_py(), rows[-1].as_py()
        out.append(c.slice(first, len(rows)) if last - first + 1 == len(rows) else c.filter(valid))
    return out


def add_columns_now(add_type: pa.DataType) -> tuple[list[str], tuple[str, ...]]:
    """For a checkpoint file's ``add`` column: the columns to read now (``add.<field>``) and the fields
    deferred; ([], ()) when nothing can be deferred (no such field, or a field name a dotted column path
    cannot name)."""
    if not pa.types.is_struct(add_type):
        return [], ()
    names = [add_type.field(i).name for i in range(add_type.num_fields)]
    deferred = tuple(n for n in names if n in DEFERRED_FIELDS)
    if not deferred or "path" not in names or any("." in n for n in names):
        return [], ()
    if not all(_TYPE_CHECKS[n](add_type.field(n).type) for n in deferred):
        return [], ()  # a wrongly typed field makes the checkpoint unusable, which must show when it is read
    return [f"add.{n}" for n in names if n not in DEFERRED_FIELDS], deferred


def _chunk_start(c) -> int:
    if c.has_dictionary_page and c.dictionary_page_offset and c.dictionary_page_offset > 0:
        return c.dictionary_page_offset
    return c.data_page_offset


def kept_bytes(source, metadata, size: int, deferred: tuple[str, ...]) -> "SparseFile":
    """The bytes of a Parquet file ``source`` (``size`` bytes, footer ``metadata``) that reading the
    ``deferred`` add fields needs: their column chunks, each up to the next chunk (a chunk's recorded size
    is not trusted) and the footer. Read now from ``source``, an open pyarrow file."""
    prefixes = tuple(f"add.{n}" for n in deferred)
    starts, wanted = set(), []
    for g in range(metadata.num_row_groups):
        rg = metadata.row_group(g)
        for i in range(rg.num_columns):
            c = rg.column(i)
            start = _chunk_start(c)
            starts.add(start)
            path = c.path_in_schema
            if path in prefixes or path.startswith(tuple(p + "." for p in prefixes)):
                wanted.append(start)
    source.seek(size - 8)
    footer = size - 8 - int.from_bytes(source.read(4), "little")
    bounds = sorted(starts | {footer})
    spans: list[list[int]] = []
    for start in sorted(wanted):
        end = bounds[bisect.bisect_right(bounds, start)] if start < footer else footer
        if spans and spans[-1][1] >= start:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    spans.append([footer, size])
    ranges = []
    for start, end in spans:
        source.seek(start)
        ranges.append((start, source.read(end - start)))
    return SparseFile(ranges, size)


class SparseFile(io.RawIOBase):
    """A read-only file of ``size`` bytes of which only ``ranges`` ((offset, bytes), ascending) are held;
    every other byte reads as zero (a Parquet reader never decodes them)."""

    def __init__(self, ranges: list[tuple[int, bytes]], size: int) -> None:
        super().__init__()
        self.ranges, self.size, self.pos = ranges, size, 0
        self._offsets = [o for o, _ in ranges]

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = offset if whence == 0 else self.pos + offset if whence == 1 else self.size + offset
        return self.pos

    def readinto(self, b) -> int:
        view = memoryview(b).cast("B")
        n = max(0, min(len(view), self.size - self.pos))
        view[:n] = bytes(n)
        lo, hi = self.pos, self.pos + n
        k = max(0, bisect.bisect_right(self._offsets, lo) - 1)
        while k < len(self.ranges) and self.ranges[k][0] < hi:
            off, data = self.ranges[k]
            a, z = max(lo, off), min(hi, off + len(data))
            if a < z:
                view[a - lo : z - lo] = data[a - off : z - off]
            k += 1
        self.pos = hi
        return n

    @property
    def held(self) -> int:
        return sum(len(d) for _, d in self.ranges)


@dataclass
class DeferredStats:
    """The deferred add fields of a checkpoint's add chunks: per file, the bytes kept (``kept_bytes``) and
    the fields; the row-group runs read, with the number of valid add rows each chunk of a run took."""

    name: str  # the checkpoint's name, for messages
    files: list[tuple[SparseFile, tuple[str, ...]]] = field(default_factory=list)
    runs: list[tuple[int, list[int], list[int]]] = field(default_factory=list)  # (file, row groups, chunk lengths)

    def add_file(self, kept: SparseFile, deferred: tuple[str, ...]) -> int:
        self.files.append((kept, deferred))
        return len(self.files) - 1

    def add_run(self, file: int, run: list[int], lengths: list[int]) -> None:
        if lengths:
            self.runs.append((file, list(run), lengths))

    def read(self) -> list[pa.StructArray]:
        """The deferred fields of every chunk recorded, in order (struct arrays of the valid rows)."""
        out: list[pa.StructArray] = []
        by_file: dict[int, list[tuple[list[int], list[int]]]] = {}
        for f, run, lengths in self.runs:
            by_file.setdefault(f, []).append((run, lengths))
        read: dict[int, list[pa.StructArray]] = {}
        for f, runs in by_file.items():
            read[f] = self._read_file(f, runs)
        taken = {f: 0 for f in read}
        for f, _, lengths in self.runs:
            for _ in lengths:
                out.append(read[f][taken[f]])
                taken[f] += 1
        return out

    def _read_file(self, f: int, runs: list[tuple[list[int], list[int]]]) -> list[pa.StructArray]:
        kept, deferred = self.files[f]
        kept.seek(0)
        source = pa.PythonFile(kept, mode="r")
        out: list[pa.StructArray] = []
        try:
            pf = parquet_file(source)
            columns = [f"add.{n}" for n in deferred]
            for run, lengths in runs:
                rows = valid_rows(pf.read_row_groups(run, columns=columns).column("add"))
                whole = rows[0] if len(rows) == 1 else pa.concat_arrays(rows) if rows else None
                if whole is None or len(whole) != sum(lengths):
                    raise CorruptLogError(f"checkpoint {self.name} holds add rows without their {'/'.join(deferred)} (a malformed file)")
                start = 0
                for n in lengths:
                    out.append(whole.slice(start, n))
                    start += n
        except (OSError, pa.ArrowException) as e:
            raise CorruptLogError(f"checkpoint {self.name} is unreadable ({e})") from None
        finally:
            source.close()
        return out


def with_fields(now: pa.StructArray, later: pa.StructArray, order: list[pa.Field]) -> pa.StructArray:
    """The add rows ``now`` (valid rows, the fields read first) with the deferred fields of ``later``,
    in the file's field order ``order``."""
    children, fields = [], []
    for f in order:
        src = now if now.type.get_field_index(f.name) >= 0 else later
        child = src.field(f.name)
        children.append(child)
        fields.append(pa.field(f.name, child.type, f.nullable))
    return pa.StructArray.from_arrays(children, fields=fields)

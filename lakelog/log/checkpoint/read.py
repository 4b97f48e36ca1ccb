"""Reading checkpoints of every kind the protocol defines (see the package docstring); anything malformed
is a ``CorruptLogError``, so readers fall back to an older checkpoint or to the JSON commits."""

from __future__ import annotations

import datetime as dt
import decimal
import threading
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ...actions import (
    CommitInfo,
    Action,
    AddFile,
    DeletionVectorDescriptor,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    Txn,
    paths_to_decode,
    decode_path,
    dv_id,
    parse_actions,
)
from .deferred import DEFERRED_FIELDS, DeferredStats, SparseFile, add_columns_now, kept_bytes, valid_rows, with_fields
from .v2 import CheckpointMetadata, Sidecar, read_sidecars
from ...schema import arrow_values
from ...errors import CorruptLogError
from ..delta_log import CheckpointFiles, checkpoint_name
from ...storage.parquet_read import parquet_file
from ...storage import FileInfo
from .schema import CHECKPOINT_SCHEMA, NON_FILE_COLUMNS, V2_COLUMNS, _add_rows, _rows


def parse_dv(d: dict | None) -> DeletionVectorDescriptor | None:
    """A checkpoint row's ``deletionVector`` struct (None, or a struct of nulls: no deletion vector)."""
    if not d or d.get("storageType") is None:
        return None
    return DeletionVectorDescriptor.from_json(d)


def _map(v) -> dict | None:
    return None if v is None else dict(v)


@dataclass
class CheckpointState:
    """A checkpoint as read: its add rows stay Arrow columns, one chunk per row group read (most tables
    are mostly adds, and most operations need only their paths); every other action is a Python object.
    Decoded paths stay an Arrow column too: a Python list of them is built when a caller asks. The add
    rows' ``stats`` (and ``stats_parsed``) are read from the checkpoint when first needed
    (``lakelog.log.checkpoint.deferred``)."""

    version: int
    actions: list[Action]  # protocol, metaData, txn, domainMetadata and remove actions
    _add_rows: pa.ChunkedArray  # the valid rows of the ``add`` column (of the sidecars too), as read
    path_column: pa.ChunkedArray  # decoded ``add.path`` of each row (validated like every logged path)
    sidecars: list[str] = field(default_factory=list)  # file names in _delta_log/_sidecars (V2 spec)
    v2: bool = False  # V2 spec (has a checkpointMetadata action)
    dv_ids: list[str | None] | None = None  # deletionVector.uniqueId of each row; None: no row has one
    _deferred: tuple[DeferredStats, list[pa.Field]] | None = None  # fields of the add rows not read yet, and the file's add fields
    _index: dict[str, int] | None = None
    _parsed_stats: dict[str, pa.Table] = field(default_factory=dict)  # by the stats fields parsed (lakelog.read.pruning)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def add_rows(self) -> pa.ChunkedArray:
        """The valid rows of the ``add`` column (of the sidecars too), every field read."""
        if self._deferred is not None:
            with self._lock:
                if self._deferred is not None:
                    self._add_rows = _with_deferred(self._add_rows, *self._deferred)
                    self._deferred = None
        return self._add_rows

    @property
    def num_rows(self) -> int:
        return len(self._add_rows)

    @property
    def adds(self) -> pa.StructArray:
        """The add rows as one array (a copy when they were read in several chunks)."""
        return _combined(self.add_rows)

    @property
    def paths(self) -> list[str]:
        """Decoded ``add.path`` of each row, as a new list (see ``path_column``)."""
        return self.path_column.to_pylist()

    def add_field(self, name: str) -> pa.ChunkedArray | None:
        """The child ``name`` of the add rows, chunked like them (no copy); None when the rows have no such field."""
        return add_field(self.add_rows if name in DEFERRED_FIELDS else self._add_rows, name)

    def add_actions(self) -> list[AddFile]:
        return adds_from_arrow(self.add_rows)

    def rows_by_path(self) -> dict[str, int]:
        """Decoded path -> row of ``add_rows`` (built on first use)."""
        if self._index is None:
            self._index = {p: i for i, p in enumerate(self.paths)}
        return self._index

    def rows_named(self, paths) -> pa.Array:
        """The rows (int64, ascending) whose decoded path is one of ``paths``."""
        if not paths:
            return arrow_values.array([], pa.int64())
        if self._index is not None:  # already built: no need to hash the column again
            rows = self._index
            return arrow_values.array(sorted(i for i in (rows.get(p) for p in paths) if i is not None), pa.int64())
        hit = pc.is_in(self.path_column, value_set=arrow_values.array(list(paths), pa.string()))
        return pc.indices_nonzero(hit.combine_chunks() if isinstance(hit, pa.ChunkedArray) else hit)

    def dv_id(self, path: str) -> str | None:
        """The deletion vector id of the add row of ``path`` (which must be one of ``paths``)."""
        if self.dv_ids is None:
            return None
        return self.dv_ids[self.rows_by_path()[path]]


def _with_deferred(rows: pa.ChunkedArray, deferred: DeferredStats, order: list[pa.Field]) -> pa.ChunkedArray:
    """``rows`` with their deferred fields read, as if read at once (then typed like every add row)."""
    later = deferred.read()
    name = deferred.name
    try:
        chunks = [_typed_adds(with_fields(now, more, order)) for now, more in zip(rows.chunks, later, strict=True)]
    except (ValueError, TypeError, pa.ArrowException) as e:
        raise CorruptLogError(f"checkpoint {name} holds malformed add stats ({e!r})") from None
    out = _union(chunks, name)
    pa.default_memory_pool().release_unused()
    return out


def _combined(arr: pa.ChunkedArray | pa.Array) -> pa.Array:
    if not isinstance(arr, pa.ChunkedArray):
        return arr
    if arr.num_chunks == 1:
        return arr.chunk(0)
    return arr.combine_chunks() if arr.num_chunks else pa.nulls(0, arr.type)


def add_field(adds: pa.ChunkedArray | pa.StructArray, name: str) -> pa.ChunkedArray | pa.Array | None:
    """The child ``name`` of struct rows (chunked like them, no copy); None when the struct has no such field."""
    i = adds.type.get_field_index(name)
    if i < 0:
        return None
    if isinstance(adds, pa.ChunkedArray):
        return pa.chunked_array([c.field(i) for c in adds.chunks], adds.type.field(i).type)
    return adds.field(i)


def _child(adds: pa.StructArray | pa.ChunkedArray, name: str, n: int) -> list:
    child = add_field(adds, name)
    return [None] * n if child is None else child.to_pylist()


def adds_from_arrow(adds: pa.StructArray | pa.ChunkedArray) -> list[AddFile]:
    """``AddFile`` objects for checkpoint add rows, built column by column."""
    n = len(adds)
    if n == 0:
        return []
    paths = add_field(adds, "path").to_pylist()
    pvs, sizes, mtimes = _child(adds, "partitionValues", n), _child(adds, "size", n), _child(adds, "modificationTime", n)
    changes, stats, tags = _child(adds, "dataChange", n), _child(adds, "stats", n), _child(adds, "tags", n)
    dvs = _child(adds, "deletionVector", n) if _has_dvs(adds) else [None] * n
    providers, row_ids, row_versions = _child(adds, "clusteringProvider", n), _child(adds, "baseRowId", n), _child(adds, "defaultRowCommitVersion", n)
    return [
        AddFile(p, dict(pv) if pv else {}, int(sz or 0), int(mt or 0), True if dc is None else dc, st, None if tg is None else dict(tg), parse_dv(dv),
                cp, rid, rcv)
        for p, pv, sz, mt, dc, st, tg, dv, cp, rid, rcv in zip(paths, pvs, sizes, mtimes, changes, stats, tags, dvs, providers, row_ids, row_versions)
    ]


def _has_dvs(adds: pa.StructArray | pa.ChunkedArray) -> bool:
    dv = add_field(adds, "deletionVector")
    if dv is None or dv.null_count == len(dv) or not pa.types.is_struct(dv.type) or dv.type.get_field_index("storageType") < 0:
        return False
    return add_field(dv, "storageType").null_count < len(dv)


def _typed_adds(adds: pa.StructArray) -> pa.StructArray:
    """Checkpoint add rows with the fields lakelog reads cast to the classic checkpoint types (another
    engine may write, say, int32 sizes or large strings); a field that does not cast (a size that is
    not a number) raises ``pa.ArrowException``: the checkpoint is malformed. Other fields stay as read."""
    target = CHECKPOINT_SCHEMA.field("add").type
    children, fields, changed = [], [], False
    for i in range(adds.type.num_fields):
        f, child = adds.type.field(i), adds.field(i)
        j = target.get_field_index(f.name)
        if j >= 0 and f.name != "dataChange" and child.type != target.field(j).type:
            child, changed = child.cast(target.field(j).type), True
        children.append(child)
        fields.append(pa.field(f.name, child.type, f.nullable))
    parsed = adds.type.get_field_index("stats_parsed")
    if parsed >= 0 and adds.field(parsed).null_count < len(adds):
        # Stats Spark stored only in struct form (delta.checkpoint.writeStatsAsJson=false): kept as the JSON
        # stats lakelog reads and writes, so pruning uses them and the checkpoints lakelog writes keep them.
        at = adds.type.get_field_index("stats")
        json_stats = stats_json_from_parsed(adds.field(parsed))
        if at < 0:
            children.append(json_stats)
            fields.append(pa.field("stats", pa.string()))
        else:
            children[at] = pc.coalesce(children[at], json_stats)
        changed = True
    return pa.StructArray.from_arrays(children, fields=fields) if changed else adds


def _stats_value(v):
    if isinstance(v, dt.datetime):
        # as Spark writes JSON stats: milliseconds (readers widen timestamp maxima by 1 ms for this)
        v = v.astimezone(dt.timezone.utc) if v.tzinfo is not None else v
        return v.strftime("%Y-%m-%dT%H:%M:%S.") + f"{v.microsecond // 1000:03d}Z"
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, dict):
        return {k: _stats_value(x) for k, x in v.items() if x is not None and not isinstance(x, (bytes, decimal.Decimal))}
    return v


def stats_json_from_parsed(parsed: pa.Array) -> pa.Array:
    """``add.stats`` JSON text for checkpoint rows that carry only ``add.stats_parsed``. Decimal and binary
    bounds are left out (their text form could round them: a missing bound prunes nothing)."""
    out = []
    for row in parsed.to_pylist():
        if row is None:
            out.append(None)
            continue
        out.append(orjson.dumps({k: _stats_value(v) for k, v in row.items() if v is not None}).decode())
    return arrow_values.array(out, pa.string())


READ_ROWS = 131_072  # checkpoint rows read (and held decoded) at once, unless one row group has more


class _ParquetFile:
    """One Parquet file of a checkpoint, read a row group at a time: reading holds one row group's
    decoded columns and buffers at a time, not the whole file's."""

    def __init__(self, storage, info: FileInfo, name: str, columns: tuple[str, ...]) -> None:
        self.name, self.info = name, info
        try:
            self._file = storage.open_input(info.path)
        except FileNotFoundError:
            raise  # the caller falls back to another checkpoint
        except (OSError, pa.ArrowException) as e:
            storage.raise_if_unanswered(e, info.path)
            raise CorruptLogError(f"checkpoint {name} is unreadable ({e})") from None
        self._storage = storage
        try:
            self._pf = parquet_file(self._file)
            self.names = set(self._pf.schema_arrow.names)
        except (OSError, pa.ArrowException) as e:
            self._file.close()
            storage.raise_if_unanswered(e, info.path)
            raise CorruptLogError(f"checkpoint {name} is unreadable ({e})") from None
        self.columns = [c for c in columns if c in self.names]
        self.deferred: tuple[str, ...] = ()  # add fields left for later (``lakelog.log.checkpoint.deferred``)
        self.run: list[int] = []  # the row groups of the table last yielded

    @property
    def add_type(self) -> pa.DataType | None:
        return self._pf.schema_arrow.field("add").type if "add" in self.columns or self.deferred else None

    def kept_bytes(self) -> SparseFile:
        """The bytes of this file that reading its deferred fields later needs (read now, from this file)."""
        try:
            return kept_bytes(self._file, self._pf.metadata, self._file.size(), self.deferred)
        except (OSError, pa.ArrowException, ValueError) as e:
            self._storage.raise_if_unanswered(e, self.info.path)
            raise CorruptLogError(f"checkpoint {self.name} is unreadable ({e})") from None

    def defer_stats(self) -> None:
        """Read the add rows without their stats (read later, when needed)."""
        now, self.deferred = add_columns_now(self.add_type)
        if self.deferred:
            self.columns = [c for c in self.columns if c != "add"] + now

    def row_groups(self) -> Iterator[pa.Table]:
        """The file's rows, a few row groups at a time: consecutive small row groups are read in one
        call (each read of a checkpoint's nested columns costs about a millisecond however few its
        rows), up to READ_ROWS rows unless one row group alone has more."""
        pf = self._pf
        try:
            if pf.num_row_groups == 0:
                self.run = []
                yield pf.read_row_groups([], columns=self.columns)
            meta = pf.metadata
            run: list[int] = []
            rows = 0
            for i in range(pf.num_row_groups):
                n = meta.row_group(i).num_rows
                if run and rows + n > READ_ROWS:
                    self.run = run
                    yield pf.read_row_groups(run, columns=self.columns)
                    run, rows = [], 0
                run.append(i)
                rows += n
            if run:
                self.run = run
                yield pf.read_row_groups(run, columns=self.columns)
        except (OSError, pa.ArrowException) as e:
            self._storage.raise_if_unanswered(e, self.info.path)
            raise CorruptLogError(f"checkpoint {self.name} is unreadable ({e})") from None

    def close(self) -> None:
        self._file.close()


def _read_parquet(storage, info: FileInfo, name: str, columns: tuple[str, ...]) -> Iterator[pa.Table]:
    """The ``columns`` (those the file has) of a checkpoint file, a row group at a time."""
    f = _ParquetFile(storage, info, name, columns)
    try:
        yield from f.row_groups()
    finally:
        f.close()


def _valid(table: pa.Table, col_name: str) -> list[dict]:
    """The non-null rows of a (small) column as Python values."""
    return [row for c in valid_rows(table.column(col_name)) for row in c.to_pylist()]


def _parse_table(table: pa.Table, name: str, actions: list, add_arrays: list) -> tuple[list[CheckpointMetadata], list[Sidecar]]:
    """Append the actions of a checkpoint (or sidecar) table to ``actions`` and its valid add rows to
    ``add_arrays``; return its checkpointMetadata and sidecar actions."""
    metas: list[CheckpointMetadata] = []
    sidecars: list[Sidecar] = []
    cols = table.column_names
    try:
        if "protocol" in cols:
            for d in _valid(table, "protocol"):
                actions.append(Protocol.from_json(d))
        if "metaData" in cols:
            for d in _valid(table, "metaData"):
                d["configuration"] = _map(d.get("configuration"))
                if d.get("format"):
                    d["format"]["options"] = _map(d["format"].get("options"))
                actions.append(Metadata.from_json(d))
        if "txn" in cols:
            actions.extend(Txn.from_json(d) for d in _valid(table, "txn"))
        if "domainMetadata" in cols:
            actions.extend(DomainMetadata.from_json(d) for d in _valid(table, "domainMetadata"))
        if "checkpointMetadata" in cols:
            for d in _valid(table, "checkpointMetadata"):
                d["tags"] = _map(d.get("tags"))
                metas.append(CheckpointMetadata.from_json(d))
        if "sidecar" in cols:
            for d in _valid(table, "sidecar"):
                d["tags"] = _map(d.get("tags"))
                sidecars.append(Sidecar.from_json(d))
        if "remove" in cols:
            for d in _valid(table, "remove"):
                d["partitionValues"] = _map(d.get("partitionValues"))
                if not isinstance(d.get("path"), str):
                    raise TypeError(f"remove path must be a string, got {d.get('path')!r}")
                actions.append(RemoveFile.from_json(d))
        if "add" in cols:
            col = table.column("add")
            if not pa.types.is_struct(col.type) or col.type.get_field_index("path") < 0:
                raise TypeError(f"add column has type {col.type}, expected a struct with a path")
            for adds in valid_rows(col):
                adds = _typed_adds(adds)
                if not pa.types.is_string(adds.type.field("path").type):
                    raise TypeError(f"add column has type {adds.type}, expected a struct with a string path")
                if adds.field("path").null_count:
                    raise TypeError("add path must be a string, got None")
                add_arrays.append(adds)
    except (KeyError, TypeError, ValueError, AttributeError, pa.ArrowException) as e:
        raise CorruptLogError(f"checkpoint {name} holds a malformed action ({e!r})") from None
    return metas, sidecars


def _parse_json(data: bytes, name: str, actions: list, add_arrays: list) -> tuple[list[CheckpointMetadata], list[Sidecar]]:
    """The JSON form of a V2 checkpoint: one action per line, like a commit."""
    extra = {"checkpointMetadata": CheckpointMetadata.from_json, "sidecar": Sidecar.from_json}
    metas: list[CheckpointMetadata] = []
    sidecars: list[Sidecar] = []
    adds: list[AddFile] = []
    for a in parse_actions(data, name, extra):
        t = type(a)
        if t is CheckpointMetadata:
            metas.append(a)
        elif t is Sidecar:
            sidecars.append(a)
        elif t is AddFile:
            adds.append(a)
        elif t is not CommitInfo:  # checkpoints keep no commitInfo; ignore one if present
            actions.append(a)
    if adds:
        add_arrays.append(_rows("add", _add_rows(adds)))
    return metas, sidecars


def _union(arrays: list[pa.StructArray], name: str) -> pa.ChunkedArray:
    """One chunked array of add rows from several pieces (row groups, parts, sidecars), whose fields may
    differ; no row is copied unless the pieces' types must be unified."""
    if not arrays:
        return pa.chunked_array([], CHECKPOINT_SCHEMA.field("add").type)
    if all(a.type == arrays[0].type for a in arrays):
        return pa.chunked_array(arrays, arrays[0].type)
    try:
        return pa.concat_tables([pa.table({"add": a}) for a in arrays], promote_options="permissive").column("add")
    except pa.ArrowException as e:
        raise CorruptLogError(f"checkpoint {name} holds add rows of incompatible types ({e})") from None


DISTINCT_BUCKET_ROWS = 1_000_000  # paths hashed at once by the exact duplicate check: bounds its hash table (~150 MiB)
FINGERPRINT_WORDS = 8  # 8-byte words of a path's end that its fingerprint covers (64 bytes: a file name's unique part)
_MIX = np.uint64(0x9E3779B97F4A7C15)


def _all_distinct(paths: pa.ChunkedArray) -> bool:
    """Whether no string of ``paths`` appears twice. Equal strings have equal fingerprints, so only rows
    whose fingerprint is shared can be duplicates: sorting a million integers and checking those rows
    exactly costs a fraction of hashing every string (a load's largest compute step before)."""
    keys = [_fingerprints(c) for c in paths.chunks]
    if any(k is None for k in keys):
        return _exactly_distinct(paths)
    keys = np.concatenate(keys) if len(keys) != 1 else keys[0]
    ordered = np.sort(keys)
    shared = np.unique(ordered[1:][ordered[1:] == ordered[:-1]])
    if not len(shared):
        return True
    rows = arrow_values.from_numpy(np.flatnonzero(np.isin(keys, shared, assume_unique=False)))
    return _exactly_distinct(paths.take(rows))


def _fingerprints(strings: pa.Array) -> np.ndarray | None:
    """A 64-bit fingerprint per string of a ``string`` array, from its length and its last
    ``FINGERPRINT_WORDS`` 8-byte words (clipped to its start, so the same bytes give the same value
    wherever the string sits in the buffer); None when a string is shorter than a word (a word would
    reach past it), which leaves the check to ``_exactly_distinct``."""
    n = len(strings)
    if not n:
        return np.empty(0, np.uint64)
    offsets = np.frombuffer(strings.buffers()[1], np.int32, count=n + 1, offset=strings.offset * 4).astype(np.int64)
    starts, ends = offsets[:-1], offsets[1:]
    lengths = ends - starts
    data = strings.buffers()[2]
    if data is None or int(lengths.min()) < 8:
        return None
    # Every unaligned 8-byte window of the data, without a copy: a gather reads a word at any offset.
    words = np.ndarray((data.size - 7,), dtype="<u8", buffer=data, strides=(1,))
    keys = lengths.view(np.uint64).copy()
    for k in range(1, FINGERPRINT_WORDS + 1):
        keys *= _MIX
        keys += words[np.maximum(starts, ends - 8 * k)]
    return keys


def _exactly_distinct(paths: pa.ChunkedArray) -> bool:
    """``_all_distinct`` by hashing every string. Checked by bucket (equal strings land in the same
    bucket: the key is computed from their bytes) so that the hash table of the check holds about
    ``DISTINCT_BUCKET_ROWS`` strings, not all of them."""
    n = len(paths)
    buckets = -(-n // DISTINCT_BUCKET_ROWS)
    if buckets <= 1:
        return len(pc.unique(paths)) == n  # unique: 2.5x faster than count_distinct
    keys = [_string_keys(c) % buckets for c in paths.chunks]
    for b in range(buckets):
        part = [c.take(arrow_values.from_numpy(np.flatnonzero(k == b))) for c, k in zip(paths.chunks, keys)]
        m = sum(len(c) for c in part)
        if m > 1 and len(pc.unique(pa.chunked_array(part, paths.type))) != m:
            return False
    return True


def _string_keys(strings: pa.Array) -> np.ndarray:
    """A key per string (of a ``string`` array) from its length and three of its bytes: equal strings
    have equal keys; paths that differ somewhere past their common prefix mostly do not."""
    n = len(strings)
    offsets = np.frombuffer(strings.buffers()[1], np.int32, count=n + 1, offset=strings.offset * 4).astype(np.int64)
    starts, lengths = offsets[:-1], np.diff(offsets)
    keys = lengths.copy()
    data = strings.buffers()[2]
    if data is None or not data.size:
        return keys
    data = np.frombuffer(data, np.uint8)
    some = lengths > 0
    for i, frac in enumerate((2, 3, 5)):  # a byte half, a third and a fifth of the way from the end
        at = np.where(some, starts + lengths - 1 - lengths // frac, 0)
        keys = keys * 31 + np.where(some, data[at], 0)
    return keys


def _decoded_paths(logged: pa.ChunkedArray) -> pa.ChunkedArray:
    """``decode_path`` for a whole column, as a column: only paths that could need decoding or be unsafe
    go through Python (a chunk without any is kept as it is)."""
    chunks = []
    for c in logged.chunks:
        rows = paths_to_decode(c)
        if rows:
            values = c.to_pylist()
            for i in rows:
                values[i] = decode_path(values[i])
            c = arrow_values.array(values, pa.string())
        chunks.append(c)
    return pa.chunked_array(chunks, pa.string())


def _check_spec(cp: CheckpointFiles, metas: list[CheckpointMetadata], sidecars: list[Sidecar]) -> None:
    name = cp.name
    if cp.kind == "multipart" and (metas or sidecars):
        raise CorruptLogError(f"checkpoint {name} is multi-part, which the protocol allows for V1 checkpoints only, but holds V2 actions")
    if len(metas) > 1 or (cp.kind == "uuid" and not metas):
        raise CorruptLogError(f"checkpoint {name} holds {len(metas)} checkpointMetadata actions; a V2 checkpoint has exactly one")
    if metas and metas[0].version != cp.version:
        raise CorruptLogError(f"checkpoint {name} says it is the checkpoint of version {metas[0].version}, not {cp.version}")
    if sidecars and not metas:
        raise CorruptLogError(f"checkpoint {name} names sidecars but has no checkpointMetadata action (only V2 checkpoints have sidecars)")


def read_checkpoint_state(storage, checkpoint: int | CheckpointFiles, *, file_actions: bool = True) -> CheckpointState:
    """Read a checkpoint of any kind (an int: the classic checkpoint of that version): every file of it,
    sidecars included. Raises FileNotFoundError when its (first) file is gone, CorruptLogError when it is
    unreadable, incomplete or holds a malformed action. ``file_actions=False`` reads only its non-file actions (no sidecars, no add or remove rows)."""
    cp = checkpoint if isinstance(checkpoint, CheckpointFiles) else _classic_checkpoint(storage, checkpoint)
    name = cp.name
    actions: list[Action] = []
    add_arrays: list[pa.StructArray] = []
    deferred = DeferredStats(name)
    order: list[pa.Field] = []  # the add fields of the checkpoint's files, when some are deferred
    if cp.fmt == "json":
        metas, sidecars = _parse_json(storage.read(cp.files[0].path), name, actions, add_arrays)
    else:
        columns = NON_FILE_COLUMNS + V2_COLUMNS + (("add", "remove") if file_actions else ())
        metas, sidecars = [], []
        parts: list[_ParquetFile] = []
        try:
            for f in cp.files:
                parts.append(_ParquetFile(storage, f, name, columns))
            names = set().union(*(p.names for p in parts))
            if "protocol" not in names or "metaData" not in names:
                raise CorruptLogError(f"checkpoint {name} lacks protocol or metaData columns")
            shapes = {p.add_type for p in parts}
            if file_actions and len(shapes) == 1 and None not in shapes:  # parts of one add type: stats read when needed
                order = list(parts[0].add_type)
                for part in parts:
                    part.defer_stats()
            # A row group at a time: the add rows are kept (sliced, mostly), the rest is parsed and dropped.
            for part in parts:
                at = deferred.add_file(part.kept_bytes(), part.deferred) if part.deferred else -1
                for table in part.row_groups():
                    before = len(add_arrays)
                    m, s = _parse_table(table, name, actions, add_arrays)
                    metas += m
                    sidecars += s
                    del table
                    if at >= 0:
                        deferred.add_run(at, part.run, [len(a) for a in add_arrays[before:]])
        finally:
            for part in parts:
                part.close()
    _check_spec(cp, metas, sidecars)
    if not file_actions:
        actions = [a for a in actions if type(a) is not RemoveFile]
        add_arrays = []
        deferred.runs = []
    if deferred.runs and sidecars:  # add rows in the checkpoint file and in sidecars (rare): read all now, as sidecars are
        add_arrays = list(_with_deferred(pa.chunked_array(add_arrays, add_arrays[0].type), deferred, order).chunks)
        deferred.runs = []
    if sidecars and file_actions:
        for t in read_sidecars(storage, sidecars, name):
            _parse_table(t.select([c for c in t.column_names if c in ("add", "remove")]), name, actions, add_arrays)
    adds = _union(add_arrays, name)
    del add_arrays
    dv_ids = None
    if _has_dvs(adds):
        try:
            dv_ids = [None if (d := parse_dv(row)) is None else d.unique_id for row in add_field(adds, "deletionVector").to_pylist()]
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptLogError(f"checkpoint {name} holds a malformed deletionVector ({e!r})") from None
    paths = _decoded_paths(add_field(adds, "path"))
    n = len(paths)
    # A checkpoint names each live file once and never as both live and removed (the protocol's
    # primary-key rule). Engines disagree about such a checkpoint (delta-rs keeps both rows, or the
    # file), so it is malformed: readers fall back to an older checkpoint or the JSON commits.
    if n > 1 and not _all_distinct(paths):
        seen: set[str] = set()
        dup = next(p for p in paths.to_pylist() if p in seen or seen.add(p))
        raise CorruptLogError(f"checkpoint {name} names {dup!r} in two add rows; a checkpoint lists each file once")
    # A checkpoint may hold a remove of a file's older (path, deletion vector) next to the add of its current one.
    removed = {(decode_path(a.path), dv_id(a)) for a in actions if type(a) is RemoveFile}
    if removed and n:
        hit = pc.is_in(paths, value_set=arrow_values.array(sorted({p for p, _ in removed}), pa.string()))
        rows = pc.indices_nonzero(hit.combine_chunks())
        live = zip(paths.take(rows).to_pylist(), [dv_ids[i] for i in rows.to_pylist()] if dv_ids is not None else [None] * len(rows))
        both = removed.intersection(live)
        if both:
            raise CorruptLogError(f"checkpoint {name} names {sorted(both)[0][0]!r} in both an add and a remove row; a file is live or removed, not both")
    # Reading left freed row group buffers and hash tables in Arrow's allocator: hand them back, or the
    # process keeps them on top of whatever it allocates next (~250 MiB at 1M files).
    pa.default_memory_pool().release_unused()
    later = (deferred, order) if deferred.runs else None
    return CheckpointState(cp.version, actions, adds, paths, [s.name for s in sidecars], bool(metas), dv_ids, later)


def _classic_checkpoint(storage, version: int) -> CheckpointFiles:
    name = checkpoint_name(version)
    return CheckpointFiles(version, "classic", (FileInfo(name, storage.log_file(name), 0, 0),))


def read_checkpoint(storage, checkpoint: int | CheckpointFiles) -> list[Action]:
    """Read the actions of a checkpoint (see ``read_checkpoint_state``); raises CorruptLogError when unreadable."""
    state = read_checkpoint_state(storage, checkpoint)
    return state.actions + state.add_actions()


def checkpoint_sidecars(storage, cp: CheckpointFiles) -> list[str]:
    """The sidecar file names a checkpoint references (none for V1 checkpoints), reading only its
    ``checkpointMetadata`` and ``sidecar`` actions; CorruptLogError / FileNotFoundError when unreadable."""
    if cp.kind == "multipart":
        return []
    if cp.fmt == "json":
        metas, sidecars = _parse_json(storage.read(cp.files[0].path), cp.name, [], [])
    else:
        metas, sidecars = [], []
        for table in _read_parquet(storage, cp.files[0], cp.name, V2_COLUMNS):
            m, s = _parse_table(table, cp.name, [], [])
            metas += m
            sidecars += s
    _check_spec(cp, metas, sidecars)
    return [s.name for s in sidecars]

"""File pruning by partition values and stats, computed over all of a snapshot's live files at once.

A filter in DNF is decided file by file as pyarrow would decide it from each file's guarantee (see
``lakelog.read.scan``), but with compute kernels over columns: a term on a partition column is evaluated
exactly over the typed partition values of every file (each file holds one value); a term on a data
column is compared with the bounds the stats give, parsed from the raw stats strings for the filter's
columns only (``pyarrow.json`` with an explicit schema, orjson per file where that refuses a string).

The decision never drops a file that may hold a matching row. A file without stats, or without stats
for a column, is kept; a file whose stats say every value of the column is null (``nullCount`` =
``numRecords`` > 0) matches no term on it (every term is false on null). Bounds follow the per-file rules
of ``stat_literal``: floating-point, boolean and binary stats are not used (NaN and -0.0 make them
unsafe), a string max of ``STRING_STATS_PREFIX`` characters or more may be truncated, timestamp maxima
are widened by a millisecond. ``!=`` and ``not in`` keep every file with a non-null value. Deletion
vectors need nothing special: ``numRecords`` counts the physical rows and min/max still bound the live
rows. Under column mapping stats and partition values are keyed by physical names.

``AddFile`` objects are built only for the files kept. A filter given as a ``pyarrow.compute``
expression is decided here only when it reads partition columns alone (``None`` otherwise: the caller
prunes file by file).
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ..schema import arrow_values, collations
from ..actions import AddFile, stats_count
from ..log.checkpoint import adds_from_arrow
from ..table_features.column_mapping import ColumnMapping
from ..errors import CorruptLogError
from ..expressions.filters import _literal, _references, term_expression, term_mask
from ..schema.partition_values import parse_date, partition_scalars, timestamp_micros

if TYPE_CHECKING:
    from ..log.file_set import FileSet
    from ..log.snapshot import Snapshot

STRING_STATS_PREFIX = 32
STATS_CHUNK_ROWS = 256 * 1024  # stats strings parsed at once: bounds the transient JSON buffer
STATS_CHUNK_BYTES = 64 << 20
PARSED_STATS_KEPT = 4  # sets of stats columns kept parsed per checkpoint


def stat_literal(v: Any, t: pa.DataType, is_max: bool) -> pa.Scalar | None:
    """A stats value as a bound usable for pruning, or None where it would not be a safe bound."""
    if v is None or isinstance(v, (dict, list, bool)):
        return None
    try:
        if pa.types.is_integer(t) and isinstance(v, int):
            return arrow_values.scalar(v, t)
        if pa.types.is_string(t) and isinstance(v, str):
            if is_max and len(v) >= STRING_STATS_PREFIX:
                return None  # possibly truncated: not an upper bound
            return arrow_values.scalar(v, t)
        if pa.types.is_date(t) and isinstance(v, str):
            return arrow_values.scalar(parse_date(v[:10]), t)
        if pa.types.is_timestamp(t) and isinstance(v, str):
            us = timestamp_micros(v, utc=t.tz is not None)
            if is_max:
                us += 1000  # writers may truncate timestamp stats to milliseconds
            # As integer microseconds: the widened bound may lie past year 9999, where datetime ends.
            return arrow_values.scalar(us, pa.int64()).cast(t)
        if pa.types.is_decimal(t) and isinstance(v, (int, float)) and t.precision <= 15:
            d = decimal.Decimal(repr(v)) if isinstance(v, float) else decimal.Decimal(v)
            return pa.scalar(d.quantize(decimal.Decimal(1).scaleb(-t.scale)), type=t)
    except (ValueError, TypeError, OverflowError, decimal.InvalidOperation, pa.ArrowException):
        return None
    return None  # floats (NaN makes bounds unsafe), booleans, binary, nested: no stats pruning


def _bounded(t: pa.DataType) -> bool:
    """Whether min/max stats of a column of type ``t`` can be bounds (see ``stat_literal``)."""
    return (
        pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_date(t) or pa.types.is_timestamp(t)
        or (pa.types.is_decimal(t) and t.precision <= 15)
    )


def _json_type(t: pa.DataType) -> pa.DataType:
    """The JSON type a stats value of a column of type ``t`` has (parsed as that, converted after)."""
    if pa.types.is_integer(t):
        return pa.int64()
    if pa.types.is_decimal(t):
        return pa.float64()
    return pa.string()


# ---------------------------------------------------------------- the live files as columns

@dataclass
class LiveFiles:
    """The live files of a file set in ``FileSet.paths`` order: the checkpoint rows still live (``base_rows``:
    their row indexes in ``base.add_rows``) followed by the adds of later commits (``changed``, decoded paths
    ``changed_paths``)."""

    file_set: FileSet
    base_rows: np.ndarray
    changed: list[AddFile]
    changed_paths: list[str]

    @classmethod
    def of(cls, file_set: FileSet) -> "LiveFiles":
        base, changes = file_set.base, file_set.changes
        live = [(p, a) for p, a in changes.items() if a is not None]
        changed, changed_paths = [a for _, a in live], [p for p, _ in live]
        if base is None:
            return cls(file_set, np.empty(0, np.int64), changed, changed_paths)
        keep = np.ones(base.num_rows, bool)
        if changes:
            keep[arrow_values.to_numpy(base.rows_named(list(changes)))] = False
        return cls(file_set, np.flatnonzero(keep), changed, changed_paths)

    def paths(self, positions: np.ndarray) -> list[str]:
        """Decoded paths of the live files at the (ascending) ``positions``."""
        nb = len(self.base_rows)
        split = int(np.searchsorted(positions, nb))
        out: list[str] = []
        if split:
            out = self.file_set.base.path_column.take(arrow_values.from_numpy(self.base_rows[positions[:split]])).to_pylist()
        out.extend(self.changed_paths[int(i) - nb] for i in positions[split:])
        return out

    def __len__(self) -> int:
        return len(self.base_rows) + len(self.changed)

    @property
    def _all_base(self) -> bool:
        base = self.file_set.base
        return base is not None and len(self.base_rows) == base.num_rows

    def base_column(self, name: str) -> pa.ChunkedArray | None:
        """The checkpoint column ``add.<name>`` of all its rows, chunked as read (None: the checkpoint has no such field)."""
        base = self.file_set.base
        return None if base is None else base.add_field(name)

    def live_base(self, arr: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
        """A column over all checkpoint rows cut down to the live ones."""
        return arr if self._all_base else arr.take(arrow_values.from_numpy(self.base_rows))

    def raw_path(self, i: int) -> str:
        """``add.path`` as logged of live file ``i`` (for messages)."""
        nb = len(self.base_rows)
        if i < nb:
            return self.base_column("path")[int(self.base_rows[i])].as_py()
        return self.changed[i - nb].path

    def adds(self, keep: np.ndarray) -> list[AddFile]:
        """``AddFile`` objects of the live files at the (ascending) positions ``keep``, built only for them."""
        nb = len(self.base_rows)
        split = int(np.searchsorted(keep, nb))
        out: list[AddFile] = []
        if split:
            out = adds_from_arrow(self.file_set.base.add_rows.take(arrow_values.from_numpy(self.base_rows[keep[:split]])))
        out.extend(self.changed[int(i) - nb] for i in keep[split:])
        return out

    def deletion_vector_count(self) -> int:
        base = self.file_set.base
        n = 0
        if base is not None and base.dv_ids is not None:
            ids = base.dv_ids
            n = sum(1 for i in self.base_rows if ids[i] is not None)
        return n + sum(1 for a in self.changed if a.deletion_vector is not None)


def _data_holds(strings: pa.Array, needles: tuple[bytes, ...]) -> bool:
    """Whether some value of a string column holds one of ``needles`` (single bytes), by a search of its
    data buffer in slices (memchr speed, no kernel per row)."""
    data = strings.buffers()[2]
    if data is None or not len(strings):
        return False
    offsets = np.frombuffer(strings.buffers()[1], np.int32, count=len(strings) + 1, offset=strings.offset * 4)
    start, end = int(offsets[0]), int(offsets[-1])
    step = 1 << 23
    for i in range(start, end, step):
        chunk = data.slice(i, min(step, end - i)).to_pybytes()
        if any(n in chunk for n in needles):
            return True
    return False


@dataclass
class Kept:
    """The files a filter keeps: ``positions`` among ``files`` (ascending)."""

    files: LiveFiles
    positions: np.ndarray

    @property
    def paths(self) -> list[str]:
        return self.files.paths(self.positions)

    def adds(self) -> list[AddFile]:
        return self.files.adds(self.positions)


# ---------------------------------------------------------------- partition values

@dataclass
class _PartitionColumn:
    """One partition column of every live file: its distinct typed values (a null last) and, per file,
    the index of its value."""

    name: str
    values: pa.Array
    indices: np.ndarray

    def mask(self, op: str, value: Any, t: pa.DataType, quoted: Any, collation: collations.Collation | None = None) -> np.ndarray:
        """Where the DNF term ``(name, op, value)`` is TRUE, per file: evaluated once per distinct value
        (under the column's collation)."""
        return term_mask(self.values, op, value, t, quoted=quoted, collation=collation)[self.indices]

    def column(self) -> pa.Array:
        return self.values.take(arrow_values.from_numpy(self.indices))


def _partition_columns(files: LiveFiles, schema: pa.Schema, partition_columns: list[str], mapping: ColumnMapping) -> dict[str, _PartitionColumn]:
    """The typed partition values of every live file; a missing or malformed value is the error
    ``partition_scalars`` raises for that file (as when every file is read)."""
    out = {}
    nb = len(files.base_rows)
    pv = files.base_column("partitionValues")
    if nb and pv is None:
        _partition_error(files, 0, schema, partition_columns, mapping)
    for c in partition_columns:
        key = mapping.physical_name(c) if mapping.active else c
        parts = []
        if nb:
            found = _base_partition_strings(files, pv, key, schema, partition_columns, mapping)
            parts.extend(found.chunks if isinstance(found, pa.ChunkedArray) else [found])
        if files.changed:
            vals = []
            for k, a in enumerate(files.changed):
                d = a.partition_values
                if key not in d:
                    _partition_error(files, nb + k, schema, partition_columns, mapping)
                vals.append(d[key])
            parts.append(arrow_values.array(vals, pa.string()))
        raw = pa.chunked_array(parts, pa.string()).combine_chunks()
        out[c] = _typed_partition_values(files, raw, schema, c)
    return out


def _flat_lookup(pv: pa.MapArray, key: str) -> pa.Array | None:
    """The value under ``key`` of each map, found in the flat keys (one hit per map, no search per row);
    None when some map does not hold ``key`` exactly once."""
    offsets = arrow_values.to_numpy(pv.offsets)
    lo, hi = int(offsets[0]), int(offsets[-1])  # a slice's offsets point into its parent's keys
    keys = pv.keys.slice(lo, hi - lo)
    hits = np.flatnonzero(arrow_values.to_numpy(pc.fill_null(pc.equal(keys, arrow_values.scalar(key, keys.type)), arrow_values.scalar(False, pa.bool_())))) + lo
    if len(hits) == len(pv) and (hits >= offsets[:-1]).all() and (hits < offsets[1:]).all():
        return pv.items.take(arrow_values.from_numpy(hits))
    return None


def _base_partition_strings(files: LiveFiles, pv: pa.ChunkedArray, key: str, schema, partition_columns, mapping) -> pa.Array:
    """The partition value strings under ``key`` of the live checkpoint rows."""
    if pa.types.is_map(pv.type) and not pv.null_count:
        found = [_flat_lookup(c, key) for c in pv.chunks]
        if all(f is not None for f in found):
            return files.live_base(pa.chunked_array(found, pv.type.item_type)).cast(pa.string())
    found = files.live_base(pc.map_lookup(pv, key, "all"))
    if found.null_count:
        _partition_error(files, int(np.flatnonzero(arrow_values.to_numpy(found.is_null()))[0]), schema, partition_columns, mapping)
    return files.live_base(pc.map_lookup(pv, key, "first")).cast(pa.string())


def _typed_partition_values(files: LiveFiles, raw: pa.Array, schema: pa.Schema, c: str) -> _PartitionColumn:
    """``raw`` partition value strings parsed as column ``c``'s type, each distinct value once."""
    t = schema.field(c).type
    enc = raw.dictionary_encode()
    typed = []
    for v in enc.dictionary.to_pylist():
        try:
            typed.append(partition_scalars({c: v}, schema, [c], "").get(c))
        except CorruptLogError:
            # Name the first file holding the value, as reading it file by file would.
            first = int(np.flatnonzero(arrow_values.to_numpy(pc.equal(raw, arrow_values.scalar(v, raw.type)).fill_null(arrow_values.scalar(False, pa.bool_()))))[0])
            partition_scalars({c: v}, schema, [c], files.raw_path(first))
            raise
    if pa.types.is_timestamp(t):  # as integers: a value may lie past year 9999
        values = arrow_values.array([s.value if s.is_valid else None for s in typed] + [None], pa.int64()).cast(t)
    else:
        values = arrow_values.array([s.as_py() for s in typed] + [None], t)
    indices = arrow_values.to_numpy(pc.fill_null(enc.indices, arrow_values.scalar(len(typed), enc.indices.type))).astype(np.int64)
    return _PartitionColumn(c, values, indices)


def _partition_error(files: LiveFiles, i: int, schema: pa.Schema, partition_columns: list[str], mapping: ColumnMapping) -> None:
    add = files.adds(np.array([i]))[0]
    values = add.partition_values if not mapping.active else mapping.logical_partition_values(add.partition_values, partition_columns)
    partition_scalars(values, schema, partition_columns, add.path)
    raise AssertionError("unreachable: the partition values were found malformed")  # pragma: no cover


def _expression_mask(table: pa.Table, expr: pc.Expression) -> np.ndarray:
    """Where ``expr`` is TRUE over the rows of ``table``."""
    n = table.num_rows
    idx = table.append_column("__row", arrow_values.from_numpy(np.arange(n, dtype=np.int64))).filter(expr).column("__row")
    mask = np.zeros(n, bool)
    mask[arrow_values.to_numpy(idx)] = True
    return mask


# ---------------------------------------------------------------- stats

@dataclass
class _ColumnStats:
    lo: pa.ChunkedArray | None  # lower bounds (of the column's type), null where unknown
    hi: pa.ChunkedArray | None
    all_null: np.ndarray  # the stats say every value is null
    rows: np.ndarray | None = None  # the live files among the rows above (None: all of them, in order)


def _stats_strings(files: LiveFiles) -> tuple[list[pa.Array], pa.Array | None]:
    """The raw stats strings (null: none) of every checkpoint row, dead ones included (cheaper to parse
    than to copy out), in chunks; and those of the adds of later commits."""
    base = []
    if len(files.base_rows):
        stats = files.base_column("stats")
        chunks = [pa.nulls(files.file_set.base.num_rows, pa.string())] if stats is None else stats.cast(pa.string()).chunks
        for col in chunks:  # as read: a row group each
            n = len(col)
            offsets = np.frombuffer(col.buffers()[1], np.int32, count=n + 1, offset=col.offset * 4) if col.buffers()[1] is not None else None
            i = 0
            while i < n:
                j = min(n, i + STATS_CHUNK_ROWS)
                if offsets is not None:  # wide tables have long stats: a chunk's text stays under STATS_CHUNK_BYTES
                    j = max(i + 1, min(j, int(np.searchsorted(offsets, offsets[i] + STATS_CHUNK_BYTES, side="right")) - 1))
                base.append(col.slice(i, j - i))
                i = j
    changed = arrow_values.array([a.stats for a in files.changed], pa.string()) if files.changed else None
    return base, changed


def _parse_chunk(strings: pa.Array, schema: pa.Schema) -> pa.Table:
    """The stats fields in ``schema`` of each string (null where absent); orjson per string where
    ``pyarrow.json`` refuses one (a value of an unexpected type, malformed JSON, a line break)."""
    import pyarrow.json as pj

    t = strings.type
    filled = pc.if_else(pc.fill_null(pc.equal(strings, arrow_values.scalar("", t)), arrow_values.scalar(True, pa.bool_())),
                        arrow_values.scalar("{}", t), strings)
    # pyarrow.json crashes on a top-level null (pyarrow 26): only lines that are objects go to it, and a
    # string holding a line break would be several lines.
    objects = pc.and_(pc.starts_with(filled, "{"), pc.ends_with(filled, "}"))
    if not pc.all(objects).as_py() or _data_holds(strings.cast(pa.string()), (b"\n", b"\r")):
        return _parse_chunk_slowly(strings, schema)
    lines = pc.binary_join_element_wise(filled, arrow_values.scalar("", t), arrow_values.scalar("\n", t))
    offsets = lines.buffers()[1]
    end = int(np.frombuffer(offsets, np.int32, count=len(lines) + 1, offset=lines.offset * 4)[-1]) if len(lines) else 0
    start = int(np.frombuffer(offsets, np.int32, count=1, offset=lines.offset * 4)[0]) if len(lines) else 0
    try:
        t = pj.read_json(
            pa.BufferReader(lines.buffers()[2].slice(start, end - start)),
            read_options=pj.ReadOptions(block_size=1 << 22),
            parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
        )
        if t.num_rows == len(strings):
            return t.select(schema.names).cast(schema)
    except pa.ArrowException:
        pass
    return _parse_chunk_slowly(strings, schema)


def _parse_chunk_slowly(strings: pa.Array, schema: pa.Schema) -> pa.Table:
    """As ``_parse_chunk``, one string at a time; a value of an unexpected type reads as absent."""
    n = len(strings)
    records: list = [None] * n
    keys = {name: [f.name for f in schema.field(name).type] for name in ("minValues", "maxValues", "nullCount") if name in schema.names}
    cols: dict[str, dict[str, list]] = {name: {k: [None] * n for k in ks} for name, ks in keys.items()}
    for i, s in enumerate(strings.to_pylist()):
        if not s:
            continue
        try:
            d = orjson.loads(s)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(d, dict):
            continue
        records[i] = stats_count(d.get("numRecords"))
        for name, ks in keys.items():
            m = d.get(name)
            if isinstance(m, dict):
                out = cols[name]
                for k in ks:
                    out[k][i] = m.get(k)
    arrays = [arrow_values.array(records, pa.int64())]
    for name in list(keys):
        ftype = schema.field(name).type
        children = [_python_values(cols[name][f.name], f.type) for f in ftype]
        arrays.append(pa.StructArray.from_arrays(children, fields=list(ftype)))
    return pa.Table.from_arrays(arrays, schema=schema)


def _python_values(values: list, t: pa.DataType) -> pa.Array:
    """JSON values as an array of ``t`` (int64, float64 or string); a value of another JSON type is null."""
    if pa.types.is_int64(t):
        ok = [v if isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63 else None for v in values]
    elif pa.types.is_float64(t):
        ok = [v if isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) < 2**63 else None for v in values]
        return arrow_values.array([None if v is None else float(v) for v in ok], pa.float64())
    else:
        ok = [v if isinstance(v, str) else None for v in values]
    return arrow_values.array(ok, t)


def _column_stats(files: LiveFiles, schema: pa.Schema, columns: list[str], mapping: ColumnMapping) -> dict[str, _ColumnStats]:
    """Bounds and all-null flags of ``columns`` (data columns) for every live file."""
    keys = {c: (mapping.stats_key(c) if mapping.active else c) for c in columns}
    # A collated column's min/max are in binary order, which says nothing under its collation.
    bounded = [c for c in columns if _bounded(schema.field(c).type) and collations.of_field(schema.field(c)) is None]
    fields = [pa.field("numRecords", pa.int64())]
    if bounded:
        for name in ("minValues", "maxValues"):
            fields.append(pa.field(name, pa.struct([pa.field(keys[c], _json_type(schema.field(c).type)) for c in bounded])))
    fields.append(pa.field("nullCount", pa.struct([pa.field(keys[c], pa.int64()) for c in dict.fromkeys(columns)])))
    jschema = pa.schema(fields)
    base, changed = _stats_strings(files)
    parsed = []
    rows = None
    if base:
        # Kept on the checkpoint state: the next filter on the same columns parses nothing (about 30
        # bytes per file and column).
        cache = files.file_set.base._parsed_stats
        key = jschema.to_string()
        whole = cache.get(key)
        if whole is None:
            whole = pa.concat_tables([_parse_chunk(s, jschema) for s in base])
            while len(cache) >= PARSED_STATS_KEPT:
                cache.pop(next(iter(cache)))
            cache[key] = whole
        parsed.append(whole)
        if not files._all_base:
            # Dead checkpoint rows stay in the columns: the masks are cut down to the live files,
            # cheaper than copying every parsed column.
            rows = files.base_rows
    if changed is not None:
        parsed.append(_parse_chunk(changed, jschema))
        if rows is not None:
            rows = np.concatenate([rows, parsed[0].num_rows + np.arange(len(changed), dtype=np.int64)])
    table = pa.concat_tables(parsed)
    n = table.column("numRecords")
    zero = arrow_values.scalar(0, pa.int64())
    n = pc.if_else(pc.greater_equal(n, zero), n, arrow_values.null(pa.int64()))
    out = {}
    for c in dict.fromkeys(columns):
        t = schema.field(c).type
        nc = pc.struct_field(table.column("nullCount"), keys[c])
        all_null = pc.and_kleene(pc.and_kleene(pc.equal(nc, n), pc.greater(n, zero)), pc.greater_equal(nc, zero))
        lo = hi = None
        if c in bounded:
            lo = _bounds(pc.struct_field(table.column("minValues"), keys[c]), t, False)
            hi = _bounds(pc.struct_field(table.column("maxValues"), keys[c]), t, True)
        out[c] = _ColumnStats(lo, hi, arrow_values.to_numpy(pc.fill_null(all_null, arrow_values.scalar(False, pa.bool_()))), rows)
    return out


def _bounds(raw: pa.ChunkedArray, t: pa.DataType, is_max: bool) -> pa.Array:
    """Parsed stats values as bounds of type ``t`` (null: unusable), by the rules of ``stat_literal``."""
    raw = raw.combine_chunks() if isinstance(raw, pa.ChunkedArray) else raw
    if pa.types.is_integer(t):
        if t != pa.int64():
            info = np.iinfo(arrow_values.numpy_dtype(t))
            in_range = pc.and_(pc.greater_equal(raw, arrow_values.scalar(int(info.min), pa.int64())),
                               pc.less_equal(raw, arrow_values.scalar(int(info.max), pa.int64())))
            raw = pc.if_else(in_range, raw, arrow_values.null(pa.int64())).cast(t)
        return raw
    if pa.types.is_string(t):
        if is_max:
            return pc.if_else(pc.less(pc.utf8_length(raw), arrow_values.scalar(STRING_STATS_PREFIX, pa.int32())), raw, arrow_values.null(pa.string()))
        return raw
    # Dates, timestamps, decimals: each distinct value converted once.
    distinct = pc.unique(raw)
    converted = [stat_literal(v, t, is_max) for v in distinct.to_pylist()]
    if pa.types.is_timestamp(t):
        values = arrow_values.array([None if s is None else s.value for s in converted], pa.int64()).cast(t)
    else:
        values = arrow_values.array([None if s is None else s.as_py() for s in converted], t)
    return values.take(pc.index_in(raw, distinct))


def _data_term_mask(stats: _ColumnStats, op: str, value: Any, t: pa.DataType, quoted: Any) -> np.ndarray:
    """Files that may hold a row where the term is TRUE, by their stats."""
    m = _stats_rows_mask(stats, op, value, t, quoted)
    return m if stats.rows is None else m[stats.rows]


def _stats_rows_mask(stats: _ColumnStats, op: str, value: Any, t: pa.DataType, quoted: Any) -> np.ndarray:
    may = ~stats.all_null
    if stats.lo is None or op in ("!=", "not in") or pa.types.is_floating(t):
        return may
    values = list(value) if op == "in" else [value]
    lits = [_literal(v, t, quoted) for v in values if v is not None]
    lits = [s for s in lits if s is not None]
    if any(s.type != t for s in lits):
        if op != "in":
            return may  # a literal no value of the column equals: left to the scan
        lits = [s for s in lits if s.type == t]  # these match nothing
    lo, hi = stats.lo, stats.hi

    def cond(kernel, bound, lit):
        return arrow_values.to_numpy(pc.fill_null(kernel(bound, lit), arrow_values.scalar(True, pa.bool_())))

    if op in ("=", "==", "in"):
        hit = np.zeros(len(may), bool)
        for s in lits:
            hit |= cond(pc.less_equal, lo, s) & cond(pc.greater_equal, hi, s)
        return may & hit
    s = lits[0]
    if op == "<":
        return may & cond(pc.less, lo, s)
    if op == "<=":
        return may & cond(pc.less_equal, lo, s)
    if op == ">":
        return may & cond(pc.greater, hi, s)
    return may & cond(pc.greater_equal, hi, s)  # >=


# ---------------------------------------------------------------- the decision

def prune(snapshot: Snapshot, filters: Any) -> Kept | None:
    """The live files that may hold rows matching ``filters`` (already validated by ``compile_filter``);
    None for an expression that reads a data column (the caller prunes file by file)."""
    schema, partition_columns, mapping = snapshot.schema, snapshot.partition_columns, snapshot.column_mapping
    if isinstance(filters, pc.Expression):
        empty = schema.empty_table()
        read = [c for c in schema.names if _references(empty, filters, c)]
        if not read or any(c not in partition_columns for c in read):
            return None  # a constant expression, or one reading data columns: file by file
        files = LiveFiles.of(snapshot.file_set)
        parts = _partition_columns(files, schema, partition_columns, mapping)
        table = pa.Table.from_arrays([parts[c].column() for c in partition_columns], names=partition_columns)
        return Kept(files, np.flatnonzero(_expression_mask(table, filters)))
    dnf = [filters] if isinstance(filters[0], tuple) else filters
    files = LiveFiles.of(snapshot.file_set)
    n = len(files)
    if not n:
        return Kept(files, np.empty(0, np.int64))
    used = list(dict.fromkeys(t[0] for conj in dnf for t in conj))
    # Partition values are checked for every partition column, as reading would.
    parts = _partition_columns(files, schema, partition_columns, mapping)
    data_cols = [c for c in used if c not in partition_columns]
    stats = _column_stats(files, schema, data_cols, mapping) if data_cols else {}
    keep = np.zeros(n, bool)
    false = pc.scalar(arrow_values.scalar(False, pa.bool_()))
    for conj in dnf:
        m = np.ones(n, bool)
        for term in conj:
            col, op, value = term
            op = op.lower()
            t = schema.field(col).type
            collation = collations.of_field(schema.field(col))
            e = term_expression(col, op, value, t, quoted=term, collation=collation)
            if e.equals(false):
                m[:] = False
            elif col in partition_columns:
                m &= parts[col].mask(op, value, t, term, collation)
            else:
                m &= _data_term_mask(stats[col], op, value, t, term)
            if not m.any():
                break
        keep |= m
    return Kept(files, np.flatnonzero(keep))

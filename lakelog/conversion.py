"""Adopt existing Parquet data in place: a Spark file-sink output or a plain Parquet directory.

``convert(path)`` commits the files that make up the data set at ``path`` as version 0 of a new
lakelog table. No data file is copied or rewritten: each becomes an ``add`` whose path is relative to
``path``. The source decides which files count:

* ``path/_spark_metadata`` exists (Spark Structured Streaming's file sink): exactly the files its
  metadata log lists as committed, read the way Spark reads it (the newest ``N.compact`` batch plus
  every later batch file). Files of failed or retried batches, which sit in the same directories, are
  not part of the table.
* otherwise (a plain, optionally Hive-partitioned Parquet directory): every ``*.parquet`` file, skipping
  names that start with ``_`` or ``.`` (files and directories, except ``_k=v`` partition
  directories), as Spark does.

The schema is the union of the Parquet footers' schemas (columns missing from some files read as
null; an integer or float column may widen across files; any other difference is a
``SchemaMismatchError``). Every column becomes nullable. Statistics come from the footers' row-group
statistics through the writer's own ``stats_from_parquet_metadata`` (so they have the same JSON form); a
statistic some row group lacks is left out. Partition values come from ``k=v`` directories (Hive-unescaped; ``__HIVE_DEFAULT_PARTITION__`` and
an empty value are null); see ``infer_partition_type`` for how their types are chosen.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import os
import posixpath
import re
import uuid
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .actions import AddFile, Metadata, encode_path, now_ms
from .data_files import nanosecond_columns
from .errors import (
    ConvertError,
    CorruptLogError,
    InvalidPathError,
    MissingDataFileError,
    NanosecondTimestampError,
    SchemaMismatchError,
    TableExistsError,
    UnsupportedFeatureError,
)
from .schema import (
    HIVE_NULL,
    _strip_nullability,
    _widening_ok,
    canonical_type,
    check_column_names,
    delta_type_to_arrow,
    schema_to_string,
    serialize_partition_value,
)
from .storage import Storage, _mtime_ms
from .transaction import Transaction
from .write import plan_protocol, stats_from_parquet_metadata

__all__ = [
    "convert",
    "ConvertError",
    "NanosecondTimestampError",
    "SparkMetadataLogError",
    "SparkMetadataVersionError",
    "infer_partition_type",
    "hive_unescape",
    "read_spark_metadata",
]

SPARK_METADATA = "_spark_metadata"
SPARK_LOG_VERSION = 1  # FileStreamSinkLog.VERSION
MAX_INDEXED_COLS = 32  # delta.dataSkippingNumIndexedCols default; converted tables have no configuration
FOOTER_THREADS = 16
_BATCH_FILE_RE = re.compile(r"^(\d+)(\.compact)?$")
_INT_RE = re.compile(r"^-?[0-9]+$")
_DATE_RE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
_FLOAT_RE = re.compile(r"^-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?$")
_TYPE_ALIASES = {"int": "integer", "bigint": "long", "smallint": "short", "tinyint": "byte", "bool": "boolean"}


class SparkMetadataLogError(CorruptLogError):
    """The ``_spark_metadata`` log is truncated, malformed or incomplete, so the committed files are unknown."""


class SparkMetadataVersionError(SparkMetadataLogError, UnsupportedFeatureError):
    """A ``_spark_metadata`` file has a version header other than ``v1`` (written by a newer Spark)."""


# ---------------------------------------------------------------- public API

def convert(
    path: str,
    *,
    partition_by: Any = None,
    storage_options: dict[str, Any] | None = None,
) -> int:
    """Turn the Spark file-sink output or Parquet directory at ``path`` into a lakelog table, in place.

    ``partition_by``: None (partition columns and their types come from the ``k=v`` directories), or
    the partition columns the directories must have, each a name or ``"name:type"`` / ``"name type"``
    (Delta type names: ``string``, ``integer``/``int``, ``long``/``bigint``, ``double``, ``date``,
    ``timestamp``, ``boolean``, ``decimal(p,s)``, ...), as a list, a comma-separated string or a
    ``{name: type or None}`` dict. An empty list means "not partitioned". A given type overrides
    inference. Returns the committed version (0).

    Raises ``TableExistsError`` when ``path`` already has a ``_delta_log``,
    ``SparkMetadataLogError`` (a ``CorruptLogError``) for a damaged ``_spark_metadata`` log,
    ``InvalidPathError`` for a committed file outside ``path``, ``SchemaMismatchError`` for files whose
    schemas cannot be unified, and ``ConvertError`` for other layouts that cannot be converted.
    """
    requested = _parse_partition_by(partition_by)
    storage = Storage(path, storage_options)
    storage.check_atomic_commits()
    if storage.list_dir(storage.log_dir):
        raise TableExistsError(
            f"{path!r} already has a _delta_log directory: it is a table already (read it with lakelog.Table), "
            "or the remains of one. Remove the _delta_log directory to convert the Parquet files anew."
        )
    listing = _list_tree(storage)
    spark_log = storage.join(SPARK_METADATA)
    extra: dict[str, Any] = {}
    if _isdir(storage, spark_log):
        source = "spark-file-sink"
        log = read_spark_metadata(storage)
        files = _sink_files(storage, log, listing)
        extra["sparkMetadataBatchId"] = log.latest_batch
    else:
        source = "parquet"
        files = _directory_files(listing)
    if not files:
        what = "the _spark_metadata log lists no committed files" if source == "spark-file-sink" else "it holds no *.parquet files"
        raise ConvertError(
            f"nothing to convert at {path!r}: {what}, so there is no schema to take. "
            "Create the table with lakelog.write_table() instead."
        )

    dirs = _partition_dirs(files)
    footers = _read_footers(storage, files)
    _refuse_nanosecond_timestamps(footers)
    data_schema = _unify_schemas(footers)
    schema, parts, values = _plan_partitions(data_schema, dirs, requested)
    check_column_names(schema)
    if len(parts) == len(schema):
        raise SchemaMismatchError("a table needs at least one column that is not a partition column")
    _check_stored_partition_values(storage, footers, schema, parts, values)

    adds = [
        AddFile(
            path=encode_path(f.rel),
            partition_values=values[f.rel],
            size=f.size,
            modification_time=f.mtime_ms,
            data_change=True,
            stats=file_stats(footers[f.rel]),
        )
        for f in files
    ]
    protocol = plan_protocol(schema, None)
    metadata = Metadata(
        id=str(uuid.uuid4()),
        schema_string=schema_to_string(schema),
        partition_columns=parts,
        configuration={},
        created_time=now_ms(),
    )
    params: dict[str, Any] = {"source": source, "numFiles": len(adds), "partitionedBy": parts, "collectStats": True, **extra}
    txn = Transaction(storage, None, "CONVERT", params)
    return txn.commit([protocol, metadata, *adds]).version


# ---------------------------------------------------------------- partition_by

def _parse_type(spec: Any, column: str) -> pa.DataType:
    if isinstance(spec, pa.DataType):
        return canonical_type(spec)
    name = str(spec).strip().lower()
    name = _TYPE_ALIASES.get(name, name)
    try:
        t = delta_type_to_arrow(name)
    except UnsupportedFeatureError:
        raise ValueError(
            f"partition_by: unknown type {spec!r} for column {column!r} (use a Delta type name such as "
            "string, integer, long, double, date, timestamp, boolean, decimal(p,s))"
        ) from None
    if pa.types.is_nested(t):
        raise ValueError(f"partition_by: column {column!r} cannot have the nested type {spec!r}")
    return t


def _parse_partition_by(partition_by: Any) -> list[tuple[str, pa.DataType | None]] | None:
    """Normalize ``partition_by`` to [(name, type or None)], or None when not given."""
    if partition_by is None:
        return None
    if isinstance(partition_by, dict):
        items: list[Any] = list(partition_by.items())
    elif isinstance(partition_by, str):
        items = [s for s in re.split(r",(?![^()]*\))", partition_by) if s.strip()]
    else:
        items = list(partition_by)
    out: list[tuple[str, pa.DataType | None]] = []
    for item in items:
        if isinstance(item, tuple):
            name, t = item
            out.append((str(name), None if t is None else _parse_type(t, str(name))))
            continue
        if not isinstance(item, str):
            raise ValueError(f"partition_by entries must be column names or 'name:type' strings, not {item!r}")
        s = item.strip()
        m = re.match(r"^(\S+)\s+(\S.*)$", s)  # "name type" (column names cannot contain spaces)
        if m:
            out.append((m.group(1), _parse_type(m.group(2), m.group(1))))
            continue
        name, sep, t = s.rpartition(":")
        if sep and name:
            try:
                out.append((name, _parse_type(t, name)))
                continue
            except ValueError:
                pass  # a ':' inside the column name
        out.append((s, None))
    names = [n for n, _ in out]
    if len(set(names)) != len(names):
        raise ValueError(f"partition_by names a column twice: {names}")
    return out


# ---------------------------------------------------------------- listing

@dataclass(frozen=True)
class _SourceFile:
    rel: str  # path relative to the table root, as on storage (decoded)
    size: int
    mtime_ms: int


def _isdir(storage: Storage, path: str) -> bool:
    try:
        return bool(storage.fs.isdir(path))
    except (FileNotFoundError, OSError):
        return False


def _list_tree(storage: Storage) -> dict[str, _SourceFile]:
    """Every file under the root (one recursive listing), by relative path."""
    root = storage.root.rstrip("/")
    storage.fs.invalidate_cache()
    try:
        found = storage.fs.find(root, withdirs=False, detail=True)
    except FileNotFoundError:
        found = {}
    if not found and not _isdir(storage, root):
        raise ConvertError(f"nothing to convert: {storage.uri!r} is not a directory")
    out: dict[str, _SourceFile] = {}
    for full, info in found.items():
        if info.get("type") == "directory":
            continue
        full = full.rstrip("/")
        if not full.startswith(root + "/"):
            continue
        rel = full[len(root) + 1:]
        out[rel] = _SourceFile(rel, int(info.get("size") or 0), _mtime_ms(info))
    return out


def _hidden(name: str) -> bool:
    """Spark's InMemoryFileIndex.shouldFilterOutPathName."""
    return (name.startswith("_") and "=" not in name) or name.startswith(".") or name.endswith("._COPYING_")


def _directory_files(listing: dict[str, _SourceFile]) -> list[_SourceFile]:
    files, skipped = [], []
    for rel in sorted(listing):
        parts = rel.split("/")
        if any(_hidden(p) for p in parts):
            continue
        if not parts[-1].lower().endswith(".parquet"):
            skipped.append(rel)
            continue
        files.append(listing[rel])
    if skipped:
        warnings.warn(
            f"lakelog convert: {len(skipped)} file(s) not named *.parquet are not part of the table "
            f"(e.g. {skipped[:3]}); rename them to *.parquet before converting if they hold data",
            stacklevel=3,
        )
    return files


# ---------------------------------------------------------------- _spark_metadata

@dataclass
class SparkSinkLog:
    """What a ``_spark_metadata`` log says is committed: file statuses in log order."""

    latest_batch: int | None
    batches: list[int]  # the batch files read (the newest compact batch first)
    entries: list[dict]  # the committed, non-deleted file statuses (last entry per path)


def _parse_sink_file(data: bytes, name: str) -> list[dict]:
    """One metadata log file: ``v1`` then one JSON file status per line, each line *preceded* by ``\\n``.

    Spark never ends a file with a newline, so a trailing newline, like an unparseable last line,
    means the file was cut short.
    """
    where = f"{SPARK_METADATA}/{name}"
    if not data:
        raise SparkMetadataLogError(f"incomplete log file {where}: it is empty (Spark always writes a version header)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SparkMetadataLogError(f"log file {where} is not UTF-8 text ({e}); it is damaged") from None
    lines = text.split("\n")
    header = lines[0].rstrip("\r")
    m = re.fullmatch(r"v([0-9]+)", header)
    if not m or int(m.group(1)) == 0:
        raise SparkMetadataLogError(f"log file {where} is malformed: it does not start with a version header like 'v1' (found {header[:40]!r})")
    version = int(m.group(1))
    if version > SPARK_LOG_VERSION:
        raise SparkMetadataVersionError(
            f"log file {where} has version v{version}; lakelog reads Spark file-sink logs of version v{SPARK_LOG_VERSION}. "
            "It was written by a newer Spark: read the data with that Spark and write it to a lakelog table."
        )
    if len(lines) > 1 and lines[-1] == "":
        raise SparkMetadataLogError(
            f"incomplete log file {where}: it ends with a newline, which Spark never writes, so entries after it may be "
            "lost (the file was truncated or edited). Restore it; if you edited it by hand, remove the final newline."
        )
    out = []
    for lineno, line in enumerate(lines[1:], start=2):
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            last = lineno == len(lines)
            raise SparkMetadataLogError(
                f"{'incomplete' if last else 'damaged'} log file {where}: line {lineno} is not valid JSON ({e})"
                + (" - the file was truncated" if last else "")
                + ". The committed files cannot be known; restore the file from a backup."
            ) from None
        if (
            not isinstance(obj, dict)
            or not isinstance(obj.get("path"), str)
            or not obj["path"]
            or not isinstance(obj.get("size"), int)
            or isinstance(obj.get("size"), bool)
            or not isinstance(obj.get("action"), str)
            or not isinstance(obj.get("isDir", False), bool)
            or not isinstance(obj.get("modificationTime", 0), int)
        ):
            raise SparkMetadataLogError(
                f"log file {where}: line {lineno} is not a Spark file status "
                "(a JSON object with string 'path', integer 'size', boolean 'isDir' and string 'action')"
            )
        if obj["action"] not in ("add", "delete"):
            raise SparkMetadataLogError(f"log file {where}: line {lineno} has unknown action {obj['action']!r} (expected 'add' or 'delete')")
        out.append(obj)
    return out


def read_spark_metadata(storage: Storage) -> SparkSinkLog:
    """Read ``_spark_metadata`` as Spark's FileStreamSinkLog.allFiles does.

    The newest batch N is the highest batch file id; the valid batches are the newest ``C.compact`` file
    at or below N (it holds everything up to C) and every batch C+1..N, which must all exist (without a
    compact file: 0..N). Paths with a ``delete`` entry are dropped (older Spark versions wrote such
    entries); the last ``add`` of a path wins.
    """
    meta_dir = storage.join(SPARK_METADATA)
    batches: dict[int, str] = {}
    for info in storage.list_dir(meta_dir):
        m = _BATCH_FILE_RE.match(info.name)
        if not m:
            continue  # .crc, temp files of crashed writers
        bid = int(m.group(1))
        if bid in batches:
            raise SparkMetadataLogError(f"{SPARK_METADATA} has both {batches[bid]!r} and {info.name!r} for batch {bid}; the log is inconsistent")
        batches[bid] = info.name
    if not batches:
        return SparkSinkLog(None, [], [])
    latest = max(batches)
    compacts = [b for b, n in batches.items() if n.endswith(".compact")]
    start = max(compacts) if compacts else 0
    wanted = list(range(start, latest + 1))
    missing = [b for b in wanted if b not in batches]
    if missing:
        raise SparkMetadataLogError(
            f"{SPARK_METADATA} is incomplete: batch file(s) {missing[:5]} are missing between "
            f"{'compact batch ' + str(start) if compacts else 'batch 0'} and the newest batch {latest}, "
            "so the committed files cannot be known. Restore the missing files."
        )
    paths = {b: f"{meta_dir}/{batches[b]}" for b in wanted}
    blobs = storage.fs.cat(list(paths.values()), on_error="return")
    if not isinstance(blobs, dict):
        blobs = {next(iter(paths.values())): blobs}
    by_name = {k.rstrip("/").rsplit("/", 1)[-1]: v for k, v in blobs.items()}
    entries: dict[str, dict] = {}
    deleted: set[str] = set()
    for b in wanted:
        data = by_name.get(batches[b])
        if data is None or isinstance(data, BaseException):
            raise SparkMetadataLogError(f"cannot read {SPARK_METADATA}/{batches[b]}: {data!r}")
        for e in _parse_sink_file(data, batches[b]):
            if e["action"] == "delete":
                deleted.add(e["path"])
            else:
                entries.pop(e["path"], None)
                entries[e["path"]] = e
    kept = [e for p, e in entries.items() if p not in deleted]
    return SparkSinkLog(latest, wanted, kept)


_SCHEME_FAMILY = {"s3a": "s3", "s3n": "s3", "gcs": "gs", "abfss": "abfs", "az": "abfs", "local": "file"}


def _relative_to_root(storage: Storage, uri: str) -> str:
    """The path of a file status (an absolute URI, as Hadoop writes it) relative to the table root."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    outside = (
        f"{SPARK_METADATA} lists {uri!r}, which is not inside the table directory {storage.uri!r}. lakelog only "
        "references files inside the table; copy or move the file under the table directory (and fix the log) first."
    )
    if len(scheme) == 1:  # a Windows drive letter, not a scheme
        scheme = ""
    if not scheme and not uri.startswith("/"):
        raise InvalidPathError(f"{SPARK_METADATA} lists the relative path {uri!r}; Spark writes absolute URIs, so the log is not trustworthy")
    candidates: list[str] = []
    if scheme in ("", "file", "local"):
        if not storage.is_local or parts.netloc not in ("", "localhost"):
            raise InvalidPathError(outside)
        candidates.append(unquote(parts.path) if scheme else uri)
    else:
        proto = storage.protocol
        if _SCHEME_FAMILY.get(scheme, scheme) != _SCHEME_FAMILY.get(proto, proto):
            raise InvalidPathError(outside)
        path = unquote(parts.path)
        host = parts.netloc.split("@", 1)[0]
        candidates += [host + path, path]
    roots = [storage.root.rstrip("/")]
    if storage.is_local:
        roots.append(os.path.realpath(storage.root).rstrip("/"))  # Spark may have been given another spelling
    for cand in candidates:
        for root in roots:
            p = posixpath.normpath(cand)
            if storage.is_local and root != roots[0]:
                p = os.path.realpath(p)
            if p.startswith(root + "/"):
                rel = p[len(root) + 1:]
                if rel and ".." not in rel.split("/"):
                    return rel
    raise InvalidPathError(outside)


def _sink_files(storage: Storage, log: SparkSinkLog, listing: dict[str, _SourceFile]) -> list[_SourceFile]:
    files: dict[str, _SourceFile] = {}
    for e in log.entries:
        if e.get("isDir"):
            continue  # as Spark's MetadataLogFileIndex
        rel = _relative_to_root(storage, e["path"])
        if rel.split("/")[0] in (SPARK_METADATA, "_delta_log"):
            raise InvalidPathError(f"{SPARK_METADATA} lists {e['path']!r}, a file inside {rel.split('/')[0]}; the log is not trustworthy")
        actual = listing.get(rel)
        if actual is None:
            raise MissingDataFileError(
                f"{SPARK_METADATA} lists {e['path']!r} as committed but the file does not exist; the sink's data is "
                "incomplete. Restore the file (or remove its entry from the log) before converting."
            )
        if actual.size != e["size"]:
            raise ConvertError(
                f"{rel!r} has {actual.size} bytes but {SPARK_METADATA} committed it with {e['size']}: the file changed "
                "after Spark committed it. Restore the committed file before converting."
            )
        files[rel] = _SourceFile(rel, actual.size, int(e.get("modificationTime") or 0) or actual.mtime_ms)
    return list(files.values())


# ---------------------------------------------------------------- partition directories

def hive_unescape(s: str) -> str:
    """Undo Hive/Spark path escaping (``%XX`` with two hex digits; anything else stays as it is)."""
    return re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), s)


def _partition_dirs(files: list[_SourceFile]) -> dict[str, list[tuple[str, str | None]]]:
    """Per file, the (column, unescaped value or None) pairs of its ``k=v`` directories, in order."""
    out: dict[str, list[tuple[str, str | None]]] = {}
    first: tuple[str, list[str]] | None = None
    for f in files:
        pairs: list[tuple[str, str | None]] = []
        for seg in f.rel.split("/")[:-1]:
            key, sep, raw = seg.partition("=")
            if not sep or not key:
                raise ConvertError(
                    f"{f.rel!r} is in the directory {seg!r}, which is not a '<column>=<value>' partition directory; "
                    "lakelog converts data files at the top level or in Hive-style partition directories only"
                )
            value = None if raw in ("", HIVE_NULL) else hive_unescape(raw)
            pairs.append((hive_unescape(key), value))
        names = [k for k, _ in pairs]
        if first is None:
            first = (f.rel, names)
        elif names != first[1]:
            raise ConvertError(
                f"inconsistent partition directories: {first[0]!r} is partitioned by {first[1]} but {f.rel!r} by {names}; "
                "every file must sit under the same partition columns, in the same order"
            )
        if len(set(names)) != len(names):
            raise ConvertError(f"{f.rel!r} names partition column(s) twice: {names}")
        out[f.rel] = pairs
    return out


def infer_partition_type(values: list[str | None]) -> pa.DataType:
    """The type of a partition column from its directory values (None = null), conservatively.

    Like Spark's partition type inference, but only where the directory text is the canonical form of
    the typed value, so that nothing is lost: integers (no sign ``+``, no leading zeros) become
    ``integer`` if they all fit 32 bits, else ``long``; a mix of such integers (|n| < 2**53) and finite
    decimals whose shortest text is the directory text (``1.5``, not ``1.50``) becomes ``double``;
    ``YYYY-MM-DD`` dates become ``date``; everything else, including timestamps (Spark would read those
    in the session time zone) and integers beyond 64 bits, stays ``string``. An all-null column is
    ``string``. Pass ``partition_by=["col:type"]`` to choose another type.
    """
    vals = [v for v in values if v is not None]
    if not vals:
        return pa.string()

    def canonical_int(v: str) -> bool:
        return bool(_INT_RE.match(v)) and str(int(v)) == v

    if all(canonical_int(v) for v in vals):
        nums = [int(v) for v in vals]
        if all(-(2**31) <= n < 2**31 for n in nums):
            return pa.int32()
        if all(-(2**63) <= n < 2**63 for n in nums):
            return pa.int64()
        return pa.string()

    def canonical_double(v: str) -> bool:
        if canonical_int(v):
            return abs(int(v)) < 2**53
        if not _FLOAT_RE.match(v):
            return False
        x = float(v)
        return math.isfinite(x) and repr(x) == v

    if all(canonical_double(v) for v in vals):
        return pa.float64()

    def iso_date(v: str) -> bool:
        if not _DATE_RE.match(v):
            return False
        try:
            dt.date.fromisoformat(v)
            return True
        except ValueError:
            return False

    if all(iso_date(v) for v in vals):
        return pa.date32()
    return pa.string()


_INT_RANGES = {8: 2**7, 16: 2**15, 32: 2**31, 64: 2**63}


def _parse_partition_text(raw: str, t: pa.DataType, column: str) -> Any:
    """A directory value as a Python value of type ``t``; SchemaMismatchError when it is not one."""

    def bad(why: str = "") -> SchemaMismatchError:
        return SchemaMismatchError(
            f"partition directory value {raw!r} of column {column!r} is not a valid {t}{why}; "
            f"pass partition_by=['{column}:string'] (or another type) to convert it"
        )

    try:
        if pa.types.is_string(t):
            return raw
        if pa.types.is_integer(t):
            if not re.fullmatch(r"[-+]?[0-9]+", raw):
                raise bad()
            n = int(raw)
            lim = _INT_RANGES[t.bit_width]
            if not -lim <= n < lim:
                raise bad(" (out of range)")
            return n
        if pa.types.is_floating(t):
            return float(raw)
        if pa.types.is_boolean(t):
            if raw.lower() not in ("true", "false"):
                raise bad()
            return raw.lower() == "true"
        if pa.types.is_date(t):
            return dt.date.fromisoformat(raw)
        if pa.types.is_timestamp(t):
            v = dt.datetime.fromisoformat(raw.replace(" ", "T", 1) if "T" not in raw else raw)
            if t.tz is not None:  # a value without an offset is taken as UTC, as lakelog reads partition values
                return v.replace(tzinfo=dt.timezone.utc) if v.tzinfo is None else v.astimezone(dt.timezone.utc)
            if v.tzinfo is not None:
                raise bad(" (it has a time zone offset)")
            return v
        if pa.types.is_decimal(t):
            d = decimal.Decimal(raw)
            q = d.quantize(decimal.Decimal(1).scaleb(-t.scale))
            if q != d or len(q.as_tuple().digits) > t.precision:
                raise bad(" (it does not fit)")
            return q
        if pa.types.is_binary(t):
            return raw.encode("latin-1")
    except SchemaMismatchError:
        raise
    except (ValueError, ArithmeticError, UnicodeError):
        raise bad() from None
    raise SchemaMismatchError(f"cannot partition by column {column!r} of type {t}; partition columns must be primitive")


def _plan_partitions(
    data_schema: pa.Schema,
    dirs: dict[str, list[tuple[str, str | None]]],
    requested: list[tuple[str, pa.DataType | None]] | None,
) -> tuple[pa.Schema, list[str], dict[str, dict[str, str | None]]]:
    """(table schema, partition columns, partitionValues per file)."""
    found = next(iter(dirs.values()), [])
    found_names = [k for k, _ in found]
    if requested is None:
        parts = found_names
        types: dict[str, pa.DataType | None] = {c: None for c in parts}
    else:
        parts = [n for n, _ in requested]
        types = dict(requested)
        if set(parts) != set(found_names):
            raise SchemaMismatchError(
                f"partition_by={parts} does not match the directories, which are partitioned by {found_names or 'nothing'}; "
                f"pass partition_by={found_names} (or omit it)"
            )
    raw: dict[str, list[str | None]] = {c: [] for c in parts}
    for pairs in dirs.values():
        for k, v in pairs:
            raw[k].append(v)
    in_files = {f.name: f for f in data_schema}
    ptypes: dict[str, pa.DataType] = {}
    for c in parts:
        t = types.get(c)
        if c in in_files:
            ft = in_files[c].type
            if t is not None and _strip_nullability(t) != _strip_nullability(ft):
                raise SchemaMismatchError(f"partition_by gives column {c!r} the type {t} but the Parquet files store it as {ft}")
            t = ft
        ptypes[c] = t if t is not None else infer_partition_type(raw[c])
    values: dict[str, dict[str, str | None]] = {}
    for rel, pairs in dirs.items():
        pv: dict[str, str | None] = {}
        for k, v in pairs:
            t = ptypes[k]
            if v is None:
                pv[k] = None
            elif pa.types.is_string(t):
                pv[k] = v
            else:
                pv[k] = serialize_partition_value(_parse_partition_text(v, t, k), t)
        values[rel] = {c: pv[c] for c in parts}
    fields = [pa.field(f.name, f.type, True) for f in data_schema]
    fields += [pa.field(c, ptypes[c], True) for c in parts if c not in in_files]
    return pa.schema(fields), parts, values


def _check_stored_partition_values(
    storage: Storage,
    footers: dict[str, "_Footer"],
    schema: pa.Schema,
    parts: list[str],
    values: dict[str, dict[str, str | None]],
) -> None:
    """Files that also store a partition column must hold their directory's value in every row.

    Delta readers take partition values from the log only, lakelog's from the file when it has the
    column: the two must not be able to disagree.
    """
    for rel, footer in footers.items():
        stored = [c for c in parts if c in footer.schema.names]
        if not stored:
            continue
        try:
            data = pq.read_table(storage.join(rel), columns=stored, filesystem=storage.arrow_fs)
        except (pa.ArrowException, OSError) as e:
            raise ConvertError(f"{rel!r} is not a readable Parquet file ({e})") from None
        for c in stored:
            t = schema.field(c).type
            text = values[rel][c]
            col = data.column(c).cast(t)
            if text is None:
                ok = col.null_count == len(col)
            else:
                expected = pa.scalar(_parse_partition_text(text, t, c), t) if not pa.types.is_string(t) else pa.scalar(text, t)
                ok = col.null_count == 0 and bool(pc.all(pc.equal(col, expected)).as_py() in (True, None))
            if not ok:
                raise ConvertError(
                    f"{rel!r} stores the partition column {c!r} with values other than its directory's "
                    f"({text!r}); readers would disagree about them. Rewrite the file without the column or fix its directory."
                )


# ---------------------------------------------------------------- footers and schema

def _leaf_count(t: pa.DataType) -> int:
    if pa.types.is_struct(t):
        return sum(_leaf_count(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _leaf_count(t.key_type) + _leaf_count(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _leaf_count(t.value_type)
    return 1


def _with_int96_as_utc(schema: pa.Schema, md: pq.FileMetaData) -> pa.Schema:
    """INT96 columns (Spark's default timestamp encoding) hold UTC instants: give them the UTC time zone."""
    physical = [md.schema.column(i).physical_type for i in range(md.num_columns)]
    if "INT96" not in physical:
        return schema
    idx = 0

    def fix(t: pa.DataType) -> pa.DataType:
        nonlocal idx
        if pa.types.is_struct(t):
            return pa.struct([pa.field(t.field(i).name, fix(t.field(i).type), t.field(i).nullable) for i in range(t.num_fields)])
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            vf = t.value_field
            inner = pa.field(vf.name, fix(vf.type), vf.nullable)
            return pa.list_(inner) if pa.types.is_list(t) else pa.large_list(inner)
        if pa.types.is_map(t):
            kf, itf = t.key_field, t.item_field
            return pa.map_(pa.field(kf.name, fix(kf.type), kf.nullable), pa.field(itf.name, fix(itf.type), itf.nullable))
        if pa.types.is_nested(t):
            idx += _leaf_count(t)
            return t
        p = physical[idx] if idx < len(physical) else None
        idx += 1
        if p == "INT96" and pa.types.is_timestamp(t) and t.tz is None:
            return pa.timestamp(t.unit, tz="UTC")
        return t

    return pa.schema([pa.field(f.name, fix(f.type), f.nullable) for f in schema])


@dataclass
class _Footer:
    schema: pa.Schema  # the file's Arrow schema (INT96 timestamps as UTC)
    metadata: pq.FileMetaData


def _read_footer(storage: Storage, rel: str) -> _Footer:
    try:
        with storage.arrow_fs.open_input_file(storage.join(rel)) as f:
            pf = pq.ParquetFile(f)
            md = pf.metadata
            schema = pf.schema_arrow
    except FileNotFoundError:
        raise MissingDataFileError(f"{rel!r} disappeared while converting; retry") from None
    except (pa.ArrowException, OSError, ValueError) as e:
        raise ConvertError(f"{rel!r} is not a readable Parquet file ({e}); remove or repair it before converting") from None
    return _Footer(_with_int96_as_utc(schema, md), md)


def _read_footers(storage: Storage, files: list[_SourceFile]) -> dict[str, _Footer]:
    if len(files) == 1:
        return {files[0].rel: _read_footer(storage, files[0].rel)}
    with ThreadPoolExecutor(max_workers=min(FOOTER_THREADS, len(files))) as pool:
        results = list(pool.map(lambda f: _read_footer(storage, f.rel), files))
    return {f.rel: r for f, r in zip(files, results)}


def _refuse_nanosecond_timestamps(footers: dict[str, "_Footer"]) -> None:
    """Parquet ``TIMESTAMP(NANOS)`` columns (pandas' default unit) have no Delta type: adopting them in
    place would make a table Spark cannot read and delta-rs reads truncated."""
    nanos = {rel: cols for rel in sorted(footers) if (cols := nanosecond_columns(footers[rel].metadata))}
    if not nanos:
        return
    rel, cols = next(iter(nanos.items()))
    more = f" (and {len(nanos) - 1} more file(s), e.g. {list(nanos)[1:4]})" if len(nanos) > 1 else ""
    raise NanosecondTimestampError(
        f"{rel!r} stores column(s) {cols} as nanosecond timestamps (Parquet TIMESTAMP(NANOS), pandas' default unit){more}. "
        "Delta timestamps are microseconds: Spark refuses such files and delta-rs truncates them, so convert does not "
        "adopt them in place. Rewrite the files with microsecond timestamps (pandas: df.to_parquet(path, "
        "coerce_timestamps='us'); pyarrow: pq.write_table(table, path, coerce_timestamps='us')) and convert again, or "
        "load the data with lakelog.write_table(), which stores microseconds.",
        rel,
        cols,
    )


def _unify_schemas(footers: dict[str, _Footer]) -> pa.Schema:
    """Union of the files' columns (first appearance order); same-named columns must have one Delta type.

    Integers may widen (int -> long) and float to double; columns of Arrow's null type take the type
    other files give them. Any other difference is a SchemaMismatchError naming two files.
    """
    types: dict[str, pa.DataType | None] = {}
    origin: dict[str, str] = {}
    for rel, footer in footers.items():
        for f in footer.schema:
            if pa.types.is_null(f.type):
                types.setdefault(f.name, None)
                continue
            try:
                t = canonical_type(f.type)
            except (SchemaMismatchError, UnsupportedFeatureError) as e:
                raise SchemaMismatchError(f"column {f.name!r} of {rel!r}: {e}") from None
            cur = types.get(f.name)
            if cur is None:
                types[f.name], origin[f.name] = t, rel
            elif cur == t or _widening_ok(t, cur):
                continue
            elif _strip_nullability(cur) == _strip_nullability(t):
                types[f.name] = _strip_nullability(t)
            elif _widening_ok(cur, t):
                types[f.name], origin[f.name] = t, rel
            else:
                raise SchemaMismatchError(
                    f"column {f.name!r} is {cur} in {origin[f.name]!r} but {t} in {rel!r}; the files cannot form one table. "
                    "Rewrite the odd files with a common type, or convert the directories separately."
                )
    untyped = [n for n, t in types.items() if t is None]
    if untyped:
        raise SchemaMismatchError(
            f"column(s) {untyped} hold only nulls of Arrow's null type in every file, so their type is unknown; "
            "rewrite one file with a typed column or drop the column"
        )
    return pa.schema([pa.field(n, t, True) for n, t in types.items()])


# ---------------------------------------------------------------- stats

def file_stats(footer: _Footer) -> str:
    """Delta stats for one file from its footer's row-group statistics, by the writer's own function.

    The file's own Arrow schema lines the leaves up with its Parquet columns, so a file whose columns
    are ordered differently from the table, or that lacks some, still gets exact stats for the columns
    it has (the first 32 leaves in the file's order). Footer statistics that cannot be turned into
    values leave the file with ``numRecords`` only.
    """
    try:
        return stats_from_parquet_metadata(footer.schema, footer.metadata, MAX_INDEXED_COLS)
    except (ValueError, TypeError, UnicodeDecodeError, OverflowError, pa.ArrowException):
        n = footer.metadata.num_rows
        return orjson.dumps({"numRecords": n, "minValues": {}, "maxValues": {}, "nullCount": {}}).decode()

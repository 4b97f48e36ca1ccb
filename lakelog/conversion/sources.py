"""Which files make up the data set being converted: a Parquet directory listing, or exactly the files
a Spark file sink's ``_spark_metadata`` log names as committed."""

from __future__ import annotations

import os
import posixpath
import re
import warnings
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import orjson

from ..errors import (
    ConvertError,
    CorruptLogError,
    InvalidPathError,
    MissingDataFileError,
    UnsupportedFeatureError,
)
from ..storage import Storage, _mtime_ms


SPARK_METADATA = "_spark_metadata"
SPARK_LOG_VERSION = 1  # FileStreamSinkLog.VERSION
_BATCH_FILE_RE = re.compile(r"^(\d+)(\.compact)?$")


class SparkMetadataLogError(CorruptLogError):
    """The ``_spark_metadata`` log is truncated, malformed or incomplete, so the committed files are unknown."""


class SparkMetadataVersionError(SparkMetadataLogError, UnsupportedFeatureError):
    """A ``_spark_metadata`` file has a version header other than ``v1`` (written by a newer Spark)."""


@dataclass(frozen=True)
class SourceFile:
    rel: str  # path relative to the table root, as on storage (decoded)
    size: int
    mtime_ms: int


def is_dir(storage: Storage, path: str) -> bool:
    try:
        return bool(storage.fs.isdir(path))
    except (FileNotFoundError, OSError) as e:
        storage.raise_if_unanswered(e, path, "exists")  # no answer is not "no directory"
        return False


def list_tree(storage: Storage) -> dict[str, SourceFile]:
    """Every file under the root (one recursive listing), by relative path."""
    root = storage.root.rstrip("/")
    storage.fs.invalidate_cache()
    try:
        with storage.store.answering("list_files", root):
            found = storage.fs.find(root, withdirs=False, detail=True)
    except FileNotFoundError:
        found = {}
    if not found and not is_dir(storage, root):
        raise ConvertError(f"nothing to convert: {storage.uri!r} is not a directory")
    out: dict[str, SourceFile] = {}
    for full, info in found.items():
        if info.get("type") == "directory":
            continue
        full = full.rstrip("/")
        if not full.startswith(root + "/"):
            continue
        rel = full[len(root) + 1:]
        out[rel] = SourceFile(rel, int(info.get("size") or 0), _mtime_ms(info))
    return out


def _hidden(name: str) -> bool:
    """Spark's InMemoryFileIndex.shouldFilterOutPathName."""
    return (name.startswith("_") and "=" not in name) or name.startswith(".") or name.endswith("._COPYING_")


def directory_files(listing: dict[str, SourceFile]) -> list[SourceFile]:
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
    blobs = dict(zip(wanted, storage.read_each(list(paths.values()), on_error="return")))
    entries: dict[str, dict] = {}
    deleted: set[str] = set()
    for b in wanted:
        data = blobs.get(b)
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


def sink_files(storage: Storage, log: SparkSinkLog, listing: dict[str, SourceFile]) -> list[SourceFile]:
    files: dict[str, SourceFile] = {}
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
        files[rel] = SourceFile(rel, actual.size, int(e.get("modificationTime") or 0) or actual.mtime_ms)
    return list(files.values())

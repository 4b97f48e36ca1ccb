"""Delta log actions: typed records and their JSON form (one action per line, orjson)."""

from __future__ import annotations

import numbers
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union
from urllib.parse import quote, unquote

import orjson

from .errors import CorruptLogError, InvalidArgumentError, InvalidPathError, UnsupportedFeatureError

if TYPE_CHECKING:  # reading commits needs no pyarrow: the log-only commands start without it
    import pyarrow as pa


def now_ms() -> int:
    return int(time.time() * 1000)


def encode_path(relative: str) -> str:
    """URI-encode a relative data-file path the way Delta writers do (RFC 2396 path segment rules)."""
    return quote(relative, safe="/=+-_.~!$&'()*,;:@")


def decode_path(logged: str) -> str:
    """Decode an ``add.path``/``remove.path`` and refuse paths that do not name one file inside the table
    root: absolute paths, URLs, ``..``, and (as delta-rs's object_store does) empty paths and empty or
    ``.`` segments, which would name a directory or give one file two names."""
    if "://" in logged or logged.startswith(("/", "\\")) or (len(logged) > 1 and logged[1] == ":"):
        raise InvalidPathError(
            f"log names the absolute path {logged!r}; lakelog only reads files inside the table root. "
            "Rewrite the table with relative paths (or copy the files into the table directory)."
        )
    try:
        rel = unquote(logged, errors="strict")
    except UnicodeDecodeError:
        raise InvalidPathError(f"log path {logged!r} does not decode to UTF-8; refusing to guess which file it names") from None
    parts = rel.replace("\\", "/").split("/")
    if any(p == ".." for p in parts) or rel.startswith("/"):
        raise InvalidPathError(f"log path {logged!r} escapes the table root; refusing to read it")
    if any(p in ("", ".") for p in rel.split("/")) or "\x00" in rel:
        what = "is empty" if not rel else "has an empty or '.' segment, or a NUL character"
        raise InvalidPathError(f"log path {logged!r} {what}, so it does not name one data file; the log is damaged")
    return rel


# Paths that may need decoding or be unsafe: everything else is taken as is, without Python per path.
SLOW_PATH_RE = r"^$|^[/\\]|%|:|\.\.|//|/$|(^|/)\.(/|$)|\x00"


def paths_to_decode(logged: pa.Array) -> list[int]:
    """The rows of a column of logged paths that ``decode_path`` must see (``SLOW_PATH_RE``); every other
    path is its own decoded form."""
    import pyarrow.compute as pc

    slow = pc.match_substring_regex(logged, SLOW_PATH_RE)
    return pc.indices_nonzero(slow).to_pylist() if slow.true_count else []


def stats_dict(stats: str | None) -> dict | None:
    """An ``add.stats`` JSON string as a dict; None when absent or malformed (stats are optional, so a
    reader that cannot use them reads without them)."""
    if not stats:
        return None
    try:
        d = orjson.loads(stats)
    except orjson.JSONDecodeError:
        return None
    return d if isinstance(d, dict) else None


def stats_count(v: Any) -> int | None:
    """A ``numRecords`` or ``nullCount`` value: a non-negative integer, else None (unknown)."""
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


DV_STORAGE_TYPES = ("u", "i", "p")


@dataclass(frozen=True, slots=True)
class DeletionVectorDescriptor:
    """An ``add``/``remove`` action's ``deletionVector``: which rows of the data file are deleted.

    ``storage_type``: ``u`` (a file in the table named from a z85-encoded UUID, with an optional
    prefix), ``i`` (the bitmap inline, z85-encoded) or ``p`` (a file at an absolute path).
    ``offset``: where the DV starts in its file (``u``/``p``); ``size_in_bytes``: the serialized bitmap's
    size; ``cardinality``: the number of deleted rows. ``max_row_index`` is Spark's extra field, kept
    as read. Reading it is ``lakelog.table_features.deletion_vectors``.
    """

    storage_type: str
    path_or_inline_dv: str
    size_in_bytes: int
    cardinality: int
    offset: int | None = None
    max_row_index: int | None = None

    @property
    def unique_id(self) -> str:
        """The protocol's ``uniqueId``: with the data file's path, the key of a logical file."""
        base = self.storage_type + self.path_or_inline_dv
        return base if self.offset is None else f"{base}@{self.offset}"

    def to_json(self) -> dict:
        d: dict[str, Any] = {"storageType": self.storage_type, "pathOrInlineDv": self.path_or_inline_dv}
        if self.offset is not None:
            d["offset"] = self.offset
        d["sizeInBytes"] = self.size_in_bytes
        d["cardinality"] = self.cardinality
        if self.max_row_index is not None:
            d["maxRowIndex"] = self.max_row_index
        return d

    @classmethod
    def from_json(cls, d: Any) -> "DeletionVectorDescriptor":
        """Parse a descriptor; a malformed one is a ``TypeError``/``ValueError`` (the caller reports the
        action), a storage type lakelog does not read an ``UnsupportedFeatureError``."""
        if not isinstance(d, dict):
            raise TypeError(f"deletionVector must be a JSON object, got {type(d).__name__}")
        kind = _str(d, "storageType")
        if kind not in DV_STORAGE_TYPES:
            raise UnsupportedFeatureError(
                f"deletion vector storage type {kind!r} is not one lakelog reads (it reads 'u', 'i' and 'p'; "
                "'r' belongs to Delta's adaptiveMetadata preview feature)"
            )
        out = cls(
            storage_type=kind,
            path_or_inline_dv=_str(d, "pathOrInlineDv"),
            size_in_bytes=_int(d, "sizeInBytes", required=True),
            cardinality=_int(d, "cardinality", required=True),
            offset=_int(d, "offset"),
            max_row_index=_int(d, "maxRowIndex"),
        )
        if out.size_in_bytes < 0 or out.cardinality < 0 or (out.offset is not None and out.offset < 0):
            raise ValueError(f"deletionVector has a negative size, cardinality or offset: {d!r}")
        if not out.path_or_inline_dv:
            raise ValueError("deletionVector.pathOrInlineDv is empty")
        return out


def dv_id(action: Any) -> str | None:
    """The deletion vector id of an add/remove (None without one)."""
    dv = action.deletion_vector
    return None if dv is None else dv.unique_id


def string_map(value: Any, what: str, *, required: bool = False) -> dict[str, str | None] | None:
    """A protocol ``Map[String, String]`` from JSON (``partitionValues``, ``tags``, ``configuration``).

    A JSON number or boolean value is read as its JSON text (``5`` -> ``"5"``, ``true`` -> ``"true"``),
    as delta-rs reads it; a nested value, or a map that is not a JSON object, is a ``TypeError`` (the
    caller turns it into ``CorruptLogError``).
    """
    if value is None:
        if required:
            raise TypeError(f"{what} is required")
        return None
    if not isinstance(value, dict):
        raise TypeError(f"{what} must be a JSON object of strings, got {type(value).__name__}")
    out: dict[str, str | None] = {}
    for k, v in value.items():
        if v is None or isinstance(v, str):
            out[k] = v
        elif isinstance(v, bool):
            out[k] = "true" if v else "false"
        elif isinstance(v, (int, float)):
            out[k] = orjson.dumps(v).decode()
        else:
            raise TypeError(f"{what}[{k!r}] must be a string, got {type(v).__name__}")
    return out


def _int(d: dict, key: str, default: int | None = None, *, required: bool = False) -> int | None:
    v = d.get(key)
    if v is None:
        if required:
            raise KeyError(key)
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{key} must be an integer, got {v!r}")
    return v


def _bool(d: dict, key: str, default: bool | None = None, *, required: bool = False) -> bool | None:
    v = d.get(key)
    if v is None:
        if required:
            raise KeyError(key)
        return default
    if not isinstance(v, bool):
        raise TypeError(f"{key} must be true or false, got {v!r}")
    return v


def _str(d: dict, key: str, *, required: bool = True) -> str | None:
    v = d.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, str):
        raise TypeError(f"{key} must be a string, got {v!r}")
    return v


def _strings(d: dict, key: str) -> list[str] | None:
    v = d.get(key)
    if v is None:
        return None
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise TypeError(f"{key} must be a list of strings, got {v!r}")
    return list(v)


def configuration_from_log(raw: Mapping[str, Any] | None) -> dict[str, str]:
    """``metaData.configuration`` as read from a log: null values dropped, JSON booleans and numbers as
    their text (as Spark's JSON reader coerces them into its string map)."""
    out: dict[str, str] = {}
    for k, v in (raw or {}).items():
        if v is None:
            continue
        if isinstance(v, bool):
            v = "true" if v else "false"
        elif isinstance(v, (int, float)):
            v = str(v)
        elif not isinstance(v, str):
            raise ValueError(f"configuration value of {k!r} is a JSON {type(v).__name__}, not a string")
        out[str(k)] = v
    return out


@dataclass(slots=True)
class Protocol:
    min_reader_version: int = 1
    min_writer_version: int = 2
    reader_features: list[str] | None = None
    writer_features: list[str] | None = None

    def to_json(self) -> dict:
        d: dict[str, Any] = {"minReaderVersion": self.min_reader_version, "minWriterVersion": self.min_writer_version}
        if self.reader_features is not None:
            d["readerFeatures"] = list(self.reader_features)
        if self.writer_features is not None:
            d["writerFeatures"] = list(self.writer_features)
        return {"protocol": d}

    @classmethod
    def from_json(cls, d: dict) -> "Protocol":
        return cls(
            _int(d, "minReaderVersion", required=True),
            _int(d, "minWriterVersion", required=True),
            _strings(d, "readerFeatures"),
            _strings(d, "writerFeatures"),
        )


@dataclass(slots=True)
class Metadata:
    id: str
    schema_string: str
    partition_columns: list[str] = field(default_factory=list)
    configuration: dict[str, str] = field(default_factory=dict)
    created_time: int | None = None
    name: str | None = None
    description: str | None = None
    format_provider: str = "parquet"
    format_options: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        d: dict[str, Any] = {"id": self.id}
        if self.name is not None:
            d["name"] = self.name
        if self.description is not None:
            d["description"] = self.description
        d["format"] = {"provider": self.format_provider, "options": dict(self.format_options)}
        d["schemaString"] = self.schema_string
        d["partitionColumns"] = list(self.partition_columns)
        d["configuration"] = dict(self.configuration)
        d["createdTime"] = self.created_time
        return {"metaData": d}

    @classmethod
    def from_json(cls, d: dict) -> "Metadata":
        fmt = d.get("format") or {}
        if not isinstance(fmt, dict):
            raise TypeError(f"format must be a JSON object, got {fmt!r}")
        configuration = string_map(d.get("configuration"), "configuration") or {}
        return cls(
            id=_str(d, "id"),
            # (absent in a Delta Live Tables table before its first update: Snapshot.schema refuses it by name)
            schema_string=_str(d, "schemaString", required=False) or "",
            partition_columns=_strings(d, "partitionColumns") or [],
            configuration=configuration_from_log(configuration),
            created_time=_int(d, "createdTime"),
            name=_str(d, "name", required=False),
            description=_str(d, "description", required=False),
            format_provider=_str(fmt, "provider", required=False) or "parquet",
            format_options=string_map(fmt.get("options"), "format.options") or {},
        )


@dataclass(slots=True)
class AddFile:
    path: str  # as logged (URI-encoded)
    partition_values: dict[str, str | None]
    size: int
    modification_time: int
    data_change: bool = True
    stats: str | None = None
    tags: dict[str, str] | None = None
    deletion_vector: DeletionVectorDescriptor | None = None
    clustering_provider: str | None = None  # set by a clustering OPTIMIZE: the file is clustered
    base_row_id: int | None = None  # row tracking: the fresh row id of the file's first physical row
    default_row_commit_version: int | None = None  # row tracking: the version that first committed the file

    @property
    def relative_path(self) -> str:
        return decode_path(self.path)

    def num_records(self) -> int | None:
        """``stats.numRecords``: the rows physically in the data file (deleted rows included)."""
        stats = stats_dict(self.stats)
        return None if stats is None else stats_count(stats.get("numRecords"))

    def num_logical_records(self) -> int | None:
        """The rows this logical file holds: ``numRecords`` less the deletion vector's cardinality."""
        n = self.num_records()
        if n is None or self.deletion_vector is None:
            return n
        return max(0, n - self.deletion_vector.cardinality)

    def to_json(self) -> dict:
        d: dict[str, Any] = {
            "path": self.path,
            "partitionValues": self.partition_values,
            "size": self.size,
            "modificationTime": self.modification_time,
            "dataChange": self.data_change,
        }
        if self.stats is not None:
            d["stats"] = self.stats
        if self.tags:
            d["tags"] = self.tags
        if self.deletion_vector is not None:
            d["deletionVector"] = self.deletion_vector.to_json()
        if self.clustering_provider is not None:
            d["clusteringProvider"] = self.clustering_provider
        if self.base_row_id is not None:
            d["baseRowId"] = self.base_row_id
        if self.default_row_commit_version is not None:
            d["defaultRowCommitVersion"] = self.default_row_commit_version
        return {"add": d}

    @classmethod
    def from_json(cls, d: dict) -> "AddFile":
        """An ``add`` from JSON: ``path``, ``partitionValues``, ``size``, ``modificationTime`` and
        ``dataChange`` are required, as the protocol says; a wrong type is a ``TypeError``."""
        dv = d.get("deletionVector")
        return cls(
            path=_str(d, "path"),
            partition_values=string_map(d.get("partitionValues"), "partitionValues", required=True),
            size=_int(d, "size", required=True),
            modification_time=_int(d, "modificationTime", required=True),
            data_change=_bool(d, "dataChange", required=True),
            stats=_str(d, "stats", required=False),
            tags=string_map(d.get("tags"), "tags"),
            deletion_vector=None if dv is None else DeletionVectorDescriptor.from_json(dv),
            clustering_provider=_str(d, "clusteringProvider", required=False),
            base_row_id=_int(d, "baseRowId"),
            default_row_commit_version=_int(d, "defaultRowCommitVersion"),
        )

    def remove(self, deletion_timestamp: int | None = None, data_change: bool = True) -> "RemoveFile":
        """The ``remove`` of this logical file (its deletion vector included: that is its key)."""
        return RemoveFile(
            path=self.path,
            deletion_timestamp=deletion_timestamp if deletion_timestamp is not None else now_ms(),
            data_change=data_change,
            extended_file_metadata=True,
            partition_values=dict(self.partition_values),
            size=self.size,
            deletion_vector=self.deletion_vector,
            base_row_id=self.base_row_id,
            default_row_commit_version=self.default_row_commit_version,
        )


@dataclass(slots=True)
class RemoveFile:
    path: str
    deletion_timestamp: int | None = None
    data_change: bool = True
    extended_file_metadata: bool | None = None
    partition_values: dict[str, str | None] | None = None
    size: int | None = None
    deletion_vector: DeletionVectorDescriptor | None = None
    base_row_id: int | None = None  # row tracking: as the file's last add had them
    default_row_commit_version: int | None = None

    def to_json(self) -> dict:
        d: dict[str, Any] = {"path": self.path, "deletionTimestamp": self.deletion_timestamp, "dataChange": self.data_change}
        if self.extended_file_metadata is not None:
            d["extendedFileMetadata"] = self.extended_file_metadata
        if self.partition_values is not None:
            d["partitionValues"] = self.partition_values
        if self.size is not None:
            d["size"] = self.size
        if self.deletion_vector is not None:
            d["deletionVector"] = self.deletion_vector.to_json()
        if self.base_row_id is not None:
            d["baseRowId"] = self.base_row_id
        if self.default_row_commit_version is not None:
            d["defaultRowCommitVersion"] = self.default_row_commit_version
        return {"remove": d}

    @classmethod
    def from_json(cls, d: dict) -> "RemoveFile":
        dv = d.get("deletionVector")
        return cls(
            path=_str(d, "path"),
            deletion_timestamp=_int(d, "deletionTimestamp"),
            data_change=_bool(d, "dataChange", True),
            extended_file_metadata=_bool(d, "extendedFileMetadata"),
            partition_values=string_map(d.get("partitionValues"), "partitionValues"),
            size=_int(d, "size"),
            deletion_vector=None if dv is None else DeletionVectorDescriptor.from_json(dv),
            base_row_id=_int(d, "baseRowId"),
            default_row_commit_version=_int(d, "defaultRowCommitVersion"),
        )


@dataclass(slots=True)
class AddCDCFile:
    """A change data file (``cdc``): rows a commit changed, with ``_change_type``; not part of the table's
    data, so it never enters a snapshot or a checkpoint."""

    path: str
    partition_values: dict[str, str | None]
    size: int
    data_change: bool = False
    tags: dict[str, str] | None = None

    @property
    def relative_path(self) -> str:
        return decode_path(self.path)

    def to_json(self) -> dict:
        d: dict[str, Any] = {"path": self.path, "partitionValues": self.partition_values, "size": self.size, "dataChange": self.data_change}
        if self.tags:
            d["tags"] = self.tags
        return {"cdc": d}

    @classmethod
    def from_json(cls, d: dict) -> "AddCDCFile":
        return cls(
            path=_str(d, "path"),
            partition_values=string_map(d.get("partitionValues"), "partitionValues", required=True),
            size=_int(d, "size", required=True),
            data_change=_bool(d, "dataChange", False),
            tags=string_map(d.get("tags"), "tags"),
        )


@dataclass(slots=True)
class Txn:
    app_id: str
    version: int
    last_updated: int | None = None

    def to_json(self) -> dict:
        d: dict[str, Any] = {"appId": self.app_id, "version": self.version}
        if self.last_updated is not None:
            d["lastUpdated"] = self.last_updated
        return {"txn": d}

    @classmethod
    def from_json(cls, d: dict) -> "Txn":
        return cls(_str(d, "appId"), _int(d, "version", required=True), _int(d, "lastUpdated"))


_MAX_LONG = 2**63 - 1
_DIGITS_RE = re.compile(r"^[0-9]+$")


def check_app_id(app_id: Any) -> str:
    """An idempotent writer's application id: a non-empty string."""
    if not isinstance(app_id, str) or not app_id:
        raise InvalidArgumentError(f"app_id must be a non-empty string naming the writing application, not {app_id!r}")
    return app_id


def check_app_version(value: Any) -> int:
    """An idempotent write's version from the Python API: an integer >= 0 (bools, floats and strings
    are refused: a float would be truncated, and a string compares as text)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgumentError(
            f"app_version must be an integer >= 0 (the number of the batch being written), not {value!r} ({type(value).__name__})"
        )
    v = int(value)
    if not 0 <= v <= _MAX_LONG:
        raise InvalidArgumentError(f"app_version must be an integer from 0 to {_MAX_LONG}, not {v}")
    return v


def parse_app_version(text: str, name: str = "txnVersion") -> int:
    """An idempotent write's version given as text (a Spark option): decimal digits only."""
    s = text.strip() if isinstance(text, str) else text
    if not isinstance(s, str) or not _DIGITS_RE.match(s):
        raise InvalidArgumentError(f"option {name} must be an integer >= 0 written in decimal digits, not {text!r}")
    return check_app_version(int(s))


@dataclass(slots=True)
class CommitInfo:
    info: dict[str, Any]

    def to_json(self) -> dict:
        return {"commitInfo": self.info}


def stated_in_commit_timestamp(actions: list) -> int | None:
    """The ``inCommitTimestamp`` of a commit's (first) ``commitInfo``; None when it has none, or not an integer."""
    for a in actions:
        if type(a) is CommitInfo:
            ts = a.info.get("inCommitTimestamp")
            return ts if isinstance(ts, int) and not isinstance(ts, bool) else None
    return None


@dataclass(slots=True)
class DomainMetadata:
    """A ``domainMetadata`` action: the configuration of a named metadata domain (``removed``: a tombstone).

    Domains whose name starts with ``delta.`` belong to table features; the others to users and other
    engines. lakelog changes none of them and keeps them all (replay, checkpoints)."""

    domain: str
    configuration: str
    removed: bool = False

    def to_json(self) -> dict:
        return {"domainMetadata": {"domain": self.domain, "configuration": self.configuration, "removed": self.removed}}

    @classmethod
    def from_json(cls, d: dict) -> "DomainMetadata":
        return cls(_str(d, "domain"), _str(d, "configuration"), _bool(d, "removed", required=True))


Action = Union[Protocol, Metadata, AddFile, RemoveFile, Txn, CommitInfo, DomainMetadata, AddCDCFile]

_PARSERS = {
    "add": AddFile.from_json,
    "remove": RemoveFile.from_json,
    "metaData": Metadata.from_json,
    "protocol": Protocol.from_json,
    "txn": Txn.from_json,
    "commitInfo": CommitInfo,
    "domainMetadata": DomainMetadata.from_json,
    "cdc": AddCDCFile.from_json,
}


def serialize_actions(actions: list[Action]) -> bytes:
    """One JSON object per line, newline-terminated."""
    return b"".join(orjson.dumps(a.to_json()) + b"\n" for a in actions)


def parse_actions(data: bytes, name: str, extra: dict[str, Any] | None = None,
                  raw_adds: list[tuple[dict, int]] | None = None) -> list[Action]:
    """Parse a JSON commit file; a torn or unparseable line is a ``CorruptLogError`` naming file and line.

    ``extra``: parsers of actions allowed only in this kind of file (a V2 checkpoint's
    ``checkpointMetadata`` and ``sidecar``); in commits they are unknown actions and ignored.
    ``raw_adds``: when given, each ``add`` object is appended to it with its line number instead of
    being parsed (its fields are checked by the caller); on an error it holds the adds read so far."""
    parsers = _PARSERS if extra is None else {**_PARSERS, **extra}
    if not data.strip():
        raise CorruptLogError(f"incomplete log file {name}: it is empty. Restore it from a backup or remove it if it is the newest commit and was never acknowledged.")
    out: list[Action] = []
    for lineno, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            raise CorruptLogError(
                f"incomplete log file {name}: line {lineno} is not valid JSON ({e}). "
                "The commit was torn or edited; restore it from a backup."
            ) from None
        if not isinstance(obj, dict):
            raise CorruptLogError(f"incomplete log file {name}: line {lineno} is not a JSON object")
        for key, value in obj.items():
            parser = parsers.get(key)
            if parser is None or value is None:
                continue  # unknown actions are ignored, as the protocol requires
            try:
                if not isinstance(value, dict):
                    raise TypeError(f"expected a JSON object, got {type(value).__name__}")
                if raw_adds is not None and key == "add":
                    raw_adds.append((value, lineno))
                else:
                    out.append(parser(value))
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                raise CorruptLogError(f"log file {name}: line {lineno} has a malformed {key!r} action ({e!r})") from None
    return out

"""Classic single-file Parquet checkpoints (``%020d.checkpoint.parquet``) and ``_last_checkpoint``."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .actions import Action, AddFile, Metadata, Protocol, RemoveFile, Txn, now_ms
from .errors import CorruptLogError
from .log import LAST_CHECKPOINT, checkpoint_name

if TYPE_CHECKING:
    from .snapshot import Snapshot

_STR_MAP = pa.map_(pa.string(), pa.string())
CHECKPOINT_SCHEMA = pa.schema(
    [
        ("txn", pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])),
        (
            "add",
            pa.struct(
                [
                    ("path", pa.string()),
                    ("partitionValues", _STR_MAP),
                    ("size", pa.int64()),
                    ("modificationTime", pa.int64()),
                    ("dataChange", pa.bool_()),
                    ("stats", pa.string()),
                    ("tags", _STR_MAP),
                ]
            ),
        ),
        (
            "remove",
            pa.struct(
                [
                    ("path", pa.string()),
                    ("deletionTimestamp", pa.int64()),
                    ("dataChange", pa.bool_()),
                    ("extendedFileMetadata", pa.bool_()),
                    ("partitionValues", _STR_MAP),
                    ("size", pa.int64()),
                ]
            ),
        ),
        (
            "metaData",
            pa.struct(
                [
                    ("id", pa.string()),
                    ("name", pa.string()),
                    ("description", pa.string()),
                    ("format", pa.struct([("provider", pa.string()), ("options", _STR_MAP)])),
                    ("schemaString", pa.string()),
                    ("partitionColumns", pa.list_(pa.string())),
                    ("configuration", _STR_MAP),
                    ("createdTime", pa.int64()),
                ]
            ),
        ),
        (
            "protocol",
            pa.struct(
                [
                    ("minReaderVersion", pa.int32()),
                    ("minWriterVersion", pa.int32()),
                    ("readerFeatures", pa.list_(pa.string())),
                    ("writerFeatures", pa.list_(pa.string())),
                ]
            ),
        ),
    ]
)

DEFAULT_TOMBSTONE_RETENTION_MS = 7 * 24 * 3600 * 1000


def _items(d: dict | None) -> list[tuple] | None:
    return None if d is None else list(d.items())


def checkpoint_rows(snapshot: "Snapshot", now: int | None = None) -> pa.Table:
    """The checkpoint content of ``snapshot`` as an Arrow table with Delta's classic checkpoint schema."""
    now = now_ms() if now is None else now
    retention = snapshot.tombstone_retention_ms()
    p, m = snapshot.protocol, snapshot.metadata
    rows: dict[str, list] = {name: [] for name in CHECKPOINT_SCHEMA.names}

    def push(col: str, value: dict) -> None:
        for name in rows:
            rows[name].append(value if name == col else None)

    push(
        "protocol",
        {
            "minReaderVersion": p.min_reader_version,
            "minWriterVersion": p.min_writer_version,
            "readerFeatures": p.reader_features,
            "writerFeatures": p.writer_features,
        },
    )
    push(
        "metaData",
        {
            "id": m.id,
            "name": m.name,
            "description": m.description,
            "format": {"provider": m.format_provider, "options": _items(m.format_options)},
            "schemaString": m.schema_string,
            "partitionColumns": m.partition_columns,
            "configuration": _items(m.configuration),
            "createdTime": m.created_time,
        },
    )
    for t in snapshot.txns.values():
        push("txn", {"appId": t.app_id, "version": t.version, "lastUpdated": t.last_updated})
    for a in snapshot.files.values():
        push(
            "add",
            {
                "path": a.path,
                "partitionValues": _items(a.partition_values),
                "size": a.size,
                "modificationTime": a.modification_time,
                "dataChange": False,  # checkpoint adds describe state, not a change
                "stats": a.stats,
                "tags": _items(a.tags),
            },
        )
    for r in snapshot.tombstones.values():
        if r.deletion_timestamp is not None and r.deletion_timestamp < now - retention:
            continue  # expired tombstones are dropped, as Delta does
        push(
            "remove",
            {
                "path": r.path,
                "deletionTimestamp": r.deletion_timestamp,
                "dataChange": False,
                "extendedFileMetadata": r.extended_file_metadata,
                "partitionValues": _items(r.partition_values),
                "size": r.size,
            },
        )
    return pa.table({name: pa.array(vals, type=CHECKPOINT_SCHEMA.field(name).type) for name, vals in rows.items()}, schema=CHECKPOINT_SCHEMA)


def write_checkpoint(snapshot: "Snapshot") -> int:
    """Write the checkpoint for ``snapshot.version`` and then ``_last_checkpoint``; return the version."""
    storage = snapshot.storage
    table = checkpoint_rows(snapshot)
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="snappy")
    data = buf.getvalue()
    path = storage.log_file(checkpoint_name(snapshot.version))
    try:
        storage.put_if_absent(path, data)
    except FileExistsError:
        pass  # another writer checkpointed this version; both describe the same state
    hint = {
        "version": snapshot.version,
        "size": table.num_rows,
        "sizeInBytes": len(data),
        "numOfAddFiles": len(snapshot.files),
    }
    if _hint_needs_update(storage, snapshot.log.read_last_checkpoint(), snapshot.version):
        storage.put(storage.log_file(LAST_CHECKPOINT), orjson.dumps(hint))
    return snapshot.version


def _hint_needs_update(storage, current, version: int) -> bool:
    """Whether ``_last_checkpoint`` should now name ``version``: it is missing, unparseable, older, or
    names a newer checkpoint that does not exist (a damaged hint is repaired, a valid newer one kept)."""
    if not isinstance(current, dict):
        return True
    try:
        named = int(current.get("version"))
    except (TypeError, ValueError):
        return True
    if named < version:
        return True
    return named > version and not storage.exists(storage.log_file(checkpoint_name(named)))


def _map(v) -> dict | None:
    return None if v is None else dict(v)


def read_checkpoint(storage, version: int) -> list[Action]:
    """Read the actions of a classic checkpoint; raises CorruptLogError when unreadable."""
    path = storage.log_file(checkpoint_name(version))
    try:
        with storage.open_input(path) as f:
            pf = pq.ParquetFile(f)
            names = set(pf.schema_arrow.names)
            cols = [c for c in ("protocol", "metaData", "txn", "add", "remove") if c in names]
            table = pf.read(columns=cols)
    except FileNotFoundError:
        raise
    except (OSError, pa.ArrowException) as e:
        raise CorruptLogError(f"checkpoint {checkpoint_name(version)} is unreadable ({e})") from None
    if "protocol" not in table.column_names or "metaData" not in table.column_names:
        raise CorruptLogError(f"checkpoint {checkpoint_name(version)} lacks protocol or metaData columns")
    actions: list[Action] = []

    def valid_rows(name: str) -> list[dict]:
        if name not in table.column_names:
            return []
        col = table.column(name)
        return col.filter(pc.is_valid(col)).to_pylist()

    try:
        for d in valid_rows("protocol"):
            actions.append(Protocol.from_json(d))
        for d in valid_rows("metaData"):
            d["configuration"] = _map(d.get("configuration"))
            if d.get("format"):
                d["format"]["options"] = _map(d["format"].get("options"))
            actions.append(Metadata.from_json(d))
        for d in valid_rows("txn"):
            actions.append(Txn.from_json(d))
        for d in valid_rows("add"):
            d["partitionValues"] = _map(d.get("partitionValues"))
            d["tags"] = _map(d.get("tags"))
            actions.append(AddFile.from_json(d))
        for d in valid_rows("remove"):
            d["partitionValues"] = _map(d.get("partitionValues"))
            actions.append(RemoveFile.from_json(d))
        for a in actions:
            if isinstance(a, (AddFile, RemoveFile)) and not isinstance(a.path, str):
                raise TypeError(f"path must be a string, got {a.path!r}")
    except (KeyError, TypeError, ValueError, AttributeError, pa.ArrowException) as e:
        raise CorruptLogError(f"checkpoint {checkpoint_name(version)} holds a malformed action ({e!r})") from None
    return actions

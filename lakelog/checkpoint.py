"""Classic single-file Parquet checkpoints (``%020d.checkpoint.parquet``) and ``_last_checkpoint``."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Protocol as TypingProtocol

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .actions import Action, AddFile, Metadata, Protocol, RemoveFile, Txn, decode_path, decode_paths, now_ms, refuse_deletion_vector
from .errors import CorruptLogError
from .log import LAST_CHECKPOINT, checkpoint_name
from .properties import TableProperties


class TableState(TypingProtocol):
    """What a checkpoint is written from (a ``lakelog.snapshot.Snapshot``, which sits above this module)."""

    storage: object
    log: object
    version: int
    protocol: Protocol
    metadata: Metadata
    file_set: object
    tombstones: dict[str, RemoveFile]
    txns: dict[str, Txn]

    @property
    def num_files(self) -> int: ...

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

def _items(d: dict | None) -> list[tuple] | None:
    return None if d is None else list(d.items())


def _add_rows(adds: list[AddFile]) -> list[dict]:
    return [
        {
            "path": a.path,
            "partitionValues": _items(a.partition_values),
            "size": a.size,
            "modificationTime": a.modification_time,
            "dataChange": False,  # checkpoint adds describe state, not a change
            "stats": a.stats,
            "tags": _items(a.tags),
        }
        for a in adds
    ]


def _as_checkpoint_adds(rows: pa.StructArray) -> pa.StructArray:
    """Checkpoint add rows read back (possibly written by another engine, with more or differently typed
    fields) in the add type lakelog writes, ``dataChange`` false."""
    target = CHECKPOINT_SCHEMA.field("add").type
    n = len(rows)
    children = []
    for f in target:
        if f.name == "dataChange":
            children.append(pa.repeat(pa.scalar(False), n))
        elif rows.type.get_field_index(f.name) >= 0:
            children.append(rows.field(f.name).cast(f.type))
        else:
            children.append(pa.nulls(n, f.type))
    return pa.StructArray.from_arrays(children, fields=list(target))


def checkpoint_rows(snapshot: TableState, now: int | None = None) -> pa.Table:
    """The checkpoint content of ``snapshot`` as an Arrow table with Delta's classic checkpoint schema."""
    now = now_ms() if now is None else now
    retention = TableProperties(snapshot.metadata.configuration).deleted_file_retention_ms
    p, m = snapshot.protocol, snapshot.metadata

    def rows(kind: str, values: list) -> tuple[str, pa.Array]:
        return kind, pa.array(values, CHECKPOINT_SCHEMA.field(kind).type)

    kept = snapshot.file_set.base_rows_kept()
    # One block of rows per action kind, in this order; checkpoint add rows stay Arrow columns.
    blocks = [
        rows(
            "protocol",
            [
                {
                    "minReaderVersion": p.min_reader_version,
                    "minWriterVersion": p.min_writer_version,
                    "readerFeatures": p.reader_features,
                    "writerFeatures": p.writer_features,
                }
            ],
        ),
        rows(
            "metaData",
            [
                {
                    "id": m.id,
                    "name": m.name,
                    "description": m.description,
                    "format": {"provider": m.format_provider, "options": _items(m.format_options)},
                    "schemaString": m.schema_string,
                    "partitionColumns": m.partition_columns,
                    "configuration": _items(m.configuration),
                    "createdTime": m.created_time,
                }
            ],
        ),
        rows("txn", [{"appId": t.app_id, "version": t.version, "lastUpdated": t.last_updated} for t in snapshot.txns.values()]),
        *([("add", _as_checkpoint_adds(kept))] if kept is not None else []),
        rows("add", _add_rows(snapshot.file_set.changed_adds())),
        rows(
            "remove",
            [
                {
                    "path": r.path,
                    "deletionTimestamp": r.deletion_timestamp,
                    "dataChange": False,
                    "extendedFileMetadata": r.extended_file_metadata,
                    "partitionValues": _items(r.partition_values),
                    "size": r.size,
                }
                for r in snapshot.tombstones.values()
                # expired tombstones are dropped, as Delta does
                if r.deletion_timestamp is None or r.deletion_timestamp >= now - retention
            ],
        ),
    ]
    return pa.concat_tables(
        pa.table({name: arr if name == kind else pa.nulls(len(arr), CHECKPOINT_SCHEMA.field(name).type) for name in CHECKPOINT_SCHEMA.names}, schema=CHECKPOINT_SCHEMA)
        for kind, arr in blocks
        if len(arr)
    )


def write_checkpoint(snapshot: TableState) -> int:
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
        "numOfAddFiles": snapshot.num_files,
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


@dataclass
class CheckpointState:
    """A checkpoint as read: its add rows stay Arrow columns (most tables are mostly adds, and most
    operations need only their paths); every other action is a Python object."""

    version: int
    actions: list[Action]  # protocol, metaData, txn and remove actions
    adds: pa.StructArray  # the valid rows of the ``add`` column
    paths: list[str]  # decoded ``add.path`` of each row (validated like every logged path)

    def add_actions(self) -> list[AddFile]:
        return adds_from_arrow(self.adds)


def _child(adds: pa.StructArray, name: str, n: int) -> list:
    if adds.type.get_field_index(name) < 0:
        return [None] * n
    return adds.field(name).to_pylist()


def adds_from_arrow(adds: pa.StructArray) -> list[AddFile]:
    """``AddFile`` objects for checkpoint add rows, built column by column."""
    n = len(adds)
    if n == 0:
        return []
    paths = adds.field("path").to_pylist()
    pvs, sizes, mtimes = _child(adds, "partitionValues", n), _child(adds, "size", n), _child(adds, "modificationTime", n)
    changes, stats, tags = _child(adds, "dataChange", n), _child(adds, "stats", n), _child(adds, "tags", n)
    return [
        AddFile(p, dict(pv) if pv else {}, int(sz or 0), int(mt or 0), True if dc is None else dc, st, None if tg is None else dict(tg))
        for p, pv, sz, mt, dc, st, tg in zip(paths, pvs, sizes, mtimes, changes, stats, tags)
    ]


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
    return pa.StructArray.from_arrays(children, fields=fields) if changed else adds


def read_checkpoint_state(storage, version: int) -> CheckpointState:
    """Read a classic checkpoint; raises CorruptLogError when it is unreadable or holds a malformed action,
    UnsupportedFeatureError when a file has a deletion vector."""
    name = checkpoint_name(version)
    path = storage.log_file(name)
    try:
        with storage.open_input(path) as f:
            pf = pq.ParquetFile(f)
            names = set(pf.schema_arrow.names)
            cols = [c for c in ("protocol", "metaData", "txn", "add", "remove") if c in names]
            table = pf.read(columns=cols)
    except FileNotFoundError:
        raise
    except (OSError, pa.ArrowException) as e:
        raise CorruptLogError(f"checkpoint {name} is unreadable ({e})") from None
    if "protocol" not in table.column_names or "metaData" not in table.column_names:
        raise CorruptLogError(f"checkpoint {name} lacks protocol or metaData columns")

    def valid(col_name: str):
        # Filtered before combining: combining first copied every row of the add column once more (~230 MiB at 1M files).
        col = table.column(col_name)
        return col.filter(pc.is_valid(col)).combine_chunks()

    actions: list[Action] = []
    try:
        for d in valid("protocol").to_pylist():
            actions.append(Protocol.from_json(d))
        for d in valid("metaData").to_pylist():
            d["configuration"] = _map(d.get("configuration"))
            if d.get("format"):
                d["format"]["options"] = _map(d["format"].get("options"))
            actions.append(Metadata.from_json(d))
        if "txn" in table.column_names:
            actions.extend(Txn.from_json(d) for d in valid("txn").to_pylist())
        if "remove" in table.column_names:
            for d in valid("remove").to_pylist():
                d["partitionValues"] = _map(d.get("partitionValues"))
                if not isinstance(d.get("path"), str):
                    raise TypeError(f"remove path must be a string, got {d.get('path')!r}")
                actions.append(RemoveFile.from_json(d))
        if "add" in table.column_names:
            adds = valid("add")
            if not isinstance(adds, pa.StructArray) or adds.type.get_field_index("path") < 0:
                raise TypeError(f"add column has type {adds.type}, expected a struct with a path")
            adds = _typed_adds(adds)
            if not pa.types.is_string(adds.type.field("path").type):
                raise TypeError(f"add column has type {adds.type}, expected a struct with a string path")
            if adds.field("path").null_count:
                raise TypeError("add path must be a string, got None")
        else:
            adds = pa.array([], CHECKPOINT_SCHEMA.field("add").type)
    except (KeyError, TypeError, ValueError, AttributeError, pa.ArrowException) as e:
        raise CorruptLogError(f"checkpoint {name} holds a malformed action ({e!r})") from None
    if adds.type.get_field_index("deletionVector") >= 0:
        dv = adds.field("deletionVector")
        if dv.null_count < len(dv):
            refuse_deletion_vector(adds.field("path")[pc.index(pc.is_valid(dv), True).as_py()].as_py())
    paths = decode_paths(adds.field("path"))
    # A checkpoint names each live file once and never as both live and removed (the protocol's
    # primary-key rule). Engines disagree about such a checkpoint (delta-rs keeps both rows, or the
    # file), so it is malformed: readers fall back to an older checkpoint or the JSON commits.
    if len(set(paths)) != len(paths):
        seen: set[str] = set()
        dup = next(p for p in paths if p in seen or seen.add(p))
        raise CorruptLogError(f"checkpoint {name} names {dup!r} in two add rows; a checkpoint lists each file once")
    removed = {decode_path(a.path) for a in actions if type(a) is RemoveFile}
    both = removed.intersection(paths)
    if both:
        raise CorruptLogError(f"checkpoint {name} names {sorted(both)[0]!r} in both an add and a remove row; a file is live or removed, not both")
    return CheckpointState(version, actions, adds, paths)


def read_checkpoint(storage, version: int) -> list[Action]:
    """Read the actions of a classic checkpoint; raises CorruptLogError when unreadable."""
    state = read_checkpoint_state(storage, version)
    return state.actions + state.add_actions()

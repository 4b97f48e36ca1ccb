"""Checkpoints: their content (Delta's checkpoint schema), reading every kind, writing classic or V2.

Reading (``read_checkpoint_state``) accepts every checkpoint the protocol defines: a classic
``n.checkpoint.parquet`` (V1 spec, or V2 spec with a ``checkpointMetadata`` row and sidecars), a complete
multi-part set ``n.checkpoint.o.p.parquet`` (V1 spec), and a UUID-named ``n.checkpoint.<uuid>.json|parquet``
(V2 spec). Anything malformed (a missing sidecar or part, a V2 checkpoint without exactly one
``checkpointMetadata`` of its version, a V1-only name holding V2 actions, a file named twice) is a
``CorruptLogError``: readers then fall back to an older checkpoint or to the JSON commits.

Writing (``write_checkpoint``): a classic single-file V1 checkpoint by default; with
``delta.checkpointPolicy=v2`` (on a table with the ``v2Checkpoint`` feature) a UUID-named V2 Parquet
checkpoint whose file actions go to sidecars, written batch by batch (see ``lakelog.checkpoint_v2``).
Then ``_last_checkpoint`` (``lakelog.last_checkpoint``).
"""

from __future__ import annotations

import io
import uuid
from dataclasses import dataclass, field
from typing import Iterator
from typing import Protocol as TypingProtocol

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .actions import (
    CommitInfo,
    Action,
    AddFile,
    DeletionVectorDescriptor,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    Txn,
    decode_path,
    decode_paths,
    dv_id,
    now_ms,
    parse_actions,
)
from . import checkpoint_v2
from .checkpoint_v2 import CHECKPOINT_METADATA_TYPE, SIDECAR_TYPE, CheckpointMetadata, Sidecar, SidecarWriter, read_sidecars
from .errors import CorruptLogError
from .last_checkpoint import hint_needs_update, read_hint, write_hint
from .log import CheckpointFiles, checkpoint_name, uuid_checkpoint_name
from .properties import TableProperties
from .storage import FileInfo


class TableState(TypingProtocol):
    """What a checkpoint is written from (a ``lakelog.snapshot.Snapshot``, which sits above this module)."""

    storage: object
    log: object
    version: int
    protocol: Protocol
    metadata: Metadata
    file_set: object
    tombstones: dict[tuple[str, str | None], RemoveFile]  # by logical file key (path, DV id)
    txns: dict[str, Txn]
    domains: dict[str, DomainMetadata]

    @property
    def num_files(self) -> int: ...

_STR_MAP = pa.map_(pa.string(), pa.string())
# The deletionVector struct of checkpoint add/remove rows, as Spark writes it.
DV_TYPE = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
        ("maxRowIndex", pa.int64()),
    ]
)
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
                    ("deletionVector", DV_TYPE),
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
                    ("deletionVector", DV_TYPE),
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
        ("domainMetadata", pa.struct([("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())])),
    ]
)
# The columns of non-file actions, and those only V2 spec checkpoints have.
NON_FILE_COLUMNS = ("protocol", "metaData", "txn", "domainMetadata")
V2_COLUMNS = ("checkpointMetadata", "sidecar")

def _items(d: dict | None) -> list[tuple] | None:
    return None if d is None else list(d.items())


def _dv_row(dv: DeletionVectorDescriptor | None) -> dict | None:
    if dv is None:
        return None
    return {
        "storageType": dv.storage_type,
        "pathOrInlineDv": dv.path_or_inline_dv,
        "offset": dv.offset,
        "sizeInBytes": dv.size_in_bytes,
        "cardinality": dv.cardinality,
        "maxRowIndex": dv.max_row_index,
    }


def parse_dv(d: dict | None) -> DeletionVectorDescriptor | None:
    """A checkpoint row's ``deletionVector`` struct (None, or a struct of nulls: no deletion vector)."""
    if not d or d.get("storageType") is None:
        return None
    return DeletionVectorDescriptor.from_json(d)


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
            "deletionVector": _dv_row(a.deletion_vector),
        }
        for a in adds
    ]


def _rows(kind: str, values: list) -> pa.Array:
    return pa.array(values, CHECKPOINT_SCHEMA.field(kind).type)


def _non_file_blocks(snapshot: TableState) -> list[tuple[str, pa.Array]]:
    """protocol, metaData, txn and domainMetadata rows (domain tombstones are not kept, as the protocol says)."""
    p, m = snapshot.protocol, snapshot.metadata
    return [
        (
            "protocol",
            _rows(
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
        ),
        (
            "metaData",
            _rows(
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
        ),
        ("txn", _rows("txn", [{"appId": t.app_id, "version": t.version, "lastUpdated": t.last_updated} for t in snapshot.txns.values()])),
        (
            "domainMetadata",
            _rows(
                "domainMetadata",
                [{"domain": d.domain, "configuration": d.configuration, "removed": False} for d in snapshot.domains.values() if not d.removed],
            ),
        ),
    ]


def _file_blocks(snapshot: TableState, now: int, batch_rows: int | None = None) -> Iterator[tuple[str, pa.Array]]:
    """The file actions in blocks of at most ``batch_rows`` rows (None: one block per kind): ``("base", rows)``
    for add rows of the checkpoint the snapshot started from that are still live (as read: any fields),
    ``("add", rows)`` for the other live files, ``("remove", rows)`` for unexpired tombstones."""
    retention = TableProperties(snapshot.metadata.configuration).deleted_file_retention_ms

    def chunks(items: list) -> Iterator[list]:
        step = batch_rows or max(len(items), 1)
        for i in range(0, len(items), step):
            yield items[i : i + step]

    kept = snapshot.file_set.base_rows_kept()
    if kept is not None and len(kept):
        step = batch_rows or len(kept)
        for i in range(0, len(kept), step):
            yield "base", kept.slice(i, step)
    for chunk in chunks(snapshot.file_set.changed_adds()):
        yield "add", _rows("add", _add_rows(chunk))
    # expired tombstones are dropped, as Delta does
    removes = [r for r in snapshot.tombstones.values() if r.deletion_timestamp is None or r.deletion_timestamp >= now - retention]
    for chunk in chunks(removes):
        yield "remove", _rows(
            "remove",
            [
                {
                    "path": r.path,
                    "deletionTimestamp": r.deletion_timestamp,
                    "dataChange": False,
                    "extendedFileMetadata": r.extended_file_metadata,
                    "partitionValues": _items(r.partition_values),
                    "size": r.size,
                    "deletionVector": _dv_row(r.deletion_vector),
                }
                for r in chunk
            ],
        )


def _one_kind_table(schema: pa.Schema, kind: str, arr: pa.Array) -> pa.Table:
    """A table of ``schema`` whose column ``kind`` holds ``arr`` and every other column nulls."""
    return pa.table({name: arr if name == kind else pa.nulls(len(arr), schema.field(name).type) for name in schema.names}, schema=schema)


def checkpoint_rows(snapshot: TableState, now: int | None = None) -> pa.Table:
    """The checkpoint content of ``snapshot`` as an Arrow table with Delta's classic checkpoint schema."""
    now = now_ms() if now is None else now
    # One block of rows per action kind, in this order; checkpoint add rows stay Arrow columns.
    blocks = _non_file_blocks(snapshot)
    for kind, arr in _file_blocks(snapshot, now):
        # checkpoint add rows read back (maybe another engine's, with more or other fields) in lakelog's add type
        blocks.append(("add", _conform(arr, CHECKPOINT_SCHEMA.field("add").type)) if kind == "base" else (kind, arr))
    # The domainMetadata column only when there are domains: the checkpoints of other tables stay as before.
    schema = CHECKPOINT_SCHEMA if any(not d.removed for d in snapshot.domains.values()) else CHECKPOINT_SCHEMA.remove(CHECKPOINT_SCHEMA.get_field_index("domainMetadata"))
    return pa.concat_tables(_one_kind_table(schema, kind, arr) for kind, arr in blocks if len(arr) and kind in schema.names)


def write_checkpoint(snapshot: TableState) -> int:
    """Write the checkpoint for ``snapshot.version`` and then ``_last_checkpoint``; return the version.

    A V2 checkpoint with sidecars when the table asks for one (``delta.checkpointPolicy=v2`` and the
    ``v2Checkpoint`` feature), a classic single-file checkpoint otherwise."""
    storage = snapshot.storage
    if uses_v2_checkpoints(snapshot.protocol, snapshot.metadata):
        hint = _write_v2(snapshot)
    else:
        hint = _write_classic(snapshot)
    if hint_needs_update(read_hint(storage), snapshot.version, lambda h: _hint_target_exists(storage, h)):
        write_hint(storage, hint)
    return snapshot.version


def uses_v2_checkpoints(protocol: Protocol, metadata: Metadata) -> bool:
    """Whether writers make V2 checkpoints for this table (``delta.checkpointPolicy=v2`` with the feature)."""
    return "v2Checkpoint" in (protocol.writer_features or []) and TableProperties(metadata.configuration).checkpoint_policy == "v2"


def _write_classic(snapshot: TableState) -> dict:
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
    return {"version": snapshot.version, "size": table.num_rows, "sizeInBytes": len(data), "numOfAddFiles": snapshot.num_files}


def _conform(rows: pa.StructArray, target: pa.StructType) -> pa.StructArray:
    """``rows`` with exactly the fields of ``target`` (cast, or null when absent), ``dataChange`` false."""
    n = len(rows)
    children = []
    for f in target:
        if f.name == "dataChange":
            children.append(pa.repeat(pa.scalar(False), n))
        elif rows.type.get_field_index(f.name) >= 0:
            child = rows.field(f.name)
            children.append(child if child.type == f.type else child.cast(f.type))
        else:
            children.append(pa.nulls(n, f.type))
    return pa.StructArray.from_arrays(children, fields=list(target), mask=pc.invert(rows.is_valid()) if rows.null_count else None)


def _v2_add_type(kept: pa.StructArray | None) -> pa.StructType:
    """The add type of V2 sidecars: the classic checkpoint's add fields, then any other field the rows of
    the previous checkpoint carry (written by another engine), unchanged."""
    base = CHECKPOINT_SCHEMA.field("add").type
    if kept is None:
        return base
    extra = [kept.type.field(i) for i in range(kept.type.num_fields) if base.get_field_index(kept.type.field(i).name) < 0]
    return pa.struct(list(base) + extra)


def _write_v2(snapshot: TableState, max_sidecar_actions: int | None = None) -> dict:
    """A UUID-named V2 Parquet checkpoint: non-file actions in the checkpoint file, file actions in sidecars
    written one batch (``SIDECAR_ROW_GROUP_ROWS`` actions) at a time; then the checkpoint file, which
    makes the sidecars part of the table. Returns its ``_last_checkpoint`` hint."""
    storage, version, now = snapshot.storage, snapshot.version, now_ms()
    kept = snapshot.file_set.base_rows_kept()
    add_type = _v2_add_type(kept)
    remove_type = CHECKPOINT_SCHEMA.field("remove").type
    sidecar_schema = pa.schema([("add", add_type), ("remove", remove_type)])
    writer = SidecarWriter(storage, version, sidecar_schema, **({"max_actions": max_sidecar_actions} if max_sidecar_actions else {}))
    try:
        num_adds = 0
        for kind, arr in _file_blocks(snapshot, now, checkpoint_v2.SIDECAR_ROW_GROUP_ROWS):
            if kind == "remove":
                writer.write(_one_kind_table(sidecar_schema, "remove", arr))
            else:
                num_adds += len(arr)
                writer.write(_one_kind_table(sidecar_schema, "add", _conform(arr, add_type)))
        sidecars = writer.close()
        sidecar_bytes = sum(s.size_in_bytes for s in sidecars)
        meta = CheckpointMetadata(
            version,
            {"sidecarNumActions": str(writer.num_actions), "sidecarSizeInBytes": str(sidecar_bytes), "numOfAddFiles": str(num_adds)},
        )
        schema = pa.schema(
            [CHECKPOINT_SCHEMA.field(c) for c in NON_FILE_COLUMNS]
            + [("checkpointMetadata", CHECKPOINT_METADATA_TYPE), ("sidecar", SIDECAR_TYPE), ("add", add_type), ("remove", remove_type)]
        )
        blocks = [("checkpointMetadata", pa.array([{"version": version, "tags": _items(meta.tags)}], CHECKPOINT_METADATA_TYPE))]
        blocks += _non_file_blocks(snapshot)
        blocks.append(
            (
                "sidecar",
                pa.array(
                    [{"path": s.path, "sizeInBytes": s.size_in_bytes, "modificationTime": s.modification_time, "tags": _items(s.tags)} for s in sidecars],
                    SIDECAR_TYPE,
                ),
            )
        )
        table = pa.concat_tables(_one_kind_table(schema, kind, arr) for kind, arr in blocks if len(arr))
        buf = io.BytesIO()
        pq.write_table(table, buf, compression="snappy")
        data = buf.getvalue()
        name = uuid_checkpoint_name(version, str(uuid.uuid4()))
        storage.put_if_absent(storage.log_file(name), data)
    except BaseException:
        writer.abort()
        raise
    non_file = [
        {k: v for k, v in a.to_json().items()}
        for a in [meta, snapshot.protocol, snapshot.metadata, *snapshot.txns.values(), *(d for d in snapshot.domains.values() if not d.removed)]
    ]
    v2: dict = {"path": name, "sizeInBytes": len(data), "modificationTime": now}
    if len(non_file) <= _HINT_MAX_ACTIONS and len(sidecars) <= _HINT_MAX_ACTIONS:
        v2["nonFileActions"] = non_file
        v2["sidecarFiles"] = [s.to_json()["sidecar"] for s in sidecars]
    return {
        "version": version,
        "size": table.num_rows + writer.num_actions,
        "sizeInBytes": len(data) + sidecar_bytes,
        "numOfAddFiles": num_adds,
        "v2Checkpoint": v2,
    }


_HINT_MAX_ACTIONS = 100  # a hint embeds the V2 checkpoint's actions only while they stay small


def _hint_target_exists(storage, hint: dict) -> bool:
    """Whether the checkpoint a ``_last_checkpoint`` hint names exists."""
    v2 = hint.get("v2Checkpoint")
    if isinstance(v2, dict) and isinstance(v2.get("path"), str):
        return storage.exists(storage.log_file(v2["path"].rsplit("/", 1)[-1]))
    parts = hint.get("parts")
    if isinstance(parts, int) and not isinstance(parts, bool) and parts > 1:
        return storage.exists(storage.log_file(f"{hint['version']:020d}.checkpoint.{parts:010d}.{parts:010d}.parquet"))
    return storage.exists(storage.log_file(checkpoint_name(hint["version"])))



def _map(v) -> dict | None:
    return None if v is None else dict(v)


@dataclass
class CheckpointState:
    """A checkpoint as read: its add rows stay Arrow columns (most tables are mostly adds, and most
    operations need only their paths); every other action is a Python object."""

    version: int
    actions: list[Action]  # protocol, metaData, txn, domainMetadata and remove actions
    adds: pa.StructArray  # the valid rows of the ``add`` column (of the sidecars too)
    paths: list[str]  # decoded ``add.path`` of each row (validated like every logged path)
    sidecars: list[str] = field(default_factory=list)  # file names in _delta_log/_sidecars (V2 spec)
    v2: bool = False  # V2 spec (has a checkpointMetadata action)
    dv_ids: list[str | None] | None = None  # deletionVector.uniqueId of each row; None: no row has one
    _index: dict[str, int] | None = None
    _parsed_stats: dict[str, pa.Table] = field(default_factory=dict)  # by the stats fields parsed (lakelog.pruning)

    def add_actions(self) -> list[AddFile]:
        return adds_from_arrow(self.adds)

    def rows_by_path(self) -> dict[str, int]:
        """Decoded path -> row of ``adds`` (built on first use)."""
        if self._index is None:
            self._index = {p: i for i, p in enumerate(self.paths)}
        return self._index

    def dv_id(self, path: str) -> str | None:
        """The deletion vector id of the add row of ``path`` (which must be one of ``paths``)."""
        if self.dv_ids is None:
            return None
        if self._index is None:
            self._index = {p: i for i, p in enumerate(self.paths)}
        return self.dv_ids[self._index[path]]


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
    dvs = _child(adds, "deletionVector", n) if _has_dvs(adds) else [None] * n
    return [
        AddFile(p, dict(pv) if pv else {}, int(sz or 0), int(mt or 0), True if dc is None else dc, st, None if tg is None else dict(tg), parse_dv(dv))
        for p, pv, sz, mt, dc, st, tg, dv in zip(paths, pvs, sizes, mtimes, changes, stats, tags, dvs)
    ]


def _has_dvs(adds: pa.StructArray) -> bool:
    if adds.type.get_field_index("deletionVector") < 0:
        return False
    dv = adds.field("deletionVector")
    if dv.null_count == len(dv) or not pa.types.is_struct(dv.type) or dv.type.get_field_index("storageType") < 0:
        return False
    return dv.field("storageType").null_count < len(dv)


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


def _read_parquet(storage, info: FileInfo, name: str, columns: tuple[str, ...]) -> pa.Table:
    try:
        with storage.open_input(info.path) as f:
            pf = pq.ParquetFile(f)
            names = set(pf.schema_arrow.names)
            return pf.read(columns=[c for c in columns if c in names])
    except FileNotFoundError:
        raise
    except (OSError, pa.ArrowException) as e:
        raise CorruptLogError(f"checkpoint {name} is unreadable ({e})") from None


def _valid(table: pa.Table, col_name: str):
    # Filtered before combining: combining first copied every row of the add column once more (~230 MiB at 1M files).
    col = table.column(col_name)
    return col.filter(pc.is_valid(col)).combine_chunks()


def _parse_table(table: pa.Table, name: str, actions: list, add_arrays: list) -> tuple[list[CheckpointMetadata], list[Sidecar]]:
    """Append the actions of a checkpoint (or sidecar) table to ``actions`` and its valid add rows to
    ``add_arrays``; return its checkpointMetadata and sidecar actions."""
    metas: list[CheckpointMetadata] = []
    sidecars: list[Sidecar] = []
    cols = table.column_names
    try:
        if "protocol" in cols:
            for d in _valid(table, "protocol").to_pylist():
                actions.append(Protocol.from_json(d))
        if "metaData" in cols:
            for d in _valid(table, "metaData").to_pylist():
                d["configuration"] = _map(d.get("configuration"))
                if d.get("format"):
                    d["format"]["options"] = _map(d["format"].get("options"))
                actions.append(Metadata.from_json(d))
        if "txn" in cols:
            actions.extend(Txn.from_json(d) for d in _valid(table, "txn").to_pylist())
        if "domainMetadata" in cols:
            actions.extend(DomainMetadata.from_json(d) for d in _valid(table, "domainMetadata").to_pylist())
        if "checkpointMetadata" in cols:
            for d in _valid(table, "checkpointMetadata").to_pylist():
                d["tags"] = _map(d.get("tags"))
                metas.append(CheckpointMetadata.from_json(d))
        if "sidecar" in cols:
            for d in _valid(table, "sidecar").to_pylist():
                d["tags"] = _map(d.get("tags"))
                sidecars.append(Sidecar.from_json(d))
        if "remove" in cols:
            for d in _valid(table, "remove").to_pylist():
                d["partitionValues"] = _map(d.get("partitionValues"))
                if not isinstance(d.get("path"), str):
                    raise TypeError(f"remove path must be a string, got {d.get('path')!r}")
                actions.append(RemoveFile.from_json(d))
        if "add" in cols:
            adds = _valid(table, "add")
            if not isinstance(adds, pa.StructArray) or adds.type.get_field_index("path") < 0:
                raise TypeError(f"add column has type {adds.type}, expected a struct with a path")
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


def _union(arrays: list[pa.StructArray], name: str) -> pa.StructArray:
    """One array of add rows from several pieces (parts, sidecars), whose fields may differ."""
    if not arrays:
        return pa.array([], CHECKPOINT_SCHEMA.field("add").type)
    if len(arrays) == 1:
        return arrays[0]
    try:
        return pa.concat_tables([pa.table({"add": a}) for a in arrays], promote_options="permissive").column("add").combine_chunks()
    except pa.ArrowException as e:
        raise CorruptLogError(f"checkpoint {name} holds add rows of incompatible types ({e})") from None


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
    if cp.fmt == "json":
        metas, sidecars = _parse_json(storage.read(cp.files[0].path), name, actions, add_arrays)
    else:
        columns = NON_FILE_COLUMNS + V2_COLUMNS + (("add", "remove") if file_actions else ())
        tables = [_read_parquet(storage, f, name, columns) for f in cp.files]
        try:
            table = tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="permissive")
        except pa.ArrowException as e:
            raise CorruptLogError(f"checkpoint {name} has parts of incompatible schemas ({e})") from None
        if "protocol" not in table.column_names or "metaData" not in table.column_names:
            raise CorruptLogError(f"checkpoint {name} lacks protocol or metaData columns")
        metas, sidecars = _parse_table(table, name, actions, add_arrays)
    _check_spec(cp, metas, sidecars)
    if not file_actions:
        actions = [a for a in actions if type(a) is not RemoveFile]
        add_arrays = []
    elif sidecars:
        for t in read_sidecars(storage, sidecars, name):
            _parse_table(t.select([c for c in t.column_names if c in ("add", "remove")]), name, actions, add_arrays)
    adds = _union(add_arrays, name)
    dv_ids = None
    if _has_dvs(adds):
        try:
            dv_ids = [None if (d := parse_dv(row)) is None else d.unique_id for row in adds.field("deletionVector").to_pylist()]
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptLogError(f"checkpoint {name} holds a malformed deletionVector ({e!r})") from None
    paths = decode_paths(adds.field("path"))
    # A checkpoint names each live file once and never as both live and removed (the protocol's
    # primary-key rule). Engines disagree about such a checkpoint (delta-rs keeps both rows, or the
    # file), so it is malformed: readers fall back to an older checkpoint or the JSON commits.
    if len(set(paths)) != len(paths):
        seen: set[str] = set()
        dup = next(p for p in paths if p in seen or seen.add(p))
        raise CorruptLogError(f"checkpoint {name} names {dup!r} in two add rows; a checkpoint lists each file once")
    # A checkpoint may hold a remove of a file's older (path, deletion vector) next to the add of its current one.
    removed = {(decode_path(a.path), dv_id(a)) for a in actions if type(a) is RemoveFile}
    live = zip(paths, dv_ids) if dv_ids is not None else ((p, None) for p in paths)
    both = removed.intersection(live)
    if both:
        raise CorruptLogError(f"checkpoint {name} names {sorted(both)[0][0]!r} in both an add and a remove row; a file is live or removed, not both")
    return CheckpointState(cp.version, actions, adds, paths, [s.name for s in sidecars], bool(metas), dv_ids)


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
        table = _read_parquet(storage, cp.files[0], cp.name, V2_COLUMNS)
        metas, sidecars = _parse_table(table, cp.name, [], [])
    _check_spec(cp, metas, sidecars)
    return [s.name for s in sidecars]

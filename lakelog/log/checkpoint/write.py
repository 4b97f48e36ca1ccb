"""Writing checkpoints: a classic single-file V1 checkpoint by default; with ``delta.checkpointPolicy=v2``
(on a table with the ``v2Checkpoint`` feature) a UUID-named V2 Parquet checkpoint whose file actions go to
sidecars, written batch by batch (``lakelog.log.checkpoint.v2``). Then ``_last_checkpoint`` (``lakelog.log.last_checkpoint``)."""

from __future__ import annotations

import io
import uuid
from itertools import accumulate, chain, repeat
from operator import countOf, is_
from typing import Iterator
from typing import Protocol as TypingProtocol

import orjson
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ...actions import DomainMetadata, Metadata, Protocol, RemoveFile, Txn, now_ms, stated_in_commit_timestamp
from . import v2 as checkpoint_v2
from .v2 import CHECKPOINT_METADATA_TYPE, SIDECAR_TYPE, CheckpointMetadata, SidecarWriter
from ..last_checkpoint import hint_needs_update, read_hint, write_hint
from ..delta_log import DeltaLog, checkpoint_name, uuid_checkpoint_name
from ..commit_columns import OPTIONAL_FIELDS
from ...table_features.properties import TableProperties
from ...schema import arrow_values
from ...table_features.registry import ict_enabled
from ..checksum import checksum_name
from .schema import _STR_MAP, CHECKPOINT_SCHEMA, DV_TYPE, NON_FILE_COLUMNS, _conform, _dv_row, _items, _rows


class TableState(TypingProtocol):
    """What a checkpoint is written from (a ``lakelog.log.snapshot.Snapshot``, which sits above this module)."""

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

    @property
    def files(self) -> dict: ...


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
    for chunk in kept.chunks if kept is not None else ():
        step = batch_rows or len(kept)
        for i in range(0, len(chunk), step):
            yield "base", chunk.slice(i, step)
    for arr in _changed_add_batches(snapshot.file_set, batch_rows):
        yield "add", arr
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
                    "baseRowId": r.base_row_id,
                    "defaultRowCommitVersion": r.default_row_commit_version,
                }
                for r in chunk
            ],
        )


_ADD_FIELDS = ("path", "partition_values", "size", "modification_time", "stats", "tags")


def _changed_add_batches(file_set, batch_rows: int | None) -> Iterator[pa.StructArray]:
    """The live adds of the JSON commits after the checkpoint as checkpoint add rows, ``batch_rows`` at a
    time (None: all at once), built from the replayed add columns (``lakelog.log.commit_columns``)."""
    step = batch_rows or 2**62
    cols: dict[str, list] = {f: [] for f in _ADD_FIELDS + OPTIONAL_FIELDS}
    for block, rows in file_set.changed_add_columns():
        for k in range(0, len(rows), step):
            part = rows[k : k + step]
            whole = len(part) == len(block)
            for f in _ADD_FIELDS + OPTIONAL_FIELDS:
                col = getattr(block, f)
                if col is None:  # (an optional field no row of the block has)
                    cols[f].extend(repeat(None, len(part)))
                else:
                    cols[f].extend(col if whole else [col[i] for i in part])
            if len(cols["path"]) >= step:  # exactly ``step`` rows: one row group each
                yield _add_array({f: c[:step] for f, c in cols.items()})
                cols = {f: c[step:] for f, c in cols.items()}
    if cols["path"]:
        yield _add_array(cols)


def _optional(values: list, type_: pa.DataType, convert=None) -> pa.Array:
    n = len(values)
    if values.count(None) == n:
        return pa.nulls(n, type_)
    return arrow_values.array(values if convert is None else [convert(v) for v in values], type_)


def _str_maps(maps: list[dict]) -> pa.MapArray:
    """Partition-value dicts as a map column, built from their flattened keys and values (faster than
    converting each dict)."""
    mask = None
    if countOf(maps, None):
        mask = arrow_values.from_numpy(np.fromiter(map(is_, maps, repeat(None)), bool, len(maps)))
        maps = [{} if m is None else m for m in maps]
    offsets = arrow_values.array(list(accumulate(map(len, maps), initial=0)), pa.int32())
    keys = arrow_values.array(list(chain.from_iterable(maps)), pa.string())
    values = arrow_values.array(list(chain.from_iterable(map(dict.values, maps))), pa.string())
    return pa.MapArray.from_arrays(offsets, keys, values, type=_STR_MAP, mask=mask)


def _add_array(cols: dict[str, list]) -> pa.StructArray:
    add_type = CHECKPOINT_SCHEMA.field("add").type
    n = len(cols["path"])
    children = [
        arrow_values.array(cols["path"], pa.string()),
        _str_maps(cols["partition_values"]),
        arrow_values.array(cols["size"], pa.int64()),
        arrow_values.array(cols["modification_time"], pa.int64()),
        pa.repeat(arrow_values.scalar(False, pa.bool_()), n),  # checkpoint adds describe state, not a change
        arrow_values.array(cols["stats"], pa.string()),
        _optional(cols["tags"], _STR_MAP),
        _optional(cols["deletion_vector"], DV_TYPE, _dv_row),
        _optional(cols["base_row_id"], pa.int64()),
        _optional(cols["default_row_commit_version"], pa.int64()),
        _optional(cols["clustering_provider"], pa.string()),
    ]
    return pa.StructArray.from_arrays(children, fields=list(add_type))


def _one_kind_table(schema: pa.Schema, kind: str, arr: pa.Array) -> pa.Table:
    """A table of ``schema`` whose column ``kind`` holds ``arr`` and every other column nulls."""
    return pa.table({name: arr if name == kind else pa.nulls(len(arr), schema.field(name).type) for name in schema.names}, schema=schema)


def _classic_schema(snapshot: TableState) -> pa.Schema:
    # The domainMetadata column only when there are domains: the checkpoints of other tables stay as before.
    if any(not d.removed for d in snapshot.domains.values()):
        return CHECKPOINT_SCHEMA
    return CHECKPOINT_SCHEMA.remove(CHECKPOINT_SCHEMA.get_field_index("domainMetadata"))


def _classic_tables(snapshot: TableState, now: int, batch_rows: int | None) -> Iterator[pa.Table]:
    """The classic checkpoint's rows as tables of ``_classic_schema``: the non-file actions in one, then
    the file actions, at most ``batch_rows`` rows per table (None: one per kind); checkpoint add rows stay
    Arrow columns."""
    schema = _classic_schema(snapshot)
    head = [_one_kind_table(schema, kind, arr) for kind, arr in _non_file_blocks(snapshot) if len(arr) and kind in schema.names]
    yield pa.concat_tables(head)
    for kind, arr in _file_blocks(snapshot, now, batch_rows):
        if len(arr):
            # checkpoint add rows read back (maybe another engine's, with more or other fields) in lakelog's add type
            yield _one_kind_table(schema, "add", _conform(arr, CHECKPOINT_SCHEMA.field("add").type)) if kind == "base" else _one_kind_table(schema, kind, arr)


def checkpoint_rows(snapshot: TableState, now: int | None = None) -> pa.Table:
    """The checkpoint content of ``snapshot`` as an Arrow table with Delta's classic checkpoint schema."""
    now = now_ms() if now is None else now
    return pa.concat_tables(_classic_tables(snapshot, now, None))


CLASSIC_ROW_GROUP_ROWS = 131_072  # file actions per row group of a classic checkpoint (and per batch held in memory)


def write_checkpoint(snapshot: TableState) -> int:
    """Write the checkpoint for ``snapshot.version``, the version's checksum file (``lakelog.log.checksum``)
    and then ``_last_checkpoint``; return the version.

    A V2 checkpoint with sidecars when the table asks for one (``delta.checkpointPolicy=v2`` and the
    ``v2Checkpoint`` feature), a classic single-file checkpoint otherwise."""
    storage = snapshot.storage
    if uses_v2_checkpoints(snapshot.protocol, snapshot.metadata):
        hint = _write_v2(snapshot)
    else:
        hint = _write_classic(snapshot)
    _write_checksum(snapshot)
    if hint_needs_update(read_hint(storage), snapshot.version, lambda h: _hint_target_exists(storage, h)):
        write_hint(storage, hint)
    return snapshot.version


CHECKSUM_ALL_FILES_MAX = 50  # live files up to which a checksum lists them (Delta's allFilesInCrc.thresholdNumFiles)


def _write_checksum(snapshot: TableState) -> None:
    """The version checksum file of ``snapshot``'s version (``lakelog.log.checksum``) unless one exists
    (the protocol forbids overwriting one). With ``allFiles`` on tables of up to ``CHECKSUM_ALL_FILES_MAX``
    files, as Delta writes them, and on tables with in-commit timestamps the version's timestamp (none is
    written when its commit cannot give it)."""
    body: dict = {
        "tableSizeBytes": snapshot.file_set.total_size(),
        "numFiles": snapshot.num_files,
        "numMetadata": 1,
        "numProtocol": 1,
        "metadata": snapshot.metadata.to_json()["metaData"],
        "protocol": snapshot.protocol.to_json()["protocol"],
    }
    if snapshot.num_files <= CHECKSUM_ALL_FILES_MAX:
        body["allFiles"] = [a.to_json()["add"] for a in snapshot.files.values()]
    if ict_enabled(snapshot.protocol, snapshot.metadata):
        try:
            commit = DeltaLog(snapshot.storage).read_commits([snapshot.version])[snapshot.version]
        except (FileNotFoundError, KeyError):
            return  # (the commit file was cleaned up)
        ts = stated_in_commit_timestamp(commit)
        if ts is None:
            return  # (a commit without its timestamp: lakelog.check reports it)
        body["inCommitTimestampOpt"] = ts
    try:
        snapshot.storage.put_if_absent(snapshot.storage.log_file(checksum_name(snapshot.version)), orjson.dumps(body))
    except FileExistsError:
        pass


def uses_v2_checkpoints(protocol: Protocol, metadata: Metadata) -> bool:
    """Whether writers make V2 checkpoints for this table (``delta.checkpointPolicy=v2`` with the feature)."""
    return "v2Checkpoint" in (protocol.writer_features or []) and TableProperties(metadata.configuration).checkpoint_policy == "v2"


def _write_classic(snapshot: TableState) -> dict:
    """Write the classic checkpoint row group by row group (``CLASSIC_ROW_GROUP_ROWS`` file actions each):
    only one batch of rows is built at a time, next to the Parquet bytes written so far."""
    storage = snapshot.storage
    buf = io.BytesIO()
    rows = 0
    with pq.ParquetWriter(buf, _classic_schema(snapshot), compression="snappy") as writer:
        # Small tables (the non-file actions, a few removes) share a row group: readers pay per row group.
        held: list[pa.Table] = []
        held_rows = 0
        for table in _classic_tables(snapshot, now_ms(), CLASSIC_ROW_GROUP_ROWS):
            if held and held_rows + table.num_rows > CLASSIC_ROW_GROUP_ROWS:
                writer.write_table(pa.concat_tables(held), row_group_size=CLASSIC_ROW_GROUP_ROWS)
                held, held_rows = [], 0
            held.append(table)
            held_rows += table.num_rows
            rows += table.num_rows
        if held:
            writer.write_table(pa.concat_tables(held), row_group_size=CLASSIC_ROW_GROUP_ROWS)
        del held
    data = buf.getvalue()
    del buf
    path = storage.log_file(checkpoint_name(snapshot.version))
    try:
        storage.put_if_absent(path, data)
    except FileExistsError:
        pass  # another writer checkpointed this version; both describe the same state
    return {"version": snapshot.version, "size": rows, "sizeInBytes": len(data), "numOfAddFiles": snapshot.num_files}


def _v2_add_type(kept: pa.ChunkedArray | None) -> pa.StructType:
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
        blocks = [("checkpointMetadata", arrow_values.array([{"version": version, "tags": _items(meta.tags)}], CHECKPOINT_METADATA_TYPE))]
        blocks += _non_file_blocks(snapshot)
        blocks.append(
            (
                "sidecar",
                arrow_values.array(
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

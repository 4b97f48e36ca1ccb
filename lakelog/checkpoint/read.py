"""Reading checkpoints of every kind the protocol defines (see the package docstring); anything malformed
is a ``CorruptLogError``, so readers fall back to an older checkpoint or to the JSON commits."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..actions import (
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
    parse_actions,
)
from .v2 import CheckpointMetadata, Sidecar, read_sidecars
from ..errors import CorruptLogError
from ..log import CheckpointFiles, checkpoint_name
from ..storage import FileInfo
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

"""Iceberg compatibility: the constraints of Delta's ``icebergCompatV1`` and ``icebergCompatV2`` writer
features (PROTOCOL.md "Iceberg Compatibility V1/V2"), which keep a table convertible to Iceberg.

A table is bound by them when its protocol lists the feature and ``delta.enableIcebergCompatV1`` /
``V2`` is true. Then, as Delta Spark's ``IcebergCompat`` checks them, every commit must leave:

* at most one of the two on, column mapping in mode name or id (a new table gets mode name when none
  is given, as Delta sets it; an existing table must turn it on in the same call);
* no deletion vectors: V1 needs the ``deletionVectors`` feature absent from the protocol, V2 needs
  ``delta.enableDeletionVectors`` off; no commit adds one, and enabling is refused while live files have
  them (Iceberg readers would see the deleted rows);
* only types Iceberg holds: V1 no array, map or void; V2 the allow-list (no void, variant, interval,
  geometry or geography), partition columns primitive;
* the partition columns of a partitioned table unchanged (no replacement with another partitioning);
* only type changes Iceberg V2 allows (``type_widening.is_iceberg_widening``) recorded in the schema;
* ``numRecords`` in the stats of every added file.

Writers also materialize partition values into data files, after the data columns
(``partitions_in_files``), and V2 tables give every array element and map key and value a field id
(``with_nested_ids``, stored as ``delta.columnMapping.nested.ids`` on the nearest struct field and
written as Parquet field ids by ``column_mapping.physical_schema``). Timestamps are always INT64.
A violation is an ``IcebergCompatError`` raised before anything is committed.
"""

from __future__ import annotations

from typing import Any, Iterable

import orjson

from ..actions import Action, AddFile, Metadata, Protocol
from .column_mapping import FIELD_ID, MAX_COLUMN_ID, NESTED_IDS, PHYSICAL_NAME, ColumnMapping
from ..errors import IcebergCompatError
from .properties import TableProperties
from . import type_widening

V1_KEY = "delta.enableIcebergCompatV1"
V2_KEY = "delta.enableIcebergCompatV2"
KEYS = {1: V1_KEY, 2: V2_KEY}
FEATURES = {1: "icebergCompatV1", 2: "icebergCompatV2"}
MODE_KEY = "delta.columnMapping.mode"

# Delta Spark's CheckTypeInV2AllowList (primitive part) and CheckPartitionDataTypeInV2AllowList.
_V2_PRIMITIVES = {"byte", "short", "integer", "long", "float", "double", "string", "binary", "boolean", "timestamp", "timestamp_ntz", "date"}
_GEO = ("geometry", "geography")


def enabled(configuration: dict[str, str] | None) -> list[int]:
    """The Iceberg compatibility versions whose property is true in ``configuration``."""
    props = TableProperties(configuration)
    return [v for v, key in KEYS.items() if props.get(key)]


def active(protocol: Protocol | None, metadata: Metadata | None) -> int | None:
    """The Iceberg compatibility version binding a table (its feature listed and its property true)."""
    if protocol is None or metadata is None:
        return None
    listed = _listed(protocol)
    on = [v for v in enabled(metadata.configuration) if FEATURES[v] in listed]
    return max(on) if on else None


def _listed(protocol: Protocol) -> set[str]:
    """The features a protocol lists (every feature used here needs writer version 7)."""
    return set(protocol.writer_features or []) if protocol.min_writer_version >= 7 else set()


def configure(new: dict[str, str], old: dict[str, str] | None) -> dict[str, str]:
    """Properties a commit sets, completed as Delta completes them: a table created with Iceberg
    compatibility on and no column mapping mode gets mode ``name`` (``old`` None: the table is new)."""
    if old is None and enabled(new) and MODE_KEY not in new:
        return {**new, MODE_KEY: "name"}
    return new


def partitions_in_files(configuration: dict[str, str] | None) -> bool:
    """Whether data files carry the partition columns (after the data columns), as Iceberg needs."""
    return bool(enabled(configuration))


# ---------------------------------------------------------------- nested field ids (V2)

def with_nested_ids(schema_string: str, configuration: dict[str, str]) -> tuple[str, dict[str, str]]:
    """``schema_string`` with a field id for every array element and map key and value, and
    ``configuration`` with ``delta.columnMapping.maxColumnId`` past them, when the configuration has
    IcebergCompatV2 on with column mapping (else both unchanged). Ids already assigned are kept; new
    ones follow the highest id in use, in pre-order, as Delta's ``rewriteFieldIdsForIceberg`` assigns
    them (every struct field gets a ``delta.columnMapping.nested.ids`` map, empty when it has none)."""
    props = TableProperties(configuration)
    if 2 not in enabled(configuration) or props.column_mapping_mode == "none":
        return schema_string, configuration
    root = orjson.loads(schema_string)
    start = max(int(configuration.get(MAX_COLUMN_ID) or 0), _max_id(root))
    counter = [start]
    changed = [False]

    def walk_type(t: Any, ids: dict, path: str) -> None:
        if not isinstance(t, dict):
            return
        kind = t.get("type")
        if kind == "struct":
            for f in t.get("fields") or []:
                meta = f.setdefault("metadata", {})
                own = meta.get(NESTED_IDS)
                changed[0] |= not isinstance(own, dict)
                own = dict(own) if isinstance(own, dict) else {}
                walk_type(f.get("type"), own, str(meta.get(PHYSICAL_NAME) or f["name"]))
                meta[NESTED_IDS] = own
        elif kind == "array":
            key = f"{path}.element"
            _assign(ids, key, counter)
            walk_type(t.get("elementType"), ids, key)
        elif kind == "map":
            for part, child in (("key", "keyType"), ("value", "valueType")):
                key = f"{path}.{part}"
                _assign(ids, key, counter)
                walk_type(t.get(child), ids, key)

    walk_type(root, {}, "")
    if int(configuration.get(MAX_COLUMN_ID) or 0) != counter[0]:
        configuration = {**configuration, MAX_COLUMN_ID: str(counter[0])}
    if not changed[0] and counter[0] == start:
        return schema_string, configuration
    return orjson.dumps(root).decode(), configuration


def _assign(ids: dict, key: str, counter: list[int]) -> None:
    if key not in ids:
        counter[0] += 1
        ids[key] = counter[0]


def _max_id(t: Any) -> int:
    """The highest column mapping id or nested id in a Delta type (JSON)."""
    if not isinstance(t, dict):
        return 0
    top = 0
    for f in t.get("fields") or []:
        meta = f.get("metadata") or {}
        mid = meta.get(FIELD_ID)
        if isinstance(mid, int) and not isinstance(mid, bool):
            top = max(top, mid)
        nested = meta.get(NESTED_IDS)
        if isinstance(nested, dict):
            top = max([top, *(v for v in nested.values() if isinstance(v, int) and not isinstance(v, bool))])
        top = max(top, _max_id(f.get("type")))
    for child in ("elementType", "keyType", "valueType"):
        top = max(top, _max_id(t.get(child)))
    return top


def _missing_nested_ids(root: Any) -> str | None:
    """The path of the first array element or map key/value without a nested field id (None: none)."""

    def walk(t: Any, ids: dict, path: str, shown: str) -> str | None:
        if not isinstance(t, dict):
            return None
        kind = t.get("type")
        if kind == "struct":
            for f in t.get("fields") or []:
                meta = f.get("metadata") or {}
                own = meta.get(NESTED_IDS) if isinstance(meta.get(NESTED_IDS), dict) else {}
                found = walk(f.get("type"), own, str(meta.get(PHYSICAL_NAME) or f["name"]), f"{shown}.{f['name']}".lstrip("."))
                if found:
                    return found
        elif kind == "array":
            if f"{path}.element" not in ids:
                return f"{shown}.element"
            return walk(t.get("elementType"), ids, f"{path}.element", f"{shown}.element")
        elif kind == "map":
            for part, child in (("key", "keyType"), ("value", "valueType")):
                if f"{path}.{part}" not in ids:
                    return f"{shown}.{part}"
                found = walk(t.get(child), ids, f"{path}.{part}", f"{shown}.{part}")
                if found:
                    return found
        return None

    return walk(root, {}, "", "")


# ---------------------------------------------------------------- the checks

def _types(t: Any, path: str) -> Iterable[tuple[str, str]]:
    """(column path, type name) of every type in a Delta type (JSON), containers included."""
    if isinstance(t, str):
        yield path, t
        return
    if not isinstance(t, dict):
        return
    kind = t.get("type")
    yield path, kind
    if kind == "struct":
        for f in t.get("fields") or []:
            yield from _types(f.get("type"), f"{path}.{f['name']}".lstrip("."))
    elif kind == "array":
        yield from _types(t.get("elementType"), f"{path}.element")
    elif kind == "map":
        yield from _types(t.get("keyType"), f"{path}.key")
        yield from _types(t.get("valueType"), f"{path}.value")


def _allowed(version: int, type_name: str) -> bool:
    base = type_name.split("(")[0].strip().lower()
    if version == 1:
        return base not in ("array", "map", "void") and not base.startswith(_GEO)
    return base in _V2_PRIMITIVES or base in ("decimal", "array", "map", "struct")


def _name(version: int) -> str:
    return f"IcebergCompatV{version}"


def check_commit(snapshot: Any, actions: list[Action]) -> None:
    """Refuse (``IcebergCompatError``, nothing committed) a commit of ``actions`` on ``snapshot`` (None:
    the commit creates the table) that would leave Iceberg compatibility broken (see the module doc)."""
    protocol = next((a for a in actions if isinstance(a, Protocol)), None) or (snapshot.protocol if snapshot is not None else None)
    metadata = next((a for a in actions if isinstance(a, Metadata)), None) or (snapshot.metadata if snapshot is not None else None)
    version = active(protocol, metadata)
    if version is None:
        return
    name = _name(version)
    conf = metadata.configuration
    props = TableProperties(conf)
    on = enabled(conf)
    if len(on) > 1:
        raise IcebergCompatError(
            f"{V1_KEY} and {V2_KEY} are both true: only one Iceberg compatibility version can be on; set the other to false "
            f"in the same call (e.g. set_properties({{{V1_KEY!r}: 'false', {V2_KEY!r}: 'true'}}))"
        )
    was = active(snapshot.protocol, snapshot.metadata) if snapshot is not None else None
    enabling = snapshot is not None and was is None
    if props.column_mapping_mode == "none":
        raise IcebergCompatError(
            f"{name} requires column mapping (delta.columnMapping.mode name or id), and this table has none; turn it on in the same "
            f"call: set_properties({{'delta.columnMapping.mode': 'name', {KEYS[version]!r}: 'true'}}) (a metadata-only commit)"
        )
    listed = _listed(protocol)
    if version == 1 and "deletionVectors" in listed:
        raise IcebergCompatError(
            f"{name} requires the deletionVectors feature absent from the table's protocol, and this table supports it "
            f"(lakelog cannot drop a table feature); use {V2_KEY} instead, which only needs delta.enableDeletionVectors false"
        )
    if version == 2 and props.get("delta.enableDeletionVectors"):
        raise IcebergCompatError(
            f"{name} requires deletion vectors to be off, and delta.enableDeletionVectors is true; set it to false in the same call "
            f"(set_properties({{'delta.enableDeletionVectors': 'false', {V2_KEY!r}: 'true'}})), then purge existing ones with Table.optimize()"
        )
    root = orjson.loads(metadata.schema_string)
    for path, t in _types(root, ""):
        if path and not _allowed(version, t):
            allowed = ("every type but array, map, void, geometry and geography" if version == 1 else
                       "byte, short, integer, long, float, double, decimal, string, binary, boolean, timestamp, timestamp_ntz, date, array, map, struct")
            raise IcebergCompatError(f"{name} does not allow the type {t} (column {path!r}); it allows {allowed}. Leave the column out or cast it")
    if version == 2:
        types = {f["name"]: f.get("type") for f in root.get("fields") or []}
        for c in metadata.partition_columns:
            t = types.get(c)
            if not (isinstance(t, str) and (t in _V2_PRIMITIVES or t.startswith("decimal"))):
                raise IcebergCompatError(f"{name} does not allow partitioning by {c!r} of type {t}; partition by a column of a primitive type")
        missing = _missing_nested_ids(root)
        if missing:
            raise IcebergCompatError(
                f"{name} requires a field id for every array element and map key and value ({NESTED_IDS}), and {missing!r} has none; "
                f"another writer left them out: Table.set_properties({{{V2_KEY!r}: 'true'}}) assigns them (a metadata-only commit)"
            )
    if snapshot is not None and snapshot.partition_columns and snapshot.partition_columns != metadata.partition_columns:
        raise IcebergCompatError(
            f"{name} does not allow replacing the partitioning {snapshot.partition_columns} with {metadata.partition_columns} "
            "(Iceberg cannot follow a renamed partition spec); write to a new table, or turn Iceberg compatibility off first"
        )
    if listed & set(type_widening.FEATURES):
        for path, from_type, to_type in type_widening.recorded_type_changes(metadata.schema_string):
            if type_widening.is_widening(from_type, to_type) and not type_widening.is_iceberg_widening(from_type, to_type):
                raise IcebergCompatError(
                    f"{name} is incompatible with the type change of column {path!r} from {from_type} to {to_type}, which Iceberg V2 "
                    "cannot represent (it allows integer widening, float to double and decimal precision increases at the same scale); "
                    "rewrite the table (write_table(..., mode='overwrite', schema_mode='overwrite')) to drop the change first"
                )
    for a in actions:
        if isinstance(a, AddFile):
            if a.deletion_vector is not None:
                raise IcebergCompatError(f"{name} does not allow deletion vectors, and this commit adds one to {a.path!r}")
            if a.num_records() is None:
                raise IcebergCompatError(f"{name} requires numRecords in the stats of every added file, and {a.path!r} has none")
    if enabling:
        _check_existing(snapshot, version, metadata)


def _check_existing(snapshot: Any, version: int, metadata: Metadata) -> None:
    """What enabling on a table with data needs of its live files: no deletion vectors (Iceberg readers
    would see the deleted rows) and, for V1 (whose protocol text covers every file in the table),
    ``numRecords`` in every file's stats and the partition columns in every partitioned file."""
    name = _name(version)
    files = snapshot.files.values()
    with_dv = next((a.path for a in files if a.deletion_vector is not None), None)
    if with_dv is not None:
        raise IcebergCompatError(
            f"{name} requires deletion vectors to be purged from the table, and live file {with_dv!r} has one; run Table.optimize() "
            "first (it rewrites files without their deleted rows), then enable it"
        )
    if version != 1:
        return
    no_stats = next((a.path for a in files if a.num_records() is None), None)
    if no_stats is not None:
        raise IcebergCompatError(
            f"{name} requires numRecords in the stats of every file of the table, and {no_stats!r} has none; rewrite the table "
            f"(write_table(..., mode='overwrite')) or use {V2_KEY}, which only requires it of new files"
        )
    if metadata.partition_columns and snapshot.num_files:
        from ..storage.parquet_read import parquet_file

        mapping = ColumnMapping(TableProperties(metadata.configuration).column_mapping_mode, metadata.schema_string)
        physical = [mapping.physical_name(c) for c in metadata.partition_columns]
        for a in files:
            with snapshot.storage.open_input(snapshot.storage.join(a.relative_path)) as f:
                names = parquet_file(f).schema_arrow.names
            if not all(p in names for p in physical):
                raise IcebergCompatError(
                    f"{name} requires the partition columns in every data file, and {a.path!r} lacks them; rewrite the table "
                    f"(write_table(..., mode='overwrite')) with Iceberg compatibility on, or use {V2_KEY}, which only requires them of new files"
                )

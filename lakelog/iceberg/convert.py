"""Delta versions as Iceberg snapshots: one Iceberg snapshot per Delta version, written incrementally.

A Delta version's Iceberg work is proportional to the version: its added files go into one new manifest;
its removed files are written as ``DELETED`` entries in rewrites of only the manifests that held them;
every other manifest is carried over as is. A full conversion (one manifest of every live file) happens
only when there is no Iceberg metadata yet, or the Delta commits since the last converted version are gone.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..actions import AddFile, CommitInfo, Metadata, RemoveFile, decode_path
from ..data_files import physical_rows
from ..errors import UnsupportedFeatureError
from ..storage import Storage
from .files import path_part, table_location, to_storage_path, write_file
from .manifests import ADDED, DELETED, EXISTING, Spec, as_pairs, decimal_size, manifest_file, read_entries, read_manifest_list, write_manifest, write_manifest_list
from .metadata import DELTA_TIMESTAMP, DELTA_VERSION, NAME_MAPPING, IcebergMetadata
from .schema import IcebergSchema, partition_spec
from .values import file_metrics, partition_value, unscaled_bytes

MERGE_AT = 100  # Iceberg's commit.manifest.min-count-to-merge
MERGE_TARGET_BYTES = 8 << 20  # Iceberg's commit.manifest.target-size-bytes: a manifest this big is never merged again
_LAST_LIST: list = [None, []]  # [location, records] of the manifest list this process wrote last


@dataclass
class VersionChange:
    """What one Delta version did, as the conversion needs it."""

    version: int
    timestamp_ms: int
    metadata: Metadata  # in effect after the version
    adds: list[AddFile] = field(default_factory=list)
    removed: set[str] = field(default_factory=set)  # decoded relative paths no longer live (re-added ones too)
    data_change: bool = True


def snapshot_id(table_uuid: str, version: int) -> int:
    """A positive 63-bit id, the same for every converter of this Delta version (so racing ones agree)."""
    return int.from_bytes(hashlib.sha256(f"{table_uuid}/{version}".encode()).digest()[:8], "big") & (2**63 - 1) or 1


def table_uuid(metadata: Metadata) -> str:
    try:
        return str(uuid.UUID(metadata.id))
    except (ValueError, TypeError, AttributeError):
        return str(uuid.uuid5(uuid.NAMESPACE_URL, str(metadata.id)))


class Converter:
    """Appends Iceberg snapshots for Delta versions to ``meta`` (the latest Iceberg metadata)."""

    def __init__(self, storage: Storage, meta: IcebergMetadata):
        self.storage = storage
        self.meta = meta
        self.location = table_location(storage)
        self._schemas: dict[str, IcebergSchema] = {}
        self._specs: dict[int, Spec] = {}

    # ------------------------------------------------------------ files
    def _metadata_location(self, name: str) -> str:
        return f"{self.location}/metadata/{name}"

    def _read(self, location: str) -> bytes:
        return self.storage.read(to_storage_path(self.storage, location))

    def _write(self, location: str, data: bytes) -> None:
        write_file(self.storage, to_storage_path(self.storage, location), data, unique=True)

    # ------------------------------------------------------------ schema and spec
    def _use_metadata(self, metadata: Metadata) -> tuple[IcebergSchema, dict, Spec]:
        """Make ``metadata``'s schema and partition spec current (adding them when new); return them."""
        ischema = self._schemas.get(metadata.schema_string)
        if ischema is None:
            ischema = self._schemas[metadata.schema_string] = IcebergSchema(metadata.schema_string)
        schema_id = self.meta.ensure_schema(ischema.json, ischema.last_column_id)
        spec_id = self.meta.ensure_spec(partition_spec(ischema, list(metadata.partition_columns), 0)["fields"])
        self.meta.set_property(NAME_MAPPING, orjson.dumps(ischema.name_mapping).decode())
        return ischema, self.meta.schema(schema_id), self._spec(spec_id)

    def _spec(self, spec_id: int) -> Spec:
        spec = self._specs.get(spec_id)
        if spec is None:
            types = {f["id"]: f["type"] for s in self.meta.raw["schemas"] for f in s["fields"] if isinstance(f["type"], str)}
            spec = self._specs[spec_id] = Spec(self.meta.spec(spec_id), types)
        return spec

    # ------------------------------------------------------------ entries
    def data_file(self, add: AddFile, ischema: IcebergSchema, metadata: Metadata, spec: Spec) -> dict:
        if add.deletion_vector is not None:
            raise UnsupportedFeatureError(
                f"UniForm: data file {add.path!r} has a deletion vector, which Iceberg format version 2 cannot express; "
                "tables with UniForm must not use deletion vectors (delta.enableDeletionVectors = false, then REORG/OPTIMIZE)"
            )
        m = file_metrics(add.stats, ischema.columns)
        count = m["record_count"] if m["record_count"] is not None else physical_rows(self.storage, add)
        pv = add.partition_values or {}
        partition = {}
        for (name, _, t), column in zip(spec.fields, metadata.partition_columns):
            col = ischema.column(column)
            v = partition_value(pv.get(col.physical, pv.get(column)), col)
            if v is not None and t.startswith("decimal("):
                p, sc = (int(x) for x in t[8:-1].split(","))
                v = unscaled_bytes(v, sc, decimal_size(p))  # Avro fixed
            partition[name] = v
        return {
            "content": 0, "file_path": f"{self.location}/{add.relative_path}", "file_format": "PARQUET", "partition": partition,
            "record_count": count, "file_size_in_bytes": add.size, "column_sizes": None, "value_counts": None,
            "null_value_counts": as_pairs(m["null_value_counts"]), "nan_value_counts": None,
            "lower_bounds": as_pairs(m["lower_bounds"]), "upper_bounds": as_pairs(m["upper_bounds"]),
            "key_metadata": None, "split_offsets": None, "equality_ids": None, "sort_order_id": None,
        }

    def _write_manifest(self, spec: Spec, schema_json: dict, entries: list[dict], sid: int, seq: int) -> dict:
        location = self._metadata_location(f"{uuid.uuid4()}-m0.avro")
        data = write_manifest(spec, schema_json, entries)
        self._write(location, data)
        return manifest_file(location, len(data), spec, seq, sid, entries)

    # ------------------------------------------------------------ snapshots
    def full(self, version: int, timestamp_ms: int, metadata: Metadata, adds: list[AddFile]) -> None:
        """A snapshot of ``version`` listing every live file ``adds`` (no earlier manifests)."""
        ischema, schema_json, spec = self._use_metadata(metadata)
        sid, seq = snapshot_id(self.meta.uuid, version), self.meta.next_sequence_number()
        entries = [{"status": ADDED, "snapshot_id": sid, "sequence_number": None, "file_sequence_number": None,
                    "data_file": self.data_file(a, ischema, metadata, spec)} for a in adds]
        manifests = [self._write_manifest(spec, schema_json, entries, sid, seq)] if entries else []
        records = sum(e["data_file"]["record_count"] for e in entries)
        summary = {"operation": "overwrite", "added-data-files": str(len(adds)), "added-records": str(records),
                   "total-data-files": str(len(adds)), "total-records": str(records)}
        self._write_snapshot(sid, seq, version, timestamp_ms, manifests, summary)

    def incremental(self, change: VersionChange) -> None:
        """The snapshot of ``change.version`` on top of the current one."""
        ischema, schema_json, spec = self._use_metadata(change.metadata)
        sid, seq = snapshot_id(self.meta.uuid, change.version), self.meta.next_sequence_number()
        kept: list[dict] = []
        deleted_files = deleted_records = 0
        # (by path alone: older entries may name the table by another form of its URL, e.g. written by a
        # writer that opened it as abfs://container/path, or by an older lakelog)
        root = path_part(self.location).rstrip("/")
        removed = {f"{root}/{p}" for p in change.removed}
        for mf in self._current_manifests():
            if mf["content"] == 0 and mf["added_files_count"] + mf["existing_files_count"] == 0:
                continue  # only deleted entries, already reported by the snapshot that deleted them
            if not removed or mf["content"] != 0:
                kept.append(mf)
                continue
            mspec = self._spec(mf["partition_spec_id"])
            entries = [e for e in read_entries(self._read(mf["manifest_path"]), mf, mspec) if e["status"] != DELETED]
            if not any(path_part(e["data_file"]["file_path"]) in removed for e in entries):
                kept.append(mf)
                continue
            out = []
            for e in entries:
                if path_part(e["data_file"]["file_path"]) in removed:
                    out.append({**e, "status": DELETED, "snapshot_id": sid})
                    deleted_files += 1
                    deleted_records += e["data_file"]["record_count"]
                else:
                    out.append({**e, "status": EXISTING})
            kept.append(self._write_manifest(mspec, schema_json, out, sid, seq))
        kept = self._merged(kept, sid, seq, schema_json)
        added_records = 0
        if change.adds:
            entries = [{"status": ADDED, "snapshot_id": sid, "sequence_number": None, "file_sequence_number": None,
                        "data_file": self.data_file(a, ischema, change.metadata, spec)} for a in change.adds]
            added_records = sum(e["data_file"]["record_count"] for e in entries)
            kept.append(self._write_manifest(spec, schema_json, entries, sid, seq))
        prev = self.meta.current_summary()
        total_files = int(prev.get("total-data-files", 0)) + len(change.adds) - deleted_files
        total_records = int(prev.get("total-records", 0)) + added_records - deleted_records
        if not change.data_change:
            op = "replace"
        elif change.adds and deleted_files:
            op = "overwrite"
        elif deleted_files:
            op = "delete"
        else:
            op = "append"
        summary = {"operation": op, "added-data-files": str(len(change.adds)), "deleted-data-files": str(deleted_files),
                   "added-records": str(added_records), "deleted-records": str(deleted_records),
                   "total-data-files": str(total_files), "total-records": str(total_records)}
        self._write_snapshot(sid, seq, change.version, change.timestamp_ms, kept, summary)

    def _merged(self, manifests: list[dict], sid: int, seq: int, schema_json: dict) -> list[dict]:
        """``manifests``, those of one spec merged into one when there are more than ``MERGE_AT`` of them
        (as Iceberg's merging appends do): each append adds a manifest, and a reader opens them all.
        Manifests of ``MERGE_TARGET_BYTES`` or more stay as they are, so that a merge rewrites recent
        small manifests, never the whole table."""
        by_spec: dict[int, list[dict]] = {}
        for mf in manifests:
            if mf["content"] == 0 and mf["added_snapshot_id"] != sid and mf["manifest_length"] < MERGE_TARGET_BYTES:
                by_spec.setdefault(mf["partition_spec_id"], []).append(mf)
        out = list(manifests)
        for spec_id, group in by_spec.items():
            if len(group) <= MERGE_AT:
                continue
            mspec = self._spec(spec_id)
            entries = [{**e, "status": EXISTING} for mf in group for e in read_entries(self._read(mf["manifest_path"]), mf, mspec)
                       if e["status"] != DELETED]
            out = [mf for mf in out if mf not in group]
            if entries:
                out.append(self._write_manifest(mspec, schema_json, entries, sid, seq))
        return out

    def _current_manifests(self) -> list[dict]:
        snap = self.meta.current_snapshot()
        if snap is None:
            return []
        location = snap["manifest-list"]
        if _LAST_LIST[0] == location:  # this process wrote it (the usual case: its previous commit)
            return list(_LAST_LIST[1])
        return read_manifest_list(self._read(location))

    def _write_snapshot(self, sid: int, seq: int, version: int, timestamp_ms: int, manifests: list[dict], summary: dict) -> None:
        parent = self.meta.current_snapshot_id()
        location = self._metadata_location(f"snap-{sid}-1-{uuid.uuid4()}.avro")
        self._write(location, write_manifest_list(manifests, sid, parent, seq))
        _LAST_LIST[:] = [location, manifests]
        summary[DELTA_VERSION] = str(version)
        self.meta.add_snapshot({
            "snapshot-id": sid,
            **({"parent-snapshot-id": parent} if parent is not None else {}),
            "sequence-number": seq,
            "timestamp-ms": timestamp_ms,
            "manifest-list": location,
            "summary": summary,
            "schema-id": self.meta.current_schema_id(),
        })
        self.meta.set_property(DELTA_VERSION, str(version))
        self.meta.set_property(DELTA_TIMESTAMP, str(timestamp_ms))


def version_change(version: int, actions: list, metadata: Metadata, live: Any, timestamp_ms: int) -> VersionChange:
    """The ``VersionChange`` of commit ``version``'s ``actions``; ``metadata``: in effect before it;
    ``live``: a container of the decoded paths live before it (consulted only for adds of a commit that
    is not a blind append, which may re-add a live path)."""
    change = VersionChange(version, timestamp_ms, metadata)
    blind = False
    any_data_change = False
    adds: dict[str, AddFile] = {}
    for a in actions:
        if isinstance(a, AddFile):
            rel = a.relative_path
            adds[rel] = a  # the last add of a path wins
            any_data_change |= a.data_change
        elif isinstance(a, RemoveFile):
            change.removed.add(decode_path(a.path))
            any_data_change |= a.data_change
        elif isinstance(a, Metadata):
            change.metadata = a
        elif isinstance(a, CommitInfo):
            blind = a.info.get("isBlindAppend") is True
    if not blind:
        for rel in adds:
            if rel not in change.removed and rel in live:
                change.removed.add(rel)
    change.adds = list(adds.values())
    change.data_change = any_data_change  # False for a metadata-only version: a "replace" of nothing
    return change

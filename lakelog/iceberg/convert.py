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
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    read_manifest_list,
    write_manifest,
    write_manifest_list,
)
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record

from ..actions import AddFile, CommitInfo, Metadata, RemoveFile, decode_path
from ..data_files import physical_rows
from ..errors import UnsupportedFeatureError
from ..storage import Storage
from .files import StorageFileIO, table_location
from .metadata import DELTA_TIMESTAMP, DELTA_VERSION, NAME_MAPPING, IcebergMetadata
from .schema import IcebergSchema, partition_spec
from .values import file_metrics, partition_value

_CODEC = "deflate"


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
        self.io = StorageFileIO(storage)
        self.meta = meta
        self.location = table_location(storage)
        self._schema_cache: dict[str, IcebergSchema] = {}

    # ------------------------------------------------------------ paths
    def _metadata_location(self, name: str) -> str:
        return f"{self.location}/metadata/{name}"

    def _data_location(self, rel: str) -> str:
        return f"{self.location}/{rel}"

    # ------------------------------------------------------------ schema and spec
    def _iceberg_schema(self, metadata: Metadata) -> IcebergSchema:
        s = self._schema_cache.get(metadata.schema_string)
        if s is None:
            s = self._schema_cache[metadata.schema_string] = IcebergSchema(metadata.schema_string)
        return s

    def _use_metadata(self, metadata: Metadata) -> tuple[IcebergSchema, Schema, PartitionSpec]:
        """Make ``metadata``'s schema and partition spec current (adding them when new); return them."""
        ischema = self._iceberg_schema(metadata)
        schema_id = self.meta.ensure_schema(ischema.json, ischema.last_column_id)
        spec_id = self.meta.ensure_spec(partition_spec(ischema, list(metadata.partition_columns), 0)["fields"])
        self.meta.set_property(NAME_MAPPING, orjson.dumps(ischema.name_mapping).decode())
        return ischema, self._pyiceberg_schema(schema_id), self._pyiceberg_spec(spec_id)

    def _pyiceberg_schema(self, schema_id: int) -> Schema:
        return Schema.model_validate(self.meta.schema(schema_id))

    def _pyiceberg_spec(self, spec_id: int) -> PartitionSpec:
        return PartitionSpec.model_validate(self.meta.spec(spec_id))

    # ------------------------------------------------------------ files
    def data_file(self, add: AddFile, ischema: IcebergSchema, metadata: Metadata) -> DataFile:
        if add.deletion_vector is not None:
            raise UnsupportedFeatureError(
                f"UniForm: data file {add.path!r} has a deletion vector, which Iceberg format version 2 cannot express; "
                "tables with UniForm must not use deletion vectors (delta.enableDeletionVectors = false, then REORG/OPTIMIZE)"
            )
        m = file_metrics(add.stats, ischema.columns)
        count = m["record_count"] if m["record_count"] is not None else physical_rows(self.storage, add)
        values = []
        for name in metadata.partition_columns:
            col = ischema.column(name)
            pv = add.partition_values or {}
            values.append(partition_value(pv.get(col.physical, pv.get(name)), col))
        return DataFile.from_args(
            content=DataFileContent.DATA,
            file_path=self._data_location(add.relative_path),
            file_format=FileFormat.PARQUET,
            partition=Record(*values),
            record_count=count,
            file_size_in_bytes=add.size,
            null_value_counts=m["null_value_counts"] or None,
            lower_bounds=m["lower_bounds"] or None,
            upper_bounds=m["upper_bounds"] or None,
            _table_format_version=2,
        )

    def _new_manifest(self, spec: PartitionSpec, schema: Schema, sid: int):
        return write_manifest(2, spec, schema, self.io.new_output(self._metadata_location(f"{uuid.uuid4()}-m0.avro")), sid, _CODEC)

    # ------------------------------------------------------------ snapshots
    def full(self, version: int, timestamp_ms: int, metadata: Metadata, adds: list[AddFile]) -> None:
        """A snapshot of ``version`` listing every live file ``adds`` (no earlier manifests)."""
        ischema, schema, spec = self._use_metadata(metadata)
        sid = snapshot_id(self.meta.uuid, version)
        manifests: list[ManifestFile] = []
        records = 0
        if adds:
            with self._new_manifest(spec, schema, sid) as w:
                for a in adds:
                    df = self.data_file(a, ischema, metadata)
                    records += df.record_count
                    w.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=sid, data_file=df))
            manifests.append(w.to_manifest_file())
        summary = {"operation": "overwrite", "added-data-files": str(len(adds)), "added-records": str(records),
                   "total-data-files": str(len(adds)), "total-records": str(records)}
        self._write_snapshot(sid, version, timestamp_ms, manifests, summary, replace_all=True)

    def incremental(self, change: VersionChange) -> None:
        """The snapshot of ``change.version`` on top of the current one."""
        ischema, schema, spec = self._use_metadata(change.metadata)
        sid = snapshot_id(self.meta.uuid, change.version)
        current = self._current_manifests()
        kept: list[ManifestFile] = []
        deleted_files = deleted_records = 0
        removed = {self._data_location(p) for p in change.removed}
        for mf in current:
            if mf.content != ManifestContent.DATA:
                kept.append(mf)
                continue
            live = (mf.added_files_count or 0) + (mf.existing_files_count or 0)
            if live == 0:
                continue  # only deleted entries, already reported by the snapshot that deleted them
            if not removed:
                kept.append(mf)
                continue
            entries = mf.fetch_manifest_entry(self.io, discard_deleted=True)
            hit = [e for e in entries if e.data_file.file_path in removed]
            if not hit:
                kept.append(mf)
                continue
            mspec = self._pyiceberg_spec(mf.partition_spec_id)
            with self._new_manifest(mspec, self._schema_for_spec(mspec, schema), sid) as w:
                for e in entries:
                    if e.data_file.file_path in removed:
                        w.delete(e)
                        deleted_files += 1
                        deleted_records += e.data_file.record_count
                    else:
                        w.existing(e)
            kept.append(w.to_manifest_file())
        added_records = 0
        if change.adds:
            with self._new_manifest(spec, schema, sid) as w:
                for a in change.adds:
                    df = self.data_file(a, ischema, change.metadata)
                    added_records += df.record_count
                    w.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=sid, data_file=df))
            kept.append(w.to_manifest_file())
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
        self._write_snapshot(sid, change.version, change.timestamp_ms, kept, summary)

    def _schema_for_spec(self, spec: PartitionSpec, current: Schema) -> Schema:
        """A schema holding every source column of ``spec`` (an older spec's column may have been dropped since)."""
        ids = {f.source_id for f in spec.fields}
        have = {f.field_id for f in current.fields}
        if ids <= have:
            return current
        for s in reversed(self.meta.raw["schemas"]):
            if ids <= {f["id"] for f in s["fields"]}:
                return Schema.model_validate(s)
        return current

    def _current_manifests(self) -> list[ManifestFile]:
        snap = self.meta.current_snapshot()
        if snap is None:
            return []
        return list(read_manifest_list(self.io.new_input(snap["manifest-list"])))

    def _write_snapshot(self, sid: int, version: int, timestamp_ms: int, manifests: list[ManifestFile], summary: dict,
                        replace_all: bool = False) -> None:
        parent = self.meta.current_snapshot_id()
        seq = self.meta.next_sequence_number()
        ml = self._metadata_location(f"snap-{sid}-1-{uuid.uuid4()}.avro")
        with write_manifest_list(2, self.io.new_output(ml), sid, parent, seq, _CODEC) as w:
            w.add_manifests(manifests)
        summary[DELTA_VERSION] = str(version)
        self.meta.add_snapshot({
            "snapshot-id": sid,
            **({"parent-snapshot-id": parent} if parent is not None else {}),
            "sequence-number": seq,
            "timestamp-ms": timestamp_ms,
            "manifest-list": ml,
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
    change.data_change = any_data_change or not (adds or change.removed)
    return change

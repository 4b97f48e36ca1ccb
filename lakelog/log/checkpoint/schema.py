"""The checkpoint schema (Delta's classic checkpoint columns) and actions as its rows."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ...actions import AddFile, DeletionVectorDescriptor
from ...schema import arrow_values


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
                    ("baseRowId", pa.int64()),
                    ("defaultRowCommitVersion", pa.int64()),
                    ("clusteringProvider", pa.string()),
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
                    ("baseRowId", pa.int64()),
                    ("defaultRowCommitVersion", pa.int64()),
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
            "baseRowId": a.base_row_id,
            "defaultRowCommitVersion": a.default_row_commit_version,
            "clusteringProvider": a.clustering_provider,
        }
        for a in adds
    ]


def _rows(kind: str, values: list) -> pa.Array:
    return arrow_values.array(values, CHECKPOINT_SCHEMA.field(kind).type)


def _conform(rows: pa.StructArray, target: pa.StructType) -> pa.StructArray:
    """``rows`` with exactly the fields of ``target`` (cast, or null when absent), ``dataChange`` false."""
    n = len(rows)
    children = []
    for f in target:
        if f.name == "dataChange":
            children.append(pa.repeat(arrow_values.scalar(False, pa.bool_()), n))
        elif rows.type.get_field_index(f.name) >= 0:
            child = rows.field(f.name)
            children.append(child if child.type == f.type else child.cast(f.type))
        else:
            children.append(pa.nulls(n, f.type))
    return pa.StructArray.from_arrays(children, fields=list(target), mask=pc.invert(rows.is_valid()) if rows.null_count else None)

"""Delta table features: every feature the protocol (and Spark) names, and what lakelog does with it.

A reader must refuse a table listing a reader feature it does not implement; a writer must refuse one
listing a writer feature it does not honour (writers also read, so every reader feature counts too).
``REGISTRY`` records, per feature, whether lakelog reads and writes such tables and how; the protocol
checks (``check_read``, ``check_write``) refuse anything else with an ``UnsupportedFeatureError`` naming
the feature. Features that are only a problem when *used* (CHECK constraints, generated columns, ...)
are writable here and refused by the in-use checks of ``Snapshot.check_writable``.
``specs/PROTOCOL.md`` carries the same table for users.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..actions import Metadata, Protocol
from ..errors import UnsupportedFeatureError
from .properties import TableProperties

if TYPE_CHECKING:  # the protocol checks need no pyarrow: reading the log's protocol starts without it
    import pyarrow as pa


@dataclass(frozen=True)
class Feature:
    """``reader``: a reader-writer feature (listed in both lists), else writer-only. ``readable`` /
    ``writable``: lakelog reads / writes tables listing it; ``read`` / ``write`` say how or why not."""

    name: str
    reader: bool
    readable: bool
    writable: bool
    read: str
    write: str


def _f(name: str, reader: bool, readable: bool, writable: bool, read: str, write: str) -> Feature:
    return Feature(name, reader, readable, writable, read, write)


_NOTHING = "nothing to do"
_REFUSED = "refused"

REGISTRY: dict[str, Feature] = {
    f.name: f
    for f in [
        _f("appendOnly", False, True, True, _NOTHING, "with delta.appendOnly=true, commits that remove data are refused"),
        _f("invariants", False, True, True, _NOTHING, "every new row checked (Spark SQL evaluated by DuckDB; NULL is a violation); DELETE always allowed"),
        _f("checkConstraints", False, True, True, _NOTHING, "every new row checked against delta.constraints.* (NULL is a violation); "
           "Table.add_constraint checks existing rows first, drop_constraint; DELETE always allowed"),
        _f("generatedColumns", False, True, True, _NOTHING, "computed when a write lacks the column, checked when it gives it, "
           "recomputed by update and merge; declared on create with generated_columns="),
        _f("identityColumns", False, True, True, _NOTHING, "values start + k * step generated for rows without one (appends, merge "
           "inserts; disjoint ranges per Spark task), overflow refused, highWaterMark moved in the same commit as Delta's "
           "updateToValidHighWaterMark (a concurrent identity write conflicts; write_table retries), updates of identity columns "
           "refused, explicit values refused unless allowExplicitInsert; declared on create with identity_columns= (not also generated)"),
        _f("changeDataFeed", False, True, True, "change data files read by Table.changes (data files' extra _change_type column ignored)",
           "with delta.enableChangeDataFeed (or the legacy delta.enableChangeDataCapture) true, Python delete/update/merge and "
           "predicate overwrites record every changed row in _change_data/ cdc files; appends and dynamic partition overwrites "
           "need none; Spark's LakelogTable delete, update and merge write change files from their tasks"),
        _f("timestampNtz", True, True, True, "timestamp_ntz columns and partition values read", "timestamp_ntz columns written"),
        _f("vacuumProtocolCheck", True, True, True, _NOTHING, "VACUUM and log cleanup check the writer protocol first (always done)"),
        _f("domainMetadata", False, True, True, "domainMetadata actions replayed (latest per domain wins)",
           "every domain kept: carried into checkpoints (tombstones dropped); lakelog writes delta.clustering (on create) and "
           "delta.rowTracking (the row id high water mark)"),
        _f("v2Checkpoint", True, True, True, "V2 checkpoints read: UUID-named JSON/Parquet, classic-named V2, sidecars",
           "with delta.checkpointPolicy=v2: UUID-named V2 Parquet checkpoints, file actions in sidecars; never multi-part"),
        _f("inCommitTimestamp", False, True, True,
           "from the enablement version on, commitInfo.inCommitTimestamp is the commit time (time travel, history, streaming)",
           "with delta.enableInCommitTimestamps=true: commitInfo first with a monotonic inCommitTimestamp; enablement properties set"),
        _f("clustering", False, True, True, _NOTHING,
           "cluster_by= creates clustered tables (the delta.clustering domain); every file gets stats for the clustering columns; "
           "optimize() rewrites in Z-order over them the files no clustering wrote yet (incremental: clusteringProvider liquid kept "
           "through replay and checkpoints)"),
        _f("liquid", False, True, True, _NOTHING, "Databricks' preview name of clustering: written as clustering, with the "
           "clustering columns of its delta.liquid domain"),
        _f("columnMapping", True, True, True,
           "logical names mapped to physical ones (modes name and id, nested fields, partition values and stats keyed by physical name)",
           "data files name columns by physical name with Parquet field ids (both modes), partition values and stats keyed by physical name; "
           "new columns get col-<uuid> physical names and fresh ids (delta.columnMapping.maxColumnId); set_properties enables mode name "
           "(existing columns keep their names as physical names; reader 2/writer 5, or listed on 3/7); rename_column and drop_column commit metaData only"),
        _f("deletionVectors", True, True, True, "deleted rows dropped on every read path (to_pyarrow_dataset refused)",
           "with delta.enableDeletionVectors=true, delete/update/merge write 'u' deletion vectors (one DV file per commit); "
           "optimize rewrites files without their deleted rows"),
        _f("typeWidening", True, True, True, "files with narrower types cast to the table's type",
           "new files written with the widened types; row-level operations read older files cast and rewrite them widened; "
           "delta.typeChanges kept"),
        _f("typeWidening-preview", True, True, True, "as typeWidening", "as typeWidening"),
        _f("rowTracking", False, True, True, "with delta.enableRowTracking, read_table/to_pyarrow(with_row_tracking=True) add _row_id and _row_commit_version",
           "every add gets baseRowId and defaultRowCommitVersion at commit (above the delta.rowTracking domain's rowIdHighWaterMark, "
           "raised in the same commit); with delta.enableRowTracking, copy-on-write rewrites, update, merge and optimize keep row ids "
           "(and commit versions of copied rows) in the materialized columns; enabling it backfills every live file"),
        _f("icebergCompatV1", False, True, True, _NOTHING, "with delta.enableIcebergCompatV1=true (column mapping on; a new table gets "
           "mode name): commits keep the table convertible to Iceberg (no deletionVectors feature, no array/map/void types, no "
           "repartitioning, Iceberg-compatible type changes, numRecords in every add); partition columns written into data files; "
           "enabling checks every live file (numRecords, partition columns, no deletion vector)"),
        _f("icebergCompatV2", False, True, True, _NOTHING, "with delta.enableIcebergCompatV2=true (column mapping on; a new table gets "
           "mode name): as icebergCompatV1 but deletion vectors off (not the feature), V2's type allow-list (no void, variant, interval, "
           "geometry/geography), array elements and map keys/values get field ids (delta.columnMapping.nested.ids, written as Parquet "
           "field ids); not with icebergCompatV1; enabling refuses live deletion vectors"),
        _f("icebergCompatV3", False, True, False, _NOTHING, "refused: Iceberg compatibility constraints not enforced"),
        _f("icebergWriterCompatV1", False, True, False, _NOTHING, "refused: Iceberg compatibility constraints not enforced"),
        _f("allowColumnDefaults", False, True, True, _NOTHING, "CURRENT_DEFAULT stored when an append or overwrite lacks the column "
           "(a merge insert or update that omits it stores NULL)"),
        _f("materializePartitionColumns", False, True, True, "partition values come from the log (copies in data files ignored, as Delta reads them)",
           "every new data file (writes, overwrites, DML rewrites, optimize, Spark tasks) also holds the partition columns, after the data columns, without stats; delta.enableMaterializePartitionColumnsFeature=true lists it"),
        _f("checkpointProtection", False, True, True, _NOTHING, "log cleanup stops short of delta.requireCheckpointProtectionBeforeVersion only where lakelog supports every removed version's protocol, else removes everything before it in one go or nothing (commits before checkpoints); checkpoints only at versions lakelog can write"),
        _f("collations", False, True, True, "read filters compare UTF8_LCASE columns lower-cased (as Spark), SQL predicates of "
           "delete/update/merge also ICU collations (DuckDB's ICU); filters on other collations refused; no file skipping "
           "by a collated column's min/max", "__COLLATIONS kept through every write, schema change and column mapping (the "
           "feature listed by every commit whose schema holds one); no min/max stats for collated columns (nullCount kept, "
           "no statsWithCollation); CHECK constraints, generated columns, defaults and update/merge values compare under the "
           "collation as Spark does; two columns' different collations compared: CollationMismatchError"),
        _f("collations-preview", False, True, True, "as collations", "as collations"),
        _f("variantType", True, True, True, "variant columns read as struct<value, metadata> of their Parquet Variant binaries "
           "(to_pandas: Python values; to_duckdb/to_polars: JSON text)",
           "variant columns written unshredded, byte for byte as given (struct, JSON text or Python values encoded); "
           "nullCount stats only; comparisons on variant columns refused; new tables with a variant column get reader 3 / "
           "writer 7 with variantType"),
        _f("variantType-preview", True, True, True, "as variantType", "as variantType (kept: new variant columns do not add variantType)"),
        _f("variantShredding", True, True, True, "shredded variant columns (typed_value) reassembled into their binaries; "
           "variant min/max stats never used", "new files written unshredded: the protocol lets writers write unshredded "
           "variants in any table, shredding enabled (delta.enableVariantShredding) or not"),
        _f("variantShredding-preview", True, True, True, "as variantShredding", "as variantShredding"),
        _f("catalogManaged", True, False, False, "refused: the catalog, not _delta_log, holds the commits", _REFUSED),
        _f("catalogOwned-preview", True, False, False, "refused, as catalogManaged", _REFUSED),
        _f("geospatial", True, True, True, "geometry(<crs>) / geography(<crs>, <algorithm>) columns read as WKB in the geoarrow.wkb "
           "extension type (lakelog.geometry / lakelog.geography); DNF filters on them refused",
           "WKB kept byte for byte in Parquet GEOMETRY / GEOGRAPHY columns (no column stats: pyarrow writes none for them); "
           "the feature is added with the "
           "first such column; geographies other than spherical refused (pyarrow cannot record their edges)"),
        _f("coordinatedCommits-preview", False, True, False, _NOTHING, "refused: commits go through a commit coordinator"),
        _f("redirectReaderWriter-preview", True, False, False, "refused: the table redirects to another location", _REFUSED),
        _f("redirectWriterOnly-preview", False, True, False, _NOTHING, "refused: writes redirect to another location"),
    ]
}

# Features implied by legacy protocol versions ("Writer Version Requirements").
LEGACY_WRITER_FEATURES = {
    2: ("appendOnly", "invariants"),
    3: ("checkConstraints",),
    4: ("changeDataFeed", "generatedColumns"),
    5: ("columnMapping",),
    6: ("identityColumns",),
}

# Writer features that only VACUUM and log cleanup may honour (Snapshot.check_writable refuses data writes).
NO_DATA_WRITES: dict[str, str] = {}

READABLE = frozenset(n for n, f in REGISTRY.items() if f.readable)
WRITABLE = frozenset(n for n, f in REGISTRY.items() if f.writable)


def _describe(names: list[str], role: str) -> str:
    parts = []
    for n in names:
        f = REGISTRY.get(n)
        why = (f.read if role == "read" else f.write) if f is not None else "unknown to lakelog"
        parts.append(f"{n!r} ({why})")
    return ", ".join(parts)


def check_read(protocol: Protocol) -> None:
    """Refuse a protocol lakelog cannot read: reader version above 3, or reader features it does not
    implement (named in the error). Reader version 2 (column mapping) is checked by the caller through
    ``delta.columnMapping.mode``."""
    p = protocol
    if p.min_reader_version > 3:
        listed = sorted(set(p.reader_features or []) | set(p.writer_features or []))
        unknown = [n for n in listed if n not in REGISTRY]
        also = f"; it also lists feature(s) unknown to lakelog: {unknown}" if unknown else ""
        raise UnsupportedFeatureError(f"table needs reader version {p.min_reader_version}; lakelog reads versions 1 to 3{also}")
    if p.min_reader_version == 3:
        unknown = sorted(set(p.reader_features or []) - READABLE)
        if unknown:
            raise UnsupportedFeatureError(
                f"table uses reader feature(s) {unknown} that lakelog does not implement: {_describe(unknown, 'read')}. "
                f"lakelog reads {sorted(READABLE & {n for n, f in REGISTRY.items() if f.reader})}; "
                "read it with an engine that supports them (see specs/PROTOCOL.md)"
            )


def check_variant_protocol(schema: pa.Schema, protocol: Protocol) -> None:
    """Refuse a table whose schema has variant columns that its protocol does not declare (``variantType``
    or ``variantType-preview`` in both lists, as the protocol requires): no reader may assume the type."""
    from ..schema.types import has_variant

    if not has_variant(schema):
        return
    names = {"variantType", "variantType-preview"}
    if not (names & set(protocol.reader_features or []) and names & set(protocol.writer_features or [])):
        raise UnsupportedFeatureError(
            f"the table has variant column(s) {[f.name for f in schema if has_variant(f)]} but its protocol (reader "
            f"{protocol.min_reader_version}, writer {protocol.min_writer_version}) does not list the variantType feature "
            "in both its reader and writer features, as the Delta protocol requires; the writer that made it does not follow "
            "the protocol, so lakelog does not read it"
        )


def check_write(protocol: Protocol) -> None:
    """Refuse a protocol lakelog cannot write (after ``check_read``): writer version above 7, or writer
    features it cannot honour (named in the error)."""
    p = protocol
    if p.min_writer_version > 7:
        raise UnsupportedFeatureError(f"table needs writer version {p.min_writer_version}; lakelog writes versions up to 7")
    if p.min_writer_version == 7:
        unknown = sorted(set(p.writer_features or []) - WRITABLE)
        if unknown:
            raise UnsupportedFeatureError(
                f"table uses writer feature(s) {unknown} that lakelog cannot honour: {_describe(unknown, 'write')}; "
                "write it with an engine that supports them (see specs/PROTOCOL.md)"
            )


def ict_enabled(protocol: Protocol | None, metadata: Metadata | None) -> bool:
    """Whether commits of a table with this protocol and metadata carry in-commit timestamps."""
    if protocol is None or metadata is None:
        return False
    return "inCommitTimestamp" in writer_features(protocol) and TableProperties(metadata.configuration).in_commit_timestamps


def writer_features(protocol: Protocol) -> set[str]:
    """The writer features a protocol has: listed ones on writer version 7, implied ones before."""
    if protocol.min_writer_version >= 7:
        return set(protocol.writer_features or [])
    out: set[str] = set()
    for v in range(2, protocol.min_writer_version + 1):
        out.update(LEGACY_WRITER_FEATURES.get(v, ()))
    return out


def is_supported(protocol: Protocol, feature: str) -> bool:
    """Whether ``feature`` is supported by (listed in, or implied by) ``protocol``."""
    return feature in writer_features(protocol)


def features_for_properties(configuration: dict[str, str] | None) -> tuple[set[str], set[str]]:
    """(reader features, writer features) that table properties turn on and lakelog writes."""
    props = TableProperties(configuration)
    reader: set[str] = set()
    writer: set[str] = set()
    if props.checkpoint_policy == "v2":
        reader.add("v2Checkpoint")
        writer.add("v2Checkpoint")
    if props.in_commit_timestamps:
        writer.add("inCommitTimestamp")
    if props.column_mapping_mode != "none":
        reader.add("columnMapping")
        writer.add("columnMapping")
    if props.change_data_feed:
        writer.add("changeDataFeed")
    if props.get("delta.enableRowTracking"):
        writer.update(("rowTracking", "domainMetadata"))
    if props.get("delta.enableDeletionVectors"):
        reader.add("deletionVectors")
        writer.add("deletionVectors")
    if props.get("delta.enableIcebergCompatV1"):
        writer.add("icebergCompatV1")
    if props.get("delta.enableIcebergCompatV2"):
        writer.add("icebergCompatV2")
    if props.get("delta.enableMaterializePartitionColumnsFeature"):
        writer.add("materializePartitionColumns")
    return reader, writer

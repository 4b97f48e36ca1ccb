"""The schema, ``metaData`` and protocol a write commits: the table schema a write's data makes (new,
evolved or kept), column mapping for new columns, and the lowest protocol covering every feature the
table then uses, as Delta picks it."""

from __future__ import annotations

import pyarrow as pa

from .. import collations
from ..actions import Metadata, Protocol
from .. import iceberg_compat
from ..column_mapping import MAX_COLUMN_ID, mapped_schema_string
from ..conform import merge_schema
from ..errors import SchemaMismatchError
from ..features import LEGACY_WRITER_FEATURES, features_for_properties
from ..geospatial import is_geo, uses_geospatial
from ..properties import TableProperties
from ..schema import arrow_field_to_delta, canonical_schema, check_column_names, delta_type_string, has_variant, schema_to_string, uses_timestamp_ntz
from ..snapshot import Snapshot
from ..writer_features.generated import keep_field_metadata


def plan_schema(
    data_schema: pa.Schema,
    snapshot: Snapshot | None,
    mode: str,
    partition_by: list[str] | None,
    schema_mode: str | None,
) -> tuple[pa.Schema, list[str], bool]:
    """Return (table schema, partition columns, metadata_changed)."""
    if snapshot is None or (mode == "overwrite" and schema_mode == "overwrite"):
        check_column_names(data_schema, mapped=True)  # the characters: in plan_write, which knows the mapping mode
        schema = canonical_schema(data_schema)
        parts = list(partition_by or [])
        for c in parts:
            if c not in schema.names:
                raise SchemaMismatchError(f"partition column {c!r} is not in the data (columns: {schema.names})")
            t = schema.field(c).type
            if pa.types.is_nested(t) or pa.types.is_null(t) or is_geo(t):
                raise SchemaMismatchError(f"cannot partition by {c!r} of type {delta_type_string(t)}; partition columns must be primitive and typed")
        if len(parts) == len(schema):
            raise SchemaMismatchError("a table needs at least one column that is not a partition column")
        # (field metadata too: an overwrite may change only a column's collation)
        changed = snapshot is None or not schema.equals(snapshot.schema, check_metadata=True) or parts != snapshot.partition_columns
        return schema, parts, changed

    current = snapshot.schema
    if partition_by is not None and list(partition_by) != snapshot.partition_columns:
        raise SchemaMismatchError(
            f"partition_by={list(partition_by)} differs from the table's partitioning {snapshot.partition_columns}; "
            "omit partition_by, or overwrite with schema_mode='overwrite' to repartition"
        )
    merged = merge_schema(current, data_schema, schema_mode == "merge")
    return merged, snapshot.partition_columns, merged != current


def mapped_schema(schema: pa.Schema, configuration: dict[str, str], sources: list[str | None]) -> tuple[str, dict[str, str]]:
    """(schemaString, configuration) of a column-mapping table with ``schema``: fields keep the column
    mapping metadata they have in the first of ``sources`` (schema strings) naming them; new fields get
    fresh ids and physical names (and, with IcebergCompatV2, array elements and map keys and values
    their nested ids), and ``delta.columnMapping.maxColumnId`` follows."""
    plain = {"type": "struct", "fields": [arrow_field_to_delta(f) for f in schema]}
    string, max_id = mapped_schema_string(plain, sources, int(configuration.get(MAX_COLUMN_ID) or 0))
    return iceberg_compat.with_nested_ids(string, {**configuration, MAX_COLUMN_ID: str(max_id)})


def evolved_metadata(snapshot: Snapshot, schema: pa.Schema, configuration: dict[str, str] | None = None, sources: list[str | None] = ()) -> Metadata:
    """The snapshot's ``metaData`` with ``schema`` (column mapping kept; new columns mapped, ``sources``
    first: where files for them were already written) and ``configuration``."""
    m = snapshot.metadata
    conf = {**m.configuration, **(configuration or {})}
    if TableProperties(conf).column_mapping_mode != "none":
        schema_string, conf = mapped_schema(schema, conf, [m.schema_string, *sources])
    else:
        schema_string = schema_to_string(schema)
    schema_string = keep_field_metadata(schema_string, m.schema_string)
    return Metadata(id=m.id, schema_string=schema_string, partition_columns=m.partition_columns, configuration=conf, created_time=m.created_time,
                    name=m.name, description=m.description, format_provider=m.format_provider, format_options=m.format_options)


# The legacy writer version that implies each feature (Delta picks the lowest that covers the table).
LEGACY_WRITER_VERSION = {f: v for v, names in LEGACY_WRITER_FEATURES.items() for f in names}


def schema_features(schema_string: str | None) -> set[str]:
    """Writer features a schema's field metadata uses (generated columns, invariants, column defaults)."""
    if not schema_string:
        return set()
    out = set()
    if '"delta.generationExpression"' in schema_string:
        out.add("generatedColumns")
    if '"delta.invariants"' in schema_string:
        out.add("invariants")
    if '"CURRENT_DEFAULT"' in schema_string:
        out.add("allowColumnDefaults")
    if '"delta.identity.start"' in schema_string:
        out.add("identityColumns")
    if '"__COLLATIONS"' in schema_string:
        out.update(collations.FEATURES)
    return out


def plan_protocol(schema: pa.Schema, current: Protocol | None, configuration: dict[str, str] | None = None, schema_string: str | None = None,
                  writer_features: frozenset[str] = frozenset()) -> Protocol | None:
    """The protocol the table needs (None when ``current`` already suffices).

    Plain tables get (1, 2). A ``timestamp_ntz`` column needs (3, 7) with the ``timestampNtz`` feature (a
    geometry or geography column: ``geospatial``; a variant column: ``variantType``, kept as
    ``variantType-preview`` where the table lists that), and
    so do properties that turn a feature on (``delta.checkpointPolicy=v2``: ``v2Checkpoint``;
    ``delta.enableInCommitTimestamps``: ``inCommitTimestamp``, writer version 7); on writer version 7 every
    feature in use must be listed, so ``appendOnly`` is listed when it is on. Column mapping alone takes
    the legacy (2, 5), as Delta does; with other features it is listed in both lists.
    """
    append_only = TableProperties(configuration).append_only
    by_properties_reader, by_properties_writer = features_for_properties(configuration)
    if any(k.startswith("delta.constraints.") for k in (configuration or {})):
        by_properties_writer.add("checkConstraints")
    by_properties_writer |= schema_features(schema_string) | writer_features
    if collations.table_collations(schema):  # (whatever schema string the caller has: the columns' own collations)
        by_properties_writer.update(collations.FEATURES)
    if current is not None and "collations-preview" in (current.writer_features or []):
        by_properties_writer.discard("collations")  # (its preview name already covers it)
    widened = bool(schema_string and '"delta.typeChanges"' in schema_string) or TableProperties(configuration).get("delta.enableTypeWidening")
    if widened and not (current and "typeWidening-preview" in (current.reader_features or [])):
        by_properties_reader.add("typeWidening")  # (a reader feature: readers must cast older files)
        by_properties_writer.add("typeWidening")
    if has_variant(schema) and not (current and "variantType-preview" in (current.reader_features or [])):
        by_properties_reader.add("variantType")  # (reader and writer feature: every reader must know the type)
        by_properties_writer.add("variantType")
    type_features = ({"timestampNtz"} if uses_timestamp_ntz(schema) else set()) | ({"geospatial"} if uses_geospatial(schema) else set())
    if (current is None or current.min_writer_version < 7) and not type_features and by_properties_writer <= set(LEGACY_WRITER_VERSION):
        # Legacy versions suffice, as Delta picks them: column mapping alone is reader 2 / writer 5,
        # a CHECK constraint writer 3, a generated column writer 4.
        reader_version, writer_version = (1, 2) if current is None else (current.min_reader_version, current.min_writer_version)
        if append_only:
            writer_version = max(writer_version, 2)  # legacy versions from 2 on imply appendOnly
        for f in by_properties_writer:
            writer_version = max(writer_version, LEGACY_WRITER_VERSION[f])
        if "columnMapping" in by_properties_writer:
            reader_version = max(reader_version, 2)
        if current is not None and (reader_version, writer_version) == (current.min_reader_version, current.min_writer_version):
            return None
        return Protocol(reader_version, writer_version)
    needs_reader = type_features | by_properties_reader
    needs_writer = needs_reader | by_properties_writer | ({"appendOnly"} if append_only else set())
    reader = set((current.reader_features or []) if current and current.min_reader_version >= 3 else [])
    writer = set((current.writer_features or []) if current and current.min_writer_version >= 7 else [])
    if current is not None and current.min_writer_version >= 7 and needs_writer <= writer and (not needs_reader or (current.min_reader_version >= 3 and needs_reader <= reader)):
        return None
    if current is not None and current.min_writer_version < 7:
        # Features implied by the legacy writer version must be listed once on version 7.
        writer.update(f for f, v in LEGACY_WRITER_VERSION.items() if v <= current.min_writer_version)
    if current is not None and current.min_reader_version >= 3 or needs_reader:
        reader_version, reader_features = 3, sorted(reader | needs_reader)
    else:
        reader_version, reader_features = (current.min_reader_version if current else 1), None
    return Protocol(reader_version, 7, reader_features, sorted(writer | needs_writer))

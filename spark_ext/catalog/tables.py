"""A lakelog table as Spark's catalog API shows it: its schema in Spark's types (with the column defaults,
generation expressions and comments the log records), partitioning, clustering and properties."""

from __future__ import annotations

import json

import orjson

import lakelog

from lakelog.table_features.row_rules import GENERATION_KEY

from ..datasource.source import spark_schema

# Field metadata that stays in the log: Spark's types already say it (collations) or it names files
# (column mapping).
_IDENTITY_KEYS = {"delta.identity.start": "identity.start", "delta.identity.step": "identity.step",
                  "delta.identity.allowExplicitInsert": "identity.allowExplicitInsert"}
_NOT_SHOWN = ("__COLLATIONS", "delta.columnMapping.id", "delta.columnMapping.physicalName", "parquet.field.id")


def table_info(table: lakelog.Table) -> str:
    """The JSON the JVM's ``LakelogTableInfo.parse`` reads."""
    from lakelog.table_features.clustering import clustering_columns

    schema = json.loads(spark_schema(table.schema).json())
    logged = {f["name"]: f.get("metadata") or {} for f in json.loads(table.metadata.schema_string)["fields"]}
    for field in schema["fields"]:
        meta = {k: v for k, v in logged.get(field["name"], {}).items() if k not in _NOT_SHOWN}
        # Spark's names for what Delta's keys say, so that Spark fills a generated column an INSERT leaves
        # out, and shows generation and identity in DESCRIBE and SHOW CREATE TABLE.
        if GENERATION_KEY in meta:
            meta["GENERATION_EXPRESSION"] = meta[GENERATION_KEY]
        for delta_key, spark_key in _IDENTITY_KEYS.items():
            if delta_key in meta:
                meta[spark_key] = meta[delta_key]
        field["metadata"] = {**meta, **(field.get("metadata") or {})}
    m = table.metadata
    return orjson.dumps({
        "path": table.path,
        "version": table.version,
        "schema": json.dumps(schema),
        "partitionColumns": list(table.partition_columns),
        "clusteringColumns": list(clustering_columns(table.snapshot) or []),
        "properties": {str(k): str(v) for k, v in m.configuration.items()},
        "description": m.description,
    }).decode()

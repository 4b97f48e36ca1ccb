"""Adopt existing Parquet data in place: a Spark file-sink output or a plain Parquet directory.

``convert(path)`` commits the files that make up the data set at ``path`` as version 0 of a new
lakelog table. No data file is copied or rewritten: each becomes an ``add`` whose path is relative to
``path``. The source decides which files count:

* ``path/_spark_metadata`` exists (Spark Structured Streaming's file sink): exactly the files its
  metadata log lists as committed, read the way Spark reads it (the newest ``N.compact`` batch plus
  every later batch file). Files of failed or retried batches, which sit in the same directories, are
  not part of the table.
* otherwise (a plain, optionally Hive-partitioned Parquet directory): every ``*.parquet`` file, skipping
  names that start with ``_`` or ``.`` (files and directories, except ``_k=v`` partition
  directories), as Spark does.

The schema is the union of the Parquet footers' schemas (columns missing from some files read as
null; an integer or float column may widen across files; any other difference is a
``SchemaMismatchError``). Every column becomes nullable. Statistics come from the footers' row-group
statistics through the writer's own ``stats_from_parquet_metadata`` (so they have the same JSON form); a
statistic some row group lacks is left out. Partition values come from ``k=v`` directories (Hive-unescaped; ``__HIVE_DEFAULT_PARTITION__`` and
an empty value are null); see ``infer_partition_type`` for how their types are chosen.

Modules: ``sources`` (which files: a directory listing or the ``_spark_metadata`` log), ``partitions``
(partition columns, their types and values), ``footers`` (the unified schema and the stats from Parquet footers).
"""

from __future__ import annotations

import uuid
from typing import Any

from ..actions import AddFile, Metadata, encode_path, now_ms
from ..errors import ConvertError, NanosecondTimestampError, SchemaMismatchError, TableExistsError
from ..schema.types import check_column_names, schema_to_string
from .. import catalog
from ..storage import Storage
from ..transaction import Transaction
from ..write import plan_protocol
from .footers import file_stats, read_footers, refuse_nanosecond_timestamps, unify_schemas
from .partitions import check_stored_partition_values, hive_unescape, infer_partition_type, parse_partition_by, partition_dirs, plan_partitions
from .sources import SPARK_METADATA, SparkMetadataLogError, SparkMetadataVersionError, directory_files, is_dir, list_tree, read_spark_metadata, sink_files


__all__ = [
    "convert",
    "ConvertError",
    "NanosecondTimestampError",
    "SparkMetadataLogError",
    "SparkMetadataVersionError",
    "infer_partition_type",
    "hive_unescape",
    "read_spark_metadata",
]


def convert(
    path: str,
    *,
    partition_by: Any = None,
    storage_options: dict[str, Any] | None = None,
) -> int:
    """Turn the Spark file-sink output or Parquet directory at ``path`` into a lakelog table, in place.

    ``partition_by``: None (partition columns and their types come from the ``k=v`` directories), or
    the partition columns the directories must have, each a name or ``"name:type"`` / ``"name type"``
    (Delta type names: ``string``, ``integer``/``int``, ``long``/``bigint``, ``double``, ``date``,
    ``timestamp``, ``boolean``, ``decimal(p,s)``, ...), as a list, a comma-separated string or a
    ``{name: type or None}`` dict. An empty list means "not partitioned". A given type overrides
    inference. Returns the committed version (0). ``path`` may be a registered catalog name
    (``glue://database/table``).

    Raises ``TableExistsError`` when ``path`` already has a ``_delta_log``,
    ``SparkMetadataLogError`` (a ``CorruptLogError``) for a damaged ``_spark_metadata`` log,
    ``InvalidPathError`` for a committed file outside ``path``, ``SchemaMismatchError`` for files whose
    schemas cannot be unified, and ``ConvertError`` for other layouts that cannot be converted.
    """
    requested = parse_partition_by(partition_by)
    path, _ = catalog.resolve(path, storage_options)  # a registered glue://database/table name: its location
    storage = Storage(path, storage_options)
    storage.check_atomic_commits()
    if storage.list_dir(storage.log_dir):
        raise TableExistsError(
            f"{path!r} already has a _delta_log directory: it is a table already (read it with lakelog.Table), "
            "or the remains of one. Remove the _delta_log directory to convert the Parquet files anew."
        )
    listing = list_tree(storage)
    spark_log = storage.join(SPARK_METADATA)
    extra: dict[str, Any] = {}
    if is_dir(storage, spark_log):
        source = "spark-file-sink"
        log = read_spark_metadata(storage)
        files = sink_files(storage, log, listing)
        extra["sparkMetadataBatchId"] = log.latest_batch
    else:
        source = "parquet"
        files = directory_files(listing)
    if not files:
        what = "the _spark_metadata log lists no committed files" if source == "spark-file-sink" else "it holds no *.parquet files"
        raise ConvertError(
            f"nothing to convert at {path!r}: {what}, so there is no schema to take. "
            "Create the table with lakelog.write_table() instead."
        )

    dirs = partition_dirs(files)
    footers = read_footers(storage, files)
    refuse_nanosecond_timestamps(footers)
    data_schema = unify_schemas(footers)
    schema, parts, values = plan_partitions(data_schema, dirs, requested)
    check_column_names(schema)
    if len(parts) == len(schema):
        raise SchemaMismatchError("a table needs at least one column that is not a partition column")
    check_stored_partition_values(storage, footers, schema, parts, values)

    adds = [
        AddFile(
            path=encode_path(f.rel),
            partition_values=values[f.rel],
            size=f.size,
            modification_time=f.mtime_ms,
            data_change=True,
            stats=file_stats(footers[f.rel]),
        )
        for f in files
    ]
    protocol = plan_protocol(schema, None)
    metadata = Metadata(
        id=str(uuid.uuid4()),
        schema_string=schema_to_string(schema),
        partition_columns=parts,
        configuration={},
        created_time=now_ms(),
    )
    params: dict[str, Any] = {"source": source, "numFiles": len(adds), "partitionedBy": parts, "collectStats": True, **extra}
    txn = Transaction(storage, None, "CONVERT", params)
    return txn.commit([protocol, metadata, *adds]).version

"""A snapshot's data files as a DataFrame read by Python workers through lakelog's storage.

Delete, update and merge read their candidate files with Spark's own Parquet source where Spark has a
Hadoop filesystem for the table's location (``spark_ext.scan.native``). Where it has none (``az://``,
``gs://`` or ``abfss://`` without the Hadoop connector), or the table has variant columns (Spark's
source would not reassemble shredded variants), they read them here instead: one task per group
of files, each file read with ``lakelog.read.scan.read_data_file`` (column mapping, partition values and
deletion vectors applied), with the same FILE / ROW / stored columns and the same file names
(``spark_path``) as the native scan, so the rest of the operation cannot tell the two apart.
"""

from __future__ import annotations

import orjson
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from lakelog.schema.types import has_variant
from lakelog.log.snapshot import Snapshot
from lakelog.storage import Storage

from .files import conform
from .native import hadoop_readable, snapshot_frame, spark_path
from ..schema.variants import from_lakelog_schema


def files_frame(spark, path: str, storage_options: dict | None, storage: Storage, snapshot: Snapshot, files: list[str],
                file_column: str | None = None, row_column: str | None = None, stored: dict[str, str] | None = None) -> DataFrame:
    """``snapshot_frame``'s DataFrame (same arguments, same columns), scanned natively where Spark can
    read the location, else by Python workers (``python_frame``). Tables with variant columns are always
    read by Python workers: their files may store variants shredded, which lakelog reassembles."""
    if hadoop_readable(spark, storage) and not has_variant(snapshot.schema):
        return snapshot_frame(spark, storage, snapshot, files, file_column, row_column, stored)
    return python_frame(spark, path, storage_options, storage, snapshot, files, file_column, row_column, stored)


def python_frame(spark, path: str, storage_options: dict | None, storage: Storage, snapshot: Snapshot, files: list[str],
                 file_column: str | None = None, row_column: str | None = None, stored: dict[str, str] | None = None) -> DataFrame:
    snapshot.check_readable()
    schema, parts, mapping = snapshot.schema, snapshot.partition_columns, snapshot.column_mapping
    spark_schema = from_lakelog_schema(schema, prefer_timestamp_ntz=True)
    if file_column is not None:
        spark_schema = spark_schema.add(file_column, T.StringType(), False)
    if row_column is not None:
        spark_schema = spark_schema.add(row_column, T.LongType(), False)
    for name in (stored or {}).values():
        spark_schema = spark_schema.add(name, T.LongType(), True)
    out = to_arrow_schema(spark_schema, timezone="UTC")
    entries = [(orjson.dumps(snapshot.files[rel].to_json()["add"]).decode(), spark_path(storage, rel)) for rel in files]
    stored_items = tuple((stored or {}).items())
    position = row_column or "__lakelog_position"

    def read(batches):
        from lakelog.actions import AddFile
        from lakelog.table_features.deletion_vectors import DeletionVectors
        from lakelog.read.scan import read_data_file

        store = Storage(path, storage_options)
        dvs = DeletionVectors(store)
        for batch in batches:
            for add_json, name in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
                add = AddFile.from_json(orjson.loads(add_json))
                t = read_data_file(store, add, schema, parts, schema.names, mapping, dvs, row_index=position,
                                   extra=tuple(c for c, _ in stored_items))
                cols = [t.column(c) for c in schema.names]
                if file_column is not None:
                    cols.append(pa.array([name] * t.num_rows, pa.string()))
                if row_column is not None:
                    cols.append(t.column(position))
                for c, _ in stored_items:
                    cols.append(t.column(c) if c in t.column_names else pa.nulls(t.num_rows, pa.int64()))
                for b in pa.Table.from_arrays(cols, names=out.names).to_batches():
                    if b.num_rows:
                        yield conform(b, out)

    n = max(1, min(len(entries), spark.sparkContext.defaultParallelism))
    listing = spark.createDataFrame(entries or [("", "")], "add string, file string")
    if not entries:
        listing = listing.limit(0)
    return listing.repartition(n).mapInArrow(read, spark_schema)

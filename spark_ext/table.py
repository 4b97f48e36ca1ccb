"""``LakelogTable``: a handle on a table with Delta's ``DeltaTable`` names, for Spark jobs.

Reads go through ``spark_ext.read`` (Spark's own Parquet source over the snapshot's files); delete,
update and merge run on Spark (``spark_ext.dml.jobs``, ``spark_ext.dml.merge``); history, vacuum, optimize,
restore and detail are lakelog's own operations with their results as DataFrames.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import types as T

import lakelog
from lakelog.errors import InvalidArgumentError, TableNotFoundError, UnsupportedFeatureError
from lakelog.schema.types import has_variant

from .datasource.source import register_source
from .dml.jobs import delete as _delete
from .dml.jobs import update as _update
from .dml.merge import LakelogMergeBuilder
from .scan.native import hadoop_readable
from .scan.native import snapshot_frame
from .cluster.paths import driver_path
from .cluster.workers import use_driver_python

HISTORY_SCHEMA = T.StructType(
    [
        T.StructField("version", T.LongType()),
        T.StructField("timestamp", T.TimestampType()),
        T.StructField("userId", T.StringType()),
        T.StructField("userName", T.StringType()),
        T.StructField("operation", T.StringType()),
        T.StructField("operationParameters", T.MapType(T.StringType(), T.StringType())),
        T.StructField("readVersion", T.LongType()),
        T.StructField("isolationLevel", T.StringType()),
        T.StructField("isBlindAppend", T.BooleanType()),
        T.StructField("operationMetrics", T.MapType(T.StringType(), T.StringType())),
        T.StructField("userMetadata", T.StringType()),
        T.StructField("engineInfo", T.StringType()),
    ]
)

DETAIL_SCHEMA = T.StructType(
    [
        T.StructField("format", T.StringType()),
        T.StructField("id", T.StringType()),
        T.StructField("name", T.StringType()),
        T.StructField("description", T.StringType()),
        T.StructField("location", T.StringType()),
        T.StructField("createdAt", T.TimestampType()),
        T.StructField("lastModified", T.TimestampType()),
        T.StructField("partitionColumns", T.ArrayType(T.StringType())),
        T.StructField("clusteringColumns", T.ArrayType(T.StringType())),
        T.StructField("numFiles", T.LongType()),
        T.StructField("sizeInBytes", T.LongType()),
        T.StructField("properties", T.MapType(T.StringType(), T.StringType())),
        T.StructField("minReaderVersion", T.IntegerType()),
        T.StructField("minWriterVersion", T.IntegerType()),
        T.StructField("tableFeatures", T.ArrayType(T.StringType())),
        T.StructField("version", T.LongType()),
    ]
)


def _text_map(d: Any) -> dict[str, str] | None:
    if not isinstance(d, dict):
        return None
    return {str(k): (v if isinstance(v, str) else lakelog_json(v)) for k, v in d.items()}


def lakelog_json(v: Any) -> str:
    import orjson

    return orjson.dumps(v, default=str).decode()


def _metrics_frame(spark, metrics: dict[str, Any]) -> DataFrame:
    """One row: each metric as a column (numbers as bigint, the rest as text)."""
    fields, values = [], []
    for k, v in metrics.items():
        if isinstance(v, bool) or not isinstance(v, int):
            fields.append(T.StructField(k, T.StringType()))
            values.append(None if v is None else str(v))
        else:
            fields.append(T.StructField(k, T.LongType()))
            values.append(v)
    return spark.createDataFrame([tuple(values)], T.StructType(fields))


class LakelogTable:
    """A lakelog table opened by path, with Delta's ``DeltaTable`` methods.

    Each call works on the table's latest version. ``storage_options`` are lakelog's (for reading the
    log and writing files). Where Spark has no Hadoop filesystem for the path (``az://``, ``gs://``
    without the connector) reads go through ``format("lakelog")`` and lakelog's storage. A relative
    local path is resolved against the driver's working directory, as Spark's file sources resolve it.
    """

    def __init__(self, spark, path: str, storage_options: dict | None = None, alias: str | None = None):
        use_driver_python(spark)  # delete/update/merge run Python functions on the workers
        self._spark = spark
        self._path = str(driver_path(spark, path, storage_options))
        self._storage_options = storage_options
        self._alias = alias

    # ------------------------------------------------------------ opening
    @classmethod
    def forPath(cls, spark, path: str, storage_options: dict | None = None) -> "LakelogTable":
        """The table at ``path``; ``TableNotFoundError`` when there is none."""
        path = driver_path(spark, path, storage_options)
        lakelog.Table(path, storage_options=storage_options)  # fails now, not at the first action
        return cls(spark, path, storage_options)

    @classmethod
    def isLakelogTable(cls, spark, path: str, storage_options: dict | None = None) -> bool:
        """Whether ``path`` holds a table (a ``_delta_log`` with commits)."""
        try:
            lakelog.Table(driver_path(spark, path, storage_options), storage_options=storage_options)
        except TableNotFoundError:
            return False
        return True

    isDeltaTable = isLakelogTable

    def _table(self) -> lakelog.Table:
        return lakelog.Table(self._path, storage_options=self._storage_options)

    @property
    def path(self) -> str:
        return self._path

    # ------------------------------------------------------------ reads
    def toDF(self) -> DataFrame:
        """The latest version as a DataFrame scanned by Spark's Parquet source (``spark_ext.read``), or by
        ``format("lakelog")`` where Spark has no Hadoop filesystem for the path or the table has variant
        columns (which files may store shredded); aliased if ``alias`` was called."""
        df = self.snapshot_df()
        return df.alias(self._alias) if self._alias else df

    def snapshot_df(self, version: int | None = None, table: lakelog.Table | None = None) -> DataFrame:
        """The table at ``version`` (None: the latest; or the loaded ``table``) as ``toDF`` reads it, unaliased."""
        if table is None:
            table = lakelog.Table(self._path, version=version, storage_options=self._storage_options)
        if hadoop_readable(self._spark, table.storage) and not has_variant(table.schema):
            return snapshot_frame(self._spark, table.storage, table.snapshot)
        register_source(self._spark)
        options = {f"storage.{k}": str(v) for k, v in (self._storage_options or {}).items()}
        return self._spark.read.format("lakelog").options(**options).option("versionAsOf", str(table.version)).load(self._path)

    def alias(self, name: str) -> "LakelogTable":
        """This table under an alias, for ``toDF()`` and for ``merge`` conditions (``t.id = s.id``)."""
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"alias takes a name, not {name!r}")
        return LakelogTable(self._spark, self._path, self._storage_options, name)

    def history(self, limit: int | None = None) -> DataFrame:
        """Commit history, newest first, with the columns of Delta's ``DESCRIBE HISTORY`` that a commit
        records (``version``, ``timestamp``, ``operation``, ``operationParameters``, ``readVersion``,
        ``isBlindAppend``, ``operationMetrics``, ``userMetadata``, ``engineInfo``, ...)."""
        rows = []
        for h in self._table().history(limit):
            ts = h["timestamp"]
            rows.append(
                (
                    h["version"],
                    ts,  # an aware UTC datetime: an instant, whatever the session's time zone
                    h.get("userId"),
                    h.get("userName"),
                    h.get("operation"),
                    _text_map(h.get("operationParameters")) or {},
                    h.get("readVersion"),
                    h.get("isolationLevel"),
                    h.get("isBlindAppend"),
                    _text_map(h.get("operationMetrics")),
                    h.get("userMetadata"),
                    h.get("engineInfo"),
                )
            )
        return self._spark.createDataFrame(rows, HISTORY_SCHEMA)

    def detail(self, name: str | None = None) -> DataFrame:
        """One row describing the table, with the columns of Delta's ``DESCRIBE DETAIL`` (``name``: the
        table's name in Spark's catalog, where it has one)."""
        from lakelog.table_features.clustering import clustering_columns

        t = self._table()
        snap, m, p = t.snapshot, t.metadata, t.protocol
        history = t.history(1)
        features = sorted(set(p.reader_features or []) | set(p.writer_features or []))

        def utc(ms_or_dt):
            if ms_or_dt is None:
                return None
            if isinstance(ms_or_dt, dt.datetime):
                return ms_or_dt
            return dt.datetime.fromtimestamp(ms_or_dt / 1000, dt.timezone.utc)

        row = (
            "delta",
            m.id,
            name or m.name,
            m.description,
            t.storage.uri if hasattr(t.storage, "uri") else self._path,
            utc(m.created_time),
            utc(history[0]["timestamp"]) if history else None,
            list(t.partition_columns),
            list(clustering_columns(snap) or []),
            len(snap.files),
            sum(a.size for a in snap.files.values()),
            dict(m.configuration),
            p.min_reader_version,
            p.min_writer_version,
            features,
            t.version,
        )
        return self._spark.createDataFrame([row], DETAIL_SCHEMA)

    # ------------------------------------------------------------ maintenance
    def vacuum(self, retentionHours: float | None = None) -> DataFrame:
        """Delete data files no version inside the retention window needs (default
        ``delta.deletedFileRetentionDuration``, 7 days; shorter is refused with
        ``RetentionDurationError``). Returns the deleted files' relative paths (column ``path``)."""
        deleted = self._table().vacuum(retention_hours=retentionHours, dry_run=False)
        return self._spark.createDataFrame([(p,) for p in deleted], "path string")

    def optimize(self) -> "LakelogOptimizeBuilder":
        """Compaction: ``optimize().executeCompaction()`` (``.where(...)`` limits it to some partitions)."""
        return LakelogOptimizeBuilder(self)

    def restoreToVersion(self, version: int) -> DataFrame:
        """Commit a new version whose data equal ``version``'s; returns Delta's RESTORE metrics."""
        return _metrics_frame(self._spark, self._table().restore(version=version))

    def restoreToTimestamp(self, timestamp: Any) -> DataFrame:
        """Commit a new version whose data equal those at ``timestamp`` (datetime or ISO string, naive
        means UTC); returns Delta's RESTORE metrics."""
        return _metrics_frame(self._spark, self._table().restore(timestamp=timestamp))

    # ------------------------------------------------------------ row-level changes (on Spark)
    def delete(self, condition: str | Column | None = None, *, txnAppId: str | None = None, txnVersion: int | None = None,
               userMetadata: str | None = None) -> dict:
        """Delete the rows where ``condition`` (Spark SQL text or a Column; None: every row) is TRUE, in one
        ``DELETE`` commit. Returns the metrics of ``lakelog.Table.delete``."""
        return _delete(self, condition, txn=(txnAppId, txnVersion), user_metadata=userMetadata)

    def update(self, condition: str | Column | None = None, set: dict | None = None, *, txnAppId: str | None = None,
               txnVersion: int | None = None, userMetadata: str | None = None) -> dict:
        """Set columns (``{"x": "x + 1"}``: Spark SQL text or Columns) on the rows where ``condition`` is
        TRUE (None: every row), in one ``UPDATE`` commit. Returns the metrics of ``lakelog.Table.update``.
        As Delta, ``update(set)`` with one dict argument updates every row."""
        if set is None and isinstance(condition, dict):
            condition, set = None, condition
        return _update(self, condition, set, txn=(txnAppId, txnVersion), user_metadata=userMetadata)

    def merge(self, source: DataFrame, condition: str | Column) -> LakelogMergeBuilder:
        """Start a MERGE of ``source`` into this table on ``condition``; see ``spark_ext.dml.merge.LakelogMergeBuilder``."""
        return LakelogMergeBuilder(self, source, condition)

    def __repr__(self) -> str:
        return f"LakelogTable({self._path!r}{', alias=' + repr(self._alias) if self._alias else ''})"


class LakelogOptimizeBuilder:
    """``LakelogTable.optimize()``: ``.where(partition filter)`` then ``.executeCompaction()``."""

    def __init__(self, table: LakelogTable):
        self._table = table
        self._filters: Any = None

    def where(self, partitionFilter: Any) -> "LakelogOptimizeBuilder":
        """Limit compaction to some partitions: DNF tuples on partition columns (``[("p", "=", "a")]``)."""
        if isinstance(partitionFilter, str):
            raise UnsupportedFeatureError(
                "optimize().where takes DNF filter tuples on partition columns, e.g. [('day', '=', '2024-01-01')], not SQL text"
            )
        self._filters = partitionFilter
        return self

    def executeCompaction(self, targetSize: int | None = None) -> DataFrame:
        """Compact small files per partition in one ``OPTIMIZE`` commit (on a clustered table: cluster the
        files written since the last clustering); returns ``path`` and ``metrics``."""
        return self._run(target_size=targetSize)

    def executeZOrderBy(self, *columns: str) -> DataFrame:
        """Rewrite each partition's files in Z-order over ``columns`` (Delta's ``OPTIMIZE ... ZORDER BY``)."""
        if len(columns) == 1 and isinstance(columns[0], (list, tuple)):
            columns = tuple(columns[0])
        return self._run(zorder_by=list(columns))

    def _run(self, **kwargs: Any) -> DataFrame:
        t = self._table
        metrics = t._table().optimize(filters=self._filters, **kwargs)
        return t._spark.createDataFrame(
            [(t.path, {k: (v if isinstance(v, str) else lakelog_json(v)) for k, v in metrics.items()})],
            "path string, metrics map<string, string>",
        )

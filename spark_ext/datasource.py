"""The ``lakelog`` Spark data source: batch read/write, streaming sink and source.

Executors write uniquely named Parquet files and return their add actions as commit messages; the
driver's ``commit()`` makes them visible in one atomic lakelog commit. Everything goes through
lakelog's public API (``plan_write``/``WritePlan``, ``Table``).
"""

from __future__ import annotations

import hashlib
import os
import sys
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

import lakelog
from lakelog.actions import AddFile
from lakelog.errors import LakelogError

from .files import MAX_PARTITION_BYTES, FilesPartition
from .files import read_files as _read_files
from .files import split as _split
from .options import boolean as _bool
from .options import partition_by as _partition_by
from .options import storage_options as _storage_options
from .options import table_path as _path
from .planner import filters_will_be_pushed
from .stream_source import LakelogStreamReader


def register(spark) -> None:
    """Register ``format("lakelog")`` on ``spark`` and enable Python filter pushdown."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(LakelogDataSource)


class LakelogDataSource(DataSource):
    """``spark.read.format("lakelog")``, ``df.write.format("lakelog")`` and their streaming forms."""

    @classmethod
    def name(cls) -> str:
        return "lakelog"

    def _table(self) -> lakelog.Table:
        version = self.options.get("versionAsOf")
        ts = self.options.get("timestampAsOf")
        return lakelog.Table(
            _path(self.options),
            version=int(version) if version is not None else None,
            timestamp=ts,
            storage_options=_storage_options(self.options),
        )

    def schema(self) -> StructType:
        return from_arrow_schema(self._table().schema, prefer_timestamp_ntz=True)

    def reader(self, schema: StructType) -> "LakelogReader":
        # Only PySpark's pushdown planner calls pushFilters; the other planner refuses readers that
        # define it when spark.sql.python.filterPushdown.enabled is false (see spark_ext.planner).
        cls = LakelogReader if filters_will_be_pushed() else LakelogScanReader
        return cls(self._table(), schema, self.options)

    def writer(self, schema: StructType, overwrite: bool) -> "LakelogWriter":
        return LakelogWriter(self.options, schema, "overwrite" if overwrite else "append")

    def streamWriter(self, schema: StructType, overwrite: bool) -> "LakelogStreamWriter":
        return LakelogStreamWriter(self.options, schema, "overwrite" if overwrite else "append")

    def streamReader(self, schema: StructType) -> "LakelogStreamReader":
        return LakelogStreamReader(self.options, schema)


# ---------------------------------------------------------------- reading

def _literal_ok(v: Any) -> bool:
    # Floats are not pushed: Spark orders NaN above everything and NaN = NaN, Arrow does not.
    return v is None or (isinstance(v, (int, str, bool)) or type(v).__name__ in ("date", "Decimal")) and not isinstance(v, float)


def _to_expression(f, schema: pa.Schema) -> pc.Expression | None:
    """A Spark filter as an exact pyarrow expression, or None when it cannot be applied exactly."""
    if isinstance(f, Not):
        inner = _to_expression(f.child, schema)
        return None if inner is None else ~inner
    attr = getattr(f, "attribute", None)
    if attr is None or len(attr) != 1 or attr[0] not in schema.names:
        return None
    col = attr[0]
    t = schema.field(col).type
    if pa.types.is_floating(t) or pa.types.is_nested(t) or pa.types.is_timestamp(t) or pa.types.is_binary(t):
        return None
    field = pc.field(col)
    if isinstance(f, IsNull):
        return field.is_null()
    if isinstance(f, IsNotNull):
        return field.is_valid()
    if isinstance(f, In):
        values = [v for v in f.value if v is not None]  # x IN (..., NULL) is never true because of the NULL
        if not all(_literal_ok(v) for v in values):
            return None
        return field.isin(pa.array(values, type=t)) if values else pc.scalar(False)
    value = getattr(f, "value", None)
    if not _literal_ok(value):
        return None
    if isinstance(f, (StringStartsWith, StringEndsWith, StringContains)):
        if not pa.types.is_string(t):
            return None
        fn = {StringStartsWith: pc.starts_with, StringEndsWith: pc.ends_with, StringContains: pc.match_substring}[type(f)]
        return fn(field, pattern=value)
    if value is None:
        return field.is_null() if isinstance(f, EqualNullSafe) else None
    lit = pa.scalar(value, type=t)
    ops = {
        EqualTo: lambda: field == lit,
        EqualNullSafe: lambda: pc.if_else(field.is_null(), False, field == lit),
        GreaterThan: lambda: field > lit,
        GreaterThanOrEqual: lambda: field >= lit,
        LessThan: lambda: field < lit,
        LessThanOrEqual: lambda: field <= lit,
    }
    op = ops.get(type(f))
    return op() if op else None


class LakelogReader(DataSourceReader):
    def __init__(self, table: lakelog.Table, schema: StructType, options):
        self.path = table.path
        self.storage_options = _storage_options(options)
        self.version = table.version
        self.table_schema = table.schema
        self.partition_columns = table.partition_columns
        self.output_schema = to_arrow_schema(schema, timezone="UTC")
        self.filter: pc.Expression | None = None
        self.max_partition_bytes = int(options.get("maxPartitionBytes", MAX_PARTITION_BYTES))
        self._table = table  # driver-side only

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_table"] = None
        return state

    def pushFilters(self, filters):
        accepted = None
        for f in filters:
            e = _to_expression(f, self.table_schema)
            if e is None:
                yield f  # Spark applies it
                continue
            accepted = e if accepted is None else accepted & e
        self.filter = accepted

    def partitions(self):
        snap = self._table.snapshot
        paths = self._table.files(filters=self.filter) if self.filter is not None else list(snap.files)
        return _split([snap.files[rel].to_json()["add"] for rel in paths], self.max_partition_bytes) or [FilesPartition([])]

    def read(self, partition: FilesPartition) -> Iterator[pa.RecordBatch]:
        return _read_files(self.path, self.storage_options, self.table_schema, self.partition_columns, self.output_schema, partition.files, self.filter)


class LakelogScanReader(LakelogReader):
    """``LakelogReader`` without filter pushdown (Spark applies every filter)."""

    pushFilters = DataSourceReader.pushFilters


# ---------------------------------------------------------------- writing

class LakelogCommitMessage(WriterCommitMessage):
    def __init__(self, adds: list[dict]):
        self.adds = adds


def _collect(messages) -> list[AddFile]:
    return [AddFile.from_json(d) for m in messages if m is not None for d in m.adds]


def _task_prefix() -> str:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return "part"
    return f"part-{ctx.partitionId():05d}-a{ctx.attemptNumber()}"


class LakelogWriter(DataSourceArrowWriter):
    """Batch write: plan on the driver, files from tasks, one commit on the driver."""

    def __init__(self, options, schema: StructType, mode: str):
        self.options = options  # case-insensitive keys, as Spark passes them
        arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self.plan = lakelog.plan_write(
            _path(options),
            arrow_schema,
            mode=mode,
            partition_by=_partition_by(options),
            schema_mode="merge" if _bool(options, "mergeSchema") else ("overwrite" if mode == "overwrite" and _bool(options, "overwriteSchema") else None),
            storage_options=_storage_options(options),
        )

    def write(self, iterator: Iterator[pa.RecordBatch]) -> LakelogCommitMessage:
        adds = self.plan.write(iterator, file_prefix=_task_prefix())
        return LakelogCommitMessage([a.to_json()["add"] for a in adds])

    def commit(self, messages) -> None:
        app_id = self.options.get("txnAppId")
        app_version = self.options.get("txnVersion")
        self.plan.commit(
            _collect(messages),
            app_id=app_id,
            app_version=int(app_version) if app_version is not None else None,
            user_metadata=self.options.get("userMetadata"),
        )

    def abort(self, messages) -> None:
        self.plan.abort(_collect(messages))


def stream_app_id(options) -> str:
    """The txn appId of a streaming query: explicit, or derived from its checkpoint location."""
    explicit = options.get("txnAppId") or options.get("queryId")
    if explicit:
        return explicit
    ck = options.get("checkpointLocation")
    if not ck:
        raise LakelogError("a lakelog streaming sink needs option 'checkpointLocation' (or an explicit 'txnAppId') for exactly-once commits")
    return "lakelog-stream-" + hashlib.sha256(os.path.abspath(ck).encode() if "://" not in ck else ck.encode()).hexdigest()[:32]


class LakelogStreamWriter(DataSourceStreamArrowWriter):
    """Streaming sink: each micro-batch is one commit carrying txn(appId, batchId); replays are skipped."""

    def __init__(self, options, schema: StructType, mode: str):
        self.options = options  # case-insensitive keys, as Spark passes them
        self.app_id = stream_app_id(options)
        arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self.plan = lakelog.plan_write(
            _path(options),
            arrow_schema,
            mode=mode,
            partition_by=_partition_by(options),
            schema_mode="merge" if _bool(options, "mergeSchema") else None,
            storage_options=_storage_options(options),
        )

    def write(self, iterator: Iterator[pa.RecordBatch]) -> LakelogCommitMessage:
        adds = self.plan.write(iterator, file_prefix=_task_prefix())
        return LakelogCommitMessage([a.to_json()["add"] for a in adds])

    def commit(self, messages, batchId: int) -> None:
        self.plan.commit(
            _collect(messages),
            app_id=self.app_id,
            app_version=int(batchId),
            user_metadata=self.options.get("userMetadata"),
            operation="STREAMING UPDATE",
            extra_parameters={"epochId": str(batchId), "queryId": self.app_id, "outputMode": "Complete" if self.plan.mode == "overwrite" else "Append"},
        )

    def abort(self, messages, batchId: int) -> None:
        self.plan.abort(_collect(messages))

"""The ``lakelog`` Spark data source: batch read/write, streaming sink and source.

Executors write uniquely named Parquet files and return their add actions as commit messages; the
driver's ``commit()`` makes them visible in one atomic lakelog commit. Everything goes through
lakelog's public API (``plan_write``/``WritePlan``, ``Table``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from typing import Iterator

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
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

import lakelog
from lakelog.schema import collations
from lakelog.actions import AddFile, parse_app_version
from lakelog.errors import CommitConflictError, InvalidArgumentError, LakelogError
from lakelog.schema.geospatial import plain_type
from lakelog.expressions.filters import NEGATED_OP, term_expression

from ..scan.files import MAX_PARTITION_BYTES, FilesPartition
from ..scan.files import read_files as _read_files
from ..scan.files import split as _split
from .options import boolean as _bool
from .options import partition_by as _partition_by
from .options import partition_overwrite_mode as _partition_overwrite_mode
from .options import replace_where as _replace_where
from .options import storage_options as _storage_options
from .options import table_path as _path
from .options import table_properties as _table_properties
from .options import version as _version
from .planner import in_read_planner
from .stream_source import LakelogStreamReader
from .change_feed import LakelogChangeReader, LakelogChangeStreamReader, feed_schema, reads_change_feed
from .partition_by import install as install_partition_by
from ..cluster.tasks import task_features, task_file_prefix
from ..cluster.workers import use_driver_python
from ..schema.collations import with_collations
from ..schema.variants import from_lakelog_schema, lakelog_arrow


def _publish_iceberg() -> None:
    """A write's commit runs in a Python worker that Spark may end as soon as it has returned: UniForm's
    Iceberg step, which follows a commit on a worker thread, is waited for here."""
    from lakelog.iceberg import flush

    flush(raise_errors=False)


def register_source(spark) -> None:
    """Register ``format("lakelog")`` on ``spark`` (``spark_ext.register`` does this, then connects lakelog's
    catalog where the session has it) and enable Python filter pushdown (a reader that can push
    filters needs it; lakelog pushes them only with the read option ``filterPushdown``). Spark's Python
    workers then run this interpreter (see ``spark_ext.cluster.workers``), even in a session started before, and
    ``DataFrameWriter.partitionBy`` works for ``format("lakelog")`` (see ``spark_ext.datasource.partition_by``)."""
    use_driver_python(spark)
    install_partition_by()
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(LakelogDataSource)


class LakelogDataSource(DataSource):
    """``spark.read.format("lakelog")``, ``df.write.format("lakelog")`` and their streaming forms."""

    @classmethod
    def name(cls) -> str:
        return "lakelog"

    def _table(self) -> lakelog.Table:
        return lakelog.Table(
            _path(self.options),
            version=_version(self.options, "versionAsOf"),
            timestamp=self.options.get("timestampAsOf"),
            storage_options=_storage_options(self.options),
        )

    def schema(self) -> StructType:
        if reads_change_feed(self.options):
            return feed_schema(self.options)
        return spark_schema(self._table().schema)

    def reader(self, schema: StructType) -> "LakelogReader":
        if reads_change_feed(self.options):
            return LakelogChangeReader(self.options, schema)
        # PySpark's read planner never calls pushFilters, and refuses readers that define it when
        # spark.sql.python.filterPushdown.enabled is false (see spark_ext.datasource.planner).
        cls = LakelogScanReader if in_read_planner() else LakelogReader
        return cls(self._table(), schema, self.options)

    def writer(self, schema: StructType, overwrite: bool) -> "LakelogWriter":
        return LakelogWriter(self.options, schema, "overwrite" if overwrite else _save_mode(self.options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> "LakelogStreamWriter":
        return LakelogStreamWriter(self.options, schema, "overwrite" if overwrite else "append")

    def streamReader(self, schema: StructType) -> "LakelogStreamReader":
        if reads_change_feed(self.options):
            return LakelogChangeStreamReader(self.options, schema)
        return LakelogStreamReader(self.options, schema)


def spark_schema(schema: pa.Schema) -> StructType:
    """A lakelog schema as Spark sees the table: geometry and geography columns are their WKB
    (BinaryType), which writes take back; variants are VariantType; collated strings keep their
    collation (``from_lakelog_schema``)."""
    return from_lakelog_schema(pa.schema([f.with_type(plain_type(f.type)) for f in schema]), prefer_timestamp_ntz=True)


# ---------------------------------------------------------------- reading

_COMPARISONS = {EqualTo: "=", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<", LessThanOrEqual: "<="}
_STRING_MATCH = {StringStartsWith: pc.starts_with, StringEndsWith: pc.ends_with, StringContains: pc.match_substring}


def _to_expression(f, schema: pa.Schema) -> pc.Expression | None:
    """A Spark filter as a pyarrow expression that is true exactly where Spark's predicate is TRUE
    (SQL three-valued logic, Spark's float ordering), or None when it cannot be translated exactly."""
    pair = _translate(f, schema)
    return None if pair is None else pair[0]


def _translate(f, schema: pa.Schema) -> tuple[pc.Expression, pc.Expression] | None:
    """(true, false): expressions true exactly where the filter is TRUE, resp. FALSE; both are not true
    where it is NULL. NOT swaps them, so NOT never turns NULL into TRUE."""
    if isinstance(f, Not):
        inner = _translate(f.child, schema)
        return None if inner is None else (inner[1], inner[0])
    attr = getattr(f, "attribute", None)
    if attr is None or len(attr) != 1 or attr[0] not in schema.names:
        return None
    col = attr[0]
    if collations.of_field(schema.field(col)) is not None:
        return None  # Spark compares a collated column (lakelog refuses expressions that read one)
    t = schema.field(col).type
    field = pc.field(col)
    if isinstance(f, IsNull):
        return field.is_null(), field.is_valid()
    if isinstance(f, IsNotNull):
        return field.is_valid(), field.is_null()
    value = f.value
    try:
        if isinstance(f, tuple(_STRING_MATCH)):
            if not pa.types.is_string(t) or not isinstance(value, str):
                return None
            e = _STRING_MATCH[type(f)](field, pattern=value)
            return e, ~e  # both null on null
        if isinstance(f, In):
            return term_expression(col, "in", value, t), term_expression(col, "not in", value, t)
        if isinstance(f, EqualNullSafe):
            if value is None:
                return field.is_null(), field.is_valid()
            return term_expression(col, "=", value, t), term_expression(col, "!=", value, t) | field.is_null()
        op = _COMPARISONS.get(type(f))
        if op is None:
            return None
        return term_expression(col, op, value, t), term_expression(col, NEGATED_OP[op], value, t)
    except LakelogError:
        return None  # a type or value lakelog cannot compare exactly: Spark applies the filter


class LakelogReader(DataSourceReader):
    def __init__(self, table: lakelog.Table, schema: StructType, options):
        self.path = table.path
        self.storage_options = _storage_options(options)
        self.version = table.version
        self.table_schema = table.schema
        self.partition_columns = table.partition_columns
        self.mapping = table.snapshot.column_mapping  # files name columns physically under column mapping
        self.output_schema = to_arrow_schema(schema, timezone="UTC")
        self.filter: pc.Expression | None = None
        self.pushdown = _bool(options, "filterPushdown")
        self.max_partition_bytes = int(options.get("maxPartitionBytes", MAX_PARTITION_BYTES))
        self._table = table  # driver-side only

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_table"] = None
        return state

    def pushFilters(self, filters):
        if not self.pushdown:
            # Spark 4.1-4.3 keep the read plan of a scan with pushed filters on the relation and reuse it
            # for a later scan of the same DataFrame that has no pushable filter, which then silently
            # reads too few rows. So filters are pushed only when asked for (option filterPushdown).
            yield from filters
            return
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
        return _read_files(self.path, self.storage_options, self.table_schema, self.partition_columns, self.output_schema, partition.files, self.filter, self.mapping)


class LakelogScanReader(LakelogReader):
    """``LakelogReader`` without filter pushdown (Spark applies every filter)."""

    pushFilters = DataSourceReader.pushFilters


# ---------------------------------------------------------------- writing

class LakelogCommitMessage(WriterCommitMessage):
    # partition_overwrite_mode: the session's spark.sql.sources.partitionOverwriteMode as the task saw it
    partition_overwrite_mode: str | None = None

    # identity_marks: the identity high water marks a streaming task drew values beyond
    identity_marks: dict | None = None

    def __init__(self, adds: list[dict], partition_overwrite_mode: str | None = None, identity_marks: dict | None = None):
        self.adds = adds
        self.partition_overwrite_mode = partition_overwrite_mode
        self.identity_marks = identity_marks


def _collect(messages) -> list[AddFile]:
    return [AddFile.from_json(d) for m in messages if m is not None for d in m.adds]


SESSION_PARTITION_OVERWRITE_MODE = "spark.sql.sources.partitionOverwriteMode"


def _session_partition_overwrite_mode() -> str | None:
    """The session's partitionOverwriteMode as a task sees it. A data source's Python workers have no
    SparkSession; Spark hands a query's SQL settings (those set explicitly) to its tasks as local properties."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return None if ctx is None else (ctx.getLocalProperty(SESSION_PARTITION_OVERWRITE_MODE) or "static")


class LakelogWriter(DataSourceArrowWriter):
    """Batch write: plan on the driver, files from tasks, one commit on the driver.

    With mode overwrite, option ``replaceWhere`` replaces only the rows a predicate selects (tasks check
    every row against it), and dynamic partition overwrite (option ``partitionOverwriteMode``, else the
    session's ``spark.sql.sources.partitionOverwriteMode``) only the partitions the data holds; both
    commit through ``lakelog.dml`` against the version the write was planned on, as Delta does.
    """

    def __init__(self, options, schema: StructType, mode: str):
        self.options = options  # case-insensitive keys, as Spark passes them
        self.app_id, self.app_version = _txn_options(options)  # checked before any task writes
        self.replace_where = _replace_where(options)
        self.partition_overwrite_mode = _partition_overwrite_mode(options.get("partitionOverwriteMode"))
        self.overwrite_schema = mode == "overwrite" and _bool(options, "overwriteSchema")
        if self.replace_where is not None and mode != "overwrite":
            raise InvalidArgumentError("option replaceWhere needs mode('overwrite'): it says which rows the written data replaces")
        if self.replace_where is not None and self.overwrite_schema:
            raise InvalidArgumentError("options replaceWhere and overwriteSchema cannot be combined: a partial overwrite keeps the table's schema (mergeSchema may add columns)")
        arrow_schema = with_collations(lakelog_arrow(to_arrow_schema(schema, timezone="UTC")), schema)
        table_properties = _table_properties(options)
        self.plan = lakelog.plan_write(
            _path(options),
            arrow_schema,
            mode=mode,
            partition_by=_partition_by(options),
            schema_mode="merge" if _bool(options, "mergeSchema") else ("overwrite" if self.overwrite_schema else None),
            storage_options=_storage_options(options),
            cluster_by=_partition_by(options, "clusterBy"),
            configuration=table_properties,
        )
        if table_properties is not None and self.plan.read_version >= 0 and not self.overwrite_schema and not self.plan.skip:
            raise InvalidArgumentError("option tableProperties applies when the write creates the table or replaces its schema "
                                       "(overwriteSchema); this table exists: set its properties with lakelog.Table.set_properties")
        partitioned = bool(self.plan.partition_columns)
        if self.replace_where is not None:
            if partitioned and self.partition_overwrite_mode == "dynamic":
                raise InvalidArgumentError(
                    "options replaceWhere and partitionOverwriteMode=dynamic cannot be combined: both say which data to replace. "
                    "Use one of them (a session-level spark.sql.sources.partitionOverwriteMode=dynamic is ignored under replaceWhere)"
                )
            from lakelog.dml import check_predicate

            check_predicate(self.replace_where, self.plan.schema)  # a bad predicate fails before any task runs
        elif partitioned and self.partition_overwrite_mode == "dynamic" and self.overwrite_schema:
            raise InvalidArgumentError("options overwriteSchema and partitionOverwriteMode=dynamic cannot be combined: a dynamic partition overwrite keeps the table's schema")

    def write(self, iterator: Iterator[pa.RecordBatch]) -> LakelogCommitMessage:
        batches: Iterator[pa.RecordBatch] = iterator
        if self.replace_where is not None:
            from lakelog.dml import checked_batches

            batches = checked_batches(iterator, self.plan.schema, self.replace_where, self.plan.features)
        plan = self.plan
        if plan.features is not None and plan.features.identity:
            plan = dataclasses.replace(plan, features=task_features(plan.features))
        adds = plan.write(batches, file_prefix=task_file_prefix("part"))
        return LakelogCommitMessage([a.to_json()["add"] for a in adds], _session_partition_overwrite_mode())

    def _dynamic(self, messages) -> bool:
        """Whether this overwrite replaces only the partitions the data holds: the option, else the
        session setting (as Delta: an unpartitioned table, or replaceWhere, means a static overwrite)."""
        if self.plan.mode != "overwrite" or self.replace_where is not None or not self.plan.partition_columns:
            return False
        if self.partition_overwrite_mode is not None:
            return self.partition_overwrite_mode == "dynamic"
        seen = {m.partition_overwrite_mode for m in messages if m is not None and m.partition_overwrite_mode is not None}
        if not seen:  # no task reported the session's setting: with no rows, static would empty the table
            raise InvalidArgumentError(
                f"cannot tell this overwrite's {SESSION_PARTITION_OVERWRITE_MODE} (no write task reported it); "
                "set option partitionOverwriteMode to 'static' or 'dynamic'. Nothing was committed"
            )
        return any(_partition_overwrite_mode(v, f"session setting {SESSION_PARTITION_OVERWRITE_MODE}") == "dynamic" for v in seen)

    def commit(self, messages) -> None:
        try:
            self._commit(messages)
        finally:
            _publish_iceberg()

    def _commit(self, messages) -> None:
        adds = _collect(messages)
        kwargs = dict(app_id=self.app_id, app_version=self.app_version, user_metadata=self.options.get("userMetadata"))
        if self.plan.mode == "overwrite" and self.replace_where is not None:
            from lakelog.dml import commit_overwrite_where

            commit_overwrite_where(self.plan, adds, self.replace_where, rows_checked=True, **kwargs)
            return
        try:
            dynamic = self._dynamic(messages)
            if dynamic and self.overwrite_schema:
                raise InvalidArgumentError(
                    f"option overwriteSchema cannot be combined with {SESSION_PARTITION_OVERWRITE_MODE}=dynamic: a dynamic partition "
                    "overwrite keeps the table's schema. Set option partitionOverwriteMode to 'static' to replace the whole table"
                )
        except BaseException:
            self.plan.abort(adds)
            raise
        if dynamic:
            from lakelog.dml import commit_overwrite_partitions

            commit_overwrite_partitions(self.plan, adds, **kwargs)
            return
        self.plan.commit(adds, **kwargs)

    def abort(self, messages) -> None:
        self.plan.abort(_collect(messages))


def _save_mode(options) -> str:
    """An append, or the ``saveMode`` option that ``save()`` without a mode (``error``) or with
    ``mode("ignore")`` becomes (see ``spark_ext.datasource.partition_by``)."""
    v = options.get("saveMode")
    if v is None:
        return "append"
    if str(v).strip().lower() not in ("error", "ignore", "append"):
        raise InvalidArgumentError(f"option saveMode must be 'error', 'ignore' or 'append', not {v!r}")
    return str(v).strip().lower()


def _txn_options(options) -> tuple[str | None, int | None]:
    """Options txnAppId + txnVersion of an idempotent batch write (Spark passes option values as text)."""
    app_id, version = options.get("txnAppId"), options.get("txnVersion")
    if (app_id is None) != (version is None):
        raise InvalidArgumentError("options txnAppId and txnVersion go together: set both, or neither")
    return app_id, None if version is None else parse_app_version(version)


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
        arrow_schema = with_collations(lakelog_arrow(to_arrow_schema(schema, timezone="UTC")), schema)
        self.plan = lakelog.plan_write(
            _path(options),
            arrow_schema,
            mode=mode,
            partition_by=_partition_by(options),
            schema_mode="merge" if _bool(options, "mergeSchema") else None,
            storage_options=_storage_options(options),
        )

    def write(self, iterator: Iterator[pa.RecordBatch]) -> LakelogCommitMessage:
        plan, marks = self.plan, None
        if plan.features is not None and plan.features.identity:
            # The query's plan is older than this micro-batch: identity values are drawn beyond the table's
            # latest marks (the previous micro-batch's among them), by partition id.
            latest = lakelog.Table(plan.path, storage_options=plan.storage_options).snapshot.writer_features
            marks = {c.name: c.high_water_mark for c in (latest.identity if latest is not None else ())}
            plan = dataclasses.replace(plan, features=task_features(plan.features.drawing_from(marks)))
        adds = plan.write(iterator, file_prefix=task_file_prefix("part"))
        return LakelogCommitMessage([a.to_json()["add"] for a in adds], identity_marks=marks)

    def commit(self, messages, batchId: int) -> None:
        try:
            self._commit(messages, batchId)
        finally:
            _publish_iceberg()

    def _commit(self, messages, batchId: int) -> None:
        plan = self.plan
        drawn = [m.identity_marks for m in messages if m is not None and m.identity_marks is not None]
        if drawn:
            if any(d != drawn[0] for d in drawn):
                plan.abort(_collect(messages))
                raise CommitConflictError(
                    "the tasks of this micro-batch drew identity values beyond different high water marks (a concurrent write "
                    "committed values meanwhile); nothing was committed. Restart the query: the micro-batch runs again")
            plan = dataclasses.replace(plan, features=plan.features.drawing_from(drawn[0]))
        plan.commit(
            _collect(messages),
            app_id=self.app_id,
            app_version=int(batchId),
            user_metadata=self.options.get("userMetadata"),
            operation="STREAMING UPDATE",
            extra_parameters={"epochId": str(batchId), "queryId": self.app_id, "outputMode": "Complete" if self.plan.mode == "overwrite" else "Append"},
        )

    def abort(self, messages, batchId: int) -> None:
        self.plan.abort(_collect(messages))

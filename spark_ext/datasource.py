"""The ``lakelog`` Spark data source: batch read/write, streaming sink and source.

Executors write uniquely named Parquet files and return their add actions as commit messages; the
driver's ``commit()`` makes them visible in one atomic lakelog commit. Everything goes through
lakelog's public API (``plan_write``/``WritePlan``, ``Table``).
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
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
from lakelog.actions import AddFile, RemoveFile, parse_app_version
from lakelog.errors import InvalidArgumentError, InvalidVersionError, LakelogError
from lakelog.log import DeltaLog
from lakelog.predicates import NEGATED_OP, term_expression
from lakelog.scan import read_batches
from lakelog.storage import Storage

MAX_PARTITION_BYTES = 128 * 1024 * 1024  # as spark.sql.files.maxPartitionBytes
OPEN_COST_BYTES = 4 * 1024 * 1024  # as spark.sql.files.openCostInBytes


def register(spark) -> None:
    """Register ``format("lakelog")`` on ``spark`` and enable Python filter pushdown (a reader that can push
    filters needs it; lakelog pushes them only with the read option ``filterPushdown``)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(LakelogDataSource)


def _path(options) -> str:
    path = options.get("path")
    if not path:
        raise LakelogError("no table path: use .load(path) / .save(path) / .start(path) or .option('path', ...)")
    return path


def _storage_options(options) -> dict[str, str] | None:
    opts = {k[len("storage."):]: v for k, v in options.items() if k.lower().startswith("storage.")}
    return opts or None


def _bool(options, key: str, default: bool = False) -> bool:
    v = options.get(key)
    return default if v is None else str(v).strip().lower() in ("1", "true", "yes")


def _version(options, key: str) -> int | None:
    """A version option (a string, as Spark passes options): a whole number, else InvalidVersionError."""
    v = options.get(key)
    if v is None:
        return None
    text = str(v).strip()
    if not text.isdigit():
        raise InvalidVersionError(f"option {key} must be a table version (a whole number >= 0), not {v!r}")
    return int(text)


def _partition_by(options) -> list[str] | None:
    v = options.get("partitionBy")
    if v is None:
        return None
    cols = [c.strip() for c in str(v).split(",") if c.strip()]
    return cols


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
        return from_arrow_schema(self._table().schema, prefer_timestamp_ntz=True)

    def reader(self, schema: StructType) -> "LakelogReader":
        return LakelogReader(self._table(), schema, self.options)

    def writer(self, schema: StructType, overwrite: bool) -> "LakelogWriter":
        return LakelogWriter(self.options, schema, "overwrite" if overwrite else "append")

    def streamWriter(self, schema: StructType, overwrite: bool) -> "LakelogStreamWriter":
        return LakelogStreamWriter(self.options, schema, "overwrite" if overwrite else "append")

    def streamReader(self, schema: StructType) -> "LakelogStreamReader":
        return LakelogStreamReader(self.options, schema)


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


@dataclass
class FilesPartition(InputPartition):
    files: list[dict]  # add actions (JSON form) of the files this partition reads

    def __init__(self, files: list[dict]):
        super().__init__(files)
        self.files = files


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


def _read_files(path, storage_options, table_schema, partition_columns, output_schema, files, filter, mapping=None) -> Iterator[pa.RecordBatch]:
    """Read the given add actions (JSON form, deletion vectors included) as batches of exactly
    ``output_schema``; rows deletion vectors delete are dropped, ``mapping`` maps column names."""
    if not files:
        return
    storage = Storage(path, storage_options)
    adds = [AddFile.from_json(d) for d in files]
    for batch in read_batches(storage, table_schema, partition_columns, adds, output_schema.names, filter, mapping):
        if batch.num_rows:
            yield _conform(batch, output_schema)


def _conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    cols = [batch.column(i) if batch.column(i).type == f.type else batch.column(i).cast(f.type) for i, f in enumerate(schema)]
    return pa.RecordBatch.from_arrays(cols, schema=schema)


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
        self.app_id, self.app_version = _txn_options(options)  # checked before any task writes
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
        self.plan.commit(
            _collect(messages),
            app_id=self.app_id,
            app_version=self.app_version,
            user_metadata=self.options.get("userMetadata"),
        )

    def abort(self, messages) -> None:
        self.plan.abort(_collect(messages))


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


# ---------------------------------------------------------------- streaming source

class LakelogStreamReader(DataSourceStreamReader):
    """Emits the rows of files added by each new version. Offsets: {"version": last processed version}.

    Without ``startingVersion`` the first batch is the snapshot at the latest version when the query
    first starts; later batches are the data added by each later version. Versions that only
    rearrange data (``dataChange=false``, e.g. compaction) emit nothing. A version that removes data
    fails the query unless ``skipChangeCommits`` is true, as in Delta.
    """

    def __init__(self, options, schema: StructType):
        self.path = _path(options)
        self.storage_options = _storage_options(options)
        self.output_schema = to_arrow_schema(schema, timezone="UTC")
        self.starting_version = options.get("startingVersion")
        self.skip_change_commits = _bool(options, "skipChangeCommits")
        self.max_partition_bytes = int(options.get("maxPartitionBytes", MAX_PARTITION_BYTES))
        table = self._table()
        self.table_schema, self.partition_columns = table.schema, table.partition_columns
        self.mapping = table.snapshot.column_mapping

    def _table(self, version=None) -> lakelog.Table:
        return lakelog.Table(self.path, version=version, storage_options=self.storage_options)

    def initialOffset(self) -> dict:
        # "snapshot" >= 0: the first batch is the whole table at that version.
        if self.starting_version is None:
            return {"version": -1, "snapshot": self._table().version}
        if str(self.starting_version).lower() == "latest":
            return {"version": self._table().version, "snapshot": -1}
        return {"version": _version({"startingVersion": self.starting_version}, "startingVersion") - 1, "snapshot": -1}

    def latestOffset(self, start: dict, limit=None) -> dict:
        latest = self._table().version
        return {"version": max(latest, start["version"], start.get("snapshot", -1)), "snapshot": start.get("snapshot", -1)}

    def partitions(self, start: dict, end: dict):
        files: list[dict] = []
        first = start["version"] + 1
        snap = start.get("snapshot", -1)
        if start["version"] < 0 and snap >= 0:
            files.extend(a.to_json()["add"] for a in self._table(version=snap).snapshot.files.values())
            first = snap + 1
        if first <= end["version"]:
            log = DeltaLog(Storage(self.path, self.storage_options))
            commits = log.read_commits(list(range(first, end["version"] + 1)))
            for v in sorted(commits):
                actions = commits[v]
                removes = [a for a in actions if isinstance(a, RemoveFile) and a.data_change]
                if removes:
                    if self.skip_change_commits:
                        continue
                    raise LakelogError(
                        f"version {v} of {self.path} removes or rewrites data ({removes[0].path!r}); a streaming source "
                        "only follows appends. Set option skipChangeCommits=true to skip such versions."
                    )
                files.extend(a.to_json()["add"] for a in actions if isinstance(a, AddFile) and a.data_change)
        return _split(files, self.max_partition_bytes) if files else []

    def read(self, partition: FilesPartition) -> Iterator[pa.RecordBatch]:
        return _read_files(self.path, self.storage_options, self.table_schema, self.partition_columns, self.output_schema, partition.files, None, self.mapping)

    def commit(self, end: dict) -> None:
        pass  # nothing to release: the table's files stay until vacuum


def _split(files: list[dict], max_bytes: int = MAX_PARTITION_BYTES, parallelism: int | None = None) -> list[FilesPartition]:
    """Pack add actions (JSON form) into input partitions as Spark's file sources do: each file costs
    its size plus an open cost, and a partition holds at most
    min(max_bytes, max(open cost, total cost / parallelism)), so small tables still use every core."""
    parallelism = parallelism or os.cpu_count() or 1
    total = sum(int(f.get("size") or 0) + OPEN_COST_BYTES for f in files)
    max_bytes = min(max_bytes, max(OPEN_COST_BYTES, total // parallelism))
    out, current, size = [], [], 0
    for f in files:
        cost = int(f.get("size") or 0) + OPEN_COST_BYTES
        if current and size + cost > max_bytes:
            out.append(FilesPartition(current))
            current, size = [], 0
        current.append(f)
        size += cost
    if current:
        out.append(FilesPartition(current))
    return out

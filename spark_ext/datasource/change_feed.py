"""``spark.read.format("lakelog").option("readChangeFeed", "true")``: a table's change data feed as a
DataFrame, with Delta's options (``startingVersion``/``startingTimestamp``, ``endingVersion``/
``endingTimestamp``), and ``spark.readStream`` with the same option: a stream of each new version's changes.
Each Spark task reads the changes of one version (``lakelog.change_feed``)."""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

import lakelog
from lakelog.change_feed import change_schema
from lakelog.change_feed.read import ChangeReader, check_bounds, version_range
from lakelog.errors import InvalidArgumentError
from lakelog.storage import Storage

from .options import boolean, storage_options, table_path
from .options import version as option_version
from ..schema.variants import from_lakelog_schema


def reads_change_feed(options) -> bool:
    return boolean(options, "readChangeFeed")


OPTION_BOUNDS = ("startingVersion", "startingTimestamp", "endingVersion", "endingTimestamp")


def _range(options) -> tuple[int, int | None, Storage]:
    storage = Storage(table_path(options), storage_options(options))
    starting_ts, ending_ts = options.get("startingTimestamp"), options.get("endingTimestamp")
    check_bounds(options.get("startingVersion"), options.get("endingVersion"), starting_ts, ending_ts, OPTION_BOUNDS)
    start, end = option_version(options, "startingVersion"), option_version(options, "endingVersion")
    if start is None and starting_ts is None:
        raise InvalidArgumentError("readChangeFeed needs option startingVersion or startingTimestamp (as Delta's does)")
    start, end = version_range(storage, start, end, starting_ts, ending_ts, OPTION_BOUNDS)
    return start, end, storage


def feed_schema(options) -> StructType:
    return from_lakelog_schema(change_schema(lakelog.Table(table_path(options), storage_options=storage_options(options)).schema),
                             prefer_timestamp_ntz=True)


def _as_spark(batches: Iterator[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Change batches as the declared schema (Spark wants its exact types)."""
    for batch in batches:
        yield pa.RecordBatch.from_arrays([batch.column(n).cast(f.type) for n, f in zip(schema.names, schema)], schema=schema)


class VersionPartition(InputPartition):
    def __init__(self, version: int):
        super().__init__(version)
        self.version = version


class LakelogChangeReader(DataSourceReader):
    """The changes of a range of versions, one version per partition (checked on the driver first)."""

    def __init__(self, options, schema: StructType):
        self.start, self.end, storage = _range(options)
        ChangeReader(storage, self.start, self.end)  # the range exists: errors here, not in a task
        self.path, self.storage_options = table_path(options), storage_options(options)
        self.end = self.end if self.end is not None else lakelog.Table(self.path, storage_options=self.storage_options).version
        self.output_schema = to_arrow_schema(schema, timezone="UTC")

    def partitions(self):
        return [VersionPartition(v) for v in range(self.start, self.end + 1)]

    def read(self, partition: VersionPartition) -> Iterator[pa.RecordBatch]:
        return _as_spark(ChangeReader(Storage(self.path, self.storage_options), partition.version, partition.version).batches(),
                         self.output_schema)


class SnapshotPartition(InputPartition):
    """Every row of version ``version`` as an insert (a stream without a starting version starts there)."""

    def __init__(self, version: int):
        super().__init__(("snapshot", version))
        self.version = version


class LakelogChangeStreamReader(DataSourceStreamReader):
    """``spark.readStream.format("lakelog").option("readChangeFeed", "true")``: the changes of each new
    version, a micro-batch covering whole versions. Offsets are ``{"version": next, "snapshot": bool}``;
    without ``startingVersion``/``startingTimestamp`` the stream starts with the latest version's rows as
    inserts, as Delta's does. Exactly once with the sink's checkpoint, like the file stream."""

    def __init__(self, options, schema: StructType):
        self.path, self.storage_options = table_path(options), storage_options(options)
        self.storage = Storage(self.path, self.storage_options)
        self.output_schema = to_arrow_schema(schema, timezone="UTC")
        self.starting = options.get("startingVersion")
        self.starting_timestamp = options.get("startingTimestamp")
        check_bounds(self.starting, None, self.starting_timestamp, None, OPTION_BOUNDS)
        self.max_versions = int(options.get("maxVersionsPerTrigger", 0) or 0)

    def _latest(self) -> int:
        return lakelog.Table(self.path, storage_options=self.storage_options).version

    def initialOffset(self) -> dict:
        if self.starting_timestamp is not None:
            start, _ = version_range(self.storage, None, None, self.starting_timestamp, None, OPTION_BOUNDS)
            return {"version": start, "snapshot": False}
        if self.starting is None:
            return {"version": self._latest(), "snapshot": True}
        if str(self.starting).strip().lower() == "latest":
            return {"version": self._latest() + 1, "snapshot": False}
        return {"version": int(option_version({"startingVersion": self.starting}, "startingVersion")), "snapshot": False}

    def latestOffset(self) -> dict:
        return {"version": self._latest() + 1, "snapshot": False}

    def partitions(self, start: dict, end: dict):
        first, last = int(start["version"]), int(end["version"])
        parts: list = []
        if start.get("snapshot"):
            parts.append(SnapshotPartition(first))
            first += 1
        parts.extend(VersionPartition(v) for v in range(first, last))
        return parts

    def read(self, partition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, SnapshotPartition):
            batches = self._snapshot(partition.version)
        else:
            batches = ChangeReader(self.storage, partition.version, partition.version).batches()
        return _as_spark(batches, self.output_schema)

    def _snapshot(self, version: int) -> Iterator[pa.RecordBatch]:
        from lakelog.log.snapshot import commit_times

        t = lakelog.Table(self.path, version=version, storage_options=self.storage_options)
        stamp = commit_times(t.snapshot).time(version) * 1000
        for b in t.read_batches():
            n = b.num_rows
            when = pa.array([stamp] * n, pa.int64()).cast(pa.timestamp("us", tz="UTC"))
            yield pa.RecordBatch.from_arrays([*b.columns, pa.array(["insert"] * n, pa.string()), pa.array([version] * n, pa.int64()), when],
                                             names=[*b.schema.names, "_change_type", "_commit_version", "_commit_timestamp"])

    def commit(self, end: dict) -> None:
        pass

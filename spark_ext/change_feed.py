"""``spark.read.format("lakelog").option("readChangeFeed", "true")``: a table's change data feed as a
DataFrame, with Delta's options (``startingVersion``/``startingTimestamp``, ``endingVersion``/
``endingTimestamp``). Each Spark task reads the changes of one version through ``lakelog.Table.changes``."""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

import lakelog
from lakelog.change_feed import change_schema
from lakelog.change_feed.read import ChangeReader, version_range
from lakelog.errors import InvalidArgumentError
from lakelog.storage import Storage

from .options import boolean, storage_options, table_path
from .options import version as option_version


def reads_change_feed(options) -> bool:
    return boolean(options, "readChangeFeed")


def _range(options) -> tuple[int, int | None, Storage]:
    storage = Storage(table_path(options), storage_options(options))
    start, end = option_version(options, "startingVersion"), option_version(options, "endingVersion")
    if start is None and options.get("startingTimestamp") is None:
        raise InvalidArgumentError("readChangeFeed needs option startingVersion or startingTimestamp (as Delta's does)")
    start, end = version_range(storage, start or 0, end, options.get("startingTimestamp"), options.get("endingTimestamp"))
    return start, end, storage


def feed_schema(options) -> StructType:
    return from_arrow_schema(change_schema(lakelog.Table(table_path(options), storage_options=storage_options(options)).schema),
                             prefer_timestamp_ntz=True)


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
        reader = ChangeReader(Storage(self.path, self.storage_options), partition.version, partition.version)
        for batch in reader.batches():
            yield pa.RecordBatch.from_arrays([batch.column(n).cast(f.type) for n, f in zip(self.output_schema.names, self.output_schema)],
                                             schema=self.output_schema)

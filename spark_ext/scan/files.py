"""Input partitions of data files, and reading them as Arrow batches of exactly the declared schema."""

from __future__ import annotations

import os
from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from lakelog.actions import AddFile
from lakelog.read.scan import read_batches
from lakelog.storage import Storage

MAX_PARTITION_BYTES = 128 * 1024 * 1024  # as spark.sql.files.maxPartitionBytes
OPEN_COST_BYTES = 4 * 1024 * 1024  # as spark.sql.files.openCostInBytes


class FilesPartition(InputPartition):
    """The add actions (JSON form) of the files one task reads."""

    def __init__(self, files: list[dict]):
        super().__init__(files)
        self.files = files


def split(files: list[dict], max_bytes: int = MAX_PARTITION_BYTES, parallelism: int | None = None) -> list[FilesPartition]:
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


def read_files(path, storage_options, table_schema, partition_columns, output_schema, files, filter, mapping=None) -> Iterator[pa.RecordBatch]:
    """Read the given add actions (JSON form, deletion vectors included) as batches of exactly
    ``output_schema``; rows deletion vectors delete are dropped, ``mapping`` (the table's
    ``ColumnMapping``) finds columns by physical name or field id."""
    if not files:
        return
    storage = Storage(path, storage_options)
    adds = [AddFile.from_json(d) for d in files]
    for batch in read_batches(storage, table_schema, partition_columns, adds, output_schema.names, filter, mapping):
        if batch.num_rows:
            yield conform(batch, output_schema)


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    cols = [batch.column(i) if batch.column(i).type == f.type else batch.column(i).cast(f.type) for i, f in enumerate(schema)]
    return pa.RecordBatch.from_arrays(cols, schema=schema)


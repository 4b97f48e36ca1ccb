"""Delta's commands through plain ``spark.sql`` (lakelog's parser hands them over): DESCRIBE HISTORY,
DESCRIBE DETAIL, RESTORE, OPTIMIZE and VACUUM, run as ``spark_ext.sql`` runs them, with the columns
Delta's commands return; and ``table_changes``."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakelog.errors import UnsupportedFeatureError

from ..cluster.paths import local_path
from ..statements.syntax import tokenize
from ..table import DETAIL_SCHEMA, HISTORY_SCHEMA

RESTORE_COLUMNS = {  # Delta's RESTORE columns -> lakelog's restore metrics
    "table_size_after_restore": "tableSizeAfterRestore",
    "num_of_files_after_restore": "numOfFilesAfterRestore",
    "num_removed_files": "numRemovedFiles",
    "num_restored_files": "numRestoredFiles",
    "removed_files_size": "removedFilesSize",
    "restored_files_size": "restoredFilesSize",
}

_FILE_SIZES = T.StructType([T.StructField(n, t) for n, t in (("min", T.LongType()), ("max", T.LongType()), ("avg", T.DoubleType()),
                                                               ("totalFiles", T.LongType()), ("totalSize", T.LongType()))])
# Delta's OPTIMIZE metrics (OptimizeMetrics), the fields lakelog's optimize reports
OPTIMIZE_METRICS = T.StructType([
    T.StructField("numFilesAdded", T.LongType()), T.StructField("numFilesRemoved", T.LongType()),
    T.StructField("filesAdded", _FILE_SIZES), T.StructField("filesRemoved", _FILE_SIZES),
    T.StructField("partitionsOptimized", T.LongType()), T.StructField("numBatches", T.LongType()),
    T.StructField("totalConsideredFiles", T.LongType()), T.StructField("totalFilesSkipped", T.LongType()),
    T.StructField("preserveInsertionOrder", T.BooleanType()),
])

_REFUSED = {
    ("CONVERT",): "CONVERT TO DELTA: use lakelog.convert(path) (or `lakelog convert PATH`) to adopt Parquet files",
    ("GENERATE",): "GENERATE symlink_format_manifest: set the table property delta.compatibility.symlinkFormatManifest.enabled = true "
                   "and lakelog writes the manifests at every commit",
    ("REORG",): "REORG TABLE is not supported on lakelog tables (OPTIMIZE compacts files and rewrites those with deletion vectors)",
}


def _kind(text: str) -> str:
    words = [t.text.upper() for t in tokenize(text)[:2]]
    for head, why in _REFUSED.items():
        if tuple(words[:len(head)]) == head:
            raise UnsupportedFeatureError(why)
    if words[0] in ("DESCRIBE", "DESC"):
        return words[1]
    return words[0]


def command_schema(text: str) -> T.StructType:
    """The columns the command returns (known before it runs, as Spark's analysis needs them)."""
    kind = _kind(text)
    if kind == "HISTORY":
        return HISTORY_SCHEMA
    if kind == "DETAIL":
        return DETAIL_SCHEMA
    if kind == "RESTORE":
        return T.StructType([T.StructField(c, T.LongType()) for c in RESTORE_COLUMNS])
    if kind == "OPTIMIZE":
        return T.StructType([T.StructField("path", T.StringType()), T.StructField("metrics", OPTIMIZE_METRICS)])
    return T.StructType([T.StructField("path", T.StringType())])


def run(spark: SparkSession, text: str) -> DataFrame:
    from ..statements.commands import run_command

    kind = _kind(text)
    df = run_command(spark, text.replace("DESC ", "DESCRIBE ", 1) if text.lstrip().upper().startswith("DESC ") else text, tokenize(text))
    if kind == "RESTORE":
        df = df.select(*[F.col(src).cast("long").alias(name) for name, src in RESTORE_COLUMNS.items()])
    elif kind == "OPTIMIZE":
        m = F.col("metrics")
        fields = []
        for f in OPTIMIZE_METRICS.fields:
            value = F.from_json(m[f.name], f.dataType) if isinstance(f.dataType, T.StructType) else m[f.name].cast(f.dataType)
            fields.append(value.alias(f.name))
        df = df.select("path", F.struct(*fields).alias("metrics"))
    return df


def table_changes(spark: SparkSession, table: str, start: Any, end: Any) -> DataFrame:
    """``table_changes('name' | 'path', start[, end])``: the change data feed between two versions or timestamps."""
    import lakelog

    path = table_path(spark, table)
    if end is not None and str(end).strip().isdigit():
        end = min(int(str(end).strip()), lakelog.Table(path).version)  # (as Delta: an end past the latest version reads to it)
    reader = spark.read.format("lakelog").option("readChangeFeed", "true")
    for value, which in ((start, "starting"), (end, "ending")):
        if value is not None:
            reader = reader.option(f"{which}{'Version' if str(value).strip().isdigit() else 'Timestamp'}", str(value).strip())
    return reader.load(path)


def table_path(spark: SparkSession, name: str) -> str:
    """The location of the lakelog table ``name`` (a catalog name, ``lakelog.`path``` or a path)."""
    found = spark._jvm.org.apache.spark.sql.lakelog.LakelogCatalog.pathOf(spark._jsparkSession, name)
    if found is None:
        raise UnsupportedFeatureError(f"{name!r} is not a lakelog table (name one in the catalog, lakelog.`<path>`, or give its path)")
    return local_path(found, spark)

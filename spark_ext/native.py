"""``spark_ext.read``: a lakelog snapshot as a DataFrame that Spark's own Parquet source scans.

lakelog reads the log (version, files, sizes, partition values) and hands Spark a standard file
relation (``HadoopFsRelation`` over an ``InMemoryFileIndex`` with ``ParquetFileFormat``), the relation
``spark.read.parquet`` builds, with two differences that make it a Delta read:

* the index's root paths are exactly the snapshot's files and their statuses come from the log, so
  nothing is listed and no other file in the table directory (removed, failed or foreign) is read;
* the partition spec is given, not inferred: each partition directory is paired with the values the
  log records for its files. Directory names are never parsed. Where one directory holds files of
  several partitions (nothing requires Hive-style directories), the files are split into several
  relations, each with one value per directory, and unioned.

Spark then plans it like any Parquet table: column pruning, the vectorised reader, Parquet filter
pushdown and row-group skipping, partition pruning from the partition values, file splitting.

The few objects Spark needs per file (statuses, partition paths) are built on the JVM by a small
class compiled once per session with Janino (bundled with Spark, which compiles all its generated
code with it), so a table of 100k files costs one call from Python, not hundreds of thousands.
This uses py4j, so it needs classic PySpark (not Spark Connect); ``format("lakelog")`` works
everywhere.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
import threading
from typing import Any

import orjson
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

import lakelog
from lakelog.column_mapping import physical_schema
from lakelog.errors import UnsupportedFeatureError
from lakelog.schema import parse_partition_value
from lakelog.snapshot import Snapshot
from lakelog.storage import Storage

# Reader features a plain Parquet scan honours: log-level ones (lakelog reads the log) and timestamp_ntz.
# Everything else is refused by name: deletion vectors (rows to skip), column mapping (physical column
# names), type widening (file types older than the table's), and whatever comes next.
NATIVE_READER_FEATURES = {"timestampNtz", "vacuumProtocolCheck", "v2Checkpoint", "columnMapping"}  # columnMapping: mode name only

_FACTORY_CLASS = "LakelogFileIndexFactory"
_FACTORY_SOURCE = r"""
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Cast;
import org.apache.spark.sql.catalyst.expressions.EvalMode;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.execution.datasources.FileStatusCache;
import org.apache.spark.sql.execution.datasources.InMemoryFileIndex;
import org.apache.spark.sql.execution.datasources.PartitionPath;
import org.apache.spark.sql.execution.datasources.PartitionSpec;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

public class LakelogFileIndexFactory {
  /**
   * The index's only "listing": each directory holding snapshot files maps to exactly those files,
   * from the log. A snapshot never changes, so puts and invalidation (Spark's REFRESH) leave it as it
   * is, and Spark never lists a directory itself.
   */
  public static class SnapshotFiles extends FileStatusCache {
    private final HashMap byDirectory;
    public SnapshotFiles(HashMap byDirectory) { this.byDirectory = byDirectory; }
    public scala.Option getLeafFiles(Path dir) { return scala.Option.apply(byDirectory.get(dir)); }
    public void putLeafFiles(Path dir, FileStatus[] statuses) { }
    public void invalidateAll() { }
  }

  /**
   * files: JSON [[size, modificationTime, partition index, path], ...]; partitions: JSON [[value or
   * null, ...], ...] in the partition schema's order, each value a string Spark's ANSI cast parses
   * exactly (binary: ISO-8859-1 bytes); null for an unpartitioned table. The index's root paths are
   * the files' directories; Spark finds each directory's files in the cache.
   */
  public InMemoryFileIndex create(org.apache.spark.sql.SparkSession session, String files, String partitions,
                                  StructType partitionSchema, scala.collection.immutable.Map options) throws Exception {
    ObjectMapper json = new ObjectMapper();
    List entries = (List) json.readValue(files, List.class);
    InternalRow[] rows = partitions == null ? null : partitionRows((List) json.readValue(partitions, List.class), partitionSchema);
    LinkedHashMap filesByDir = new LinkedHashMap();
    HashMap partitionOfDir = new HashMap();
    ArrayList parts = new ArrayList();
    for (int i = 0; i < entries.size(); i++) {
      List e = (List) entries.get(i);
      Path path = new Path((String) e.get(3));
      Path dir = path.getParent();
      ArrayList inDir = (ArrayList) filesByDir.get(dir);
      if (inDir == null) {
        inDir = new ArrayList();
        filesByDir.put(dir, inDir);
      }
      inDir.add(new FileStatus(((Number) e.get(0)).longValue(), false, 1, 33554432L, ((Number) e.get(1)).longValue(), path));
      if (rows != null) {
        Integer index = Integer.valueOf(((Number) e.get(2)).intValue());
        Object seen = partitionOfDir.put(dir, index);
        if (seen == null) {
          parts.add(PartitionPath.apply(rows[index.intValue()], dir));
        } else if (!seen.equals(index)) {
          throw new IllegalArgumentException("directory " + dir + " holds files of two partitions");
        }
      }
    }
    HashMap byDirectory = new HashMap();
    Path[] roots = new Path[filesByDir.size()];
    int n = 0;
    for (Iterator it = filesByDir.entrySet().iterator(); it.hasNext();) {
      Map.Entry entry = (Map.Entry) it.next();
      ArrayList inDir = (ArrayList) entry.getValue();
      roots[n++] = (Path) entry.getKey();
      byDirectory.put(entry.getKey(), inDir.toArray(new FileStatus[inDir.size()]));
    }
    PartitionSpec spec = rows == null
        ? PartitionSpec.emptySpec()
        : PartitionSpec.apply(partitionSchema, scala.jdk.javaapi.CollectionConverters.asScala(parts).toList());
    return new InMemoryFileIndex(session, scala.collection.immutable.ArraySeq.unsafeWrapArray(roots), options,
        scala.Option.empty(), new SnapshotFiles(byDirectory), scala.Option.apply(spec), scala.Option.empty());
  }

  private static InternalRow[] partitionRows(List partitions, StructType schema) throws Exception {
    InternalRow[] rows = new InternalRow[partitions.size()];
    int n = schema.fields().length;
    for (int i = 0; i < rows.length; i++) {
      List values = (List) partitions.get(i);
      Object[] row = new Object[n];
      for (int j = 0; j < n; j++) {
        String v = (String) values.get(j);
        DataType type = schema.fields()[j].dataType();
        if (v == null) {
          row[j] = null;
        } else if (type instanceof BinaryType) {
          row[j] = v.getBytes("ISO-8859-1");
        } else {
          Literal text = new Literal(UTF8String.fromString(v), DataTypes.StringType);
          row[j] = new Cast(text, type, scala.Option.apply("UTC"), EvalMode.ANSI()).eval(null);
        }
      }
      rows[i] = new GenericInternalRow(row);
    }
    return rows;
  }
}
"""

_factories: dict[int, tuple[Any, Any]] = {}
_factories_lock = threading.Lock()


def _factory(spark):
    """The compiled index factory of this session's JVM (compiled on first use)."""
    gateway = spark.sparkContext._gateway
    with _factories_lock:
        entry = _factories.get(id(gateway))
        if entry is None or entry[0] is not gateway:
            jvm = spark._jvm
            compiler = jvm.org.codehaus.janino.SimpleCompiler()
            compiler.setParentClassLoader(jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader())
            compiler.cook(_FACTORY_SOURCE)
            no_args = gateway.new_array(jvm.java.lang.Class, 0)
            factory = compiler.getClassLoader().loadClass(_FACTORY_CLASS).getDeclaredConstructor(no_args).newInstance(gateway.new_array(jvm.java.lang.Object, 0))
            entry = _factories[id(gateway)] = (gateway, factory)
        return entry[1]


def check_native_readable(snapshot: Snapshot) -> None:
    """Refuse, by name, what a plain Parquet scan cannot honour (lakelog's own protocol checks ran
    when the snapshot was loaded)."""
    snapshot.check_readable()
    p = snapshot.protocol
    features = sorted(set(p.reader_features or []) - NATIVE_READER_FEATURES) if p.min_reader_version >= 3 else []
    mode = snapshot.column_mapping.mode
    if mode == "id":  # Spark's Parquet source matches field ids only under a session setting
        features.append(f"columnMapping (mode {mode!r})")
    if "deletionVectors" not in features and any(a.deletion_vector is not None for a in snapshot.files.values()):
        features.append("deletionVectors (files with deleted rows)")
    if features:
        raise UnsupportedFeatureError(
            f"table uses {', '.join(features)}, which Spark's Parquet source cannot apply; spark_ext.read refuses it. "
            'Read it with spark.read.format("lakelog") (where lakelog supports the feature) or Delta Lake for Spark'
        )


def _spark_root(storage: Storage) -> str:
    if storage.is_local:
        return "file:" + os.path.abspath(storage.root)
    scheme = storage.uri.split("://", 1)[0] if "://" in storage.uri else storage.protocol
    if scheme == "memory":
        raise UnsupportedFeatureError(
            f"{storage.uri!r} is in Python's memory filesystem, which Spark's JVM cannot see; use "
            'spark.read.format("lakelog") for it'
        )
    return f"{scheme}://{storage.root.lstrip('/')}"


def _spark_value(v: Any) -> str | None:
    """A parsed partition value as a string Spark's ANSI cast turns into exactly that value."""
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            return v.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return v.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, bytes):
        return v.decode("latin-1")
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    return str(v)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def read(spark, path: str, version: int | None = None, timestamp: Any = None, storage_options: dict | None = None) -> DataFrame:
    """The table at its latest version (or ``version``/``timestamp``) as a DataFrame scanned by Spark's
    Parquet source. The DataFrame is that snapshot: call ``read`` again to see later commits. The path
    must be one Spark's Hadoop filesystems can read too (``file:``, ``s3a://``, ``abfss://``, ``gs://``,
    ``hdfs://``...); ``storage_options`` are lakelog's, for reading the log."""
    table = lakelog.Table(path, version=version, timestamp=timestamp, storage_options=storage_options)
    return snapshot_frame(spark, table.storage, table.snapshot)


def spark_path(storage: Storage, rel: str) -> str:
    """The path Spark reads the data file ``rel`` (relative, decoded) of the table at ``storage`` by."""
    return f"{_spark_root(storage)}/{rel}"


def snapshot_frame(spark, storage: Storage, snapshot: Snapshot, files: list[str] | None = None, file_column: str | None = None) -> DataFrame:
    """``read``'s DataFrame over ``snapshot``, or only over its data files ``files`` (relative, decoded
    paths); ``file_column``: also a column of that name holding the path each row was read from, as
    Spark's ``_metadata.file_path`` gives it (see ``spark_path``)."""
    check_native_readable(snapshot)
    schema, part_cols = snapshot.schema, snapshot.partition_columns
    root = _spark_root(storage)
    if "_spark_metadata" in root.split("/"):
        raise UnsupportedFeatureError(f"table root {root!r} is inside a directory named _spark_metadata, which Spark's file index skips")
    types = [schema.field(c).type for c in part_cols]
    mapping = snapshot.column_mapping  # mode none or name (check_native_readable)
    # Spark reads the files' columns and the partition values by their physical names; the select below
    # renames them (a struct's fields through a cast, which Spark applies by position).
    part_keys = [mapping.physical_name(c) for c in part_cols]
    keys: dict[tuple, int] = {}  # partition values as strings for Spark -> index
    index_of: dict[tuple, int] = {}  # raw logged partition values -> index
    groups: list[list[list]] = []  # files split so that no directory holds two partitions in one group
    dir_keys: dict[str, list[int]] = {}
    chosen = snapshot.files.items() if files is None else ((rel, snapshot.files[rel]) for rel in files)
    for rel, a in chosen:
        *dirs, name = rel.split("/")
        if name.startswith(".") or (name.startswith("_") and "=" not in name) or a.size <= 0 or "_spark_metadata" in dirs:
            # Spark's file index drops such files: reading would silently lose them.
            raise UnsupportedFeatureError(
                f"file {rel!r} (size {a.size} in the log) is one Spark's file index skips (hidden name, empty, or "
                "under _spark_metadata); "
                'read this table with spark.read.format("lakelog")'
            )
        raw = tuple(map(a.partition_values.get, part_keys))
        index = index_of.get(raw)
        if index is None:
            key = tuple(_spark_value(parse_partition_value(v, t)) for v, t in zip(raw, types))
            index = index_of[raw] = keys.setdefault(key, len(keys))
        seen = dir_keys.setdefault(rel.rsplit("/", 1)[0] if "/" in rel else "", [])
        if index not in seen:
            seen.append(index)
        group = seen.index(index)
        while len(groups) <= group:
            groups.append([])
        groups[group].append([a.size, a.modification_time, index, f"{root}/{rel}"])
    partitions = orjson.dumps([list(k) for k in keys]).decode() if part_cols else None

    jvm, jsession = spark._jvm, spark._jsparkSession
    sources = jvm.org.apache.spark.sql.execution.datasources
    data_fields = pa.schema([f for f in schema if f.name not in part_cols])
    part_fields = pa.schema([schema.field(c).with_name(k) for c, k in zip(part_cols, part_keys)])
    if mapping.active:
        data_fields = pa.schema([f.remove_metadata() for f in physical_schema(mapping.schema_string, data_fields)])
    part_schema = jsession.parseDataType(from_arrow_schema(part_fields, prefer_timestamp_ntz=True).json())
    data_schema = jsession.parseDataType(from_arrow_schema(data_fields, prefer_timestamp_ntz=True).json()).asNullable()
    logical_types = from_arrow_schema(schema, prefer_timestamp_ntz=True)
    options = jvm.org.apache.spark.api.python.PythonUtils.toScalaMap({})
    factory = _factory(spark)
    frames = []
    for files in groups or [[]]:
        index = factory.create(jsession, orjson.dumps(files).decode(), partitions, part_schema, options)
        relation = sources.HadoopFsRelation(index, part_schema, data_schema, jvm.scala.Option.empty(), sources.parquet.ParquetFileFormat(), options, jsession)
        if mapping.active:
            columns = [F.col(_quoted(mapping.physical_name(n))).cast(logical_types[n].dataType).alias(n) for n in schema.names]
        else:
            columns = [F.col(_quoted(n)) for n in schema.names]
        if file_column is not None:
            columns.append(F.col("_metadata.file_path").alias(file_column))
        frames.append(DataFrame(jsession.baseRelationToDataFrame(relation), spark).select(*columns))
    df = frames[0]
    for other in frames[1:]:
        df = df.union(other)
    return df

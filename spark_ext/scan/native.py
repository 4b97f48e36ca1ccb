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

Reader features stay inside that plan: under column mapping the relation uses the physical names and
a projection renames them (filters on logical names still prune); files with deletion vectors are
scanned by a Parquet format that marks each row live or deleted by its position (``deletion_vectors``), and filtered;
widened types are declared and Spark's Parquet reader widens older files' values (specs/spark.md).

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
import re
import threading
from typing import Any

import orjson
from pyspark.sql import DataFrame
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema

import lakelog
from lakelog.table_features.column_mapping import FIELD_ID, physical_name
from lakelog.errors import UnsupportedFeatureError
from lakelog.schema.partition_values import parse_partition_value
from lakelog.log.snapshot import Snapshot
from lakelog.table_features.type_widening import recorded_type_changes
from lakelog.storage import Storage

from ..schema.collations import spark_collations
from .deletion_vectors import LIVE, deletion_vector_format
from ..jvm.janino import compile_java
from ..cluster.paths import driver_path

# Reader features the native path honours: log-level ones (lakelog reads the log), timestamp_ntz, column
# mapping (physical names read, then renamed), deletion vectors (rows marked by position in the scan) and
# type widening (Spark's Parquet reader widens; the few changes it cannot read are refused by column).
# Whatever comes next is refused by name.
NATIVE_READER_FEATURES = {
    "timestampNtz", "vacuumProtocolCheck", "v2Checkpoint", "columnMapping", "deletionVectors", "typeWidening", "typeWidening-preview",
}

PARQUET_FIELD_ID_KEY = "parquet.field.id"  # Spark's metadata key for a field's Parquet field id

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

  /**
   * The DataFrame over a snapshot's files, built in one call. spec: JSON {"plain": [[file, ...], ...] (groups
   * of files without deleted rows, in create()'s form), "deleted": the same for files with deletion
   * vectors (read with dvFormat, keeping rows whose column "live" is true), "partitions", "partSchema" and
   * "dataSchema" (Spark JSON), "columns": [[physical name, output name, Spark JSON type to cast to or
   * null], ...], "extra": [SQL expression, ...] selected after them}.
   */
  public org.apache.spark.sql.Dataset frame(org.apache.spark.sql.classic.SparkSession session, String spec, Object dvFormat)
      throws Exception {
    ObjectMapper json = new ObjectMapper();
    Map s = (Map) json.readValue(spec, Map.class);
    StructType partSchema = (StructType) DataType.fromJson((String) s.get("partSchema"));
    StructType dataSchema = ((StructType) DataType.fromJson((String) s.get("dataSchema"))).asNullable();
    String partitions = s.get("partitions") == null ? null : json.writeValueAsString(s.get("partitions"));
    List columns = (List) s.get("columns");
    List extra = (List) s.get("extra");
    String[] exprs = new String[columns.size() + extra.size()];
    for (int i = 0; i < columns.size(); i++) {
      List c = (List) columns.get(i);
      String value = quoted((String) c.get(0));
      if (c.get(2) != null) {
        value = "CAST(" + value + " AS " + DataType.fromJson((String) c.get(2)).sql() + ")";
      }
      exprs[i] = value + " AS " + quoted((String) c.get(1));
    }
    for (int i = 0; i < extra.size(); i++) {
      exprs[columns.size() + i] = (String) extra.get(i);
    }
    scala.collection.immutable.Map options = scala.collection.immutable.Map$.MODULE$.empty();
    org.apache.spark.sql.Dataset df = null;
    List plain = (List) s.get("plain");
    List deleted = (List) s.get("deleted");
    String live = (String) s.get("live");
    int groups = plain.size() + deleted.size();
    for (int g = 0; g < Math.max(groups, 1); g++) {
      boolean dv = groups > 0 && g >= plain.size();
      String files = groups == 0 ? "[]" : json.writeValueAsString(dv ? deleted.get(g - plain.size()) : plain.get(g));
      InMemoryFileIndex index = create(session, files, partitions, partSchema, options);
      StructType schema = dv ? dataSchema.add(live, DataTypes.BooleanType, false) : dataSchema;
      org.apache.spark.sql.execution.datasources.FileFormat format = dv
          ? (org.apache.spark.sql.execution.datasources.FileFormat) dvFormat
          : new org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat();
      org.apache.spark.sql.execution.datasources.HadoopFsRelation relation = new org.apache.spark.sql.execution.datasources.HadoopFsRelation(
          index, partSchema, schema, scala.Option.empty(), format, options, session);
      org.apache.spark.sql.Dataset d = session.baseRelationToDataFrame(relation);
      if (dv) {
        d = d.where(org.apache.spark.sql.functions.col(quoted(live)));
      }
      d = d.selectExpr(exprs);
      df = df == null ? d : df.union(d);
    }
    return df;
  }

  private static String quoted(String name) {
    return "`" + name.replace("`", "``") + "`";
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
            compiler = compile_java(spark, _FACTORY_SOURCE)
            no_args = gateway.new_array(jvm.java.lang.Class, 0)
            factory = compiler.getClassLoader().loadClass(_FACTORY_CLASS).getDeclaredConstructor(no_args).newInstance(gateway.new_array(jvm.java.lang.Object, 0))
            entry = _factories[id(gateway)] = (gateway, factory)
        return entry[1]


def _spark_widens(from_type: str, to_type: str) -> bool:
    """Whether Spark's Parquet readers (the vectorized one included) read ``from_type`` values as
    ``to_type``. Both readers widen integers, float to double, integers to double, date to
    timestamp_ntz, decimals, and integers to decimals; but the vectorized reader reads a 32-bit Parquet
    integer as a decimal only with at least 10 digits before the point, so byte and short columns
    widened to a narrower decimal (Spark's own byte -> decimal(4,1)) fail there."""
    m = re.match(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$", to_type)
    return not (from_type in ("byte", "short") and m is not None and int(m.group(1)) - int(m.group(2)) < 10)


def unreadable_type_changes(schema_string: str) -> list[str]:
    """The recorded type changes Spark's Parquet reader cannot apply, as ``typeWidening (column: from -> to)``."""
    return [
        f"typeWidening (column {path!r} from {from_type} to {to_type})"
        for path, from_type, to_type in recorded_type_changes(schema_string)
        if not _spark_widens(str(from_type), str(to_type))
    ]


def check_native_readable(snapshot: Snapshot) -> None:
    """Refuse, by name, what a plain Parquet scan cannot honour (lakelog's own protocol checks ran
    when the snapshot was loaded)."""
    snapshot.check_readable()
    p = snapshot.protocol
    features = sorted(set(p.reader_features or []) - NATIVE_READER_FEATURES) if p.min_reader_version >= 3 else []
    features += unreadable_type_changes(snapshot.metadata.schema_string)
    if features:
        raise UnsupportedFeatureError(
            f"table uses {', '.join(features)}, which Spark's Parquet source cannot apply; spark_ext.read refuses it. "
            'Read it with spark.read.format("lakelog") (where lakelog supports the feature) or Delta Lake for Spark'
        )


# Hadoop connectors for the stores lakelog reaches through fsspec, by URL scheme.
_CONNECTORS = {
    "abfs": "hadoop-azure", "abfss": "hadoop-azure", "wasb": "hadoop-azure", "wasbs": "hadoop-azure", "az": "hadoop-azure",
    "adl": "hadoop-azure-datalake", "gs": "gcs-connector", "gcs": "gcs-connector", "s3a": "hadoop-aws", "s3": "hadoop-aws",
}


def _scheme(storage: Storage) -> str:
    return "file" if storage.is_local else (storage.uri.split("://", 1)[0].lower() if "://" in storage.uri else storage.protocol)


def hadoop_readable(spark, storage: Storage) -> bool:
    """Whether Spark's JVM has a Hadoop filesystem for the table's location (``file:`` always; for
    others the connector must be on Spark's classpath). ``az://`` is adlfs' name, never Hadoop's."""
    scheme = _scheme(storage)
    if scheme == "file":
        return True
    if scheme in ("memory", "az"):
        return False
    jvm = spark._jvm
    try:
        jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, spark._jsc.hadoopConfiguration())
    except Exception:  # noqa: BLE001 - py4j wraps UnsupportedFileSystemException (and class-loading errors)
        return False
    return True


def check_hadoop_readable(spark, storage: Storage) -> None:
    """Refuse, with the connector to install, a location Spark's Hadoop filesystems cannot read."""
    if hadoop_readable(spark, storage):
        return
    scheme = _scheme(storage)
    if scheme == "memory":
        raise UnsupportedFeatureError(
            f"{storage.uri!r} is in Python's memory filesystem, which Spark's JVM cannot see; use "
            'spark.read.format("lakelog") for it'
        )
    connector = _CONNECTORS.get(scheme)
    if scheme == "az":
        need = ("az:// is adlfs' URL form, which Hadoop has no filesystem for: spark_ext.read needs the "
                "abfss://<container>@<account>.dfs.core.windows.net/<path> form and the hadoop-azure connector on Spark's classpath")
    elif connector is not None:
        need = f"Spark has no Hadoop filesystem for {scheme}://: spark_ext.read needs the {connector} connector on Spark's classpath"
    else:
        need = f"Spark has no Hadoop filesystem for {scheme}://"
    raise UnsupportedFeatureError(
        f"cannot scan {storage.uri!r} with Spark's Parquet source: {need}. spark.read.format(\"lakelog\") reads it "
        "through lakelog's storage with no Hadoop connector (storage options as .option('storage.<key>', value))"
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
    ``hdfs://``...; ``UnsupportedFeatureError`` naming the missing connector otherwise); ``storage_options``
    are lakelog's, for reading the log. A relative local path is resolved against the driver's working
    directory, as Spark's file sources resolve it."""
    table = lakelog.Table(driver_path(spark, path, storage_options), version=version, timestamp=timestamp, storage_options=storage_options)
    check_hadoop_readable(spark, table.storage)
    return snapshot_frame(spark, table.storage, table.snapshot)


def spark_path(storage: Storage, rel: str) -> str:
    """The path Spark reads the data file ``rel`` (relative, decoded) of the table at ``storage`` by."""
    return f"{_spark_root(storage)}/{rel}"


def snapshot_frame(spark, storage: Storage, snapshot: Snapshot, files: list[str] | None = None, file_column: str | None = None,
                   row_column: str | None = None, stored: dict[str, str] | None = None) -> DataFrame:
    """``read``'s DataFrame over ``snapshot``, or only over its data files ``files`` (relative, decoded
    paths); ``file_column``: also a column of that name holding the path each row was read from, as
    Spark's ``_metadata.file_path`` gives it (see ``spark_path``); ``row_column``: also a column of
    that name holding each row's position in its data file (the protocol's file row index, counting
    the rows a deletion vector deletes, which are not read); ``stored``: also these long columns the
    files store beside the table's (file column name -> output name; null where a file lacks one),
    such as row tracking's materialized columns."""
    check_native_readable(snapshot)
    schema, part_cols = snapshot.schema, snapshot.partition_columns
    mapping = snapshot.column_mapping
    physical = {c: mapping.physical_name(c) for c in schema.names}
    root = _spark_root(storage)
    if "_spark_metadata" in root.split("/"):
        raise UnsupportedFeatureError(f"table root {root!r} is inside a directory named _spark_metadata, which Spark's file index skips")
    types = [schema.field(c).type for c in part_cols]
    part_keys = [physical[c] for c in part_cols]  # partitionValues are keyed by physical names
    keys: dict[tuple, int] = {}  # partition values as strings for Spark -> index
    index_of: dict[tuple, int] = {}  # raw logged partition values -> index
    plain: list[list[list]] = []  # files without deleted rows, split so that no directory holds two partitions in one group
    deleted: list[list[list]] = []  # the same for files with a deletion vector
    dir_keys: dict[tuple[bool, str], list[int]] = {}
    with_dv: list[tuple[str, Any]] = []
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
        has_dv = a.deletion_vector is not None and a.deletion_vector.cardinality > 0
        if has_dv:
            with_dv.append((rel, a))
        seen = dir_keys.setdefault((has_dv, rel.rsplit("/", 1)[0] if "/" in rel else ""), [])
        if index not in seen:
            seen.append(index)
        groups = deleted if has_dv else plain
        group = seen.index(index)
        while len(groups) <= group:
            groups.append([])
        groups[group].append([a.size, a.modification_time, index, f"{root}/{rel}"])
    logical = from_arrow_schema(schema, prefer_timestamp_ntz=True)
    delta_fields = {f["name"]: f for f in mapping.fields} if mapping.active else {}
    spark_fields = {f.name: f for f in logical.fields}
    collated = {f.name: f.dataType for f in spark_collations(logical, schema).fields}  # (what Spark compares the strings under)

    def physical_json(name: str) -> dict:
        """The Spark field of column ``name`` as the files name it (physical names, nested ones too;
        Parquet field ids in id mode, used where the session enables spark.sql.parquet.fieldId.read)."""
        f = spark_fields[name].jsonValue()
        return _physical_field(f, delta_fields[name], mapping.mode) if mapping.active else f

    columns = []
    for c in schema.names:
        f = physical_json(c)
        # A struct cast renames fields by position; the table's collations, at any depth (the files' types are nullable).
        cast = (mapping.active and _renamed_inside(f["type"])) or collated[c] != spark_fields[c].dataType
        columns.append([physical[c], c, _nullable(collated[c]).json() if cast else None])
    extra = [f"_metadata.file_path AS {_quoted(file_column)}"] if file_column is not None else []
    if row_column is not None:
        extra.append(f"_metadata.row_index AS {_quoted(row_column)}")
    extra += [f"{_quoted(c)} AS {_quoted(name)}" for c, name in (stored or {}).items()]
    spec = {
        "plain": plain, "deleted": deleted, "partitions": [list(k) for k in keys] if part_cols else None,
        "partSchema": orjson.dumps({"type": "struct", "fields": [physical_json(c) for c in part_cols]}).decode(),
        "dataSchema": orjson.dumps({"type": "struct", "fields": [physical_json(c) for c in schema.names if c not in part_cols]
                                    + [{"name": c, "type": "long", "nullable": True, "metadata": {}} for c in (stored or {})]}).decode(),
        "columns": columns, "extra": extra, "live": LIVE,
    }
    # Files with deletion vectors are scanned by a format that marks each row live or deleted (by its position).
    dv_format = deletion_vector_format(spark, storage, root, with_dv) if deleted else None
    # (one call: the plan is built in the JVM, where each py4j round trip would cost a millisecond)
    return DataFrame(_factory(spark).frame(spark._jsparkSession, orjson.dumps(spec).decode(), dv_format), spark)


def _nullable(t: T.DataType) -> T.DataType:
    """``t`` with every nested field, element and value nullable."""
    if isinstance(t, T.StructType):
        return T.StructType([T.StructField(f.name, _nullable(f.dataType), True, f.metadata) for f in t.fields])
    if isinstance(t, T.ArrayType):
        return T.ArrayType(_nullable(t.elementType), True)
    if isinstance(t, T.MapType):
        return T.MapType(_nullable(t.keyType), _nullable(t.valueType), True)
    return t


def _physical_field(f: dict, delta: dict, mode: str) -> dict:
    meta = {PARQUET_FIELD_ID_KEY: delta["metadata"][FIELD_ID]} if mode == "id" and isinstance((delta.get("metadata") or {}).get(FIELD_ID), int) else {}
    return {**f, "name": physical_name(delta), "metadata": meta, "type": _physical_type(f["type"], delta.get("type"), mode)}


def _physical_type(t: Any, delta: Any, mode: str) -> Any:
    if not isinstance(t, dict) or not isinstance(delta, dict):
        return t
    kind = t.get("type")
    if kind == "struct":
        by_name = {d["name"]: d for d in delta.get("fields") or []}
        return {**t, "fields": [_physical_field(f, by_name[f["name"]], mode) for f in t["fields"]]}
    if kind == "array":
        return {**t, "elementType": _physical_type(t["elementType"], delta.get("elementType"), mode)}
    if kind == "map":
        return {**t, "keyType": _physical_type(t["keyType"], delta.get("keyType"), mode), "valueType": _physical_type(t["valueType"], delta.get("valueType"), mode)}
    return t


def _renamed_inside(t: Any) -> bool:
    """Whether a physical type holds struct fields (whose names differ from the logical ones)."""
    if not isinstance(t, dict):
        return False
    kind = t.get("type")
    if kind == "struct":
        return True
    if kind == "array":
        return _renamed_inside(t["elementType"])
    if kind == "map":
        return _renamed_inside(t["keyType"]) or _renamed_inside(t["valueType"])
    return False

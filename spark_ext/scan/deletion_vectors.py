"""Deletion vectors inside Spark's Parquet scan: a ``ParquetFileFormat`` that marks each row it reads live
or deleted, so that ``spark_ext.read`` of a table with deletion vectors is one scan with a filter.

Each data file with a deletion vector is scanned with Spark's own Parquet reader (vectorised, filter
pushdown, splits), which also gives each row's position in its file (the temporary row index column
Spark uses for ``_metadata.row_index``). The format turns those positions into a boolean column
(``LIVE``: not deleted) from the file's deleted row indexes (sorted, looked up with a cursor that only
moves forward while positions ascend), and the DataFrame keeps the rows where it is true: a filter
Spark compiles, on a column computed per batch. (An anti join with a broadcast table of
the deleted rows, which hashes every scanned row's path and position, took 2-3x as long.)

The class is compiled on the driver with Janino (bundled with Spark) from the source below. Its
reader function runs in Spark's tasks (the deleted rows go to executors as a broadcast variable,
fetched once per executor), so executors need the class too: its bytecode goes into a small jar that ``SparkContext.addJar``
hands to every executor, as for any user jar. The class name carries a hash of the source, so two
versions never meet in one JVM.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import zipfile
from typing import Any

import numpy as np
import orjson
from py4j.protocol import Py4JError

from lakelog.table_features.deletion_vectors import DeletionVectors
from lakelog.errors import UnsupportedFeatureError
from lakelog.storage import Storage

from ..jvm.janino import compile_java

LIVE = "__lakelog_row_live"  # the format's boolean column: true where the row is not deleted

_SOURCE = r"""
import java.util.Arrays;
import java.util.HashMap;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

public class CLASSNAME extends ParquetFileFormat {
  private static final long serialVersionUID = 1L;
  private static final String LIVE_COLUMN = "LIVENAME";

  /**
   * Broadcast (each executor fetches and deserializes it once, not each task): a map from the Hadoop
   * path string (as Spark's PartitionedFile gives it) to that file's deleted row indexes, ascending.
   */
  private final Broadcast deleted;

  public CLASSNAME(Broadcast deleted) { this.deleted = deleted; }

  /**
   * Builds the map from JSON [[path, count], ...] and the row indexes of all files in that order, as
   * little-endian 32-bit integers (wide false) or 64-bit ones (wide true: a file past 2^31 rows).
   */
  public static CLASSNAME create(org.apache.spark.sql.SparkSession session, String paths, byte[] rows, boolean wide) throws Exception {
    java.util.List files = (java.util.List) new com.fasterxml.jackson.databind.ObjectMapper().readValue(paths, java.util.List.class);
    java.nio.ByteBuffer bytes = java.nio.ByteBuffer.wrap(rows).order(java.nio.ByteOrder.LITTLE_ENDIAN);
    java.nio.LongBuffer longs = bytes.asLongBuffer();
    java.nio.IntBuffer ints = bytes.asIntBuffer();
    HashMap map = new HashMap();
    for (int i = 0; i < files.size(); i++) {
      java.util.List f = (java.util.List) files.get(i);
      long[] gone = new long[((Number) f.get(1)).intValue()];
      if (wide) {
        longs.get(gone);
      } else {
        for (int j = 0; j < gone.length; j++) gone[j] = ints.get();
      }
      map.put(new org.apache.hadoop.fs.Path((String) f.get(0)).toUri().toString(), gone);
    }
    return new CLASSNAME(JavaSparkContext.fromSparkContext(session.sparkContext()).broadcast(map));
  }

  // Two relations over different deletion vectors must never be taken for the same scan.
  public boolean equals(Object other) { return this == other; }
  public int hashCode() { return System.identityHashCode(this); }
  public String toString() { return "Parquet with deletion vectors"; }

  private static int indexOf(StructType schema, String name) {
    String[] names = schema.fieldNames();
    for (int i = 0; i < names.length; i++) {
      if (names[i].equals(name)) return i;
    }
    return -1;
  }

  public scala.Option vectorTypes(StructType requiredSchema, StructType partitionSchema, SQLConf conf) {
    scala.Option types = super.vectorTypes(requiredSchema, partitionSchema, conf);
    int live = indexOf(requiredSchema, LIVE_COLUMN);
    if (types.isEmpty() || live < 0) return types;
    java.util.ArrayList names = new java.util.ArrayList();
    scala.collection.Iterator it = ((scala.collection.Iterable) types.get()).iterator();
    while (it.hasNext()) names.add(it.next());
    names.set(live, ColumnVector.class.getName());  // (the live column is this format's own vector)
    return scala.Option.apply(scala.jdk.javaapi.CollectionConverters.asScala(names).toList());
  }

  public scala.Function1 buildReaderWithPartitionValues(org.apache.spark.sql.SparkSession session, StructType dataSchema,
      StructType partitionSchema, StructType requiredSchema, scala.collection.immutable.Seq filters,
      scala.collection.immutable.Map options, Configuration hadoopConf) {
    int live = indexOf(requiredSchema, LIVE_COLUMN);
    if (live < 0) {
      throw new IllegalStateException("a scan of files with deletion vectors must read column " + LIVE_COLUMN);
    }
    String rowIndexName = ParquetFileFormat.ROW_INDEX_TEMPORARY_COLUMN_NAME();
    // The reader reads the required columns without the live one, and the row index (unless the query
    // already asks for it, as _metadata.row_index), last.
    java.util.ArrayList fields = new java.util.ArrayList();
    StructField[] required = requiredSchema.fields();
    for (int i = 0; i < required.length; i++) {
      if (i != live) fields.add(required[i]);
    }
    int rowIndex = -1;
    for (int i = 0; i < fields.size(); i++) {
      if (((StructField) fields.get(i)).name().equals(rowIndexName)) rowIndex = i;
    }
    boolean added = rowIndex < 0;
    if (added) {
      rowIndex = fields.size();
      fields.add(new StructField(rowIndexName, DataTypes.LongType, true, Metadata.empty()));  // (nullable: not a column the files must have)
    }
    StructType readSchema = new StructType((StructField[]) fields.toArray(new StructField[0]));
    java.util.ArrayList kept = new java.util.ArrayList();
    scala.collection.Iterator it = filters.iterator();
    while (it.hasNext()) {
      org.apache.spark.sql.sources.Filter f = (org.apache.spark.sql.sources.Filter) it.next();
      // (no filter on the live column reaches the Parquet reader: the files do not have it)
      if (!Arrays.asList(f.references()).contains(LIVE_COLUMN)) kept.add(f);
    }
    scala.collection.immutable.Seq pushed = scala.jdk.javaapi.CollectionConverters.asScala(kept).toList();
    StructType fileSchema = new StructType();
    StructField[] data = dataSchema.fields();
    for (int i = 0; i < data.length; i++) {
      if (!data[i].name().equals(LIVE_COLUMN)) fileSchema = fileSchema.add(data[i]);
    }
    scala.Function1 inner = super.buildReaderWithPartitionValues(session, fileSchema, partitionSchema, readSchema, pushed, options, hadoopConf);
    DataType[] types = new DataType[required.length + partitionSchema.fields().length];
    for (int i = 0; i < types.length; i++) {
      types[i] = i < required.length ? required[i].dataType() : partitionSchema.fields()[i - required.length].dataType();
    }
    return new Reader(inner, deleted, live, rowIndex, added, required.length, types);
  }

  /** The reader function Spark runs per file (on executors): the inner reader's rows, with the live column. */
  public static class Reader extends scala.runtime.AbstractFunction1 implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    private final scala.Function1 inner;
    private final Broadcast deleted;
    final int live, rowIndex, required;
    final boolean added;
    final DataType[] types;  // of the output columns: the required ones, then the partition columns

    public Reader(scala.Function1 inner, Broadcast deleted, int live, int rowIndex, boolean added, int required, DataType[] types) {
      this.inner = inner; this.deleted = deleted; this.live = live; this.rowIndex = rowIndex; this.added = added;
      this.required = required; this.types = types;
    }

    public Object apply(Object file) {
      PartitionedFile pf = (PartitionedFile) file;
      String key = pf.toPath().toUri().toString();
      long[] gone = (long[]) ((HashMap) deleted.value()).get(key);
      if (gone == null) {
        throw new IllegalStateException("lakelog has no deletion vector for " + key + ", a file it scans as having one");
      }
      return new Rows((scala.collection.Iterator) inner.apply(file), gone, this);
    }

    /** Where output column i comes from in the inner reader's rows (-1: the live column). */
    int source(int i) {
      if (i == live) return -1;
      if (i < required) return i < live ? i : i - 1;
      return i - 1 + (added ? 1 : 0);  // partition columns follow the read schema
    }
  }

  public static class Rows extends scala.collection.AbstractIterator {
    private final scala.collection.Iterator inner;
    private final long[] gone;
    private final Reader r;
    private int cursor = 0;
    private long last = Long.MIN_VALUE;
    private OnHeapColumnVector flags;
    private int capacity = 0;
    private UnsafeProjection toUnsafe;

    Rows(scala.collection.Iterator inner, long[] gone, Reader r) { this.inner = inner; this.gone = gone; this.r = r; }

    public boolean hasNext() { return inner.hasNext(); }

    private boolean isLive(long row) {
      if (row < last) {  // (positions went back: find the place again)
        int at = Arrays.binarySearch(gone, row);
        cursor = at >= 0 ? at : -at - 1;
      }
      last = row;
      while (cursor < gone.length && gone[cursor] < row) cursor++;
      return cursor >= gone.length || gone[cursor] != row;
    }

    public Object next() {
      Object item = inner.next();
      int n = r.types.length;
      if (item instanceof ColumnarBatch) {
        ColumnarBatch batch = (ColumnarBatch) item;
        int rows = batch.numRows();
        if (flags == null || capacity < rows) {
          if (flags != null) flags.close();
          capacity = Math.max(rows, 4096);
          flags = new OnHeapColumnVector(capacity, DataTypes.BooleanType);
        }
        ColumnVector positions = batch.column(r.rowIndex);
        for (int i = 0; i < rows; i++) flags.putBoolean(i, isLive(positions.getLong(i)));
        ColumnVector[] columns = new ColumnVector[n];
        for (int i = 0; i < n; i++) {
          int s = r.source(i);
          columns[i] = s < 0 ? flags : batch.column(s);
        }
        return new ColumnarBatch(columns, rows);
      }
      // Row by row (the vectorised reader is off, or the schema is too wide for it): the same columns
      // as an unsafe row, as Spark's reader gives them.
      InternalRow row = (InternalRow) item;
      Object[] values = new Object[n];
      for (int i = 0; i < n; i++) {
        int s = r.source(i);
        if (s < 0) values[i] = Boolean.valueOf(isLive(row.getLong(r.rowIndex)));
        else values[i] = row.isNullAt(s) ? null : row.get(s, r.types[i]);
      }
      if (toUnsafe == null) toUnsafe = UnsafeProjection.create(r.types);
      return toUnsafe.apply(new GenericInternalRow(values));
    }
  }
}
"""

_CLASS = "LakelogDeletionVectorFormat_" + hashlib.sha256(_SOURCE.encode()).hexdigest()[:12]
_classes: dict[int, tuple[Any, Any, str, set]] = {}  # id(gateway) -> (gateway, create method, jar, applications it went to)
_lock = threading.Lock()


def _create(spark):
    """The format class's static ``create`` method in this session's driver (the class compiled on first
    use in this JVM; its jar added to each SparkContext, as a restarted session has a new one)."""
    sc = spark.sparkContext
    gateway = sc._gateway
    with _lock:
        entry = _classes.get(id(gateway))
        if entry is None or entry[0] is not gateway:
            jvm = spark._jvm
            compiler = compile_java(spark, _SOURCE.replace("CLASSNAME", _CLASS).replace("LIVENAME", LIVE))
            jar = os.path.join(tempfile.mkdtemp(prefix="lakelog-spark-"), f"{_CLASS}.jar")
            with zipfile.ZipFile(jar, "w") as z:
                for name, code in dict(compiler.getBytecodes()).items():
                    z.writestr(name.replace(".", "/") + ".class", bytes(code))
            types = gateway.new_array(jvm.java.lang.Class, 4)
            types[0], types[1] = jvm.java.lang.Class.forName("org.apache.spark.sql.SparkSession"), jvm.java.lang.Class.forName("java.lang.String")
            types[2], types[3] = jvm.java.lang.Class.forName("[B"), jvm.java.lang.Boolean.TYPE
            create = compiler.getClassLoader().loadClass(_CLASS).getMethod("create", types)
            entry = _classes[id(gateway)] = (gateway, create, jar, set())
        app = sc.applicationId
        if app not in entry[3]:
            try:
                sc._jsc.sc().addJar(entry[2])  # (executors load the class from it when they deserialize a task)
            except Py4JError as e:
                raise UnsupportedFeatureError(
                    f"this Spark session refused the jar that lets its executors read deletion vectors ({e}); "
                    'read the table with spark.read.format("lakelog") instead'
                ) from None
            entry[3].add(app)
        return entry[1]


def deletion_vector_format(spark, storage: Storage, root: str, files: list[tuple[str, Any]]):
    """A JVM ``ParquetFileFormat`` that marks the rows of ``files`` ((relative path, add) pairs, each
    with a deletion vector) live or deleted in column ``LIVE``; ``root``: the table root as Spark reads
    it. Each deletion vector is read and checked by lakelog (a missing or damaged one is a typed error
    naming it)."""
    dvs = DeletionVectors(storage)
    rows = [dvs.rows(a) for _, a in files]  # (sorted, as the format's cursor needs)
    paths = [[f"{root}/{rel}", len(r)] for (rel, _), r in zip(files, rows)]
    wide = max((int(r[-1]) for r in rows if len(r)), default=0) >= 2**31  # (each is sorted)
    # (32-bit where they fit: half the bytes through py4j)
    data = np.concatenate(rows).astype("<i8" if wide else "<i4").tobytes() if rows else b""
    gateway, jvm = spark.sparkContext._gateway, spark._jvm
    args = gateway.new_array(jvm.java.lang.Object, 4)
    args[0], args[1], args[2], args[3] = spark._jsparkSession, orjson.dumps(paths).decode(), bytearray(data), wide
    return _create(spark).invoke(None, args)

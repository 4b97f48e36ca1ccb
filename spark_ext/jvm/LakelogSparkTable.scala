package org.apache.spark.sql.lakelog

import java.util

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.catalog.CatalogTable
import org.apache.spark.sql.connector.catalog._
import org.apache.spark.sql.connector.expressions.{Expressions, Transform}
import org.apache.spark.sql.connector.expressions.ClusterByTransform
import org.apache.spark.sql.connector.read.ScanBuilder
import org.apache.spark.sql.connector.write.{LogicalWriteInfo, LogicalWriteInfoImpl, WriteBuilder}
import org.apache.spark.sql.util.CaseInsensitiveStringMap
import org.apache.spark.sql.types.{DataType, StructType}

/** What lakelog's log says of a table at one version (Python's `table` reply). */
case class LakelogTableInfo(
    path: String,
    version: Long,
    schema: StructType,
    partitionColumns: Seq[String],
    clusteringColumns: Seq[String],
    properties: Map[String, String],
    description: Option[String])

object LakelogTableInfo {
  private val mapper = new ObjectMapper()

  def parse(text: String): LakelogTableInfo = {
    val node = mapper.readTree(text)
    def strings(n: JsonNode): Seq[String] =
      if (n == null || n.isNull) Nil else n.elements().asScala.map(_.asText()).toSeq
    val props = Option(node.get("properties")).filter(!_.isNull)
      .map(_.fields().asScala.map(e => e.getKey -> e.getValue.asText()).toMap).getOrElse(Map.empty[String, String])
    LakelogTableInfo(
      node.get("path").asText(),
      node.get("version").asLong(),
      DataType.fromJson(node.get("schema").asText()).asInstanceOf[StructType],
      strings(node.get("partitionColumns")),
      strings(node.get("clusteringColumns")),
      props,
      Option(node.get("description")).filter(!_.isNull).map(_.asText()))
  }
}

/** How a read names the version: none (the latest), a version or a timestamp (microseconds). */
sealed trait VersionSpec
case object AtLatest extends VersionSpec
case class AtVersion(version: String) extends VersionSpec
case class AtTimestamp(micros: Long) extends VersionSpec

/**
 * A lakelog table as Spark's catalog API sees it. Batch reads and writes never reach this object: lakelog's
 * analysis rule ([[LakelogAnalysis]]) turns every read into the plan `spark_ext.read` builds and every write,
 * row-level change and DDL into a command run by lakelog. The object carries the schema, partitioning and
 * properties for analysis, DESCRIBE, SHOW CREATE TABLE and SHOW TBLPROPERTIES, and hands streaming reads and
 * writes (`readStream.table`, `writeStream.toTable`) to lakelog's streaming source and sink (`format("lakelog")`).
 */
case class LakelogSparkTable(
    info: LakelogTableInfo,
    catalogTable: Option[CatalogTable],
    timeTravel: VersionSpec,
    storageOptions: Map[String, String] = Map.empty,
    acceptsAnySchema: Boolean = true)
  extends Table with SupportsRead with SupportsWrite {

  def path: String = info.path

  override def name(): String = catalogTable.map(_.identifier.unquotedString).getOrElse(s"lakelog.`$path`")

  override def schema(): StructType = info.schema

  override def columns(): Array[Column] = CatalogV2Util.structTypeToV2Columns(info.schema)

  override def partitioning(): Array[Transform] = {
    val parts: Seq[Transform] = info.partitionColumns.map(c => Expressions.identity(c))
    val cluster: Seq[Transform] =
      if (info.clusteringColumns.isEmpty) Nil
      else Seq(ClusterByTransform(info.clusteringColumns.map(c => Expressions.column(c))))
    (parts ++ cluster).toArray
  }

  override def properties(): util.Map[String, String] = {
    val base = info.properties ++ Map(
      TableCatalog.PROP_PROVIDER -> LakelogCatalog.Provider,
      TableCatalog.PROP_LOCATION -> path) ++
      info.description.map(TableCatalog.PROP_COMMENT -> _) ++
      catalogTable.filter(_.tableType.name == "EXTERNAL").map(_ => TableCatalog.PROP_EXTERNAL -> "true")
    base.asJava
  }

  override def capabilities(): util.Set[TableCapability] = (Set(
    TableCapability.BATCH_READ,
    TableCapability.BATCH_WRITE,
    TableCapability.TRUNCATE,
    TableCapability.OVERWRITE_BY_FILTER,
    TableCapability.OVERWRITE_DYNAMIC,
    TableCapability.MICRO_BATCH_READ,
    TableCapability.STREAMING_WRITE) ++
    // (lakelog's analysis rule aligns a batch write's data by Spark's own rule, and keeps the columns a write
    // with schema evolution adds, which Spark's output resolution would refuse first; a row-level command's
    // target does without, so that Spark resolves its clauses)
    (if (acceptsAnySchema) Set(TableCapability.ACCEPT_ANY_SCHEMA) else Set.empty)).asJava

  /** lakelog's Python data source (`format("lakelog")`) over this table: its streaming source and sink. */
  private def source(options: util.Map[String, String]): Table = {
    val provider = org.apache.spark.sql.execution.datasources.DataSource
      .lookupDataSourceV2(LakelogCatalog.Provider, org.apache.spark.sql.internal.SQLConf.get)
      .getOrElse(throw LakelogException("LAKELOG_NOT_REGISTERED",
        "format(\"lakelog\") is not registered in this session: call spark_ext.register(spark)"))
    val all = new util.HashMap[String, String](options)
    storageOptions.foreach { case (k, v) => all.put(s"storage.$k", v) }
    all.put("path", path)
    provider.getTable(schema(), Array.empty[Transform], all)
  }

  private def withPath(options: CaseInsensitiveStringMap): CaseInsensitiveStringMap = {
    val all = new util.HashMap[String, String](options.asCaseSensitiveMap())
    all.put("path", path)
    new CaseInsensitiveStringMap(all)
  }

  override def newScanBuilder(options: CaseInsensitiveStringMap): ScanBuilder =
    source(options.asCaseSensitiveMap()).asInstanceOf[SupportsRead].newScanBuilder(withPath(options))

  override def newWriteBuilder(info: LogicalWriteInfo): WriteBuilder = {
    val options = withPath(info.options)
    source(options.asCaseSensitiveMap()).asInstanceOf[SupportsWrite].newWriteBuilder(
      LogicalWriteInfoImpl(info.queryId, info.schema, options, info.rowIdSchema, info.metadataSchema))
  }
}

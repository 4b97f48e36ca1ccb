package org.apache.spark.sql.lakelog

import java.util

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.catalog.CatalogTable
import org.apache.spark.sql.connector.catalog._
import org.apache.spark.sql.connector.expressions.{Expressions, Transform}
import org.apache.spark.sql.connector.write.{LogicalWriteInfo, WriteBuilder}
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
 * A lakelog table as Spark's catalog API sees it. Spark never scans or writes it through this object:
 * lakelog's analysis rules ([[LakelogAnalysis]]) turn every read into the plan `spark_ext.read` builds and
 * every write, row-level change and DDL into a command run by lakelog; the object carries the schema,
 * partitioning and properties for analysis, DESCRIBE, SHOW CREATE TABLE and SHOW TBLPROPERTIES.
 */
case class LakelogSparkTable(
    info: LakelogTableInfo,
    catalogTable: Option[CatalogTable],
    timeTravel: VersionSpec,
    storageOptions: Map[String, String] = Map.empty)
  extends Table with SupportsWrite with V2TableWithV1Fallback {

  def path: String = info.path

  override def name(): String = catalogTable.map(_.identifier.unquotedString).getOrElse(s"lakelog.`$path`")

  override def schema(): StructType = info.schema

  override def columns(): Array[Column] = CatalogV2Util.structTypeToV2Columns(info.schema)

  override def partitioning(): Array[Transform] = {
    val parts: Seq[Transform] = info.partitionColumns.map(c => Expressions.identity(c))
    val cluster: Seq[Transform] =
      if (info.clusteringColumns.isEmpty) Nil
      else Seq(org.apache.spark.sql.connector.expressions.ClusterByTransform(info.clusteringColumns.map(c => Expressions.column(c))))
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

  override def capabilities(): util.Set[TableCapability] = Set(
    TableCapability.BATCH_READ,
    TableCapability.BATCH_WRITE,
    TableCapability.TRUNCATE,
    TableCapability.OVERWRITE_BY_FILTER,
    TableCapability.OVERWRITE_DYNAMIC,
    TableCapability.V1_BATCH_WRITE).asJava

  override def v1Table: CatalogTable = catalogTable.getOrElse(
    throw LakelogException("LAKELOG_UNSUPPORTED", s"$name has no catalog entry; use its path with format(\"lakelog\")"))

  override def newWriteBuilder(info: LogicalWriteInfo): WriteBuilder =
    // Every write is planned by LakelogAnalysis; reaching this means a plan shape it does not know.
    throw LakelogException("LAKELOG_UNSUPPORTED_WRITE",
      s"this write to the lakelog table $name is not supported; use INSERT, MERGE, UPDATE, DELETE or df.write.format(\"lakelog\")")
}

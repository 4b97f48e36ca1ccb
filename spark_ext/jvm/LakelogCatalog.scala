package org.apache.spark.sql.lakelog

import java.util

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.lakelog.IdentifierSyntax._
import org.apache.spark.sql.catalyst.TableIdentifier
import org.apache.spark.sql.catalyst.analysis.{NoSuchTableException, TableAlreadyExistsException}
import org.apache.spark.sql.catalyst.catalog.{CatalogStorageFormat, CatalogTable, CatalogTableType, CatalogUtils}
import org.apache.spark.sql.connector.catalog._
import org.apache.spark.sql.connector.expressions.Transform
import org.apache.spark.sql.types.StructType

/**
 * Spark's session catalog (`spark_catalog`) with lakelog tables in it, as Delta's DeltaCatalog does for
 * Delta tables: the catalog keeps a lakelog table's name, location and provider, and its log keeps the
 * rest (schema, partitioning, properties, versions), so a table read by path from Python and by name from
 * Spark is the same table. Other tables pass through to the session catalog unchanged.
 *
 * `lakelog.`/path`` names a table by its location, `name@v3` (or `@yyyyMMddHHmmssSSS`) a version of it.
 */
class LakelogCatalog extends DelegatingCatalogExtension {
  import LakelogCatalog._

  private def session: SparkSession = SparkSession.active

  private def tableCatalog: TableCatalog = delegate.asInstanceOf[TableCatalog]

  override def loadTable(ident: Identifier): Table = load(ident, AtLatest)

  override def loadTable(ident: Identifier, version: String): Table = load(ident, AtVersion(version))

  override def loadTable(ident: Identifier, timestamp: Long): Table = load(ident, AtTimestamp(timestamp))

  private def load(ident: Identifier, timeTravel: VersionSpec): Table = {
    if (isPathIdent(ident)) {
      return pathTable(ident.name, timeTravel)
    }
    val table = try {
      super.loadTable(ident)
    } catch {
      case e: NoSuchTableException =>
        atSyntax(ident.name) match {
          case Some((name, at)) if timeTravel == AtLatest => return load(Identifier.of(ident.namespace, name), at)
          case _ => throw e
        }
    }
    table match {
      case v1: V1Table if isLakelog(v1.v1Table) => catalogedTable(v1.v1Table, timeTravel)
      case other => timeTravel match {
        case AtLatest => other
        case AtVersion(v) => super.loadTable(ident, v) // Spark's error: the table cannot time travel
        case AtTimestamp(ts) => super.loadTable(ident, ts)
      }
    }
  }

  override def tableExists(ident: Identifier): Boolean = {
    if (isPathIdent(ident)) {
      LakelogPython.string("exists", session, "path" -> ident.name) == "true"
    } else {
      super.tableExists(ident)
    }
  }

  override def createTable(ident: Identifier, tableInfo: TableInfo): Table = {
    if (!isLakelogProvider(tableInfo.properties.asScala.toMap)) return super.createTable(ident, tableInfo)
    LakelogDDL.create(session, this, ident, LakelogDDL.columnsOfCatalog(tableInfo.columns.toSeq), tableInfo.partitions.toSeq,
      tableInfo.properties.asScala.toMap, tableInfo.constraints.toSeq.map(c => c.name -> c.toDDL), "create", None)
    loadTable(ident)
  }

  override def createTable(
      ident: Identifier,
      columns: Array[Column],
      partitions: Array[Transform],
      properties: util.Map[String, String]): Table = {
    if (!isLakelogProvider(properties.asScala.toMap)) return super.createTable(ident, columns, partitions, properties)
    LakelogDDL.create(session, this, ident, LakelogDDL.columnsOfCatalog(columns.toSeq), partitions.toSeq,
      properties.asScala.toMap, Nil, "create", None)
    loadTable(ident)
  }

  override def createTableLike(ident: Identifier, info: TableInfo, source: Table): Table = {
    val given = info.properties.asScala.toMap
    val lakelog = given.get(TableCatalog.PROP_PROVIDER).map(_.equalsIgnoreCase(Provider))
      .getOrElse(source.isInstanceOf[LakelogSparkTable])
    if (!lakelog) return super.createTableLike(ident, info, source)
    val (columns, properties, checks) = source match {
      case s: LakelogSparkTable =>
        // (as Delta: the definition, properties and CHECK constraints included; not the rows)
        val constraint = "delta.constraints."
        (LakelogDDL.columnsOfSchema(s.info.schema), s.info.properties.filter(!_._1.startsWith(constraint)),
          s.info.properties.collect { case (k, v) if k.startsWith(constraint) => k.stripPrefix(constraint) -> s"CHECK ($v)" }.toSeq)
      case other => (LakelogDDL.columnsOfCatalog(other.columns.toSeq), Map.empty[String, String], Nil)
    }
    LakelogDDL.create(session, this, ident, columns, source.partitioning.toSeq,
      properties ++ given + (TableCatalog.PROP_PROVIDER -> Provider), checks, "create", None)
    loadTable(ident)
  }

  override def alterTable(ident: Identifier, changes: TableChange*): Table = {
    lakelogPath(ident) match {
      case Some(path) =>
        LakelogDDL.alter(session, path, changes)
        loadTable(ident)
      case None => super.alterTable(ident, changes: _*)
    }
  }

  override def dropTable(ident: Identifier): Boolean = {
    if (isPathIdent(ident)) {
      throw LakelogException("LAKELOG_UNSUPPORTED_FEATURE",
        s"DROP TABLE lakelog.`${ident.name}`: a table named by its path has no catalog entry to drop; its files stay where they are")
    }
    super.dropTable(ident)
  }

  /** The location of the lakelog table `ident` names (by path or in the catalog), or None. */
  def lakelogPath(ident: Identifier): Option[String] = {
    if (isPathIdent(ident)) {
      Some(ident.name)
    } else {
      try {
        super.loadTable(ident) match {
          case v1: V1Table if isLakelog(v1.v1Table) => Some(locationOf(v1.v1Table))
          case _ => None
        }
      } catch {
        case _: NoSuchTableException => None
      }
    }
  }

  /** The session catalog's entry for `ident`, if it has one. */
  def catalogEntry(ident: Identifier): Option[CatalogTable] = {
    if (isPathIdent(ident) || ident.namespace.length > 1) return None
    val id = tableIdentifier(ident)
    val catalog = session.sessionState.catalog
    if (catalog.tableExists(id)) Some(catalog.getTableMetadata(id)) else None
  }

  def tableIdentifier(ident: Identifier): TableIdentifier = {
    val db = ident.namespace.headOption.getOrElse(session.sessionState.catalog.getCurrentDatabase)
    TableIdentifier(ident.name, Some(db), Some(name()))
  }

  /** Enter a lakelog table in the session catalog: its name, location and provider (the log keeps the rest). */
  def register(ident: Identifier, location: String, managed: Boolean, comment: Option[String]): Unit = {
    val entry = CatalogTable(
      identifier = tableIdentifier(ident),
      tableType = if (managed) CatalogTableType.MANAGED else CatalogTableType.EXTERNAL,
      storage = CatalogStorageFormat.empty.copy(locationUri = Some(CatalogUtils.stringToURI(location))),
      schema = new StructType(),
      provider = Some(Provider),
      comment = comment)
    try {
      session.sessionState.catalog.createTable(entry, ignoreIfExists = false, validateLocation = false)
    } catch {
      case _: TableAlreadyExistsException | _: org.apache.spark.sql.AnalysisException if catalogEntry(ident).isDefined =>
        throw new TableAlreadyExistsException(ident.toMultipart)
    }
  }

  def defaultLocation(ident: Identifier): String =
    CatalogUtils.URIToString(session.sessionState.catalog.defaultTablePath(tableIdentifier(ident)))

  private def catalogedTable(entry: CatalogTable, timeTravel: VersionSpec): LakelogSparkTable =
    LakelogSparkTable(tableInfo(session, locationOf(entry), timeTravel), Some(entry), timeTravel)

  private def pathTable(path: String, timeTravel: VersionSpec): Table = {
    atSyntax(path) match {
      case Some((base, at)) if timeTravel == AtLatest && LakelogPython.string("exists", session, "path" -> path) != "true" =>
        LakelogSparkTable(tableInfo(session, base, at), None, at)
      case _ => LakelogSparkTable(tableInfo(session, path, timeTravel), None, timeTravel)
    }
  }

  def isPathIdent(ident: Identifier): Boolean =
    ident.namespace.length == 1 && ident.namespace.head.equalsIgnoreCase(Provider) &&
      (ident.name.contains("/") || ident.name.contains(":") || !namespaceExists(ident.namespace))
}

object LakelogCatalog {
  val Provider = "lakelog"

  private val VersionSuffix = "^(.+)@[vV](\\d+)$".r
  private val TimestampSuffix = "^(.+)@(\\d{17})$".r

  def isLakelog(entry: CatalogTable): Boolean = entry.provider.exists(_.equalsIgnoreCase(Provider))

  def isLakelogProvider(properties: Map[String, String]): Boolean =
    properties.get(TableCatalog.PROP_PROVIDER).exists(_.equalsIgnoreCase(Provider))

  def locationOf(entry: CatalogTable): String = CatalogUtils.URIToString(entry.location)

  /** `name@v12` / `name@20240102030405678` (Delta's syntax for a version or a timestamp), split. */
  def atSyntax(name: String): Option[(String, VersionSpec)] = name match {
    case VersionSuffix(base, v) => Some(base -> AtVersion(v))
    case TimestampSuffix(base, ts) =>
      val format = new java.text.SimpleDateFormat("yyyyMMddHHmmssSSS")
      format.setTimeZone(java.util.TimeZone.getTimeZone(SparkSession.active.sessionState.conf.sessionLocalTimeZone))
      Some(base -> AtTimestamp(format.parse(ts).getTime * 1000L))
    case _ => None
  }

  /** The location of the lakelog table a name gives (`db.t`, `lakelog.`path``, or a path), or null. */
  def pathOf(session: SparkSession, name: String): String = {
    if (name.contains("/") && !name.contains("`")) return name
    val parts = session.sessionState.sqlParser.parseMultipartIdentifier(name)
    session.sessionState.catalogManager.v2SessionCatalog match {
      case catalog: LakelogCatalog =>
        val namespace = if (parts.length == 1) Array(session.sessionState.catalog.getCurrentDatabase) else parts.init.toArray
        val ident = Identifier.of(namespace, parts.last)
        catalog.lakelogPath(ident).orNull
      case _ => null
    }
  }

  def tableInfo(session: SparkSession, path: String, timeTravel: VersionSpec): LakelogTableInfo = {
    val (version, timestamp) = timeTravel match {
      case AtLatest => (null, null)
      case AtVersion(v) => (v, null)
      case AtTimestamp(ts) => (null, java.lang.Long.valueOf(ts))
    }
    LakelogTableInfo.parse(LakelogPython.string("table", session, "path" -> path, "version" -> version, "timestamp" -> timestamp))
  }
}

package org.apache.spark.sql.lakelog

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.ObjectMapper
import com.fasterxml.jackson.databind.node.{ArrayNode, ObjectNode}

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.lakelog.IdentifierSyntax._
import org.apache.spark.sql.catalyst.analysis.{NoSuchTableException, TableAlreadyExistsException}
import org.apache.spark.sql.catalyst.plans.logical.{ColumnDefinition, LogicalPlan}
import org.apache.spark.sql.classic.Dataset
import org.apache.spark.sql.connector.catalog.{Identifier, TableCatalog, TableChange}
import org.apache.spark.sql.connector.catalog.constraints.Check
import org.apache.spark.sql.connector.expressions.{ClusterByTransform, IdentityTransform, Transform}
import org.apache.spark.sql.types.{StructField, StructType}

/** CREATE/REPLACE TABLE and ALTER TABLE on lakelog tables: the log changes in Python, the catalog entry here. */
object LakelogDDL {
  private val mapper = new ObjectMapper()

  /** Properties Spark keeps for itself (they never become table properties in the log). */
  private val Reserved = Set(TableCatalog.PROP_PROVIDER, TableCatalog.PROP_LOCATION, TableCatalog.PROP_OWNER,
    TableCatalog.PROP_COMMENT, TableCatalog.PROP_EXTERNAL, TableCatalog.PROP_IS_MANAGED_LOCATION,
    TableCatalog.PROP_COLLATION, "path")

  /** A column as a CREATE TABLE declares it: name, type, nullability and what Spark parsed of its clauses. */
  case class ColumnSpec(field: StructField, default: Option[String], generation: Option[String],
                        identity: Option[(Long, Long, Boolean)], comment: Option[String])

  def columnsOf(definitions: Seq[ColumnDefinition]): Seq[ColumnSpec] = definitions.map { c =>
    ColumnSpec(StructField(c.name, c.dataType, c.nullable), c.defaultValue.map(_.originalSQL),
      c.generationExpression.map(_.originalSQL),
      c.identityColumnSpec.map(i => (i.getStart, i.getStep, i.isAllowExplicitInsert)), c.comment)
  }

  /** Columns as the catalog API gives them. */
  def columnsOfCatalog(columns: Seq[org.apache.spark.sql.connector.catalog.Column]): Seq[ColumnSpec] = columns.map { c =>
    ColumnSpec(StructField(c.name, c.dataType, c.nullable), Option(c.defaultValue).map(_.getSql),
      Option(c.generationExpression), Option(c.identityColumnSpec).map(i => (i.getStart, i.getStep, i.isAllowExplicitInsert)),
      Option(c.comment))
  }

  /** Columns from a lakelog table's schema as Spark sees it (its field metadata says defaults, generation
   *  expressions and identity). */
  def columnsOfSchema(schema: StructType): Seq[ColumnSpec] = schema.fields.toSeq.map { f =>
    def meta(key: String): Option[String] = if (f.metadata.contains(key)) Some(f.metadata.getString(key)) else None
    def long(key: String): Long = f.metadata.getLong(key)
    val identity = if (f.metadata.contains("delta.identity.start")) {
      Some((long("delta.identity.start"), long("delta.identity.step"),
        f.metadata.contains("delta.identity.allowExplicitInsert") && f.metadata.getBoolean("delta.identity.allowExplicitInsert")))
    } else None
    ColumnSpec(StructField(f.name, f.dataType, f.nullable), meta("CURRENT_DEFAULT"), meta("delta.generationExpression"),
      identity, f.getComment())
  }

  def create(
      session: SparkSession,
      catalog: LakelogCatalog,
      ident: Identifier,
      columns: Seq[ColumnSpec],
      partitions: Seq[Transform],
      properties: Map[String, String],
      constraints: Seq[(String, String)],
      mode: String,
      query: Option[LogicalPlan]): Unit = {
    val byPath = catalog.isPathIdent(ident)
    val entry = catalog.catalogEntry(ident)
    entry.foreach { e =>
      if (!LakelogCatalog.isLakelog(e) && mode != "createIfNotExists") {
        throw LakelogException("LAKELOG_INVALID_ARGUMENT",
          s"${e.identifier.unquotedString} exists in the catalog with provider ${e.provider.getOrElse("hive")}, not lakelog")
      }
    }
    mode match {
      case "create" if entry.isDefined => throw new TableAlreadyExistsException(ident.toMultipart)
      case "createIfNotExists" if entry.isDefined => return
      case "replace" if entry.isEmpty && !byPath => throw new NoSuchTableException(ident.toMultipart)
      case _ =>
    }
    val given = properties.get(TableCatalog.PROP_LOCATION).orElse(properties.get("option.path"))
      .map(g => if (byPath) g else tableLocation(session, ident, g))
    val known = if (byPath) Some(ident.name) else entry.map(LakelogCatalog.locationOf)
    (given, known) match {
      case (Some(g), Some(k)) if !samePath(session, g, k) =>
        throw LakelogException("LAKELOG_INVALID_ARGUMENT",
          s"${ident.toMultipart.mkString(".")} is the lakelog table at '$k', not at '$g'")
      case _ =>
    }
    val managed = known.isEmpty && given.isEmpty ||
      entry.exists(_.tableType.name == "MANAGED")
    val location = known.orElse(given).getOrElse(catalog.defaultLocation(ident))
    val (partitionColumns, clusterColumns) = partitionsOf(partitions)
    val spec = mapper.createObjectNode()
    spec.put("location", location)
    spec.put("mode", mode)
    spec.put("managed", managed && entry.isEmpty)
    spec.put("name", if (byPath) null else ident.toMultipart.mkString("."))
    properties.get(TableCatalog.PROP_COMMENT).foreach(spec.put("comment", _))
    val cols = spec.putArray("columns")
    columns.foreach { c =>
      val o = cols.addObject()
      o.put("name", c.field.name)
      o.put("type", c.field.dataType.json)
      o.put("nullable", c.field.nullable)
      c.default.foreach(o.put("default", _))
      c.generation.foreach(o.put("generation", _))
      c.comment.foreach(o.put("comment", _))
      c.identity.foreach { case (start, step, explicit) =>
        val i = o.putObject("identity")
        i.put("start", start)
        i.put("step", step)
        i.put("allowExplicitInsert", explicit)
      }
    }
    strings(spec.putArray("partitionBy"), partitionColumns)
    clusterColumns.foreach(cs => strings(spec.putArray("clusterBy"), cs))
    val props = spec.putObject("properties")
    properties.foreach { case (k, v) => if (!Reserved.contains(k)) props.put(k, v) }
    val checks = spec.putArray("constraints")
    constraints.foreach { case (name, sql) => checks.addObject().put("name", name).put("sql", sql) }
    val data = query.map(q => Dataset.ofRows(session.asInstanceOf[org.apache.spark.sql.classic.SparkSession], q))
    val reply = LakelogPython.string("create", session, "spec" -> mapper.writeValueAsString(spec), "data" -> data.orNull)
    Commands.refresh(session, location)
    if (!byPath && entry.isEmpty && reply != "exists") {
      catalog.register(ident, location, managed, properties.get(TableCatalog.PROP_COMMENT))
    }
  }

  /** A LOCATION as Spark's session catalog keeps it: a relative one is under the database's location
   *  (Spark's rule for every table it creates), so that the table is written where its entry points. */
  private def tableLocation(session: SparkSession, ident: Identifier, location: String): String = {
    if (new org.apache.hadoop.fs.Path(location).isAbsolute || location.contains(":")) return location
    import org.apache.spark.sql.catalyst.catalog.CatalogUtils
    val catalog = session.sessionState.catalog
    val database = ident.namespace.lastOption.getOrElse(catalog.getCurrentDatabase)
    CatalogUtils.URIToString(catalog.makeQualifiedTablePath(CatalogUtils.stringToURI(location), database))
  }

  def alter(session: SparkSession, path: String, changes: Seq[TableChange]): Unit = {
    val list = mapper.createArrayNode()
    changes.foreach { change =>
      val o = list.addObject()
      change match {
        case c: TableChange.SetProperty => o.put("op", "setProperty").put("key", c.property).put("value", c.value)
        case c: TableChange.RemoveProperty => o.put("op", "removeProperty").put("key", c.property)
        case c: TableChange.AddColumn =>
          o.put("op", "addColumn").put("type", c.dataType.json).put("nullable", c.isNullable)
          strings(o.putArray("field"), c.fieldNames.toSeq)
          Option(c.comment).foreach(o.put("comment", _))
          Option(c.position).foreach(p => o.put("position", p.toString))
          Option(c.defaultValue).foreach(d => o.put("default", d.getSql))
        case c: TableChange.RenameColumn =>
          o.put("op", "renameColumn").put("newName", c.newName)
          strings(o.putArray("field"), c.fieldNames.toSeq)
        case c: TableChange.DeleteColumn =>
          o.put("op", "deleteColumn").put("ifExists", c.ifExists.booleanValue)
          strings(o.putArray("field"), c.fieldNames.toSeq)
        case c: TableChange.UpdateColumnType =>
          o.put("op", "updateColumnType").put("type", c.newDataType.json)
          strings(o.putArray("field"), c.fieldNames.toSeq)
        case c: TableChange.UpdateColumnNullability =>
          o.put("op", "updateColumnNullability").put("nullable", c.nullable)
          strings(o.putArray("field"), c.fieldNames.toSeq)
        case c: TableChange.UpdateColumnDefaultValue =>
          o.put("op", "updateColumnDefaultValue").put("default", Option(c.newDefaultValue).filter(_.nonEmpty).orNull)
          strings(o.putArray("field"), c.fieldNames.toSeq)
        case c: TableChange.UpdateColumnComment =>
          o.put("op", "updateColumnComment").put("comment", c.newComment)
          strings(o.putArray("field"), c.fieldNames.toSeq)
        case c: TableChange.UpdateColumnPosition =>
          o.put("op", "updateColumnPosition").put("position", String.valueOf(c.position))
          strings(o.putArray("field"), c.fieldNames.toSeq)
        case c: TableChange.AddConstraint =>
          c.constraint match {
            case check: Check => o.put("op", "addConstraint").put("name", check.name).put("sql", check.predicateSql)
            case other => o.put("op", "unsupported").put("what", s"constraint ${other.toDDL}")
          }
        case c: TableChange.DropConstraint => o.put("op", "dropConstraint").put("name", c.name).put("ifExists", c.ifExists)
        case c: TableChange.ClusterBy =>
          o.put("op", "clusterBy")
          strings(o.putArray("columns"), c.clusteringColumns.toSeq.map(_.fieldNames.mkString(".")))
        case other => o.put("op", "unsupported").put("what", other.getClass.getSimpleName)
      }
    }
    LakelogPython.string("alter", session, "path" -> path, "changes" -> mapper.writeValueAsString(list))
    Commands.refresh(session, path)
  }

  def partitionsOf(partitions: Seq[Transform]): (Seq[String], Option[Seq[String]]) = {
    var parts = Seq.empty[String]
    var cluster: Option[Seq[String]] = None
    partitions.foreach {
      case IdentityTransform(ref) => parts :+= ref.fieldNames.mkString(".")
      case ClusterByTransform(refs) => cluster = Some(refs.map(_.fieldNames.mkString(".")))
      case other => throw LakelogException("LAKELOG_UNSUPPORTED_FEATURE",
        s"lakelog tables are partitioned by columns (PARTITIONED BY (col, ...)) or clustered (CLUSTER BY); ${other.describe} is not supported")
    }
    (parts, cluster)
  }

  private def strings(array: ArrayNode, values: Seq[String]): Unit = values.foreach(array.add)

  private def samePath(session: SparkSession, a: String, b: String): Boolean =
    LakelogPython.string("samePath", session, "a" -> a, "b" -> b) == "true"
}

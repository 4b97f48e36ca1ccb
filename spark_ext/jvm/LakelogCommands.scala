package org.apache.spark.sql.lakelog

import java.util

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.ObjectMapper

import org.apache.spark.sql.{Row, SparkSession}
import org.apache.spark.sql.catalyst.analysis.UnresolvedAttribute
import org.apache.spark.sql.catalyst.expressions._
import org.apache.spark.sql.catalyst.plans.logical._
import org.apache.spark.sql.classic.{Dataset, ExpressionUtils}
import org.apache.spark.sql.connector.catalog.Identifier
import org.apache.spark.sql.connector.expressions.Transform
import org.apache.spark.sql.execution.command.LeafRunnableCommand
import org.apache.spark.sql.types.{DataType, LongType, StructType}

private[lakelog] object Commands {
  val mapper = new ObjectMapper()

  def classic(session: SparkSession): org.apache.spark.sql.classic.SparkSession =
    session.asInstanceOf[org.apache.spark.sql.classic.SparkSession]

  def frame(session: SparkSession, plan: LogicalPlan): Dataset[Row] = Dataset.ofRows(classic(session), plan)

  /** `e` as a Column over other plans: attributes named by `names` (exprId -> name parts) become references
   *  by name, so the Column resolves against the DataFrames lakelog builds. */
  def column(e: Expression, names: Map[ExprId, Seq[String]], what: String): org.apache.spark.sql.Column = {
    e.foreach {
      case s: SubqueryExpression if s.getOuterAttrs.nonEmpty =>
        throw LakelogException("LAKELOG_UNSUPPORTED_FEATURE",
          s"a correlated subquery in the $what is not supported on lakelog tables: ${s.sql}")
      case _ =>
    }
    ExpressionUtils.column(e.transformUp {
      case a: AttributeReference if names.contains(a.exprId) => UnresolvedAttribute(names(a.exprId))
    })
  }

  def longs(text: String): Seq[Long] = mapper.readTree(text).elements().asScala.map(_.asLong()).toSeq

  /**
   * After a commit to the table at `path`: cached plans that read it (CACHE TABLE, `df.cache()`) hold the
   * rows of the version before, so they are uncached; the next query reads the new version. Spark keeps its
   * cache entries private: they are found by reflection.
   */
  def refresh(session: SparkSession, path: String): Unit = uncache(session, _.exists(p => local(p) == local(path)))

  private def local(path: String): String = path.stripPrefix("file://").stripPrefix("file:").stripSuffix("/")

  /** `refresh` for every lakelog table (after a command whose table is not known here, such as RESTORE). */
  def refreshAll(session: SparkSession): Unit = uncache(session, _.isDefined)

  private def uncache(session: SparkSession, reads: Option[String] => Boolean): Unit = {
    val manager = classic(session).sharedState.cacheManager
    val field = manager.getClass.getDeclaredField("cachedData")
    field.setAccessible(true)
    val entries = field.get(manager).asInstanceOf[scala.collection.immutable.IndexedSeq[org.apache.spark.sql.execution.CachedData]]
    entries.filter(_.plan.exists(node => reads(node.getTagValue(LakelogAnalysis.ReadOf)))).foreach { entry =>
      manager.uncacheQuery(classic(session), entry.plan, true, false)
    }
  }

  def attributes(names: String*): Seq[Attribute] = names.map(n => AttributeReference(n, LongType, nullable = false)())
}

/** CREATE [OR REPLACE] TABLE / REPLACE TABLE [AS SELECT] ... USING lakelog. */
case class LakelogCreateTableCommand(
    catalog: LakelogCatalog,
    ident: Identifier,
    columns: Seq[LakelogDDL.ColumnSpec],
    partitioning: Seq[Transform],
    properties: Map[String, String],
    checks: Seq[(String, String)],
    mode: String,
    query: Option[LogicalPlan]) extends LeafRunnableCommand {

  override def innerChildren: Seq[org.apache.spark.sql.catalyst.plans.QueryPlan[_]] = query.toSeq

  override def run(session: SparkSession): Seq[Row] = {
    LakelogDDL.create(session, catalog, ident, columns, partitioning, properties, checks, mode, query)
    catalog.invalidateTable(ident)
    Seq.empty
  }
}

/** INSERT INTO / INSERT OVERWRITE [REPLACE WHERE] / saveAsTable / writeTo(...).append() and kin. */
case class LakelogWriteCommand(
    table: LakelogSparkTable,
    query: LogicalPlan,
    mode: String,
    replaceWhere: Option[String],
    dynamic: Boolean,
    options: Map[String, String]) extends LeafRunnableCommand {

  override def innerChildren: Seq[org.apache.spark.sql.catalyst.plans.QueryPlan[_]] = Seq(query)

  override def run(session: SparkSession): Seq[Row] = {
    val spec = Commands.mapper.createObjectNode()
    spec.put("mode", mode)
    replaceWhere.foreach(spec.put("replaceWhere", _))
    spec.put("dynamic", dynamic)
    val opts = spec.putObject("options")
    options.foreach { case (k, v) => opts.put(k, v) }
    LakelogPython.string("write", session, "path" -> table.path, "data" -> Commands.frame(session, query),
      "spec" -> Commands.mapper.writeValueAsString(spec))
    Commands.refresh(session, table.path)
    Seq.empty
  }
}

/** An ALTER TABLE that lakelog runs directly (not through the catalog's alterTable). */
case class LakelogAlterCommand(path: String, changes: Seq[org.apache.spark.sql.connector.catalog.TableChange])
  extends LeafRunnableCommand {
  override def run(session: SparkSession): Seq[Row] = {
    LakelogDDL.alter(session, path, changes)
    Commands.refresh(session, path)
    Seq.empty
  }
}

/** UPDATE: run as `LakelogTable.update` (Spark jobs, one lakelog commit). */
case class LakelogUpdateCommand(
    table: LakelogSparkTable,
    target: Seq[Attribute],
    assignments: Seq[Assignment],
    condition: Option[Expression]) extends LeafRunnableCommand {

  override val output: Seq[Attribute] = Commands.attributes("num_affected_rows")

  override def run(session: SparkSession): Seq[Row] = {
    val names = target.map(a => a.exprId -> Seq(a.name)).toMap
    val set = assignments.map {
      case Assignment(key: Attribute, value) => key.name -> Commands.column(value, names, "UPDATE's SET clause")
      case Assignment(key, _) => throw LakelogException("LAKELOG_INTERNAL", s"an UPDATE assignment to ${key.sql}")
    }.toMap
    val reply = LakelogPython.string("update", session, "path" -> table.path,
      "condition" -> condition.map(Commands.column(_, names, "UPDATE's WHERE clause")).orNull, "set" -> set)
    Commands.refresh(session, table.path)
    Seq(Row.fromSeq(Commands.longs(reply)))
  }
}

/** DELETE FROM: run as `LakelogTable.delete`. */
case class LakelogDeleteCommand(
    table: LakelogSparkTable,
    target: Seq[Attribute],
    condition: Expression) extends LeafRunnableCommand {

  override val output: Seq[Attribute] = Commands.attributes("num_affected_rows")

  override def run(session: SparkSession): Seq[Row] = {
    val names = target.map(a => a.exprId -> Seq(a.name)).toMap
    val cond = condition match {
      case Literal(true, _) => null
      case e => Commands.column(e, names, "DELETE's WHERE clause")
    }
    val reply = LakelogPython.string("delete", session, "path" -> table.path, "condition" -> cond)
    Commands.refresh(session, table.path)
    Seq(Row.fromSeq(Commands.longs(reply)))
  }
}

/** MERGE INTO: run as `LakelogTable.merge` with the same clauses. */
case class LakelogMergeCommand(
    table: LakelogSparkTable,
    target: Seq[Attribute],
    source: LogicalPlan,
    condition: Expression,
    matched: Seq[MergeAction],
    notMatched: Seq[MergeAction],
    notMatchedBySource: Seq[MergeAction],
    withSchemaEvolution: Boolean,
    starInserts: Set[Int]) extends LeafRunnableCommand {

  override val output: Seq[Attribute] =
    Commands.attributes("num_affected_rows", "num_updated_rows", "num_deleted_rows", "num_inserted_rows")

  override def innerChildren: Seq[org.apache.spark.sql.catalyst.plans.QueryPlan[_]] = Seq(source)

  override def run(session: SparkSession): Seq[Row] = {
    val targetAlias = "__lakelog_target"
    val sourceAlias = "__lakelog_source"
    // Source columns keep their names (clauses that set every column match by name); a repeated name gets
    // a name of its own so that each reference stays unambiguous.
    val seen = scala.collection.mutable.Set[String]()
    val sourceColumns = source.output.zipWithIndex.map { case (a, i) =>
      val name = if (seen.add(a.name.toLowerCase)) a.name else s"__lakelog_source_$i"
      (a, name)
    }
    val projected = SubqueryAlias(sourceAlias, Project(sourceColumns.map { case (a, n) => Alias(a, n)() }, source))
    val names: Map[ExprId, Seq[String]] =
      target.map(a => a.exprId -> Seq(targetAlias, a.name)).toMap ++
        sourceColumns.map { case (a, n) => a.exprId -> Seq(sourceAlias, n) }.toMap
    def col(e: Expression, what: String) = Commands.column(e, names, what)
    val clauses = scala.collection.mutable.ArrayBuffer[Map[String, Any]]()
    def add(kind: String, action: MergeAction, star: Boolean = false): Unit = {
      val condition = action.condition.map(col(_, s"MERGE clause condition")).orNull
      clauses += (action match {
        case DeleteAction(_) => Map("kind" -> kind, "action" -> "delete", "condition" -> condition)
        case UpdateAction(_, assignments, fromStar) =>
          Map("kind" -> kind, "action" -> "update", "condition" -> condition, "all" -> fromStar, "set" -> assignmentMap(assignments, col).toMap)
        case InsertAction(_, assignments) =>
          Map("kind" -> kind, "action" -> "insert", "condition" -> condition, "all" -> star, "set" -> assignmentMap(assignments, col).toMap)
        case other => throw LakelogException("LAKELOG_UNSUPPORTED_FEATURE", s"MERGE clause ${other.sql}")
      })
    }
    matched.foreach(add("matched", _))
    notMatched.zipWithIndex.foreach { case (a, i) => add("not_matched", a, starInserts.contains(i)) }
    notMatchedBySource.foreach(add("not_matched_by_source", _))
    val reply = LakelogPython.string("merge", session, "path" -> table.path, "targetAlias" -> targetAlias,
      "source" -> Commands.frame(session, projected), "condition" -> col(condition, "MERGE condition"),
      "clauses" -> clauses.toSeq, "schemaEvolution" -> withSchemaEvolution)
    Commands.refresh(session, table.path)
    Seq(Row.fromSeq(Commands.longs(reply)))
  }

  private def assignmentMap(assignments: Seq[Assignment], col: (Expression, String) => org.apache.spark.sql.Column)
      : Seq[(String, org.apache.spark.sql.Column)] = assignments.collect {
    case Assignment(key: Attribute, value: Attribute) if target.exists(_.exprId == value.exprId) && key.exprId == value.exprId => None
    case Assignment(key: Attribute, value) => Some(key.name -> col(value, "MERGE clause value"))
    case Assignment(key, value) => Some(key.sql -> col(value, "MERGE clause value"))
  }.flatten
}

/** A statement lakelog's parser took (DESCRIBE HISTORY/DETAIL, OPTIMIZE, VACUUM, RESTORE, ...): run in Python. */
case class LakelogSqlCommand(text: String, override val output: Seq[Attribute]) extends LeafRunnableCommand {
  override def run(session: SparkSession): Seq[Row] = {
    val frame = LakelogPython.call("command", session, "text" -> text).asInstanceOf[org.apache.spark.sql.Dataset[Row]]
    val rows = frame.collect().toSeq
    if (LakelogSqlParser.words(text, 1) == Seq("RESTORE")) Commands.refreshAll(session)
    rows
  }
}

object LakelogSqlCommand {
  def apply(session: SparkSession, sqlText: String): LakelogSqlCommand = {
    val text = sqlText.trim.stripSuffix(";").trim // (Spark's parser takes a statement ending with ';')
    val schema = DataType.fromJson(LakelogPython.string("commandSchema", session, "text" -> text)).asInstanceOf[StructType]
    LakelogSqlCommand(text, org.apache.spark.sql.catalyst.types.DataTypeUtils.toAttributes(schema))
  }
}

package org.apache.spark.sql.lakelog

import java.util.Locale

import org.apache.spark.sql.{SparkSession, SparkSessionExtensions}
import org.apache.spark.sql.catalyst.{FunctionIdentifier, TableIdentifier}
import org.apache.spark.sql.catalyst.expressions.{Expression, ExpressionInfo}
import org.apache.spark.sql.catalyst.parser.{ParameterContext, ParserInterface, SqlStatementSplitResult}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.types.{DataType, StructType}

/**
 * `spark.sql.extensions` for lakelog (what `spark_ext.configure` sets): the parser for Delta's commands,
 * the analysis rule and `table_changes`.
 */
class LakelogSparkSessionExtension extends (SparkSessionExtensions => Unit) {
  override def apply(extensions: SparkSessionExtensions): Unit = {
    extensions.injectParser((session, parser) => new LakelogSqlParser(session, parser))
    extensions.injectResolutionRule(session => new LakelogAnalysis(session))
    for (name <- Seq("table_changes", "table_changes_by_path")) {
      extensions.injectTableFunction((
        FunctionIdentifier(name),
        new ExpressionInfo(classOf[LakelogSparkSessionExtension].getName, name),
        (args: Seq[Expression]) => LakelogTableChanges(name, args)))
    }
  }
}

/** `table_changes('table', start[, end])` and `table_changes_by_path('path', start[, end])`: the change data
 *  feed, as Delta's functions give it. */
object LakelogTableChanges {
  def apply(function: String, args: Seq[Expression]): LogicalPlan = {
    val session = SparkSession.active
    if (args.length < 2 || args.length > 3 || !args.forall(_.foldable)) {
      throw LakelogException("LAKELOG_INVALID_ARGUMENT",
        s"$function takes a table ${if (function.endsWith("path")) "path" else "name"}, a start version or timestamp " +
          s"and an optional end: $function('t', 0[, 5])")
    }
    val values = args.map(a => Option(a.eval()).map(_.toString).orNull)
    val table = if (function.endsWith("path") && values.head != null) s"lakelog.`${values.head.replace("`", "``")}`" else values.head
    val frame = LakelogPython.call("tableChanges", session, "table" -> table, "start" -> values(1),
      "end" -> (if (values.length > 2) values(2) else null)).asInstanceOf[org.apache.spark.sql.Dataset[_]]
    frame.queryExecution.analyzed
  }
}

/**
 * Spark's parser, and Delta's commands on lakelog tables beside it: DESCRIBE HISTORY|DETAIL, OPTIMIZE,
 * VACUUM, RESTORE, and the Delta statements lakelog refuses by name. Everything else is Spark's.
 */
class LakelogSqlParser(session: SparkSession, delegate: ParserInterface) extends ParserInterface {
  import LakelogSqlParser._

  override def parsePlan(sqlText: String): LogicalPlan =
    if (isLakelogCommand(sqlText)) LakelogSqlCommand(session, sqlText) else tagged(delegate.parsePlan(sqlText))

  override def parsePlanWithParameters(sqlText: String, context: ParameterContext): LogicalPlan =
    if (isLakelogCommand(sqlText)) LakelogSqlCommand(session, sqlText)
    else tagged(delegate.parsePlanWithParameters(sqlText, context))

  override def parseExpression(sqlText: String): Expression = delegate.parseExpression(sqlText)
  override def parseTableIdentifier(sqlText: String): TableIdentifier = delegate.parseTableIdentifier(sqlText)
  override def parseFunctionIdentifier(sqlText: String): FunctionIdentifier = delegate.parseFunctionIdentifier(sqlText)
  override def parseMultipartIdentifier(sqlText: String): Seq[String] = delegate.parseMultipartIdentifier(sqlText)
  override def parseQuery(sqlText: String): LogicalPlan = delegate.parseQuery(sqlText)
  override def parseTableSchema(sqlText: String): StructType = delegate.parseTableSchema(sqlText)
  override def parseDataType(sqlText: String): DataType = delegate.parseDataType(sqlText)
  override def parseRoutineParam(sqlText: String): StructType = delegate.parseRoutineParam(sqlText)
  override def splitStatements(sqlText: String): SqlStatementSplitResult = delegate.splitStatements(sqlText)
}

object LakelogSqlParser {
  /**
   * `plan` with each MERGE's `INSERT *` clauses recorded (see [[LakelogAnalysis.StarInserts]]), and a CREATE
   * or REPLACE TABLE of `lakelog.`/path`` without USING made one of a lakelog table (as Delta takes
   * `delta.`/path``); Spark would otherwise make it a table of its default source.
   */
  def tagged(parsed: LogicalPlan): LogicalPlan = {
    import org.apache.spark.sql.catalyst.analysis.UnresolvedIdentifier
    import org.apache.spark.sql.catalyst.plans.logical._
    def isPath(name: LogicalPlan): Boolean = name match {
      case UnresolvedIdentifier(Seq(ns, _), _) => ns.equalsIgnoreCase(LakelogCatalog.Provider)
      case _ => false
    }
    def lakelog(spec: TableSpecBase): TableSpecBase = spec match {
      case t: UnresolvedTableSpec if t.provider.isEmpty => t.copy(provider = Some(LakelogCatalog.Provider))
      case t: TableSpec if t.provider.isEmpty => t.copy(provider = Some(LakelogCatalog.Provider))
      case other => other
    }
    val plan = parsed transformDown {
      case c: CreateTable if isPath(c.name) => c.copy(tableSpec = lakelog(c.tableSpec))
      case c: ReplaceTable if isPath(c.name) => c.copy(tableSpec = lakelog(c.tableSpec))
      case c: CreateTableAsSelect if isPath(c.name) => c.copy(tableSpec = lakelog(c.tableSpec))
      case c: ReplaceTableAsSelect if isPath(c.name) => c.copy(tableSpec = lakelog(c.tableSpec))
    }
    plan.foreach {
      case m: org.apache.spark.sql.catalyst.plans.logical.MergeIntoTable =>
        val stars = m.notMatchedActions.zipWithIndex.collect {
          case (_: org.apache.spark.sql.catalyst.plans.logical.InsertStarAction, i) => i
        }.toSet
        if (stars.nonEmpty) m.setTagValue(LakelogAnalysis.StarInserts, stars)
      case _ =>
    }
    plan
  }

  private val Heads = Seq(
    Seq("DESCRIBE", "HISTORY"), Seq("DESC", "HISTORY"), Seq("DESCRIBE", "DETAIL"), Seq("DESC", "DETAIL"),
    Seq("OPTIMIZE"), Seq("VACUUM"), Seq("RESTORE"), Seq("CONVERT", "TO", "DELTA"), Seq("GENERATE"), Seq("REORG", "TABLE"))

  /** The statement's first words, upper case, past comments and white space. */
  def words(text: String, n: Int): Seq[String] = {
    val stripped = text.replaceAll("(?s)/\\*.*?\\*/", " ").replaceAll("--[^\\n]*", " ").trim
    stripped.split("[\\s(]+").filter(_.nonEmpty).take(n).map(_.toUpperCase(Locale.ROOT)).toSeq
  }

  def isLakelogCommand(text: String): Boolean = {
    val first = words(text, 3)
    Heads.exists(h => first.take(h.length) == h)
  }
}

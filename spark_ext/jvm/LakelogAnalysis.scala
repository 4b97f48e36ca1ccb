package org.apache.spark.sql.lakelog

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.analysis.{AssignmentUtils, ResolvedIdentifier, ResolvedTable}
import org.apache.spark.sql.connector.catalog.TableChange
import org.apache.spark.sql.catalyst.expressions._
import org.apache.spark.sql.catalyst.plans.logical._
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.classic.Dataset
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation
import org.apache.spark.sql.types.StructType
import scala.jdk.CollectionConverters._

/**
 * Resolution rule that gives lakelog tables Delta's semantics on Spark: a read becomes the plan
 * `spark_ext.read` builds over the version's files (Spark's own Parquet scan); CREATE/REPLACE TABLE [AS
 * SELECT], INSERT (append, overwrite, REPLACE WHERE, dynamic partition overwrite), UPDATE, DELETE and
 * MERGE become commands that lakelog runs (the commit is lakelog's; the jobs are Spark's).
 */
class LakelogAnalysis(session: SparkSession) extends Rule[LogicalPlan] {

  override def apply(input: LogicalPlan): LogicalPlan = {
    // Spark leaves the clauses of a MERGE (and an UPDATE's assignments) on a table that accepts any schema
    // to the table's own rules: the target takes lakelog's table without that capability, and Spark
    // resolves them (lakelog's schema evolution comes from the statement, not from the capability).
    val plan = input.resolveOperatorsDown {
      case m: MergeIntoTable if !m.resolved && m.targetTable.exists(acceptsAny) =>
        m.copy(targetTable = rowLevelTarget(m.targetTable))
      case u: UpdateTable if !u.resolved && u.table.exists(acceptsAny) =>
        u.copy(table = rowLevelTarget(u.table))
    }
    // The targets of row-level commands stay relations until their command is resolved (a read plan in
    // their place would hide what they change).
    val targets = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap[LogicalPlan, java.lang.Boolean]())
    plan.foreach {
      case UpdateTable(LakelogTarget(_, t), _, _) => targets.add(relationOf(t))
      case DeleteFromTable(LakelogTarget(_, t), _) => targets.add(relationOf(t))
      case m: MergeIntoTable => m.targetTable match {
        case LakelogTarget(_, t) => targets.add(relationOf(t))
        case _ =>
      }
      case _ =>
    }
    rewrite(plan, targets)
  }

  private def relationOf(plan: LogicalPlan): LogicalPlan = plan match {
    case SubqueryAlias(_, child) => relationOf(child)
    case other => other
  }

  private def rewrite(plan: LogicalPlan, targets: java.util.Set[LogicalPlan]): LogicalPlan = plan.resolveOperatorsDown {
    case c @ CreateTable(ResolvedIdentifier(catalog: LakelogCatalog, ident), columns, partitioning, spec: TableSpec, ifNotExists)
        if isLakelog(spec) && c.childrenResolved =>
      LakelogCreateTableCommand(catalog, ident, LakelogDDL.columnsOf(columns), partitioning, properties(spec),
        spec.constraints.map(c => c.name -> c.toDDL), if (ifNotExists) "createIfNotExists" else "create", None)

    case c @ ReplaceTable(ResolvedIdentifier(catalog: LakelogCatalog, ident), columns, partitioning, spec: TableSpec, orCreate)
        if isLakelog(spec) && c.childrenResolved =>
      LakelogCreateTableCommand(catalog, ident, LakelogDDL.columnsOf(columns), partitioning, properties(spec),
        spec.constraints.map(c => c.name -> c.toDDL), if (orCreate) "createOrReplace" else "replace", None)

    case c @ CreateTableAsSelect(ResolvedIdentifier(catalog: LakelogCatalog, ident), partitioning, query, spec: TableSpec, _, ifNotExists, _)
        if isLakelog(spec) && query.resolved =>
      LakelogCreateTableCommand(catalog, ident, Nil, partitioning, properties(spec), Nil,
        if (ifNotExists) "createIfNotExists" else "create", Some(reads(query)))

    case c @ ReplaceTableAsSelect(ResolvedIdentifier(catalog: LakelogCatalog, ident), partitioning, query, spec: TableSpec, _, orCreate, _)
        if isLakelog(spec) && query.resolved =>
      LakelogCreateTableCommand(catalog, ident, Nil, partitioning, properties(spec), Nil,
        if (orCreate) "createOrReplace" else "replace", Some(reads(query)))

    case a @ AppendData(r @ LakelogRelation(table), query, options, _, _, _, _) if query.resolved =>
      val (aligned, evolve) = align(a, r.asInstanceOf[DataSourceV2Relation], table, options)
      LakelogWriteCommand(table, writeQuery(table, aligned), "append", None, dynamic = false, withMerge(options, evolve))

    case o @ OverwriteByExpression(r @ LakelogRelation(table), condition, query, options, _, _, _, _)
        if query.resolved && condition.resolved =>
      val (aligned, evolve) = align(o, r.asInstanceOf[DataSourceV2Relation], table, options)
      val where = condition match {
        case Literal(true, _) => None
        case e => Some(LakelogAnalysis.sqlOf(e))
      }
      LakelogWriteCommand(table, writeQuery(table, aligned), "overwrite", where, dynamic = false, withMerge(options, evolve))

    case o @ OverwritePartitionsDynamic(r @ LakelogRelation(table), query, options, _, _, _) if query.resolved =>
      val (aligned, evolve) = align(o, r.asInstanceOf[DataSourceV2Relation], table, options)
      LakelogWriteCommand(table, writeQuery(table, aligned), "overwrite", None, dynamic = true, withMerge(options, evolve))

    case u @ UpdateTable(LakelogTarget(table, target), assignments, condition) if u.resolved =>
      val aligned = checkVariants(AssignmentUtils.alignUpdateAssignments(target.output, checkVariants(assignments, "UPDATE"), false, false), "UPDATE")
      val changed = aligned.filter {
        case Assignment(key: Attribute, value: Attribute) => key.exprId != value.exprId
        case _ => true
      }
      LakelogUpdateCommand(table, target.output, changed, condition)

    case d @ DeleteFromTable(LakelogTarget(table, target), condition) if d.resolved =>
      LakelogDeleteCommand(table, target.output, condition)

    case m @ MergeIntoTable(LakelogTarget(table, target), source, condition, matched, notMatched, notMatchedBySource, evolve)
        if m.childrenResolved && m.expressions.forall(_.resolved) =>
      val stars = m.getTagValue(LakelogAnalysis.StarInserts).getOrElse(Set.empty[Int])
      LakelogMergeCommand(table, target.output, reads(source), condition,
        matched.map(alignUpdate(target.output, _)),
        notMatched.map(alignInsert(target.output, _)),
        notMatchedBySource.map(alignUpdate(target.output, _)), evolve, stars)

    // lakelog checks the rows already written itself (Spark's check would scan the table as a V1 relation).
    case AddCheckConstraint(LakelogTableRef(table), check) =>
      LakelogAlterCommand(table.path, Seq(TableChange.addConstraint(check.toV2Constraint, null)))

    case DropConstraint(LakelogTableRef(table), name, ifExists, _) =>
      LakelogAlterCommand(table.path, Seq(TableChange.dropConstraint(name, ifExists, false)))

    case r @ DataSourceV2Relation(table: LakelogSparkTable, _, _, _, options, _)
        if !targets.contains(r) && LakelogAnalysis.readsChangeFeed(options.asCaseSensitiveMap.asScala.toMap) =>
      LakelogAnalysis.changeFeedPlan(session, table, options.asCaseSensitiveMap.asScala.toMap, streaming = false, r.output)

    case r @ DataSourceV2Relation(table: LakelogSparkTable, _, _, _, _, _) if !targets.contains(r) =>
      LakelogAnalysis.readPlan(session, table, r.output)

    case s: org.apache.spark.sql.catalyst.streaming.StreamingRelationV2
        if s.table.isInstanceOf[LakelogSparkTable] && LakelogAnalysis.readsChangeFeed(s.extraOptions.asCaseSensitiveMap.asScala.toMap) =>
      LakelogAnalysis.changeFeedPlan(session, s.table.asInstanceOf[LakelogSparkTable],
        s.extraOptions.asCaseSensitiveMap.asScala.toMap, streaming = true, s.output.collect { case a: AttributeReference => a })
  }

  /**
   * Spark's alignment casts a string to a variant column (a variant holding that string); Spark's INSERT
   * refuses it, and a JSON text meant as a value is the usual mistake: refused, naming parse_json.
   */
  private def checkVariants(assignments: Seq[Assignment], what: String): Seq[Assignment] = {
    def named(key: Expression): String = key match {
      case a: Attribute => (a.qualifier.lastOption.filterNot(_.contains("/")).map(_ + ".").getOrElse("")) + a.name
      case other => other.sql
    }
    def refuse(key: Expression, value: Expression): Nothing =
      throw LakelogException("LAKELOG_SCHEMA_MISMATCH",
        s"$what: column ${named(key)} of type variant cannot store the string ${value.sql}: a string is not cast to a " +
          s"variant; write parse_json(${value.sql}) to store the JSON it holds")
    def unaliased(e: Expression): Expression = e match {
      case Alias(child, _) => unaliased(child)
      case other => other
    }
    assignments.map(a => (a.key, unaliased(a.value))).foreach {
      case (key, c: Cast) if c.dataType.isInstanceOf[org.apache.spark.sql.types.VariantType] &&
          c.child.dataType.isInstanceOf[org.apache.spark.sql.types.StringType] => refuse(key, c.child)
      // (before alignment, whose own refusal names no function)
      case (key, value) if key.resolved && value.resolved &&
          key.dataType.isInstanceOf[org.apache.spark.sql.types.VariantType] &&
          value.dataType.isInstanceOf[org.apache.spark.sql.types.StringType] => refuse(key, value)
      case _ =>
    }
    assignments
  }

  /** An UPDATE clause with Spark's store-assignment casts, keeping the columns it changes. */
  private def alignUpdate(target: Seq[Attribute], action: MergeAction): MergeAction = action match {
    case UpdateAction(cond, assignments, false) =>
      val aligned = checkVariants(AssignmentUtils.alignUpdateAssignments(target, checkVariants(assignments, "MERGE"), false, false), "MERGE")
      UpdateAction(cond, aligned.filter {
        case Assignment(key: Attribute, value: Attribute) => key.exprId != value.exprId
        case _ => true
      }, false)
    case other => other
  }

  /** An INSERT clause with Spark's store-assignment casts on the columns it gives and the defaults of those it
   *  leaves out that have one (lakelog computes generated and identity columns, and NULLs the rest). */
  private def alignInsert(target: Seq[Attribute], action: MergeAction): MergeAction = action match {
    case InsertAction(cond, assignments) =>
      val given = assignments.collect { case Assignment(key: Attribute, _) => key.exprId }.toSet ++
        target.filter(_.metadata.contains("CURRENT_DEFAULT")).map(_.exprId)
      val aligned = checkVariants(AssignmentUtils.alignInsertAssignments(target, assignments, false), "MERGE")
      InsertAction(cond, aligned.filter {
        case Assignment(key: Attribute, _) => given.contains(key.exprId)
        case _ => true
      })
    case other => other
  }

  private def rowLevelTarget(target: LogicalPlan): LogicalPlan = target.transform {
    case r: DataSourceV2Relation if acceptsAny(r) =>
      r.copy(table = r.table.asInstanceOf[LakelogSparkTable].copy(acceptsAnySchema = false))
  }

  private def acceptsAny(plan: LogicalPlan): Boolean = plan match {
    case DataSourceV2Relation(t: LakelogSparkTable, _, _, _, _, _) => t.acceptsAnySchema
    case _ => false
  }

  /** `query` with its lakelog reads resolved (a command keeps its query out of the rule's reach). */
  private def reads(query: LogicalPlan): LogicalPlan = apply(query)

  /**
   * A write's query aligned to the table's columns by Spark's own rule (what Spark's output resolution does
   * for a table that does not take any schema: by position or name, store-assignment casts, defaults), and
   * whether the write evolves the schema: with `INSERT WITH SCHEMA EVOLUTION`, the write option
   * `mergeSchema` or Delta's `spark.databricks.delta.schema.autoMerge.enabled`, the query's columns the
   * table lacks (by name; by position, those past the table's) are kept, for lakelog to add.
   */
  private def align(write: V2WriteCommand, relation: DataSourceV2Relation, table: LakelogSparkTable,
                    options: Map[String, String]): (LogicalPlan, Boolean) = {
    import org.apache.spark.sql.catalyst.analysis.TableOutputResolver
    val conf = session.sessionState.conf
    val evolve = write.withSchemaEvolution ||
      options.exists { case (k, v) => k.equalsIgnoreCase("mergeSchema") && v.trim.equalsIgnoreCase("true") } ||
      conf.getConfString("spark.databricks.delta.schema.autoMerge.enabled", "false").trim.equalsIgnoreCase("true")
    val query = write.query
    val extra = if (!evolve) Nil
      else if (write.isByName) query.output.filterNot(a => relation.output.exists(_.name.equalsIgnoreCase(a.name)))
      else query.output.drop(relation.output.length)
    val expected = org.apache.spark.sql.catalyst.util.GeneratedColumn.attachGenerationExpressions(relation) ++
      extra.map(a => AttributeReference(a.name, a.dataType, nullable = true)())
    TableOutputResolver.suitableForByNameCheck(write.isByName, expected, query.output)
    val fill = if (conf.coerceInsertNestedTypes && evolve) TableOutputResolver.DefaultValueFillMode.RECURSE
      else TableOutputResolver.DefaultValueFillMode.FILL
    val (aligned, _) = TableOutputResolver.resolveOutputColumnsWithGeneratedInfo(table.name, expected, query, write.isByName, conf, fill)
    (aligned, extra.nonEmpty)
  }

  private def withMerge(options: Map[String, String], evolve: Boolean): Map[String, String] =
    if (evolve) options.filterNot(_._1.equalsIgnoreCase("mergeSchema")) + ("mergeSchema" -> "true") else options

  /**
   * A write's query, aligned by Spark to the table's columns, without the generated and identity columns the
   * statement did not give: Spark fills those with a NULL literal, and lakelog computes them (it refuses a
   * value for a GENERATED ALWAYS identity column, and checks a given generated value).
   */
  private def writeQuery(table: LakelogSparkTable, query: LogicalPlan): LogicalPlan = {
    val computed = table.info.schema.fields.filter { f =>
      f.metadata.contains("delta.generationExpression") || f.metadata.contains("delta.identity.start")
    }.map(_.name.toLowerCase).toSet
    val aligned = reads(query)
    aligned match {
      case Project(list, child) if computed.nonEmpty =>
        val kept = list.filterNot {
          case Alias(Literal(null, _), name) => computed.contains(name.toLowerCase)
          case _ => false
        }
        if (kept.length == list.length) aligned else Project(kept, child)
      case other => other
    }
  }

  private def isLakelog(spec: TableSpec): Boolean = spec.provider.exists(_.equalsIgnoreCase(LakelogCatalog.Provider))

  private def properties(spec: TableSpec): Map[String, String] =
    spec.properties ++ spec.location.map("location" -> _) ++ spec.comment.map("comment" -> _) ++
      spec.options.map { case (k, v) => s"option.$k" -> v } ++
      spec.provider.map("provider" -> _) ++ (if (spec.external) Map("external" -> "true") else Map.empty)
}

object LakelogAnalysis {
  /** The positions of a MERGE's `WHEN NOT MATCHED THEN INSERT *` clauses (Spark's analysis turns them into
   *  column lists, which would drop the columns schema evolution adds). Set by [[LakelogSqlParser]]. */
  val StarInserts = org.apache.spark.sql.catalyst.trees.TreeNodeTag[Set[Int]]("lakelog.starInserts")

  /** Whether a read's options ask for the change data feed (Delta's `readChangeFeed` option). */
  def readsChangeFeed(options: Map[String, String]): Boolean =
    options.exists { case (k, v) => k.equalsIgnoreCase("readChangeFeed") && v.trim.equalsIgnoreCase("true") }

  /** The change data feed of `table` (batch or streaming), as `format("lakelog")` reads it with the same
   *  options; the table's columns keep the relation's attributes, the change columns follow. */
  def changeFeedPlan(session: SparkSession, table: LakelogSparkTable, options: Map[String, String], streaming: Boolean,
                     output: Seq[AttributeReference]): LogicalPlan = {
    val frame = LakelogPython.call("changeFeed", session, "path" -> table.path, "options" -> options, "streaming" -> streaming)
      .asInstanceOf[org.apache.spark.sql.Dataset[_]]
    val inner = frame.queryExecution.analyzed
    val columns = inner.output.map { have =>
      output.find(_.name.equalsIgnoreCase(have.name)) match {
        case Some(want) => Alias(have, want.name)(exprId = want.exprId)
        case None => have
      }
    }
    Project(columns, inner)
  }

  /** The plan of `table` as lakelog reads it, renamed to the relation's output attributes. */
  def readPlan(session: SparkSession, table: LakelogSparkTable, output: Seq[AttributeReference]): LogicalPlan = {
    val (version, timestamp) = table.timeTravel match {
      case AtLatest => (java.lang.Long.valueOf(table.info.version), null)
      case AtVersion(_) => (java.lang.Long.valueOf(table.info.version), null)
      case AtTimestamp(ts) => (java.lang.Long.valueOf(table.info.version), java.lang.Long.valueOf(ts))
    }
    val frame = LakelogPython.call("read", session, "path" -> table.path, "version" -> version)
      .asInstanceOf[org.apache.spark.sql.Dataset[_]]
    val inner = frame.queryExecution.analyzed
    if (inner.output.length != output.length) {
      throw LakelogException("LAKELOG_INTERNAL",
        s"the read of ${table.name} gave ${inner.output.length} columns where its schema has ${output.length}")
    }
    val columns = output.zip(inner.output).map { case (want, have) =>
      val value = if (have.dataType == want.dataType) have else Cast(have, want.dataType, Option(session.sessionState.conf.sessionLocalTimeZone))
      Alias(value, want.name)(exprId = want.exprId)
    }
    val read = Project(columns, inner)
    read.setTagValue(ReadOf, table.path)
    read
  }

  /** The table a read plan of lakelog's reads (its location), so that a commit can find the cached plans
   *  that read the version before it. */
  val ReadOf = org.apache.spark.sql.catalyst.trees.TreeNodeTag[String]("lakelog.readOf")

  /**
   * An overwrite's condition over the table's columns as Spark SQL naming them unqualified; static partition
   * values (`p <=> CAST('a' AS STRING)`, as Spark gives them) become `p = 'a'` and `p IS NULL`.
   */
  def sqlOf(e: Expression): String = e.transformUp {
    case c: Cast if c.foldable => Literal.create(c.eval(), c.dataType)
  }.transformUp {
    case EqualNullSafe(a: AttributeReference, Literal(null, _)) => IsNull(a)
    case EqualNullSafe(a: AttributeReference, l: Literal) => EqualTo(a, l)
    case a: AttributeReference => org.apache.spark.sql.catalyst.analysis.UnresolvedAttribute(Seq(a.name))
  }.sql
}

/** A relation over a lakelog table, as writes name their target. */
object LakelogRelation {
  def unapply(plan: LogicalPlan): Option[LakelogSparkTable] = plan match {
    case DataSourceV2Relation(t: LakelogSparkTable, _, _, _, _, _) => Some(t)
    case _ => None
  }
}

/** The lakelog table a DDL command names. */
object LakelogTableRef {
  def unapply(plan: LogicalPlan): Option[LakelogSparkTable] = plan.collectFirst {
    case ResolvedTable(_, _, t: LakelogSparkTable, _) => t
    case DataSourceV2Relation(t: LakelogSparkTable, _, _, _, _, _) => t
  }
}

/** The target of a row-level command: a lakelog relation, maybe under an alias. */
object LakelogTarget {
  def unapply(plan: LogicalPlan): Option[(LakelogSparkTable, LogicalPlan)] = plan match {
    case SubqueryAlias(_, child) => unapply(child).map { case (t, _) => (t, plan) }
    case r @ DataSourceV2Relation(t: LakelogSparkTable, _, _, _, _, _) => Some((t, r))
    case _ => None
  }
}

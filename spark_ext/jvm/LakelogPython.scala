package org.apache.spark.sql.lakelog

import java.util

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.{AnalysisException, SparkSession}

/**
 * The driver's Python process, as lakelog's Spark integration calls it: every lakelog operation (the log,
 * the commit, the jobs of row-level changes) runs there, on lakelog's public API. Python implements this
 * interface through Py4J's callback server (as PySpark's foreachBatch does); `spark_ext.configure` and
 * `spark_ext.register` register it.
 */
trait LakelogPython {
  /**
   * Run `method` with the arguments `json` gives (an object; `{"$object": i}` stands for `objects.get(i)`, a
   * JVM object such as a Dataset or a Column); a String that starts with [[LakelogPython.ErrorMark]] reports a
   * failure. (Arguments travel as one JSON text: every access to a JVM collection from Python is a round trip.)
   */
  def call(method: String, session: SparkSession, json: String, objects: util.List[Object]): Object
}

object LakelogPython {
  /** A reply that starts with this is a JSON object {"type", "message", "errorClass"} describing a failure. */
  val ErrorMark = "\u0000lakelog-error\u0000"

  @volatile private var python: LakelogPython = _

  def register(p: LakelogPython): Unit = { python = p }

  def registered: Boolean = python != null

  /** Call `method` with named arguments: strings, numbers, booleans, null, Seqs and Maps of them, and JVM objects. */
  def call(method: String, session: SparkSession, args: (String, Any)*): Object = {
    val p = python
    if (p == null) {
      throw LakelogException("LAKELOG_NOT_REGISTERED",
        "lakelog's Spark integration is not registered in this Python process: build the session with " +
          "spark_ext.configure(SparkSession.builder) or call spark_ext.register(spark) before using lakelog tables")
    }
    val mapper = new com.fasterxml.jackson.databind.ObjectMapper()
    val objects = new util.ArrayList[Object]()
    def node(v: Any): com.fasterxml.jackson.databind.JsonNode = v match {
      case null | None => mapper.getNodeFactory.nullNode()
      case Some(x) => node(x)
      case s: String => mapper.getNodeFactory.textNode(s)
      case b: Boolean => mapper.getNodeFactory.booleanNode(b)
      case b: java.lang.Boolean => mapper.getNodeFactory.booleanNode(b.booleanValue)
      case i: Int => mapper.getNodeFactory.numberNode(i)
      case l: Long => mapper.getNodeFactory.numberNode(l)
      case l: java.lang.Long => mapper.getNodeFactory.numberNode(l.longValue)
      case m: scala.collection.Map[_, _] =>
        val o = mapper.createObjectNode()
        m.foreach { case (k, x) => o.set[com.fasterxml.jackson.databind.JsonNode](k.toString, node(x)) }
        o
      case xs: Seq[_] =>
        val a = mapper.createArrayNode()
        xs.foreach(x => a.add(node(x)))
        a
      case other =>
        objects.add(other.asInstanceOf[AnyRef])
        mapper.createObjectNode().put("$object", objects.size - 1)
    }
    val reply = p.call(method, session, mapper.writeValueAsString(node(args.toMap)), objects)
    reply match {
      case s: String if s.startsWith(ErrorMark) => throw fromJson(s.substring(ErrorMark.length))
      case t: Throwable => throw t // Spark's own error, raised by a job lakelog ran in Python
      case other => other
    }
  }

  def string(method: String, session: SparkSession, args: (String, Any)*): String =
    call(method, session, args: _*).asInstanceOf[String]

  private def fromJson(text: String): LakelogException = {
    val mapper = new com.fasterxml.jackson.databind.ObjectMapper()
    val node = mapper.readTree(text)
    def field(name: String): String = Option(node.get(name)).filter(!_.isNull).map(_.asText()).orNull
    LakelogException(Option(field("errorClass")).getOrElse("LAKELOG_ERROR"), field("message"), Option(field("type")))
  }
}

/**
 * A lakelog error as Spark reports errors: an AnalysisException whose error class is `LAKELOG_<ERROR TYPE>`
 * (`LAKELOG_TABLE_NOT_FOUND`, `LAKELOG_CONSTRAINT_VIOLATION`, ...) and whose message is lakelog's.
 */
class LakelogException(val condition: String, message: String, val lakelogType: Option[String])
  extends AnalysisException(
    s"[$condition] $message", None, None, None, LakelogErrors.known(condition),
    Map("message" -> message), Array.empty) {
  override def getMessage: String = s"[$condition] $message"
  override def getSqlState: String = LakelogErrors.sqlState(condition)
}

object LakelogException {
  def apply(errorClass: String, message: String, lakelogType: Option[String] = None): LakelogException =
    new LakelogException(errorClass, message, lakelogType)
}

/**
 * lakelog's error classes, added to the ones Spark knows so that everything that formats an error by its
 * class (PySpark's `getMessage`, Spark's SQLSTATE lookup) works for them. Spark has no API for a connector's
 * error classes: its reader is replaced by one that also reads lakelog's. Where that is not possible, lakelog's
 * errors carry no error class (their message still starts with it).
 */
object LakelogErrors {
  @volatile private var classes: Map[String, String] = Map.empty

  def known(condition: String): Option[String] = if (classes.contains(condition)) Some(condition) else None

  def sqlState(condition: String): String = classes.getOrElse(condition, null)

  /** Register `json` ({"LAKELOG_X": "SQLSTATE", ...}); returns whether Spark's error reader now knows them. */
  def register(json: String): Boolean = synchronized {
    val mapper = new com.fasterxml.jackson.databind.ObjectMapper()
    // (lakelog's errors, from Python, and the one the JVM raises itself before Python is reachable)
    val wanted = mapper.readTree(json).fields().asScala.map(e => e.getKey -> e.getValue.asText()).toMap +
      ("LAKELOG_NOT_REGISTERED" -> "55000")
    if (wanted.keySet.subsetOf(classes.keySet)) return true
    try {
      val conditions = mapper.createObjectNode()
      wanted.foreach { case (name, state) =>
        val c = conditions.putObject(name)
        c.putArray("message").add("<message>")
        c.put("sqlState", state)
      }
      val file = java.io.File.createTempFile("lakelog-error-conditions", ".json")
      file.deleteOnExit()
      java.nio.file.Files.writeString(file.toPath, mapper.writeValueAsString(conditions))
      val ours = new org.apache.spark.ErrorClassesJsonReader(Seq(file.toURI.toURL)).errorInfoMap
      val reader = org.apache.spark.SparkThrowableHelper.errorReader
      val field = classOf[org.apache.spark.ErrorClassesJsonReader].getDeclaredField("errorInfoMap")
      field.setAccessible(true)
      field.set(reader, reader.errorInfoMap ++ ours)
      classes = wanted
      true
    } catch {
      case _: Exception => false
    }
  }
}

private[lakelog] object IdentifierSyntax {
  implicit class Parts(ident: org.apache.spark.sql.connector.catalog.Identifier) {
    def toMultipart: Seq[String] = ident.namespace.toSeq :+ ident.name
  }
}

"""Delta's table commands, read token by token: ``DESCRIBE HISTORY t [LIMIT n]``, ``DESCRIBE DETAIL t``,
``RESTORE [TABLE] t TO VERSION|TIMESTAMP AS OF x``, ``OPTIMIZE t [WHERE partition condition] [ZORDER BY
(cols)]``, ``VACUUM t [RETAIN n HOURS] [DRY RUN]``; and, for lakelog tables, the statements whose answer
Spark would take from its catalog entry (which keeps what the table looked like when it was entered):
``SHOW TBLPROPERTIES t [(key)]``, ``DESCRIBE [TABLE] t`` and ``SHOW COLUMNS IN t``. A table is
``lakelog.`path```, a catalog table using lakelog, or (as Delta takes it) a quoted path."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

import lakelog

from ..cluster.paths import driver_path
from ..table import LakelogTable
from .syntax import SqlError, Tokens, spark_dialect, spark_sql, sqlglot
from .tables import is_path, lakelog_path, path_of, table_name

HEADS = (("RESTORE",), ("OPTIMIZE",), ("VACUUM",), ("DESCRIBE", "DETAIL"), ("DESCRIBE", "HISTORY"))


def is_command(words: list[str]) -> bool:
    return any(tuple(words[:len(h)]) == h for h in HEADS)


def command_path(spark: SparkSession, toks: Tokens, what: str) -> str:
    kind, ref = toks.table_ref()
    return driver_path(spark, ref) if kind == "path" else lakelog_path(spark, ref, what)


def run_command(spark: SparkSession, text: str, tokens: list) -> DataFrame:
    toks = Tokens(text, tokens)
    first = toks.word("RESTORE", "OPTIMIZE", "VACUUM", "DESCRIBE")
    if first == "DESCRIBE":
        second = toks.word("DETAIL", "HISTORY")
        return _detail(spark, toks) if second == "DETAIL" else _history(spark, toks)
    return {"RESTORE": _restore, "OPTIMIZE": _optimize, "VACUUM": _vacuum}[first](spark, toks)


def _history(spark: SparkSession, toks: Tokens) -> DataFrame:
    path = command_path(spark, toks, "DESCRIBE HISTORY")
    limit = None
    if toks.word("LIMIT", optional=True):
        text = toks.number()
        if not text.isdigit():
            raise SqlError(f"DESCRIBE HISTORY ... LIMIT takes a whole number, not {text}")
        limit = int(text)
    toks.end()
    return LakelogTable.forPath(spark, path).history(limit)


def _detail(spark: SparkSession, toks: Tokens) -> DataFrame:
    start = toks.i
    path = command_path(spark, toks, "DESCRIBE DETAIL")
    end = toks.i
    toks.i = start
    kind, ref = toks.table_ref()
    toks.i = end
    toks.end()
    name = None
    if kind == "table" and not is_path(ref):
        db = ref.args.get("db")
        name = f"spark_catalog.{db.name if db is not None else spark.catalog.currentDatabase()}.{ref.name}"
    return LakelogTable.forPath(spark, path).detail(name)


def _restore(spark: SparkSession, toks: Tokens) -> DataFrame:
    toks.word("TABLE", optional=True)
    path = command_path(spark, toks, "RESTORE")
    toks.word("TO")
    kind = toks.word("VERSION", "TIMESTAMP")
    toks.word("AS")
    toks.word("OF")
    literal_kind, value = toks.literal()
    toks.end()
    t = LakelogTable.forPath(spark, path)
    if kind == "VERSION":
        if literal_kind != "NUMBER" or not value.isdigit():
            raise SqlError(f"RESTORE ... TO VERSION AS OF takes a version number, not {value!r}")
        return t.restoreToVersion(int(value))
    return t.restoreToTimestamp(value)


def _optimize(spark: SparkSession, toks: Tokens) -> DataFrame:
    path = command_path(spark, toks, "OPTIMIZE")
    filters = None
    if toks.word("WHERE", optional=True):
        start = toks.i
        while toks.peek() is not None and toks.peek_word() != "ZORDER":
            toks.i += 1
        if toks.i == start:
            raise toks.error("a condition on partition columns")
        filters = partition_filters(toks.text[toks.tokens[start].start:toks.tokens[toks.i - 1].end + 1])
    columns: list[str] = []
    if toks.word("ZORDER", optional=True):
        toks.word("BY")
        paren = toks.word("(", optional=True)
        while True:
            columns.append(toks.name("a column name"))
            if not toks.word(",", optional=True):
                break
        if paren:
            toks.word(")")
    toks.end()
    builder = LakelogTable.forPath(spark, path).optimize().where(filters)
    return builder.executeZOrderBy(*columns) if columns else builder.executeCompaction()


def _vacuum(spark: SparkSession, toks: Tokens) -> DataFrame:
    path = command_path(spark, toks, "VACUUM")
    hours = None
    if toks.word("RETAIN", optional=True):
        hours = float(toks.number())
        toks.word("HOURS")
    dry = bool(toks.word("DRY", optional=True))
    if dry:
        toks.word("RUN")
    toks.end()
    # Delta's switch for a retention shorter than the table's (spark.databricks.delta.retentionDurationCheck.enabled)
    check = str(spark.conf.get(RETENTION_CHECK_CONF, "true")).strip().lower() != "false"
    deleted = lakelog.Table(path).vacuum(retention_hours=hours, dry_run=dry, enforce_retention_duration=check)
    if not dry:
        return spark.createDataFrame([(path,)], "path string")  # (as Delta: the table's path)
    return spark.createDataFrame([(p,) for p in deleted], "path string")


RETENTION_CHECK_CONF = "spark.databricks.delta.retentionDurationCheck.enabled"


# ---------------------------------------------------------------- what Spark's catalog entry would answer

def catalog_statement(spark: SparkSession, text: str, tokens: list) -> DataFrame | None:
    """SHOW TBLPROPERTIES / DESCRIBE [TABLE] / SHOW COLUMNS of a lakelog table, from its log; None when the
    statement is not one of these or names no lakelog table (Spark runs it)."""
    toks = Tokens(text, tokens)
    if toks.words("SHOW", "TBLPROPERTIES"):
        kind = "properties"
    elif toks.words("SHOW", "COLUMNS"):
        toks.word("IN", "FROM")
        kind = "columns"
    elif toks.word("DESCRIBE", "DESC", optional=True):
        toks.word("TABLE", optional=True)
        if toks.peek_word() in ("EXTENDED", "FORMATTED", "DETAIL", "HISTORY", "QUERY", "FUNCTION", "DATABASE", "SCHEMA", "CATALOG", "SELECT", "WITH"):
            return None
        kind = "describe"
    else:
        return None
    try:
        ref_kind, ref = toks.table_ref()
    except SqlError:
        return None
    path = driver_path(spark, ref) if ref_kind == "path" else path_of(spark, ref)
    if path is None:
        return None
    name = ref if ref_kind == "path" else table_name(ref)
    table = lakelog.Table(path)
    if kind == "properties":
        key = toks.balanced("a property name").strip() if toks.peek() is not None and toks.peek().text == "(" else None
        toks.end()
        conf = table.metadata.configuration
        if key is not None:
            key = key.strip("'\"`")
            if key not in conf:
                raise SqlError(f"SHOW TBLPROPERTIES: table {name} has no property {key!r}")
            conf = {key: conf[key]}
        return spark.createDataFrame(sorted(conf.items()), "key string, value string")
    if kind == "columns":
        if toks.word("IN", "FROM", optional=True):
            raise SqlError("SHOW COLUMNS ... IN <database>: name the table with its database instead (db.table)")
        toks.end()
        return spark.createDataFrame([(n,) for n in table.schema.names], "col_name string")
    if toks.peek() is not None:
        raise SqlError(f"DESCRIBE {name} {toks.rest()}: spark_ext.sql describes a lakelog table's columns only (DESCRIBE DETAIL for the rest)")
    spark_schema = LakelogTable.forPath(spark, path).toDF().schema
    rows = [(f.name, f.dataType.simpleString(), None) for f in spark_schema.fields]
    if table.partition_columns:
        rows += [("# Partition Information", "", None), ("# col_name", "data_type", "comment")]
        rows += [(c, spark_schema[c].dataType.simpleString(), None) for c in table.partition_columns]
    return spark.createDataFrame(rows, "col_name string, data_type string, comment string")


_COMPARISONS = {"EQ": "=", "NEQ": "!=", "GT": ">", "GTE": ">=", "LT": "<", "LTE": "<="}


def partition_filters(text: str) -> list[list[tuple]]:
    """``OPTIMIZE ... WHERE``'s condition as DNF filters (``[[(column, op, value), ...], ...]``): ANDs
    and ORs of comparisons and IN lists between a column and literals, as Delta allows there (partition
    columns only, which optimize checks)."""
    sg, exp = sqlglot()
    try:
        tree = sg.parse_one(text, read=spark_dialect())
    except sg.errors.ParseError as e:
        raise SqlError(f"cannot parse the OPTIMIZE condition {text!r}: {e}") from None

    def value(node):
        if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
            return -value(node.this)
        if not isinstance(node, exp.Literal):
            raise SqlError(f"OPTIMIZE ... WHERE compares partition columns with literals, not {spark_sql(node)}")
        if node.is_string:
            return node.this
        return int(node.this) if node.this.lstrip("-").isdigit() else float(node.this)

    def term(node) -> tuple:
        if isinstance(node, exp.Paren):
            return term(node.this)
        kind = type(node).__name__.upper()
        if kind in _COMPARISONS and isinstance(node.this, exp.Column):
            return (node.this.name, _COMPARISONS[kind], value(node.expression))
        if isinstance(node, exp.In) and isinstance(node.this, exp.Column):
            return (node.this.name, "in", [value(v) for v in node.expressions])
        if isinstance(node, exp.Not) and isinstance(node.this, exp.In) and isinstance(node.this.this, exp.Column):
            return (node.this.this.name, "not in", [value(v) for v in node.this.expressions])
        raise SqlError(f"OPTIMIZE ... WHERE takes comparisons of partition columns with literals joined by AND/OR, "
                       f"not {spark_sql(node)}")

    def conjunction(node) -> list[tuple]:
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.And):
            return conjunction(node.this) + conjunction(node.expression)
        return [term(node)]

    def disjunction(node) -> list[list[tuple]]:
        while isinstance(node, exp.Paren) and isinstance(node.this, (exp.Or, exp.Paren)):
            node = node.this
        if isinstance(node, exp.Or):
            return disjunction(node.this) + disjunction(node.expression)
        return [conjunction(node)]

    return disjunction(tree)

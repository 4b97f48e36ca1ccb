"""Reading lakelog tables inside a statement: every one it reads (time travel and ``table_changes``
included) becomes a temporary view over ``format("lakelog")`` for as long as the statement runs."""

from __future__ import annotations

import uuid
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from .syntax import SqlError, spark_dialect, spark_sql, sqlglot
from .tables import PROVIDER, is_path, lakelog_path, path_of, table_name


class Scope:
    """The temporary views one statement reads through; ``close`` drops them."""

    def __init__(self, spark: SparkSession, storage_options: dict | None = None):
        self.spark = spark
        self.options = {f"storage.{k}": str(v) for k, v in (storage_options or {}).items()}
        self.views: list[str] = []

    def close(self) -> None:
        for v in self.views:
            self.spark.catalog.dropTempView(v)
        self.views = []

    def view(self, df: DataFrame) -> str:
        name = f"__lakelog_{uuid.uuid4().hex[:12]}"
        df.createOrReplaceTempView(name)
        self.views.append(name)
        return name

    def rewrite_reads(self, tree) -> bool:
        """Replace every lakelog table ``tree`` reads by a temporary view; True when one was replaced."""
        _, exp = sqlglot()
        changed = False
        for table in list(tree.find_all(exp.Table)):
            alias = table.args.get("alias")
            if isinstance(table.this, exp.Anonymous) and table.this.name.lower() == "table_changes":
                view = self._changes_view(table.this)
            else:
                if not isinstance(table.this, exp.Identifier):
                    continue
                path = path_of(self.spark, table)
                if path is None:
                    continue
                view = self.view(self.read(table, path))
            new = exp.Table(this=exp.to_identifier(view))
            if alias is not None:
                new.set("alias", alias.copy())
            elif isinstance(table.this, exp.Identifier) and not is_path(table):
                new.set("alias", exp.TableAlias(this=exp.to_identifier(table.name)))  # (``sales.id`` still resolves)
            table.replace(new)
            changed = True
        return changed

    def query(self, node) -> DataFrame:
        """The rows of a query (or VALUES) node, lakelog tables read through views."""
        _, exp = sqlglot()
        node = node.copy()
        if isinstance(node, exp.Values):
            node = exp.select("*").from_(exp.Subquery(this=node, alias=exp.TableAlias(this=exp.to_identifier("v"))))
        self.rewrite_reads(node)
        return self.spark.sql(spark_sql(node))

    def read(self, table, path: str) -> DataFrame:
        """The lakelog table at ``path`` that ``table`` names, at its ``VERSION``/``TIMESTAMP AS OF`` if any."""
        reader = self.spark.read.format(PROVIDER).options(**self.options)
        version = table.args.get("version")
        if version is not None:
            by_version = version.name.upper() == "VERSION"
            value = literal(version.expression, "VERSION AS OF" if by_version else "TIMESTAMP AS OF")
            reader = reader.option("versionAsOf" if by_version else "timestampAsOf", str(value))
        return reader.load(path)

    def source(self, node) -> DataFrame:
        """A merge source (a table, view or subquery) as a DataFrame, under its alias."""
        _, exp = sqlglot()
        alias = node.alias or (node.name if isinstance(node, exp.Table) else None)
        if isinstance(node, exp.Subquery):
            df = self.query(node.this)
        else:
            path = path_of(self.spark, node)
            df = self.read(node, path) if path is not None else self.spark.table(table_name(node))
        return df.alias(alias) if alias else df

    def _changes_view(self, call) -> str:
        sg, exp = sqlglot()
        args = call.expressions
        if len(args) not in (2, 3) or not isinstance(args[0], exp.Literal) or not args[0].is_string:
            raise SqlError("table_changes takes ('table name or lakelog.`path`', start[, end]) with the table name quoted")
        ref = sg.parse_one(args[0].this, read=spark_dialect(), into=exp.Table)
        path = lakelog_path(self.spark, ref, "table_changes")
        reader = self.spark.read.format(PROVIDER).options(**self.options).option("readChangeFeed", "true")
        for arg, which in zip(args[1:], ("starting", "ending")):
            value = literal(arg, "table_changes")
            reader = reader.option(f"{which}{'Version' if isinstance(value, int) else 'Timestamp'}", str(value))
        return self.view(reader.load(path))


def literal(node, what: str) -> Any:
    _, exp = sqlglot()
    if isinstance(node, exp.Literal):
        return int(node.this) if not node.is_string and node.this.lstrip("-").isdigit() else node.this
    raise SqlError(f"{what} takes a literal (a number or a quoted timestamp), not {spark_sql(node)}")


def reads_lakelog(spark: SparkSession, tree) -> bool:
    """Whether ``tree`` reads a lakelog table."""
    _, exp = sqlglot()
    for table in tree.find_all(exp.Table):
        if isinstance(table.this, exp.Anonymous) and table.this.name.lower() == "table_changes":
            return True
        if isinstance(table.this, exp.Identifier) and path_of(spark, table) is not None:
            return True
    return False

"""``spark_ext.sql(spark, statement)``: Delta's SQL for lakelog tables, on Spark.

Spark routes no row-level statement, time travel or Delta utility command to a Python data source, so
this entry point parses the statement (sqlglot's Spark dialect; its tokenizer for the Delta commands
sqlglot does not know) and runs what it says through ``LakelogTable`` and ``format("lakelog")``:

* ``MERGE INTO`` (every clause kind), ``UPDATE``, ``DELETE FROM``, ``INSERT INTO``/``INSERT OVERWRITE``;
* queries reading ``lakelog.`path``` or a table created ``USING lakelog``, with ``VERSION AS OF`` /
  ``TIMESTAMP AS OF``, and ``table_changes('table', start[, end])``;
* ``DESCRIBE HISTORY``, ``DESCRIBE DETAIL``, ``RESTORE [TABLE] t TO VERSION|TIMESTAMP AS OF``,
  ``OPTIMIZE t [WHERE partition condition] [ZORDER BY (cols)]``, ``VACUUM t [RETAIN n HOURS] [DRY RUN]``.

Any other statement goes to ``spark.sql`` unchanged. A table is ``lakelog.`path``` or a catalog table
whose provider is ``lakelog`` (``CREATE TABLE t USING lakelog LOCATION '...'``).
"""

from __future__ import annotations

import uuid
import warnings
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import col as df_col

from lakelog.errors import InvalidArgumentError

from .assignments import by_name, checked_type
from .datasource import register
from .table import LakelogTable

PROVIDER = "lakelog"


class SqlError(InvalidArgumentError):
    """A statement ``spark_ext.sql`` cannot parse or run, with its position (line, column)."""


def _sqlglot():
    import sqlglot
    from sqlglot import exp

    return sqlglot, exp


def sql(spark: SparkSession, statement: str) -> DataFrame:
    """Run one SQL statement, with Delta's SQL for lakelog tables (see the module docstring); returns
    the result as a DataFrame (row-level statements: Delta's ``num_affected_rows`` and kin)."""
    if not isinstance(statement, str) or not statement.strip():
        raise SqlError(f"spark_ext.sql takes one SQL statement as a string, not {statement!r}")
    register(spark)
    sqlglot, exp = _sqlglot()
    text = statement.strip().rstrip(";")
    words = _tokens(text)
    head = [t.text.upper() for t in words[:2]]
    if head[:1] in (["RESTORE"], ["OPTIMIZE"], ["VACUUM"]) or head == ["DESCRIBE", "DETAIL"]:
        return _Command(spark, text, words).run()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trees = sqlglot.parse(text, read="spark")
    except sqlglot.errors.ParseError as e:
        first = e.errors[0] if e.errors else {}
        raise SqlError(f"cannot parse the statement at line {first.get('line', '?')}, column {first.get('col', '?')}: "
                       f"{first.get('description', e)}") from None
    if len(trees) != 1 or trees[0] is None:
        raise SqlError("spark_ext.sql runs one statement at a time")
    return _Statement(spark, text, trees[0]).run()


def _tokens(text: str) -> list:
    from sqlglot.dialects.dialect import Dialect

    dialect = Dialect.get_or_raise("spark")
    try:
        tokens = dialect.tokenize(text)
        if len(tokens) == 2 and tokens[0].token_type.name == "COMMAND":
            # (OPTIMIZE, VACUUM: one command token and the rest as text) the rest, token by token, at its place
            rest_text = text[tokens[0].end + 1:].lstrip()
            at = len(text) - len(rest_text)
            rest = dialect.tokenize(rest_text)
            for t in rest:
                t.start += at
                t.end += at
                if t.line == 1:
                    t.col += at
            tokens = tokens[:1] + rest
        return tokens
    except Exception as e:  # (sqlglot's TokenError: an unterminated string or comment)
        raise SqlError(f"cannot read the statement: {e}") from None


def _table_name(table) -> str:
    """The catalog name of an ``exp.Table`` node (without alias or time travel)."""
    _, exp = _sqlglot()
    bare = exp.Table(this=table.this.copy(), db=table.args.get("db"), catalog=table.args.get("catalog"))
    return bare.sql(dialect="spark")


def _qualified(spark: SparkSession, table) -> str:
    db = table.args.get("db")
    return f"{(db.name if db is not None else spark.catalog.currentDatabase()).lower()}.{table.name.lower()}"


def _conf_key(spark: SparkSession, table) -> str:
    # Spark's session catalog keeps neither the LOCATION nor the options of a table whose provider is a
    # Python data source (and passes the source no path when it is read): spark_ext.sql keeps the path
    # of the tables it creates in the session's configuration, which lives as long as that catalog.
    return f"spark.lakelog.table.{_qualified(spark, table)}"


def _location(spark: SparkSession, name: str) -> str | None:
    """The path of the catalog table ``name`` when its provider is lakelog, else None."""
    from pyspark.errors import AnalysisException

    sqlglot, exp = _sqlglot()
    try:
        table = sqlglot.parse_one(name, read="spark", into=exp.Table)
    except sqlglot.errors.ParseError:
        table = None
    if table is not None and not table.args.get("catalog"):
        known = spark.conf.get(_conf_key(spark, table), None)
        if known:
            try:
                if spark.catalog.tableExists(_table_name(table)):
                    return known
            except AnalysisException:
                pass
    try:
        # (asked first: a DESCRIBE of a missing table would have Spark log a page-long error)
        if not spark.catalog.tableExists(name):
            return None
        rows = spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()
    except AnalysisException:
        return None
    info = {r[0].strip(): (r[1] or "").strip() for r in rows if r[0]}
    if info.get("Provider", "").lower() != PROVIDER:
        return None
    location = info.get("Location")
    if not location:
        raise SqlError(f"table {name} is a lakelog table without a LOCATION; create it with USING lakelog LOCATION '<path>'")
    return location[len("file:"):] if location.startswith("file:") and not location.startswith("file://") else location


def _is_path(table) -> bool:
    db, catalog = table.args.get("db"), table.args.get("catalog")
    return db is not None and catalog is None and db.name.lower() == PROVIDER


def _path_of(spark: SparkSession, table) -> str | None:
    """The path of a lakelog table reference: ``lakelog.`path``` or a catalog table using lakelog."""
    if _is_path(table):
        return table.name
    return _location(spark, _table_name(table))


def _lakelog_path(spark: SparkSession, table, what: str) -> str:
    path = _path_of(spark, table)
    if path is None:
        raise SqlError(f"{what}: {_table_name(table)} is not a lakelog table (name one as lakelog.`<path>` or a table "
                       "created USING lakelog LOCATION '<path>')")
    return path


def _frame(spark: SparkSession, metrics: dict[str, Any], keys: list[tuple[str, str]]) -> DataFrame:
    row = tuple(int(metrics.get(src, 0) or 0) for _, src in keys)
    return spark.createDataFrame([row], ", ".join(f"{name} long" for name, _ in keys))


class _Statement:
    """A statement sqlglot parsed: row-level changes, inserts, queries, DESCRIBE HISTORY."""

    def __init__(self, spark: SparkSession, text: str, tree):
        self.spark, self.text, self.tree = spark, text, tree
        self.views: list[str] = []

    def run(self) -> DataFrame:
        _, exp = _sqlglot()
        t = self.tree
        try:
            if isinstance(t, exp.Merge):
                return self._merge(t)
            if isinstance(t, exp.Update):
                return self._update(t)
            if isinstance(t, exp.Delete):
                return self._delete(t)
            if isinstance(t, exp.Insert) and self._insert_target(t) is not None:
                return self._insert(t)
            if isinstance(t, exp.Create) and self._provider(t) == PROVIDER:
                return self._create(t)
            if isinstance(t, exp.Drop) and str(t.args.get("kind") or "").upper() == "TABLE":
                for table in t.args.get("tables") or []:
                    self.spark.conf.unset(_conf_key(self.spark, table))
                return self.spark.sql(self.text)
            if isinstance(t, exp.Describe) and str(t.args.get("style") or "").upper() == "HISTORY":
                return LakelogTable.forPath(self.spark, _lakelog_path(self.spark, t.this, "DESCRIBE HISTORY")).history()
            if isinstance(t, exp.Query) or isinstance(t, (exp.Insert, exp.Create)):
                if self._rewrite_reads(t):
                    return self.spark.sql(t.sql(dialect="spark"))
            return self.spark.sql(self.text)
        finally:
            for v in self.views:
                self.spark.catalog.dropTempView(v)

    # ------------------------------------------------------------ reads
    def _view(self, df: DataFrame) -> str:
        name = f"__lakelog_{uuid.uuid4().hex[:12]}"
        df.createOrReplaceTempView(name)
        self.views.append(name)
        return name

    def _rewrite_reads(self, tree) -> bool:
        """Replace every lakelog table the statement reads (time travel and ``table_changes`` included) by a
        temporary view over ``format("lakelog")``; True when one was replaced."""
        _, exp = _sqlglot()
        changed = False
        for table in list(tree.find_all(exp.Table)):
            alias = table.args.get("alias")
            if isinstance(table.this, exp.Anonymous) and table.this.name.lower() == "table_changes":
                view = self._changes_view(table.this)
            else:
                if not isinstance(table.this, exp.Identifier):
                    continue
                path = _path_of(self.spark, table)
                if path is None:
                    continue
                view = self._view(self._read(table, path))
            new = exp.Table(this=exp.to_identifier(view))
            if alias is not None:
                new.set("alias", alias.copy())
            elif isinstance(table.this, exp.Identifier) and not _is_path(table):
                new.set("alias", exp.TableAlias(this=exp.to_identifier(table.name)))  # (``sales.id`` still resolves)
            table.replace(new)
            changed = True
        return changed

    def _read(self, table, path: str) -> DataFrame:
        """The lakelog table at ``path`` that ``table`` names, at its ``VERSION``/``TIMESTAMP AS OF`` if any."""
        reader = self.spark.read.format(PROVIDER)
        version = table.args.get("version")
        if version is not None:
            by_version = version.name.upper() == "VERSION"
            value = self._literal(version.expression, "VERSION AS OF" if by_version else "TIMESTAMP AS OF")
            reader = reader.option("versionAsOf" if by_version else "timestampAsOf", str(value))
        return reader.load(path)

    def _literal(self, node, what: str) -> Any:
        _, exp = _sqlglot()
        if isinstance(node, exp.Literal):
            return int(node.this) if not node.is_string and node.this.lstrip("-").isdigit() else node.this
        raise SqlError(f"{what} takes a literal (a number or a quoted timestamp), not {node.sql(dialect='spark')}")

    def _changes_view(self, call) -> str:
        _, exp = _sqlglot()
        args = call.expressions
        if len(args) not in (2, 3) or not isinstance(args[0], exp.Literal) or not args[0].is_string:
            raise SqlError("table_changes takes ('table name or lakelog.`path`', start[, end]) with the table name quoted")
        name = args[0].this
        ref = _sqlglot()[0].parse_one(name, read="spark", into=exp.Table)
        path = _lakelog_path(self.spark, ref, "table_changes")
        reader = self.spark.read.format(PROVIDER).option("readChangeFeed", "true")
        for arg, which in zip(args[1:], ("starting", "ending")):
            value = self._literal(arg, "table_changes")
            reader = reader.option(f"{which}{'Version' if isinstance(value, int) else 'Timestamp'}", str(value))
        return self._view(reader.load(path))

    # ------------------------------------------------------------ CREATE TABLE ... USING lakelog
    @staticmethod
    def _provider(t) -> str | None:
        _, exp = _sqlglot()
        props = t.args.get("properties")
        for p in (props.expressions if props is not None else []):
            if isinstance(p, exp.FileFormatProperty):
                return p.name.lower()
        return None

    def _create(self, t) -> DataFrame:
        """``CREATE TABLE name [(columns)] USING lakelog LOCATION 'path' [AS query]`` (or ``OPTIONS (path
        'path')``): the lakelog table at the path (created from the columns or the query when there is
        none), registered in the catalog under the name."""
        import lakelog

        _, exp = _sqlglot()
        schema = t.this if isinstance(t.this, exp.Schema) else None
        table = schema.this if schema is not None else t.this
        path = None
        for p in t.args["properties"].expressions:
            if isinstance(p, exp.LocationProperty):
                path = p.this.name
            elif isinstance(p, exp.OptionsProperty):
                path = next((o.args["value"].name for o in p.expressions if o.name.lower() == "path"), path)
        if not path:
            raise SqlError(f"CREATE TABLE {_table_name(table)} USING lakelog needs LOCATION '<path>' (where the table's files go)")
        exists = LakelogTable.isLakelogTable(self.spark, path)
        query = t.expression
        if query is not None:
            if exists:
                raise SqlError(f"CREATE TABLE ... AS: a lakelog table already exists at {path!r}; use INSERT INTO")
            query = query.copy()
            self._rewrite_reads(query)
            self.spark.sql(query.sql(dialect="spark")).write.format(PROVIDER).mode("append").save(path)
        elif not exists:
            if schema is None:
                raise SqlError(f"there is no lakelog table at {path!r}: give the new table's columns, or a query (AS SELECT ...)")
            ddl = ", ".join(c.sql(dialect="spark") for c in schema.expressions)
            lakelog.write_table(path, self.spark.createDataFrame([], ddl).toArrow(), mode="append")
        if_not = "IF NOT EXISTS " if t.args.get("exists") else ""
        name = _table_name(table)
        self.spark.sql(f"CREATE TABLE {if_not}{name} USING {PROVIDER} LOCATION '{path}'")
        self.spark.conf.set(_conf_key(self.spark, table), path)
        return self.spark.createDataFrame([], "result string")

    # ------------------------------------------------------------ writes
    def _target(self, table, what: str) -> LakelogTable:
        t = LakelogTable.forPath(self.spark, _lakelog_path(self.spark, table, what))
        alias = table.alias
        if alias:
            return t.alias(alias)
        return t.alias(table.name) if table.args.get("db") is None else t

    def _source(self, node) -> DataFrame:
        """The merge source (a table, view or subquery) as a DataFrame, under its alias."""
        _, exp = _sqlglot()
        alias = node.alias or (node.name if isinstance(node, exp.Table) else None)
        if isinstance(node, exp.Subquery):
            inner = node.this.copy()
            self._rewrite_reads(inner)
            df = self.spark.sql(inner.sql(dialect="spark"))
        else:
            path = _path_of(self.spark, node)
            if path is not None:
                df = self._read(node, path)
            else:
                df = self.spark.table(_table_name(node))
        return df.alias(alias) if alias else df

    @staticmethod
    def _sql(node) -> str | None:
        return None if node is None else node.sql(dialect="spark")

    def _assignments(self, eqs) -> dict[str, str]:
        out = {}
        for eq in eqs:
            column = eq.this
            out[column.name if column.args.get("table") is not None else column.sql(dialect="spark")] = eq.expression.sql(dialect="spark")
        return out

    def _merge(self, t) -> DataFrame:
        _, exp = _sqlglot()
        target = self._target(t.this, "MERGE INTO")
        builder = target.merge(self._source(t.args["using"]), t.args["on"].sql(dialect="spark"))
        whens = t.args.get("whens")
        for when in (whens.expressions if whens is not None else []):
            cond = self._sql(when.args.get("condition"))
            then = when.args.get("then")
            by_source = bool(when.args.get("source"))
            if when.args.get("matched") or by_source:
                if isinstance(then, exp.Update):
                    if len(then.expressions) == 1 and isinstance(then.expressions[0], exp.Star):
                        if by_source:
                            raise SqlError("WHEN NOT MATCHED BY SOURCE THEN UPDATE SET * is not SQL: name the columns")
                        builder = builder.whenMatchedUpdateAll(cond)
                    elif by_source:
                        builder = builder.whenNotMatchedBySourceUpdate(cond, self._assignments(then.expressions))
                    else:
                        builder = builder.whenMatchedUpdate(cond, self._assignments(then.expressions))
                elif then.name.upper() == "DELETE":
                    builder = builder.whenNotMatchedBySourceDelete(cond) if by_source else builder.whenMatchedDelete(cond)
                else:
                    raise SqlError(f"a WHEN MATCHED clause updates or deletes, not {then.sql(dialect='spark')}")
            else:
                if not isinstance(then, exp.Insert):
                    raise SqlError(f"a WHEN NOT MATCHED clause inserts, not {then.sql(dialect='spark')}")
                if isinstance(then.this, exp.Star):
                    builder = builder.whenNotMatchedInsertAll(cond)
                else:
                    columns = [c.name for c in then.this.expressions]
                    values = [v.sql(dialect="spark") for v in then.expression.expressions]
                    if len(columns) != len(values):
                        raise SqlError(f"INSERT names {len(columns)} column(s) but gives {len(values)} value(s)")
                    builder = builder.whenNotMatchedInsert(cond, dict(zip(columns, values)))
        m = builder.execute()
        return _frame(self.spark, {**m, "affected": m["num_target_rows_inserted"] + m["num_target_rows_updated"] + m["num_target_rows_deleted"]},
                      [("num_affected_rows", "affected"), ("num_updated_rows", "num_target_rows_updated"),
                       ("num_deleted_rows", "num_target_rows_deleted"), ("num_inserted_rows", "num_target_rows_inserted")])

    def _update(self, t) -> DataFrame:
        target = self._target(t.this, "UPDATE")
        where = t.args.get("where")
        m = target.update(self._sql(where.this) if where is not None else None, self._assignments(t.expressions))
        return _frame(self.spark, m, [("num_affected_rows", "num_updated_rows")])

    def _delete(self, t) -> DataFrame:
        target = self._target(t.this, "DELETE FROM")
        where = t.args.get("where")
        m = target.delete(self._sql(where.this) if where is not None else None)
        return _frame(self.spark, m, [("num_affected_rows", "num_deleted_rows")])

    def _insert_target(self, t):
        _, exp = _sqlglot()
        table = t.this.this if isinstance(t.this, exp.Schema) else t.this
        if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
            return None
        path = _path_of(self.spark, table)
        return None if path is None else (table, path)

    def _insert(self, t) -> DataFrame:
        _, exp = _sqlglot()
        _, path = self._insert_target(t)
        query = t.expression.copy()
        literal_rows = isinstance(query, exp.Values)
        if isinstance(query, exp.Values):
            query = exp.select("*").from_(exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier("v"))))
        self._rewrite_reads(query)
        df = self.spark.sql(query.sql(dialect="spark"))
        table = LakelogTable.forPath(self.spark, path)
        schema, arrow_schema = table.toDF().schema, table._table().schema
        if isinstance(t.this, exp.Schema):
            names = [c.name for c in t.this.expressions]
            if len(names) != len(df.columns):
                raise SqlError(f"INSERT names {len(names)} column(s) but the query gives {len(df.columns)}")
        else:  # by position, as Spark inserts: the table's column names
            names = schema.names
            if len(names) != len(df.columns):
                raise SqlError(f"the table has {len(names)} column(s) but the query gives {len(df.columns)}; name the columns")
        types = {f.name.lower(): f.dataType for f in schema.fields}
        arrow_types = {f.name.lower(): f.type for f in arrow_schema}
        df = df.toDF(*names)
        # As write_table stores data (Spark's cast would truncate a double into a bigint and match struct
        # fields by position): the values' types must fit the columns', a VALUES list's literals by value;
        # then struct fields go by name and leaves are cast (e.g. an untyped NULL).
        columns = []
        for n, own in zip(names, [f.dataType for f in df.schema.fields]):
            if n.lower() not in types:
                columns.append(df_col(n))  # (the write refuses a column the table lacks, naming it)
                continue
            target = types[n.lower()]
            checked_type(df_col(n), own, n, arrow_types[n.lower()], target, what="INSERT", text=f"{n} (VALUES)" if literal_rows else n,
                         literals=df if literal_rows else None,
                         cast_hint=f"Cast it in the statement to say how to convert it: CAST(... AS {target.simpleString()})")
            columns.append(by_name(df_col(n), own, target).cast(target).alias(n))
        df = df.select(*columns)
        df.write.format(PROVIDER).mode("overwrite" if t.args.get("overwrite") else "append").save(path)
        return self.spark.createDataFrame([], "num_affected_rows long")


class _Command:
    """The Delta commands sqlglot does not parse, read token by token from its tokenizer."""

    def __init__(self, spark: SparkSession, text: str, tokens: list):
        self.spark, self.text, self.tokens, self.i = spark, text, tokens, 0

    # ------------------------------------------------------------ tokens
    def _peek(self, k: int = 0):
        return self.tokens[self.i + k] if self.i + k < len(self.tokens) else None

    def _error(self, expected: str) -> SqlError:
        tok = self._peek()
        where = f"line {tok.line}, column {tok.col}, at {tok.text!r}" if tok is not None else "the end of the statement"
        return SqlError(f"cannot parse the statement: expected {expected} at {where}")

    def _word(self, *words: str, optional: bool = False) -> str | None:
        tok = self._peek()
        if tok is not None and tok.text.upper() in words:
            self.i += 1
            return tok.text.upper()
        if optional:
            return None
        raise self._error(" or ".join(words))

    def _table(self) -> str:
        """A table reference (``lakelog.`path```, ``db.name``, ``name``) up to the next keyword; its path."""
        start = self.i
        parts = []
        while True:  # name ( . name )*
            tok = self._peek()
            if tok is None or tok.text in (".", "(", ")", ","):
                break
            parts.append(tok)
            self.i += 1
            if self._peek() is None or self._peek().text != ".":
                break
            self.i += 1
        if not parts:
            raise self._error("a table name")
        sqlglot, exp = _sqlglot()
        text = ".".join(f"`{p.text}`" if p.token_type.name in ("IDENTIFIER", "STRING") or not p.text.isidentifier() else p.text for p in parts)
        try:
            table = sqlglot.parse_one(text, read="spark", into=exp.Table)
        except sqlglot.errors.ParseError:
            self.i = start
            raise self._error("a table name") from None
        return _lakelog_path(self.spark, table, self.tokens[0].text.upper())

    def _number(self) -> float:
        tok = self._peek()
        if tok is None or tok.token_type.name != "NUMBER":
            raise self._error("a number")
        self.i += 1
        return float(tok.text)

    def _literal(self) -> tuple[str, str]:
        tok = self._peek()
        if tok is None or tok.token_type.name not in ("NUMBER", "STRING"):
            raise self._error("a version number or a quoted timestamp")
        self.i += 1
        return tok.token_type.name, tok.text

    def _end(self) -> None:
        if self._peek() is not None:
            raise self._error("the end of the statement")

    # ------------------------------------------------------------ commands
    def run(self) -> DataFrame:
        first = self._word("RESTORE", "OPTIMIZE", "VACUUM", "DESCRIBE")
        return {"RESTORE": self._restore, "OPTIMIZE": self._optimize, "VACUUM": self._vacuum, "DESCRIBE": self._detail}[first]()

    def _detail(self) -> DataFrame:
        self._word("DETAIL")
        path = self._table()
        self._end()
        return LakelogTable.forPath(self.spark, path).detail()

    def _restore(self) -> DataFrame:
        self._word("TABLE", optional=True)
        path = self._table()
        self._word("TO")
        kind = self._word("VERSION", "TIMESTAMP")
        self._word("AS")
        self._word("OF")
        literal_kind, value = self._literal()
        self._end()
        t = LakelogTable.forPath(self.spark, path)
        if kind == "VERSION":
            if literal_kind != "NUMBER" or not value.isdigit():
                raise SqlError(f"RESTORE ... TO VERSION AS OF takes a version number, not {value!r}")
            return t.restoreToVersion(int(value))
        return t.restoreToTimestamp(value)

    def _optimize(self) -> DataFrame:
        path = self._table()
        filters = None
        if self._word("WHERE", optional=True):
            start = self.i
            while self._peek() is not None and self._peek().text.upper() != "ZORDER":
                self.i += 1
            if self.i == start:
                raise self._error("a condition on partition columns")
            filters = _partition_filters(self.text[self.tokens[start].start:self.tokens[self.i - 1].end + 1])
        columns: list[str] = []
        if self._word("ZORDER", optional=True):
            self._word("BY")
            paren = self._word("(", optional=True)
            while True:
                tok = self._peek()
                if tok is None or tok.text in (")", ","):
                    raise self._error("a column name")
                columns.append(tok.text)
                self.i += 1
                if not self._word(",", optional=True):
                    break
            if paren:
                self._word(")")
        self._end()
        builder = LakelogTable.forPath(self.spark, path).optimize().where(filters)
        return builder.executeZOrderBy(*columns) if columns else builder.executeCompaction()

    def _vacuum(self) -> DataFrame:
        import lakelog

        path = self._table()
        hours = None
        if self._word("RETAIN", optional=True):
            hours = self._number()
            self._word("HOURS")
        dry = bool(self._word("DRY", optional=True))
        if dry:
            self._word("RUN")
        self._end()
        deleted = lakelog.Table(path).vacuum(retention_hours=hours, dry_run=dry)
        return self.spark.createDataFrame([(p,) for p in deleted], "path string")


_COMPARISONS = {"EQ": "=", "NEQ": "!=", "GT": ">", "GTE": ">=", "LT": "<", "LTE": "<="}


def _partition_filters(text: str) -> list[list[tuple]]:
    """``OPTIMIZE ... WHERE``'s condition as DNF filters (``[[(column, op, value), ...], ...]``): ANDs
    and ORs of comparisons and IN lists between a column and literals, as Delta allows there (partition
    columns only, which optimize checks)."""
    sqlglot, exp = _sqlglot()
    try:
        tree = sqlglot.parse_one(text, read="spark")
    except sqlglot.errors.ParseError as e:
        raise SqlError(f"cannot parse the OPTIMIZE condition {text!r}: {e}") from None

    def value(node):
        if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
            return -value(node.this)
        if not isinstance(node, exp.Literal):
            raise SqlError(f"OPTIMIZE ... WHERE compares partition columns with literals, not {node.sql(dialect='spark')}")
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
                       f"not {node.sql(dialect='spark')}")

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

"""``INSERT INTO|OVERWRITE [TABLE] t [PARTITION (spec)] [(columns) | BY NAME] {VALUES ... | query}`` and
``INSERT INTO t REPLACE WHERE predicate query`` on lakelog tables, as one ``format("lakelog")`` write.

Columns match the table's by position (the table's columns, static partition columns left out), by the
column list, or by name (``BY NAME``); columns the statement does not give are filled by the table
(NULL, their default, generated or identity values). A static partition value (``PARTITION (p='b')``)
fills its column; with OVERWRITE it also says what is replaced (``p = 'b'``), unless the session's
``spark.sql.sources.partitionOverwriteMode`` is dynamic, which replaces the partitions the rows hold.
``REPLACE WHERE`` replaces the rows the predicate selects, and every row written must satisfy it.
Values meet the columns by Spark's store assignment (``spark_ext.schema.assignments``), as a Spark INSERT
does: a type Spark does not store is refused before any job, a number is cast to a number column
(``2.5`` into a bigint is 2; out of range fails the job), and struct fields go by position (by name
with ``BY NAME``). A static partition value is the text Spark's parser keeps, cast to its column's type.
"""

from __future__ import annotations

import json

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

import lakelog
from lakelog.table_features.row_rules import DEFAULT_KEY, GENERATION_KEY

from ..schema.assignments import ansi_cast, rule, store
from ..table import LakelogTable
from .reads import Scope
from .syntax import SqlError, refuse_args, spark_dialect, spark_sql, sqlglot
from .tables import PROVIDER, path_of

SESSION_MODE = "spark.sql.sources.partitionOverwriteMode"


def insert_target(spark: SparkSession, tree):
    """(table node, path) when an INSERT writes into a lakelog table, else None."""
    _, exp = sqlglot()
    table = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
    if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
        return None
    path = path_of(spark, table)
    return None if path is None else (table, path)


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class _Columns:
    """The target table's columns: names (case-insensitive lookup), Spark types, partition columns and
    what fills the columns an INSERT leaves out."""

    def __init__(self, spark: SparkSession, path: str):
        table = lakelog.Table(path)
        self.names = list(table.schema.names)
        self.by_lower = {n.lower(): n for n in self.names}
        self.partitions = {c.lower() for c in table.partition_columns}
        self.arrow = {f.name: f.type for f in table.schema}
        self.types = {f.name: f.dataType for f in LakelogTable.forPath(spark, path).toDF().schema.fields}
        fields = json.loads(table.metadata.schema_string)["fields"]
        self.meta = {f["name"]: f.get("metadata") or {} for f in fields}

    def resolve(self, name: str, what: str) -> str:
        found = self.by_lower.get(name.lower())
        if found is None:
            raise SqlError(f"{what}: the table has no column {name!r} (columns: {self.names})")
        return found


def run_insert(spark: SparkSession, scope: Scope, tree) -> DataFrame:
    _, exp = sqlglot()
    refuse_args(tree, {"this", "expression", "overwrite", "by_name", "where"}, "INSERT")
    table, path = insert_target(spark, tree)
    refuse_args(table, {"this", "db", "catalog", "partition"}, "INSERT")
    overwrite, by_name, where = bool(tree.args.get("overwrite")), bool(tree.args.get("by_name")), tree.args.get("where")
    listed = [c.name for c in tree.this.expressions] if isinstance(tree.this, exp.Schema) else None
    spec = table.args.get("partition")
    what = "INSERT OVERWRITE" if overwrite else "INSERT INTO"
    if where is not None:
        what = "INSERT INTO ... REPLACE WHERE"
        if overwrite or listed is not None or by_name or spec is not None:
            raise SqlError("REPLACE WHERE goes with INSERT INTO t REPLACE WHERE <predicate> <query> (no OVERWRITE, PARTITION, column list or BY NAME)")
    if listed is not None and by_name:
        raise SqlError(f"{what}: give a column list or BY NAME, not both")
    cols = _Columns(spark, path)
    static, dynamic, texts = _partition_spec(spec, cols, what)
    query = tree.expression
    if isinstance(query, exp.Values):
        query = _fill_defaults(query, _value_targets(cols, listed, static), cols, what)
    df = scope.query(query)
    if listed is not None:
        targets = [cols.resolve(c, what) for c in listed]
        if len({t.lower() for t in targets}) != len(targets):
            raise SqlError(f"{what}: the column list names a column twice")
    elif by_name:
        targets = [cols.resolve(c, f"{what} BY NAME") for c in df.columns]
        if len({t.lower() for t in targets}) != len(targets):
            raise SqlError(f"{what} BY NAME: the query gives a column twice ({df.columns})")
    else:  # by position, as Spark inserts: the table's columns but the static partition ones
        targets = [n for n in cols.names if n not in static]
    clash = [t for t in targets if t in static]
    if clash:
        raise SqlError(f"{what}: column(s) {clash} get a static value in PARTITION and cannot also be given by the query")
    missing_dynamic = [c for c in dynamic if c not in targets]
    if missing_dynamic:
        raise SqlError(f"{what}: dynamic partition column(s) {missing_dynamic} must be among the columns the query gives")
    if len(targets) != len(df.columns):
        how = "names" if listed is not None else "expects"
        raise SqlError(f"{what}: the statement {how} {len(targets)} column(s) ({targets}) but the query gives {len(df.columns)}"
                       + ("; name the columns, or use BY NAME" if listed is None and not by_name else ""))
    shown = _value_texts(query, df.columns)
    df = df.toDF(*[f"__c{i}" for i in range(len(targets))])
    values = [(t, F.col(f"__c{i}"), shown[i], False) for i, t in enumerate(targets)]
    # Spark's parser keeps a static partition value as text, cast to the column's type (ANSI).
    values += [(c, F.lit(texts[c]) if c in texts else F.expr(v), v, c in texts) for c, v in static.items()]
    df = _fit(spark, df, values, cols, what, by_position=not by_name)
    writer = df.write.format(PROVIDER)
    if where is not None:
        from lakelog.table_features.table_expressions import to_engine_sql

        writer = writer.mode("overwrite").option("replaceWhere", to_engine_sql(spark_sql(where), "REPLACE WHERE predicate"))
    elif overwrite:
        writer = writer.mode("overwrite")
        dynamic_mode = str(spark.conf.get(SESSION_MODE, "static")).strip().lower() == "dynamic"
        if cols.partitions and dynamic_mode:
            writer = writer.option("partitionOverwriteMode", "dynamic")
        elif static:
            writer = writer.option("replaceWhere", _static_predicate(static))
        else:
            writer = writer.option("partitionOverwriteMode", "static")
    else:
        writer = writer.mode("append")
    writer.save(path)
    return spark.createDataFrame([], "num_affected_rows long")


def _value_texts(query, names: list[str]) -> list[str]:
    """How messages show the query's columns: the one VALUES row's items, a SELECT's expressions, else
    the column names."""
    _, exp = sqlglot()
    items = None
    if isinstance(query, exp.Values) and len(query.expressions) == 1:
        items = query.expressions[0].expressions
    elif isinstance(query, exp.Select) and not any(isinstance(e, exp.Star) for e in query.expressions):
        items = [e.this if isinstance(e, exp.Alias) else e for e in query.expressions]
    if items is None or len(items) != len(names):
        return names
    return [spark_sql(e) for e in items]


def _partition_spec(spec, cols: _Columns, what: str) -> tuple[dict[str, str], list[str], dict[str, str | None]]:
    """({column: value as Spark SQL} of the static partition values, [dynamic partition columns],
    {column: the value as the text Spark's parser keeps of a constant (None: NULL)})."""
    _, exp = sqlglot()
    static: dict[str, str] = {}
    dynamic: list[str] = []
    texts: dict[str, str | None] = {}
    if spec is None:
        return static, dynamic, texts
    refuse_args(spec, {"expressions"}, f"{what}, PARTITION")
    for item in spec.expressions:
        if isinstance(item, exp.EQ) and isinstance(item.this, exp.Column):
            name, value = item.this.name, item.expression
            if not isinstance(value, (exp.Literal, exp.Null, exp.Boolean)) and not (
                    isinstance(value, exp.Neg) and isinstance(value.this, exp.Literal)) and not isinstance(value, exp.Cast):
                raise SqlError(f"{what}: PARTITION takes literal values, not {spark_sql(value)}")
            column = cols.resolve(name, f"{what}, PARTITION")
            static[column] = spark_sql(value)
            if isinstance(value, exp.Null):
                texts[column] = None
            elif isinstance(value, (exp.Literal, exp.Boolean)):
                texts[column] = value.this if value.is_string else spark_sql(value)
            elif isinstance(value, exp.Neg):
                texts[column] = "-" + spark_sql(value.this)
        elif isinstance(item, exp.Column):
            column = cols.resolve(item.name, f"{what}, PARTITION")
            dynamic.append(column)
        else:
            raise SqlError(f"{what}: PARTITION takes column = value or column, not {spark_sql(item)}")
        if column.lower() not in cols.partitions:
            raise SqlError(f"{what}: PARTITION names {column!r}, which is not a partition column of the table "
                           f"(partition columns: {sorted(cols.partitions) or 'none'})")
    named = list(static) + dynamic
    if len({n.lower() for n in named}) != len(named):
        raise SqlError(f"{what}: PARTITION names a column twice")
    return static, dynamic, texts


def _static_predicate(static: dict[str, str]) -> str:
    """The replaceWhere predicate (DuckDB SQL) of static partition values."""
    from lakelog.table_features.table_expressions import to_engine_sql

    terms = [f"{_q(c)} IS NULL" if v.upper() == "NULL" else f"{_q(c)} = {v}" for c, v in static.items()]
    return to_engine_sql(" AND ".join(terms), "PARTITION values")


def _value_targets(cols: _Columns, listed: list[str] | None, static: dict[str, str]) -> list[str | None]:
    if listed is not None:
        return [cols.by_lower.get(c.lower()) for c in listed]
    return [n for n in cols.names if n not in static]


def _fill_defaults(values, targets: list[str | None], cols: _Columns, what: str):
    """VALUES with each DEFAULT keyword replaced by its column's default (NULL when it has none)."""
    sg, exp = sqlglot()
    values = values.copy()
    for row in values.expressions:
        for i, item in enumerate(row.expressions):
            if not _is_default(item):
                continue
            column = targets[i] if i < len(targets) else None
            if column is None:
                continue  # (the arity error follows)
            meta = cols.meta.get(column, {})
            if GENERATION_KEY in meta or "delta.identity.start" in meta:
                raise SqlError(f"{what}: DEFAULT for generated or identity column {column!r}; leave the column out of the column list instead")
            text = meta.get(DEFAULT_KEY)
            item.replace(sg.parse_one(f"CAST(({text}) AS {cols.types[column].simpleString()})", read=spark_dialect()) if text is not None else exp.Null())
    return values


def _is_default(item) -> bool:
    """Whether a VALUES item is the DEFAULT keyword."""
    _, exp = sqlglot()
    if isinstance(item, exp.Var):
        return item.name.upper() == "DEFAULT"
    if isinstance(item, exp.Column) and not item.table and isinstance(item.this, exp.Identifier):
        return not item.this.quoted and item.name.upper() == "DEFAULT"
    return False


def _fit(spark: SparkSession, df: DataFrame, values: list[tuple[str, Column, str, bool]], cols: _Columns, what: str,
         by_position: bool) -> DataFrame:
    """The rows to write: each value (column, value, its text, whether it is a static partition value's
    text) converted for its column by Spark's store assignment (``spark_ext.schema.assignments``: refused
    types before any job, struct fields by position unless ``by_position`` is false), a static
    partition value's text by Spark's ANSI cast."""
    staged = df.select(*[v.alias(f"__v{i}") for i, (_, v, _, _) in enumerate(values)])
    how = rule(spark, what, by_position=by_position)
    out = []
    for i, (column, _, text, partition_text) in enumerate(values):
        value, own, target = F.col(f"__v{i}"), staged.schema.fields[i].dataType, cols.types[column]
        if partition_text:
            out.append(ansi_cast(spark, value, target, column, overflow=False).alias(column))
        else:
            out.append(store(value, own, target, column, how, text).alias(column))
    return staged.select(*out)

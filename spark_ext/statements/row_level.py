"""``UPDATE``, ``DELETE FROM`` and ``MERGE INTO`` on lakelog tables, run as ``LakelogTable``'s.

A target alias (``UPDATE t AS e ... WHERE e.id = 1``) qualifies the target's columns; UPDATE and DELETE
run on the table unaliased, so those references lose the qualifier (as Spark resolves them: the first
part names the alias when the second names a column). An assignment to a struct field (``SET s.a = 42``)
becomes one of the whole struct, as Delta builds it: ``named_struct`` of every field, the assigned ones
new and the others as they were (a NULL struct becomes a struct of NULLs but the assigned fields).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

import lakelog

from ..table import LakelogTable
from .reads import Scope
from .syntax import SqlError, refuse_args, spark_dialect, spark_sql, sqlglot
from .tables import is_path, lakelog_path

TARGET_ALIAS = "__lakelog_target"  # (a path target without an alias: struct assignments need a name for it)


def frame(spark: SparkSession, metrics: dict[str, Any], keys: list[tuple[str, str]]) -> DataFrame:
    row = tuple(int(metrics.get(src, 0) or 0) for _, src in keys)
    return spark.createDataFrame([row], ", ".join(f"{name} long" for name, _ in keys))


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _parts(node) -> list[str]:
    """The names of a column reference (``e.s.a`` -> ["e", "s", "a"])."""
    _, exp = sqlglot()
    if isinstance(node, exp.Column):
        return [p.name for p in node.parts]
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Identifier):
        return _parts(node.this) + [node.expression.name]
    raise SqlError(f"an assignment sets a column or a struct field, not {spark_sql(node)}")


class Target:
    """The table a row-level statement changes: its path, schema and the names that qualify its columns."""

    def __init__(self, spark: SparkSession, node, what: str):
        _, exp = sqlglot()
        refuse_args(node, {"this", "db", "catalog", "alias"}, what)
        alias = node.args.get("alias")
        if alias is not None and alias.args.get("columns"):
            raise SqlError(f"{what}: a target alias takes no column list")
        self.spark, self.node, self.what = spark, node, what
        self.path = lakelog_path(spark, node, what)
        self.schema: pa.Schema = lakelog.Table(self.path).schema
        self.alias = node.alias or None
        # the names a column reference may be qualified with
        self.qualifiers = {self.alias.lower()} if self.alias else ({node.name.lower()} if not is_path(node) else set())
        self.columns = {n.lower(): n for n in self.schema.names}

    def table(self, aliased: bool) -> LakelogTable:
        t = LakelogTable.forPath(self.spark, self.path)
        if not aliased:
            return t
        return t.alias(self.alias or (self.node.name if not is_path(self.node) else TARGET_ALIAS))

    @property
    def merge_alias(self) -> str:
        return self.alias or (self.node.name if not is_path(self.node) else TARGET_ALIAS)

    def unqualified(self, parts: list[str]) -> list[str]:
        """``parts`` without a leading qualifier that names this table (when the next part is a column)."""
        if len(parts) > 1 and parts[0].lower() in self.qualifiers and parts[1].lower() in self.columns:
            return parts[1:]
        return parts

    def strip(self, expr):
        """``expr`` with its references to this table's columns unqualified (for UPDATE and DELETE, which
        run on the table unaliased); subqueries are refused, as in Delta."""
        _, exp = sqlglot()
        if expr is None:
            return None
        if any(True for _ in expr.find_all(exp.Subquery, exp.Select, exp.Exists)):
            raise SqlError(f"{self.what}: subqueries are not supported in its condition or values (nor in Delta's)")
        expr = expr.copy()
        for col in list(expr.find_all(exp.Column)):
            parts = [p.name for p in col.parts]
            rest = self.unqualified(parts)
            if rest is not parts:
                col.replace(sqlglot()[0].parse_one(".".join(_q(p) for p in rest), read=spark_dialect()))
        return expr

    def assignments(self, eqs, value, current: str | None) -> dict[str, str]:
        """``SET`` assignments as {top-level column: Spark SQL}: ``value(node)`` gives a value's text and
        ``current`` qualifies the struct fields a struct assignment keeps (None: unqualified)."""
        ops: dict[tuple[str, ...], str] = {}
        for eq in eqs:
            parts = self.unqualified(_parts(eq.this))
            column = self.columns.get(parts[0].lower())
            if column is None:
                raise SqlError(f"{self.what}: SET names {'.'.join(parts)!r}, but the table has no column {parts[0]!r} "
                               f"(columns: {self.schema.names})")
            key = (column, *parts[1:])
            if key in ops:
                raise SqlError(f"{self.what}: {'.'.join(key)} is assigned twice")
            ops[key] = value(eq.expression)
        out: dict[str, str] = {}
        for column in dict.fromkeys(k[0] for k in ops):
            mine = {k[1:]: v for k, v in ops.items() if k[0] == column}
            if () in mine:
                if len(mine) > 1:
                    raise SqlError(f"{self.what}: {column} is assigned together with its fields {['.'.join((column,) + k) for k in mine if k]}")
                out[column] = mine[()]
            else:
                ref = (_q(current) + "." if current else "") + _q(column)
                out[column] = _struct(ref, self.schema.field(column).type, mine, column, self.what)
        return out


def _struct(ref: str, t: pa.DataType, ops: dict[tuple[str, ...], str], path: str, what: str) -> str:
    """``named_struct`` of struct ``ref`` (type ``t``) with the fields ``ops`` assigns (paths relative to it)."""
    if not pa.types.is_struct(t):
        raise SqlError(f"{what}: {path} is not a struct (it is {t}); only struct fields can be assigned by name")
    fields = [t.field(i) for i in range(t.num_fields)]
    known = {f.name.lower() for f in fields}
    unknown = sorted({k[0] for k in ops if k[0].lower() not in known})
    if unknown:
        raise SqlError(f"{what}: struct {path} has no field(s) {unknown} (fields: {[f.name for f in fields]})")
    parts = []
    for f in fields:
        mine = {k[1:]: v for k, v in ops.items() if k[0].lower() == f.name.lower()}
        inner = f"{ref}.{_q(f.name)}"
        if not mine:
            value = inner
        elif () in mine:
            if len(mine) > 1:
                raise SqlError(f"{what}: {path}.{f.name} is assigned together with its fields")
            value = mine[()]
        else:
            value = _struct(inner, f.type, mine, f"{path}.{f.name}", what)
        parts.append(f"{_string(f.name)}, {value}")
    return f"named_struct({', '.join(parts)})"


def run_update(spark: SparkSession, tree) -> DataFrame:
    refuse_args(tree, {"this", "expressions", "where"}, "UPDATE")
    target = Target(spark, tree.this, "UPDATE")
    where = tree.args.get("where")
    cond = target.strip(where.this) if where is not None else None
    sets = target.assignments(tree.expressions, lambda node: spark_sql(target.strip(node)), None)
    m = target.table(aliased=False).update(None if cond is None else spark_sql(cond), sets)
    return frame(spark, m, [("num_affected_rows", "num_updated_rows")])


def run_delete(spark: SparkSession, tree) -> DataFrame:
    refuse_args(tree, {"this", "where"}, "DELETE FROM")
    target = Target(spark, tree.this, "DELETE FROM")
    where = tree.args.get("where")
    cond = target.strip(where.this) if where is not None else None
    m = target.table(aliased=False).delete(None if cond is None else spark_sql(cond))
    return frame(spark, m, [("num_affected_rows", "num_deleted_rows")])


def run_merge(spark: SparkSession, scope: Scope, tree, evolve: bool = False) -> DataFrame:
    _, exp = sqlglot()
    refuse_args(tree, {"this", "using", "on", "whens"}, "MERGE INTO")
    target = Target(spark, tree.this, "MERGE INTO")
    builder = target.table(aliased=True).merge(scope.source(tree.args["using"]), spark_sql(tree.args["on"]))
    if evolve:
        builder = builder.withSchemaEvolution()
    alias = target.merge_alias

    def sets(eqs) -> dict[str, str]:
        return target.assignments(eqs, spark_sql, alias)

    whens = tree.args.get("whens")
    for when in (whens.expressions if whens is not None else []):
        refuse_args(when, {"matched", "source", "condition", "then"}, "MERGE INTO, WHEN clause")
        cond = when.args.get("condition")
        cond = None if cond is None else spark_sql(cond)
        then = when.args.get("then")
        by_source = bool(when.args.get("source"))
        if when.args.get("matched") or by_source:
            kind = "WHEN NOT MATCHED BY SOURCE" if by_source else "WHEN MATCHED"
            if isinstance(then, exp.Update):
                refuse_args(then, {"expressions"}, f"MERGE INTO, {kind} THEN UPDATE")
                if len(then.expressions) == 1 and isinstance(then.expressions[0], exp.Star):
                    if by_source:
                        raise SqlError("WHEN NOT MATCHED BY SOURCE THEN UPDATE SET * is not SQL: name the columns")
                    builder = builder.whenMatchedUpdateAll(cond)
                elif by_source:
                    builder = builder.whenNotMatchedBySourceUpdate(cond, sets(then.expressions))
                else:
                    builder = builder.whenMatchedUpdate(cond, sets(then.expressions))
            elif isinstance(then, exp.Var) and then.name.upper() == "DELETE":
                builder = builder.whenNotMatchedBySourceDelete(cond) if by_source else builder.whenMatchedDelete(cond)
            else:
                raise SqlError(f"a {kind} clause updates or deletes, not {spark_sql(then)}")
        else:
            if not isinstance(then, exp.Insert):
                raise SqlError(f"a WHEN NOT MATCHED clause inserts, not {spark_sql(then)}")
            refuse_args(then, {"this", "expression"}, "MERGE INTO, WHEN NOT MATCHED THEN INSERT")
            if isinstance(then.this, exp.Star):
                builder = builder.whenNotMatchedInsertAll(cond)
                continue
            if then.this is None or then.expression is None:
                raise SqlError("WHEN NOT MATCHED THEN INSERT takes (columns) VALUES (values), or *")
            columns = []
            for c in then.this.expressions:
                parts = target.unqualified(_parts(c) if not isinstance(c, exp.Identifier) else [c.name])
                if len(parts) != 1:
                    raise SqlError(f"WHEN NOT MATCHED THEN INSERT names top-level columns, not {'.'.join(parts)!r}")
                columns.append(parts[0])
            values = [spark_sql(v) for v in then.expression.expressions]
            if len(columns) != len(values):
                raise SqlError(f"INSERT names {len(columns)} column(s) but gives {len(values)} value(s)")
            builder = builder.whenNotMatchedInsert(cond, dict(zip(columns, values)))
    m = builder.execute()
    return frame(spark, {**m, "affected": m["num_target_rows_inserted"] + m["num_target_rows_updated"] + m["num_target_rows_deleted"]},
                 [("num_affected_rows", "affected"), ("num_updated_rows", "num_target_rows_updated"),
                  ("num_deleted_rows", "num_target_rows_deleted"), ("num_inserted_rows", "num_target_rows_inserted")])

"""``CREATE [OR REPLACE] TABLE [IF NOT EXISTS] ... USING lakelog`` (and ``REPLACE TABLE``), with columns
or ``AS SELECT``: every clause becomes an argument of ``lakelog.write_table`` (or of a ``format("lakelog")``
write for ``AS SELECT``), or is refused by name.

Columns take ``NOT NULL``, ``DEFAULT expr``, ``GENERATED ALWAYS AS (expr)`` and ``GENERATED ALWAYS|BY
DEFAULT AS IDENTITY [(START WITH n INCREMENT BY m)]``; the table takes ``PARTITIONED BY (cols)``,
``CLUSTER BY (cols)``, ``LOCATION``, ``TBLPROPERTIES`` and ``OPTIONS (path ...)``. As in Delta, a
CREATE TABLE naming a location that holds a table registers it, and any columns, partitioning,
clustering or properties it gives must be the table's own; CREATE OR REPLACE replaces its data and
schema in one commit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

import lakelog
from lakelog.errors import TableNotFoundError

from ..cluster.paths import driver_path
from .reads import Scope
from .syntax import SqlError, parse_expression, refuse_args, spark_sql, sqlglot
from .tables import PROVIDER, catalog_exists, is_path, location, register, table_name

_CHAR_TYPES = ("CHAR", "VARCHAR", "NCHAR", "NVARCHAR")


@dataclass
class Spec:
    """What a CREATE TABLE declares."""

    columns: list[str] = field(default_factory=list)  # Spark DDL per column (name type [NOT NULL])
    names: list[str] = field(default_factory=list)
    partition_by: list[str] | None = None
    cluster_by: list[str] | None = None
    properties: dict[str, str] | None = None
    generated: dict[str, str] = field(default_factory=dict)
    identity: dict[str, dict] = field(default_factory=dict)
    defaults: dict[str, str] = field(default_factory=dict)
    path: str | None = None

    @property
    def shapes_table(self) -> bool:
        return bool(self.columns or self.partition_by or self.cluster_by or self.properties)


def normalized(text: str) -> str:
    """An expression as sqlglot writes it (so two spellings of one expression compare equal)."""
    try:
        return spark_sql(parse_expression(text, "expression"))
    except SqlError:
        return text


def _value(node) -> str:
    _, exp = sqlglot()
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    if isinstance(node, exp.Literal):
        return str(node.this)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return f"-{node.this.this}"
    if isinstance(node, (exp.Var, exp.Identifier, exp.Column)):
        return node.name
    raise SqlError(f"a table property value is a quoted string, a number or TRUE/FALSE, not {spark_sql(node)}")


def _key(node) -> str:
    _, exp = sqlglot()
    if isinstance(node, exp.Literal) and node.is_string:
        return node.this
    if isinstance(node, exp.Dot):
        return f"{_key(node.this)}.{_key(node.expression)}"
    if isinstance(node, exp.Column):
        return ".".join(p.name for p in node.parts)
    if isinstance(node, (exp.Var, exp.Identifier)):
        return node.name
    raise SqlError(f"a table property name is a quoted string or a dotted name, not {spark_sql(node)}")


def _names(node, what: str) -> list[str]:
    _, exp = sqlglot()
    items = node.expressions if isinstance(node, (exp.Schema, exp.Tuple)) else [node]
    out = []
    for item in items:
        if isinstance(item, (exp.Identifier, exp.Column)) and not (isinstance(item, exp.Column) and item.table):
            out.append(item.name)
        else:
            raise SqlError(f"{what} takes column names, not {spark_sql(item)}")
    if any("," in n for n in out):
        raise SqlError(f"{what}: a column name with a comma cannot be used here")
    return out


def table_spec(tree, what: str) -> tuple[object, Spec]:
    """(the table node, its Spec) from a CREATE TABLE tree."""
    _, exp = sqlglot()
    schema = tree.this if isinstance(tree.this, exp.Schema) else None
    table = schema.this if schema is not None else tree.this
    spec = Spec()
    for p in (tree.args["properties"].expressions if tree.args.get("properties") is not None else []):
        if isinstance(p, exp.FileFormatProperty):
            continue
        if isinstance(p, exp.LocationProperty):
            spec.path = p.this.name
        elif isinstance(p, exp.OptionsProperty):
            for o in p.expressions:
                if _key(o.this).lower() != "path":
                    raise SqlError(f"{what}: OPTIONS takes only path here, not {spark_sql(o)} (table properties go in TBLPROPERTIES)")
                spec.path = _value(o.args["value"])
        elif isinstance(p, exp.PartitionedByProperty):
            spec.partition_by = _names(p.this, "PARTITIONED BY")
        elif isinstance(p, exp.ClusterProperty):
            spec.cluster_by = _names(exp.Tuple(expressions=p.expressions), "CLUSTER BY")
        elif type(p) is exp.Property:
            spec.properties = spec.properties or {}
            spec.properties[_key(p.this)] = _value(p.args["value"])
        elif isinstance(p, exp.SchemaCommentProperty):
            raise SqlError(f"{what}: the table COMMENT clause is not supported (lakelog keeps no table description); leave it out")
        else:
            raise SqlError(f"{what}: spark_ext.sql does not run the clause {spark_sql(p)} for lakelog tables")
    if is_path(table):
        if spec.path is not None and spec.path != table.name:
            raise SqlError(f"{what}: lakelog.`{table.name}` names the table's location; LOCATION/OPTIONS path {spec.path!r} contradicts it")
        spec.path = table.name
    for col in (schema.expressions if schema is not None else []):
        _column(col, spec, what)
    if spec.columns:
        lower = {n.lower() for n in spec.names}
        for cols, clause in ((spec.partition_by, "PARTITIONED BY"), (spec.cluster_by, "CLUSTER BY")):
            missing = [c for c in cols or [] if c.lower() not in lower]
            if missing:
                raise SqlError(f"{what}: {clause} names {missing}, which the column list lacks")
        parted = [c for c in spec.partition_by or [] if c.lower() in {n.lower() for n in spec.identity}]
        if parted:
            raise SqlError(f"{what}: cannot partition by identity column(s) {parted} (Delta does not allow it)")
    return table, spec


def _column(col, spec: Spec, what: str) -> None:
    _, exp = sqlglot()
    if not isinstance(col, exp.ColumnDef):
        raise SqlError(f"{what}: spark_ext.sql does not run {spark_sql(col)} in a column list (add CHECK constraints "
                       "after creating the table: ALTER TABLE ... ADD CONSTRAINT)")
    refuse_args(col, {"this", "kind", "constraints"}, f"{what}, column {col.name}")
    name, kind = col.name, col.args.get("kind")
    if kind is None:
        raise SqlError(f"{what}: column {name} needs a type")
    chars = [t for t in kind.find_all(exp.DataType) if t.this.name in _CHAR_TYPES]
    if chars:
        raise SqlError(f"{what}: column {name} has type {spark_sql(chars[0])}; CHAR/VARCHAR lengths are not enforced by lakelog, use STRING")
    nullable = True
    lname = name.lower()
    for c in col.args.get("constraints") or []:
        k = c.args.get("kind")
        if isinstance(k, exp.NotNullColumnConstraint):
            nullable = bool(k.args.get("allow_null"))
        elif isinstance(k, exp.DefaultColumnConstraint):
            spec.defaults[name] = spark_sql(k.this)
        elif isinstance(k, exp.ComputedColumnConstraint):
            refuse_args(k, {"this"}, f"{what}, column {name}")
            spec.generated[name] = spark_sql(k.this)
        elif isinstance(k, exp.GeneratedAsIdentityColumnConstraint):
            refuse_args(k, {"this", "start", "increment", "on_null"}, f"{what}, identity column {name}")
            if k.args.get("on_null"):
                raise SqlError(f"{what}: identity column {name}: ON NULL is not supported")
            if kind.this.name != "BIGINT":
                raise SqlError(f"{what}: identity column {name} must be BIGINT, not {spark_sql(kind)} (Delta's rule)")
            ident = {"allow_explicit_insert": not k.this}
            for arg, key in (("start", "start"), ("increment", "step")):
                node = k.args.get(arg)
                if node is not None:
                    try:
                        ident[key] = int(spark_sql(node))
                    except ValueError:
                        raise SqlError(f"{what}: identity column {name}: {arg.upper()} takes a whole number, not {spark_sql(node)}") from None
            spec.identity[name] = ident
        elif isinstance(k, exp.CommentColumnConstraint):
            raise SqlError(f"{what}: column {name}: the COMMENT clause is not supported (lakelog does not store column comments); leave it out")
        else:
            raise SqlError(f"{what}: column {name}: spark_ext.sql does not run the constraint {spark_sql(c)} on lakelog tables")
    kinds = [n for n, d in (("DEFAULT", spec.defaults), ("GENERATED ALWAYS AS", spec.generated), ("AS IDENTITY", spec.identity)) if name in d]
    if len(kinds) > 1:
        raise SqlError(f"{what}: column {name} cannot be both {' and '.join(kinds)}")
    if name in spec.identity and not nullable:
        raise SqlError(f"{what}: identity column {name}: leave NOT NULL out (every row gets a value; lakelog declares identity columns nullable)")
    if lname in {n.lower() for n in spec.names}:
        raise SqlError(f"{what}: column {name} is listed twice")
    spec.names.append(name)
    spec.columns.append(f"`{name.replace('`', '``')}` {spark_sql(kind)}{'' if nullable else ' NOT NULL'}")


def empty_data(spark: SparkSession, spec: Spec) -> pa.Table:
    """A table with no rows and the declared columns' types (identity columns held by void columns, which
    keep their place without giving values)."""
    from lakelog.schema.types import schema_from_string

    spark_schema = spark.createDataFrame([], ", ".join(spec.columns)).schema
    schema = schema_from_string(spark_schema.json())
    ident = {n.lower() for n in spec.identity}
    return pa.schema([pa.field(f.name, pa.null()) if f.name.lower() in ident else f for f in schema]).empty_table()


def _existing(path: str):
    try:
        return lakelog.Table(path)
    except TableNotFoundError:
        return None


def run_create(spark: SparkSession, scope: Scope, tree, replace_only: bool = False) -> DataFrame:
    refuse_args(tree, {"this", "kind", "replace", "exists", "expression", "properties"}, "CREATE TABLE")
    replace = bool(tree.args.get("replace"))
    what = "REPLACE TABLE" if replace_only else ("CREATE OR REPLACE TABLE" if replace else "CREATE TABLE")
    table, spec = table_spec(tree, what)
    spec.path = driver_path(spark, spec.path) if spec.path else spec.path  # as Spark qualifies a LOCATION
    query = tree.expression
    if query is not None and spec.columns:
        raise SqlError(f"{what} ... AS SELECT takes its columns from the query; leave the column list out")
    named = not is_path(table)
    in_catalog = named and catalog_exists(spark, table)
    if in_catalog and (replace or tree.args.get("exists")):
        known = location(spark, table_name(table))
        if known is None:
            raise SqlError(f"{what}: {table_name(table)} exists in the catalog and is not a lakelog table")
        if spec.path is not None and spec.path.rstrip("/") != known.rstrip("/"):
            raise SqlError(f"{what}: {table_name(table)} is the lakelog table at {known!r}, not {spec.path!r}")
        spec.path = known
    if not spec.path:
        raise SqlError(f"{what} {table_name(table)} USING lakelog needs LOCATION '<path>' (where the table's files go)")
    existing = _existing(spec.path)
    done = spark.createDataFrame([], "result string")
    if tree.args.get("exists") and (in_catalog or (not named and existing is not None)):
        return done  # IF NOT EXISTS: nothing to do
    if in_catalog and not replace:
        raise SqlError(f"{what}: table {table_name(table)} already exists; use CREATE TABLE IF NOT EXISTS or CREATE OR REPLACE TABLE")
    if replace_only and existing is None:
        raise SqlError(f"REPLACE TABLE: there is no table at {spec.path!r} to replace; use CREATE [OR REPLACE] TABLE")
    if replace and existing is not None:
        check_replace(existing, spec, what)
        _write(spark, scope, spec, query, replace=True)
    elif existing is not None:
        if query is not None:
            raise SqlError(f"{what} ... AS SELECT: a lakelog table already exists at {spec.path!r}; use INSERT INTO, or CREATE OR REPLACE TABLE")
        check_matches(spark, existing, spec, what)
    else:
        if query is None and not spec.columns:
            raise SqlError(f"there is no lakelog table at {spec.path!r}: give the new table's columns, or a query (AS SELECT ...)")
        _write(spark, scope, spec, query, replace=False)
    if named and in_catalog and replace:
        spark.sql(f"DROP TABLE {table_name(table)}")  # (entered again: Spark's entry keeps the columns it saw when entered)
    if named and (replace or not in_catalog):
        register(spark, table, spec.path)
    return done


def _write(spark: SparkSession, scope: Scope, spec: Spec, query, replace: bool) -> None:
    write_spec(spark, spec, None if query is None else scope.query(query), replace)


def write_spec(spark: SparkSession, spec: Spec, data: DataFrame | None, replace: bool) -> None:
    """Create (or, with ``replace``, replace) the table ``spec`` declares, with ``data``'s rows (None: none)."""
    kwargs = dict(partition_by=spec.partition_by, cluster_by=spec.cluster_by, configuration=spec.properties)
    if data is None:
        lakelog.write_table(
            spec.path, empty_data(spark, spec), mode="overwrite" if replace else "error", schema_mode="overwrite" if replace else None,
            generated_columns=spec.generated or None, identity_columns=spec.identity or None, column_defaults=spec.defaults or None, **kwargs,
        )
        return
    writer = data.write.format(PROVIDER)
    if spec.partition_by:
        writer = writer.option("partitionBy", ",".join(spec.partition_by))
    if spec.cluster_by:
        writer = writer.option("clusterBy", ",".join(spec.cluster_by))
    if spec.properties:
        writer = writer.option("tableProperties", json.dumps(spec.properties))
    if replace:  # (static: a session-wide dynamic partition overwrite does not apply to a replaced table)
        writer.mode("overwrite").option("overwriteSchema", "true").option("partitionOverwriteMode", "static").save(spec.path)
    else:
        writer.mode("append").option("saveMode", "error").save(spec.path)


def _user_properties(configuration: dict[str, str]) -> dict[str, str]:
    from lakelog.table_features.properties import REGISTRY

    return {k: v for k, v in configuration.items() if REGISTRY.get(k.lower()) is None or REGISTRY[k.lower()].settable}


def _canonical(properties: dict[str, str] | None) -> dict[str, str]:
    from lakelog.table_features.properties import validate_new

    return validate_new(properties or {})


def check_replace(existing, spec: Spec, what: str) -> None:
    """lakelog's overwrite keeps the table's properties and clustering, where Delta's REPLACE drops them:
    refuse a replace that would keep one the statement does not give again."""
    from lakelog.table_features.clustering import clustering_columns

    kept = sorted(set(_user_properties(existing.metadata.configuration)) - set(_canonical(spec.properties)))
    if kept:
        raise SqlError(f"{what}: the table at {spec.path!r} has properties {kept}, which Delta's REPLACE drops but lakelog would keep; "
                       "give them again in TBLPROPERTIES, or remove them first (ALTER TABLE ... UNSET TBLPROPERTIES)")
    clustered = clustering_columns(existing.snapshot)
    if clustered and not spec.cluster_by:
        raise SqlError(f"{what}: the table at {spec.path!r} is clustered by {clustered}; a replace without CLUSTER BY would keep that "
                       "clustering (Delta's drops it), so give CLUSTER BY (columns) for the new table")


def check_matches(spark: SparkSession, existing, spec: Spec, what: str) -> None:
    """As Delta: a CREATE TABLE naming an existing table may give its columns, partitioning, clustering and
    properties, and they must be the table's own."""
    from lakelog.table_features.clustering import clustering_columns
    from lakelog.table_features.row_rules import DEFAULT_KEY, GENERATION_KEY

    def differ(aspect: str, table_has, statement_says) -> SqlError:
        return SqlError(f"{what}: a lakelog table already exists at {spec.path!r} and its {aspect} differ from the statement's: "
                        f"the table has {table_has}, the statement says {statement_says}. Leave the clause out to register the table "
                        "as it is (CREATE TABLE name USING lakelog LOCATION '...'), or use CREATE OR REPLACE TABLE")

    if spec.columns:
        from lakelog.schema.types import schema_from_string

        declared = schema_from_string(spark.createDataFrame([], ", ".join(spec.columns)).schema.json())
        have = [(f.name.lower(), str(f.type), f.nullable) for f in existing.schema]
        want = [(f.name.lower(), str(f.type), f.nullable) for f in declared]
        if have != want:
            raise differ("columns", have, want)
        fields = {f["name"].lower(): f.get("metadata") or {} for f in json.loads(existing.metadata.schema_string)["fields"]}
        for key, declared_map, aspect in ((GENERATION_KEY, spec.generated, "generated columns"), (DEFAULT_KEY, spec.defaults, "column defaults")):
            have_map = {n: normalized(str(m[key])) for n, m in fields.items() if key in m}
            want_map = {n.lower(): normalized(t) for n, t in declared_map.items()}
            if have_map != want_map:
                raise differ(aspect, have_map, want_map)
        have_ident = {n: (m.get("delta.identity.start"), m.get("delta.identity.step"), m.get("delta.identity.allowExplicitInsert"))
                      for n, m in fields.items() if "delta.identity.start" in m}
        want_ident = {n.lower(): (d.get("start", 1), d.get("step", 1), d["allow_explicit_insert"]) for n, d in spec.identity.items()}
        if have_ident != want_ident:
            raise differ("identity columns", have_ident, want_ident)
    if spec.partition_by is not None and [c.lower() for c in existing.partition_columns] != [c.lower() for c in spec.partition_by]:
        raise differ("partition columns", existing.partition_columns, spec.partition_by)
    if spec.cluster_by is not None:
        clustered = clustering_columns(existing.snapshot)
        if [c.lower() for c in clustered] != [c.lower() for c in spec.cluster_by]:
            raise differ("clustering columns", clustered, spec.cluster_by)
    if spec.properties is not None:
        have = _user_properties(existing.metadata.configuration)
        if have != _canonical(spec.properties):
            raise differ("table properties", have, _canonical(spec.properties))

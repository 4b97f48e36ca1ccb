"""Which table a statement names: ``lakelog.`path``` or a catalog table whose provider is lakelog, and
the catalog entries ``spark_ext.sql`` keeps for the tables it creates."""

from __future__ import annotations

from pyspark.sql import SparkSession

from ..cluster.paths import driver_path
from .syntax import SqlError, spark_dialect, spark_sql, sqlglot

PROVIDER = "lakelog"


def table_name(table) -> str:
    """The catalog name of an ``exp.Table`` node (without alias or time travel)."""
    _, exp = sqlglot()
    bare = exp.Table(this=table.this.copy(), db=table.args.get("db"), catalog=table.args.get("catalog"))
    return spark_sql(bare)


def _qualified(spark: SparkSession, table) -> str:
    db = table.args.get("db")
    return f"{(db.name if db is not None else spark.catalog.currentDatabase()).lower()}.{table.name.lower()}"


def conf_key(spark: SparkSession, table) -> str:
    # Spark's session catalog keeps neither the LOCATION nor the options of a table whose provider is a
    # Python data source (and passes the source no path when it is read): spark_ext.sql keeps the path
    # of the tables it creates in the session's configuration, which lives as long as that catalog.
    return f"spark.lakelog.table.{_qualified(spark, table)}"


def known_names(spark: SparkSession) -> set[str]:
    """The catalog tables (``db.name``) spark_ext.sql created in this session."""
    prefix = "spark.lakelog.table."
    return {k[len(prefix):] for k in spark.conf.getAll if k.startswith(prefix)} if hasattr(spark.conf, "getAll") else set()


def catalog_exists(spark: SparkSession, table) -> bool:
    from pyspark.errors import AnalysisException

    try:
        return spark.catalog.tableExists(table_name(table))
    except AnalysisException:
        return False


def location(spark: SparkSession, name: str) -> str | None:
    """The path of the catalog table ``name`` when its provider is lakelog, else None."""
    from pyspark.errors import AnalysisException

    sg, exp = sqlglot()
    try:
        table = sg.parse_one(name, read=spark_dialect(), into=exp.Table)
    except sg.errors.ParseError:
        table = None
    if table is not None and not table.args.get("catalog"):
        known = spark.conf.get(conf_key(spark, table), None)
        if known and catalog_exists(spark, table):
            return known
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
    loc = info.get("Location")
    if not loc:
        raise SqlError(f"table {name} is a lakelog table without a LOCATION; create it with USING lakelog LOCATION '<path>'")
    return loc[len("file:"):] if loc.startswith("file:") and not loc.startswith("file://") else loc


def is_path(table) -> bool:
    """Whether ``table`` is ``lakelog.`path```."""
    db, catalog = table.args.get("db"), table.args.get("catalog")
    return db is not None and catalog is None and db.name.lower() == PROVIDER


def path_of(spark: SparkSession, table) -> str | None:
    """The path of a lakelog table reference: ``lakelog.`path``` (a relative path resolved as Spark resolves
    one, see ``spark_ext.cluster.paths``) or a catalog table using lakelog; else None."""
    _, exp = sqlglot()
    if not isinstance(table.this, exp.Identifier):
        return None
    if is_path(table):
        return driver_path(spark, table.name)
    return location(spark, table_name(table))


def lakelog_path(spark: SparkSession, table, what: str) -> str:
    path = path_of(spark, table)
    if path is None:
        raise SqlError(f"{what}: {table_name(table)} is not a lakelog table (name one as lakelog.`<path>` or a table "
                       "created USING lakelog LOCATION '<path>')")
    return path


def register(spark: SparkSession, table, path: str, if_not_exists: bool = False) -> None:
    """Enter the lakelog table at ``path`` in the catalog under ``table``'s name."""
    if_not = "IF NOT EXISTS " if if_not_exists else ""
    quoted = path.replace("\\", "\\\\").replace("'", "\\'")
    spark.sql(f"CREATE TABLE {if_not}{table_name(table)} USING {PROVIDER} LOCATION '{quoted}'")
    spark.conf.set(conf_key(spark, table), path)


def forget(spark: SparkSession, table) -> None:
    spark.conf.unset(conf_key(spark, table))

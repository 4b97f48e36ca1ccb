"""Delta's SQL for lakelog tables on a session without lakelog's catalog (one that only called
``spark_ext.register``), and for queries given ``storage_options``: what ``spark_ext.sql`` runs there.

Spark routes no row-level statement, time travel, Delta command or DDL of a Python data source's table
to the source (its catalog entry keeps neither location nor options), so ``run_statement`` parses the
statement and runs what it says through ``lakelog`` and ``LakelogTable``:

* ``CREATE [OR REPLACE] TABLE [IF NOT EXISTS]`` / ``REPLACE TABLE`` ... ``USING lakelog`` (``create``);
* ``INSERT INTO|OVERWRITE`` (``insert``); ``UPDATE``, ``DELETE FROM``, ``MERGE INTO`` (``row_level``);
* ``ALTER TABLE`` (``alter``);
* queries reading ``lakelog.`path``` or a table created ``USING lakelog``, with ``VERSION AS OF`` /
  ``TIMESTAMP AS OF``, and ``table_changes('table', start[, end])`` (``reads``);
* ``DESCRIBE HISTORY|DETAIL``, ``RESTORE``, ``OPTIMIZE``, ``VACUUM``, and ``SHOW TBLPROPERTIES``,
  ``DESCRIBE [TABLE]``, ``SHOW COLUMNS`` of lakelog tables (``commands``).

Every clause is honoured or refused with ``SqlError`` naming it; any other statement that names a
lakelog table is refused, and a statement naming none goes to ``spark.sql`` unchanged.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from .syntax import SqlError, Tokens, parse, spark_sql, sqlglot, tokenize

__all__ = ["run_statement", "SqlError"]


def run_statement(spark: SparkSession, statement: str, storage_options: dict | None = None) -> DataFrame:
    """Run one SQL statement on ``spark`` as this module says (``spark_ext.sql`` checked its arguments and
    registered ``format("lakelog")``)."""
    text = statement.strip().rstrip(";").rstrip()
    tokens = tokenize(text)
    words = [t.text.upper() for t in tokens[:4]]
    if storage_options:
        return _query(spark, text, words, storage_options)
    from .commands import catalog_statement, is_command, run_command

    if is_command(words):
        return run_command(spark, text, tokens)
    if words[:2] == ["ALTER", "TABLE"]:
        return _alter(spark, text, tokens)
    if words[:1] in (["SHOW"], ["DESCRIBE"], ["DESC"]):
        answer = catalog_statement(spark, text, tokens)
        if answer is not None:
            return answer
    for head, clause in ((["CONVERT", "TO", "DELTA"], "CONVERT TO DELTA (use lakelog.convert(path))"), (["GENERATE"], "GENERATE"),
                         (["REORG"], "REORG TABLE"), (["SHOW", "PARTITIONS"], "SHOW PARTITIONS")):
        if words[:len(head)] == head and _names_lakelog_table(spark, tokens):
            raise SqlError(f"spark_ext.sql does not run {clause} on lakelog tables")
    evolve = replace_only = False
    if words == ["MERGE", "WITH", "SCHEMA", "EVOLUTION"]:  # (Delta's MERGE WITH SCHEMA EVOLUTION INTO, which sqlglot does not read)
        evolve, text = True, "MERGE" + text[tokens[3].end + 1:]
    elif words[:2] == ["REPLACE", "TABLE"]:
        replace_only, text = True, "CREATE OR REPLACE" + text[tokens[0].end + 1:]
    return _run(spark, text, parse(text), evolve, replace_only)


def _run(spark: SparkSession, text: str, tree, evolve: bool, replace_only: bool) -> DataFrame:
    from .create import run_create
    from .insert import insert_target, run_insert
    from .reads import Scope, reads_lakelog
    from .row_level import run_delete, run_merge, run_update
    from .tables import PROVIDER, forget, is_path, path_of

    _, exp = sqlglot()
    scope = Scope(spark)
    try:
        if isinstance(tree, exp.Merge):
            return run_merge(spark, scope, tree, evolve)
        if isinstance(tree, exp.Update):
            return run_update(spark, tree)
        if isinstance(tree, exp.Delete):
            return run_delete(spark, tree)
        if isinstance(tree, exp.Insert) and insert_target(spark, tree) is not None:
            return run_insert(spark, scope, tree)
        if isinstance(tree, exp.Create) and str(tree.args.get("kind") or "").upper() == "TABLE":
            target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
            provider = _provider(tree)
            if provider == PROVIDER or (provider is None and isinstance(target, exp.Table) and is_path(target)):
                return run_create(spark, scope, tree, replace_only)
            if isinstance(target, exp.Table) and is_path(target):
                raise SqlError(f"CREATE TABLE lakelog.`<path>` makes a lakelog table: USING {provider} contradicts it")
        if replace_only:
            raise SqlError("REPLACE TABLE replaces lakelog tables only here (USING lakelog)")
        if isinstance(tree, exp.Drop) and str(tree.args.get("kind") or "").upper() == "TABLE":
            for table in tree.args.get("tables") or []:
                if is_path(table):
                    raise SqlError("DROP TABLE lakelog.`<path>`: a path table has no catalog entry to drop (its files stay where they are)")
                forget(spark, table)
            return spark.sql(text)
        if isinstance(tree, exp.Create) and str(tree.args.get("kind") or "").upper() == "VIEW" and reads_lakelog(spark, tree):
            raise SqlError("a view cannot read lakelog tables (Spark would give the source no location); query them through "
                           "spark_ext.sql, or register spark.read.format('lakelog').load(path) with createOrReplaceTempView")
        if isinstance(tree, (exp.Query, exp.Insert, exp.Create)):
            if scope.rewrite_reads(tree):
                return spark.sql(spark_sql(tree))
            return spark.sql(text)
        named = [t for t in tree.find_all(exp.Table) if isinstance(t.this, exp.Identifier) and path_of(spark, t) is not None]
        if named or (isinstance(tree, exp.Command) and _names_lakelog_table(spark, tokenize(text))):
            kind = tree.key.upper() if not isinstance(tree, exp.Command) else str(tree.this).upper()
            raise SqlError(f"spark_ext.sql does not run this {kind} statement on lakelog tables (Spark would run it on its catalog "
                           "entry only); see the README's SQL section for the statements it runs")
        return spark.sql(text)
    finally:
        scope.close()


def _query(spark: SparkSession, text: str, words: list[str], storage_options: dict) -> DataFrame:
    """A query whose lakelog tables are read with ``storage_options``."""
    from .reads import Scope

    _, exp = sqlglot()
    try:
        tree = parse(text)
    except SqlError:
        if words[:1] in (["SELECT"], ["WITH"], ["VALUES"], ["FROM"], ["("]):
            raise  # a query with a syntax error: say where
        tree = None  # a command sqlglot does not read
    if not isinstance(tree, exp.Query):
        raise SqlError("spark_ext.sql takes storage_options for queries only; run other statements on such tables through "
                       "LakelogTable.forPath(spark, path, storage_options) or format(\"lakelog\") with storage.<key> options")
    scope = Scope(spark, storage_options)
    try:
        return spark.sql(spark_sql(tree)) if scope.rewrite_reads(tree) else spark.sql(text)
    finally:
        scope.close()


def _provider(tree) -> str | None:
    _, exp = sqlglot()
    props = tree.args.get("properties")
    for p in (props.expressions if props is not None else []):
        if isinstance(p, exp.FileFormatProperty):
            return p.name.lower()
    return None


def _alter(spark: SparkSession, text: str, tokens: list) -> DataFrame:
    from .alter import alter_target, run_alter

    toks = Tokens(text, tokens)
    ref, path = alter_target(spark, toks)
    if path is None:
        return spark.sql(text)
    return run_alter(spark, toks, ref, path)


def _names_lakelog_table(spark: SparkSession, tokens: list) -> bool:
    """Whether a statement sqlglot does not parse names a lakelog table (``lakelog.`path``` or a catalog
    table spark_ext.sql entered)."""
    from .tables import known_names

    texts = [t.text for t in tokens]
    for i in range(len(texts) - 2):
        if texts[i].lower() == "lakelog" and texts[i + 1] == "." and tokens[i + 2].token_type.name == "IDENTIFIER":
            return True
    known = known_names(spark)
    if not known:
        return False
    db = spark.catalog.currentDatabase().lower()
    for i, t in enumerate(texts):
        if tokens[i].token_type.name == "STRING":
            continue
        name = t.lower()
        if i + 2 < len(texts) and texts[i + 1] == "." and f"{name}.{texts[i + 2].lower()}" in known:
            return True
        if f"{db}.{name}" in known:
            return True
    return False

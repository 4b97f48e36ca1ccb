"""``spark_ext.sql(spark, statement)``: Delta's SQL for lakelog tables, on Spark.

On a session built with ``spark_ext.configure`` this is ``spark.sql(statement)``: lakelog's catalog and
analysis rule run every statement (see ``spark_ext.catalog``), and lakelog's errors keep their types. On a
session without them (one that only called ``spark_ext.register``), and for queries given
``storage_options``, ``spark_ext.statements`` parses the statement and runs what it says. ``SqlError``: a
statement it cannot parse or run.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from .catalog.session import register
from .statements import SqlError, run_statement

__all__ = ["sql", "SqlError"]


def sql(spark: SparkSession, statement: str, storage_options: dict | None = None) -> DataFrame:
    """Run one SQL statement, with Delta's SQL for lakelog tables (see the module docstring); returns
    the result as a DataFrame (row-level statements: Delta's ``num_affected_rows`` and kin).
    ``storage_options``: lakelog's, for every lakelog table a query reads (e.g. on Azure or GCS, where
    Spark's workers know the store only from them); other statements refuse them."""
    if not isinstance(statement, str) or not statement.strip():
        raise SqlError(f"spark_ext.sql takes one SQL statement as a string, not {statement!r}")
    if storage_options is not None and not isinstance(storage_options, dict):
        raise SqlError(f"storage_options must be a dict of storage option name -> value, not {type(storage_options).__name__}")
    register(spark)
    from .catalog.session import is_native

    if storage_options is None and is_native(spark):
        # A session from spark_ext.configure runs every statement natively; lakelog's errors keep their types.
        from .catalog.bridge import lakelog_error

        try:
            return spark.sql(statement)
        except Exception as e:
            typed = lakelog_error(e)
            if typed is None:
                raise
            raise typed from None
    return run_statement(spark, statement, storage_options)

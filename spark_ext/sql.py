"""``spark_ext.sql(spark, statement)``: Delta's SQL for lakelog tables, on Spark (see ``spark_ext.statements``),
and ``SqlError``, what it raises for a statement it cannot parse or run."""

from .statements import SqlError, sql

__all__ = ["sql", "SqlError"]

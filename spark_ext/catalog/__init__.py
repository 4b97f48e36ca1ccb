"""lakelog tables in Spark's catalog: ``configure`` builds a session whose ``spark.sql`` and catalog know
lakelog tables by name (``session``); lakelog's JVM classes (``spark_ext.jvm``) call back into this process
(``bridge``), which answers with the table's schema (``tables``), creates and alters tables (``ddl``), and
runs Delta's commands (``commands``)."""

from .session import configure, is_native, register

__all__ = ["configure", "is_native", "register"]

"""PySpark integration: ``format("lakelog")`` through Spark's Python Data Source API;
``read(spark, path)``, a snapshot scanned by Spark's own Parquet source; and ``LakelogTable``, a
``DeltaTable``-style handle whose delete, update and merge run on Spark; ``sql(spark, statement)``, Delta's
SQL (MERGE INTO, UPDATE, DELETE, time travel, DESCRIBE HISTORY, RESTORE, ...) for lakelog tables."""

from .catalog import configure, register
from .datasource.source import LakelogDataSource
from .scan.native import read
from .sql import sql
from .table import LakelogTable

__all__ = ["LakelogDataSource", "LakelogTable", "configure", "register", "read", "sql"]

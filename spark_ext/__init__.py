"""PySpark integration: ``format("lakelog")`` through Spark's Python Data Source API;
``read(spark, path)``, a snapshot scanned by Spark's own Parquet source; and ``LakelogTable``, a
``DeltaTable``-style handle whose delete, update and merge run on Spark."""

from .datasource import LakelogDataSource, register
from .native import read
from .table import LakelogTable

__all__ = ["LakelogDataSource", "LakelogTable", "register", "read"]

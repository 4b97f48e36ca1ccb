"""PySpark integration: ``format("lakelog")`` through Spark's Python Data Source API, and
``read(spark, path)``, a snapshot scanned by Spark's own Parquet source."""

from .datasource import LakelogDataSource, register
from .native import read

__all__ = ["LakelogDataSource", "register", "read"]

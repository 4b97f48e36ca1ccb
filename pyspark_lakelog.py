"""Lets PySpark find ``format("lakelog")`` without a register call (it imports ``pyspark_*`` modules)."""

from spark_ext.datasource.source import LakelogDataSource as DefaultSource

__all__ = ["DefaultSource"]

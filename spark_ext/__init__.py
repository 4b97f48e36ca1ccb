"""PySpark integration: ``format("lakelog")`` through Spark's Python Data Source API."""

from .datasource import LakelogDataSource, register

__all__ = ["LakelogDataSource", "register"]

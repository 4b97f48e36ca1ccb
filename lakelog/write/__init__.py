"""Writing data: Parquet files (partitioned, with stats) and ``write_table`` through the one transaction path.

Modules: ``stats`` (file statistics from Parquet footers), ``files`` (``DataWriter``: the data files),
``table_metadata`` (the schema, metadata and protocol a write commits), ``plan`` (``WritePlan``,
``plan_write``, ``write_table``: the files prepared, then one commit).
"""

from .files import DataWriter, default_max_open_files, materializes_partitions
from .plan import WritePlan, discard_files, plan_write, write_table
from .table_metadata import evolved_metadata, mapped_schema, plan_protocol
from .stats import STRING_STATS_PREFIX, stats_from_parquet_metadata

__all__ = [
    "STRING_STATS_PREFIX",
    "DataWriter",
    "WritePlan",
    "default_max_open_files",
    "discard_files",
    "evolved_metadata",
    "mapped_schema",
    "materializes_partitions",
    "plan_protocol",
    "plan_write",
    "stats_from_parquet_metadata",
    "write_table",
]

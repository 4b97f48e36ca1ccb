"""Writing data: Parquet files (partitioned, with stats) and ``write_table`` through the one transaction path.

Modules: ``stats`` (file statistics from Parquet footers), ``files`` (``DataWriter``: the data files),
``plan`` (``WritePlan``, ``plan_write``, ``write_table``: schema and protocol changes and the commit).
"""

from .files import DataWriter, default_max_open_files
from .plan import WritePlan, discard_files, plan_protocol, evolved_metadata, mapped_schema, plan_write, write_table
from .stats import STRING_STATS_PREFIX, stats_from_parquet_metadata

__all__ = [
    "STRING_STATS_PREFIX",
    "DataWriter",
    "WritePlan",
    "default_max_open_files",
    "discard_files",
    "evolved_metadata",
    "mapped_schema",
    "plan_protocol",
    "plan_write",
    "stats_from_parquet_metadata",
    "write_table",
]

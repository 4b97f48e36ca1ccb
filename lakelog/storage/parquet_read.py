"""Opening Parquet files for reading: every reader of data files, change data files, checkpoints and
sidecars (and of a Parquet file the CLI writes into a table) opens them through these.

INT96 timestamps (Spark's default timestamp encoding until Spark 3, and Impala's: a Julian day and the
nanoseconds of that day) are read as microseconds, Delta's timestamp unit. pyarrow's default reads them
as nanoseconds, whose int64 holds only the years 1677 to 2262: an instant outside them (9999-12-31, a
common "no end" date) wraps around to another date (9999-12-30 becomes 1816-03-28T05:56:08.066277376),
which a cast to microseconds then refuses or a rewrite stores. Read as microseconds every INT96 value
Spark can write keeps its instant.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:  # pyarrow.dataset imports pandas: imported only where a dataset is built
    import pyarrow.dataset as ds

INT96_UNIT = "us"  # the unit INT96 timestamps are read in


def parquet_file(source: Any, **kwargs: Any) -> pq.ParquetFile:
    """``pq.ParquetFile(source, **kwargs)`` reading INT96 timestamps as microseconds."""
    return pq.ParquetFile(source, coerce_int96_timestamp_unit=INT96_UNIT, **kwargs)


def read_parquet(source: Any, columns: list[str] | None = None, filesystem: Any = None) -> pa.Table:
    """``pq.read_table`` of ``columns`` (None: all) reading INT96 timestamps as microseconds."""
    return pq.read_table(source, columns=columns, filesystem=filesystem, coerce_int96_timestamp_unit=INT96_UNIT)


def parquet_format() -> ds.ParquetFileFormat:
    """The Parquet format of pyarrow datasets, reading INT96 timestamps as microseconds."""
    import pyarrow.dataset as ds

    return ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(coerce_int96_timestamp_unit=INT96_UNIT))

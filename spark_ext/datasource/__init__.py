"""``format("lakelog")``, Spark's Python data source for lakelog tables: batch reads and writes and the
streaming sink (``source``), the streaming source (``stream_source``), the change data feed as a batch and a
stream (``change_feed``), its options (``options``), which PySpark planner asks for a reader (``planner``)
and ``DataFrameWriter.partitionBy`` for it (``partition_by``)."""

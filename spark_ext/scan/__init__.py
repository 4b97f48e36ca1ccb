"""Reading a lakelog snapshot on Spark: ``spark_ext.read``'s plan over Spark's own Parquet source (``native``)
with deletion vectors inside its scan (``deletion_vectors``), and, where Spark has no Hadoop filesystem for a
table's location, data files read by Python workers (``files``, ``python_frame``)."""

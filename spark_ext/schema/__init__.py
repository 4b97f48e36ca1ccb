"""Spark's types and values against lakelog's: collated string types (``collations``), variant columns in
PySpark's Arrow form (``variants``) and Spark's store assignment, by which the Spark paths fit a value to its
column (``assignments``)."""

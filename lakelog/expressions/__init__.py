"""Expressions over Arrow data: the SQL engine (DuckDB), read filters, and Spark's semantics for the SQL a table
stores.
"""

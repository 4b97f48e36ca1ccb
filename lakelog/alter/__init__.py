"""Changes to a table's definition that rewrite no data (Spark's ``ALTER TABLE``): table properties, columns and
CHECK constraints, one metadata commit each.
"""

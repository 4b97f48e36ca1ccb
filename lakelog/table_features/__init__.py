"""Delta's table features: the registry of every feature and what lakelog does with it, table properties, and
one module per feature lakelog implements.
"""

"""Table schemas and the values they hold: Delta's types as Arrow's and back, collated strings, geometry and
geography, variant columns, Python values as Arrow arrays, data fitted to a table's schema and assigned
values checked against their columns.
"""

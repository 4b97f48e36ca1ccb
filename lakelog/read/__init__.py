"""Reading a snapshot's data: file pruning by partition values and stats, the scan over pyarrow datasets, partition
values as typed keys, and what a data file's footer says about whether the table can read it.
"""

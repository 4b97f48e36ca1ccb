"""Row-level changes: delete, update, merge, predicate and dynamic partition overwrite.

Every operation prunes candidate files by partition values and stats, reads only those (in bounded
groups), and commits one transaction whose read set is the files it read. Files that hold touched
rows are rewritten (copy-on-write, ``rewrite.CopyOnWrite``), or, on tables with
``delta.enableDeletionVectors=true``, keep their data and get a deletion vector (merge-on-read,
``merge_on_read.MergeOnRead``). SQL predicates and expressions are evaluated by DuckDB
(``lakelog.expressions.sql``), which only these modules import.
"""

from .delete import delete
from .merge import TableMerger, merge
from .overwrite import check_predicate, checked_batches, commit_overwrite_partitions, commit_overwrite_where, overwrite_partitions, overwrite_where
from .update import update

__all__ = ["delete", "update", "merge", "TableMerger", "overwrite_where", "overwrite_partitions",
           "commit_overwrite_where", "commit_overwrite_partitions", "checked_batches", "check_predicate"]

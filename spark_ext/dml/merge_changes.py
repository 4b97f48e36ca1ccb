"""The change data feed of a MERGE on Spark (``spark_ext.dml.merge_jobs`` runs the merge and calls this).

Every row the merge changes goes into change data files written from Spark's tasks: the target rows a
matched or not-matched-by-source clause deletes (``delete``) or updates (``update_preimage``, then
``update_postimage`` with the clause's values), and the rows it inserts (``insert``: the very rows it
writes as inserts, found against every candidate file, not only the changed ones). A target row is
named by its file and row id: under merge-on-read the row id is the row's position in its file, which
rows of other files share. Change rows have the table's schema after the merge (columns and struct
fields that schema evolution adds are NULL in deletes and pre-images).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from .tasks import ACTION, FILE, KIND, ROW_ID

BEST = "__lakelog_best"  # per target row, the highest clause number applying for any of its source rows


def _as_stored(merge: Any, tgt: DataFrame) -> list[Column]:
    """The target rows' columns in the merge's output schema: a column schema evolution adds is NULL, a
    struct that gained fields has them NULL (change rows are written with the table's new schema)."""
    cols = []
    for name in merge.out_names:
        if name in merge.target_names:
            cols.append(merge._as_new(tgt, name).alias(name))
        else:
            cols.append(F.lit(None).cast(merge.types[name]).alias(name))
    return cols


def record_changes(merge: Any, files: list, cond: Column, inserted: DataFrame | None) -> None:
    """Write the change data of ``merge`` (a ``SparkMerge`` being prepared): the target rows of the
    touched ``files`` its clauses delete or update, and the rows ``inserted`` (its inserts, with KIND)."""
    codes = {action: [k for k, c in enumerate(merge.numbered) if c.action == action] for action in ("delete", "update")}
    run = merge.run
    if files and (codes["delete"] or codes["update"]):
        tgt = merge._target(files, row_id=True)
        joined = tgt.join(merge.src, cond, "left").withColumn(ACTION, merge._target_action())
        if merge.check_cardinality:  # per target row the source row a clause applies for (at most one: checked)
            best = F.max(ACTION).over(Window.partitionBy(tgt[FILE], tgt[ROW_ID]))
            joined = joined.withColumn(BEST, best).where(F.col(ACTION) == F.col(BEST))
        # (else the only matched clause is an unconditional delete: any matching source row will do)
        joined = joined.dropDuplicates([FILE, ROW_ID])
        target_cols = _as_stored(merge, tgt)
        if codes["delete"]:
            run.write_changes(joined.where(F.col(ACTION).isin(codes["delete"])).select(*target_cols), "delete")
        if codes["update"]:
            updated = joined.where(F.col(ACTION).isin(codes["update"]))
            run.write_changes(updated.select(*target_cols), "update_preimage")
            run.write_changes(merge._apply(tgt, updated).drop(KIND), "update_postimage")
    if inserted is not None:
        run.write_changes(inserted.drop(KIND), "insert")

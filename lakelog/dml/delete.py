"""DELETE: remove the rows a predicate selects (files with such rows are rewritten, or get a deletion vector)."""

from __future__ import annotations

from typing import Any

from ..storage import Storage
from .file_groups import partition_table
from .rewrite import Predicate, RowLevelOperation, compile_predicate, predicate_parameter, reads_only_partitions, run, select_positions


def delete(
    storage: Storage,
    predicate: Any = None,
    *,
    app_id: str | None = None,
    app_version: int | None = None,
    user_metadata: str | None = None,
) -> dict[str, Any]:
    """Delete the rows ``predicate`` selects (None: every row) in one ``DELETE`` commit; returns metrics."""
    op = RowLevelOperation(storage, app_id=app_id, app_version=app_version, user_metadata=user_metadata)
    return run(op, lambda op: _delete(op, predicate))


def _delete(op: RowLevelOperation, predicate: Any) -> dict[str, Any]:
    metrics = {"num_deleted_rows": 0, "num_added_files": 0, "num_removed_files": 0, "num_copied_rows": 0}
    if op.duplicate:
        return {**metrics, "version": op.snapshot.version}
    pred = compile_predicate(predicate, op.schema, op.engine)
    deleted = delete_matching(op, pred)
    op.finish()
    version = op.commit(
        "DELETE",
        {"predicate": predicate_parameter(pred.text)},
        {
            "numDeletedRows": deleted,
            "numRemovedFiles": op.num_removed_files,
            "numAddedFiles": op.num_added_files,
            "numCopiedRows": op.copied_rows,
        },
    )
    metrics.update(
        num_deleted_rows=deleted,
        num_added_files=op.num_added_files,
        num_removed_files=op.num_removed_files,
        num_copied_rows=op.copied_rows,
    )
    return {**metrics, "version": op.snapshot.version if version is None else version}


def delete_matching(op: RowLevelOperation, pred: Predicate) -> int:
    """Mark every row ``pred`` selects deleted; returns how many. Files are pruned first; a predicate on
    partition columns only removes whole files without opening them."""
    files = op.candidates(pred.prune, pred.prune_filters)
    deleted = 0
    # A predicate that reads partition columns only (at least one) has one value per file.
    by_partition = pred.sql is not None and reads_only_partitions(pred.columns, op.partition_columns)
    if pred.everything or by_partition:
        chosen = range(len(files)) if pred.everything else select_positions(op.engine, pred, partition_table(op.snapshot, files))
        for i in chosen:
            add = files[int(i)]
            deleted += op.num_rows(add)
            op.record_deleted(add, None)
            op.remove(add)
        return deleted
    for group in op.scan(files, pred.columns):
        for fi, rows in group.selected(op.engine, pred):
            content = op.record_deleted(files[fi], rows)
            op.delete_rows(files[fi], rows, content, group.counts[fi - group.first], known=group.rows_of(fi))
            deleted += len(rows)
    return deleted

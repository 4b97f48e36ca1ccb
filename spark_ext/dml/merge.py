"""MERGE on Spark with Delta's names and rules: ``LakelogTable.merge(source, condition)`` + ``when*`` clauses.

Rules (Delta's): clauses keep their order; within each kind (matched, not matched, not matched by
source) the first clause whose condition is TRUE wins (NULL is not TRUE) and only the last clause of
a kind may omit its condition. A target row matched by more than one source row fails the merge
with ``MultipleSourceMatchesError`` and nothing is committed, unless the only matched clause is an
unconditional delete. ``*All`` clauses assign columns by name; with schema evolution
(``withSchemaEvolution()`` or ``spark.databricks.delta.schema.autoMerge.enabled=true``) source
columns the table lacks are added.

Execution: ``spark_ext.dml.merge_jobs``.
"""

from __future__ import annotations

from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame

from lakelog.errors import PredicateError, UnsupportedFeatureError

from .jobs import SparkOperation
from .merge_jobs import Clause, SparkMerge

AUTO_MERGE_CONF = "spark.databricks.delta.schema.autoMerge.enabled"


def _check_assignments(values: Any, what: str) -> dict:
    if not isinstance(values, dict) or not values:
        raise PredicateError(f"{what} needs a non-empty dict of column -> Spark SQL expression or Column, not {values!r}")
    return dict(values)


class LakelogMergeBuilder:
    """A MERGE being built (``DeltaMergeBuilder``'s names): add ``when*`` clauses, then ``execute()``."""

    def __init__(self, table: Any, source: DataFrame, condition: str | Column):
        if not isinstance(source, DataFrame):
            raise PredicateError(f"merge takes a Spark DataFrame as its source, not {type(source).__name__}")
        self._table, self._source, self._condition = table, source, condition
        self._clauses: list[Clause] = []
        self._evolve = False

    def _add(self, clause: Clause) -> "LakelogMergeBuilder":
        self._clauses.append(clause)
        return self

    def whenMatchedUpdate(self, condition: str | Column | None = None, set: dict | None = None) -> "LakelogMergeBuilder":
        """Set columns of matched target rows (values over target and source columns)."""
        return self._add(Clause("matched", "update", condition, _check_assignments(set, "whenMatchedUpdate")))

    def whenMatchedUpdateAll(self, condition: str | Column | None = None) -> "LakelogMergeBuilder":
        """Set every table column of matched rows to the source column of the same name."""
        return self._add(Clause("matched", "update", condition, None, True))

    def whenMatchedDelete(self, condition: str | Column | None = None) -> "LakelogMergeBuilder":
        return self._add(Clause("matched", "delete", condition))

    def whenNotMatchedInsert(self, condition: str | Column | None = None, values: dict | None = None) -> "LakelogMergeBuilder":
        """Insert a row per unmatched source row (values over source columns; other columns NULL)."""
        return self._add(Clause("not_matched", "insert", condition, _check_assignments(values, "whenNotMatchedInsert")))

    def whenNotMatchedInsertAll(self, condition: str | Column | None = None) -> "LakelogMergeBuilder":
        return self._add(Clause("not_matched", "insert", condition, None, True))

    def whenNotMatchedBySourceUpdate(self, condition: str | Column | None = None, set: dict | None = None) -> "LakelogMergeBuilder":
        """Set columns of target rows no source row matches (values over target columns)."""
        return self._add(Clause("not_matched_by_source", "update", condition, _check_assignments(set, "whenNotMatchedBySourceUpdate")))

    def whenNotMatchedBySourceDelete(self, condition: str | Column | None = None) -> "LakelogMergeBuilder":
        return self._add(Clause("not_matched_by_source", "delete", condition))

    def withSchemaEvolution(self) -> "LakelogMergeBuilder":
        """Let ``*All`` clauses add the source's columns that the table lacks."""
        self._evolve = True
        return self

    def execute(self, *, txnAppId: str | None = None, txnVersion: int | None = None, userMetadata: str | None = None) -> dict:
        """Run the merge on Spark in one ``MERGE`` commit; returns ``lakelog.Table.merge``'s metrics.

        ``txnAppId``/``txnVersion`` (or Delta's session settings ``spark.databricks.delta.write.txnAppId``
        and ``txnVersion``) make it idempotent: in ``foreachBatch(lambda df, batch_id: ...)`` pass a fixed
        app id and ``batch_id``, and a batch Spark replays after a crash commits nothing.
        """
        plan = self.prepare(txnAppId=txnAppId, txnVersion=txnVersion, userMetadata=userMetadata)
        return plan.commit()

    def prepare(self, *, txnAppId: str | None = None, txnVersion: int | None = None, userMetadata: str | None = None) -> "SparkMerge":
        """Everything ``execute`` does but the commit: read, join and write the new files. ``commit()``
        (or ``abort()``) on the result finishes it."""
        if not self._clauses:
            raise PredicateError("a merge needs at least one when* clause")
        for kind in ("matched", "not_matched", "not_matched_by_source"):
            of_kind = [c for c in self._clauses if c.kind == kind]
            if any(c.condition is None for c in of_kind[:-1]):
                raise PredicateError(f"only the last {kind.replace('_', ' ')} clause of a merge may omit its condition")
        evolve = self._evolve or str(self._table._spark.conf.get(AUTO_MERGE_CONF, "false")).strip().lower() == "true"
        run = SparkOperation(self._table, (txnAppId, txnVersion), userMetadata)
        features = run.op.features
        if run.records_changes and features is not None and features.identity and any(c.action == "insert" for c in self._clauses):
            run.op.abort()
            raise UnsupportedFeatureError(
                "a LakelogTable merge that inserts into a table with identity columns and the change data feed is not supported "
                "yet (the feed would need the identity values its tasks draw); run the merge through lakelog.Table (Python)"
            )
        merge = SparkMerge(run, self._table, self._source, self._condition, list(self._clauses), evolve)
        try:
            merge.prepare()
        except AnalysisException as e:
            merge.abort()
            raise PredicateError(f"Spark cannot resolve the merge: {str(e).strip().splitlines()[0]}") from None
        except BaseException:
            merge.abort()
            raise
        return merge

"""Row-level changes executed on Spark: DELETE and UPDATE, and the machinery MERGE shares.

The driver opens one ``lakelog.dml`` row-level operation on the latest version (its snapshot, read
set and commit) and prunes candidate files with partition values and stats. Spark then reads the
candidates natively (``spark_ext.scan.native``; by Python workers where Spark has no Hadoop filesystem
for the location, ``spark_ext.scan.python_frame``), each row with the file it came from
(``_metadata.file_path``), and evaluates the condition (and an update's new values) in Spark SQL.
On copy-on-write tables one job groups the selected rows' file row indexes (and new values) by file
and its tasks rewrite those files without them (or with them updated) with lakelog's own
copy-on-write (``lakelog.dml.file_rewrites``), so copied rows never pass through Spark; each task
returns its add actions. Files every row of which goes are removed without being written. The
driver commits once: ``remove`` for the rewritten files, ``add`` for the new ones, with the files and
predicate it read for conflict checks, and the same operation, parameters and metrics as
``lakelog.Table.delete``/``update``. Files of a failed or conflicting operation are deleted when the
driver knows them; a task that died leaves an uncommitted file, which ``vacuum`` removes.

On tables with deletion vectors enabled (``lakelog.dml.rewrite.uses_deletion_vectors``) the same
operations are merge-on-read, as the Python path: one Spark job collects, per touched file, the
file row indexes (``_metadata.row_index``, physical positions; rows an existing deletion vector
deletes are never read) of the rows deleted or updated, as one compact array per file; the driver
marks them with the core's ``MergeOnRead`` (one DV file per commit, ``remove`` + ``add`` of each
touched file with the union of its old and new deleted rows, files left with no row only removed),
and executors write only the updated rows. The driver holds the deleted row indexes (8 bytes a row),
as the Python path does.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakelog.actions import AddCDCFile, AddFile, check_app_id, check_app_version, parse_app_version
from lakelog.dml.file_rewrites import TableState
from lakelog.dml.merge_on_read import MergeOnRead
from lakelog.dml.rewrite import RowLevelOperation, predicate_parameter, reads_only_partitions
from lakelog.errors import InvalidArgumentError, LakelogError, MultipleSourceMatchesError, PredicateError, UnsupportedFeatureError
from lakelog.expressions.sql_skipping import Resolver, prune_expression
from lakelog.expressions.sql import parse_expression, table_columns
from lakelog.storage import Storage
from lakelog.table_features.identity_columns import high_water_marks

from .tasks import (FILE, KIND, MATCHED_KEYS_LIMIT, ONE_MATCH_MESSAGE, REWRITE_THREADS, ROW, ROWS, RT_FILE, RT_ID, RT_ROW, RT_VERSION,
                        TRACKING, UPDATED, change_task, collected, normal_path, rewrite_task, typed_task_error, writer_task)
from ..schema.assignments import rule, store, value_types
from ..scan.native import spark_path
from ..scan.python_frame import files_frame
from ..schema.variants import from_lakelog_schema


TXN_APP_ID_CONF = "spark.databricks.delta.write.txnAppId"  # Delta's session settings for idempotent DML
TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"


def condition_text(cond: str | Column | None) -> str | None:
    """The condition as Spark SQL text (for commitInfo and pruning)."""
    if cond is None or isinstance(cond, str):
        return cond
    try:
        from pyspark import SparkContext

        return SparkContext._jvm.org.apache.spark.sql.classic.ExpressionUtils.expression(cond._jc).sql()
    except Exception:  # noqa: BLE001 - not a classic Column: its text is informative only
        return str(cond)


def engine_text(text: str) -> str | None:
    """Spark SQL text (as a Column's expression prints it: `` `id` = 2L ``) in the engine's dialect, with
    numbers as plain literals, for pruning only (a relaxation needs no exact types); None if sqlglot
    cannot read it."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(text, read="spark")
    except Exception:  # noqa: BLE001 - sqlglot's parse errors: nothing to prune with
        return None

    def plain(node):
        if isinstance(node, (exp.Cast, exp.TryCast)) and isinstance(node.this, exp.Literal) and not node.this.is_string:
            return node.this
        return node

    return tree.transform(plain).sql(dialect="duckdb")


def as_column(value: str | Column, what: str) -> Column:
    if isinstance(value, Column):
        return value
    if isinstance(value, str):
        try:
            return F.expr(value)
        except Exception as e:  # Spark's parse error
            raise PredicateError(f"cannot parse the {what} {value!r}: {_first_line(e)}") from None
    raise PredicateError(f"the {what} must be Spark SQL text or a Column, not {value!r}")


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def txn_of(spark, txn: tuple[Any, Any]) -> tuple[str | None, int | None]:
    """(app id, version) of an idempotent operation: the arguments, else Delta's session settings
    ``spark.databricks.delta.write.txnAppId``/``txnVersion``."""
    app_id, version = txn
    if app_id is None and version is None:
        app_id, version = spark.conf.get(TXN_APP_ID_CONF, None), spark.conf.get(TXN_VERSION_CONF, None)
    if (app_id is None) != (version is None):
        raise InvalidArgumentError("txnAppId and txnVersion go together: set both, or neither")
    if app_id is None:
        return None, None
    return check_app_id(app_id), check_app_version(version) if isinstance(version, int) else parse_app_version(str(version))


class SparkOperation:
    """One row-level operation run on Spark against the table's latest version."""

    def __init__(self, table: Any, txn: tuple[Any, Any] = (None, None), user_metadata: str | None = None):
        self.spark = table._spark
        self.path, self.storage_options = table._path, table._storage_options
        app_id, app_version = txn_of(self.spark, txn)
        self.storage = Storage(self.path, self.storage_options)
        self.op = RowLevelOperation(self.storage, app_id=app_id, app_version=app_version, user_metadata=user_metadata)
        self.snapshot = self.op.snapshot
        # Row tracking: rows read carry TRACKING columns; the files read, their row id bases.
        self.tracking = self.op.row_tracking
        self._bases: dict[str, tuple[int, int]] = {}
        self.records_changes = self.op.records_changes
        self.merge_on_read = isinstance(self.op.deleter, MergeOnRead)  # rows are marked in deletion vectors
        self._by_spark_path: dict[str, str] | None = None
        self.prefix = f"part-{uuid.uuid4().hex[:12]}"
        self._writes = 0  # write jobs so far
        self._marks: dict[str, int] = {}  # identity marks past the values this operation's jobs wrote so far

    # ------------------------------------------------------------ files
    def prune(self, text: str | None, resolve: Resolver | None = None) -> pc.Expression | None:
        """A relaxation of the SQL condition ``text`` on the table's columns (None: none known), for
        pruning files by partition values and stats. Text lakelog's SQL parser does not read prunes
        nothing."""
        if text is None:
            return None
        for candidate in (text, engine_text(text)):
            if candidate is None:
                continue
            try:
                return prune_expression(parse_expression(candidate), self.snapshot.schema, self.op.engine, resolve)
            except (LakelogError, ValueError, KeyError, TypeError, pa.ArrowException):
                continue
        return None

    def reads_only_partitions(self, text: str | None) -> bool:
        """Whether the SQL condition ``text`` reads partition columns only (at least one), as lakelog parses
        it: it then selects whole files (a file has one value per partition column)."""
        if text is None or not self.op.partition_columns:
            return False
        try:
            columns = table_columns(parse_expression(text), self.op.schema.names)
        except (LakelogError, ValueError, KeyError, TypeError):
            return False
        return reads_only_partitions(columns, self.op.partition_columns)

    def candidates(self, prune: pc.Expression | None) -> list[AddFile]:
        """Files that may hold rows satisfying ``prune`` (recorded as read, for conflict checks)."""
        return self.op.candidates(prune)

    def frame(self, files: list[AddFile], file_column: bool = True, row_column: bool = False) -> DataFrame:
        """The rows of ``files`` (table columns, FILE, and ROW if asked) as Spark reads them natively;
        on a row-tracking table also TRACKING (see ``carried``)."""
        rels = [a.relative_path for a in files]
        if self.tracking is None:
            return files_frame(self.spark, self.path, self.storage_options, self.storage, self.snapshot, rels, FILE if file_column else None, ROW if row_column else None)
        for a in files:
            if a.base_row_id is None or a.default_row_commit_version is None:
                raise LakelogError(f"data file {a.path!r} of a table with row tracking enabled has no baseRowId or defaultRowCommitVersion")
            self._bases[normal_path(spark_path(self.storage, a.relative_path), encoded=False)] = (a.base_row_id, a.default_row_commit_version)
        stored = dict(zip(self.tracking, (RT_ID, RT_VERSION)))
        df = files_frame(self.spark, self.path, self.storage_options, self.storage, self.snapshot, rels, FILE if file_column else RT_FILE, ROW if row_column else RT_ROW, stored)
        if file_column:
            df = df.withColumn(RT_FILE, F.col(FILE))
        if row_column:
            df = df.withColumn(RT_ROW, F.col(ROW))
        return df

    def carried(self, df: DataFrame | None) -> list[Column]:
        """The TRACKING columns of ``df`` (a ``frame``, maybe joined) to keep in a projection of rows that
        are written: copied and updated rows keep their row ids. None: new rows (nulls). Nothing on a
        table without row tracking."""
        if self.tracking is None:
            return []
        if df is None:
            return [F.lit(None).cast("string" if c == RT_FILE else "long").alias(c) for c in TRACKING]
        return [df[c].alias(c) for c in TRACKING]

    def file_rows(self, df: DataFrame) -> list[tuple[AddFile, np.ndarray]]:
        """(file, its ascending file row indexes) of the rows of ``df`` (FILE and ROW columns, ROW NULL
        for rows not wanted), one entry per file with at least one row: one Spark job, each file's
        rows collected as one array."""
        t = df.where(F.col(ROW).isNotNull()).groupBy(FILE).agg(F.collect_list(ROW).alias(ROWS)).toArrow()
        if t.num_rows == 0:
            return []
        lists = t.column(ROWS).combine_chunks()
        offsets, values = lists.offsets.to_numpy(), lists.values.to_numpy(zero_copy_only=False).astype(np.int64)
        out = []
        for i, spark_file in enumerate(t.column(FILE).to_pylist()):
            out.append((self.file_of(spark_file), np.sort(values[offsets[i]:offsets[i + 1]])))
        return out

    def mark_deleted(self, hits: list[tuple[AddFile, np.ndarray]]) -> int:
        """Mark rows deleted in the files' deletion vectors (merge-on-read); returns how many."""
        for add, rows in hits:
            self.op.delete_rows(add, rows)
        return sum(len(rows) for _, rows in hits)

    def file_of(self, spark_file: str) -> AddFile:
        """The snapshot's file that Spark read as ``spark_file``."""
        if self._by_spark_path is None:
            self._by_spark_path = {normal_path(spark_path(self.storage, rel), encoded=False): rel for rel in self.snapshot.files}
        rel = self._by_spark_path.get(normal_path(spark_file))
        if rel is None:
            raise LakelogError(f"Spark read {spark_file!r}, which is not a file of version {self.snapshot.version}")
        return self.snapshot.files[rel]

    def spark_schema(self):
        return from_lakelog_schema(self.op.schema, prefer_timestamp_ntz=True)

    # ------------------------------------------------------------ writing
    def write(self, df: DataFrame) -> list[int]:
        """Write ``df``'s rows (the table's columns, optionally KIND) as new files from Spark's tasks;
        they join this operation's commit. Returns the rows written by KIND."""
        snap = self.op.snapshot
        task = writer_task(self.path, self.storage_options, self.op.schema, self.op.partition_columns,
                            snap.properties.num_indexed_cols, self.prefix, self.op.column_mapping, self._job_features(),
                            self.op.stats_columns, self.tracking, self._bases if self.tracking is not None else None,
                            self.op.partitions_in_files)
        self._writes += 1
        try:
            files, counts = collected(df.mapInArrow(task, "add string, counts string").collect())
        except Exception as e:
            typed = typed_task_error(e)
            if typed is e:
                raise
            raise typed from None
        adds = [AddFile.from_json(f) for f in files]
        self.op.add_files(adds)
        self._drawn(adds)
        return counts or [0, 0, 0]

    def _job_features(self):
        """The operation's writer features for its next Spark job: its tasks draw identity values beyond
        those the operation's earlier jobs wrote (each job's tasks draw by partition id from one mark)."""
        features = self.op.features
        return features.drawing_from(self._marks) if features is not None and self._marks else features

    def _drawn(self, adds: list[AddFile]) -> None:
        """Note the identity values a job's ``adds`` hold, so the next job draws beyond them."""
        features = self._job_features()
        if features is not None and features.identity and adds:
            self._marks.update(high_water_marks(features.identity, adds, self.storage, self.op.column_mapping))

    def write_changes(self, df: DataFrame, kind: str) -> int:
        """Write ``df``'s rows (the table's columns) as change data files of ``kind`` from Spark's tasks
        (the change data feed); they join this operation's commit. Returns the rows written."""
        features = self.op.features if kind in ("update_postimage", "insert") else None
        if kind == "update_postimage" and features is not None and features.identity:
            self._refuse_missing_identity(df, features)
        task = change_task(self.path, self.storage_options, self.op.schema, self.op.partition_columns, self.op.column_mapping, kind,
                            features)
        rows = df.select(*[F.col(_q(n)) for n in self.op.schema.names]).mapInArrow(task, "add string, counts string").collect()
        files, counts = collected(rows)
        self.op.add_change_files([AddCDCFile.from_json(f) for f in files])
        return counts[0] if counts else 0

    def _refuse_missing_identity(self, post_images: DataFrame, features) -> None:
        """UnsupportedFeatureError when an updated row has no identity value (NULL, as another engine may
        write into a column generated by default): the rewrite draws one in its own tasks, which the change
        data feed's post-image, written by other tasks, cannot know."""
        missing = F.lit(False)
        for c in features.identity:
            missing = missing | F.col(_q(c.name)).isNull()
        if post_images.where(missing).limit(1).count():
            raise UnsupportedFeatureError(
                f"this update on Spark rewrites rows whose identity column ({', '.join(c.name for c in features.identity)}) is NULL "
                "in a table with the change data feed: the rewrite gives them values that the feed's post-images would not "
                "hold; nothing was committed. Run the update through lakelog.Table (Python), which records the values it writes")

    def rewrite_rows(self, cond: Column | None, files: list[AddFile], values: dict[str, Column] | None = None) -> tuple[int, int]:
        """Copy-on-write: rewrite the ``files`` holding rows where ``cond`` is TRUE without them, or with
        ``values`` (column -> new value) set on them, in one Spark job: Spark evaluates the condition (and
        the values) and groups the selected rows' file row indexes (and values) by file; its tasks
        rewrite those files with lakelog (``rewrite_task``). The files are removed and the new ones
        added in this operation's commit. Returns (rows deleted or updated, rows copied)."""
        if not files:
            return 0, 0
        entry = F.col(ROW) if values is None else F.struct(F.col(ROW).alias(ROW), *[v.alias(c) for c, v in values.items()])
        changed, copied, _, _ = self.rewrite_files(self.frame(files, row_column=True).where(hit_column(cond)), files, entry,
                                                None if values is None else list(values))
        return changed, copied

    def rewrite_files(self, changed: DataFrame, files: list[AddFile], entry: Column, columns: list[str] | None,
                      one_match: bool = False) -> tuple[int, int, int, set | None]:
        """Rewrite the files of ``changed`` (rows with FILE; ``entry`` per row: its ROW, or a struct of ROW,
        the new values of ``columns`` and, for a merge, UPDATE_FLAG) with lakelog's copy-on-write in
        Spark's tasks; see ``rewrite_rows``. ``files``: the files ``changed`` reads. ``one_match``: a row
        listed twice is MultipleSourceMatchesError. If the job fails, the files its finished tasks wrote
        are deleted (found by the job's own file name prefix). Returns (rows changed, rows copied, rows
        updated, the distinct MATCHED_KEYS of the entries: None past MATCHED_KEYS_LIMIT)."""
        hits = changed.groupBy(FILE).agg(F.collect_list(entry).alias(ROWS))
        # (spread round-robin over an explicit number of tasks: adaptive execution would coalesce the few
        # grouped rows into one task, and hashing a few files' paths can put them all in one)
        hits = hits.repartition(max(1, min(len(files), self.spark.sparkContext.defaultParallelism)))
        by_path = {normal_path(spark_path(self.storage, a.relative_path), encoded=False): a for a in files}
        prefix = f"{self.prefix}-rw{self._writes}"
        task = rewrite_task(TableState.of(self.snapshot, self.storage_options), by_path, REWRITE_THREADS,
                            columns, self._job_features() if columns is not None else None, one_match, prefix)
        self._writes += 1
        n_changed = n_copied = n_updated = 0
        adds = []
        keys: set | None = set()
        try:
            reported = hits.mapInArrow(task, "add string, file string, n long, updated long, keys string").collect()
        except BaseException as e:
            try:
                self._delete_written(prefix, files, columns)
            except Exception:  # noqa: BLE001 - (the job's own error is the one to report)
                pass
            if one_match and ONE_MATCH_MESSAGE in str(e):
                raise MultipleSourceMatchesError(ONE_MATCH_MESSAGE) from None
            typed = typed_task_error(e)
            if typed is e:
                raise
            raise typed from None
        for r in reported:
            if r["add"] is not None:
                adds.append(AddFile.from_json(orjson.loads(r["add"])))
            elif r["file"] is not None:
                self.op.remove(by_path[normal_path(r["file"])])  # (the task found it there)
                n_changed += r["n"]
                n_updated += r["updated"]
            else:
                n_copied += r["n"]
                if keys is not None:
                    keys = None if r["keys"] is None else keys | set(orjson.loads(r["keys"]))
        self.op.add_files(adds)
        if columns is not None:
            self._drawn(adds)
        return n_changed, n_copied, n_updated, (keys if keys is not None and len(keys) <= MATCHED_KEYS_LIMIT else None)

    def _delete_written(self, prefix: str, files: list[AddFile], columns: list[str] | None) -> None:
        """Delete the files a failed rewriting job's finished tasks wrote (no commit names them), found by
        the job's own name prefix: in the directories of the files it rewrote or, where it sets partition
        columns (rows may then move to other partitions' directories), anywhere in the table."""
        if columns is not None and set(columns) & set(self.snapshot.partition_columns):
            found = [f for f in self.storage.list_files(self.storage.root) if not f.name.startswith("_delta_log/")]
        else:
            dirs = sorted({a.relative_path.rsplit("/", 1)[0] if "/" in a.relative_path else "" for a in files})
            found = [f for d in dirs for f in self.storage.list_dir(self.storage.join(d))]
        for f in found:
            if f.name.rsplit("/", 1)[-1].startswith(prefix + "-"):
                self.storage.delete(f.path)

    # ------------------------------------------------------------ outcome
    def commit(self, operation: str, parameters: dict[str, Any], metrics: dict[str, Any]) -> int:
        version = self.op.commit(operation, parameters, metrics)
        return self.snapshot.version if version is None else version

    def run(self, body: Callable[["SparkOperation"], dict]) -> dict:
        """``body(self)``; on any error the files written so far are deleted (as the core's ``run``)."""
        try:
            out = body(self)
        except AnalysisException as e:
            self.op.abort()
            raise PredicateError(f"Spark cannot resolve the operation: {_first_line(e)}") from None
        except BaseException:
            self.op.abort()
            raise
        self.op.engine.close()
        return out


def hit_column(cond: Column | None) -> Column:
    """TRUE where the condition is TRUE; FALSE where it is FALSE or NULL (SQL three-valued logic)."""
    return F.lit(True) if cond is None else F.coalesce(cond, F.lit(False))


def hit_rows(run: SparkOperation, cond: Column | None, files: list[AddFile]) -> list[tuple[AddFile, np.ndarray]]:
    """(file, file row indexes the condition selects) for each of ``files`` with at least one such row."""
    if not files:
        return []
    df = run.frame(files, row_column=True)
    return run.file_rows(df if cond is None else df.where(hit_column(cond)))


def touched_files(run: SparkOperation, cond: Column | None, files: list[AddFile]) -> list[tuple[AddFile, int]]:
    """(file, rows the condition selects) for each of ``files`` with at least one such row."""
    if not files:
        return []
    if cond is None:
        return [(a, run.op.num_rows(a)) for a in files]
    hits = run.frame(files).where(hit_column(cond)).groupBy(FILE).count().collect()
    return [(run.file_of(r[FILE]), int(r["count"])) for r in hits]


# ---------------------------------------------------------------- DELETE

def delete(table: Any, condition: str | Column | None, txn: tuple[Any, Any] = (None, None), user_metadata: str | None = None) -> dict:
    """Delete the rows where ``condition`` is TRUE, on Spark; returns ``lakelog.Table.delete``'s metrics."""
    run = SparkOperation(table, txn, user_metadata)
    return run.run(lambda run: _delete(run, condition))


def _delete(run: SparkOperation, condition: str | Column | None) -> dict:
    op = run.op
    zero = {"num_deleted_rows": 0, "num_added_files": 0, "num_removed_files": 0, "num_copied_rows": 0}
    if op.duplicate:
        return {**zero, "version": run.snapshot.version}
    text = condition_text(condition)
    cond = None if condition is None else as_column(condition, "delete condition")
    files = run.candidates(run.prune(text))
    deleted = copied = 0
    if run.records_changes:  # the change data feed: the rows that go, from the files that hold them
        touched = [a for a, _ in touched_files(run, cond, files)]
        if touched:
            run.write_changes(run.frame(touched, file_column=False).where(hit_column(cond)), "delete")
    if run.merge_on_read and (cond is None or run.reads_only_partitions(text)):
        partial = []
        for add, n in touched_files(run, cond, files):  # every row of these files goes: they just go, as in lakelog.Table.delete
            if n >= op.num_rows(add):
                deleted += n
                op.remove(add)
            else:  # (Spark's reading of the condition may differ from lakelog's parser)
                partial.append(add)
        deleted += run.mark_deleted(hit_rows(run, cond, partial))
        files = []
    elif run.merge_on_read:
        deleted = run.mark_deleted(hit_rows(run, cond, files))
        files = []
    if cond is None:  # every row goes: the files just go, unread
        for add in files:
            deleted += op.num_rows(add)
            op.remove(add)
    else:
        gone, copied = run.rewrite_rows(cond, files)
        deleted += gone
    op.finish()
    version = run.commit(
        "DELETE",
        {"predicate": predicate_parameter(text)},
        {"numDeletedRows": deleted, "numRemovedFiles": op.num_removed_files, "numAddedFiles": op.num_added_files, "numCopiedRows": copied},
    )
    return {"num_deleted_rows": deleted, "num_added_files": op.num_added_files, "num_removed_files": op.num_removed_files,
            "num_copied_rows": copied, "version": version}


# ---------------------------------------------------------------- UPDATE

def resolve_column(name: str, names: list[str], what: str) -> str:
    """``name`` as a table column (exact, else case-insensitively as Spark resolves names)."""
    if name in names:
        return name
    folded = [n for n in names if n.lower() == str(name).lower()]
    if len(folded) == 1:
        return folded[0]
    raise PredicateError(f"{what}: column {name!r} is not in the table (columns: {names})")


def update(table: Any, condition: str | Column | None, assignments: dict | None, txn: tuple[Any, Any] = (None, None),
           user_metadata: str | None = None) -> dict:
    """Set ``assignments`` on the rows where ``condition`` is TRUE, on Spark; returns
    ``lakelog.Table.update``'s metrics."""
    if not isinstance(assignments, dict) or not assignments:
        raise PredicateError(f"update needs set: a non-empty dict of column -> Spark SQL expression or Column, not {assignments!r}")
    run = SparkOperation(table, txn, user_metadata)
    return run.run(lambda run: _update(run, condition, assignments))


def _update(run: SparkOperation, condition: str | Column | None, assignments: dict) -> dict:
    op = run.op
    zero = {"num_updated_rows": 0, "num_added_files": 0, "num_removed_files": 0, "num_copied_rows": 0}
    if op.duplicate:
        return {**zero, "version": run.snapshot.version}
    names = op.schema.names
    given = {resolve_column(c, names, "update"): e for c, e in assignments.items()}
    sets = {n: as_column(e, f"expression for column {n!r}") for n, e in given.items()}
    if op.features is not None:
        op.features = op.features.for_assignments(sets)
    text = condition_text(condition)
    cond = None if condition is None else as_column(condition, "update condition")
    types = {f.name: f.dataType for f in run.spark_schema().fields}
    # Spark's store assignment (Delta's UPDATE): refused types before any job, struct fields by name.
    how = rule(run.spark, "update")
    for (n, v), own in zip(list(sets.items()), value_types(run.spark.createDataFrame([], run.spark_schema()), list(sets.values()))):
        sets[n] = store(v, own, types[n], n, how, condition_text(given[n]))
    files = run.candidates(run.prune(text))
    updated = copied = 0
    hit = hit_column(cond)
    columns = [(F.when(hit, sets[n]).otherwise(F.col(_q(n))) if n in sets else F.col(_q(n))).alias(n) for n in names]
    if run.records_changes:  # the change data feed: each selected row before and after
        touched = [a for a, _ in touched_files(run, cond, files)]
        if touched:
            before = run.frame(touched, file_column=False).where(hit)
            run.write_changes(before, "update_preimage")
            run.write_changes(before.select(*columns), "update_postimage")
    if run.merge_on_read:
        # The selected rows are marked deleted where they are and written anew, updated; the rest stay.
        marked = hit_rows(run, cond, files)
        if marked:
            selected = run.mark_deleted(marked)
            df = run.frame([a for a, _ in marked], file_column=False).where(hit)
            updated = run.write(df.select(*columns, F.lit(UPDATED).alias(KIND), *run.carried(df)))[UPDATED]
            if updated != selected:
                raise LakelogError(
                    f"the update wrote {updated} rows but selected {selected}: the condition gave different answers in two "
                    "reads (a non-deterministic condition?); nothing was committed"
                )
    else:  # copy-on-write: the new values go to tasks that rewrite the files with lakelog
        updated, copied = run.rewrite_rows(cond, files, sets)
    op.finish()
    version = run.commit(
        "UPDATE",
        {"predicate": predicate_parameter(text)},
        {"numUpdatedRows": updated, "numRemovedFiles": op.num_removed_files, "numAddedFiles": op.num_added_files, "numCopiedRows": copied},
    )
    return {"num_updated_rows": updated, "num_added_files": op.num_added_files, "num_removed_files": op.num_removed_files,
            "num_copied_rows": copied, "version": version}


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"

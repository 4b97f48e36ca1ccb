"""The Spark jobs of a MERGE (``spark_ext.dml.merge.LakelogMergeBuilder`` builds it; the rules are there).

Execution (copy-on-write, as ``spark_ext.dml.jobs``): target files are pruned with the condition's
target-only terms and, for each ``target.k = source.k2`` term, the source's key range (and for a
partition column its set of keys); a first Spark job joins the candidates with the source, checks
that no target row is matched twice and counts, per file, the rows each clause changes. A second job
rewrites only the files with changed rows (left join with the source, clauses applied) and, in the
same job, inserts the source rows no target row matches (anti join with the candidates); executors
write the files, and the driver commits one ``MERGE`` with the metrics of ``lakelog.Table.merge``.
When every matched clause is unconditional and the schema does not evolve, the second job instead
sends only the changed rows' positions and new values, grouped by file, to tasks that rewrite the
files with lakelog's copy-on-write (``SparkOperation.rewrite_files``), and a third writes the inserts.
If moreover there are only matched clauses (and not-matched ones) and no change data feed, there is
no first job: the rewriting job's tasks check the one-match rule on each file's list of changed rows
before writing it (a row listed twice fails the job with ``MultipleSourceMatchesError``; files its
other tasks wrote are never committed) and report the rows they updated and deleted; the source's
row count comes from the job that computes its key ranges.
When the whole condition is one ``target.t = source.s`` (source keys integers or strings) and there are
inserts, the job that finds the matches (the counting job, or the rewriting job without one) also
brings back the distinct source keys that matched (up to 10,000; the counting job only when the
source has at most 5,000 distinct keys, counted approximately with its key ranges, so that none of
its aggregation buffers grows large): the inserts are then the source rows
whose key is not among them (an anti join with that small table), with no second read of the target.
The source is persisted for the operation, so every job of it sees the same rows.

On tables with deletion vectors enabled it is merge-on-read, as ``lakelog.Table.merge``: the first
job also collects, per file, the file row indexes (``_metadata.row_index``) of the target rows an
update or delete clause changes, which the driver marks deleted in deletion vectors; the second job
writes only the updated and inserted rows (no row is copied). The change data feed: ``spark_ext.dml.merge_changes``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from lakelog.schema import collations
from lakelog.errors import LakelogError, MultipleSourceMatchesError, PredicateError
from lakelog.schema.conform import added_to
from lakelog.schema.types import canonical_schema, check_column_names
from lakelog.expressions.sql import and_terms, equality_column_pairs, parse_expression
from lakelog.write import plan_protocol, evolved_metadata

from ..schema.assignments import arrow_type, rule, store, value_types
from ..schema.collations import with_collations
from .jobs import SparkOperation, as_column, condition_text, hit_column, _q
from .tasks import (ACTION, COPIED, FILE, INSERTED, KIND, MATCHED_KEYS, MATCHED_KEYS_LIMIT, ONE_MATCH_MESSAGE, ROW, ROW_ID, ROWS,
                        UPDATE_FLAG, UPDATED)
from .merge_changes import record_changes
from ..schema.variants import from_lakelog_schema, lakelog_arrow


T_MARK = "__lakelog_target"  # TRUE on every target row (NULL after an outer join: no target row)
S_MARK = "__lakelog_source"  # TRUE on every source row
KEY_SET_LIMIT = 1000  # distinct source keys of a partition column pruned as a set (beyond: a range)


@dataclass
class Clause:
    kind: str  # "matched" | "not_matched" | "not_matched_by_source"
    action: str  # "update" | "delete" | "insert"
    condition: str | Column | None = None
    assignments: dict | None = None  # column -> Spark SQL text or Column; None with all=True
    all: bool = False


def _alias_of(df: DataFrame) -> str | None:
    """The alias a DataFrame was given with ``df.alias(name)`` (None if none)."""
    try:
        plan = df._jdf.queryExecution().analyzed()
        if plan.nodeName() == "SubqueryAlias":
            return str(plan.alias())
    except Exception:
        return None
    return None


class SparkMerge:
    def __init__(self, run: SparkOperation, table: Any, source: DataFrame, condition: str | Column, clauses: list[Clause], evolve: bool):
        self.run, self.op = run, run.op
        self.spark = run.spark
        self.t_alias = table._alias
        self.s_alias = _alias_of(source)
        for name in source.columns:
            if name.startswith("__lakelog_"):
                raise PredicateError(f"source column {name!r} uses a name reserved by lakelog; rename it")
        self.source = source
        self.condition, self.text = condition, condition_text(condition)
        self.clauses, self.evolve = clauses, evolve
        self.matched = [c for c in clauses if c.kind == "matched"]
        self.nmbs = [c for c in clauses if c.kind == "not_matched_by_source"]
        self.inserts = [c for c in clauses if c.kind == "not_matched"]
        self.numbered = self.matched + self.nmbs  # clause number k: position here
        self.check_cardinality = bool(self.matched) and not (
            len(self.matched) == 1 and self.matched[0].action == "delete" and self.matched[0].condition is None
        )
        self.metrics: dict[str, Any] | None = None
        self.persisted: DataFrame | None = None
        # Spark types: the table's columns as read, and each clause's values (by ``id(clause)``, column)
        self.old_types = from_lakelog_schema(self.op.snapshot.schema, prefer_timestamp_ntz=True)
        self.own_types: dict[tuple[int, str], Any] = {}
        self.texts: dict[tuple[int, str], str] = {}

    # ------------------------------------------------------------ planning
    def _plan_schema(self) -> None:
        op = self.op
        target = list(op.schema.names)
        lower = {n.lower() for n in target}
        src_fields = {f.name: f for f in self.source.schema.fields}
        out = list(op.schema)
        if self.evolve and any(c.all for c in self.clauses):
            new = [f for n, f in src_fields.items() if n.lower() not in lower]
            if new:
                arrow_new = canonical_schema(with_collations(to_arrow_schema(StructType(new), timezone="UTC"), StructType(new)))
                out += [collations.keep(pa.field(f.name, f.type, True), f) for f in arrow_new]
        self.out_names = [f.name for f in out]
        self.target_names = target
        by_lower = {n.lower(): n for n in src_fields}
        for c in self.clauses:
            if c.all:
                computed = op.features.computable if op.features is not None else set()  # generated columns: computed
                missing = [n for n in target if n.lower() not in by_lower and n not in computed]
                if missing and not self.evolve:
                    raise PredicateError(
                        f"{c.kind.replace('_', ' ')} {c.action}All needs every table column in the source; missing: {missing}. "
                        "Add them to the source, assign columns explicitly, or use withSchemaEvolution()"
                    )
                c.assignments = {n: ("source", by_lower[n.lower()]) for n in self.out_names if n.lower() in by_lower}
            elif c.assignments is not None:
                fixed = {}
                for col, expr in c.assignments.items():
                    name = col
                    if self.t_alias and isinstance(col, str) and col.lower().startswith(self.t_alias.lower() + "."):
                        name = col[len(self.t_alias) + 1:]
                    matches = [n for n in self.out_names if n == name] or [n for n in self.out_names if n.lower() == str(name).lower()]
                    if len(matches) != 1:
                        raise PredicateError(f"merge {c.action}: column {col!r} is not in the table (columns: {self.out_names})")
                    fixed[matches[0]] = expr
                c.assignments = fixed
        fields = self._assigned_types(out)
        self.schema_changed = fields != list(op.schema)
        if self.schema_changed:
            schema = pa.schema(fields)
            check_column_names(schema, mapped=op.snapshot.column_mapping.active)
            metadata = evolved_metadata(op.snapshot, schema)
            protocol = plan_protocol(schema, op.snapshot.protocol, metadata.configuration, metadata.schema_string)
            op.evolve_schema(schema, metadata, [protocol] if protocol is not None else [])
        self.types = {f.name: f.dataType for f in from_lakelog_schema(op.schema, prefer_timestamp_ntz=True).fields}
        if op.features is not None:
            op.features = op.features.for_assignments(*(c.assignments or {} for c in self.clauses if c.action == "update"),
                                                      inserts=[c.assignments or {} for c in self.clauses if c.action == "insert"])

    def _assigned_types(self, out: list[pa.Field]) -> list[pa.Field]:
        """The fields of ``out`` once every clause's values are stored: with schema evolution, the struct
        fields the values add and the types void columns take. Checks each value by Spark's store
        assignment (``spark_ext.schema.assignments``, as Delta's MERGE) before any job and records its Spark
        type (``own_types``) and text (``texts``)."""
        tgt = self.spark.createDataFrame([], self.old_types)
        tgt = tgt.alias(self.t_alias) if self.t_alias else tgt
        src = self.source.alias(self.s_alias) if self.s_alias else self.source
        frames = {"matched": tgt.crossJoin(src), "not_matched": src, "not_matched_by_source": tgt}
        types = {f.name: f.type for f in out}
        self.rule = rule(self.spark, "MERGE", evolve=self.evolve)
        checks = []
        for c in self.clauses:
            assigned = c.assignments or {}
            exprs = {col: as_column(e, "merge expression") for col, e in assigned.items() if not isinstance(e, tuple)}
            typed = dict(zip(exprs, value_types(frames[c.kind], list(exprs.values()))))
            for col, expr in assigned.items():
                if isinstance(expr, tuple):  # a source column (of an *All clause)
                    value, text, own = self.source[_q(expr[1])], f"{self.s_alias or 'source'}.{expr[1]}", self.source.schema[expr[1]].dataType
                else:
                    value, text, own = exprs[col], condition_text(expr), typed[col]
                if self.evolve:  # (the struct fields the value brings; a void column takes its type)
                    types[col] = added_to(types[col], lakelog_arrow(pa.schema([pa.field(col, arrow_type(own))])).field(0), col)
                self.own_types[(id(c), col)], self.texts[(id(c), col)] = own, text
                checks.append((value, own, col, text))
        fields = [f.with_type(types[f.name]) for f in out]
        spark_types = {f.name: f.dataType for f in from_lakelog_schema(pa.schema(fields), prefer_timestamp_ntz=True).fields}
        for value, own, col, text in checks:  # (against the evolved types)
            store(value, own, spark_types[col], col, self.rule, text)
        return fields

    def _as_new(self, tgt: DataFrame, name: str) -> Column:
        """Target column ``name``'s rows in its type after schema evolution (struct fields it gained NULL)."""
        return store(tgt[_q(name)], self.old_types[name].dataType, self.types[name], name, self.rule, name)

    def _frames(self) -> None:
        src = self.source.withColumn(S_MARK, F.lit(True))
        self.src = src.alias(self.s_alias) if self.s_alias else src

    def _target(self, files, file_column: bool = True, row_id: bool = False) -> DataFrame:
        """The candidate files' rows; ``row_id``: with ROW_ID, a unique id per row (merge-on-read: the file
        row index, which with FILE names the row)."""
        mor = row_id and self.run.merge_on_read
        t = self.run.frame(files, file_column=file_column, row_column=mor).withColumn(T_MARK, F.lit(True))
        if mor:
            t = t.withColumnRenamed(ROW, ROW_ID)
        elif row_id:
            t = t.withColumn(ROW_ID, F.monotonically_increasing_id())
        return t.alias(self.t_alias) if self.t_alias else t

    def _value(self, expr: Any, tgt: DataFrame) -> Column:
        if isinstance(expr, tuple) and expr[0] == "source":
            return self.src[_q(expr[1])]
        return as_column(expr, "merge expression")

    def _case(self, clauses: list[Clause], first: int) -> Column:
        e = None
        for i, c in enumerate(clauses):
            hit = F.lit(True) if c.condition is None else hit_column(as_column(c.condition, "clause condition"))
            e = F.when(hit, F.lit(first + i)) if e is None else e.when(hit, F.lit(first + i))
        return F.lit(-1) if e is None else e.otherwise(F.lit(-1))

    def _target_action(self) -> Column:
        """The clause number applying to a row of a target-left join (-1: none)."""
        return F.when(F.col(S_MARK).isNotNull(), self._case(self.matched, 0)).otherwise(self._case(self.nmbs, len(self.matched)))

    # ------------------------------------------------------------ pruning
    def _resolve_target(self, ref: tuple[str, ...]) -> str | None:
        names = self.target_names
        if len(ref) == 2 and self.t_alias and ref[0].lower() == self.t_alias.lower() and ref[1] in names:
            return ref[1]
        if len(ref) == 1 and ref[0] in names and ref[0] not in self.source.columns and not self.t_alias:
            return ref[0]
        return None

    def _resolve_source(self, ref: tuple[str, ...]) -> str | None:
        cols = self.source.columns
        if len(ref) == 2 and self.s_alias and ref[0].lower() == self.s_alias.lower() and ref[1] in cols:
            return ref[1]
        if len(ref) == 1 and ref[0] in cols and ref[0] not in self.target_names:
            return ref[0]
        return None

    def _match_key(self) -> str | None:
        """The source column ``s`` when the whole condition is one ``target.t = source.s`` and ``s`` holds
        integers or strings (whose text form round-trips exactly): a source row is then matched exactly
        when its ``s`` equals that of a source row that matched (so the inserts can be found from the
        matched keys, without the target)."""
        if self.text is None or not isinstance(self.condition, str):
            return None
        try:
            tree = parse_expression(self.text)
        except Exception:
            return None
        pairs = equality_column_pairs(tree, self._resolve_target, self._resolve_source)
        if len(and_terms(tree)) != 1 or len(pairs) != 1:
            return None
        s_col = pairs[0][1]
        t = self.source.schema[s_col].dataType
        if t.typeName() == "string" and getattr(t, "collation", "UTF8_BINARY") != "UTF8_BINARY":
            return None  # (equal under a collation is not equal as text)
        return s_col if t.typeName() in ("byte", "short", "integer", "long", "string") else None

    def _keys_key(self, counting: bool) -> str | None:
        """``match_key`` (``_match_key`` where the merge inserts), where the job that finds the matches is
        to bring back the matched keys: for the counting job (whose per-file lists of keys are Spark
        aggregation buffers) only if the source has few enough distinct keys (counted with its key
        ranges) that none can grow past the limit; the rewriting tasks stop collecting past it themselves."""
        if counting and (self.source_keys is None or self.source_keys > MATCHED_KEYS_LIMIT // 2):
            return None
        return self.match_key

    def _key_ranges(self) -> list[pc.Expression]:
        """For each ``target.k = source.k2`` term of the condition: the source's keys as a bound on ``k``
        (one Spark aggregation over the source)."""
        if self.text is None or not isinstance(self.condition, str):
            return []
        try:
            tree = parse_expression(self.text)
        except Exception:
            return []
        schema = self.op.snapshot.schema
        pairs = []
        for t_col, s_col in equality_column_pairs(tree, self._resolve_target, self._resolve_source):
            tt = schema.field(t_col).type
            if not (pa.types.is_integer(tt) or pa.types.is_string(tt) or pa.types.is_large_string(tt) or pa.types.is_date(tt)):
                continue  # floats (NaN, signed zeros), timestamps (time zones) and the rest: no bound
            pairs.append((t_col, s_col, tt))
        if not pairs:
            return []
        aggs = [F.count(F.lit(1)).alias("n")]  # (the source's row count in the same job)
        key = self.match_key
        if key is not None:  # (approximate, within a few percent: it only bounds the lists of matched keys)
            aggs.append(F.approx_count_distinct(self.source[_q(key)]).alias("distinct"))
        for i, (t_col, s_col, _) in enumerate(pairs):
            c = self.source[_q(s_col)]
            aggs += [F.min(c).alias(f"lo{i}"), F.max(c).alias(f"hi{i}")]
            if t_col in self.op.partition_columns:
                aggs.append(F.slice(F.collect_set(c), 1, KEY_SET_LIMIT + 1).alias(f"set{i}"))
        row = self.persisted.agg(*aggs).collect()[0]
        self.source_rows = row["n"]
        self.source_keys = row["distinct"] if key is not None else None
        out = []
        for i, (t_col, s_col, tt) in enumerate(pairs):
            lo, hi = row[f"lo{i}"], row[f"hi{i}"]
            if lo is None:
                out.append(pc.scalar(False))  # no non-null source key: no target row matches
                continue
            f = pc.field(t_col)
            try:
                keys = row[f"set{i}"] if t_col in self.op.partition_columns else None
                if keys is not None and len(keys) <= KEY_SET_LIMIT:
                    out.append(f.isin(pa.array(keys).cast(tt)))
                else:
                    out.append((f >= pa.scalar(lo).cast(tt)) & (f <= pa.scalar(hi).cast(tt)))
            except (pa.ArrowException, TypeError, ValueError):
                continue  # source keys outside the target type: no bound from this term
        return out

    def _prune(self) -> Any:
        join = self.run.prune(self.text, self._resolve_target)
        for r in self._key_ranges():
            join = r if join is None else join & r
        candidates = join
        for c in self.nmbs:
            if candidates is None:
                break
            cond = None if c.condition is None else self.run.prune(condition_text(c.condition), self._resolve_target)
            candidates = None if cond is None else candidates | cond
        return candidates

    # ------------------------------------------------------------ running
    def prepare(self) -> None:
        op = self.op
        if op.duplicate:
            return
        self._plan_schema()
        self.persisted = self.source.persist(StorageLevel.MEMORY_AND_DISK)
        self.source = self.persisted
        self._frames()
        cond = as_column(self.condition, "merge condition")
        self.source_rows = self.source_keys = None
        self.match_key = self._match_key() if self.inserts else None
        self.matched_keys: set | None = None
        files = self.run.candidates(self._prune())
        n_src = self.source.count() if self.source_rows is None else self.source_rows
        counts = {"matched_update": 0, "matched_delete": 0, "nmbs_update": 0, "nmbs_delete": 0}
        touched = []
        written = [0, 0, 0]
        rewritten_copies = 0
        # Only matched clauses, none with a condition, and no change data to record: the rewriting job
        # finds the touched files itself and checks the one-match rule as its tasks read their lists of
        # changed rows, before they write: one pass over the candidates, not a counting pass first.
        one_pass = bool(files) and bool(self.matched) and not self.nmbs and not self.run.records_changes and self._rewrites_in_tasks()
        if files and (self.matched or self.nmbs) and not one_pass:
            touched = self._find_touched(files, cond, counts)
        in_tasks = bool(touched) and self._rewrites_in_tasks()
        parts = []
        if one_pass:
            changed, rewritten_copies, n_updated, self.matched_keys = self._rewrite_in_tasks(files, cond, one_match=True)
            counts["matched_update"], counts["matched_delete"] = n_updated, changed - n_updated
            in_tasks = True
        elif touched and self.run.merge_on_read:
            self.run.mark_deleted(touched)  # the changed rows; updated ones are written anew
            if any(c.action == "update" for c in self.numbered):
                parts.append(self._rewritten([add for add, _ in touched], cond))
        elif in_tasks:
            changed, rewritten_copies, _, _ = self._rewrite_in_tasks([add for add, _ in touched], cond)
            if changed != sum(counts.values()):
                raise LakelogError(
                    f"the merge changed {changed} target rows but its first pass found {sum(counts.values())}: the source changed "
                    "between its reads (a non-deterministic source?); nothing was committed. Materialize the source first (e.g. localCheckpoint())"
                )
        elif touched:
            for add, _ in touched:
                op.remove(add)
            parts.append(self._rewritten([add for add, _ in touched], cond))
        inserted = self._inserted(files, cond) if self.inserts else None  # (against every candidate file)
        parts += [inserted] if inserted is not None else []
        if self.run.records_changes:
            record_changes(self, [add for add, _ in touched], cond, inserted)
        if parts:
            df = parts[0]
            for p in parts[1:]:
                df = df.unionByName(p)
            written = self.run.write(df)
        updated = counts["matched_update"] + counts["nmbs_update"]
        deleted = counts["matched_delete"] + counts["nmbs_delete"]
        inserted, copied = written[INSERTED], written[COPIED] + rewritten_copies
        if written[UPDATED] != updated and not in_tasks:
            raise LakelogError(
                f"the merge wrote {written[UPDATED]} updated rows but its first pass found {updated}: the source changed between "
                "its reads (a non-deterministic source?); nothing was committed. Materialize the source first (e.g. localCheckpoint())"
            )
        op.finish()

        def clause_json(cs: list[Clause]) -> str:
            return orjson.dumps(
                [{**({"predicate": condition_text(c.condition)} if c.condition is not None else {}), "actionType": c.action} for c in cs]
            ).decode()

        self.params = {
            "predicate": orjson.dumps([self.text]).decode(),
            "matchedPredicates": clause_json(self.matched),
            "notMatchedPredicates": clause_json(self.inserts),
            "notMatchedBySourcePredicates": clause_json(self.nmbs),
        }
        self.commit_metrics = {
            "numSourceRows": n_src, "numTargetRowsInserted": inserted, "numTargetRowsUpdated": updated,
            "numTargetRowsMatchedUpdated": counts["matched_update"], "numTargetRowsNotMatchedBySourceUpdated": counts["nmbs_update"],
            "numTargetRowsDeleted": deleted, "numTargetRowsMatchedDeleted": counts["matched_delete"],
            "numTargetRowsNotMatchedBySourceDeleted": counts["nmbs_delete"], "numTargetRowsCopied": copied,
            "numOutputRows": inserted + updated + copied, "numTargetFilesRemoved": op.num_removed_files,
            "numTargetFilesAdded": op.num_added_files,
        }
        self.metrics = {
            "num_source_rows": n_src, "num_target_rows_inserted": inserted, "num_target_rows_updated": updated,
            "num_target_rows_deleted": deleted, "num_target_rows_copied": copied, "num_output_rows": inserted + updated + copied,
            "num_target_files_added": op.num_added_files, "num_target_files_removed": op.num_removed_files,
        }

    def _find_touched(self, files, cond: Column, counts: dict) -> list:
        """Job 1: the candidate files holding rows some clause changes, each with the file row indexes of
        those rows (merge-on-read; else None); checks the one-match rule and counts changed rows by
        clause kind and action."""
        tgt = self._target(files, row_id=True)
        joined = tgt.join(self.src, cond, "left" if self.nmbs else "inner")
        action = self._target_action()
        # The one-match rule counts only source rows a matched clause applies to (as Delta, and the
        # Python merge): others matching the same target row are not ambiguous.
        # With inserts and one key equality, also the matched source keys (see _match_key), up to the limit.
        key = self._keys_key(counting=True)
        keys = [F.when(F.col(S_MARK).isNotNull(), self.src[_q(key)].cast("string")).alias(MATCHED_KEYS)] if key is not None else []
        rows = joined.select(
            tgt[FILE].alias(FILE), tgt[ROW_ID].alias(ROW_ID), (F.col(S_MARK).isNotNull() & (action >= 0)).cast("int").alias("m"), action.alias(ACTION),
            *keys,
        )
        limit = MATCHED_KEYS_LIMIT
        per_row = rows.groupBy(FILE, ROW_ID).agg(F.sum("m").alias("m"), F.max(ACTION).alias(ACTION),
                                                 *([F.collect_set(MATCHED_KEYS).alias(MATCHED_KEYS)] if key is not None else []))
        aggs = [F.max("m").alias("max_m")]
        if key is not None:
            aggs.append(F.slice(F.array_distinct(F.flatten(F.collect_set(MATCHED_KEYS))), 1, limit + 1).alias(MATCHED_KEYS))
        for k in range(len(self.numbered)):
            aggs.append(F.sum((F.col(ACTION) == k).cast("long")).alias(f"k{k}"))
        mor = self.run.merge_on_read
        if mor:
            aggs.append(F.collect_list(F.when(F.col(ACTION) >= 0, F.col(ROW_ID))).alias(ROWS))
        table = per_row.groupBy(FILE).agg(*aggs).toArrow()
        if key is not None:
            found: set | None = set()
            for listed in table.column(MATCHED_KEYS).to_pylist():
                found.update(listed or ())
                if len(found) > limit:
                    found = None
                    break
            self.matched_keys = found
            table = table.drop_columns([MATCHED_KEYS])
        per_file = table.drop_columns([ROWS] if mor else []).to_pylist()
        if mor:
            lists = table.column(ROWS).combine_chunks()
            offsets, values = lists.offsets.to_numpy(), lists.values.to_numpy(zero_copy_only=False).astype(np.int64)
        if self.check_cardinality and any((r["max_m"] or 0) > 1 for r in per_file):
            raise MultipleSourceMatchesError(ONE_MATCH_MESSAGE)
        touched = []
        n_matched = len(self.matched)
        for i, r in enumerate(per_file):
            changed = 0
            for k, clause in enumerate(self.numbered):
                n = r[f"k{k}"] or 0
                changed += n
                kind = "matched" if k < n_matched else "nmbs"
                counts[f"{kind}_{clause.action}"] += n
            if changed:
                rows = np.sort(values[offsets[i]:offsets[i + 1]]) if mor else None
                touched.append((self.run.file_of(r[FILE]), rows))
        return touched

    def _assigned(self, clauses_by_code: dict[int, Clause], name: str, default: Column, tgt: DataFrame) -> Column:
        value = None
        for k, c in clauses_by_code.items():
            if c.action == "delete" or name not in (c.assignments or {}):
                continue
            v = store(self._value(c.assignments[name], tgt), self.own_types[(id(c), name)], self.types[name], name, self.rule,
                      self.texts[(id(c), name)])
            value = F.when(F.col(ACTION) == k, v) if value is None else value.when(F.col(ACTION) == k, v)
        return (default if value is None else value.otherwise(default)).cast(self.types[name]).alias(name)

    def _rewrites_in_tasks(self) -> bool:
        """Whether the touched files are rewritten by lakelog in Spark's tasks (``SparkOperation.rewrite_files``):
        copy-on-write, no schema evolution, and at most one source row per target row (checked), each
        applying a clause (matched clauses without conditions)."""
        return (not self.run.merge_on_read and self.check_cardinality and all(c.condition is None for c in self.matched)
                and not self.schema_changed)

    def _rewrite_in_tasks(self, files, cond: Column, one_match: bool = False) -> tuple[int, int, int, set | None]:
        """The touched files (of ``files``) rewritten by Spark's tasks with lakelog's copy-on-write: per
        file, the rows a clause deletes or updates (with their new values); copied rows never leave the
        tasks. ``one_match``: the tasks check the one-match rule, and bring back the matched source keys
        where ``_match_key`` allows. Returns (rows changed, rows copied, rows updated, those keys as text
        or None)."""
        tgt = self.run.frame(files, row_column=True).withColumn(T_MARK, F.lit(True))
        tgt = tgt.alias(self.t_alias) if self.t_alias else tgt
        joined = tgt.join(self.src, cond, "left" if self.nmbs else "inner").withColumn(ACTION, self._target_action())
        updates = [k for k, c in enumerate(self.numbered) if c.action == "update"]
        by_code = dict(enumerate(self.numbered))
        values = [self._assigned(by_code, n, tgt[_q(n)], tgt) for n in self.target_names]
        key = self._keys_key(counting=False) if one_match else None
        keys = [self.src[_q(key)].cast("string").alias(MATCHED_KEYS)] if key is not None else []
        entry = F.struct(tgt[ROW].alias(ROW), (F.col(ACTION).isin(updates) if updates else F.lit(False)).alias(UPDATE_FLAG), *values, *keys)
        changed = joined.where(F.col(ACTION) >= 0).select(tgt[FILE].alias(FILE), entry.alias("__lakelog_entry"))
        n_changed, n_copied, n_updated, found = self.run.rewrite_files(changed, files, F.col("__lakelog_entry"), list(self.target_names), one_match)
        return n_changed, n_copied, n_updated, (found if key is not None else None)

    def _rewritten(self, files, cond: Column) -> DataFrame:
        """Rows of the touched files after the matched and not-matched-by-source clauses (deleted rows
        dropped), with KIND."""
        if self.check_cardinality and (self.run.merge_on_read or all(c.condition is None for c in self.matched)):
            # Every match applies a clause (or merge-on-read, which writes only rows a clause applies to),
            # so (checked) one source row at most per target row: one left join.
            tgt = self._target(files, file_column=False)
            return self._apply(tgt, tgt.join(self.src, cond, "left").withColumn(ACTION, self._target_action()))
        if self.check_cardinality:
            # Several source rows may match a target row, a clause applying for one of them at most
            # (checked): keep per target row the one it applies for, else any one.
            tgt = self._target(files, file_column=False, row_id=True)
            joined = tgt.join(self.src, cond, "left").withColumn(ACTION, self._target_action())
            best = F.max(ACTION).over(Window.partitionBy(tgt[ROW_ID]))
            joined = joined.withColumn("__lakelog_best", best).where(F.col(ACTION) == F.col("__lakelog_best")).dropDuplicates([ROW_ID])
            return self._apply(tgt, joined)
        tgt = self._target(files, file_column=False)
        # Several source rows may match a target row: take each target row once. Unmatched rows get
        # the not-matched-by-source clauses; matched ones are deleted (the only matched clause is an
        # unconditional delete) or, with no matched clause, kept as they are.
        unmatched = tgt.join(self.src, cond, "left_anti").withColumn(S_MARK, F.lit(None).cast("boolean"))
        out = self._apply(tgt, unmatched.withColumn(ACTION, self._target_action()))
        if not self.matched and not self.run.merge_on_read:  # (merge-on-read copies no row)
            kept = self._target(files, file_column=False)
            out = out.unionByName(self._apply(kept, kept.join(self.src, cond, "left_semi").withColumn(ACTION, F.lit(-1))))
        return out

    def _apply(self, tgt: DataFrame, joined: DataFrame) -> DataFrame:
        deletes = [k for k, c in enumerate(self.numbered) if c.action == "delete"]
        if deletes:
            joined = joined.where(~F.col(ACTION).isin(deletes))
        if self.run.merge_on_read:  # only updated rows are written; unchanged ones stay in their files
            joined = joined.where(F.col(ACTION) >= 0)
        by_code = dict(enumerate(self.numbered))
        cols = []
        for name in self.out_names:
            default = F.lit(None)
            if name in self.target_names:  # (its type may have gained struct fields)
                default = self._as_new(tgt, name)
            cols.append(self._assigned(by_code, name, default, tgt))
        kind = F.when(F.col(ACTION) >= 0, F.lit(UPDATED)).otherwise(F.lit(COPIED)).alias(KIND)
        return joined.select(*cols, kind, *self.run.carried(tgt))

    def _inserted(self, files, cond: Column) -> DataFrame:
        """Source rows no candidate target row matches, through the not-matched clauses, with KIND."""
        key = self.match_key if self.matched_keys is not None else None  # (set only where a job brought them back)
        if files and key is not None:
            # The job that found the matches brought back the keys of the source rows that matched: the
            # others are the unmatched ones (a NULL key never matches), with no second read of the target.
            src_type = self.source.schema[key].dataType
            matched = self.run.spark.createDataFrame([(k,) for k in sorted(self.matched_keys)], "k string").select(
                F.col("k").cast(src_type).alias(MATCHED_KEYS))
            unmatched = self.src.join(F.broadcast(matched), self.src[_q(key)] == matched[MATCHED_KEYS], "left_anti")
        elif files:
            # Against the target rows that match some source row (a semi join that broadcasts the
            # source), not all candidate rows: the same result, and Spark can broadcast that subset
            # when it is small instead of shuffling every candidate row for the anti join.
            tgt = self._target(files, file_column=False)
            matched = tgt.join(self.src, cond, "left_semi")
            unmatched = self.src.join(matched.alias(self.t_alias) if self.t_alias else matched, cond, "left_anti")
        else:
            unmatched = self.src
        chosen = unmatched.withColumn(ACTION, self._case(self.inserts, 0)).where(F.col(ACTION) >= 0)
        by_code = dict(enumerate(self.inserts))
        cols = [self._assigned(by_code, name, F.lit(None), None) for name in self.out_names]
        return chosen.select(*cols, F.lit(INSERTED).alias(KIND), *self.run.carried(None))

    # ------------------------------------------------------------ outcome
    def commit(self) -> dict:
        """Commit the merge (nothing when it is a duplicate of an idempotent one); returns its metrics."""
        try:
            if self.metrics is None:  # a duplicate: nothing was done
                zero = dict.fromkeys(("num_source_rows", "num_target_rows_inserted", "num_target_rows_updated", "num_target_rows_deleted",
                                      "num_target_rows_copied", "num_output_rows", "num_target_files_added", "num_target_files_removed"), 0)
                version = self.run.snapshot.version
                self.op.engine.close()
                return {**zero, "version": version}
            version = self.run.commit("MERGE", self.params, self.commit_metrics)
        except BaseException:
            self.abort()
            raise
        finally:
            self._unpersist()
        self.op.engine.close()
        return {**self.metrics, "version": version}

    def abort(self) -> None:
        """Delete the files written for this merge (nothing is committed)."""
        self._unpersist()
        self.op.abort()

    def _unpersist(self) -> None:
        if self.persisted is not None:
            self.persisted.unpersist()
            self.persisted = None

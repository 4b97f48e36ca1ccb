"""MERGE: upsert a source (Arrow or pandas) into the table on a join predicate, with Delta's semantics.

* Clauses are kept in the order given; within each kind (matched, not matched, not matched by
  source) the first clause whose condition is TRUE wins (NULL is not TRUE). Only the last clause of
  a kind may omit its condition.
* A target row to which matched clauses would apply for more than one source row is an error
  (``MultipleSourceMatchesError``, nothing committed), unless the only matched clause is an
  unconditional delete; source rows whose clause conditions are all not TRUE do not count.
* ``*_all`` clauses assign columns by name; with ``schema_mode="merge"`` source columns the table
  lacks are added (nullable) and target columns the source lacks keep their value (update) or are
  NULL (insert); without it every target column must be in the source and extra ones are ignored.

Execution (copy-on-write): candidate target files are pruned with the predicate's target-only
conjuncts and, for each equi-join ``target.k = source.k2``, the range (and, for partition columns,
the set) of the source's keys; not-matched-by-source clauses add their own conditions. DuckDB joins
each bounded group of candidate files (only the columns the predicate and conditions read) with
the source; files holding changed rows are then read whole, one at a time, their changed rows are
deleted through the row-deletion seam and the new versions written. Unmatched source rows are
inserted at the end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from .. import collations
from ..assignment_types import check_assignment, value_types
from ..conform import to_microseconds
from ..errors import InvalidArgumentError, MultipleSourceMatchesError, PredicateError
from ..schema import ColumnNames, canonical_schema, check_column_names, to_arrow_stream
from ..predicate_pruning import prune_expression
from ..sql import collated_sql, column_refs, equality_column_pairs, parse_expression, quote_ident, table_columns, value_expressions
from ..storage import Storage
from ..variant_columns import variant_sources
from ..write import plan_protocol, evolved_metadata
from .internal_columns import ROW_ID
from .predicate import table_collation_of
from .file_groups import Group, split_by_file
from .rewrite import FILE, ROW, RowLevelOperation, internal_name, predicate_parameter, rows_at, run

SRC = internal_name("src")  # a source row's position in the source
CLAUSE = internal_name("clause")  # the number of the insert clause that applies to a source row
KEY_SET_LIMIT = 1000  # distinct source keys of a partition column pruned as a set (beyond: a range)
MERGE_GROUP_BYTES = 16 * 1024 * 1024  # data-file bytes of candidate files joined with the source at once


@dataclass
class Clause:
    kind: str  # "matched" | "not_matched" | "not_matched_by_source"
    action: str  # "update" | "delete" | "insert"
    condition: str | None = None
    assignments: dict[str, str] | None = None  # None with all=True: every column by name
    all: bool = False


class TableMerger:
    """A MERGE being built: add ``when_*`` clauses (evaluated in order), then ``execute()``."""

    def __init__(self, table: Any, source: Any, predicate: str, *, source_alias: str = "source", target_alias: str = "target",
                 schema_mode: str | None = None, app_id: str | None = None, app_version: int | None = None, user_metadata: str | None = None):
        if schema_mode not in (None, "merge"):
            raise InvalidArgumentError(f"schema_mode must be None or 'merge' for a merge, not {schema_mode!r}")
        if not isinstance(source_alias, str) or not isinstance(target_alias, str) or source_alias.lower() == target_alias.lower():
            raise InvalidArgumentError(f"source_alias and target_alias must be two different names, not {source_alias!r} and {target_alias!r}")
        self.table, self.source, self.predicate = table, source, predicate
        self.source_alias, self.target_alias, self.schema_mode = source_alias, target_alias, schema_mode
        self.app_id, self.app_version, self.user_metadata = app_id, app_version, user_metadata
        self.clauses: list[Clause] = []

    def _add(self, clause: Clause) -> "TableMerger":
        self.clauses.append(clause)
        return self

    def when_matched_update(self, updates: dict[str, Any], condition: str | None = None) -> "TableMerger":
        """Set columns of matched target rows to SQL expressions over ``target`` and ``source`` (a str) or
        to literal values (None, numbers, bools, dates, ...)."""
        return self._add(Clause("matched", "update", condition, value_expressions(updates, "when_matched_update")))

    def when_matched_update_all(self, condition: str | None = None) -> "TableMerger":
        """Set every target column of matched rows to the source column of the same name."""
        return self._add(Clause("matched", "update", condition, None, True))

    def when_matched_delete(self, condition: str | None = None) -> "TableMerger":
        return self._add(Clause("matched", "delete", condition))

    def when_not_matched_insert(self, values: dict[str, Any], condition: str | None = None) -> "TableMerger":
        """Insert a row per unmatched source row: column -> SQL expression over ``source`` or literal value
        (others NULL)."""
        return self._add(Clause("not_matched", "insert", condition, value_expressions(values, "when_not_matched_insert")))

    def when_not_matched_insert_all(self, condition: str | None = None) -> "TableMerger":
        return self._add(Clause("not_matched", "insert", condition, None, True))

    def when_not_matched_by_source_update(self, updates: dict[str, Any], condition: str | None = None) -> "TableMerger":
        """Set columns of target rows no source row matches (expressions over ``target`` only)."""
        return self._add(Clause("not_matched_by_source", "update", condition, value_expressions(updates, "when_not_matched_by_source_update")))

    def when_not_matched_by_source_delete(self, condition: str | None = None) -> "TableMerger":
        return self._add(Clause("not_matched_by_source", "delete", condition))

    def execute(self) -> dict[str, Any]:
        """Run the merge in one ``MERGE`` commit; returns metrics (``num_source_rows``,
        ``num_target_rows_inserted``/``_updated``/``_deleted``/``_copied``, ``num_output_rows``,
        ``num_target_files_added``/``_removed``, ``version``)."""
        metrics = merge(
            self.table.storage, self.source, self.predicate, self.clauses, source_alias=self.source_alias,
            target_alias=self.target_alias, schema_mode=self.schema_mode, app_id=self.app_id,
            app_version=self.app_version, user_metadata=self.user_metadata,
        )
        self.table.refresh()
        return metrics


def merge(storage: Storage, source: Any, predicate: str, clauses: list[Clause], *, source_alias: str = "source", target_alias: str = "target",
          schema_mode: str | None = None, app_id: str | None = None, app_version: int | None = None, user_metadata: str | None = None) -> dict[str, Any]:
    """Merge ``source`` into the table at ``storage`` (see ``TableMerger``)."""
    op = RowLevelOperation(storage, app_id=app_id, app_version=app_version, user_metadata=user_metadata)
    return run(op, lambda op: _Merge(op, source, predicate, clauses, source_alias, target_alias, schema_mode).execute())


def _source_table(source: Any) -> pa.Table:
    schema, batches = to_arrow_stream(source)
    t = pa.Table.from_batches(list(batches), schema=schema)
    cols = [c.dictionary_decode() if pa.types.is_dictionary(c.type) else c for c in t.columns]
    fields = [pa.field(f.name, c.type, True, f.metadata) for f, c in zip(t.schema, cols)]  # (field metadata kept: collations)
    # As every write path: nanoseconds are stored only when exact in microseconds (the engine would round).
    return to_microseconds(pa.Table.from_arrays(cols, schema=pa.schema(fields)), "merge source")


class _Merge:
    def __init__(self, op: RowLevelOperation, source: Any, predicate: str, clauses: list[Clause], source_alias: str, target_alias: str, schema_mode: str | None):
        if not clauses:
            raise PredicateError("a merge needs at least one when_* clause")
        self.op, self.engine = op, op.engine
        self.src = variant_sources(_source_table(source), op.schema)  # (JSON text for a variant column is parsed)
        self.t_alias, self.s_alias = quote_ident(target_alias), quote_ident(source_alias)
        self.target_alias, self.source_alias = target_alias, source_alias
        self.target_names = list(op.schema.names)
        self._reads: dict[int, set[str] | None] = {}  # by _clause_reads
        self._rels: dict[str, str] | None = None  # by _relations
        self.predicate = predicate
        self.clauses = clauses
        self.schema_mode = schema_mode
        for kind in ("matched", "not_matched", "not_matched_by_source"):
            of_kind = [c for c in clauses if c.kind == kind]
            if any(c.condition is None for c in of_kind[:-1]):
                raise PredicateError(f"only the last {kind.replace('_', ' ')} clause of a merge may omit its condition")
        self._plan_schema()
        self._validate()

    # ------------------------------------------------------------ planning
    def _plan_schema(self) -> None:
        op = self.op
        added = []
        if self.schema_mode == "merge" and any(c.all for c in self.clauses):
            targets = ColumnNames(self.target_names)
            new = [f for f in self.src.schema if f.name not in targets]
            if new:
                added = [collations.keep(pa.field(f.name, t.type, True), t) for f, t in zip(new, canonical_schema(pa.schema(new)))]
        out = pa.schema(list(op.schema) + added)
        src_names = ColumnNames(self.src.column_names)
        out_names = ColumnNames(out.names)
        for c in self.clauses:
            if c.all:
                computed = op.features.computable if op.features is not None else set()  # generated columns: computed
                missing = [n for n in self.target_names if n not in src_names and n not in computed]
                if missing and self.schema_mode != "merge":
                    raise PredicateError(
                        f"{c.kind.replace('_', ' ')} {c.action}_all needs every table column in the source; missing: {missing}. "
                        "Add them to the source, assign columns explicitly, or pass schema_mode='merge'"
                    )
                c.assignments = {n: f"{self.s_alias}.{quote_ident(src_names.find(n))}" for n in out.names if n in src_names}
            elif c.assignments is not None:
                fixed = {}
                for col, expr in c.assignments.items():
                    name = out_names.find(col)
                    prefix = self.target_alias + "."
                    if name is None and isinstance(col, str) and col.lower().startswith(prefix.lower()):
                        name = out_names.find(col[len(prefix):])
                    if name is None:
                        raise PredicateError(f"merge {c.action}: column {col!r} is not in the table (columns: {out.names})")
                    fixed[name] = expr
                c.assignments = fixed
        fields = self._assigned_types(out)
        if added or fields != list(op.schema):
            schema = pa.schema(fields)
            check_column_names(schema, mapped=op.snapshot.column_mapping.active)
            metadata = evolved_metadata(op.snapshot, schema)
            protocol = plan_protocol(schema, op.snapshot.protocol, metadata.configuration, metadata.schema_string)
            op.evolve_schema(schema, metadata, [protocol] if protocol is not None else [])
        self.out_schema = op.schema
        if op.features is not None:
            op.features = op.features.for_assignments(*(c.assignments or {} for c in self.clauses if c.action == "update"),
                                                      inserts=[c.assignments or {} for c in self.clauses if c.action == "insert"])

    def _relations(self) -> dict[str, str]:
        """Per clause kind, the relation (empty tables of the target's and the source's schemas) its
        expressions are bound over."""
        if self._rels is None:
            eng = self.engine
            target_rel, src_rel = eng.empty_relation(self.op.snapshot.schema), eng.empty_relation(self.src.schema)
            both = f"{target_rel} AS {self.t_alias}, {src_rel} AS {self.s_alias}"
            self._rels = {"matched": both, "not_matched": f"{src_rel} AS {self.s_alias}", "not_matched_by_source": f"{target_rel} AS {self.t_alias}"}
        return self._rels

    def _assigned_types(self, out: pa.Schema) -> list[pa.Field]:
        """The fields of ``out`` once every clause's values are stored (write_table's rule, as
        ``lakelog.assignment_types``): with schema_mode='merge', the struct fields the values add and
        the types void columns take."""
        types = {f.name: f.type for f in out}
        evolve = self.schema_mode == "merge"
        for c in self.clauses:
            assigned = c.assignments or {}
            label = f"{c.kind.replace('_', ' ')} {c.action} clause"
            whats = [f"{label}: expression for column {col!r}" for col in assigned]
            trees = [parse_expression(expr, what) for expr, what in zip(assigned.values(), whats)]
            values = value_types(self.engine, list(assigned.values()), self._relations()[c.kind], whats)
            for (col, expr), tree, value in zip(assigned.items(), trees, values):
                refs = column_refs(tree) if tree.get("class") == "COLUMN_REF" else []
                bare = self._resolve_source(refs[0]) if refs and c.kind != "not_matched_by_source" else None
                hint = None
                if c.all:
                    target = types[col]
                    hint = lambda col=col, bare=bare, target=target: (  # noqa: E731
                        f"Cast the source's column {bare!r} to the table's type first, or assign it with an explicit cast: "
                        f"{{{col!r}: 'CAST({self.source_alias}.{col} AS {self.engine.sql_type(target)})'}}")
                types[col] = check_assignment(
                    self.engine, expr, tree, col, types[col], value, what=f"merge {c.kind.replace('_', ' ')} {c.action}{'_all' if c.all else ''} clause",
                    evolve=evolve, how_to_evolve="pass schema_mode='merge'", values=self.src.column(bare) if bare is not None else None,
                    cast_hint=hint,
                )
        return [f.with_type(types[f.name]) for f in out]

    def _validate(self) -> None:
        eng = self.engine
        rels = self._relations()
        self.tree = eng.check_predicate(self.predicate, rels["matched"], "merge predicate")
        # What DuckDB evaluates: comparisons of collated target columns made under their collation.
        schema = self.op.snapshot.schema
        collated = bool(collations.table_collations(schema))
        collation_of = table_collation_of(schema, self._resolve_target)
        self._predicate_sql = (collated and collated_sql(self.tree, collation_of, self.predicate)) or self.predicate
        self._condition_sql: dict[int, str] = {}
        for c in self.clauses:
            rel = rels[c.kind]
            label = f"{c.kind.replace('_', ' ')} {c.action} clause"
            if c.condition is not None:
                tree = eng.check_predicate(c.condition, rel, f"condition of the {label}")
                self._condition_sql[id(c)] = (collated and collated_sql(tree, collation_of, c.condition)) or c.condition
            for col, expr in (c.assignments or {}).items():
                tree = eng.check_value(expr, rel, self.out_schema.field(col).type, f"{label}: expression for column {col!r}")
                if collated:  # (a new value's comparisons of collated target columns too)
                    c.assignments[col] = collated_sql(tree, collation_of, expr, value=True) or expr

    def _resolve_target(self, ref: tuple[str, ...]) -> str | None:
        targets, sources = ColumnNames(self.target_names), ColumnNames(self.src.column_names)
        if len(ref) == 2 and ref[0].lower() == self.target_alias.lower():
            return targets.find(ref[1])
        if len(ref) == 1 and ref[0] not in sources:
            return targets.find(ref[0])
        return None

    def _resolve_source(self, ref: tuple[str, ...]) -> str | None:
        targets, sources = ColumnNames(self.target_names), ColumnNames(self.src.column_names)
        if len(ref) == 2 and ref[0].lower() == self.source_alias.lower():
            return sources.find(ref[1])
        if len(ref) == 1 and ref[0] not in targets:
            return sources.find(ref[0])
        return None

    def _key_ranges(self) -> list[pc.Expression]:
        """For each ``target.k = source.k2`` conjunct: the source's keys as a bound on ``k``."""
        out = []
        schema = self.op.snapshot.schema
        for t_col, s_col in equality_column_pairs(self.tree, self._resolve_target, self._resolve_source):
            tt, st = schema.field(t_col).type, self.src.schema.field(s_col).type
            same = tt == st or (pa.types.is_integer(tt) and pa.types.is_integer(st)) or (pa.types.is_string(tt) and pa.types.is_large_string(st))
            if not same or pa.types.is_floating(tt) or pa.types.is_nested(tt) or pa.types.is_boolean(tt):
                continue
            if collations.of_field(schema.field(t_col)) is not None:
                continue  # equal under the column's collation is not equal in binary order
            keys = pc.drop_null(self.src.column(s_col))
            if len(keys) == 0:
                out.append(pc.scalar(False))
                continue
            try:
                lo, hi = pc.min_max(keys).values()
                lo, hi = lo.cast(tt), hi.cast(tt)
            except pa.ArrowException:
                continue  # source keys outside the target type: no pruning from this term
            f = pc.field(t_col)
            if t_col in self.op.partition_columns:
                distinct = pc.unique(keys)
                if len(distinct) <= KEY_SET_LIMIT:
                    try:
                        out.append(f.isin(distinct.cast(tt)))
                        continue
                    except pa.ArrowException:
                        pass
            out.append((f >= lo) & (f <= hi))
        return out

    def _prunes(self) -> tuple[pc.Expression | None, pc.Expression | None]:
        """(join prune, candidate prune): files outside the first hold no matched row, files outside the
        second no row any clause touches."""
        schema = self.op.snapshot.schema
        join = prune_expression(self.tree, schema, self.engine, self._resolve_target)
        for r in self._key_ranges():
            join = r if join is None else join & r
        candidates = join
        for c in self.clauses:
            if c.kind != "not_matched_by_source" or candidates is None:
                continue
            cond = None if c.condition is None else prune_expression(parse_expression(c.condition), schema, self.engine, self._resolve_target)
            candidates = None if cond is None else candidates | cond
        return join, candidates

    def _narrow_columns(self) -> set[str]:
        texts = [self.predicate] + [c.condition for c in self.clauses if c.condition is not None and c.kind != "not_matched"]
        cols: set[str] = set()
        for text in texts:
            cols |= table_columns(parse_expression(text), self.target_names)
        return cols

    # ------------------------------------------------------------ running
    def execute(self) -> dict[str, Any]:
        op = self.op
        zero = {k: 0 for k in ("num_source_rows", "num_target_rows_inserted", "num_target_rows_updated", "num_target_rows_deleted",
                               "num_target_rows_copied", "num_output_rows", "num_target_files_added", "num_target_files_removed")}
        if op.duplicate:
            return {**zero, "version": op.snapshot.version}
        n_src = self.src.num_rows
        self.src = self.src.append_column(SRC, pa.array(np.arange(n_src, dtype=np.int64)))
        self.src_rel = self.engine.register(self.src)
        matched = [c for c in self.clauses if c.kind == "matched"]
        nmbs = [c for c in self.clauses if c.kind == "not_matched_by_source"]
        inserts = [c for c in self.clauses if c.kind == "not_matched"]
        self.numbered = matched + nmbs  # clause number k = position here
        self.counts = {"matched_update": 0, "matched_delete": 0, "nmbs_update": 0, "nmbs_delete": 0}
        self.check_cardinality = bool(matched) and not (len(matched) == 1 and matched[0].action == "delete" and matched[0].condition is None)
        self.matched_src = np.zeros(n_src, dtype=bool)
        _, candidate_prune = self._prunes()
        files = op.candidates(candidate_prune)
        if files and (matched or nmbs or inserts):
            # Larger groups than a delete's: each group is joined with the whole source (its hash table
            # built again per group); at 6 MiB a 100k-row source made the merge 10-35% slower. The next
            # group is read while this one is joined: 4M rows, 100k-row source, 0.86-0.89 s and 142-146 MiB
            # against 0.96-1.12 s and 125-140 MiB.
            for group in op.scan(files, self._narrow_columns(), MERGE_GROUP_BYTES):
                self._group(group, files, matched, nmbs)
        inserted = self._insert(inserts) if inserts else 0
        updated = self.counts["matched_update"] + self.counts["nmbs_update"]
        deleted = self.counts["matched_delete"] + self.counts["nmbs_delete"]

        def clause_json(cs: list[Clause]) -> str:
            return orjson.dumps([{**({"predicate": c.condition} if c.condition is not None else {}), "actionType": c.action} for c in cs]).decode()

        params = {
            "predicate": predicate_parameter(self.predicate),
            "matchedPredicates": clause_json(matched),
            "notMatchedPredicates": clause_json(inserts),
            "notMatchedBySourcePredicates": clause_json(nmbs),
        }
        op.finish()
        copied = op.copied_rows
        commit_metrics = {
            "numSourceRows": n_src, "numTargetRowsInserted": inserted, "numTargetRowsUpdated": updated,
            "numTargetRowsMatchedUpdated": self.counts["matched_update"], "numTargetRowsNotMatchedBySourceUpdated": self.counts["nmbs_update"],
            "numTargetRowsDeleted": deleted, "numTargetRowsMatchedDeleted": self.counts["matched_delete"],
            "numTargetRowsNotMatchedBySourceDeleted": self.counts["nmbs_delete"], "numTargetRowsCopied": copied,
            "numOutputRows": inserted + updated + copied, "numTargetFilesRemoved": op.num_removed_files,
        }
        commit_metrics["numTargetFilesAdded"] = op.num_added_files
        version = op.commit("MERGE", params, commit_metrics)
        return {
            "num_source_rows": n_src, "num_target_rows_inserted": inserted, "num_target_rows_updated": updated,
            "num_target_rows_deleted": deleted, "num_target_rows_copied": copied, "num_output_rows": inserted + updated + copied,
            "num_target_files_added": op.num_added_files, "num_target_files_removed": op.num_removed_files,
            "version": op.snapshot.version if version is None else version,
        }

    def _case(self, clauses: list[Clause], first: int) -> str:
        if not clauses:
            return "-1"
        whens = " ".join(f"WHEN ({self._condition_sql[id(c)] if c.condition is not None else 'TRUE'}) THEN {first + i}" for i, c in enumerate(clauses))
        return f"CASE {whens} ELSE -1 END"

    def _group(self, group: Group, files: list, matched: list[Clause], nmbs: list[Clause]) -> None:
        eng, t, s = self.engine, self.t_alias, self.s_alias
        g = eng.register(group.table)
        try:
            hits = eng.query(
                f"SELECT {t}.{FILE} AS f, {t}.{ROW} AS r, {s}.{SRC} AS s, {self._case(matched, 0)} AS k "
                f"FROM {g} AS {t} JOIN {self.src_rel} AS {s} ON ({self._predicate_sql})",
                f"cannot evaluate the merge {self.predicate!r}",
            )
            if self.check_cardinality and hits.num_rows:
                # As Delta: only source rows for which a matched clause applies count; others that
                # match the same target row (a clause condition is not TRUE for them) are not ambiguous.
                applied = hits.filter(pc.greater_equal(hits.column("k"), 0))
                f_arr, r_arr = applied.column("f").to_numpy(), applied.column("r").to_numpy()
                key = f_arr.astype(np.int64) * (int(r_arr.max(initial=0)) + 1) + r_arr
                if len(np.unique(key)) != len(key):
                    raise MultipleSourceMatchesError(
                        "the merge matched a target row with more than one source row, so it cannot tell which one to apply; "
                        "nothing was committed. Deduplicate the source on the join keys (or make the predicate match at most one source row)"
                    )
            self.matched_src[hits.column("s").to_numpy()] = True
            actions = [hits.filter(pc.greater_equal(hits.column("k"), 0))]
            if nmbs:
                m = eng.register(hits)
                try:
                    unmatched = eng.query(
                        f"SELECT {t}.{FILE} AS f, {t}.{ROW} AS r, CAST(NULL AS BIGINT) AS s, {self._case(nmbs, len(matched))} AS k "
                        f"FROM {g} AS {t} ANTI JOIN {m} AS __m ON ({t}.{FILE} = __m.f AND {t}.{ROW} = __m.r)",
                        "cannot evaluate the not matched by source clauses",
                    )
                finally:
                    eng.unregister(m)
                actions.append(unmatched.filter(pc.greater_equal(unmatched.column("k"), 0)))
        finally:
            eng.unregister(g)
        todo = pa.concat_tables(actions)
        if todo.num_rows == 0:
            return
        by_file = split_by_file(todo.rename_columns([FILE, ROW, "s", "k"]))
        for chunk in self.op.chunks(files, sorted(by_file)):
            self._rewrite(files, {f: by_file[f] for f in chunk}, len(matched), group)

    def _rewrite(self, files: list, by_file: dict[int, pa.Table], n_matched: int, group: Group) -> None:
        """Apply the chosen clauses (FILE -> rows of ROW, s, k) to a bounded run of files of ``group``
        (whose columns, read for the join, are not read again)."""
        eng, t, s = self.engine, self.t_alias, self.s_alias
        hit = sorted(by_file)
        todo = pa.concat_tables([by_file[f] for f in hit])
        ks_all = todo.column("k").to_numpy()
        is_update_all = np.array([self.numbered[k].action == "update" for k in ks_all], dtype=bool)
        update_ks = sorted(set(ks_all[is_update_all].tolist()))
        # Without a change feed or row tracking, and when the new values need no target column the join
        # did not read, the files are not read here: each rewrite reads its own file on the pool.
        reads = [self._clause_reads(k) for k in update_ks]
        light = (not self.op.records_changes and self.op.row_tracking is None and None not in reads
                 and set().union(*reads) <= set(group.table.column_names))
        if light:
            contents: dict[int, pa.Table] = {}
            rows_of = lambda f: group.rows_of(f, with_file=True)  # noqa: E731
        else:
            contents = dict(zip(hit, self.op.read_many([files[f] for f in hit], hit, known=[group.rows_of(f) for f in hit])))
            rows_of = contents.__getitem__
        new_rows: dict[int, pa.Table] = {}
        if update_ks:
            upd = todo.filter(pa.array(is_update_all))
            cols = ", ".join(f"{self._value(name, update_ks)} AS {quote_ident(name)}" for name in self.out_schema.names)
            if self.op.row_tracking is not None:  # an updated row keeps its stable row id
                cols += f", {t}.{ROW_ID} AS {ROW_ID}"
            # Only the target rows being updated go to the join, not the files' every row.
            chosen = [rows_at(rows_of(f), np.unique(rows.column(ROW).to_numpy())) for f, rows in split_by_file(upd.select([FILE, ROW])).items()]
            a = eng.register(upd)
            c = eng.register(pa.concat_tables(chosen))
            try:
                new_rows = split_by_file(eng.query(
                    f"SELECT {cols}, __a.{FILE} AS {FILE} FROM {a} AS __a JOIN {c} AS {t} ON {t}.{FILE} = __a.{FILE} AND {t}.{ROW} = __a.{ROW} "
                    f"LEFT JOIN {self.src_rel} AS {s} ON {s}.{SRC} = __a.s",
                    "cannot evaluate the merge's update expressions",
                ))
            finally:
                eng.unregister(a)
                eng.unregister(c)
        for f in hit:
            acts, content = by_file[f], contents.get(f)
            ks = acts.column("k").to_numpy()
            rows = acts.column(ROW).to_numpy()
            is_update = np.array([self.numbered[k].action == "update" for k in ks], dtype=bool)
            for k_mask, kind in ((ks < n_matched, "matched"), (ks >= n_matched, "nmbs")):
                self.counts[f"{kind}_update"] += int(np.count_nonzero(is_update & k_mask))
                self.counts[f"{kind}_delete"] += len(np.unique(rows[~is_update & k_mask]))
            if self.op.records_changes:
                self.op.record_deleted(files[f], np.unique(rows[~is_update]), content)
                self.op.record_deleted(files[f], np.unique(rows[is_update]), content, "update_preimage")
                if f in new_rows:
                    new_rows[f] = self.op.new_rows(new_rows[f].select([c for c in new_rows[f].schema.names if c != FILE]))
                    self.op.record_changes(new_rows[f], "update_postimage")
            if content is None:  # (the group's row count of a file is its live rows, as a whole read gives them)
                self.op.delete_rows(files[f], np.unique(rows), None, group.counts[f - group.first], replacement=new_rows.get(f),
                                    known=group.rows_of(f))
            else:
                self.op.delete_rows(files[f], np.unique(rows), content, content.num_rows, replacement=new_rows.get(f))

    def _clause_reads(self, k: int) -> set[str] | None:
        """The target columns update clause number ``k`` reads for its new values (those its expressions
        name and those it leaves as they are); None if a reference is neither clearly the target's nor
        the source's."""
        if k not in self._reads:
            self._reads[k] = self._find_clause_reads(k)
        return self._reads[k]

    def _find_clause_reads(self, k: int) -> set[str] | None:
        assignments = self.numbered[k].assignments or {}
        reads = set()
        for name in self.out_schema.names:
            expr = assignments.get(name)
            if expr is None:
                if name in self.target_names:
                    reads.add(name)
                continue
            for ref in column_refs(parse_expression(expr)):
                if self._resolve_source(ref) is None:
                    column = self._resolve_target(ref)
                    if column is None:
                        return None
                    reads.add(column)
        return reads

    def _value(self, name: str, ks: list[int]) -> str:
        """The new value of column ``name`` for an updated row: by clause number ``__a.k``."""
        t = self.t_alias
        keep = f"{t}.{quote_ident(name)}" if name in self.target_names else "NULL"
        sql_type = self.engine.sql_type(self.out_schema.field(name).type)
        whens = []
        for k in ks:
            expr = (self.numbered[k].assignments or {}).get(name)
            if expr is not None:
                whens.append(f"WHEN {k} THEN CAST(({expr}) AS {sql_type})")
        if not whens:
            return keep
        if len(whens) == len(ks):  # every clause sets it: the target's value is not read
            return f"CASE __a.k {' '.join(whens)} END"
        return f"CASE __a.k {' '.join(whens)} ELSE {keep} END"

    def _insert(self, inserts: list[Clause]) -> int:
        eng, s = self.engine, self.s_alias
        unmatched = self.src.filter(pa.array(~self.matched_src))
        if unmatched.num_rows == 0:
            return 0
        u = eng.register(unmatched)
        cols = []
        for name in self.out_schema.names:
            sql_type = eng.sql_type(self.out_schema.field(name).type)
            whens = [f"WHEN {i} THEN CAST(({c.assignments[name]}) AS {sql_type})" for i, c in enumerate(inserts) if name in (c.assignments or {})]
            cols.append(f"{f'CASE {CLAUSE} ' + ' '.join(whens) + ' ELSE NULL END' if whens else 'CAST(NULL AS ' + sql_type + ')'} AS {quote_ident(name)}")
        try:
            rows = eng.query(
                f"SELECT {', '.join(cols)} FROM (SELECT *, {self._case(inserts, 0)} AS {CLAUSE} FROM {u} AS {s}) AS {s} WHERE {CLAUSE} >= 0",
                "cannot evaluate the merge's insert expressions",
            )
        finally:
            eng.unregister(u)
        if self.op.records_changes:
            rows = self.op.new_rows(rows)
            self.op.record_changes(rows, "insert")
        self.op.write(rows)
        return rows.num_rows


__all__ = ["TableMerger", "Clause", "merge"]

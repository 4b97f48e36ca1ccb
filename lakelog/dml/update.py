"""UPDATE: set columns of the rows a predicate selects to SQL expressions.

Updated rows are written as new rows (through the table's writer, so a changed partition value moves
the row to its new partition) and deleted from their files through the row-deletion seam. Copy-on-write
without the change feed computes the new values from the scanned columns (the predicate's and those the
expressions read) and each file's rewrite builds its updated rows from the file it reads anyway, so every
file is read once, as by a delete.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..schema import collations
from ..schema.assignment_types import check_assignment, value_types
from ..errors import PredicateError
from ..schema.types import ColumnNames
from ..expressions.simple_sql import parse_simple
from ..expressions.sql import collated_sql, parse_expression, quote_ident, table_columns, value_expressions
from ..storage import Storage
from .internal_columns import ROW_ID
from .copy_on_write import CopyOnWrite, NewValues
from .exact_values import ExactValues, exact_values
from .file_groups import Group, split_by_file
from .predicate import table_collation_of
from .rewrite import FILE, RowLevelOperation, compile_predicate, predicate_parameter, rows_at, run


def update(
    storage: Storage,
    updates: dict[str, str],
    predicate: Any = None,
    *,
    app_id: str | None = None,
    app_version: int | None = None,
    user_metadata: str | None = None,
) -> dict[str, Any]:
    """Set ``updates`` (column -> SQL expression) on the rows ``predicate`` selects (None: every row) in
    one ``UPDATE`` commit; returns metrics."""
    op = RowLevelOperation(storage, app_id=app_id, app_version=app_version, user_metadata=user_metadata)
    return run(op, lambda op: _update(op, updates, predicate))


def check_assignments(op: RowLevelOperation, updates: Any, relation: str | None = None, what: str = "update") -> dict[str, str]:
    """Validate ``{column: SQL expression or literal value}`` against the table (each value's type must
    fit its column as write_table's data must: ``lakelog.schema.assignment_types``); returns it as SQL text
    with exact column names. ``relation``: the engine's empty table of the schema (registered when needed)."""
    out, trees = {}, {}
    index = ColumnNames(op.schema.names)
    for given, expr in value_expressions(updates, what).items():
        col = index.find(given)  # as Delta: ignoring case
        if col is None:
            raise PredicateError(f"{what}: column {given!r} is not in the table (columns: {op.schema.names})")
        out[col] = expr
    if simple_value_trees(out, op.schema) is not None:
        return out  # (each value is its column's type already: nothing to check, no engine)
    if relation is None:
        relation = op.engine.empty_relation(op.schema)
    for col, expr in out.items():
        trees[col] = op.engine.check_value(expr, relation, op.schema.field(col).type, f"expression for column {col!r}")
    # The CAST to the column's type would round, narrow or drop struct fields: write_table's rule first.
    types = value_types(op.engine, list(out.values()), relation, [f"expression for column {c!r}" for c in out])
    for (col, expr), value in zip(out.items(), types):
        check_assignment(op.engine, expr, trees[col], col, op.schema.field(col).type, value, what=what)
    if collations.table_collations(op.schema):  # comparisons of collated columns in a value compare under their collation
        collation_of = table_collation_of(op.schema)
        out = {col: collated_sql(trees[col], collation_of, expr, value=True) or expr for col, expr in out.items()}
    return out


def simple_value_trees(updates: dict[str, str], schema: pa.Schema) -> dict[str, dict] | None:
    """The parse trees of the new values when each is a string literal for a string column without field
    metadata (``parse_simple`` reads it as the engine does): the engine's checks of such a value (it
    binds, is no variant, fits its column) cannot fail, and ``exact_values`` computes it. None otherwise."""
    trees = {}
    for col, expr in updates.items():
        field = schema.field(col)
        tree = parse_simple(expr, value=True)
        if tree is None or tree["class"] != "CONSTANT" or tree["literal"]["kind"] != "STRING" or field.type != pa.string() or field.metadata:
            return None
        trees[col] = tree
    return trees


def _update_files(op: RowLevelOperation, files: list, hits: dict, assignments: "_Assignments", context: str, group=None) -> int:
    """Rewrite the files ``hits`` names (FILE index -> file row indexes) with those rows updated; ``group``:
    the scanned group they belong to (its columns are not read again)."""
    order = sorted(hits)
    contents = op.read_many([files[fi] for fi in order], order, known=[group.rows_of(fi) for fi in order] if group is not None else None)
    chosen = pa.concat_tables([rows_at(content, hits[fi]) for fi, content in zip(order, contents)])
    name = op.engine.register(chosen)
    try:
        updated = op.engine.query(f"SELECT * REPLACE ({str(assignments)}) FROM {name}", context)
    finally:
        op.engine.unregister(name)
    if op.records_changes:
        op.record_changes(chosen, "update_preimage")
        updated = op.new_rows(updated.select([c for c in updated.schema.names if c in op.schema.names or c == ROW_ID])).append_column(
            FILE, updated.column(FILE))
        op.record_changes(updated, "update_postimage")
    new_rows = split_by_file(updated)
    for fi, content in zip(order, contents):
        op.delete_rows(files[fi], hits[fi], content, content.num_rows, replacement=new_rows[fi])
    return sum(len(r) for r in hits.values())


def _update_group(op: RowLevelOperation, files: list, group: Group, pred, assignments: "_Assignments", context: str,
                  exact: ExactValues | None = None) -> int:
    """Rewrite the files of a scanned ``group`` that have rows ``pred`` selects, with those rows updated
    from the new values computed over the group's columns (by pyarrow where ``exact`` has them); returns
    how many rows."""
    hits = list(group.selected(op.engine, pred))
    if not hits:
        return 0
    chosen = pa.concat_tables([rows_at(group.rows_of(fi), rows) for fi, rows in hits])
    # Row k of the values is computed from the k-th selected row (evaluate carries each row's position).
    values = exact.columns(chosen) if exact is not None else None
    if values is None:
        values = op.engine.evaluate(chosen, str(assignments), context)
    at = 0
    for fi, rows in hits:
        k = fi - group.first
        op.delete_rows(files[fi], rows, None, group.counts[k], replacement=NewValues(values.slice(at, len(rows))), known=group.rows_of(fi))
        at += len(rows)
    return at


class _Assignments:
    """The engine's select list of the new values (``CAST((expr) AS type) AS col, ...``), made when first
    used as text: values pyarrow computes never need the engine."""

    def __init__(self, op: RowLevelOperation, updates: dict[str, str]):
        self.op, self.updates, self._text = op, updates, None

    def __str__(self) -> str:
        if self._text is None:
            engine, schema = self.op.engine, self.op.schema
            self._text = ", ".join(
                f"CAST(({expr}) AS {engine.sql_type(schema.field(col).type)}) AS {quote_ident(col)}" for col, expr in self.updates.items())
        return self._text


def _update(op: RowLevelOperation, updates: Any, predicate: Any) -> dict[str, Any]:
    metrics = {"num_updated_rows": 0, "num_added_files": 0, "num_removed_files": 0, "num_copied_rows": 0}
    if op.duplicate:
        return {**metrics, "version": op.snapshot.version}
    updates = check_assignments(op, updates)
    if op.features is not None:
        op.features = op.features.for_assignments(updates)
    pred = compile_predicate(predicate, op.schema, op.engine)
    assignments = _Assignments(op, updates)
    context = f"cannot evaluate the update {updates!r}"
    files = op.candidates(pred.prune, pred.prune_filters)
    updated = 0
    if isinstance(op.deleter, CopyOnWrite) and not op.records_changes:
        # The new values need only the columns the expressions read: computed per scanned group, they go
        # with each file's rewrite, which reads the file anyway (one read per file, as a delete).
        trees = simple_value_trees(updates, op.schema) or {col: parse_expression(e) for col, e in updates.items()}
        reads = set().union(*(table_columns(t, op.schema.names) for t in trees.values()))
        exact = exact_values(trees, op.schema)
        for group in op.scan(files, None if pred.columns is None else pred.columns | reads):
            updated += _update_group(op, files, group, pred, assignments, context, exact)
    else:  # (the old rows are recorded, or written elsewhere: files are read before the update)
        for group in op.scan(files, pred.columns):
            hits = dict(group.selected(op.engine, pred))
            for chunk in op.chunks(files, sorted(hits)):
                updated += _update_files(op, files, {fi: hits[fi] for fi in chunk}, assignments, context, group)
    op.finish()
    version = op.commit(
        "UPDATE",
        {"predicate": predicate_parameter(pred.text)},
        {"numUpdatedRows": updated, "numRemovedFiles": op.num_removed_files, "numAddedFiles": op.num_added_files, "numCopiedRows": op.copied_rows},
    )
    metrics.update(num_updated_rows=updated, num_added_files=op.num_added_files, num_removed_files=op.num_removed_files, num_copied_rows=op.copied_rows)
    return {**metrics, "version": op.snapshot.version if version is None else version}

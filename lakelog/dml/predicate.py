"""Row predicates of row-level changes: SQL text (DuckDB), DNF tuples or pyarrow expressions, checked
against the table, with the file-pruning relaxation and the columns they read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..schema import arrow_values, collations
from ..errors import PredicateError, UnsupportedExpressionError
from ..expressions.sql_skipping import prune_expression
from ..expressions.filters import _references
from ..schema.types import ColumnNames
from ..expressions.sql import Engine, collated_sql, filters_to_sql, table_columns
from ..expressions.simple_sql import parse_simple
from .exact_predicate import exact_expression, filter_table, prune_filters
from .internal_columns import POS


@dataclass
class Predicate:
    """A row predicate: SQL text (DuckDB), a pyarrow expression, or None (every row)."""

    sql: str | None = None
    expression: pc.Expression | None = None
    prune: pc.Expression | None = None  # a relaxation used to skip files (None: every file)
    columns: set[str] | None = None  # table columns it reads (None: unknown)
    text: str | None = None  # as recorded in commitInfo
    # The SQL predicate as a pyarrow expression selecting exactly its rows, when it is that simple
    # (``exact_predicate``), and the column types it was checked for: rows whose columns have these
    # types are selected without the engine.
    exact: pc.Expression | None = None
    exact_types: dict[str, pa.DataType] | None = None
    # ``prune`` as DNF filter tuples (``exact_predicate.prune_filters``), when the predicate is that simple:
    # files are skipped over all stats at once (``lakelog.read.pruning``), without a pyarrow dataset.
    prune_filters: list | None = None

    def exact_for(self, schema: pa.Schema) -> pc.Expression | None:
        """``exact`` if the columns it reads have in ``schema`` the types it was made for, else None."""
        if self.exact is None or self.exact_types is None:
            return None
        for name, t in self.exact_types.items():
            if schema.get_field_index(name) < 0 or schema.field(name).type != t:
                return None
        return self.exact

    @property
    def everything(self) -> bool:
        return self.sql is None and self.expression is None


def reads_only_partitions(columns: set[str] | None, partition_columns: list[str]) -> bool:
    """Whether a condition reading ``columns`` reads partition columns only (at least one): a file has
    one value per partition column, so such a condition selects whole files."""
    return bool(columns) and columns <= set(partition_columns)


def compile_predicate(predicate: Any, schema: pa.Schema, engine: Engine, what: str = "predicate") -> Predicate:
    """Check ``predicate`` (SQL text, DNF tuples, a pyarrow expression or None) against ``schema``."""
    if predicate is None:
        return Predicate()
    if isinstance(predicate, pc.Expression):
        import pyarrow.dataset as ds  # (imports pandas: only for a predicate given as an expression)

        try:
            ds.dataset(schema.empty_table()).to_table(filter=predicate)
        except (pa.ArrowException, TypeError) as e:
            raise PredicateError(f"invalid {what} {predicate}: {e}") from None
        for name, collation in collations.table_collations(schema).items():
            if _references(schema.empty_table(), predicate, name):
                raise UnsupportedExpressionError(
                    f"the {what} {predicate} reads the column {name!r}, which has the collation {collation.identifier}; a "
                    "pyarrow.compute expression compares it in binary order. Give the predicate as SQL text or DNF tuples, "
                    "which compare under the collation"
                )
        return Predicate(expression=predicate, prune=predicate, text=str(predicate))
    if isinstance(predicate, (list, tuple)):
        predicate = filters_to_sql(predicate)
    simple = _simple_predicate(predicate, schema, engine)
    if simple is not None:
        return simple
    relation = engine.empty_relation(schema)
    tree = engine.check_predicate(predicate, relation, what)
    columns = table_columns(tree, schema.names)
    collated = bool(collations.table_collations(schema))
    sql = collated_sql(tree, table_collation_of(schema), predicate) if collated else None
    exact = None if collated else exact_expression(tree, schema)
    return Predicate(sql=sql or predicate, prune=prune_expression(tree, schema, engine), columns=columns, text=predicate,
                     exact=exact, exact_types={c: schema.field(c).type for c in columns} if exact is not None else None)


def _simple_predicate(text: Any, schema: pa.Schema, engine: Engine) -> Predicate | None:
    """The predicate without the engine, when its text is in the grammar ``parse_simple`` reads (giving
    the engine's own parse tree) and that tree is an ``exact_expression`` over ``schema``: its columns
    exist, are plain signed integers or doubles compared with numeric literals, so the engine would bind
    it as this boolean condition. None otherwise (the engine parses and checks it)."""
    tree = parse_simple(text)
    if tree is None or collations.table_collations(schema):
        return None
    exact = exact_expression(tree, schema)
    if exact is None:
        return None
    columns = table_columns(tree, schema.names)
    prune = prune_expression(tree, schema, engine)
    return Predicate(sql=text, prune=prune, columns=columns, text=text, exact=exact, exact_types={c: schema.field(c).type for c in columns},
                     prune_filters=prune_filters(tree, schema) if prune is not None else None)


def table_collation_of(schema: pa.Schema, resolve=None):
    """A column reference's collation (``collations.at_path``). ``resolve`` maps a name path to a table
    column (a merge's ``target.c`` or ``c``); by default the first name is the column (ignoring case)."""
    index = ColumnNames(schema.names)

    def of(ref: tuple[str, ...]):
        if resolve is None:
            return collations.at_path(schema, index.find(ref[0]), ref[1:])
        for k in (2, 1):  # alias.column.field... first, then column.field...
            if len(ref) >= k and (col := resolve(ref[:k])) is not None:
                return collations.at_path(schema, col, ref[k:])
        return None

    return of


def select_positions(engine: Engine, predicate: Predicate, table: pa.Table) -> np.ndarray:
    """Positions (into ``table``) of the rows the predicate selects; NULL is not selected."""
    if predicate.everything:
        return np.arange(table.num_rows, dtype=np.int64)
    expression = predicate.expression if predicate.expression is not None else predicate.exact_for(table.schema)
    if expression is not None:
        pos = arrow_values.from_numpy(np.arange(table.num_rows, dtype=np.int64))
        hit = filter_table(table.append_column(POS, pos), expression, [POS])
        return np.sort(arrow_values.to_numpy(hit.column(0)))
    return engine.positions(table, predicate.sql, f"cannot evaluate the predicate {predicate.sql!r}")

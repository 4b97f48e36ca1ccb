"""What a table asks of every row written into it, enforced in one place.

``WriterFeatures.of(metadata)`` reads them from a table's ``metaData`` (None when there are none):

* CHECK constraints (``delta.constraints.<name>`` properties) and column invariants (legacy
  ``delta.invariants`` field metadata): every new row must make the expression true. As in Delta, NULL
  counts as a violation.
* Generated columns (``delta.generationExpression`` field metadata): computed when the write does not
  give the column, checked when it does (a given value must equal the computed one, NULLs included).
* Column defaults (``CURRENT_DEFAULT`` field metadata, the ``allowColumnDefaults`` feature): the
  default is stored when an append does not give the column.
* Identity columns (``delta.identity.*`` field metadata): rows without a value get the next ones
  (``identity.py``; the commit raises the high water mark); an update never sets one, and a column
  generated always takes no given value (``for_input``, ``for_assignments``).

Every path that writes new rows (appends and overwrites, the rows an update or merge changes or inserts,
in Python and in Spark tasks) hands its batches to ``DataWriter``, which calls ``WriterFeatures.apply``
once per batch; rows copied unchanged out of a rewritten file are not checked again (they were when they
were written), and DELETE is always allowed, as in Delta.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Any, Iterable

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConstraintViolationError, GeneratedColumnError, PredicateError, SchemaMismatchError
from .expressions import condition_sql, evaluation_error, failing_row, referenced_columns, value_sql
from .identity import START as IDENTITY_START, IdentityColumn, identity_columns, refuse_explicit, refuse_updates

CONSTRAINT_PREFIX = "delta.constraints."
GENERATION_KEY = "delta.generationExpression"
INVARIANTS_KEY = "delta.invariants"
DEFAULT_KEY = "CURRENT_DEFAULT"


@dataclass(frozen=True)
class Constraint:
    """A CHECK constraint (``kind="CHECK constraint"``) or a column invariant (``kind="invariant"``)."""

    name: str
    expression: str
    kind: str = "CHECK constraint"

    @property
    def label(self) -> str:
        return f"CHECK constraint {self.name}" if self.kind == "CHECK constraint" else f"invariant on column {self.name!r}"


@dataclass(frozen=True)
class GeneratedColumn:
    name: str
    expression: str

    @property
    def inputs(self) -> frozenset[str]:
        """The columns the expression reads (lower-cased)."""
        return referenced_columns(self.expression)


def table_constraints(configuration: dict[str, str]) -> dict[str, str]:
    """The table's CHECK constraints: name -> Spark SQL expression."""
    return {k[len(CONSTRAINT_PREFIX):]: v for k, v in configuration.items() if k.startswith(CONSTRAINT_PREFIX)}


def _invariants(fields: list[dict], prefix: str = "") -> Iterable[Constraint]:
    for f in fields:
        path = prefix + f["name"]
        raw = (f.get("metadata") or {}).get(INVARIANTS_KEY)
        if raw:
            try:
                expr = orjson.loads(raw)["expression"]["expression"]
            except (orjson.JSONDecodeError, KeyError, TypeError):
                raise SchemaMismatchError(f"column {path!r} has an invariant lakelog cannot read ({raw!r})") from None
            yield Constraint(path, expr, "invariant")
        t = f.get("type")
        if isinstance(t, dict) and t.get("type") == "struct":
            yield from _invariants(t["fields"], path + ".")


@dataclass(frozen=True)
class WriterFeatures:
    """The constraints, generated columns and defaults of a table, applied to batches being written.

    ``computed``: the generated and defaulted columns this write computes (it does not give them);
    ``apply`` checks the other generated columns. Picklable (Spark tasks receive it); the engine is
    made per process when first needed.
    """

    constraints: tuple[Constraint, ...] = ()
    generated: tuple[GeneratedColumn, ...] = ()
    defaults: tuple[tuple[str, str], ...] = ()
    identity: tuple[IdentityColumn, ...] = ()
    computed: frozenset[str] = frozenset()
    task: int | None = None  # the Spark task (partition id) of a job writing in parallel; None: the commit's only writer
    _state: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, schema_string: str, configuration: dict[str, str]) -> "WriterFeatures | None":
        """The writer features of a table with this schema string and configuration (None: none)."""
        constraints = [Constraint(n, e) for n, e in sorted(table_constraints(configuration).items())]
        generated, defaults, identity = [], [], []
        if INVARIANTS_KEY in schema_string or GENERATION_KEY in schema_string or DEFAULT_KEY in schema_string or IDENTITY_START in schema_string:
            fields = orjson.loads(schema_string)["fields"]
            identity = identity_columns(fields)
            constraints.extend(_invariants(fields))
            for f in fields:
                meta = f.get("metadata") or {}
                if meta.get(GENERATION_KEY):
                    generated.append(GeneratedColumn(f["name"], meta[GENERATION_KEY]))
                elif meta.get(DEFAULT_KEY) is not None:
                    defaults.append((f["name"], meta[DEFAULT_KEY]))
        if not constraints and not generated and not defaults and not identity:
            return None
        return cls(tuple(constraints), tuple(generated), tuple(defaults), tuple(identity))

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_state"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        object.__setattr__(self, "_state", {})

    # ------------------------------------------------------------ which columns a write computes
    @property
    def computable(self) -> set[str]:
        return {g.name for g in self.generated} | {n for n, _ in self.defaults} | {c.name for c in self.identity}

    def for_task(self, task: int) -> "WriterFeatures":
        """These features for Spark task ``task`` (its partition id) of a job whose tasks write in
        parallel (identity values: ``identity.spark_index``)."""
        return replace(self, task=task, _state={})

    def drawing_from(self, marks: dict[str, int | None]) -> "WriterFeatures":
        """These features with identity columns drawing beyond ``marks`` (name -> high water mark; columns
        not named keep theirs): a writer that continues where other writers of its operation stopped."""
        identity = tuple(replace(c, high_water_mark=marks[c.name]) if c.name in marks else c for c in self.identity)
        return self if identity == self.identity else replace(self, identity=identity, _state={})

    def computing(self, columns: Iterable[str]) -> "WriterFeatures":
        """These features for a write that computes ``columns`` (those generated or defaulted)."""
        lower = {c.lower() for c in columns}
        return replace(self, computed=frozenset(c for c in self.computable if c.lower() in lower), _state={})

    def for_input(self, given: Iterable[str]) -> "WriterFeatures":
        """These features for a write whose data has the columns ``given``: the generated, defaulted and
        identity columns it lacks are computed; giving an identity column that does not allow explicit
        values is refused (IdentityColumnError)."""
        given = list(given)
        refuse_explicit(self.identity, given)
        lower = {c.lower() for c in given}
        return self.computing(c for c in self.computable if c.lower() not in lower)

    def for_assignments(self, *assigned: Iterable[str], inserts: Iterable[Iterable[str]] = ()) -> "WriterFeatures":
        """These features for an update or merge whose clauses assign ``assigned`` (one collection of
        columns per clause that updates rows) and ``inserts`` (per clause that inserts rows, the columns
        it gives): a generated column is recomputed unless every such clause assigns it (its inputs may
        have changed), else checked. As Delta, an update of an identity column is refused, and so is an
        insert that gives one generated always (IdentityColumnError); an insert that leaves one out
        draws its values."""
        updates = [list(a) for a in assigned]
        inserted = [list(a) for a in inserts]
        for a in updates:
            refuse_updates(self.identity, a)
        for a in inserted:
            refuse_explicit(self.identity, a, "the insert clause")
        sets = [{c.lower() for c in a} for a in updates + inserted]
        return self.computing(g.name for g in self.generated if any(g.name.lower() not in s for s in sets))

    # ------------------------------------------------------------ applying
    def _engine(self):
        state = self._state
        if "engine" not in state:
            from ..sql import Engine

            state["engine"] = Engine()
            state["lock"] = threading.Lock()
        return state["engine"], state["lock"]

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` with its computed columns filled; raises ConstraintViolationError (GeneratedColumnError
        for a generated column given a different value) naming the rule and an offending row."""
        if batch.num_rows == 0:
            return batch
        engine, lock = self._engine()
        with lock:
            if self.identity:
                batch = self._identities(batch)
            if self.generated or self.computed:
                batch = self._generate(engine, batch)
            if self.constraints:
                self._check(engine, batch)
        return batch

    def _identities(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Rows without a value in an identity column (NULL, or the column absent) get the next values
        (IdentityOverflowError past the bigint range)."""
        import numpy as np

        drawn = self._state.setdefault("drawn", {})
        columns = list(batch.columns)
        for col in self.identity:
            idx = batch.schema.get_field_index(col.name)
            values = batch.column(idx)
            missing = values.null_count
            if not missing:
                continue
            n = drawn.get(col.name, 0)
            new = col.draw(self.task, n, missing)
            drawn[col.name] = n + missing
            if missing == len(values):
                columns[idx] = pa.array(new, values.type)
            else:
                null = values.is_null().to_numpy(zero_copy_only=False)
                filled = np.where(null, new[np.maximum(np.cumsum(null) - 1, 0)], values.fill_null(0).to_numpy())
                columns[idx] = pa.array(filled, values.type)
        return pa.RecordBatch.from_arrays(columns, schema=batch.schema)

    def _generate(self, engine, batch: pa.RecordBatch) -> pa.RecordBatch:
        exprs: list[tuple[str, str, str, str, bool]] = []  # (column, engine SQL, label, expression, generated)
        schema = batch.schema
        for g in self.generated:
            what = f"generation expression of column {g.name!r}"
            exprs.append((g.name, value_sql(g.expression, schema, what, schema.field(g.name).type), f"generated column {g.name!r}",
                          g.expression, True))
        identity = {c.name for c in self.identity}
        for name, text in self.defaults:
            if name in self.computed and name not in identity:
                what = f"default of column {name!r}"
                exprs.append((name, value_sql(text, schema, what, schema.field(name).type, default=True), what, text, False))
        if not exprs:
            return batch
        selects = [f"CAST(({sql}) AS {engine.sql_type(schema.field(name).type)})" for name, sql, _, _, _ in exprs]
        table = pa.Table.from_batches([batch])
        # Row k of the values belongs to row k of the batch (evaluate carries positions; the engine keeps no order).
        try:
            values = engine.evaluate(table, ", ".join(selects), "; ".join(f"{label} ({text})" for _, _, label, text, _ in exprs))
        except PredicateError as e:
            self._raise_evaluation(engine, table, [(label, text, name, select) for (name, _, label, text, _), select in zip(exprs, selects)], e)
        columns = list(batch.columns)
        for i, (name, _, label, text, generated) in enumerate(exprs):
            label = f"{label} ({text})"
            idx = batch.schema.get_field_index(name)
            f = batch.schema.field(idx)
            value = values.column(i).combine_chunks().cast(f.type)
            if name in self.computed:
                if not f.nullable and value.null_count:
                    row = batch.slice(pc.index(pc.is_null(value), True).as_py(), 1).to_pylist()[0]
                    raise ConstraintViolationError(f"{label} computes NULL for the non-nullable column {name!r} from row {_show(row)}; nothing was committed",
                                                   name, label, row)
                columns[idx] = value
            elif generated:
                given = batch.column(idx)
                same = pc.or_kleene(pc.fill_null(pc.equal(given, value), False), pc.and_(pc.is_null(given), pc.is_null(value)))
                if pa.types.is_floating(f.type):  # Spark's <=> holds NaN equal to NaN
                    same = pc.or_(same, pc.fill_null(pc.and_(pc.is_nan(given), pc.is_nan(value)), False))
                if not pc.all(same).as_py():
                    at = pc.index(same, False).as_py()
                    row = batch.slice(at, 1).to_pylist()[0]
                    raise GeneratedColumnError(
                        f"{label}: the data gives {given[at].as_py()!r} where the expression computes {value[at].as_py()!r}, in row {_show(row)}; "
                        f"nothing was committed. Leave the column out of the data (it is computed), or give the computed value",
                        name, label, row,
                    )
        return pa.RecordBatch.from_arrays(columns, schema=batch.schema)

    @staticmethod
    def _raise_evaluation(engine, table: pa.Table, rules: list[tuple[str, str, str, str]], error: PredicateError) -> None:
        """Raise ExpressionEvaluationError for the first rule (label, expression, name, select SQL) and row of
        ``table`` that fail to evaluate, as Spark in ANSI mode fails the write; else re-raise ``error``."""
        for label, text, name, select in rules:
            def runs(rows: pa.Table, select=select) -> None:
                engine.evaluate(rows, select, label)

            row = failing_row(table, runs)
            if row is not None:
                try:
                    runs(pa.Table.from_pylist([row], schema=table.schema))
                except PredicateError as e:
                    raise evaluation_error(label, text, name, row, e, _show) from None
        raise error

    def _check(self, engine, batch: pa.RecordBatch) -> None:
        table = pa.Table.from_batches([batch])
        sqls = [condition_sql(c.expression, batch.schema, c.label) for c in self.constraints]
        rel = engine.register(table)
        try:
            try:
                counts = engine.query(
                    "SELECT " + ", ".join(f"count(*) FILTER (WHERE NOT coalesce(({s}), false)) AS v{i}" for i, s in enumerate(sqls)) + f" FROM {rel}",
                    "; ".join(f"{c.label} ({c.expression})" for c in self.constraints),
                ).to_pylist()[0]
            except PredicateError as e:
                self._raise_evaluation(engine, table, [(c.label, c.expression, c.name, f"({s})") for c, s in zip(self.constraints, sqls)], e)
            for (n, c, s) in zip(counts.values(), self.constraints, sqls):
                if n:
                    sample = engine.query(f"SELECT * FROM {rel} WHERE NOT coalesce(({s}), false) LIMIT 1", c.label).to_pylist()[0]
                    raise ConstraintViolationError(
                        f"{c.label} ({c.expression}) is violated by {n} of the {batch.num_rows} rows being written, e.g. {_show(sample)} "
                        f"(a NULL result is a violation, as in Delta); nothing was committed",
                        c.name, c.expression, sample,
                    )
        finally:
            engine.unregister(rel)

    def check_supported(self, schema: pa.Schema) -> None:
        """Translate every expression over ``schema`` (the table's): ``UnsupportedExpressionError`` naming
        one lakelog cannot evaluate exactly as Spark, before any row is written."""
        for c in self.constraints:
            condition_sql(c.expression, schema, c.label)
        for g in self.generated:
            if g.name in schema.names:
                value_sql(g.expression, schema, f"generation expression of column {g.name!r}", schema.field(g.name).type)
        for name, text in self.defaults:
            if name in schema.names:
                value_sql(text, schema, f"default of column {name!r}", schema.field(name).type, default=True)

    def check_expressions(self, schema: pa.Schema) -> None:
        """Translate and bind every expression against an empty table of ``schema`` (PredicateError, or
        UnsupportedExpressionError, when one does not)."""
        self.check_supported(schema)
        engine, lock = self._engine()
        with lock:
            rel = engine.empty_relation(schema)
            try:
                for c in self.constraints:
                    engine.query(f"SELECT ({condition_sql(c.expression, schema, c.label)}) FROM {rel}", f"invalid {c.label} {c.expression!r}")
                for g in self.generated:
                    if g.name in schema.names:
                        what = f"generation expression of column {g.name!r}"
                        engine.query(f"SELECT ({value_sql(g.expression, schema, what, schema.field(g.name).type)}) FROM {rel}",
                                     f"invalid {what} {g.expression!r}")
                for name, text in self.defaults:
                    if name in schema.names:
                        what = f"default of column {name!r}"
                        engine.query(f"SELECT ({value_sql(text, schema, what, schema.field(name).type, default=True)}) FROM {rel}",
                                     f"invalid {what} {text!r}")
            finally:
                engine.unregister(rel)


def _show(row: dict[str, Any]) -> str:
    text = ", ".join(f"{k}={v!r}" for k, v in row.items())
    return "{" + (text if len(text) <= 300 else text[:297] + "...") + "}"


__all__ = ["Constraint", "GeneratedColumn", "WriterFeatures", "table_constraints", "CONSTRAINT_PREFIX", "GENERATION_KEY"]

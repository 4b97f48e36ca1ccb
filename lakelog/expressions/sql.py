"""SQL predicates and expressions over Arrow data, with DuckDB as the embedded engine.

Only the row-level operations (``lakelog.dml``) import this module, so plain reads and writes never
load DuckDB. What it does:

* ``parse_expression``: DuckDB's own parser (``json_serialize_sql``) turns the text into an expression
  tree; anything that is not exactly one expression (a second statement, a set operation, a
  subquery, a window function, ``*``) is refused, so the text can be embedded in a larger query.
* ``Engine``: one DuckDB connection per operation (UTC session time zone); Arrow tables are
  registered zero-copy. Binding an expression against empty tables of the right schemas finds
  unknown columns and type errors before any data is read; every DuckDB error becomes a
  ``PredicateError`` that quotes the expression.
* ``filters_to_sql``: DNF filter tuples as SQL text, so they follow the same three-valued logic.

Two rules hold for every query:

* **A result's row order means nothing.** DuckDB plans an ``IN`` list, among other shapes, as a join,
  and with more than one thread its result comes back in another order than its input, whatever
  ``preserve_insertion_order`` says. Never pair the k-th result row with the k-th input row: carry
  the row's identity through the query (``Engine.evaluate`` and ``Engine.positions`` carry a position
  column and put the result back in input order; the row-level operations carry FILE and ROW).
* **One thread at a time per connection.** An ``Engine`` serializes its own calls (a lock around its
  connection and its name counter), so it may be handed to worker threads, but queries on one engine
  never run in parallel; a thread that needs its own parallel queries makes its own ``Engine``.

Skipping files by a predicate is ``lakelog.expressions.sql_skipping``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
import re
import threading
from typing import Any, Callable, Iterable

import numpy as np
import orjson
import pyarrow as pa

from ..schema import arrow_values, collations, geospatial
from . import sql_variants
from ..environment import positive_int
from ..errors import PredicateError
from ..schema.types import VARIANT_STORAGE, ColumnNames, has_variant, is_variant_field
from ..schema.variant_columns import without_marks

_REFUSED_CLASSES = {"SUBQUERY": "a subquery", "WINDOW": "a window function", "STAR": "'*'", "PARAMETER": "a parameter"}
_parser_lock = threading.Lock()
_parser = None  # (a DuckDB connection, made on first use)


def _duckdb():
    """The ``duckdb`` module, imported on first use: a row-level change whose predicate and values
    pyarrow evaluates exactly (``lakelog.dml.exact_predicate``) never loads it (~16 MiB, 50 ms)."""
    import duckdb

    return duckdb


def quote_ident(name: str) -> str:
    """A SQL identifier for ``name`` (always quoted, so any column name works)."""
    return '"' + name.replace('"', '""') + '"'


def quote_string(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


_ENGINE_PREFIX = re.compile(r"^(?:Binder|Catalog|Parser|Conversion|Invalid Input|Not implemented|Out of Range|Constraint) Error: ")
_QUOTED = re.compile(r'"((?:[^"]|"")+)"')


def _suggest(names: list[str]) -> str:
    # DuckDB lists its candidates closest first.
    names = [n for n in names if not n.split(".")[-1].startswith("__lakelog")]
    return f"; did you mean {names[0]!r}?" if names else ""


def engine_message(e: BaseException) -> str:
    """A DuckDB error in the user's terms: one line, without DuckDB's error class or its lists of
    function signatures; an unknown column or function comes with DuckDB's closest candidates."""
    text = str(e).strip()
    if not text:
        return type(e).__name__
    lines = text.splitlines()
    first = _ENGINE_PREFIX.sub("", " ".join(lines[0].split()))
    rest = " ".join(lines[1:])
    m = re.match(r'Referenced column "(.+?)" not found in FROM clause!', first)
    if m:
        candidates = rest.split("Candidate bindings:", 1)[1] if "Candidate bindings:" in rest else ""
        return f"unknown column {m.group(1)!r}{_suggest(_QUOTED.findall(candidates))}"
    m = re.match(r'Referenced table "(.+?)" not found!', first)
    if m:
        candidates = rest.split("Candidate tables:", 1)[1] if "Candidate tables:" in rest else ""
        return f"unknown table or alias {m.group(1)!r}{_suggest(_QUOTED.findall(candidates))}"
    m = re.match(r'Values list "(.+?)" does not have a column named "(.+?)"', first)
    if m:
        return f"unknown column {m.group(1) + '.' + m.group(2) if not m.group(1).startswith('__lakelog') else m.group(2)!r}"
    m = re.match(r"(?:Scalar|Aggregate|Table) Function with name (\S+) does not exist!", first)
    if m:
        return f"unknown function {m.group(1)!r}{_suggest(_QUOTED.findall(rest.split('Did you mean', 1)[1]) if 'Did you mean' in rest else [])}"
    m = re.match(r"No function matches the given name and argument types '(.+?)\((.*)\)'", first)
    if m:
        return (f"{m.group(1)!r} cannot take arguments of types ({m.group(2).replace('_LITERAL', '')}); "
                "cast them to matching types, e.g. CAST(x AS DOUBLE)")
    return first


def _parse_tree(sql: str) -> dict:
    global _parser
    with _parser_lock:
        if _parser is None:
            _parser = _duckdb().connect()
        raw = _parser.execute("SELECT json_serialize_sql(?)", [sql]).fetchall()[0][0]
    return orjson.loads(raw)


def parse_expression(text: Any, what: str = "predicate") -> dict:
    """DuckDB's parse tree of one SQL expression; ``PredicateError`` unless ``text`` is exactly one
    expression without subqueries, window functions or ``*``."""
    if not isinstance(text, str):
        raise PredicateError(f"the {what} must be SQL text (a str), not {type(text).__name__}: {text!r}")
    if not text.strip():
        raise PredicateError(f"the {what} is empty; give a SQL expression such as \"x > 3\"")
    tree = _parse_tree(f"SELECT ({text})")
    if tree.get("error"):
        raise PredicateError(f"cannot parse the {what} {text!r}: {tree.get('error_message')}")
    statements = tree.get("statements") or []
    node = statements[0].get("node") if len(statements) == 1 else None
    if (
        node is None
        or node.get("type") != "SELECT_NODE"
        or len(node.get("select_list") or []) != 1
        or (node.get("from_table") or {}).get("type") != "EMPTY"
        or any(node.get(k) for k in ("where_clause", "having", "qualify", "sample", "group_expressions", "modifiers"))
        or (node.get("cte_map") or {}).get("map")
    ):
        raise PredicateError(f"the {what} {text!r} is not a single SQL expression")
    expr = node["select_list"][0]
    for n in _walk(expr):
        refused = _REFUSED_CLASSES.get(n.get("class"))
        if refused:
            raise PredicateError(f"the {what} {text!r} contains {refused}, which row-level operations do not allow")
    return expr


def _walk(node: Any):
    if isinstance(node, dict):
        if "class" in node:
            yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def unparse(expr: dict) -> str:
    """SQL text of an expression parse tree (DuckDB's own deparser)."""
    stmt = _parse_tree("SELECT 1")
    stmt["statements"][0]["node"]["select_list"] = [expr]
    with _parser_lock:
        raw = _parser.execute("SELECT json_deserialize_sql(?)", [orjson.dumps(stmt).decode()]).fetchall()[0][0]
    if not raw.startswith("SELECT "):
        raise RuntimeError(f"DuckDB deparsed an expression as {raw!r}")
    return raw[len("SELECT "):]


_icu_names: set[str] | None = None


def has_icu_collation(name: str) -> bool:
    """Whether DuckDB (its ICU extension) knows the collation ``name``."""
    global _icu_names
    with _parser_lock:
        if _icu_names is None:
            try:
                _icu_names = {r[0] for r in _parser.execute("SELECT collname FROM pragma_collations()").fetchall()}
            except _duckdb().Error:
                _icu_names = set()
    return name in _icu_names


def collated_sql(tree: dict, collation_of: Callable[[tuple[str, ...]], "collations.Collation | None"], text: str,
                 value: bool = False) -> str | None:
    """The SQL text of a predicate's (``value``: a new value's) parse tree with comparisons of collated
    columns made under their collation (``collations.collated_tree``); None when it compares none."""
    out = collations.collated_tree(tree, collation_of, lambda sql: parse_expression(sql, "expression"), text, has_icu_collation, value)
    return None if out is None else unparse(out)


def column_refs(expr: dict) -> list[tuple[str, ...]]:
    """The column references of a parse tree, as name paths (``("target", "id")``, ``("x",)``)."""
    return [tuple(n["column_names"]) for n in _walk(expr) if n.get("class") == "COLUMN_REF"]


def table_columns(expr: dict, names: Iterable[str]) -> set[str]:
    """The columns among ``names`` (a table's) that a parse tree reads: any part of a reference naming one
    (ignoring case, as Delta resolves names)."""
    index = ColumnNames(names)
    return {found for ref in column_refs(expr) for part in ref if (found := index.find(part)) is not None}


def and_terms(node: dict) -> list[dict]:
    """The conjuncts of a parse tree (the tree itself when it is no AND)."""
    if node.get("type") == "CONJUNCTION_AND":
        return [t for c in node["children"] for t in and_terms(c)]
    return [node]


def equality_column_pairs(tree: dict, resolve_target: Callable, resolve_source: Callable) -> list[tuple[str, str]]:
    """``(target column, source column)`` of each ``a = b`` conjunct of a merge condition comparing a
    target column with a source column (either side first); the resolvers map a name path to a column
    name or None."""
    pairs = []
    for term in and_terms(tree):
        if term.get("type") != "COMPARE_EQUAL":
            continue
        sides = [term["left"], term["right"]]
        if not all(s.get("class") == "COLUMN_REF" for s in sides):
            continue
        refs = [tuple(s["column_names"]) for s in sides]
        t_col, s_col = resolve_target(refs[0]), resolve_source(refs[1])
        if t_col is None or s_col is None:
            t_col, s_col = resolve_target(refs[1]), resolve_source(refs[0])
        if t_col is not None and s_col is not None:
            pairs.append((t_col, s_col))
    return pairs


# ---------------------------------------------------------------- the engine

THREADS_VARIABLE = "LAKELOG_SQL_THREADS"
POSITION = "__lakelog_position"  # a row's position in the table a query reads (see Engine.evaluate)


def engine_threads() -> int:
    """DuckDB's threads per engine: ``LAKELOG_SQL_THREADS`` if set, else one per core."""
    n = positive_int(THREADS_VARIABLE, "DuckDB's threads per operation")
    if n is not None:
        return n
    return max(1, os.cpu_count() or 1)


class Engine:
    """One DuckDB connection for one operation: Arrow tables in, Arrow tables out.

    Calls are serialized by a lock (DuckDB's connection is not to be used by two threads at once), so
    the order of a query's result rows never says which input row they came from: see ``evaluate``."""

    def __init__(self, threads: int | None = None) -> None:
        """``threads``: DuckDB's threads (default ``engine_threads()``). The connection is made on first
        use: an operation that never queries loads no DuckDB."""
        self._threads = threads or engine_threads()  # (a bad LAKELOG_SQL_THREADS is refused here)
        self._con = None
        self._closed = False
        self._lock = threading.RLock()
        self._types: dict[pa.DataType, str] = {}
        self._n = 0
        self._variants: dict[str, pa.Field] = {}  # columns holding variants, of every registered table (lower-case names)

    @property
    def con(self):
        """The DuckDB connection (UTC session time zone, lakelog's functions registered)."""
        with self._lock:
            if self._con is None:
                if self._closed:
                    raise RuntimeError("the SQL engine is closed")
                from . import sql_java_floats

                con = _duckdb().connect()
                con.execute("SET TimeZone = 'UTC'")
                con.execute(f"SET threads = {self._threads}")
                sql_variants.register(con)
                sql_java_floats.register(con)
                self._con = con
            return self._con

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._con is not None:
                self._con.close()

    def register(self, table: pa.Table, name: str | None = None) -> str:
        """Make ``table`` queryable (zero-copy) under ``name`` (a fresh name by default)."""
        with self._lock:
            if name is None:
                self._n += 1
                name = f"__lakelog_rel_{self._n}"
            if has_variant(table.schema):
                self._variants.update((f.name.lower(), f) for f in table.schema if has_variant(f))
                table = without_marks(table)
            self.con.register(name, geospatial.plain(table))
        return name

    def unregister(self, name: str) -> None:
        with self._lock:
            self.con.unregister(name)

    def query(self, sql: str, context: str) -> pa.Table:
        """Run ``sql``; a DuckDB error becomes a PredicateError that names ``context`` (the user's text).
        The rows come in no particular order unless ``sql`` sorts them."""
        try:
            with self._lock:
                return self.con.sql(sql).to_arrow_table()
        except _duckdb().Error as e:
            raise PredicateError(f"{context}: {engine_message(e)}") from None

    def evaluate(self, table: pa.Table, select_list: str, context: str) -> pa.Table:
        """``SELECT <select_list>`` over ``table``'s rows: row k of the result is computed from row k of
        ``table``. The query carries each row's position and the result is put back in input order,
        since the engine keeps no order where it plans a join (an ``IN`` list, for one)."""
        n = table.num_rows
        out = self._query_positioned(table, lambda rel: f"SELECT {POSITION}, {select_list} FROM {rel}", context)
        position = out.column(0).to_numpy()
        out = out.drop_columns([POSITION])
        if len(position) == n and np.array_equal(position, np.arange(n)):
            return out
        return out.take(pa.array(_inverse_permutation(position, n)))

    def positions(self, table: pa.Table, predicate_sql: str, context: str) -> np.ndarray:
        """Ascending positions of the rows of ``table`` for which ``predicate_sql`` is TRUE (not NULL)."""
        hit = self._query_positioned(table, lambda rel: f"SELECT {POSITION} FROM {rel} WHERE ({predicate_sql})", context)
        return np.sort(hit.column(0).to_numpy())

    def _query_positioned(self, table: pa.Table, sql: Callable[[str], str], context: str) -> pa.Table:
        """Run the query ``sql(name)`` over ``table`` registered as ``name`` with each row's position as
        ``POSITION`` (the query text is built around the name, never formatted: user SQL may hold braces)."""
        name = self.register(table.append_column(POSITION, pa.array(np.arange(table.num_rows, dtype=np.int64))))
        try:
            return self.query(sql(name), context)
        finally:
            self.unregister(name)

    def mask(self, table: pa.Table, predicate_sql: str, context: str) -> np.ndarray:
        """One bool per row of ``table``: whether ``predicate_sql`` is TRUE for it (NULL is not)."""
        out = np.zeros(table.num_rows, dtype=bool)
        out[self.positions(table, predicate_sql, context)] = True
        return out

    def result_types(self, sql: str, context: str) -> list[str]:
        """The DuckDB types of the columns of ``sql`` (binds it without running it)."""
        try:
            with self._lock:
                return [str(t) for t in self.con.sql(sql).types]
        except _duckdb().Error as e:
            raise PredicateError(f"{context}: {engine_message(e)}") from None

    def sql_type(self, t: pa.DataType) -> str:
        """DuckDB's name for the Arrow type ``t`` (as DuckDB reads it from Arrow; a geometry or geography
        is its WKB, a BLOB)."""
        t = geospatial.plain_type(t)
        with self._lock:
            name = self._types.get(t)
            if name is None:
                probe = self.register(pa.table({"v": pa.array([], t)}))
                name = str(self.con.sql(f"SELECT v FROM {probe}").types[0])
                self.unregister(probe)
                self._types[t] = name
        return name

    def empty_relation(self, schema: pa.Schema) -> str:
        """A registered empty table of ``schema`` (binding checks without data)."""
        return self.register(schema.empty_table())

    # ------------------------------------------------------------ validation
    def _variant_ref(self, parts: tuple[str, ...]) -> bool:
        """Whether a column reference (a name path, maybe qualified) reaches a value holding a variant."""
        for i, part in enumerate(parts):
            f = self._variants.get(part.lower())
            if f is None:
                continue
            for sub in parts[i + 1:]:
                if is_variant_field(f):
                    return True  # (a variant's binaries are no values to compute with either)
                if not pa.types.is_struct(f.type) or f.type.get_field_index(sub) < 0:
                    return False
                f = f.type.field(sub)
            return has_variant(f)
        return False

    def _check_variant_refs(self, tree: dict, text: str, what: str, copy_allowed: bool = False) -> None:
        """Refuse a variant in anything but ``IS [NOT] NULL`` (or, ``copy_allowed``, as the whole value of an
        assignment): variants have no equality, order or arithmetic (as in Spark), and DuckDB would
        compare their binaries. ``parse_json`` makes a variant: allowed only as the whole value (``copy_allowed``)."""
        for n in _walk(tree):
            if sql_variants.is_call(n) and not (copy_allowed and n is tree):
                raise PredicateError(
                    f"the {what} {text!r} uses parse_json(...) inside a larger expression; its result is a variant, which has no "
                    "equality or order (as in Spark): parse_json(...) is only allowed as the whole value assigned to a variant column"
                )
        if not self._variants:
            return
        if copy_allowed and tree.get("class") == "COLUMN_REF":
            return
        allowed: set[int] = set()
        for n in _walk(tree):
            if n.get("class") == "OPERATOR" and n.get("type") in ("OPERATOR_IS_NULL", "OPERATOR_IS_NOT_NULL"):
                allowed.update(id(c) for c in n.get("children") or [] if c.get("class") == "COLUMN_REF")
        for n in _walk(tree):
            if n.get("class") == "COLUMN_REF" and id(n) not in allowed and self._variant_ref(tuple(n["column_names"])):
                name = ".".join(n["column_names"])
                raise PredicateError(
                    f"the {what} {text!r} uses the variant column {name!r} in a comparison or computation; variant values have "
                    f"no equality or order (as in Spark). Only {name} IS NULL / IS NOT NULL is allowed, and assigning a variant "
                    "column to another (or NULL)"
                )

    def check_predicate(self, text: str, from_sql: str, what: str = "predicate") -> dict:
        """Parse and bind a boolean expression over ``from_sql``; return its parse tree."""
        tree = parse_expression(text, what)
        self._check_variant_refs(tree, text, what)
        # A WHERE clause refuses aggregates and window functions, as a row predicate must.
        types = self.result_types(f"SELECT ({text}) FROM {from_sql} WHERE ({text})", f"invalid {what} {text!r}")
        if types[0] not in ("BOOLEAN", '"NULL"', "NULL"):
            raise PredicateError(f"the {what} {text!r} is of type {types[0]}, not a boolean condition")
        return tree

    def check_value(self, text: str, from_sql: str, target: pa.DataType, what: str) -> dict:
        """Parse and bind an expression whose value is stored as ``target``; return its parse tree."""
        tree = parse_expression(text, what)
        self._check_variant_refs(tree, text, what, copy_allowed=True)
        made = sql_variants.is_call(tree)
        if target == VARIANT_STORAGE and tree.get("class") != "COLUMN_REF" and not made and not (tree.get("class") == "CONSTANT" and (tree.get("literal") or {}).get("kind") == "NULL_LITERAL"):
            raise PredicateError(
                f"the {what} {text!r} is not a variant: a variant column takes another variant column, parse_json('<JSON text>') "
                "or parse_json(<string column>) (as Spark's parse_json), or NULL"
            )
        if made and target != VARIANT_STORAGE:
            raise PredicateError(f"the {what} {text!r} makes a variant, but the column is no variant column ({self.sql_type(target)})")
        (kind,) = self.result_types(f"SELECT ({text}) FROM {from_sql} WHERE FALSE", f"invalid {what} {text!r}")
        if "TIMESTAMP_NS" in kind:
            # Storing it would truncate silently; every write path refuses sub-microsecond values.
            raise PredicateError(
                f"the {what} {text!r} yields nanosecond timestamps ({kind}), which Delta's microsecond timestamps cannot "
                "store exactly; cast it yourself, e.g. CAST(... AS TIMESTAMP), to say how it is truncated"
            )
        cast = f"CAST(({text}) AS {self.sql_type(target)})"
        self.result_types(f"SELECT {cast} FROM {from_sql} WHERE (({text}) IS NULL)", f"invalid {what} {text!r}")
        return tree

    # ------------------------------------------------------------ literals
    def literal(self, node: dict, t: pa.DataType) -> pa.Scalar | None:
        """The value of a literal parse-tree node compared against a column of type ``t``, exactly as
        DuckDB compares them, or None when that is not certain (the comparison is then not translated)."""
        if node.get("class") == "CONSTANT":
            kind, text = node["literal"]["kind"], node["literal"]["text"]
            cast_to = None
        elif node.get("class") == "CAST" and not node.get("try_cast") and (node.get("child") or {}).get("class") == "CONSTANT":
            kind, text = node["child"]["literal"]["kind"], node["child"]["literal"]["text"]
            cast_to = str(node["type_expr"].get("type_name", "")).upper()
            if kind != "STRING":
                return None
        else:
            return None
        try:
            if pa.types.is_integer(t) and kind == "INTEGER" and cast_to is None:
                return arrow_values.scalar(int(text), t)
            if pa.types.is_string(t) and kind == "STRING" and cast_to is None:
                return arrow_values.scalar(text, t)
            if pa.types.is_boolean(t) and kind == "BOOLEAN":
                return arrow_values.scalar(text.lower() == "true", t)
            if pa.types.is_decimal(t) and kind in ("INTEGER", "NUMERIC") and cast_to is None and "e" not in text.lower():
                v = decimal.Decimal(text)
                q = v.quantize(decimal.Decimal(1).scaleb(-t.scale))
                return pa.scalar(q, type=t) if q == v else None
            family_ok = (pa.types.is_date(t) and cast_to in (None, "DATE")) or (
                pa.types.is_timestamp(t) and cast_to in (None, "TIMESTAMP", "TIMESTAMPTZ", "DATETIME", "TIMESTAMP WITH TIME ZONE")
            )
            if family_ok and kind == "STRING":
                lit = quote_string(text) if cast_to is None else f"CAST({quote_string(text)} AS {cast_to})"
                sql_type = self.sql_type(t)
                with self._lock:
                    value = self.con.sql(f"SELECT CAST({lit} AS {sql_type}) AS v").to_arrow_table().column(0)[0]
                return value.cast(t)
        except (ValueError, OverflowError, decimal.InvalidOperation, pa.ArrowException, _duckdb().Error):
            return None
        return None


def _inverse_permutation(position: np.ndarray, n: int) -> np.ndarray:
    """For a query result whose row j came from input row ``position[j]``: the result row of each input
    row. Anything but exactly one result row per input row is a bug: raise rather than pair rows wrongly."""
    if len(position) != n or (n and (position.min() < 0 or position.max() >= n)):
        raise RuntimeError(f"the query returned {len(position)} rows for {n} input rows")
    inverse = np.full(n, -1, dtype=np.int64)
    inverse[position] = np.arange(n, dtype=np.int64)
    if n and inverse.min() < 0:
        raise RuntimeError("the query returned some input row twice and another not at all")
    return inverse


# ---------------------------------------------------------------- DNF filters as SQL

_DNF_OPS = {"=": "=", "==": "=", "!=": "<>", "<>": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def sql_literal(v: Any) -> str:
    """A Python value as a SQL literal."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return f"CAST('{v!r}' AS DOUBLE)"
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, str):
        return quote_string(v)
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            return f"CAST({quote_string(v.astimezone(dt.timezone.utc).isoformat())} AS TIMESTAMPTZ)"
        return f"CAST({quote_string(v.isoformat())} AS TIMESTAMP)"
    if isinstance(v, dt.date):
        return f"DATE {quote_string(v.isoformat())}"
    if isinstance(v, (bytes, bytearray)):
        return "'" + "".join(f"\\x{b:02x}" for b in bytes(v)) + "'::BLOB"
    if isinstance(v, pa.Scalar):
        return sql_literal(v.as_py())
    raise PredicateError(f"cannot use the value {v!r} of type {type(v).__name__} in a filter")


def value_expressions(values: Any, what: str) -> dict[str, str]:
    """``{column: value}`` with every value as SQL text. A str is a SQL expression as written
    (``"amount * 2"``, ``"'EUR'"`` for the string EUR); None, bools, numbers, Decimals, dates, datetimes and
    bytes (NumPy scalars included) are literals, so ``{"amount": 0}`` sets 0."""
    if not isinstance(values, dict) or not values:
        raise PredicateError(f"the {what} needs a non-empty dict of column -> SQL expression or value, not {values!r}")
    out = {}
    for col, v in values.items():
        if isinstance(v, str):
            out[col] = v
            continue
        if type(v).__module__ == "numpy" and hasattr(v, "item"):
            v = v.item()
        if isinstance(v, (list, tuple, dict, set)) or not isinstance(v, (type(None), bool, int, float, decimal.Decimal, dt.date, bytes, bytearray)):
            raise PredicateError(
                f"{what}: the value for column {col!r} must be a SQL expression (a str) or a literal (None, bool, int, "
                f"float, Decimal, date, datetime, bytes), not {type(v).__name__}: {v!r}"
            )
        out[col] = sql_literal(v)
    return out


def filters_to_sql(filters: Any) -> str:
    """DNF tuples (``[("p", "=", "a"), ("x", ">", 3)]`` or a list of such lists) as a SQL predicate."""
    if not filters:
        raise PredicateError("the filter list is empty; pass None to select every row")
    groups = [filters] if isinstance(filters[0], tuple) else filters
    disjuncts = []
    for group in groups:
        terms = []
        for term in group:
            if not isinstance(term, (tuple, list)) or len(term) != 3:
                raise PredicateError(f"filter {term!r} is not a (column, op, value) tuple")
            col, op, value = term
            name = quote_ident(str(col))
            op = str(op).lower()
            if op in ("in", "not in"):
                if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
                    raise PredicateError(f"filter {term!r}: {op!r} needs a list of values")
                items = list(value)
                if not items:
                    # As every DNF term (lakelog.expressions.filters): a null never satisfies it, not in () included.
                    terms.append("FALSE" if op == "in" else f"({name} IS NOT NULL)")
                    continue
                terms.append(f"{name} {op.upper()} ({', '.join(sql_literal(v) for v in items)})")
            elif op in _DNF_OPS:
                terms.append(f"{name} {_DNF_OPS[op]} {sql_literal(value)}")
            else:
                raise PredicateError(f"filter {term!r}: unknown operator {op!r} (use =, !=, <, <=, >, >=, in, not in)")
        disjuncts.append("(" + " AND ".join(terms) + ")")
    return " OR ".join(disjuncts)

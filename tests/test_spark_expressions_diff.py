"""Differential test of lakelog.expressions.spark against Spark itself: every supported function,
operator and cast (tests/spark_expression_cases.py), over random rows with the edge values each has,
evaluated by Spark (4, ANSI mode, the test session) and by lakelog (the translation run by DuckDB).
For every expression and row, both must give the same value of the same type, or both must fail
(an ANSI error in Spark; lakelog refuses the write). Spark evaluates each expression inside TryEval
(the expression behind try_add and friends), wrapped in a struct so a NULL value and a failure differ,
so one query tells which rows failed; lakelog's failing rows are found by bisecting the batch.

``make test`` runs a seeded sample; ``LAKELOG_SPARK_DIFF_FULL=1`` runs many more rows and seeds."""

from __future__ import annotations

import math
import os
import random
import time

import duckdb
import pyarrow as pa
import pytest

import lakelog.expressions.spark as se
from lakelog.expressions import sql_java_floats
from lakelog.errors import CollationMismatchError, PredicateError, UnsupportedExpressionError
from tests import spark_expression_cases as cases

FULL = os.environ.get("LAKELOG_SPARK_DIFF_FULL") == "1"
SEEDS = list(range(8)) if FULL else [20260101]
ROWS = 300 if FULL else 48
CHECKED_FAILURES = 16 if FULL else 4  # rows Spark fails on, per expression, that lakelog must fail on one by one
ERR = "<error>"
UNSUPPORTED = "<refused: unsupported input>"  # lakelog's documented refusals (e.g. lower() of a string with Σ)


def all_cases(per_entry: int | None = None, seed: int = 0) -> list[str]:
    """The expressions of every entry (at most ``per_entry`` of each, drawn with ``seed``; every cast pair)."""
    rng, out = random.Random(seed), []
    for name, exprs in cases.CASES.items():
        if name == "CAST":
            out.extend(cases.cast_cases(se.CASTS))
        else:
            out.extend(exprs if per_entry is None or len(exprs) <= per_entry else rng.sample(exprs, per_entry))
    return list(dict.fromkeys(out))


# entries no differential test can compare (tests/test_spark_expressions.py checks them)
NOT_COMPARABLE = {"current_timestamp": "the time of the write, in column defaults only"}


def test_every_entry_and_every_cast_pair_has_cases():
    names = {e.names[0] for e in se.ENTRIES} - set(NOT_COMPARABLE)
    assert names == set(cases.CASES), (sorted(names - set(cases.CASES)), sorted(set(cases.CASES) - names))
    assert all(cases.CASES[n] for n in names if n != "CAST")
    exprs = cases.cast_cases(se.CASTS)
    assert len(exprs) >= len(se.CASTS)


# ---------------------------------------------------------------- evaluating


def _values(col: pa.ChunkedArray | pa.Array) -> list:
    """Python values, dates and timestamps as their raw day / microsecond counts (any year)."""
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if pa.types.is_date32(col.type):
        return col.view(pa.int32()).to_pylist()
    if pa.types.is_timestamp(col.type):
        return col.cast(pa.timestamp("us", tz=col.type.tz)).view(pa.int64()).to_pylist()
    if pa.types.is_large_string(col.type):
        col = col.cast(pa.string())
    return col.to_pylist()


def spark_eval(spark, table: pa.Table, exprs: list[str]) -> dict[str, tuple[str, list]]:
    """expr -> (Spark's type, per row value or ERR); an expression Spark refuses to analyze gets
    ("ANALYSIS: <message>", [])."""
    from pyspark.errors import AnalysisException
    from pyspark.sql.column import Column

    jvm = spark._jvm
    parse = spark._jsparkSession.sessionState().sqlParser().parseExpression

    def tried(text):
        node = jvm.org.apache.spark.sql.classic.ExpressionColumnNode.apply(
            jvm.org.apache.spark.sql.catalyst.expressions.TryEval(parse(text)))
        return Column(jvm.org.apache.spark.sql.Column(node))

    df = _collated(spark.createDataFrame(table), table.schema)

    def run(batch):
        # one column per expression: TryEval(named_struct('v', x)) is NULL where x raises; the batches are read as
        # Spark sends them (toArrow would cast them to a schema where a never-NULL x makes v non-nullable)
        out = df.select(*[tried(f"named_struct('v', {x})").alias(f"c{i}") for i, x in enumerate(batch)])
        types = [f.dataType.fields[0].dataType.simpleString() for f in out.schema.fields]
        at = pa.Table.from_batches(out._collect_as_arrow())
        res = {}
        for i, x in enumerate(batch):
            col = at.column(i).combine_chunks()
            vals, ok = _values(col.field(0)), col.is_valid().to_pylist()  # (the child holds NULL where the struct is NULL)
            res[x] = (types[i], [v if good else ERR for v, good in zip(vals, ok)])
        return res

    results = {}

    def run_or_split(batch):
        try:
            results.update(run(batch))
        except AnalysisException as e:
            if len(batch) == 1:
                results[batch[0]] = ("ANALYSIS: " + str(e).splitlines()[0][:200], [])
            else:
                run_or_split(batch[: len(batch) // 2])
                run_or_split(batch[len(batch) // 2:])

    for start in range(0, len(exprs), 150):
        run_or_split(exprs[start:start + 150])
    return results


def _collated(df, schema: pa.Schema):
    """``df`` with the strings ``schema``'s fields declare collated (``__COLLATIONS``) as Spark's collated strings."""
    from pyspark.sql import functions as F

    from spark_ext.schema.collations import spark_collations

    collated = spark_collations(df.schema, schema)
    if collated == df.schema:
        return df
    return df.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in collated.fields])


def _query(con, text: str, sql: str) -> pa.Table:
    try:
        return con.sql(sql).to_arrow_table()
    except (duckdb.BinderException, duckdb.ParserException, duckdb.CatalogException, duckdb.NotImplementedException) as e:
        raise AssertionError(f"lakelog's translation of {text!r} does not run in DuckDB: {e}\n{sql}") from None


def lakelog_eval(con, table: pa.Table, text: str, spark_vals: list) -> tuple[str, list]:
    """lakelog's type and per-row values over ``table`` (registered in ``con`` as ``t`` with a ``__row``
    column): ERR where the translation raises, UNSUPPORTED where it raises lakelog's documented refusal.
    The rows Spark evaluates run in one query (bisected where it raises); the rows Spark fails on run one
    at a time and must raise (up to CHECKED_FAILURES of them per expression; all of them together must
    raise too)."""
    translated = se.translate(text, se.columns_of(table.schema), "expression")
    sql = translated.text
    out: list = [None] * table.num_rows

    def run(rows: list[int]) -> None:
        try:
            res = _query(con, text, f"SELECT __row, ({sql}) AS v FROM t WHERE __row IN ({', '.join(map(str, rows))})")
        except duckdb.Error as e:
            if len(rows) == 1:
                out[rows[0]] = UNSUPPORTED if "[UNSUPPORTED]" in str(e) else ERR
                return
            run(rows[: len(rows) // 2])
            run(rows[len(rows) // 2:])
            return
        for i, v in zip(res.column(0).to_pylist(), _values(res.column(1))):
            out[i] = v

    ok = [i for i, v in enumerate(spark_vals) if v != ERR]
    failing = [i for i, v in enumerate(spark_vals) if v == ERR]
    if ok:
        run(ok)
    for i in failing[:CHECKED_FAILURES]:
        run([i])
    rest = failing[CHECKED_FAILURES:]
    if rest:  # together they must raise (when one does, the others are taken to fail too)
        try:
            res = _query(con, text, f"SELECT __row, ({sql}) AS v FROM t WHERE __row IN ({', '.join(map(str, rest))})")
            for i, v in zip(res.column(0).to_pylist(), _values(res.column(1))):
                out[i] = v
        except duckdb.Error:
            for i in rest:
                out[i] = ERR
    return str(translated.type), out


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, float) != isinstance(b, float):
        return False
    return a == b and type(a) is type(b)


def _row(table: pa.Table, i: int) -> dict:
    return {k: v for k, v in zip(table.column_names, [_values(c.slice(i, 1))[0] for c in table.columns])}


def compare(spark_res: dict, table: pa.Table, exprs: list[str], con) -> tuple[list[str], int, int]:
    problems, checked, refusals = [], 0, 0
    con.register("t", table.append_column("__row", pa.array(range(table.num_rows), pa.int64())))
    for x in exprs:
        stype, svals = spark_res[x]
        try:
            ltype, lvals = lakelog_eval(con, table, x, svals)
        except PredicateError as e:  # every case is meant to be supported
            if not stype.startswith("ANALYSIS"):
                problems.append(f"{x}: lakelog refuses it: {e}")
            continue
        if stype.startswith("ANALYSIS"):
            problems.append(f"{x}: Spark refuses it ({stype}) but lakelog accepts it")
            continue
        if stype != ltype:
            problems.append(f"{x}: type {ltype} in lakelog, {stype} in Spark")
            continue
        refusals += sum(v == UNSUPPORTED for v in lvals)  # documented refusals (lower() of Σ, dates beyond DuckDB's)
        bad = [i for i, (s, v) in enumerate(zip(svals, lvals)) if not same(s, v) and v != UNSUPPORTED]
        checked += len(svals)
        for i in bad[:3]:
            problems.append(f"{x}: row {i} Spark {svals[i]!r}, lakelog {lvals[i]!r}; inputs {_row(table, i)}")
    con.unregister("t")
    return problems, checked, refusals


@pytest.mark.parametrize("seed", SEEDS)
def test_lakelog_evaluates_table_expressions_exactly_as_spark(spark, seed):
    rng = random.Random(seed)
    table = cases.table(rng, ROWS)
    exprs = all_cases(None if FULL else 8, seed)
    started = time.monotonic()
    spark_res = spark_eval(spark, table, exprs)
    spark_time = time.monotonic() - started
    con = duckdb.connect()
    sql_java_floats.register(con)  # (as lakelog's engine: Java's text of doubles and floats)
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET threads = 1")
    problems, checked, refusals = compare(spark_res, table, exprs, con)
    print(f"\n{len(exprs)} expressions x {ROWS} rows ({checked} values) for {len(se.ENTRIES)} entries and {len(se.CASTS)} cast pairs; "
          f"Spark {spark_time:.1f}s, total {time.monotonic() - started:.1f}s; {len(problems)} differences, "
          f"{refusals} values lakelog refuses by design")
    assert not problems, "\n".join(problems[:60]) + (f"\n... and {len(problems) - 60} more" if len(problems) > 60 else "")


# Literals at the edges of their types' ranges: Spark's parser refuses those beyond them, reads a leading
# minus as part of the literal, and rounds a float literal's digits once.
LITERAL_EDGES = ["-128Y", "128Y", "-129Y", "- 128Y", "-(128Y)", "32767S", "-32768S", "32768S", "9223372036854775807L",
                 "-9223372036854775808L", "9223372036854775808L", "3.4028234E38F", "3.4028235E38F", "-3.4028235E38F",
                 "3.4028234663852886E38F", "3.4028234663852887E38F", "1.4E-46F", "16777217F", "-0.0F",
                 "1.000000059604644775390625000001F", "1.7976931348623157E308D", "1.7976931348623158E308D", "1e309", "-1e309",
                 "1e309D", "1e-400D", "1e-400", "2.5e0"]


def test_literal_ranges_as_spark(spark):
    table = cases.table(random.Random(0), 2)
    spark_res = spark_eval(spark, table, LITERAL_EDGES)
    assert sum(stype.startswith("ANALYSIS") for stype, _ in spark_res.values()) >= 10  # (the refusals are compared too)
    con = duckdb.connect()
    problems, checked, _ = compare(spark_res, table, LITERAL_EDGES, con)
    assert not problems and checked, "\n".join(problems)


# ---------------------------------------------------------------- collated strings


@pytest.mark.parametrize("seed", SEEDS)
def test_collated_strings_compare_as_spark(spark, seed):
    """Columns under UTF8_LCASE (top level, in a struct, in an array) beside a UTF8_BINARY one: every
    comparison, search, CASE, COALESCE and string function gives Spark's value and type (a string keeps
    its collation), and what Spark's analysis refuses (two columns' different collations) lakelog refuses."""
    table = cases.collated_table(random.Random(seed), ROWS * 2)
    exprs = cases.COLLATION_CASES
    spark_res = spark_eval(spark, table, exprs)
    refused = sorted(x for x in exprs if spark_res[x][0].startswith("ANALYSIS"))
    assert len(refused) >= 13, refused  # (the mismatch cases are refused by Spark: the frame's strings are collated)
    con = duckdb.connect()
    con.execute("SET threads = 1")
    problems, checked, refusals = compare(spark_res, table, exprs, con)
    print(f"\n{len(exprs)} collated expressions x {table.num_rows} rows ({checked} values); {len(problems)} differences, "
          f"{refusals} values lakelog refuses by design")
    assert not problems, "\n".join(problems[:60])
    for x in refused:
        with pytest.raises(CollationMismatchError) as e:
            se.translate(x, se.columns_of(table.schema), "expression")
        assert "COLLATION_MISMATCH" in str(e.value) and e.value.error_class.startswith("COLLATION_MISMATCH"), x


def test_searches_under_lcase_lakelog_cannot_match_are_refused_by_name():
    """replace, LIKE and TRIM of characters under UTF8_LCASE, and comparisons under ICU collations, are
    refused naming the collation, never evaluated in binary."""
    columns = se.columns_of(pa.schema(cases.COLLATED_COLUMNS))
    for x in cases.COLLATION_REFUSED:
        with pytest.raises(UnsupportedExpressionError, match="UTF8_LCASE"):
            se.translate(x, columns, "CHECK constraint c")
    unicode = pa.field("u", pa.string(), metadata={b"delta.collations": b'{"u":"icu.UNICODE"}'})
    for x in ["u = 'a'", "u IN ('a')", "contains(u, 'a')", "u < 'b'"]:
        with pytest.raises(UnsupportedExpressionError, match="UNICODE"):
            se.translate(x, se.columns_of([unicode]), "CHECK constraint c")
    assert str(se.translate("upper(u)", se.columns_of([unicode]), "x").type) == "string collate UNICODE"

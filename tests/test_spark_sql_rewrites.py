"""spark_ext.sql runs what it rewrites (a statement reading lakelog tables, an INSERT's query, a merge's
source) as sqlglot writes it back in Spark's dialect. Differential test against Spark itself: every
expression of the Spark-semantics corpus (tests/spark_expression_cases.py), written back, must evaluate
in Spark exactly as the original over the same rows. sqlglot's own readings were written back changed:
parse_json(x) as x, to_json(parse_json(x)) as x, collate(x, 'c') as x COLLATE 'c' (not Spark SQL),
date_sub(d, n) as DATE_ADD(d, n * -1), unix_date(d) as a bigint DATEDIFF, trunc(d, 'Q') as
TRUNC(d, 'QUARTER'), date_format(t, 'y') as 'yyyy', 'it''s' as CONCAT('it', 's') and -128Y as
-CAST(128 AS TINYINT)."""

from __future__ import annotations

import random

from spark_ext.statements.syntax import SqlError, parse, spark_sql
from tests import spark_expression_cases as cases
from tests.test_spark_expressions_diff import FULL, ROWS, SEEDS, all_cases, same, spark_eval

EXTRA = [  # expressions the corpus lacks whose text sqlglot rewrote
    "to_json(parse_json(s_json))", "to_json(parse_json('[1, 2.5, \"x\"]'))", "variant_get(parse_json(s_json), '$.a', 'int')",
    "to_json(to_variant_object(named_struct('a', i32)))", "collate(s, 'UTF8_LCASE') = upper(s)", "-128Y", "-32768S",
    "-9223372036854775808L", "-0.0D", "-1.5BD", "127Y + i8", "try_parse_json(s)", "to_json(named_struct('a', i32), map('x', 'y'))",
]


def written_back(expr: str) -> str | None:
    """``expr`` as spark_ext.sql writes it back; None where sqlglot cannot read it (spark_ext.sql then
    refuses the statement with SqlError at its position: ``concat()``)."""
    try:
        return spark_sql(parse(f"SELECT {expr}").expressions[0])
    except SqlError:
        return None


def test_every_expression_written_back_evaluates_as_written(spark):
    seed = SEEDS[0]
    table = cases.table(random.Random(seed), ROWS)
    table = table.append_column("s_json", [[None if i % 5 == 0 else f'{{"a": {i}, "b": [1, 2.5]}}' for i in range(table.num_rows)]])
    exprs = all_cases(None if FULL else 8, seed) + EXTRA
    back = {x: b for x in exprs if (b := written_back(x)) is not None}
    assert len(back) >= len(exprs) - 2
    exprs = list(back)
    original = spark_eval(spark, table, exprs)
    rewritten = spark_eval(spark, table, sorted(set(back.values())))
    problems = []
    for x in exprs:
        (t1, v1), (t2, v2) = original[x], rewritten[back[x]]
        if t1.startswith("ANALYSIS") and t2.startswith("ANALYSIS"):
            continue
        if t1 != t2 or len(v1) != len(v2) or not all(same(a, b) for a, b in zip(v1, v2)):
            problems.append(f"{x} -> {back[x]}: Spark gives {t1} {v1[:4]} for the original, {t2} {v2[:4]} written back")
    assert not problems, "\n".join(problems[:40])

"""``specs/spark-expressions.md``, rendered from the layer's table (``python -m lakelog.spark_expressions.spec``);
a test keeps the file equal to it."""

from __future__ import annotations

from . import CASTS, ENTRIES, KINDS

_INTRO = """\
# Spark SQL in table expressions

Delta stores CHECK constraints (`delta.constraints.*`), column invariants (`delta.invariants`),
generation expressions (`delta.generationExpression`) and column defaults (`CURRENT_DEFAULT`) as Spark
SQL text. lakelog evaluates them with DuckDB through `lakelog.spark_expressions`, which computes
exactly the value Spark 4 computes (ANSI mode, `spark.sql.ansi.enabled=true`, Spark's default), or
fails where Spark fails:

- Every function, operator, cast and literal form lakelog accepts is listed below, with Spark's
  semantics as lakelog implements them. Anything else is refused by name with
  `UnsupportedExpressionError` (a `PredicateError` and an `UnsupportedFeatureError`) naming the
  function or operator and the constraint or column: `Table.add_constraint` and a write that creates
  a table with `generated_columns=` refuse it at once; a write into an existing table that has one
  refuses it before writing any row. Reading the table is never affected, and DELETE stays allowed.
- Types follow Spark's type coercion in ANSI mode (integer literals typed by their digits in decimal
  arithmetic, decimal result precision and scale, int + float is double, ...). Where Spark casts a
  string implicitly to a number, lakelog refuses and asks for the explicit CAST.
- Strings have collations as in Spark 4: a column's is its `__COLLATIONS` entry (a struct field's and
  an array element's too), a literal's UTF8_BINARY, `COLLATE` gives one explicitly, and an operation on
  several strings takes the strongest (see `COLLATE`). Under UTF8_LCASE comparisons, IN, CASE, `nullif`
  and the searches `contains`, `startswith`, `endswith`, `instr` and `locate` compare lower-cased forms,
  as Spark does; a comparison or search of two columns' different collations is refused with
  `CollationMismatchError` (Spark's COLLATION_MISMATCH); `replace`, `LIKE`, TRIM of characters under
  UTF8_LCASE and any comparison under an ICU collation are refused by name.
- A row for which Spark raises (integer overflow, a zero divisor, an invalid cast, an impossible date)
  fails the write with `ExpressionEvaluationError` (a `ConstraintViolationError`) naming the rule and
  the row; nothing is committed. Spark's lazy evaluation is kept: the right side of AND/OR where the
  left decides, the branches CASE/if/coalesce do not take, and the arguments after a NULL one in
  NULL-intolerant functions are not evaluated, so they cannot fail there.
- lakelog applies ANSI mode whatever the writing session's `spark.sql.ansi.enabled`: a Spark session
  with ANSI mode off would store NULL (or a wrapped integer) where lakelog, like Spark 4 by default,
  fails the write.
- Timestamps are evaluated in UTC, as Spark does with `spark.sql.session.timeZone=UTC` (the default on
  Databricks): the fields of a TIMESTAMP, the date it casts to and its text are those of its UTC time.
  A table's computed values then do not depend on the time zone of the session that wrote a row.
- A few inputs lakelog cannot evaluate exactly are refused at write time with an error naming
  `[UNSUPPORTED]` rather than approximated: `lower()` of a string holding GREEK CAPITAL LETTER SIGMA
  (Spark's final-sigma rule depends on the neighbouring letters), a search under UTF8_LCASE in a
  string holding `İ` where the match could begin or end inside the two code points `İ` lower-cases to
  (or, for `instr` and `locate`, follow it), and dates beyond DuckDB's range (years -5877641 to
  5881580; Spark reaches 7-digit years).
- A float or double cast to a string (also inside `concat`) is Java's `Double.toString` /
  `Float.toString` as Java 17 prints it, the JVM the differential test's Spark runs on: `1.0E7`,
  `9999999.0`, `0.001`, `1.0E-4`, `-0.0`, `NaN`, `Infinity`, `4.9E-324`. Java 19 and later print the
  shortest digits, which differ for a few values (`2.0E23` is `1.9999999999999998E23` on Java 17):
  Spark's own text depends on its JVM there, and lakelog's is Java 17's.
- Refused on purpose: casting a float or double to a decimal (Spark rounds the digits of that text);
  transcendental functions (`exp`, `ln`,
  `pow`, trigonometry: Spark uses Java's StrictMath, DuckDB the C library, which differ in the last bit
  for some arguments); `hash`, `xxhash64`, regular expressions (Java's and RE2's syntax and semantics
  differ); non-deterministic functions (`current_timestamp()` and `current_date()` are allowed in
  column defaults only, where they read the time of the write).

A differential test (`tests/test_spark_expressions_diff.py`) evaluates every entry below in Spark and
in lakelog over random rows with NULLs, NaN, infinities, -0.0, extreme integers, decimals at full
precision, empty, blank and Unicode strings (with every character whose case mapping differs),
numeric and date text, dates at year and calendar boundaries and timestamps far from 1970 (and, for
collations, UTF8_LCASE columns of case variants beside a UTF8_BINARY one), and
requires the same value and type, or an error in both, for every row; `make test` runs a seeded
sample, `LAKELOG_SPARK_DIFF_FULL=1` many more rows and seeds.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render() -> str:
    out = [_INTRO]
    names = sum(len(e.names) for e in ENTRIES)
    out.append(f"## Supported ({len(ENTRIES)} entries, {names} names, {len(CASTS)} cast pairs)\n")
    for kind, title in KINDS.items():
        entries = [e for e in ENTRIES if e.kind == kind]
        if not entries:
            continue
        out.append(f"### {title}\n")
        out.append("| Spark | Semantics (as lakelog evaluates it) |")
        out.append("|---|---|")
        for e in entries:
            out.append(f"| {_cell(', '.join(f'`{n}`' for n in e.names))} | {_cell(e.note)} |")
        out.append("")
    out.append("### Cast pairs (CAST, try_cast and implicit casts)\n")
    out.append("| From | To | Semantics |")
    out.append("|---|---|---|")
    for (src, dst), note in sorted(CASTS.items()):
        out.append(f"| {src} | {dst} | {_cell(note)} |")
    out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(render(), end="")

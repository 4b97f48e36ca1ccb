"""The simple-predicate parser (``lakelog.expressions.simple_sql``) against DuckDB's own parser: every text
it reads gets DuckDB's parse tree, and what it does not read is left to DuckDB (None)."""

import random

import duckdb
import pyarrow as pa
import pytest

import lakelog
from lakelog.dml.predicate import compile_predicate
from lakelog.errors import PredicateError
from lakelog.expressions.simple_sql import KEYWORDS, parse_simple
from lakelog.expressions.sql import Engine, parse_expression

NAMES = ["x", "X", "i64", "Xy_1", "_a", '"x"', '"a b"', '"say ""hi"""', '"AND"', "name", "year", "value", "data", "key"]
NUMBERS = ["0", "1", "-1", "007", "-0", "0.01", "-0.01", "01.50", "2.5", "-2.5", "9007199254740993", "9223372036854775807",
           "-9223372036854775808", "999999999999999999", "123456789012345678.123456789012345678", "0.000000000000000001"]
STRINGS = ["''", "'a'", "'it''s'", "'a b'", "'\\n'", "'é'", "'--'", "'/*'", "'\"'", "'x''''y'"]
OPS = ["=", "==", "<>", "!=", "<", "<=", ">", ">="]
SPACES = [" ", "  ", "\t", "\n", ""]


def same_tree(simple: dict, duckdb_tree: dict) -> bool:
    """Whether a tree of ``parse_simple`` is DuckDB's tree, up to DuckDB's positions and empty aliases."""
    return simple == _strip(duckdb_tree)


def _strip(node):
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k not in ("query_location", "query_location_length") and not (k == "alias" and v == "")}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def _texts(count: int, seed: int) -> list[str]:
    rnd = random.Random(seed)

    def sp():
        return rnd.choice(SPACES[:4])

    def atom():
        k = rnd.random()
        name = rnd.choice(NAMES)
        if k < 0.15:
            return f"{name}{sp()}IS{sp()}{rnd.choice(['NOT' + sp(), ''])}NULL".replace("ISNOT", "IS NOT").replace("NOTNULL", "NOT NULL")
        lit = rnd.choice(NUMBERS + STRINGS)
        op = rnd.choice(OPS)
        gap = rnd.choice(SPACES)
        if k < 0.3:
            return f"{lit}{gap}{op} {name}"
        return f"{name} {op}{gap}{lit}"

    def expr(depth):
        if depth == 0 or rnd.random() < 0.35:
            return atom()
        k = rnd.random()
        if k < 0.2:
            return f"NOT{rnd.choice([' ', ' (', '('])}{expr(depth - 1)}"
        word = rnd.choice(["AND", "and", "Or", "OR"])
        left, right = expr(depth - 1), expr(depth - 1)
        if rnd.random() < 0.5:
            left, right = f"({left})", f"({right})"
        return f"{left} {word} {right}"

    out = []
    for _ in range(count):
        t = expr(3)
        out.append(t + ")" * (t.count("(") - t.count(")")))  # (NOT( ... closed)
    return out


def _duckdb_tree(text: str):
    try:
        return parse_expression(text)
    except PredicateError:
        return None


def test_the_simple_parser_gives_duckdbs_tree():
    read = 0
    for text in _texts(600, seed=5) + ["x < 0.01", "(x < 1)", "((x < 1) OR (y > 2 OR z = 3))", "NOT NOT x < 1", "x IS NOT NULL AND NOT y IS NULL"]:
        simple = parse_simple(text)
        if simple is None:
            continue
        read += 1
        tree = _duckdb_tree(text)
        assert tree is not None and same_tree(simple, tree), text
    assert read > 400


def test_values_give_duckdbs_tree():
    for text in STRINGS + NUMBERS + NAMES:
        simple = parse_simple(text, value=True)
        if sum(c.isdigit() for c in text.split(".")[0]) > 18:
            assert simple is None, text  # (19 digits and more are left to DuckDB)
            continue
        assert simple is not None and same_tree(simple, parse_expression(text, "value")), text


def test_keywords_as_names_are_left_to_duckdb():
    keywords = {r[0] for r in duckdb.sql("SELECT keyword_name FROM duckdb_keywords()").fetchall()}
    reserved = {r[0] for r in duckdb.sql("SELECT keyword_name FROM duckdb_keywords() WHERE keyword_category <> 'unreserved'").fetchall()}
    assert reserved <= KEYWORDS  # (a DuckDB that reserves more words than this list: update the list)
    for kw in sorted(keywords):
        for text in (f"{kw} < 1", f"{kw.upper()} IS NULL", f"x < 1 AND {kw} >= 2", f'"{kw}" = 1'):
            simple = parse_simple(text)
            if simple is not None:
                tree = _duckdb_tree(text)
                assert tree is not None and same_tree(simple, tree), text


@pytest.mark.parametrize("text", [
    "x < 1 -- comment", "x < /* c */ 1", "x < 1e3", "x < 1.", "x < .5", "x<-1", "x < - 1", "x < +1", "x < 1.2.3", "x < 1x",
    "abs(x) < 1", "x + 1 < 2", "x < y", "1 < 2", "x IN (1, 2)", "x BETWEEN 0 AND 1", "x < CAST(1 AS INT)", "x < E'a'",
    "x < 'a' 'b'", "x IS NULL IS NULL", "1 IS NULL", "x < (1)", "(x) < 1", "x < 1)", "(x < 1", "x < 1; DROP TABLE t", "t.x < 1",
    "x ISNULL", "x NOTNULL", "x < TRUE", "x = NULL", "x < 1 AND", "", " ", "x < 1234567890123456789", "x < $1", "x < ?", "x::INT < 1",
    "x <=> 1", "x < 1 COLLATE nocase", "é < 1", "x < 0x10", "x < 1_000",
])
def test_what_is_not_in_the_grammar_is_left_to_duckdb(text):
    assert parse_simple(text) is None


def test_a_simple_predicate_is_compiled_as_the_engine_compiles_it_without_it(monkeypatch):
    import lakelog.dml.predicate as predicate_module

    schema = pa.schema([("x", pa.float64()), ("i64", pa.int64()), ("s", pa.string())])
    for text in ["x < 0.01", "i64 >= 3 AND NOT (x IS NULL)", "I64 <> -2 OR x > 2.5"]:
        engine = Engine()
        fast = compile_predicate(text, schema, engine)
        assert engine._con is None  # (DuckDB was not needed)
        with monkeypatch.context() as m:
            m.setattr(predicate_module, "parse_simple", lambda text: None)  # DuckDB parses and binds it
            slow = compile_predicate(text, schema, engine)
        assert engine._con is not None
        assert fast.exact is not None and str(fast.exact) == str(slow.exact), text
        assert str(fast.prune) == str(slow.prune) and fast.columns == slow.columns and (fast.sql, fast.text) == (slow.sql, slow.text), text
        engine.close()


def test_errors_are_the_engines(tmp_path):
    # An unknown column, a string column against a number: not simple, so DuckDB reports them as before.
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": pa.array([1, 2], pa.int64()), "s": ["a", "b"]}))
    t = lakelog.Table(path)
    with pytest.raises(PredicateError, match="unknown column 'idd'"):
        t.delete("idd < 1")
    assert t.delete("id < 2")["num_deleted_rows"] == 1
    assert t.to_pyarrow().column("id").to_pylist() == [2]

"""Reading statements: sqlglot's Spark dialect for the statements it parses, its tokenizer (``Tokens``)
for the Delta commands and ALTER TABLE forms it does not parse (or parses loosely), and ``refuse_args``,
which turns any part of a parse tree the statement runners do not handle into a ``SqlError`` naming it,
so that no clause is ever dropped silently."""

from __future__ import annotations

import functools
import warnings
from typing import Any

from lakelog.errors import InvalidArgumentError


class SqlError(InvalidArgumentError):
    """A statement ``spark_ext.sql`` cannot parse or run (its position when it cannot parse it; the
    clause when it does not run it)."""


def sqlglot():
    import sqlglot as sg
    from sqlglot import exp

    return sg, exp


def spark_sql(node) -> str:
    """A parse tree (or part of one) as Spark SQL text."""
    return node.sql(dialect=spark_dialect())


@functools.cache
def spark_dialect():
    """sqlglot's Spark dialect, made to read and write back expressions as written: every function call
    is read as a plain call (sqlglot's own readings were written back changed: ``parse_json(x)`` as
    ``x``, ``to_json(parse_json(x))`` as ``x``, ``date_sub(d, n)`` as ``DATE_ADD(d, n * -1)``,
    ``trunc(d, 'Q')`` as ``TRUNC(d, 'QUARTER')``, ``date_format(t, 'y')`` as ``'yyyy'``,
    ``collate(x, 'c')`` as ``x COLLATE 'c'``, which Spark does not parse), ``''`` in a string is a
    quote, as Spark reads it (sqlglot read ``'it''s'`` as ``'it' 's'``: ``its``), and ``-128Y``,
    ``-32768S``, ``-9223372036854775808L`` stay literals (sqlglot wrote the negation of a cast that overflows)."""
    from sqlglot import exp
    from sqlglot.dialects.spark import Spark

    suffixes = {exp.DataType.Type.TINYINT: "Y", exp.DataType.Type.SMALLINT: "S", exp.DataType.Type.BIGINT: "L"}

    def neg(self, e) -> str:
        c = e.this
        if (isinstance(c, exp.Cast) and isinstance(c.this, exp.Literal) and not c.this.is_string and c.to.this in suffixes
                and c.this.this.isdigit()):
            return f"-{c.this.this}{suffixes[c.to.this]}"
        return self.neg_sql(e)

    class LakelogSpark(Spark):
        class Tokenizer(Spark.Tokenizer):
            STRING_ESCAPES = ["\\", "'"]

        class Parser(Spark.Parser):
            FUNCTIONS: dict = {}  # (calls with their own syntax, CAST, EXTRACT, TRIM ..., keep their parsers)

        class Generator(Spark.Generator):
            TRANSFORMS = {**Spark.Generator.TRANSFORMS, exp.Neg: neg}

    return LakelogSpark


def parse(text: str):
    """The one statement in ``text``, parsed; SqlError with its line and column when it does not parse."""
    sg, _ = sqlglot()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trees = sg.parse(text, read=spark_dialect())
    except sg.errors.ParseError as e:
        first = e.errors[0] if e.errors else {}
        raise SqlError(f"cannot parse the statement at line {first.get('line', '?')}, column {first.get('col', '?')}: "
                       f"{first.get('description', e)}") from None
    if len(trees) != 1 or trees[0] is None:
        raise SqlError("spark_ext.sql runs one statement at a time")
    return trees[0]


def parse_expression(text: str, what: str):
    """One Spark SQL expression."""
    sg, exp = sqlglot()
    try:
        tree = sg.parse_one(text, read=spark_dialect())
    except sg.errors.ParseError as e:
        raise SqlError(f"cannot parse the {what} {text!r}: {e}") from None
    if isinstance(tree, (exp.Query, exp.Command, exp.DDL, exp.DML)):
        raise SqlError(f"the {what} {text!r} must be one SQL expression")
    return tree


def tokenize(text: str) -> list:
    """The tokens of ``text`` (positions in ``text``); sqlglot reads some commands as one COMMAND token
    and the rest as text, which is tokenized again in place."""
    dialect = spark_dialect()()
    try:
        tokens = dialect.tokenize(text)
        raw = len(tokens) == 2 and (tokens[0].token_type.name == "COMMAND" or (
            tokens[1].token_type.name == "STRING" and text[tokens[1].start:tokens[1].start + 1] not in ("'", '"')))
        if raw:  # (a command sqlglot keeps as text: SHOW ..., VACUUM ...)
            rest_text = text[tokens[0].end + 1:].lstrip()
            at = len(text) - len(rest_text)
            rest = dialect.tokenize(rest_text)
            for t in rest:
                t.start += at
                t.end += at
                if t.line == 1:
                    t.col += at
            tokens = tokens[:1] + rest
        return tokens
    except Exception as e:  # (sqlglot's TokenError: an unterminated string or comment)
        raise SqlError(f"cannot read the statement: {e}") from None


def refuse_args(node, handled: set[str], what: str) -> None:
    """SqlError naming the first argument of ``node`` that is set and not in ``handled``: a clause the
    statement's runner would otherwise ignore."""
    for key, value in node.args.items():
        if key in handled or value in (None, False, [], ""):
            continue
        shown = spark_sql(value) if hasattr(value, "sql") else (", ".join(spark_sql(v) if hasattr(v, "sql") else str(v) for v in value)
                                                               if isinstance(value, list) else str(value))
        raise SqlError(f"{what}: spark_ext.sql does not run the clause {key.upper()} ({shown}) on lakelog tables")


class Tokens:
    """A cursor over a statement's tokens, for the statements read token by token."""

    def __init__(self, text: str, tokens: list | None = None):
        self.text = text
        self.tokens = tokenize(text) if tokens is None else tokens
        self.i = 0

    def peek(self, k: int = 0):
        return self.tokens[self.i + k] if self.i + k < len(self.tokens) else None

    def peek_word(self, k: int = 0) -> str | None:
        tok = self.peek(k)
        return None if tok is None else tok.text.upper()

    def error(self, expected: str) -> SqlError:
        tok = self.peek()
        where = f"line {tok.line}, column {tok.col}, at {tok.text!r}" if tok is not None else "the end of the statement"
        return SqlError(f"cannot parse the statement: expected {expected} at {where}")

    def word(self, *words: str, optional: bool = False) -> str | None:
        tok = self.peek()
        if tok is not None and tok.text.upper() in words and tok.token_type.name not in ("STRING", "IDENTIFIER"):
            self.i += 1
            return tok.text.upper()
        if optional:
            return None
        raise self.error(" or ".join(words))

    def words(self, *words: str) -> bool:
        """Whether the next tokens are ``words`` (consumed when they are)."""
        for k, w in enumerate(words):
            tok = self.peek(k)
            if tok is None or tok.text.upper() != w or tok.token_type.name in ("STRING", "IDENTIFIER"):
                return False
        self.i += len(words)
        return True

    def name(self, what: str = "a name") -> str:
        """An identifier (bare or in backticks), as written."""
        tok = self.peek()
        if tok is None or tok.token_type.name in ("STRING", "NUMBER") or tok.text in (".", "(", ")", ",", "="):
            raise self.error(what)
        self.i += 1
        return tok.text

    def dotted(self, what: str = "a column name") -> list[str]:
        """``name(.name)*``: the parts."""
        parts = [self.name(what)]
        while self.peek() is not None and self.peek().text == ".":
            self.i += 1
            parts.append(self.name(what))
        return parts

    def string(self, what: str = "a quoted string") -> str:
        tok = self.peek()
        if tok is None or tok.token_type.name != "STRING":
            raise self.error(what)
        self.i += 1
        return tok.text

    def number(self) -> str:
        tok = self.peek()
        neg = tok is not None and tok.text == "-"
        if neg:
            self.i += 1
            tok = self.peek()
        if tok is None or tok.token_type.name != "NUMBER":
            raise self.error("a number")
        self.i += 1
        return ("-" if neg else "") + tok.text

    def literal(self) -> tuple[str, str]:
        """A number or a quoted string: (token kind, text)."""
        tok = self.peek()
        if tok is None or tok.token_type.name not in ("NUMBER", "STRING"):
            raise self.error("a version number or a quoted timestamp")
        self.i += 1
        return tok.token_type.name, tok.text

    def value(self) -> str:
        """A property value: a quoted string, a number, TRUE/FALSE, or a bare word."""
        tok = self.peek()
        if tok is None or tok.text in (",", ")", "(", "="):
            raise self.error("a value")
        if tok.text == "-":
            return self.number()
        self.i += 1
        return tok.text.lower() if tok.token_type.name in ("TRUE", "FALSE") else tok.text

    def balanced(self, what: str) -> str:
        """The text inside the parentheses that come next (nested ones included), as written."""
        self.word("(")
        start, depth = self.i, 1
        while True:
            tok = self.peek()
            if tok is None:
                raise self.error(f"')' closing {what}")
            if tok.text == "(" and tok.token_type.name == "L_PAREN":
                depth += 1
            elif tok.text == ")" and tok.token_type.name == "R_PAREN":
                depth -= 1
                if depth == 0:
                    break
            self.i += 1
        if self.i == start:
            raise self.error(what)
        inner = self.text[self.tokens[start].start:self.tokens[self.i - 1].end + 1]
        self.i += 1
        return inner

    def rest(self) -> str:
        """The rest of the statement as written (empty at its end)."""
        tok = self.peek()
        return "" if tok is None else self.text[tok.start:]

    def until(self, *stops: str) -> str:
        """The text up to the next top-level ``stops`` word or comma/closing parenthesis (not consumed); for
        column types, so ``<`` and ``>`` nest as parentheses do."""
        start, depth = self.i, 0
        while True:
            tok = self.peek()
            if tok is None:
                break
            if depth == 0 and (tok.text in (",", ")") or (tok.text.upper() in stops and tok.token_type.name not in ("STRING", "IDENTIFIER"))):
                break
            if tok.token_type.name in ("L_PAREN", "LT"):  # (angle brackets: STRUCT<a: INT, b: STRING>)
                depth += 1
            elif tok.token_type.name in ("R_PAREN", "GT"):
                depth -= 1
            self.i += 1
        if self.i == start:
            return ""
        return self.text[self.tokens[start].start:self.tokens[self.i - 1].end + 1]

    def end(self) -> None:
        if self.peek() is not None:
            raise self.error("the end of the statement")

    def table_ref(self) -> tuple[str, Any]:
        """A table reference: ``lakelog.`path```, ``db.name``, ``name`` or a quoted path (``'/data/t'``, as Delta
        takes it); returns ("path", path) for the quoted form, else ("table", the sqlglot Table)."""
        tok = self.peek()
        if tok is not None and tok.token_type.name == "STRING":
            self.i += 1
            return "path", tok.text
        start = self.i
        parts = []
        while True:
            tok = self.peek()
            if tok is None or tok.text in (".", "(", ")", ","):
                break
            parts.append(tok)
            self.i += 1
            if self.peek() is None or self.peek().text != ".":
                break
            self.i += 1
        if not parts:
            raise self.error("a table name")
        sg, exp = sqlglot()
        text = ".".join(f"`{p.text.replace('`', '``')}`" if p.token_type.name in ("IDENTIFIER", "STRING") or not p.text.isidentifier()
                        else p.text for p in parts)
        try:
            return "table", sg.parse_one(text, read=spark_dialect(), into=exp.Table)
        except sg.errors.ParseError:
            self.i = start
            raise self.error("a table name") from None

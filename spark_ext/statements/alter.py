"""``ALTER TABLE`` on lakelog tables, read token by token and run as one ``lakelog.Table`` commit:

* ``SET TBLPROPERTIES (k = v, ...)``, ``UNSET TBLPROPERTIES [IF EXISTS] (k, ...)``;
* ``ADD COLUMN[S] [(]col type, ...[)]`` (``s.f`` adds a struct field; nullable, last);
* ``DROP COLUMN[S] [IF EXISTS] [(]col, ...[)]``, ``RENAME COLUMN a TO b`` (column mapping);
* ``ALTER|CHANGE [COLUMN] col TYPE t`` (Delta's type widening), ``... DROP NOT NULL``,
  ``... SET DEFAULT expr``, ``... DROP DEFAULT``;
* ``ADD CONSTRAINT name CHECK (expr)``, ``DROP CONSTRAINT [IF EXISTS] name``;
* ``RENAME TO name`` (the catalog entry of a catalog table).

Anything else (``SET NOT NULL``, ``COMMENT``, ``FIRST``/``AFTER``, ``CLUSTER BY``, ``REPLACE COLUMNS``,
partitions, ``SET LOCATION``, ...) is refused by name; Spark would run those on its catalog entry only
and leave the table as it was.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

import lakelog

from .syntax import SqlError, Tokens, spark_dialect, sqlglot
from .tables import conf_key, is_path, path_of, table_name

_COLUMN_OPTIONS = ("NOT", "NULL", "COMMENT", "DEFAULT", "FIRST", "AFTER", "GENERATED", "CONSTRAINT", "PRIMARY", "CHECK")


def alter_target(spark: SparkSession, toks: Tokens):
    """After ``ALTER TABLE``: (the table node, its lakelog path or None)."""
    toks.word("ALTER")
    toks.word("TABLE")
    kind, ref = toks.table_ref()
    if kind == "path":
        raise SqlError("ALTER TABLE takes a table name or lakelog.`<path>`, not a quoted path")
    return ref, path_of(spark, ref)


def run_alter(spark: SparkSession, toks: Tokens, ref, path: str) -> DataFrame:
    t = lakelog.Table(path)
    done = spark.createDataFrame([], "result string")
    if toks.words("SET", "TBLPROPERTIES"):
        props = _pairs(toks)
        toks.end()
        t.set_properties(props)
    elif toks.words("UNSET", "TBLPROPERTIES"):
        if_exists = toks.words("IF", "EXISTS")
        keys = _keys(toks)
        toks.end()
        t.unset_properties(keys, if_exists=if_exists)
    elif toks.words("ADD", "CONSTRAINT"):
        name = toks.name("a constraint name")
        toks.word("CHECK")
        expr = toks.balanced("the CHECK expression")
        toks.end()
        t.add_constraint({name: expr})
    elif toks.words("DROP", "CONSTRAINT"):
        if_exists = toks.words("IF", "EXISTS")
        name = toks.name("a constraint name")
        toks.end()
        t.drop_constraint(name, if_exists=if_exists)
    elif toks.peek_word() == "ADD" and toks.peek_word(1) in ("COLUMN", "COLUMNS"):
        toks.i += 2
        t.add_columns(_new_columns(spark, toks))
    elif toks.peek_word() == "DROP" and toks.peek_word(1) in ("COLUMN", "COLUMNS"):
        toks.i += 2
        if_exists = toks.words("IF", "EXISTS")
        names = _column_list(toks)
        toks.end()
        if if_exists:
            names = [n for n in names if _has(t.schema, n)]
            if not names:
                return done
        t.drop_columns(names)
    elif toks.words("RENAME", "COLUMN"):
        old = ".".join(toks.dotted())
        toks.word("TO")
        new = toks.name("the new column name")
        toks.end()
        t.rename_column(old, new)
    elif toks.words("RENAME", "TO"):
        if is_path(ref):
            raise SqlError("ALTER TABLE lakelog.`<path>` RENAME TO: a path table has no name to change")
        _, new = toks.table_ref()
        toks.end()
        spark.sql(f"ALTER TABLE {table_name(ref)} RENAME TO {table_name(new)}")
        spark.conf.unset(conf_key(spark, ref))
        spark.conf.set(conf_key(spark, new), path)
    elif toks.word("ALTER", "CHANGE", optional=True):
        toks.word("COLUMN", optional=True)
        _alter_column(toks, t)
    else:
        rest = toks.rest() or "(nothing)"
        raise SqlError(f"ALTER TABLE {rest.split('(')[0].strip()}: spark_ext.sql does not run this form on lakelog tables (it runs SET/UNSET "
                       "TBLPROPERTIES, ADD/DROP/RENAME COLUMN, ALTER COLUMN TYPE/DROP NOT NULL/SET DEFAULT/DROP DEFAULT, "
                       "ADD/DROP CONSTRAINT and RENAME TO)")
    return done


def _alter_column(toks: Tokens, t: lakelog.Table) -> None:
    column = ".".join(toks.dotted())
    clause = toks.rest()
    if toks.word("TYPE", optional=True):
        type_text = toks.rest()
        if not type_text:
            raise toks.error("a type")
        _check_type(type_text, column)
        toks.i = len(toks.tokens)
        t.alter_column_type(column, type_text)
    elif toks.words("DROP", "NOT", "NULL"):
        toks.end()
        t.drop_not_null(column)
    elif toks.words("SET", "DEFAULT"):
        expr = toks.rest()
        if not expr:
            raise toks.error("the default expression")
        t.set_column_default(column, expr)
    elif toks.words("DROP", "DEFAULT"):
        toks.end()
        t.set_column_default(column, None)
    elif toks.words("SET", "NOT", "NULL"):
        raise SqlError(f"ALTER COLUMN {column} SET NOT NULL: not supported (Delta refuses it too: rows already written are not checked); "
                       "add a CHECK constraint instead (ALTER TABLE ... ADD CONSTRAINT c CHECK ({column} IS NOT NULL))")
    else:
        raise SqlError(f"ALTER COLUMN {column} {clause}: spark_ext.sql runs TYPE, DROP NOT NULL, SET DEFAULT and DROP DEFAULT here "
                       "(COMMENT, FIRST/AFTER, SYNC IDENTITY and renaming by CHANGE COLUMN are not supported)")


def _pairs(toks: Tokens) -> dict[str, str]:
    toks.word("(")
    out: dict[str, str] = {}
    while True:
        key = _key(toks)
        toks.word("=", optional=True)
        out[key] = toks.value()
        if not toks.word(",", optional=True):
            break
    toks.word(")")
    return out


def _keys(toks: Tokens) -> list[str]:
    toks.word("(")
    keys = [_key(toks)]
    while toks.word(",", optional=True):
        keys.append(_key(toks))
    toks.word(")")
    return keys


def _key(toks: Tokens) -> str:
    tok = toks.peek()
    if tok is not None and tok.token_type.name == "STRING":
        return toks.string()
    return ".".join(toks.dotted("a property name"))


def _column_list(toks: Tokens) -> list[str]:
    paren = toks.word("(", optional=True)
    names = [".".join(toks.dotted())]
    while toks.word(",", optional=True):
        names.append(".".join(toks.dotted()))
    if paren:
        toks.word(")")
    return names


def _has(schema: pa.Schema, name: str) -> bool:
    parts = name.split(".")
    t: pa.DataType | pa.Schema = schema
    for part in parts:
        fields = list(t) if isinstance(t, pa.Schema) else ([t.field(i) for i in range(t.num_fields)] if pa.types.is_struct(t) else [])
        match = next((f for f in fields if f.name.lower() == part.lower()), None)
        if match is None:
            return False
        t = match.type
    return True


def _check_type(text: str, column: str) -> None:
    sg, exp = sqlglot()
    try:
        dt = exp.DataType.build(text, dialect=spark_dialect())
    except Exception:
        return  # (Spark's parser says what is wrong with it)
    chars = [d for d in dt.find_all(exp.DataType) if d.this.name in ("CHAR", "VARCHAR", "NCHAR", "NVARCHAR")]
    if chars:
        raise SqlError(f"column {column}: type {text.strip()}: CHAR/VARCHAR lengths are not enforced by lakelog, use STRING")


def _new_columns(spark: SparkSession, toks: Tokens) -> dict[str, pa.DataType]:
    """``ADD COLUMNS``' columns: name -> Arrow type."""
    from lakelog.schema.types import schema_from_string

    paren = toks.word("(", optional=True)
    specs: list[tuple[str, str]] = []
    while True:
        name = ".".join(toks.dotted())
        type_text = toks.until(*_COLUMN_OPTIONS)
        if not type_text:
            raise toks.error(f"the type of column {name}")
        word = toks.peek_word()
        if word in _COLUMN_OPTIONS:
            clause = toks.until()
            why = {"NOT": "a new column cannot be NOT NULL (rows already written have no value; Delta refuses it too)",
                   "DEFAULT": "Delta does not take a default when a column is added; add the column, then ALTER COLUMN ... SET DEFAULT",
                   "COMMENT": "lakelog does not store column comments",
                   "FIRST": "new columns go last", "AFTER": "new columns go last"}.get(word, "not supported")
            raise SqlError(f"ALTER TABLE ADD COLUMNS: column {name}: {clause}: {why}")
        _check_type(type_text, name)
        specs.append((name, type_text))
        if not toks.word(",", optional=True):
            break
    if paren:
        toks.word(")")
    toks.end()
    ddl = ", ".join(f"`c{i}` {type_text}" for i, (_, type_text) in enumerate(specs))
    schema = schema_from_string(spark.createDataFrame([], ddl).schema.json())
    return {name: schema.field(i).type for i, (name, _) in enumerate(specs)}

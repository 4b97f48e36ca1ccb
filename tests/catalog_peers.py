"""What the tests of lakelog tables by name in Spark's catalog compare with: the same table read in plain
Python, by lakelog and by deltalake (delta-rs), and the error Spark raised for a refused statement."""

from __future__ import annotations

import datetime as dt
import decimal
import os
import uuid
from typing import Any, Callable

import deltalake
import pyarrow as pa
import pytest

import lakelog

# The long form of the Spark catalog tests (every documented example, more seeds, longer sequences).
FULL = os.environ.get("LAKELOG_SPARK_SQL_FULL") == "1"
full_only = pytest.mark.skipif(not FULL, reason="runs with LAKELOG_SPARK_SQL_FULL=1 (the long form)")


def unique(prefix: str = "t") -> str:
    """A table name no other test of the run uses (the catalog is the run's one session's)."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def local(location: str) -> str:
    """A location as Spark shows it (``file:/x``, ``file:///x``) as a local path."""
    for prefix in ("file://", "file:"):
        if location.startswith(prefix):
            return location[len(prefix):]
    return location


def location(spark, name: str) -> str:
    """The table's location, as Spark's own DESCRIBE TABLE EXTENDED reports it from the catalog."""
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()
    found = [r.data_type for r in rows if r.col_name == "Location"]
    assert found, f"DESCRIBE TABLE EXTENDED {name} shows no Location: {rows}"
    return local(found[0])


def warehouse(spark) -> str:
    return local(spark.conf.get("spark.sql.warehouse.dir")).rstrip("/")


def _value(v: Any) -> Any:
    if isinstance(v, float) and v != v:
        return "NaN"
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, dict):
        return tuple(sorted((k, _value(x)) for k, x in v.items()))
    if isinstance(v, list):
        return tuple(_value(x) for x in v)
    return v


def _key(row: tuple) -> tuple:
    return tuple((x is None, str(type(x)), x if x is not None else 0) for x in row)


def rows_of(table: pa.Table, columns: list[str] | None = None) -> list[tuple]:
    """The rows of an Arrow table as sorted tuples (of ``columns``, default all)."""
    names = columns or table.column_names
    data = table.select(names).to_pylist()
    return sorted((tuple(_value(r[c]) for c in names) for r in data), key=_key)


def spark_rows(df, columns: list[str] | None = None) -> list[tuple]:
    """The rows of a Spark DataFrame (or of a list of Rows) as sorted tuples."""
    rows = df if isinstance(df, list) else df.collect()
    out = []
    for r in rows:
        d = r.asDict(recursive=True)
        names = columns or list(d)
        out.append(tuple(_value(d[c]) for c in names))
    return sorted(out, key=_key)


def lakelog_rows(path: str, columns: list[str] | None = None, version: int | None = None) -> list[tuple]:
    return rows_of(lakelog.Table(path, version=version).to_pyarrow(), columns)


def deltalake_table(path: str, version: int | None = None) -> pa.Table:
    """The table as deltalake reads it: its SQL engine, which applies deletion vectors and column mapping."""
    table = deltalake.DeltaTable(path) if version is None else deltalake.DeltaTable(path, version=version)
    return pa.table(deltalake.QueryBuilder().register("t", table).execute("SELECT * FROM t").read_all())


def deltalake_rows(path: str, columns: list[str] | None = None, version: int | None = None) -> list[tuple]:
    return rows_of(deltalake_table(path, version), columns)


def assert_agree(spark_result, path: str, columns: list[str] | None = None, *, version: int | None = None,
                 peer: bool = True, expected: list[tuple] | None = None) -> list[tuple]:
    """Spark's rows equal lakelog's and deltalake's reads of ``path`` (at ``version``), and ``expected``
    when given. ``peer=False`` for tables deltalake cannot read (type widening). Returns the rows."""
    got = spark_rows(spark_result, columns)
    assert got == lakelog_rows(path, columns, version), "Spark and lakelog disagree"
    if peer:
        assert got == deltalake_rows(path, columns, version), "Spark and deltalake disagree"
    if expected is not None:
        assert got == sorted((tuple(_value(v) for v in r) for r in expected), key=_key)
    return got


def condition(call: Callable[[], Any]) -> tuple[str | None, str]:
    """Run ``call``, which must fail; the error's condition (error class) and message."""
    try:
        call()
    except Exception as e:  # noqa: BLE001 - the test looks at what it is
        get = getattr(e, "getCondition", None)
        return (get() if get else None), str(e)
    raise AssertionError("expected the statement to fail")


def refused(spark, statement: str) -> tuple[str | None, str]:
    """``spark.sql(statement)`` (collected) must fail: its condition and message."""
    return condition(lambda: spark.sql(statement).collect())


def version_of(path: str) -> int:
    return lakelog.Table(path).version


def exists(path: str) -> bool:
    return os.path.isdir(os.path.join(path, "_delta_log"))

"""README: tables lakelog writes are readable by DuckDB and Polars through ``Table.to_pyarrow_dataset()``
(partition values as columns), at any version."""

from __future__ import annotations

import datetime as dt

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

import lakelog


def _table(path: str) -> None:
    lakelog.write_table(path, pa.table({"id": [1, 2, 3], "day": ["mon", "tue", None], "d": [dt.date(2026, 1, i) for i in (1, 2, 3)]}), partition_by=["day"])
    lakelog.write_table(path, pa.table({"id": [4], "day": ["mon"], "d": [dt.date(2026, 1, 4)]}))
    lakelog.write_table(path, pa.table({"id": [9], "day": ["sun"], "d": [dt.date(2026, 1, 9)]}), mode="overwrite")


def test_duckdb_queries_the_dataset(table_path):
    _table(table_path)
    v1 = lakelog.Table(table_path, version=1).to_pyarrow_dataset()
    con = duckdb.connect()
    con.register("v1", v1)
    got = con.sql("select day, count(*) as n, sum(id) as total from v1 group by day order by day nulls last").fetchall()
    assert got == [("mon", 2, 5), ("tue", 1, 2), (None, 1, 3)]
    assert con.sql("select id from v1 where d >= date '2026-01-03' order by id").fetchall() == [(3,), (4,)]
    latest = lakelog.Table(table_path).to_pyarrow_dataset()
    con.register("latest", latest)
    assert con.sql("select id, day from latest").fetchall() == [(9, "sun")]


def test_polars_scans_the_dataset(table_path):
    _table(table_path)
    v1 = lakelog.Table(table_path, version=1).to_pyarrow_dataset()
    df = pl.scan_pyarrow_dataset(v1).filter(pl.col("day") == "mon").select("id", "day").collect().sort("id")
    assert df.rows() == [(1, "mon"), (4, "mon")]
    assert pl.scan_pyarrow_dataset(v1).select(pl.len()).collect().item() == 4
    filtered = lakelog.Table(table_path, version=1).to_pyarrow_dataset(filters=pc.field("id") > 2)
    assert sorted(pl.scan_pyarrow_dataset(filtered).filter(pl.col("id") > 2).collect()["id"].to_list()) == [3, 4]

"""Spark- and Databricks-written tables with deletion vectors, column mapping and type widening
(tests/data, see its README) read with exactly their expected rows through every read path:
read_table, Table.to_pyarrow/to_pandas/read_batches, time travel, filters (stats and partition pruning
included), Spark's format("lakelog") and its streaming source, and spark_ext.read (Spark's own Parquet scan)."""

from __future__ import annotations

import json
import operator
import re
import shutil

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakelog
from lakelog.errors import UnsupportedFeatureError

from .expected_rows import canonical_rows, expected, table_path

DV_TABLES = [
    "table-with-dv-small",
    "with-short-dv",
    "dv-partitioned-with-checkpoint",
    "dv-with-columnmapping",
    "log-replay-dv-key-cases",
    "cdf-table-with-dv",
    "basic-dv-no-checkpoint",
    "basic-dv-with-checkpoint",
    "compacted-log-files-table",
    "table_with_liquid_clustering",
]
CM_TABLES = [
    "table-with-columnmapping-mode-name",
    "table-with-columnmapping-mode-id",
    "data-reader-timestamp_ntz-name-mode",
    "data-reader-timestamp_ntz-id-mode",
    "table_with_partitioning_mapping",
    "table_with_column_mapping",
    "cdf-column-mapping-name-mode-3-7",
    "cdf-column-mapping-id-mode",
    "table-with-icebegCompatV2Enabled",
]
TW_TABLES = ["type-widening", "type-widening-nested"]
TABLES = DV_TABLES + CM_TABLES + TW_TABLES

# One filter per table (a logical column name, compared as SQL would), checked against the expected rows.
FILTERS = {
    "table-with-dv-small": ("value", ">", 3),
    "with-short-dv": ("id", "<", 5),
    "dv-partitioned-with-checkpoint": ("col1", ">=", 5),
    "dv-with-columnmapping": ("col1", ">=", 5),
    "log-replay-dv-key-cases": ("id", ">", 20),
    "cdf-table-with-dv": ("value", ">=", 3),
    "basic-dv-no-checkpoint": ("id", ">", 4),
    "basic-dv-with-checkpoint": ("id", "<", 150),
    "compacted-log-files-table": ("id", ">", 1),
    "table_with_liquid_clustering": ("id", ">", 3),
    "table-with-columnmapping-mode-name": ("IntegerType", ">", 1),
    "table-with-columnmapping-mode-id": ("IntegerType", ">", 1),
    "data-reader-timestamp_ntz-name-mode": ("id", ">=", 3),
    "data-reader-timestamp_ntz-id-mode": ("id", ">=", 3),
    "table_with_partitioning_mapping": ("newid", "=", 2),
    "table_with_column_mapping": ("Company Very Short", "=", "BME"),
    "cdf-column-mapping-name-mode-3-7": ("id", ">=", 3),
    "cdf-column-mapping-id-mode": ("id", ">=", 2),
    "table-with-icebegCompatV2Enabled": ("IntegerType", ">", 1),
    "type-widening": ("int_long", ">", 2),
    "type-widening-nested": ("struct.a", ">", 1),  # a pyarrow expression on a widened struct field
}
_OPS = {"=": operator.eq, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _value(row: dict, column: str):
    for part in column.split("."):
        row = None if row is None else row[part]
    return row


def _expected_filtered(rows: list[dict], column: str, op: str, value) -> list[dict]:
    return [r for r in rows if _value(r, column) is not None and _OPS[op](_value(r, column), value)]


def _filter(column: str, op: str, value):
    if "." in column:
        field = pc.field(*column.split("."))
        return {"=": field == value, "<": field < value, "<=": field <= value, ">": field > value, ">=": field >= value}[op]
    return [(column, op, value)]


@pytest.mark.parametrize("name", TABLES)
def test_read_table_returns_exactly_the_expected_rows(name):
    e = expected(name)
    t = lakelog.read_table(table_path(name))
    assert t.column_names == e["columns"]
    assert canonical_rows(t) == e["rows"]


@pytest.mark.parametrize("name", TABLES)
def test_to_pandas_returns_exactly_the_expected_rows(name):
    e = expected(name)
    table = lakelog.Table(table_path(name))
    df = table.to_pandas()
    assert list(df.columns) == e["columns"] and len(df) == e["row_count"]
    back = pa.Table.from_pandas(df, schema=table.schema, preserve_index=False)
    assert canonical_rows(back) == e["rows"]


@pytest.mark.parametrize("name", [n for n in TABLES if expected(n).get("versions")])
def test_time_travel_returns_each_versions_rows(name):
    e = expected(name)
    for version, want in e["versions"].items():
        got = lakelog.read_table(table_path(name), version=int(version))
        assert canonical_rows(got) == want["rows"], version


@pytest.mark.parametrize("name", TABLES)
def test_filters_use_logical_names_and_never_return_deleted_rows(name):
    e = expected(name)
    column, op, value = FILTERS[name]
    want = _expected_filtered(e["rows"], column, op, value)
    assert 0 < len(want) < e["row_count"], "the filter must select some rows, not all"
    table = lakelog.Table(table_path(name))
    got = table.to_pyarrow(filters=_filter(column, op, value))
    assert canonical_rows(got) == want
    # a projection without the filter column
    others = [c for c in e["columns"] if c != column.split(".")[0]][:1]
    got = table.to_pyarrow(columns=others, filters=_filter(column, op, value))
    assert canonical_rows(got) == sorted(({c: r[c] for c in others} for r in want), key=_key)


def _key(r):
    return json.dumps(r, sort_keys=True)


@pytest.mark.parametrize("name", ["dv-partitioned-with-checkpoint", "dv-with-columnmapping"])
def test_partition_and_stats_pruning_with_deletion_vectors_and_column_mapping(name):
    """Partition values and stats are keyed by physical names under column mapping: pruning by the logical
    partition column and by a stats bound skips files, and still returns exactly the live rows."""
    table = lakelog.Table(table_path(name))
    rows = expected(name)["rows"]
    every = table.files()
    part = table.files(filters=[("part", "=", 0)])
    assert 0 < len(part) < len(every)
    assert canonical_rows(table.to_pyarrow(filters=[("part", "=", 0)])) == [r for r in rows if r["part"] == 0]
    top = max(r["col1"] for r in rows)
    assert table.files(filters=[("col1", ">", 10 * top + 1000)]) == []


def test_column_mapping_stats_prune_by_physical_name():
    """table_with_partitioning_mapping renamed its partition column id -> newid; its partition values stay
    keyed by the physical name 'id'."""
    table = lakelog.Table(table_path("table_with_partitioning_mapping"))
    assert len(table.files(filters=[("newid", "=", 2)])) < len(table.files())


@pytest.mark.parametrize("name", ["dv-partitioned-with-checkpoint", "table-with-columnmapping-mode-id"])
def test_pyarrow_dataset_is_refused_with_an_alternative(name):
    table = lakelog.Table(table_path(name))
    with pytest.raises(UnsupportedFeatureError, match="read_batches"):
        table.to_pyarrow_dataset()
    got = pa.Table.from_batches(list(table.read_batches()), schema=table.schema)
    assert canonical_rows(got) == expected(name)["rows"]


def test_appends_to_type_widening_tables_write_the_widened_types(tmp_path):
    dst = tmp_path / "type-widening"
    shutil.copytree(table_path("type-widening"), dst)
    table = lakelog.Table(str(dst))
    before = table.to_pyarrow()
    lakelog.write_table(str(dst), before.slice(0, 1), mode="append")
    after = lakelog.Table(str(dst)).to_pyarrow()
    assert after.schema == before.schema and after.num_rows == before.num_rows + 1


@pytest.mark.parametrize("name", ["dv-with-columnmapping", "table-with-columnmapping-mode-name"])
def test_appends_to_column_mapping_tables(name, tmp_path):
    """(More in test_column_mapping_writes.) A row appended to a Spark-written column-mapping table, one
    with deletion vectors too, reads back with the table's rows."""
    dst = tmp_path / name
    shutil.copytree(table_path(name), dst)
    table = lakelog.Table(str(dst))
    row = table.to_pyarrow().slice(0, 1)
    lakelog.write_table(str(dst), row, mode="append")
    got = canonical_rows(lakelog.Table(str(dst)).to_pyarrow())
    assert got == sorted(expected(name)["rows"] + canonical_rows(row), key=lambda r: json.dumps(r, sort_keys=True))


@pytest.mark.parametrize("name", TABLES)
def test_spark_format_lakelog_reads_exactly_the_expected_rows(spark, name):
    e = expected(name)
    df = spark.read.format("lakelog").load(table_path(name))
    assert df.columns == e["columns"]
    assert canonical_rows(df.toArrow()) == e["rows"]
    column, op, value = FILTERS[name]
    if "." not in column and isinstance(value, int):
        from pyspark.sql import functions as F

        col = F.col(f"`{column}`")
        cond = {"=": col == value, "<": col < value, "<=": col <= value, ">": col > value, ">=": col >= value}[op]
        got = spark.read.format("lakelog").option("filterPushdown", "true").load(table_path(name)).where(cond)
        assert canonical_rows(got.toArrow()) == _expected_filtered(e["rows"], column, op, value)


@pytest.mark.parametrize("name", ["dv-partitioned-with-checkpoint", "dv-with-columnmapping"])
def test_spark_streaming_source_snapshot_drops_deleted_rows(spark, name):
    """The streaming source's first batch is the table at its latest version: deletion vectors applied,
    columns mapped. Following the DELETE commits from version 0 on fails without skipChangeCommits."""
    query = f"stream_{name.replace('-', '_')}"
    q = spark.readStream.format("lakelog").load(table_path(name)).writeStream.format("memory").queryName(query).trigger(availableNow=True).start()
    try:
        q.awaitTermination(240)
    finally:
        q.stop()
    assert canonical_rows(spark.sql(f"select * from {query}").toArrow()) == expected(name)["rows"]
    q = (
        spark.readStream.format("lakelog").option("startingVersion", "0").load(table_path(name))
        .writeStream.format("memory").queryName(query + "_changes").trigger(availableNow=True).start()
    )
    try:
        with pytest.raises(Exception, match="skipChangeCommits"):
            q.awaitTermination(240)
            if q.exception():
                raise q.exception()
    finally:
        q.stop()


NATIVE_TABLES = [n for n in TABLES if n != "type-widening"]


@pytest.mark.parametrize("name", NATIVE_TABLES)
def test_spark_ext_read_returns_exactly_the_expected_rows(spark, name):
    """spark_ext.read (Spark's own Parquet scan) drops deleted rows, maps physical to logical names
    (nested fields, partition values keyed by physical names, id mode) and widens types; with a filter
    on a logical column, a projection without it, and at every listed version."""
    import spark_ext
    from pyspark.sql import functions as F

    e = expected(name)
    df = spark_ext.read(spark, table_path(name))
    assert df.columns == e["columns"]
    assert canonical_rows(df.toArrow()) == e["rows"]
    column, op, value = FILTERS[name]
    col = F.col(".".join(f"`{p}`" for p in column.split(".")))
    cond = {"=": col == value, "<": col < value, "<=": col <= value, ">": col > value, ">=": col >= value}[op]
    want = _expected_filtered(e["rows"], column, op, value)
    assert canonical_rows(df.where(cond).toArrow()) == want
    others = [c for c in e["columns"] if c != column.split(".")[0]][:1]
    got = df.where(cond).select(*[F.col(f"`{c}`") for c in others])
    if others:
        assert canonical_rows(got.toArrow()) == sorted(({c: r[c] for c in others} for r in want), key=_key)
    assert got.count() == len(want)
    for version, v in (e.get("versions") or {}).items():
        got = spark_ext.read(spark, table_path(name), version=int(version))
        assert canonical_rows(got.toArrow()) == v["rows"], version


@pytest.mark.parametrize("name", ["dv-with-columnmapping", "dv-partitioned-with-checkpoint"])
def test_spark_ext_read_prunes_by_logical_names_with_deletion_vectors(spark, name):
    """Filters on logical names reach Spark's scan as partition filters and Parquet filters on the
    physical names; the deleted rows stay out whichever files the filter keeps."""
    import spark_ext

    table = lakelog.Table(table_path(name))
    mapping = table.snapshot.column_mapping
    df = spark_ext.read(spark, table_path(name))
    plan = df.where("part = 0 and col1 >= 5").select("col1")._jdf.queryExecution().executedPlan().toString()
    assert "FileScan parquet" in plan and "Batched: true" in plan
    assert f"PartitionFilters: [isnotnull({mapping.physical_name('part')}" in plan
    col1 = re.escape(mapping.physical_name("col1"))
    assert re.search(rf"PushedFilters: \[IsNotNull\(`?{col1}`?\), GreaterThanOrEqual\(", plan)  # row-group skipping
    rows = expected(name)["rows"]
    got = canonical_rows(df.where("part = 0 and col1 >= 5").toArrow())
    assert got == [r for r in rows if r["part"] == 0 and r["col1"] >= 5]


def test_spark_ext_read_names_a_missing_or_damaged_deletion_vector(spark, tmp_path):
    import spark_ext
    from lakelog.errors import CorruptDeletionVectorError, MissingDeletionVectorError

    dst = tmp_path / "t"
    shutil.copytree(table_path("table-with-dv-small"), dst)
    (dv,) = [p for p in dst.iterdir() if p.name.startswith("deletion_vector_")]
    data = bytearray(dv.read_bytes())
    data[-6] ^= 0xFF
    dv.write_bytes(bytes(data))
    with pytest.raises(CorruptDeletionVectorError, match=dv.name):
        spark_ext.read(spark, str(dst))
    dv.unlink()
    with pytest.raises(MissingDeletionVectorError, match=dv.name):
        spark_ext.read(spark, str(dst))
    assert canonical_rows(spark_ext.read(spark, str(dst), version=0).toArrow()) == expected("table-with-dv-small")["versions"]["0"]["rows"]


def test_spark_ext_read_refuses_type_changes_spark_cannot_read(spark):
    """Spark's vectorized reader cannot read a byte or short Parquet column as decimal(4,1)/(6,1): such a
    table is refused naming the columns and pointing to format("lakelog"), which reads it."""
    import spark_ext

    with pytest.raises(UnsupportedFeatureError, match="typeWidening") as info:
        spark_ext.read(spark, table_path("type-widening"))
    assert "byte_decimal" in str(info.value) and "short_decimal" in str(info.value)
    assert "int_decimal" not in str(info.value)  # Spark reads that one
    assert 'format("lakelog")' in str(info.value)


def test_spark_ext_read_id_mode_matches_by_field_id_where_the_session_enables_it(spark, tmp_path):
    """In id mode the relation's fields carry their Parquet field ids: with Spark's field-id matching on,
    the files' columns are found by id (nested fields too), even where the log's physical names are
    not the files' column names (here: renamed in a copy of the log)."""
    import spark_ext

    dst = tmp_path / "t"
    shutil.copytree(table_path("table-with-columnmapping-mode-id"), dst)
    log = dst / "_delta_log" / "00000000000000000000.json"
    text = log.read_text()
    assert text.count('physicalName\\":\\"col-') > 10
    log.write_text(text.replace('physicalName\\":\\"col-', 'physicalName\\":\\"moved-col-'))
    rows = expected("table-with-columnmapping-mode-id")["rows"]
    assert canonical_rows(lakelog.read_table(str(dst))) == rows  # lakelog matches by id
    spark.conf.set("spark.sql.parquet.fieldId.read.enabled", "true")
    try:
        assert canonical_rows(spark_ext.read(spark, str(dst)).toArrow()) == rows
    finally:
        spark.conf.unset("spark.sql.parquet.fieldId.read.enabled")

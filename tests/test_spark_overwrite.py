"""Partial overwrites from Spark: option replaceWhere and dynamic partition overwrite (option
partitionOverwriteMode or the session's spark.sql.sources.partitionOverwriteMode), each one commit
against the version the write started on; deltalake reads the results."""

from __future__ import annotations

import datetime as dt
import os

import deltalake
import pyarrow as pa
import pytest

import lakelog

SCHEMA = "day string, x long"
SESSION_MODE = "spark.sql.sources.partitionOverwriteMode"


@pytest.fixture
def table(tmp_path) -> str:
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"day": ["d1", "d1", "d2"], "x": pa.array([1, 2, 3], pa.int64())}), partition_by=["day"])
    return path


def _rows(path: str) -> list[tuple]:
    t = deltalake.DeltaTable(path).to_pyarrow_table()
    return sorted(zip(t.column("day").to_pylist(), t.column("x").to_pylist()))


def _on_disk(path: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(path) for f in fs
                  if f.endswith(".parquet") and "_delta_log" not in d)


def _df(spark, rows, concurrent: tuple[str, list[tuple]] | None = None, marker: str | None = None):
    """``rows`` as a DataFrame of two partitions. ``concurrent``: (table, rows) appended by lakelog once,
    from inside the write's first task: after the write started, before it commits."""
    df = spark.createDataFrame(rows, SCHEMA).repartition(2)
    if concurrent is None:
        return df
    path, extra = concurrent

    def append_once(batches):
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            pass
        else:
            import lakelog
            import pyarrow as pa

            lakelog.write_table(path, pa.table({"day": [d for d, _ in extra], "x": pa.array([x for _, x in extra], pa.int64())}))
        yield from batches

    return df.mapInArrow(append_once, df.schema)


def _write(df, path: str, **options) -> None:
    w = df.write.format("lakelog").mode("overwrite")
    for k, v in options.items():
        w = w.option(k, v)
    w.save(path)


# ---------------------------------------------------------------- replaceWhere

@pytest.mark.parametrize("predicate", ["day = 'd1'", "day = 'd1' AND x < 100"], ids=["partition-column", "data-column"])
def test_replace_where_beside_a_concurrent_append_to_another_partition(spark, table, tmp_path, predicate):
    df = _df(spark, [("d1", 10), ("d1", 11)], concurrent=(table, [("d3", 30)]), marker=str(tmp_path / "m"))
    _write(df, table, replaceWhere=predicate)
    assert _rows(table) == [("d1", 10), ("d1", 11), ("d2", 3), ("d3", 30)]
    dt = deltalake.DeltaTable(table)
    assert dt.version() == 2  # the concurrent append (1), then this write: one commit
    last = dt.history(1)[0]
    assert (last["operation"], last["operationParameters"]["mode"], last["operationParameters"]["predicate"]) == ("WRITE", "Overwrite", predicate)


def test_replace_where_conflicts_with_a_concurrent_append_it_would_replace(spark, table, tmp_path):
    df = _df(spark, [("d1", 10)], concurrent=(table, [("d1", 99)]), marker=str(tmp_path / "m"))
    with pytest.raises(Exception, match="CommitConflictError"):
        _write(df, table, replaceWhere="day = 'd1'")
    assert _rows(table) == [("d1", 1), ("d1", 2), ("d1", 99), ("d2", 3)]  # nothing of the write committed
    assert deltalake.DeltaTable(table).version() == 1
    assert set(_on_disk(table)) == set(lakelog.Table(table).files())  # the tasks' files are gone


def test_replace_where_refuses_rows_outside_the_predicate(spark, table):
    before = _on_disk(table)
    with pytest.raises(Exception, match=r"PredicateViolationError: 1 row\(s\) of the data do not satisfy the overwrite predicate \"day = 'd1'\""):
        _write(_df(spark, [("d1", 10), ("d2", 20)]), table, replaceWhere="day = 'd1'")
    assert deltalake.DeltaTable(table).version() == 0
    assert _rows(table) == [("d1", 1), ("d1", 2), ("d2", 3)]
    assert _on_disk(table) == before  # the tasks' files are gone


def test_replace_where_bad_options(spark, table):
    df = _df(spark, [("d1", 10)])
    with pytest.raises(Exception, match="PredicateError"):  # checked before any task runs
        _write(df, table, replaceWhere="no_such_column = 1")
    with pytest.raises(Exception, match="replaceWhere needs mode"):
        df.write.format("lakelog").mode("append").option("replaceWhere", "day = 'd1'").save(table)
    with pytest.raises(Exception, match="replaceWhere and partitionOverwriteMode=dynamic cannot be combined"):
        _write(df, table, replaceWhere="day = 'd1'", partitionOverwriteMode="dynamic")
    with pytest.raises(Exception, match="partitionOverwriteMode='sometimes' is not valid"):
        _write(df, table, partitionOverwriteMode="sometimes")
    assert deltalake.DeltaTable(table).version() == 0


def test_replace_where_creates_a_missing_table(spark, tmp_path):
    path = str(tmp_path / "new")
    _write(_df(spark, [("d1", 10)]), path, replaceWhere="day = 'd1'", partitionBy="day")
    assert _rows(path) == [("d1", 10)]
    assert lakelog.Table(path).partition_columns == ["day"]


# ---------------------------------------------------------------- dynamic partition overwrite

def test_dynamic_overwrite_beside_a_concurrent_append_to_another_partition(spark, table, tmp_path):
    df = _df(spark, [("d2", 20), ("d4", 40)], concurrent=(table, [("d3", 30)]), marker=str(tmp_path / "m"))
    _write(df, table, partitionOverwriteMode="dynamic")
    assert _rows(table) == [("d1", 1), ("d1", 2), ("d2", 20), ("d3", 30), ("d4", 40)]
    dt = deltalake.DeltaTable(table)
    assert dt.version() == 2
    assert dt.history(1)[0]["operationParameters"]["partitionOverwriteMode"] == "dynamic"


def test_dynamic_overwrite_conflicts_with_a_concurrent_append_to_a_replaced_partition(spark, table, tmp_path):
    df = _df(spark, [("d2", 20)], concurrent=(table, [("d2", 99)]), marker=str(tmp_path / "m"))
    with pytest.raises(Exception, match="CommitConflictError"):
        _write(df, table, partitionOverwriteMode="dynamic")
    assert _rows(table) == [("d1", 1), ("d1", 2), ("d2", 3), ("d2", 99)]
    assert set(_on_disk(table)) == set(lakelog.Table(table).files())  # the tasks' files are gone


def test_dynamic_overwrite_replaces_a_partition_logged_in_other_text(spark, tmp_path):
    """delta-rs logs a timestamp partition as '2021-01-01 10:00:00.000000', lakelog as
    '2021-01-01T10:00:00.000000Z': one partition, replaced, not kept beside the new rows."""
    path = str(tmp_path / "t")
    a, b = (dt.datetime(2021, 1, d, 10, tzinfo=dt.timezone.utc) for d in (1, 2))
    ts = pa.timestamp("us", tz="UTC")
    deltalake.write_deltalake(path, pa.table({"ts": pa.array([a, a, b], ts), "x": pa.array([1, 2, 3], pa.int64())}), partition_by=["ts"])
    _write(spark.createDataFrame([(a, 10)], "ts timestamp, x long"), path, partitionOverwriteMode="dynamic")
    for t in (deltalake.DeltaTable(path).to_pyarrow_table(), lakelog.read_table(path)):
        assert sorted(zip(t.column("ts").to_pylist(), t.column("x").to_pylist())) == [(a, 10), (b, 3)]


def test_dynamic_overwrite_from_the_session_setting(spark, table):
    assert spark.conf.get(SESSION_MODE).lower() == "static"  # the default: unset() below restores it
    spark.conf.set(SESSION_MODE, "dynamic")
    try:
        _write(_df(spark, [("d2", 20)]), table)
        assert _rows(table) == [("d1", 1), ("d1", 2), ("d2", 20)]
        _write(_df(spark, []), table)  # no rows: no partition replaced
        _write(spark.createDataFrame(spark.sparkContext.emptyRDD(), SCHEMA), table)  # no input partitions either
        assert _rows(table) == [("d1", 1), ("d1", 2), ("d2", 20)]
        # replaceWhere wins over the session setting (as in Delta)
        _write(_df(spark, [("d1", 5)]), table, replaceWhere="day = 'd1'")
        assert _rows(table) == [("d1", 5), ("d2", 20)]
        # the option wins over the session setting
        _write(_df(spark, [("d9", 9)]), table, partitionOverwriteMode="static")
        assert _rows(table) == [("d9", 9)]
    finally:
        spark.conf.unset(SESSION_MODE)
    assert spark.conf.get(SESSION_MODE).lower() == "static"  # restored
    _write(_df(spark, [("d1", 1)]), table)  # static again: the whole table
    assert _rows(table) == [("d1", 1)]


def test_dynamic_overwrite_of_an_unpartitioned_table_replaces_it(spark, tmp_path):
    """As Delta: dynamic partition overwrite is ignored on an unpartitioned table (a plain overwrite)."""
    path = str(tmp_path / "flat")
    lakelog.write_table(path, pa.table({"day": ["d1", "d2"], "x": pa.array([1, 2], pa.int64())}))
    _write(_df(spark, [("d3", 3)]), path, partitionOverwriteMode="dynamic")
    assert _rows(path) == [("d3", 3)]
    assert "partitionOverwriteMode" not in deltalake.DeltaTable(path).history(1)[0]["operationParameters"]

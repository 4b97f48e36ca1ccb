"""INT96 timestamps past the nanosecond range (years 1677-2262) keep their instant on every path that
opens Parquet files: reads (and filters pruning by the log's stats), row-level operations and the change
feed they record, optimize, convert, check, the CLI's Parquet input and checkpoints whose stats are
stored as INT96. tests/data/table_with_edge_timestamps (delta-rs; Spark 3.1.2 files) holds 9999-12-30
and 9999-12-31 as INT96, which pyarrow's default nanoseconds wrap around to 1816-03-28/29."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import lakelog
import lakelog.read.scan
from lakelog.check import check_table

from .expected_rows import canonical_rows, expected, table_path

NAME = "table_with_edge_timestamps"
UTC = dt.timezone.utc
END = dt.datetime(9999, 12, 31, tzinfo=UTC)
ROOT = os.path.dirname(os.path.dirname(__file__))


def _copy(tmp_path) -> str:
    path = str(tmp_path / NAME)
    shutil.copytree(table_path(NAME), path)
    return path


def _rows() -> list[dict]:
    return expected(NAME)["rows"]


def _big(rows: list[dict]) -> list[str]:
    return sorted(r["BIG_DATE"] for r in rows)


def test_the_data_files_really_hold_int96_past_the_nanosecond_range():
    path = table_path(NAME)
    data = [f for f in os.listdir(path) if f.endswith(".parquet")]
    assert len(data) == 2
    for f in data:
        md = pq.ParquetFile(os.path.join(path, f)).metadata
        assert md.schema.column(0).physical_type == "INT96"
        assert pq.read_table(os.path.join(path, f)).column("BIG_DATE")[0].value < 0  # nanoseconds wrapped around


def test_every_read_path_returns_the_expected_rows():
    e = expected(NAME)
    table = lakelog.Table(table_path(NAME))
    assert canonical_rows(lakelog.read_table(table_path(NAME))) == e["rows"]
    assert canonical_rows(table.to_pyarrow()) == e["rows"]
    assert canonical_rows(pa.Table.from_batches(list(table.read_batches()), schema=table.schema)) == e["rows"]
    assert canonical_rows(table.to_pyarrow_dataset().to_table()) == e["rows"]
    df = table.to_pandas()
    assert canonical_rows(pa.Table.from_pandas(df, schema=table.schema, preserve_index=False)) == e["rows"]
    assert canonical_rows(table.to_pyarrow(columns=["BIG_DATE"])) == sorted(({"BIG_DATE": b} for b in _big(e["rows"])), key=json.dumps)


@pytest.mark.parametrize(
    "flt, want",
    [
        ([("BIG_DATE", "=", END)], ["9999-12-31T00:00:00.000000Z"]),
        ([("BIG_DATE", "<", END)], ["9999-12-30T00:00:00.000000Z"]),
        ([("BIG_DATE", ">", dt.datetime(9999, 12, 30, 12, tzinfo=UTC))], ["9999-12-31T00:00:00.000000Z"]),
        ([("BIG_DATE", ">=", dt.datetime(2262, 4, 12, tzinfo=UTC))], ["9999-12-30T00:00:00.000000Z", "9999-12-31T00:00:00.000000Z"]),
        ([("BIG_DATE", "<", dt.datetime(2262, 4, 12, tzinfo=UTC))], []),
        ([("BIG_DATE", "in", [END, dt.datetime(1816, 3, 29, 5, 56, 8, 66277, tzinfo=UTC)])], ["9999-12-31T00:00:00.000000Z"]),
    ],
    ids=["eq", "lt", "gt", "ge-past-ns", "lt-ns-end", "in"],
)
def test_filters_on_the_int96_column_prune_files_by_the_logs_stats(flt, want):
    table = lakelog.Table(table_path(NAME))
    assert _big(canonical_rows(table.to_pyarrow(filters=flt))) == want
    assert len(table.files(filters=flt)) == len(want)  # one row per file: the stats keep exactly these
    expr = lakelog.read.scan.to_expression(flt, table.schema)
    assert _big(canonical_rows(table.to_pyarrow_dataset().to_table(filter=expr))) == want
    assert len(list(table.to_pyarrow_dataset(filters=flt).get_fragments(filter=expr))) == len(want)


def test_row_level_operations_keep_the_values_and_write_stats_that_prune(tmp_path):
    path = _copy(tmp_path)
    table = lakelog.Table(path)
    source = pa.table({"SOME_VALUE": pa.array([1, 3], pa.int32()), "BIG_DATE": pa.array([None, END], pa.timestamp("us", "UTC"))})
    (table.merge(source, "target.SOME_VALUE = source.SOME_VALUE")
     .when_matched_update({"NORMAL_DATE": "TIMESTAMPTZ '2023-01-01 00:00:00+00'"})
     .when_not_matched_insert({"SOME_VALUE": "source.SOME_VALUE", "BIG_DATE": "source.BIG_DATE"}).execute())
    table.update({"SOME_VALUE": "SOME_VALUE * 10"}, "SOME_VALUE = 2")
    table.delete("SOME_VALUE = 3")
    got = lakelog.Table(path).to_pyarrow().sort_by("SOME_VALUE").to_pylist()
    assert [(r["SOME_VALUE"], r["BIG_DATE"], r["NORMAL_DATE"]) for r in got] == [
        (1, END, dt.datetime(2023, 1, 1, tzinfo=UTC)),
        (20, dt.datetime(9999, 12, 30, tzinfo=UTC), dt.datetime(2022, 2, 1, tzinfo=UTC)),
    ]
    rewritten = lakelog.Table(path)
    assert not set(rewritten.files()) & set(lakelog.Table(table_path(NAME)).files())  # both files were rewritten
    # the rewritten files' stats bound the column exactly as the original ones did
    assert [r["SOME_VALUE"] for r in rewritten.to_pyarrow(filters=[("BIG_DATE", "=", END)]).to_pylist()] == [1]
    assert len(rewritten.files(filters=[("BIG_DATE", "=", END)])) == 1
    assert rewritten.files(filters=[("BIG_DATE", "<", dt.datetime(2262, 1, 1, tzinfo=UTC))]) == []


def test_the_change_feed_records_the_values(tmp_path):
    path = _copy(tmp_path)
    table = lakelog.Table(path)
    table.set_properties({"delta.enableChangeDataFeed": "true"})
    table.update({"SOME_VALUE": "SOME_VALUE + 100"}, "SOME_VALUE = 1")
    changes = table.changes(table.version).to_pylist()
    assert sorted((r["_change_type"], r["SOME_VALUE"], r["BIG_DATE"]) for r in changes) == [
        ("update_postimage", 101, END), ("update_preimage", 1, END),
    ]


def test_optimize_keeps_the_values(tmp_path):
    path = _copy(tmp_path)
    metrics = lakelog.Table(path).optimize()
    assert metrics["numFilesRemoved"] == 2 and metrics["numFilesAdded"] == 1
    assert canonical_rows(lakelog.Table(path).to_pyarrow()) == _rows()


def test_convert_adopts_int96_files(tmp_path):
    src = tmp_path / "spark-output"
    src.mkdir()
    for f in os.listdir(table_path(NAME)):
        if f.endswith(".parquet"):
            shutil.copy(os.path.join(table_path(NAME), f), src / f)
    lakelog.convert(str(src), partition_by=[])
    table = lakelog.Table(str(src))
    assert table.schema.field("BIG_DATE").type == pa.timestamp("us", "UTC")
    assert canonical_rows(table.to_pyarrow()) == _rows()


def test_check_finds_nothing_wrong():
    report = check_table(table_path(NAME))
    assert report.ok and not report.problems and not report.warnings, report.format()


def test_cli_write_of_an_int96_parquet_file(tmp_path, capsys):
    from lakelog.cli import main

    data = sorted(f for f in os.listdir(table_path(NAME)) if f.endswith(".parquet"))[0]
    target = tmp_path / "t"
    assert main(["write", str(target), os.path.join(table_path(NAME), data)]) == 0, capsys.readouterr().err
    # (the CLI takes the file's Arrow types: INT96 without a time zone, so timestamp_ntz, unlike convert)
    assert lakelog.read_table(str(target)).column("BIG_DATE").to_pylist() == [END.replace(tzinfo=None)]


def _int96_stats_parsed_checkpoint(path: str) -> None:
    """Replace the table's v0 checkpoint with one whose adds carry only ``stats_parsed``, its timestamps
    stored as INT96 (as a Spark checkpoint with delta.checkpoint.writeStatsAsJson=false may)."""
    lakelog.Table(path).checkpoint()
    log = os.path.join(path, "_delta_log")
    cp = os.path.join(log, f"{0:020d}.checkpoint.parquet")
    table = pq.read_table(cp)
    adds = table.column("add").combine_chunks()
    ts = pa.timestamp("us", "UTC")
    bounds = pa.struct([("BIG_DATE", ts), ("NORMAL_DATE", ts), ("SOME_VALUE", pa.int32())])
    counts = pa.struct([("BIG_DATE", pa.int64()), ("NORMAL_DATE", pa.int64()), ("SOME_VALUE", pa.int64())])
    parsed_type = pa.struct([("numRecords", pa.int64()), ("minValues", bounds), ("maxValues", bounds), ("nullCount", counts)])

    def typed(values: dict) -> dict:
        return {k: dt.datetime.fromisoformat(v) if isinstance(v, str) else v for k, v in values.items()}

    parsed = []
    for s in adds.field("stats").to_pylist():
        st = json.loads(s) if s else None
        parsed.append(None if st is None else {**st, "minValues": typed(st["minValues"]), "maxValues": typed(st["maxValues"])})
    fields = [adds.type.field(i) for i in range(adds.type.num_fields) if adds.type.field(i).name != "stats"]
    children = [adds.field(f.name) for f in fields] + [pa.array(parsed, parsed_type)]
    new_adds = pa.StructArray.from_arrays(children, fields=fields + [pa.field("stats_parsed", parsed_type)], mask=adds.is_null())
    table = table.set_column(table.schema.get_field_index("add"), "add", new_adds)
    pq.write_table(table, cp, use_deprecated_int96_timestamps=True)
    os.remove(os.path.join(log, "_last_checkpoint"))


def test_checkpoint_stats_stored_as_int96_prune_right(tmp_path):
    path = _copy(tmp_path)
    _int96_stats_parsed_checkpoint(path)
    md = pq.ParquetFile(os.path.join(path, "_delta_log", f"{0:020d}.checkpoint.parquet")).metadata
    assert "INT96" in {md.schema.column(i).physical_type for i in range(md.num_columns)}
    table = lakelog.Table(path)
    assert table.snapshot.file_set.base is not None  # read from the checkpoint
    assert [r["SOME_VALUE"] for r in table.to_pyarrow(filters=[("BIG_DATE", "=", END)]).to_pylist()] == [1]
    assert len(table.files(filters=[("BIG_DATE", ">=", dt.datetime(2262, 4, 12, tzinfo=UTC))])) == 2
    assert table.files(filters=[("BIG_DATE", "<", dt.datetime(2262, 4, 12, tzinfo=UTC))]) == []


def test_spark_reads_the_values(spark):
    import spark_ext

    e = expected(NAME)
    assert canonical_rows(spark.read.format("lakelog").load(table_path(NAME)).toArrow()) == e["rows"]
    assert canonical_rows(spark_ext.read(spark, table_path(NAME)).toArrow()) == e["rows"]
    got = spark.read.format("lakelog").option("filterPushdown", "true").load(table_path(NAME)).where("BIG_DATE = TIMESTAMP'9999-12-31 00:00:00'")
    assert [r.SOME_VALUE for r in got.collect()] == [1]


# Calls that open Parquet files for reading; lakelog.storage.parquet_read wraps them so INT96 reads as microseconds.
_PARQUET_OPENS = re.compile(r"\b(?:pq\.ParquetFile|pq\.read_table|pq\.read_schema|pq\.read_pandas|pq\.ParquetDataset|ds\.ParquetFileFormat|parquet\.ParquetFile|parquet\.read_table)\(|format=\"parquet\"")


def test_lakelog_opens_parquet_files_only_through_parquet_read():
    found = []
    for package in ("lakelog", "spark_ext"):
        for folder, _, files in os.walk(os.path.join(ROOT, package)):
            for f in files:
                rel = os.path.relpath(os.path.join(folder, f), ROOT)
                if f.endswith(".py") and rel != os.path.join("lakelog", "storage", "parquet_read.py"):
                    with open(os.path.join(folder, f)) as src:
                        found += [f"{rel}:{i}" for i, line in enumerate(src, 1) if _PARQUET_OPENS.search(line)]
    assert found == []

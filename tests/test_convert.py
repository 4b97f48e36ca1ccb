"""lakelog.convert: adopt a Spark file-sink output (``_spark_metadata``) or a Parquet directory in place.

Spark tests write real file-sink output with Structured Streaming (several micro-batches, a low compact
interval so that a ``.compact`` file exists), plant orphan ``part-*`` files that the sink never
committed, convert, and check that lakelog, deltalake and Spark read exactly the committed rows.
Hand-written ``_spark_metadata`` logs cover the parts of Spark's log semantics and the damaged logs
that a real sink does not produce on demand.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import lakelog
from lakelog.conversion import (
    ConvertError,
    SparkMetadataLogError,
    SparkMetadataVersionError,
    hive_unescape,
    infer_partition_type,
)
from lakelog.errors import (
    CorruptLogError,
    InvalidPathError,
    SchemaMismatchError,
    TableExistsError,
    UnsupportedFeatureError,
)
from lakelog.errors import MissingDataFileError

from tests.spark_session import spark  # noqa: F401  (the shared session fixture)

import deltalake  # noqa: E402

COMPACT_KEY = "spark.sql.streaming.fileSink.log.compactInterval"


# ---------------------------------------------------------------- helpers

def _delta_rows(path: str, cols: list[str], **kw) -> list[tuple]:
    t = deltalake.DeltaTable(path, **kw).to_pyarrow_table()
    return sorted(tuple(r[c] for c in cols) for r in t.to_pylist())


def _lakelog_rows(path: str, cols: list[str], **kw) -> list[tuple]:
    return sorted(tuple(r[c] for c in cols) for r in lakelog.read_table(path, **kw).to_pylist())


def _spark_rows(df, cols: list[str]) -> list[tuple]:
    return sorted(tuple(r[c] for c in cols) for r in df.select(*cols).collect())


def _history(path: str) -> dict:
    return lakelog.Table(path).history()[0]


def _write_parquet(path: Path, table: pa.Table) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def _status(path: Path, *, action: str = "add", size: int | None = None, is_dir: bool = False) -> str:
    """One file status line as Spark's FileStreamSinkLog writes it."""
    return json.dumps({
        "path": path.as_uri(),
        "size": path.stat().st_size if size is None else size,
        "isDir": is_dir,
        "modificationTime": 1_700_000_000_000,
        "blockReplication": 1,
        "blockSize": 33554432,
        "action": action,
    }, separators=(",", ":"))


def _log_file(root: Path, name: str, lines: list[str], header: str = "v1") -> Path:
    """A metadata log file in Spark's layout: the header, then each entry preceded by a newline."""
    d = root / "_spark_metadata"
    d.mkdir(parents=True, exist_ok=True)
    p = d / name
    p.write_text(header + "".join("\n" + line for line in lines))
    return p


def _no_table(root: Path) -> bool:
    return not (root / "_delta_log").exists() or not any((root / "_delta_log").iterdir())


# ---------------------------------------------------------------- real Spark file sinks

SINK_SCHEMA = "id long, p string, d string, v double, ts timestamp"


def _input_batches() -> list[list[dict]]:
    ps = ["a b", "x:y", None, "7%"]  # a space, a Hive-escaped ':' and '%', a null partition
    batches = []
    for b in range(5):
        batches.append([
            {"id": b * 10 + i, "p": ps[(b + i) % len(ps)], "d": f"2026-01-0{1 + (b + i) % 3}",
             "v": (b * 10 + i) / 4, "ts": f"2026-01-01T00:00:{b:02d}Z"}
            for i in range(3)
        ])
    return batches


def _run_file_sink(spark, tmp_path: Path, name: str, partition_by: list[str] | None) -> tuple[Path, list[dict]]:
    """Run a real Structured Streaming query with a Parquet file sink: one micro-batch per input file."""
    inp = tmp_path / f"{name}-input"
    inp.mkdir()
    batches = _input_batches()
    for i, rows in enumerate(batches):
        f = inp / f"batch-{i}.json"
        f.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(f, (1_700_000_000 + i, 1_700_000_000 + i))  # the file source takes files oldest first
    out = tmp_path / name
    old = spark.conf.get(COMPACT_KEY, None)
    spark.conf.set(COMPACT_KEY, "3")
    try:
        reader = spark.readStream.schema(SINK_SCHEMA).option("maxFilesPerTrigger", 1).json(str(inp))
        writer = (
            reader.writeStream.format("parquet")
            .option("checkpointLocation", str(tmp_path / f"{name}-checkpoint"))
            .trigger(availableNow=True)
        )
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        query = writer.start(str(out))
        query.awaitTermination(180)
        assert query.exception() is None
    finally:
        if old is None:
            spark.conf.unset(COMPACT_KEY)
        else:
            spark.conf.set(COMPACT_KEY, old)
    return out, [r for rows in batches for r in rows]


def _orphan(path: Path, ids: list[int]) -> Path:
    """An uncommitted file as a failed or retried batch leaves it: same naming, same schema."""
    t = pa.table({
        "id": pa.array(ids, pa.int64()),
        "d": pa.array(["2026-01-01"] * len(ids)),
        "v": pa.array([0.5] * len(ids)),
        "ts": pa.array([dt.datetime(2026, 1, 1)] * len(ids), pa.timestamp("us", tz="UTC")),
    })
    return _write_parquet(path, t)


@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
def test_spark_file_sink_converts_exactly_the_committed_batches(spark, tmp_path, partitioned):
    partition_by = ["p", "d"] if partitioned else None
    out, rows = _run_file_sink(spark, tmp_path, "sink", partition_by)
    meta = out / "_spark_metadata"
    assert (meta / "2.compact").exists() and (meta / "4").exists(), sorted(os.listdir(meta))

    # Files a failed or retried batch left behind: not in the log, so not part of the data set.
    tag = uuid.uuid4()
    if partitioned:
        committed_dir = next(p for p in out.iterdir() if p.name.startswith("p="))
        sub = next(p for p in committed_dir.iterdir() if p.is_dir())
        orphans = [
            _orphan(sub / f"part-00000-{tag}.c000.snappy.parquet", [900, 901]),
            _orphan(out / "p=orphan" / "d=2026-01-09" / f"part-00001-{tag}.c000.snappy.parquet", [902]),
        ]
    else:
        orphans = [_orphan(out / f"part-00000-{tag}-c000.snappy.parquet", [900, 901])]

    cols = ["id", "p", "d", "v"]
    expected = sorted((r["id"], r["p"], dt.date.fromisoformat(r["d"]) if partitioned else r["d"], r["v"]) for r in rows)
    # Spark itself (reading the sink directory through its metadata log) sees exactly these rows.
    spark_direct = spark.read.parquet(str(out))
    assert _spark_rows(spark_direct, cols) == expected

    assert lakelog.convert(str(out)) == 0

    t = lakelog.Table(str(out))
    assert t.partition_columns == (["p", "d"] if partitioned else [])
    assert not any(str(o.relative_to(out)) in t.files() for o in orphans)
    assert t.schema.field("ts").type == pa.timestamp("us", tz="UTC")  # Spark's INT96 timestamps are instants
    if partitioned:
        # the same partition types Spark infers for these directories
        assert t.schema.field("p").type == pa.string() and t.schema.field("d").type == pa.date32()
        assert {f.name: f.dataType.simpleString() for f in spark_direct.schema.fields}["d"] == "date"
        assert any(a.partition_values == {"p": "x:y", "d": "2026-01-02"} for a in t.snapshot.files.values())
        assert any(a.partition_values["p"] is None for a in t.snapshot.files.values())
    h = _history(str(out))
    assert h["operation"] == "CONVERT"
    assert h["operationParameters"]["source"] == "spark-file-sink"
    assert h["operationParameters"]["numFiles"] == str(len(t.files()))
    assert h["operationParameters"]["sparkMetadataBatchId"] == "4"
    assert json.loads(h["operationParameters"]["partitionedBy"]) == (partition_by or [])

    assert _lakelog_rows(str(out), cols) == expected
    assert _delta_rows(str(out), cols) == expected
    assert _spark_rows(spark.read.format("lakelog").load(str(out)), cols) == expected
    ts = lakelog.read_table(str(out), columns=["id", "ts"]).to_pylist()
    assert all(r["ts"] == dt.datetime(2026, 1, 1, 0, 0, r["id"] // 10, tzinfo=dt.timezone.utc) for r in ts)
    assert sorted(deltalake.DeltaTable(str(out)).to_pyarrow_table(columns=["ts"]).column("ts").to_pylist())[0] == dt.datetime(
        2026, 1, 1, tzinfo=dt.timezone.utc
    )

    # Stats from the footers prune files.
    lo_files = t.files(filters=[("id", "<", 3)])
    assert 0 < len(lo_files) < len(t.files())

    # The converted table is an ordinary table: appends work and every engine sees them.
    more = pa.table({
        "id": pa.array([100], pa.int64()), "p": ["new"], "d": [dt.date(2026, 2, 1)] if partitioned else ["2026-02-01"],
        "v": [1.0], "ts": pa.array([dt.datetime(2026, 2, 1)], pa.timestamp("us", tz="UTC")),
    })
    assert lakelog.write_table(str(out), more) == 1
    assert len(_delta_rows(str(out), ["id"])) == len(rows) + 1
    assert spark.read.format("lakelog").load(str(out)).count() == len(rows) + 1

    with pytest.raises(TableExistsError):
        lakelog.convert(str(out))


def test_spark_partitioned_parquet_directory(spark, tmp_path):
    src = str(tmp_path / "spark-parquet")
    df = spark.createDataFrame(
        [(i, ["a b", "x/y", None, "q=1"][i % 4], f"2026-03-0{1 + i % 2}", i % 3, i * 1.5) for i in range(12)],
        "id long, s string, day string, n int, x double",
    ).selectExpr("id", "s", "cast(day as date) as day", "n", "x", "cast(id as decimal(12,2)) as amount",
                 "timestamp'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id) as ts")
    df.write.partitionBy("day", "n", "s").parquet(src)
    assert (Path(src) / "_SUCCESS").exists()  # skipped, as Spark skips it
    cols = ["id", "s", "day", "n", "x", "amount"]
    original = spark.read.parquet(src)
    expected = _spark_rows(original, cols)
    spark_types = {f.name: f.dataType.simpleString() for f in original.schema.fields}
    assert len(expected) == 12

    assert lakelog.convert(src) == 0
    t = lakelog.Table(src)
    assert t.partition_columns == ["day", "n", "s"]
    # the partition types Spark infers for these directories
    assert spark_types["day"] == "date" and spark_types["n"] == "int" and spark_types["s"] == "string"
    assert t.schema.field("day").type == pa.date32()
    assert t.schema.field("n").type == pa.int32()
    assert t.schema.field("s").type == pa.string()
    assert t.schema.field("amount").type == pa.decimal128(12, 2)
    assert _history(src)["operationParameters"]["source"] == "parquet"

    assert _lakelog_rows(src, cols) == expected
    assert _delta_rows(src, cols) == expected
    assert _spark_rows(spark.read.format("lakelog").load(src), cols) == expected
    assert lakelog.read_table(src, filters=[("s", "=", "x/y")]).num_rows == 3

    lakelog.write_table(src, pa.table({"id": [99], "s": ["new"], "day": [dt.date(2026, 4, 1)], "n": pa.array([5], pa.int32())}))
    assert _delta_rows(src, ["id", "s", "n", "x"])[-1] == (99, "new", 5, None)


# ---------------------------------------------------------------- plain Parquet directories (pyarrow)

def test_pyarrow_hive_directory_round_trips_with_deltalake(tmp_path):
    root = tmp_path / "pa"
    data = pa.table({
        "id": pa.array(range(20), pa.int64()),
        "name": [f"n{i}" for i in range(20)],
        "k": [i % 3 for i in range(20)],
        "day": [["2026-01-01", "2026-01-02", None][i % 3] for i in range(20)],
        "tag": [["a b", "c%d", "e/f", "plain"][i % 4] for i in range(20)],
    })
    pq.write_to_dataset(data, str(root), partition_cols=["k", "day", "tag"])
    # What Spark and Hive skip: underscore and dot names, and directories of them.
    (root / "_SUCCESS").write_text("")
    _write_parquet(root / "_temporary" / "0" / "part-0.parquet", data.slice(0, 5))
    _write_parquet(root / ".staging" / "part-0.parquet", data.slice(0, 5))
    (root / "k=0" / ".part-0.parquet.crc").write_bytes(b"crc")

    with pytest.warns(UserWarning, match="not named"):
        (root / "k=1" / "day=2026-01-02" / "tag=a%20b" / "notes.txt").write_text("not data")
        assert lakelog.convert(str(root)) == 0

    t = lakelog.Table(str(root))
    assert t.partition_columns == ["k", "day", "tag"]
    assert t.schema.field("k").type == pa.int32() and t.schema.field("day").type == pa.date32()
    assert not any(f.startswith(("_", ".")) or "/." in f for f in t.files())
    cols = ["id", "name", "k", "day", "tag"]
    expected = sorted(
        (r["id"], r["name"], r["k"], None if r["day"] is None else dt.date.fromisoformat(r["day"]), r["tag"])
        for r in data.to_pylist()
    )
    assert _lakelog_rows(str(root), cols) == expected
    assert _delta_rows(str(root), cols) == expected

    # lakelog appends, then deltalake appends, each engine reads the other's commit
    lakelog.write_table(str(root), pa.table({"id": [100], "name": ["x"], "k": pa.array([7], pa.int32()), "day": [dt.date(2026, 5, 1)], "tag": ["new"]}))
    deltalake.write_deltalake(str(root), pa.table({"id": [101], "name": ["y"], "k": pa.array([8], pa.int32()), "day": [dt.date(2026, 5, 2)], "tag": ["dl"]}), mode="append")
    assert lakelog.Table(str(root)).version == 2
    assert _lakelog_rows(str(root), ["id"])[-2:] == [(100,), (101,)]
    assert len(_delta_rows(str(root), ["id"])) == 22


def test_unpartitioned_directory_unifies_schemas(tmp_path):
    root = tmp_path / "flat"
    _write_parquet(root / "a.parquet", pa.table({"id": pa.array([1, 2], pa.int32()), "x": pa.array([1.5, 2.5], pa.float32())}))
    _write_parquet(root / "b.parquet", pa.table({"id": pa.array([3], pa.int64()), "x": [0.5], "extra": ["e"]}))
    lakelog.convert(str(root))
    t = lakelog.Table(str(root))
    assert t.schema == pa.schema([("id", pa.int64()), ("x", pa.float64()), ("extra", pa.string())])
    assert t.partition_columns == []
    expected = [(1, 1.5, None), (2, 2.5, None), (3, 0.5, "e")]
    assert _lakelog_rows(str(root), ["id", "x", "extra"]) == expected
    assert _delta_rows(str(root), ["id", "x", "extra"]) == expected


def test_incompatible_schemas_are_refused(tmp_path):
    root = tmp_path / "bad"
    _write_parquet(root / "a.parquet", pa.table({"id": [1], "x": [1]}))
    _write_parquet(root / "b.parquet", pa.table({"id": [2], "x": ["one"]}))
    with pytest.raises(SchemaMismatchError, match="'x'"):
        lakelog.convert(str(root))
    assert _no_table(root)


def test_stats_are_the_writers_stats(tmp_path):
    """A table written by lakelog, stripped of its log and converted, gets the very same add actions."""
    src, copy = tmp_path / "written", tmp_path / "copy"
    data = pa.table({
        "id": pa.array([3, 1, None], pa.int64()),
        "s": ["x" * 40, "a", None],
        "f": [1.5, float("nan"), None],
        "b": [True, None, False],
        "ts": pa.array([dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)] * 3, pa.timestamp("us", tz="UTC")),
        "st": [{"a": 1, "b": "z"}, None, {"a": None, "b": "y"}],
        "l": [[1], None, [2, 3]],
        "p": ["k", "k", None],
    })
    lakelog.write_table(str(src), data, partition_by=["p"])
    lakelog.write_table(str(src), data.slice(0, 2))
    shutil.copytree(src, copy, ignore=shutil.ignore_patterns("_delta_log"))
    lakelog.convert(str(copy), partition_by="p string")

    def adds(path):
        return {a.path: (a.partition_values, a.size, a.stats) for a in lakelog.Table(str(path)).snapshot.files.values()}

    assert adds(copy) == adds(src)
    # Both sides read the same footers, so the stats are also checked against values computed from the
    # rows themselves (pyarrow.compute), following PROTOCOL.md's statistics rules.
    checked = 0
    for path in (src, copy):
        for add in lakelog.Table(str(path)).snapshot.files.values():
            rows = pq.read_table(os.path.join(path, add.relative_path))
            assert json.loads(add.stats) == _stats_of(rows), add.path
            checked += 1
    assert checked == 6  # p=k and p=null in version 0, p=k in version 1, in both tables
    moved = [f for f in lakelog.Table(str(src)).schema if f.name != "p"] + [lakelog.Table(str(src)).schema.field("p")]
    assert lakelog.Table(str(copy)).schema == pa.schema(moved)  # partition columns go last, as in Spark


def _stats_of(table: pa.Table) -> dict:
    """Delta stats of ``table`` computed from its values: null counts per leaf (a null struct counts for
    each of its fields), min/max without NaN, strings cut to 32 characters (a longer max: 31 characters
    and the next character up), timestamps as ISO-8601 UTC with microseconds, no stats for lists."""
    mins: dict = {}
    maxs: dict = {}
    nulls: dict = {}

    def put(d: dict, path: list[str], v) -> None:
        for k in path[:-1]:
            d = d.setdefault(k, {})
        d[path[-1]] = v

    def leaf(path: list[str], col: pa.ChunkedArray) -> None:
        t = col.type
        if pa.types.is_struct(t):
            for i in range(t.num_fields):
                leaf(path + [t.field(i).name], pc.struct_field(col, [i]))
            return
        if pa.types.is_list(t):
            return
        put(nulls, path, col.null_count)
        values = col.drop_null()
        if pa.types.is_floating(t):
            values = values.filter(pc.invert(pc.is_nan(values)))
        if len(values) == 0:
            return
        lo, hi = pc.min(values).as_py(), pc.max(values).as_py()
        if isinstance(lo, str):
            lo = lo[:32]
            hi = hi if len(hi) <= 32 else hi[:31] + chr(ord(hi[31]) + 1)
        if isinstance(lo, dt.datetime):
            lo, hi = (v.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ") for v in (lo, hi))
        put(mins, path, lo)
        put(maxs, path, hi)

    for name in table.column_names:
        leaf([name], table.column(name))
    return {"numRecords": table.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}


# ---------------------------------------------------------------- partition types

def test_partition_type_inference():
    assert infer_partition_type(["1", "-20", None]) == pa.int32()
    assert infer_partition_type(["1", str(2**40)]) == pa.int64()
    assert infer_partition_type([str(2**70)]) == pa.string()
    assert infer_partition_type(["007"]) == pa.string()  # leading zeros would be lost
    assert infer_partition_type(["+1"]) == pa.string()
    assert infer_partition_type(["1", "2.5"]) == pa.float64()
    assert infer_partition_type(["1.50"]) == pa.string()  # "1.50" is not the text of 1.5
    assert infer_partition_type(["NaN"]) == pa.string() and infer_partition_type(["inf"]) == pa.string()
    assert infer_partition_type(["2026-01-31", None]) == pa.date32()
    assert infer_partition_type(["2026-02-31"]) == pa.string()
    assert infer_partition_type(["2026-01-01 10:00:00"]) == pa.string()  # timestamps stay strings
    assert infer_partition_type(["true", "false"]) == pa.string()
    assert infer_partition_type(["1", "a"]) == pa.string()
    assert infer_partition_type([None, None]) == pa.string()
    assert hive_unescape("a%3Ab%2Fc%25%zz%4") == "a:b/c%%zz%4"


def test_partition_by_overrides_and_checks(tmp_path):
    def make(name):
        root = tmp_path / name
        for k, day in [("1", "2026-01-01"), ("02", "2026-01-02")]:
            _write_parquet(root / f"k={k}" / f"day={day}" / "part-0.parquet", pa.table({"id": [int(k)]}))
        return root

    root = make("inferred")
    lakelog.convert(str(root))
    t = lakelog.Table(str(root))
    assert t.schema.field("k").type == pa.string()  # "02" is not canonical integer text
    assert t.schema.field("day").type == pa.date32()

    root = make("typed")
    lakelog.convert(str(root), partition_by=["day:string", "k:int"])
    t = lakelog.Table(str(root))
    assert t.partition_columns == ["day", "k"]
    assert t.schema.field("k").type == pa.int32() and t.schema.field("day").type == pa.string()
    assert sorted(a.partition_values["k"] for a in t.snapshot.files.values()) == ["1", "2"]
    assert _delta_rows(str(root), ["id", "k", "day"]) == [(1, 1, "2026-01-01"), (2, 2, "2026-01-02")]

    root = make("dict")
    lakelog.convert(str(root), partition_by={"k": "long", "day": None})
    assert lakelog.Table(str(root)).schema.field("k").type == pa.int64()

    for bad, exc in [(["k"], SchemaMismatchError), ([], SchemaMismatchError), (["k", "day", "x"], SchemaMismatchError),
                     (["k:date", "day"], SchemaMismatchError), (["k nosuchtype", "day"], ValueError)]:
        root = make(f"bad-{uuid.uuid4().hex[:6]}")
        with pytest.raises(exc):
            lakelog.convert(str(root), partition_by=bad)
        assert _no_table(root)


# ---------------------------------------------------------------- hand-written _spark_metadata logs

def _sink(tmp_path: Path, n: int = 4, name: str = "sink") -> tuple[Path, list[Path]]:
    root = tmp_path / name
    files = [_write_parquet(root / f"part-{i:05d}-{uuid.uuid4()}-c000.snappy.parquet", pa.table({"id": [i]})) for i in range(n)]
    return root, files


def test_log_semantics_compact_delete_and_later_batches(tmp_path):
    root, f = _sink(tmp_path, 6)
    # Batches before the newest compact file are never read (Spark may have deleted them): garbage is fine.
    _log_file(root, "0", ["not json"])
    (root / "_spark_metadata" / "1").write_text("")
    _log_file(root, "2.compact", [_status(f[0]), _status(f[1]), _status(f[2])])
    _log_file(root, "3", [_status(f[3]), _status(f[1], action="delete")])  # old Spark versions wrote deletes
    _log_file(root, "4", [])  # an empty batch
    _log_file(root, "5", [_status(f[4]), _status(root / "p=1", size=0, is_dir=True), _status(f[0])])
    (root / "_spark_metadata" / ".5.crc").write_bytes(b"x")
    (root / "_spark_metadata" / ".6.0f1e.tmp").write_text("v1\n{")  # a crashed writer's temp file
    # f[5] is an orphan
    assert lakelog.convert(str(root)) == 0
    assert _lakelog_rows(str(root), ["id"]) == [(0,), (2,), (3,), (4,)]
    assert _delta_rows(str(root), ["id"]) == [(0,), (2,), (3,), (4,)]
    h = _history(str(root))
    assert h["operationParameters"]["numFiles"] == "4" and h["operationParameters"]["sparkMetadataBatchId"] == "5"


def test_log_without_compaction_and_with_empty_log(tmp_path):
    root, f = _sink(tmp_path, 3)
    _log_file(root, "0", [_status(f[0])])
    _log_file(root, "1", [_status(f[1])])
    assert lakelog.convert(str(root)) == 0
    assert _lakelog_rows(str(root), ["id"]) == [(0,), (1,)]

    empty, _ = _sink(tmp_path, 1, "empty")
    (empty / "_spark_metadata").mkdir()
    with pytest.raises(ConvertError, match="lists no committed files"):
        lakelog.convert(str(empty))


@pytest.mark.parametrize(
    "case",
    ["truncated-line", "trailing-newline", "version-v9", "no-header", "garbage-line", "empty-file",
     "not-a-status", "unknown-action", "missing-batch", "missing-before-first-compact", "compact-and-plain"],
)
def test_damaged_logs_are_typed_errors(tmp_path, case):
    root, f = _sink(tmp_path, 3)
    good = [_status(f[0]), _status(f[1])]
    expected: type[Exception] = SparkMetadataLogError
    match = None
    if case == "truncated-line":
        p = _log_file(root, "0", good)
        p.write_bytes(p.read_bytes()[:-20])  # the writer died in the middle of the last entry
        match = "truncated"
    elif case == "trailing-newline":
        p = _log_file(root, "0", good)
        p.write_text(p.read_text() + "\n")  # cut right after a separator: the next entry may be lost
        match = "ends with a newline"
    elif case == "version-v9":
        _log_file(root, "0", good, header="v9")
        expected, match = SparkMetadataVersionError, "v9"
    elif case == "no-header":
        (root / "_spark_metadata").mkdir()
        (root / "_spark_metadata" / "0").write_text("\n".join(good))
        match = "version header"
    elif case == "garbage-line":
        _log_file(root, "0", [good[0], "<<<garbage>>>", good[1]])
        match = "line 3"
    elif case == "empty-file":
        _log_file(root, "0", good)
        (root / "_spark_metadata" / "1").write_bytes(b"")
        match = "empty"
    elif case == "not-a-status":
        _log_file(root, "0", [json.dumps({"path": f[0].as_uri(), "size": "12", "isDir": False, "action": "add"})])
        match = "not a Spark file status"
    elif case == "unknown-action":
        _log_file(root, "0", [_status(f[0], action="rename")])
        match = "unknown action"
    elif case == "missing-batch":
        _log_file(root, "2.compact", good)
        _log_file(root, "4", [_status(f[2])])  # batch 3 is gone
        match = r"\[3\]"
    elif case == "missing-before-first-compact":
        _log_file(root, "1", good)  # no compact file, and batch 0 is gone
        match = r"\[0\]"
    elif case == "compact-and-plain":
        _log_file(root, "2", good)
        _log_file(root, "2.compact", good)
    with pytest.raises(expected, match=match) as info:
        lakelog.convert(str(root))
    assert isinstance(info.value, CorruptLogError)
    if expected is SparkMetadataVersionError:
        assert isinstance(info.value, UnsupportedFeatureError)
    assert _no_table(root)


def test_files_outside_the_root_or_missing_are_refused(tmp_path):
    root, f = _sink(tmp_path, 2)
    elsewhere = _write_parquet(tmp_path / "elsewhere" / "part-0.parquet", pa.table({"id": [9]}))
    _log_file(root, "0", [_status(f[0]), _status(elsewhere)])
    with pytest.raises(InvalidPathError, match="not inside the table directory"):
        lakelog.convert(str(root))
    assert _no_table(root)

    def entry(path: str) -> str:
        return json.dumps({"path": path, "size": 1, "isDir": False, "modificationTime": 0, "action": "add"})

    for name in ["sibling", "dotdot", "relative", "other-store", "log-itself"]:
        r, (g,) = _sink(tmp_path, 1, name)
        sibling = _write_parquet(tmp_path / f"{name}-other" / g.name, pa.table({"id": [1]}))  # shares the prefix
        line = {
            "sibling": _status(sibling),
            "dotdot": entry(r.as_uri() + "/sub/../../elsewhere/part-0.parquet"),
            "relative": entry(g.name),
            "other-store": entry("s3a://bucket" + str(g)),
            "log-itself": entry((r / "_spark_metadata" / "0").as_uri()),
        }[name]
        _log_file(r, "0", [_status(g), line])
        with pytest.raises(InvalidPathError):
            lakelog.convert(str(r))
        assert _no_table(r), name

    # A path that wanders but stays inside is fine.
    r, (g,) = _sink(tmp_path, 1, "wander")
    _log_file(r, "0", [_status(g).replace(g.name, "sub/../" + g.name)])
    lakelog.convert(str(r))
    assert lakelog.Table(str(r)).files() == [g.name]

    # committed but gone, or changed since it was committed
    r, g = _sink(tmp_path, 2, "gone")
    _log_file(r, "0", [_status(g[0]), _status(g[1])])
    g[1].unlink()
    with pytest.raises(MissingDataFileError):
        lakelog.convert(str(r))
    r, g = _sink(tmp_path, 1, "changed")
    _log_file(r, "0", [_status(g[0], size=g[0].stat().st_size + 1)])
    with pytest.raises(ConvertError, match="changed"):
        lakelog.convert(str(r))
    assert _no_table(r)


def test_sink_paths_are_uri_decoded_and_hive_unescaped(tmp_path):
    """Spark logs URIs (a space is %20, an on-disk '%3A' is %253A); the path is decoded once, the value twice."""
    root = tmp_path / "sink dir"
    f = _write_parquet(root / "p=a b" / "q=x%3Ay" / "part-0.parquet", pa.table({"id": [1]}))
    # as Hadoop's Path.toUri renders it (compare a real sink's "sink%20dir/s=a%20b/t=x%253Ay%2525/part-...")
    uri = "file://" + str(f).replace("%", "%25").replace(" ", "%20")
    assert uri.endswith("sink%20dir/p=a%20b/q=x%253Ay/part-0.parquet")
    line = _status(f).replace(f.as_uri(), uri)
    _log_file(root, "0", [line])
    lakelog.convert(str(root))
    t = lakelog.Table(str(root))
    assert list(t.snapshot.files) == ["p=a b/q=x%3Ay/part-0.parquet"]
    assert _delta_rows(str(root), ["id", "p", "q"]) == [(1, "a b", "x:y")]


# ---------------------------------------------------------------- layouts that cannot be converted

def test_layout_errors(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConvertError, match="no \\*.parquet"):
        lakelog.convert(str(empty))
    with pytest.raises(ConvertError, match="not a directory"):
        lakelog.convert(str(tmp_path / "missing"))

    plain_dir = tmp_path / "plain-subdir"
    _write_parquet(plain_dir / "2026" / "part-0.parquet", pa.table({"id": [1]}))
    with pytest.raises(ConvertError, match="not a '<column>=<value>'"):
        lakelog.convert(str(plain_dir))

    mixed = tmp_path / "mixed"
    _write_parquet(mixed / "k=1" / "part-0.parquet", pa.table({"id": [1]}))
    _write_parquet(mixed / "part-1.parquet", pa.table({"id": [2]}))
    with pytest.raises(ConvertError, match="inconsistent partition directories"):
        lakelog.convert(str(mixed))

    torn = tmp_path / "torn"
    _write_parquet(torn / "a.parquet", pa.table({"id": [1]}))
    (torn / "b.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(ConvertError, match="not a readable Parquet file"):
        lakelog.convert(str(torn))

    existing = tmp_path / "existing"
    lakelog.write_table(str(existing), pa.table({"id": [1]}))
    with pytest.raises(TableExistsError):
        lakelog.convert(str(existing))
    for bad in (tmp_path / "plain-subdir", mixed, torn):
        assert _no_table(bad)


# ---------------------------------------------------------------- object storage

def test_spark_metadata_on_s3(s3_endpoint):
    """On S3 the sink logs s3a:// URIs; the table path may say s3://. Same bucket and prefix: inside."""
    import fsspec

    uri = s3_endpoint.new_table_uri()
    fs, root = fsspec.core.url_to_fs(uri)
    names = []
    for i, p in enumerate(["a", "b", "a"]):
        key = f"{root}/p={p}/part-{i:05d}-{uuid.uuid4()}.c000.snappy.parquet"
        with fs.open(key, "wb") as out:
            pq.write_table(pa.table({"id": [i]}), out)
        names.append(key)
    size = {k: fs.info(k)["size"] for k in names}

    def status(key):
        return json.dumps({"path": "s3a://" + key, "size": size[key], "isDir": False, "modificationTime": 1, "action": "add"})

    fs.pipe_file(f"{root}/_spark_metadata/0", ("v1\n" + status(names[0]) + "\n" + status(names[1])).encode())
    # names[2] is an orphan
    assert lakelog.convert(uri) == 0
    assert _lakelog_rows(uri, ["id", "p"]) == [(0, "a"), (1, "b")]
    assert _delta_rows(uri, ["id", "p"], storage_options=s3_endpoint.deltalake_options) == [(0, "a"), (1, "b")]

    other = s3_endpoint.new_table_uri()
    _, other_root = fsspec.core.url_to_fs(other)
    fs.pipe_file(f"{other_root}/_spark_metadata/0", ("v1\n" + status(names[0])).encode())
    with pytest.raises(InvalidPathError):
        lakelog.convert(other)


def test_partition_column_stored_in_files_must_match_its_directory(tmp_path):
    good = tmp_path / "good"
    _write_parquet(good / "k=1" / "a.parquet", pa.table({"id": [1, 2], "k": pa.array([1, 1], pa.int64())}))
    _write_parquet(good / "k=2" / "b.parquet", pa.table({"id": [3]}))
    lakelog.convert(str(good))
    t = lakelog.Table(str(good))
    assert t.schema == pa.schema([("id", pa.int64()), ("k", pa.int64())])  # the files' type wins over inference
    assert _lakelog_rows(str(good), ["id", "k"]) == _delta_rows(str(good), ["id", "k"]) == [(1, 1), (2, 1), (3, 2)]

    bad = tmp_path / "bad"
    _write_parquet(bad / "k=1" / "a.parquet", pa.table({"id": [1, 2], "k": pa.array([1, 5], pa.int64())}))
    with pytest.raises(ConvertError, match="values other than its directory's"):
        lakelog.convert(str(bad))
    assert _no_table(bad)


# ---------------------------------------------------------------- nanosecond timestamps


def test_pandas_nanosecond_timestamps_are_refused_by_name(tmp_path):
    """pandas writes TIMESTAMP(NANOS) by default; convert used to adopt such files into a table Spark
    cannot read (PARQUET_TYPE_ILLEGAL) and delta-rs truncates, while check said OK."""
    import pandas as pd

    from lakelog.errors import NanosecondTimestampError

    src = tmp_path / "src"
    (src / "day=1").mkdir(parents=True)
    df = pd.DataFrame({"id": [1, 2], "ts": pd.to_datetime(["2026-01-01 00:00:00.000000001", "2026-01-02"], format="ISO8601")})
    df.to_parquet(src / "day=1" / "a.parquet")
    pd.DataFrame({"id": [3]}).to_parquet(src / "day=1" / "b.parquet")
    with pytest.raises(NanosecondTimestampError, match="TIMESTAMP\\(NANOS\\)") as e:
        lakelog.convert(str(src))
    assert isinstance(e.value, ConvertError)
    assert e.value.path == "day=1/a.parquet" and e.value.columns == ["ts"]
    assert "day=1/a.parquet" in str(e.value) and "'ts'" in str(e.value) and "coerce_timestamps='us'" in str(e.value)
    assert not (src / "_delta_log").exists()

    # Rewritten as the message says, the files convert and both engines read the same instants.
    df.iloc[1:].to_parquet(src / "day=1" / "a.parquet", coerce_timestamps="us")
    assert lakelog.convert(str(src)) == 0
    want = [(2, dt.datetime(2026, 1, 2)), (3, None)]
    assert _lakelog_rows(str(src), ["id", "ts"]) == want
    assert _delta_rows(str(src), ["id", "ts"]) == want
    assert lakelog.Table(str(src)).check().ok


def test_nested_and_zoned_nanosecond_timestamps_are_refused(tmp_path):
    from lakelog.errors import NanosecondTimestampError

    ns = pa.array([1], pa.timestamp("ns", tz="UTC"))
    for name, table in [
        ("zoned", pa.table({"t": ns})),
        ("nested", pa.table({"s": pa.StructArray.from_arrays([ns], ["t"])})),
    ]:
        src = tmp_path / name
        src.mkdir()
        pq.write_table(table, src / "x.parquet")
        with pytest.raises(NanosecondTimestampError, match="x.parquet") as e:
            lakelog.convert(str(src))
        assert e.value.columns == (["t"] if name == "zoned" else ["s.t"])


def test_int96_and_millisecond_timestamps_still_convert(tmp_path):
    """INT96 (Spark's legacy encoding) and TIMESTAMP(MILLIS) are not nanoseconds: they convert."""
    src = tmp_path / "src"
    src.mkdir()
    when = dt.datetime(2026, 1, 2, 3, 4, 5, 678000)
    pq.write_table(pa.table({"a": pa.array([when], pa.timestamp("ns"))}), src / "int96.parquet", use_deprecated_int96_timestamps=True)
    pq.write_table(pa.table({"b": pa.array([when], pa.timestamp("ms"))}), src / "millis.parquet")
    assert lakelog.convert(str(src)) == 0
    rows = lakelog.read_table(str(src)).to_pylist()
    assert {r["a"] for r in rows} - {None} == {when.replace(tzinfo=dt.timezone.utc)}
    assert {r["b"] for r in rows} - {None} == {when}

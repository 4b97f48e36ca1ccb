"""Interoperability with the real ``deltalake`` (delta-rs) package, used as the oracle.

Direction 1: tables lakelog writes must read identically with ``deltalake`` at every version.
Direction 2: tables ``deltalake`` writes (appends, overwrites, partitions, deletes, optimize, checkpoints,
schema merges) must read identically with lakelog at every version; lakelog may append to them.
Filters: lakelog's filtered reads equal the unfiltered read filtered in Python, and ``Table.files``
prunes files by partition values and by data-column stats.

No mocks: every comparison is against what delta-rs itself reads from disk.
"""

from __future__ import annotations

import datetime as dt
import decimal
import glob
import json
import math
import operator
import os
import shutil
import urllib.parse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import lakelog

import deltalake  # noqa: E402
from deltalake import DeltaTable, write_deltalake  # noqa: E402

UTC = dt.timezone.utc
D = decimal.Decimal

# ---------------------------------------------------------------------------------------------- helpers


def canon(v):
    """Normalise a to_pylist() value so two readers' outputs compare by value."""
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(UTC)
    if isinstance(v, dict):
        return {k: canon(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [canon(x) for x in v]
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    return v


def rows(table: pa.Table) -> list[dict]:
    """Rows of ``table`` as canonical dicts, sorted by ``id``."""
    return sorted((canon(r) for r in table.to_pylist()), key=lambda r: r["id"])


def dl_read(path: str, version: int | None = None) -> pa.Table:
    dt_ = DeltaTable(path) if version is None else DeltaTable(path, version=version)
    return dt_.to_pyarrow_table()


def dl_version(path: str) -> int:
    return DeltaTable(path).version()


def commit_versions(path: str) -> list[int]:
    return sorted(int(os.path.basename(f)[:20]) for f in glob.glob(os.path.join(path, "_delta_log", "*.json")))


def type_shape(t: pa.DataType):
    """A type with nullability and field names of list children ignored, for schema comparison."""
    if pa.types.is_struct(t):
        return ("struct", tuple((t.field(i).name, type_shape(t.field(i).type)) for i in range(t.num_fields)))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return ("list", type_shape(t.value_type))
    if pa.types.is_map(t):
        return ("map", type_shape(t.key_type), type_shape(t.item_type))
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_timestamp(t):
        return ("timestamp", t.unit, None if t.tz is None else "UTC")
    return t


def schema_shape(schema: pa.Schema) -> list:
    """Column names in order with their type shapes."""
    return [(f.name, type_shape(f.type)) for f in schema]


def assert_same_table(ll: pa.Table, dl: pa.Table, what: str) -> None:
    assert schema_shape(ll.schema) == schema_shape(dl.schema), f"{what}: schemas differ\nlakelog:  {ll.schema}\ndeltalake: {dl.schema}"
    assert ll.num_rows == dl.num_rows, f"{what}: lakelog has {ll.num_rows} rows, deltalake {dl.num_rows}"
    assert rows(ll) == rows(dl), f"{what}: rows differ"


def check_every_version(path: str, expected: dict[int, list[dict]] | None = None) -> None:
    """lakelog and deltalake agree at every committed version (and with ``expected`` when given)."""
    versions = commit_versions(path)
    assert versions == list(range(len(versions))), f"log has gaps: {versions}"
    assert dl_version(path) == versions[-1] == lakelog.Table(path).version
    if expected is not None:
        assert sorted(expected) == versions, f"expected states for {sorted(expected)}, log has {versions}"
    for v in versions:
        dl = dl_read(path, v)
        ll = lakelog.read_table(path, version=v)
        assert_same_table(ll, dl, f"version {v}")
        if expected is not None:
            exp = sorted((canon(r) for r in expected[v]), key=lambda r: r["id"])
            assert rows(dl) == exp, f"deltalake's read of version {v} differs from the data written"


# ---------------------------------------------------------------------------------------------- data

ST_TYPE = pa.struct([("x", pa.int32()), ("y", pa.string())])
ALL_TYPES = pa.schema(
    [
        ("id", pa.int64()),
        ("i8", pa.int8()),
        ("i16", pa.int16()),
        ("i32", pa.int32()),
        ("i64", pa.int64()),
        ("f32", pa.float32()),
        ("f64", pa.float64()),
        ("b", pa.bool_()),
        ("s", pa.string()),
        ("bin", pa.binary()),
        ("d", pa.date32()),
        ("tsu", pa.timestamp("us", tz="UTC")),
        ("tsn", pa.timestamp("us")),
        ("dec", pa.decimal128(10, 2)),
        ("st", ST_TYPE),
        ("l", pa.list_(pa.int32())),
    ]
)
ALL_TYPES_TZ_ONLY = pa.schema([f for f in ALL_TYPES if f.name != "tsn"])

STRINGS = ["alpha", "é ü 漢字", "", None, "x" * 70, "a b,c=d/e%f", "Z"]


def all_types_row(i: int) -> dict:
    return {
        "id": i,
        "i8": None if i % 7 == 3 else (i % 200) - 100,
        "i16": None if i % 5 == 1 else (i * 100) % 60_000 - 30_000,
        "i32": -i * 100_000,
        "i64": i * 10**12 * (-1) ** i,
        "f32": None if i % 6 == 2 else i * 0.25 - 3,
        "f64": float("inf") if i % 11 == 10 else (-float("inf") if i % 13 == 12 else i * 1.5e10 - 7.125),
        "b": None if i % 4 == 3 else i % 2 == 0,
        "s": STRINGS[i % len(STRINGS)],
        "bin": [b"\x00\x01", b"", None, bytes(range(256))[i % 250 : i % 250 + 5]][i % 4],
        "d": None if i % 8 == 5 else dt.date(1969, 12, 25) + dt.timedelta(days=i * 37),
        "tsu": None
        if i % 9 == 4
        else dt.datetime(1969, 12, 31, 23, 0, tzinfo=UTC) + dt.timedelta(seconds=i * 86_401, microseconds=i * 123_457),
        "tsn": None if i % 9 == 5 else dt.datetime(1960, 6, 1) + dt.timedelta(hours=i * 1000, microseconds=i * 7),
        "dec": None if i % 10 == 9 else D(i * 137 - 500).scaleb(-2),
        "st": None if i % 6 == 5 else {"x": None if i % 3 == 0 else i, "y": str(i)},
        "l": None if i % 5 == 4 else [i, None, i + 1][: i % 4],
    }


def all_types_table(ids, schema: pa.Schema = ALL_TYPES) -> pa.Table:
    data = [{k: v for k, v in all_types_row(i).items() if k in schema.names} for i in ids]
    return pa.Table.from_pylist(data, schema=schema)


PART_SCHEMA = pa.schema(
    [("id", pa.int64()), ("s", pa.string()), ("i", pa.int32()), ("d", pa.date32()), ("v", pa.float64()), ("t", pa.string())]
)
# Partition values that need escaping on disk and in add.path; '' is null by the Delta protocol.
PART_STRINGS = ["a b", "50%", "k=v", "x/y", "é", "漢字", None, "12:30", "a+b#?&", "", "plain"]
PART_INTS = [-2, 0, 7, None, 123456]
PART_DATES = [dt.date(2020, 1, 2), None, dt.date(1969, 12, 31), dt.date(2024, 2, 29)]


def part_row(i: int) -> dict:
    return {
        "id": i,
        "s": PART_STRINGS[i % len(PART_STRINGS)],
        "i": PART_INTS[i % len(PART_INTS)],
        "d": PART_DATES[i % len(PART_DATES)],
        "v": i * 0.5,
        "t": f"t{i:04d}",
    }


def part_table(ids) -> pa.Table:
    return pa.Table.from_pylist([part_row(i) for i in ids], schema=PART_SCHEMA)


def as_read_back(row: dict, partition_by: list[str]) -> dict:
    """A written row as any Delta reader returns it: an empty-string partition value reads as null."""
    return {k: (None if k in partition_by and v == "" else v) for k, v in row.items()}


# ================================================================ 1. lakelog writes, deltalake reads


def test_write_to_fresh_local_directory_unpartitioned(table_path):
    """write_table to a local path that does not exist yet must create the table (as deltalake does).

    Regression: the first data file of an unpartitioned table was opened before its directory existed.
    """
    assert not os.path.exists(table_path)
    data = all_types_table(range(5), ALL_TYPES_TZ_ONLY)
    assert lakelog.write_table(table_path, data) == 0
    assert rows(dl_read(table_path)) == rows(data)
    assert rows(lakelog.read_table(table_path)) == rows(data)


def test_write_to_fresh_local_directory_partitioned(table_path):
    assert not os.path.exists(table_path)
    data = part_table(range(12))
    lakelog.write_table(table_path, data, partition_by=["s"])
    assert rows(dl_read(table_path)) == [as_read_back(r, ["s"]) for r in rows(data)]


@pytest.mark.parametrize("schema", [ALL_TYPES, ALL_TYPES_TZ_ONLY], ids=["with_ntz", "tz_only"])
def test_all_types_every_version(table_path, schema):
    expected: dict[int, list[dict]] = {}
    current: list[dict] = []

    def write(ids, mode):
        nonlocal current
        t = all_types_table(ids, schema)
        v = lakelog.write_table(table_path, t, mode=mode)
        current = (current if mode == "append" else []) + t.to_pylist()
        expected[v] = list(current)

    write(range(0, 10), "append")
    write(range(10, 25), "append")
    write(range(25, 31), "overwrite")
    write(range(31, 50), "append")
    write(range(50, 52), "append")
    check_every_version(table_path, expected)

    dt_ = DeltaTable(table_path)
    proto = dt_.protocol()
    if "tsn" in schema.names:
        assert (proto.min_reader_version, proto.min_writer_version) == (3, 7)
        assert "timestampNtz" in (proto.reader_features or []) and "timestampNtz" in (proto.writer_features or [])
    else:
        assert (proto.min_reader_version, proto.min_writer_version) == (1, 2)
    # deltalake maps every column to the same Arrow type lakelog was given.
    assert schema_shape(dt_.to_pyarrow_table().schema) == schema_shape(schema)
    # Stats lakelog wrote are usable by deltalake: a selective id predicate still gives the right rows.
    got = dt_.to_pyarrow_table(filters=[("id", ">=", 45)])
    assert sorted(got.column("id").to_pylist()) == list(range(45, 52))


PARTITIONINGS = [["s"], ["i"], ["d"], ["d", "i", "s"]]


@pytest.mark.parametrize("partition_by", PARTITIONINGS, ids=lambda p: "+".join(p))
def test_partitioned_every_version(table_path, partition_by):
    expected: dict[int, list[dict]] = {}
    current: list[dict] = []

    def write(ids, mode):
        nonlocal current
        t = part_table(ids)
        v = lakelog.write_table(table_path, t, mode=mode, partition_by=partition_by if mode == "overwrite" or not expected else None)
        new = [as_read_back(r, partition_by) for r in t.to_pylist()]
        current = (current if mode == "append" else []) + new
        expected[v] = list(current)

    write(range(0, 30), "append")
    write(range(30, 45), "append")
    write(range(45, 70), "overwrite")
    write(range(70, 80), "append")
    write(range(80, 120), "append")
    check_every_version(table_path, expected)

    dt_ = DeltaTable(table_path)
    assert dt_.metadata().partition_columns == partition_by
    # deltalake decodes lakelog's add.path to files that exist on disk.
    for uri in dt_.file_uris():
        assert os.path.exists(uri.removeprefix("file://")), uri
    if partition_by == ["s"]:
        # '' and null share the null partition
        assert {p["s"] for p in dt_.partitions()} == {"a b", "50%", "k=v", "x/y", "é", "漢字", None, "12:30", "a+b#?&", "plain"}
    # deltalake and lakelog both select by lakelog's partition values, and lakelog prunes files by them.
    all_files = lakelog.Table(table_path).files()
    for col, value in [("s", "x/y"), ("s", "50%"), ("i", -2), ("i", 123456), ("d", dt.date(1969, 12, 31))]:
        if col in partition_by:
            filters = [(col, "=", value)]
            exp = sorted((canon(r) for r in expected[max(expected)] if r[col] == value), key=lambda r: r["id"])
            assert exp
            assert rows(dt_.to_pyarrow_table(filters=filters)) == exp
            assert rows(lakelog.read_table(table_path, filters=filters)) == exp
            assert 0 < len(lakelog.Table(table_path).files(filters=filters)) < len(all_files)


@pytest.mark.parametrize(
    "column,values",
    [
        ("tsu", [dt.datetime(2021, 1, 1, 0, 0, 0, 123456, tzinfo=UTC), None, dt.datetime(2021, 1, 1, 10, tzinfo=UTC)]),
        ("tsn", [dt.datetime(2021, 1, 1, 0, 0, 0, 123456), None, dt.datetime(1960, 1, 1, 10)]),
        ("f", [1.5, None, 2.0, -0.25]),
        ("bo", [True, None, False]),
        ("dec", [D("0.05"), None, D("12.30"), D("100.00")]),
        ("i8", [-1, None, 5]),
    ],
)
def test_partitioned_by_other_types(table_path, column, values):
    types = {"tsu": pa.timestamp("us", tz="UTC"), "tsn": pa.timestamp("us"), "f": pa.float64(), "bo": pa.bool_(), "dec": pa.decimal128(10, 2), "i8": pa.int8()}
    t = pa.table({"id": pa.array(range(len(values)), pa.int64()), column: pa.array(values, types[column])})
    lakelog.write_table(table_path, t, partition_by=[column])
    lakelog.write_table(table_path, t.set_column(0, "id", pa.array(range(10, 10 + len(values)), pa.int64())))
    check_every_version(table_path)
    assert sorted(map(canon, dl_read(table_path).column(column).to_pylist()), key=repr) == sorted(map(canon, values * 2), key=repr)


def _checkpoint_sequence(path: str, partition_by: list[str] | None, make=None) -> dict[int, list[dict]]:
    """13 commits mixing appends (some idempotent, with app_id), overwrites and an empty append.

    lakelog checkpoints every 10 versions, so a checkpoint is written at version 10; it then holds
    add rows, remove tombstones (from the overwrites) and txn rows.
    """
    make = make or part_table
    expected: dict[int, list[dict]] = {}
    current: list[dict] = []
    pb = partition_by or []
    plan = ["append"] * 4 + ["overwrite"] + ["append"] * 2 + ["empty"] + ["overwrite"] + ["append"] * 4
    for step, mode in enumerate(plan):
        ids = range(step * 10, step * 10 + (0 if mode == "empty" else 7))
        t = make(ids)
        txn = {"app_id": "ingest", "app_version": step} if mode == "append" and step % 2 else {}
        v = lakelog.write_table(path, t, mode="overwrite" if mode == "overwrite" else "append", partition_by=partition_by if step == 0 else None, **txn)
        assert v == step
        new = [as_read_back(r, pb) for r in t.to_pylist()]
        current = (current if mode != "overwrite" else []) + new
        expected[v] = list(current)
    return expected


@pytest.mark.parametrize(
    "partition_by,make",
    [(None, None), (["s"], None), (None, all_types_table)],
    ids=["unpartitioned", "partitioned", "all_types_ntz"],
)
def test_checkpoint_written_by_lakelog_is_read_by_deltalake(table_path, tmp_path, partition_by, make):
    expected = _checkpoint_sequence(table_path, partition_by, make)
    log = os.path.join(table_path, "_delta_log")
    cp = os.path.join(log, "00000000000000000010.checkpoint.parquet")
    assert os.path.isfile(cp), sorted(os.listdir(log))
    assert os.path.isfile(os.path.join(log, "_last_checkpoint"))
    with open(os.path.join(log, "_last_checkpoint")) as f:
        hint = json.load(f)
    assert hint["version"] == 10
    assert hint["numOfAddFiles"] == len(lakelog.Table(table_path, version=10).files())

    check_every_version(table_path, expected)
    latest = max(expected)
    assert dl_version(table_path) == latest == 12
    assert rows(dl_read(table_path)) == sorted((canon(r) for r in expected[latest]), key=lambda r: r["id"])

    # Prove deltalake can use lakelog's checkpoint: drop every commit before it and read again.
    only_cp = str(tmp_path / "from_checkpoint")
    shutil.copytree(table_path, only_cp)
    for v in range(10):
        os.remove(os.path.join(only_cp, "_delta_log", f"{v:020d}.json"))
    for v in (10, latest):
        dl = dl_read(only_cp, v)
        assert rows(dl) == sorted((canon(r) for r in expected[v]), key=lambda r: r["id"]), f"version {v}"
        assert_same_table(lakelog.read_table(only_cp, version=v), dl, f"checkpoint-only version {v}")
    assert len(DeltaTable(only_cp).file_uris()) == len(lakelog.Table(only_cp).files())

    # deltalake keeps appending to the lakelog table and checkpoints it; lakelog reads what it wrote.
    write_deltalake(table_path, (make or part_table)(range(500, 505)), mode="append")
    DeltaTable(table_path).create_checkpoint()
    assert os.path.isfile(os.path.join(table_path, "_delta_log", f"{latest + 1:020d}.checkpoint.parquet"))
    assert_same_table(lakelog.read_table(table_path), dl_read(table_path), "after deltalake append")
    assert lakelog.Table(table_path).version == latest + 1
    # the idempotent-write state lakelog recorded survived deltalake's checkpoint
    assert lakelog.Table(table_path).snapshot.txns["ingest"].version == 11
    assert lakelog.write_table(table_path, (make or part_table)(range(600, 602)), app_id="ingest", app_version=11) == latest + 1


@pytest.mark.parametrize("partition_by", [None, ["b"]], ids=["unpartitioned", "partitioned"])
def test_lakelog_stats_are_valid_bounds_as_deltalake_parses_them(table_path, partition_by):
    """Every stat lakelog writes, as deltalake parses it, bounds the file's real values.

    The input has several record batches per file (one per chunk), some holding +-inf, so stats
    are merged across batches. Engines prune with these stats, so a min above the true minimum
    (or a max below the true maximum) makes them skip rows.
    """
    chunks = [all_types_table(range(k * 10, k * 10 + 10), ALL_TYPES) for k in range(4)]  # f64: ids 10, 21, 32 are +inf; 12, 25, 38 are -inf
    lakelog.write_table(table_path, pa.concat_tables(chunks), partition_by=partition_by)
    dt_ = DeltaTable(table_path)
    actions = pa.table(dt_.get_add_actions(flatten=True)).to_pylist()
    assert actions
    checked = 0
    for a in actions:
        data = pq.read_table(os.path.join(table_path, urllib.parse.unquote(a["path"]))).flatten()
        assert a["num_records"] == data.num_rows
        for key, stat in a.items():
            kind, _, col = key.partition(".")
            if kind not in ("min", "max", "null_count") or stat is None or col in (partition_by or []):
                continue
            arr = data.column(col)
            if kind == "null_count":
                assert stat == arr.null_count, f"{a['path']}: nullCount of {col} is {stat}, file has {arr.null_count}"
                continue
            if pa.types.is_floating(arr.type):
                arr = arr.filter(pc.invert(pc.is_nan(arr)))
            mm = pc.min_max(arr)
            lo, hi = canon(mm["min"].as_py()), canon(mm["max"].as_py())
            stat = canon(stat)
            if kind == "min":
                assert stat <= lo, f"{a['path']}: min of {col} is {stat!r} but the file holds {lo!r}"
            else:
                assert stat >= hi, f"{a['path']}: max of {col} is {stat!r} but the file holds {hi!r}"
            checked += 1
    assert checked >= len(actions) * 10


def test_schema_evolution_by_lakelog_read_by_deltalake(table_path):
    expected: dict[int, list[dict]] = {}
    t0 = pa.table({"id": pa.array([1, 2], pa.int64()), "k": ["a", "b c"]})
    expected[lakelog.write_table(table_path, t0, partition_by=["k"])] = t0.to_pylist()
    t1 = pa.table({"id": pa.array([3], pa.int64()), "k": ["a"], "new": [1.5]})
    v1 = lakelog.write_table(table_path, t1, schema_mode="merge")
    expected[v1] = [dict(r, new=None) for r in t0.to_pylist()] + t1.to_pylist()
    t2 = pa.table({"id": pa.array([4], pa.int64()), "k": ["z"]})  # the new column may be absent later
    v2 = lakelog.write_table(table_path, t2)
    expected[v2] = expected[v1] + [dict(r, new=None) for r in t2.to_pylist()]
    t3 = pa.table({"id": pa.array([9], pa.int64()), "z": ["zz"], "ts": pa.array([dt.datetime(2020, 1, 1)], pa.timestamp("us"))})
    v3 = lakelog.write_table(table_path, t3, mode="overwrite", schema_mode="overwrite")
    expected[v3] = t3.to_pylist()
    check_every_version(table_path, expected)
    dt_ = DeltaTable(table_path)
    assert dt_.metadata().partition_columns == []
    assert dt_.protocol().min_reader_version == 3  # the ntz column upgraded the protocol
    assert DeltaTable(table_path, version=v1).metadata().id == dt_.metadata().id


# ================================================================ 2. deltalake writes, lakelog reads


def test_deltalake_unpartitioned_history_every_version(table_path):
    write_deltalake(table_path, all_types_table(range(0, 10)))  # v0
    write_deltalake(table_path, all_types_table(range(10, 20)), mode="append")  # v1
    write_deltalake(table_path, all_types_table(range(20, 30)), mode="overwrite")  # v2
    write_deltalake(table_path, all_types_table(range(30, 40)), mode="append")  # v3
    DeltaTable(table_path).delete("id = 33")  # v4: copy-on-write rewrite of one file
    DeltaTable(table_path).delete("id >= 38")  # v5
    for k in range(3):  # v6..v8: small files for optimize
        write_deltalake(table_path, all_types_table(range(40 + k * 3, 43 + k * 3)), mode="append")
    DeltaTable(table_path).optimize.compact()  # v9
    DeltaTable(table_path).create_checkpoint()  # checkpoint at v9
    extra = all_types_table(range(60, 65)).append_column("extra", pa.array(["e1", None, "e3", "é", ""]))
    write_deltalake(table_path, extra, mode="append", schema_mode="merge")  # v10
    write_deltalake(table_path, all_types_table(range(70, 72)), mode="append", schema_mode="merge")  # v11: without the new column

    assert os.path.isfile(os.path.join(table_path, "_delta_log", "00000000000000000009.checkpoint.parquet"))
    check_every_version(table_path)
    ids = {v: sorted(lakelog.read_table(table_path, version=v, columns=["id"]).column("id").to_pylist()) for v in (3, 4, 5, 9, 11)}
    assert ids[3] == list(range(20, 40))
    assert ids[4] == [i for i in range(20, 40) if i != 33]
    assert ids[5] == [i for i in range(20, 38) if i != 33]
    assert ids[9] == ids[5] + list(range(40, 49))
    assert ids[11] == ids[9] + list(range(60, 65)) + [70, 71]
    assert lakelog.Table(table_path, version=10).schema.names[-1] == "extra"
    assert lakelog.Table(table_path, version=9).files() != lakelog.Table(table_path, version=8).files()


def test_deltalake_partitioned_history_every_version(table_path, tmp_path):
    def t(ids):
        return part_table(ids).select(["id", "s", "i", "v", "t"])

    write_deltalake(table_path, t(range(0, 22)), partition_by=["s", "i"])  # v0
    write_deltalake(table_path, t(range(22, 44)), mode="append")  # v1
    write_deltalake(table_path, t([i for i in range(44, 66) if PART_STRINGS[i % 11] == "a b"]), mode="overwrite", predicate="s = 'a b'")  # v2
    DeltaTable(table_path).delete("s = '50%'")  # v3: partition-only delete (remove actions only)
    DeltaTable(table_path).delete("v > 15.0 AND v < 18.0")  # v4: data predicate, rewrites files
    for k in range(3):  # v5..v7
        write_deltalake(table_path, t(range(100 + k * 11, 111 + k * 11)), mode="append")
    DeltaTable(table_path).optimize.compact()  # v8
    DeltaTable(table_path).create_checkpoint()
    merged = t(range(200, 211)).append_column("newcol", pa.array([f"n{i}" for i in range(11)]))
    write_deltalake(table_path, merged, mode="append", schema_mode="merge")  # v9: column order may change
    write_deltalake(table_path, t(range(300, 305)), mode="overwrite", schema_mode="merge")  # v10
    write_deltalake(table_path, t(range(305, 320)), mode="append", schema_mode="merge")  # v11

    check_every_version(table_path)
    v3 = lakelog.read_table(table_path, version=3).to_pylist()
    assert v3 and all(r["s"] != "50%" for r in v3)
    assert any(r["s"] == "50%" for r in lakelog.read_table(table_path, version=2).to_pylist())
    assert [r for r in v3 if 15.0 < r["v"] < 18.0]
    v4 = lakelog.read_table(table_path, version=4).to_pylist()
    assert not [r for r in v4 if 15.0 < r["v"] < 18.0]
    assert "newcol" in lakelog.Table(table_path, version=9).schema.names
    assert set(lakelog.Table(table_path).partition_columns) == {"s", "i"}

    # lakelog reads deltalake's checkpoint on its own (earlier commits removed).
    only_cp = str(tmp_path / "from_checkpoint")
    shutil.copytree(table_path, only_cp)
    for v in range(8):
        os.remove(os.path.join(only_cp, "_delta_log", f"{v:020d}.json"))
    for v in (8, 9, 11):
        assert_same_table(lakelog.read_table(only_cp, version=v), dl_read(table_path, v), f"checkpoint-only version {v}")


@pytest.mark.parametrize("partition_by", [None, ["s"]], ids=["unpartitioned", "partitioned"])
def test_lakelog_appends_to_deltalake_table(table_path, partition_by):
    pb = partition_by or []
    expected: dict[int, list[dict]] = {}
    current: list[dict] = []

    def record(v, t, mode="append"):
        nonlocal current
        new = [as_read_back(r, pb) for r in t.to_pylist()]
        current = (current if mode == "append" else []) + new
        expected[v] = list(current)

    t = part_table(range(0, 11))
    write_deltalake(table_path, t, partition_by=partition_by)
    record(0, t)
    t = part_table(range(11, 33))
    assert lakelog.write_table(table_path, t) == 1  # new and existing partitions, null, special characters
    record(1, t)
    t = part_table(range(33, 40))
    write_deltalake(table_path, t, mode="append")
    record(2, t)
    t = part_table(range(40, 55))
    assert lakelog.write_table(table_path, t, mode="overwrite") == 3
    record(3, t, "overwrite")
    t = part_table(range(55, 60))
    assert lakelog.write_table(table_path, t) == 4
    record(4, t)
    check_every_version(table_path, expected)

    # The lakelog commit did not touch the table's identity or protocol.
    md0, md4 = DeltaTable(table_path, version=0).metadata(), DeltaTable(table_path).metadata()
    assert md0.id == md4.id and md0.partition_columns == md4.partition_columns
    # deltalake can still operate on the table after lakelog's commits.
    DeltaTable(table_path).delete("id = 41")
    DeltaTable(table_path).optimize.compact()
    check_every_version(table_path)
    assert 41 not in lakelog.read_table(table_path, columns=["id"]).column("id").to_pylist()


def test_lakelog_appends_to_deltalake_ntz_table(table_path):
    write_deltalake(table_path, all_types_table(range(0, 10)))
    assert DeltaTable(table_path).protocol().min_reader_version == 3
    assert lakelog.write_table(table_path, all_types_table(range(10, 20))) == 1
    write_deltalake(table_path, all_types_table(range(20, 25)), mode="append")
    assert lakelog.write_table(table_path, all_types_table(range(25, 30))) == 3
    check_every_version(table_path)
    assert rows(dl_read(table_path)) == rows(all_types_table(range(30)))


def test_lakelog_checkpoints_a_deltalake_table(table_path, tmp_path):
    write_deltalake(table_path, part_table(range(0, 5)), partition_by=["s"])
    for k in range(1, 11):
        assert lakelog.write_table(table_path, part_table(range(k * 5, k * 5 + 5))) == k
    assert os.path.isfile(os.path.join(table_path, "_delta_log", "00000000000000000010.checkpoint.parquet"))
    check_every_version(table_path)

    only_cp = str(tmp_path / "from_checkpoint")
    shutil.copytree(table_path, only_cp)
    for v in range(10):
        os.remove(os.path.join(only_cp, "_delta_log", f"{v:020d}.json"))
    exp = [as_read_back(r, ["s"]) for r in part_table(range(55)).to_pylist()]
    assert rows(dl_read(only_cp)) == sorted(exp, key=lambda r: r["id"])
    write_deltalake(only_cp, part_table(range(55, 60)), mode="append")
    assert_same_table(lakelog.read_table(only_cp), dl_read(only_cp), "after deltalake append on lakelog checkpoint")


# ================================================================ 3. filters and pruning

FILTER_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("p", pa.string()),
        ("n", pa.int32()),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("tsu", pa.timestamp("us", tz="UTC")),
        ("tsn", pa.timestamp("us")),
        ("dec", pa.decimal128(10, 2)),
        ("f", pa.float64()),
        ("ls", pa.string()),
        ("old", pa.timestamp("us")),
        ("flag", pa.bool_()),
    ]
)
FILTER_PARTS = ["a b", "50%", "é", None]
TS0 = dt.datetime(2021, 1, 1, tzinfo=UTC)


def filter_row(i: int) -> dict:
    return {
        "id": i,
        "p": FILTER_PARTS[i % 4],
        "n": None if i % 7 == 0 else i * 3,
        "s": None if i % 9 == 4 else f"s-{i:04d}",
        "d": dt.date(2020, 1, 1) + dt.timedelta(days=i),
        # microsecond precision, so ms-truncated stats (deltalake) must not lose the maximum
        "tsu": TS0 + dt.timedelta(minutes=i, microseconds=123_456 + i),
        "tsn": dt.datetime(2021, 1, 1) + dt.timedelta(minutes=i, microseconds=654_321 + i),
        "dec": D(i * 7 - 100).scaleb(-2),
        "f": i * 0.25 - 5,
        # longer than any writer's string-stats prefix (lakelog 32 chars, deltalake 64 bytes)
        "ls": "p" * 70 + f"{i:04d}",
        # before 1970 with sub-millisecond parts: ms-truncated stats must still bound the values
        "old": dt.datetime(1960, 6, 1) + dt.timedelta(minutes=i, microseconds=500 + i),
        "flag": None if i % 10 == 7 else i % 3 == 0,
    }


N_BATCHES, BATCH = 6, 12  # six appends of disjoint id ranges -> several files per partition


_FILTER_TABLES: dict[str, str] = {}


def build_filter_table(writer: str, tmp_path_factory) -> str:
    """Six appends of disjoint id ranges, partitioned by ``p``, written by lakelog or deltalake (cached)."""
    if writer not in _FILTER_TABLES:
        path = str(tmp_path_factory.mktemp(f"filters_{writer}") / "table")
        for b in range(N_BATCHES):
            t = pa.Table.from_pylist([filter_row(i) for i in range(b * BATCH, (b + 1) * BATCH)], schema=FILTER_SCHEMA)
            if writer == "lakelog":
                lakelog.write_table(path, t, partition_by=["p"] if b == 0 else None)
            else:
                write_deltalake(path, t, partition_by=["p"] if b == 0 else None, mode="append")
        _FILTER_TABLES[writer] = path
    return _FILTER_TABLES[writer]


@pytest.fixture(scope="module", params=["lakelog", "deltalake"])
def filter_table(request, tmp_path_factory):
    return build_filter_table(request.param, tmp_path_factory)


@pytest.fixture(scope="module")
def lakelog_filter_table(tmp_path_factory):
    return build_filter_table("lakelog", tmp_path_factory)


OPS = {
    "=": operator.eq,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "in": lambda a, b: a in b,
    "not in": lambda a, b: a not in b,
}


def _spark_float(v):
    # Floats compare as in Spark SQL (lakelog's DNF semantics): NaN equals NaN and is above every other value.
    if isinstance(v, float):
        return (1, 0.0) if math.isnan(v) else (0, v)
    return v


def py_filter(rs: list[dict], filters) -> list[dict]:
    """Filter rows in Python with SQL null semantics (a comparison with null is not true)."""
    dnf = [filters] if isinstance(filters[0], tuple) else filters

    def term(r, c, op, val):
        v = r[c]
        if v is None:
            return False
        if v == "NaN":  # canon() marks NaN so rows compare; compare the float itself here
            v = math.nan
        if isinstance(val, dt.datetime) and val.tzinfo is not None:
            val = val.astimezone(UTC)
        if op in ("in", "not in"):
            if op == "not in" and None in val:
                return False
            val = [_spark_float(x) for x in val if x is not None]
        else:
            val = _spark_float(val)
        return OPS[op](_spark_float(v), val)

    return [r for r in rs if any(all(term(r, *t) for t in conj) for conj in dnf)]


# The largest value of its file (ids 48..59, partition 'é' holds 50, 54, 58), with microseconds: a reader
# must not prune the file by a max stat that deltalake truncated to milliseconds.
TS_EXACT = TS0 + dt.timedelta(minutes=58, microseconds=123_456 + 58)
# The largest value of its file (ids 24..35, null partition holds 27, 31, 35).
TSN_EXACT = dt.datetime(2021, 1, 1) + dt.timedelta(minutes=35, microseconds=654_321 + 35)

FILTERS = {
    "part_eq": [("p", "=", "a b")],
    "part_ne": [("p", "!=", "a b")],
    "part_in": [("p", "in", ["50%", "é"])],
    "part_lt": [("p", "<", "b")],
    "int_eq": [("n", "=", 21)],
    "int_ge": [("n", ">=", 150)],
    "id_lt": [("id", "<", 5)],
    "id_in": [("id", "in", [3, 17, 55, 1000])],
    "id_not_in": [("id", "not in", list(range(0, 70)))],
    "str_eq": [("s", "=", "s-0012")],
    "str_gt": [("s", ">", "s-0060")],
    "date_le": [("d", "<=", dt.date(2020, 1, 10))],
    "tsu_ge": [("tsu", ">=", TS0 + dt.timedelta(minutes=60))],
    "tsu_eq_micro": [("tsu", "=", TS_EXACT)],
    "tsu_le_micro": [("tsu", "<=", TS_EXACT)],
    "tsn_eq_micro": [("tsn", "=", TSN_EXACT)],
    "dec_lt": [("dec", "<", D("-0.50"))],
    "dec_eq": [("dec", "=", D("2.89"))],
    "float_gt": [("f", ">", 10.0)],
    "and": [("p", "=", "é"), ("id", ">", 20), ("n", "<", 150)],
    "or": [[("p", "=", "50%")], [("id", "<", 3)]],
    "part_null_and_data": [("p", "in", ["a b", "é"]), ("s", "<", "s-0030")],
    "long_str_eq": [("ls", "=", "p" * 70 + "0029")],
    "long_str_ge": [("ls", ">=", "p" * 70 + "0060")],
    "pre1970_eq_min": [("old", "=", dt.datetime(1960, 6, 1) + dt.timedelta(minutes=24, microseconds=524))],
    "pre1970_eq_max": [("old", "=", dt.datetime(1960, 6, 1) + dt.timedelta(minutes=35, microseconds=535))],
    "pre1970_lt": [("old", "<", dt.datetime(1960, 6, 1, 0, 10))],
    "bool_eq": [("flag", "=", True)],
    "bool_and_part": [("flag", "=", False), ("p", "=", "a b")],
}


@pytest.mark.parametrize("name", list(FILTERS))
def test_filtered_read_equals_python_filter(filter_table, name):
    filters = FILTERS[name]
    full = lakelog.read_table(filter_table)
    assert full.num_rows == N_BATCHES * BATCH
    expected = py_filter(rows(full), filters)
    got = lakelog.read_table(filter_table, filters=filters)
    assert rows(got) == expected
    if filter_table == _FILTER_TABLES.get("deltalake"):
        # sanity check of the oracle on its own table: deltalake agrees on what the filter selects
        assert rows(DeltaTable(filter_table).to_pyarrow_table(filters=filters)) == expected


@pytest.mark.parametrize("name", list(FILTERS))
def test_deltalake_filtered_read_of_lakelog_table(lakelog_filter_table, name):
    """deltalake's filtered read of a lakelog table selects the same rows as filtering in Python.

    deltalake turns each file's stats into pyarrow fragment bounds and turns a *missing* min or max
    into a null bound, which prunes the file. So every column lakelog writes stats for must carry
    both bounds, as deltalake's own writer does (booleans, and strings longer than the stats prefix
    with a truncated-and-incremented max), or a filter on it silently returns too few rows.
    """
    filters = FILTERS[name]
    expected = py_filter(rows(lakelog.read_table(lakelog_filter_table)), filters)
    assert rows(DeltaTable(lakelog_filter_table).to_pyarrow_table(filters=filters)) == expected


@pytest.mark.parametrize("writer", ["lakelog", "deltalake"])
def test_float_filters_with_infinities_and_nan(table_path, writer):
    """Stats of float files holding +-inf/NaN (deltalake writes null bounds then) never prune wrongly."""
    batches = [
        [1.0, float("inf"), 2.0],
        [-float("inf"), -3.5, None],
        [float("nan"), 0.25, 7.0],
        [float("inf"), float("inf"), float("-inf")],
    ]
    for b, vals in enumerate(batches):
        t = pa.table({"id": pa.array(range(b * 10, b * 10 + len(vals)), pa.int64()), "f": pa.array(vals, pa.float64())})
        if writer == "lakelog":
            lakelog.write_table(table_path, t)
        else:
            write_deltalake(table_path, t, mode="append")
    full = rows(lakelog.read_table(table_path))
    assert rows(dl_read(table_path)) == full
    for filters in ([("f", ">", 0.5)], [("f", "<", 5.0)], [("f", "=", float("inf"))], [("f", "<=", -1e300)], [("f", "!=", 0.25)]):
        assert rows(lakelog.read_table(table_path, filters=filters)) == py_filter(full, filters), filters


def test_filtered_read_at_older_version(filter_table):
    filters = [("p", "=", "50%"), ("n", ">", 30)]
    for v in (0, 2):
        full = lakelog.read_table(filter_table, version=v)
        assert rows(lakelog.read_table(filter_table, version=v, filters=filters)) == py_filter(rows(full), filters)


def test_files_prunes_by_partition(filter_table):
    table = lakelog.Table(filter_table)
    all_files = table.files()
    assert len(all_files) >= N_BATCHES * len(FILTER_PARTS)
    picked = table.files(filters=[("p", "=", "é")])
    in_partition = [f for f in all_files if table.snapshot.files[f].partition_values.get("p") == "é"]
    assert 0 < len(picked) < len(all_files)
    assert sorted(picked) == sorted(in_partition)
    null_files = table.files(filters=pc.field("p").is_null())
    assert sorted(null_files) == sorted(f for f in all_files if table.snapshot.files[f].partition_values.get("p") is None)


@pytest.mark.parametrize(
    "filters,holder",
    [
        ([("id", "=", 29)], lambda r: r["id"] == 29),  # no nulls: plain min/max bounds
        ([("n", "=", 3 * 29)], lambda r: r["n"] == 3 * 29),  # column with nulls: bounds stated with is_null
        ([("d", "=", dt.date(2020, 1, 1) + dt.timedelta(days=29))], lambda r: r["d"] == dt.date(2020, 1, 30)),
        ([("tsu", "=", TS_EXACT)], lambda r: r["tsu"] == TS_EXACT),
        ([("s", "=", "s-0029")], lambda r: r["s"] == "s-0029"),
    ],
    ids=["id", "nullable_int", "date", "timestamp", "string"],
)
def test_files_prunes_by_data_column_stats(filter_table, filters, holder):
    table = lakelog.Table(filter_table)
    all_files = table.files()
    picked = table.files(filters=filters)
    # Each append of disjoint ids wrote one file per partition; only that append's files can hold the
    # row, so at most one file per partition survives out of N_BATCHES per partition.
    assert 0 < len(picked) <= len(FILTER_PARTS) < len(all_files), picked
    # exactly one kept file really holds the row, and it is among those kept
    holding = [f for f in picked if any(holder(r) for r in pq.read_table(os.path.join(filter_table, f)).to_pylist())]
    assert len(holding) == 1, (picked, holding)
    assert rows(lakelog.read_table(filter_table, filters=filters)) == py_filter(rows(lakelog.read_table(filter_table)), filters)


def test_filters_and_pruning_on_any_storage(any_table_path):
    """Filter correctness and pruning do not depend on the storage backend (local and memory://)."""
    for b in range(4):
        t = pa.Table.from_pylist([filter_row(i) for i in range(b * BATCH, (b + 1) * BATCH)], schema=FILTER_SCHEMA)
        lakelog.write_table(any_table_path, t, partition_by=["p"] if b == 0 else None)
    table = lakelog.Table(any_table_path)
    full = rows(table.to_pyarrow())
    for filters in ([("p", "=", "50%")], [("id", ">=", 40)], [("p", "!=", "é"), ("tsu", "<", TS0 + dt.timedelta(minutes=20))]):
        assert rows(lakelog.read_table(any_table_path, filters=filters)) == py_filter(full, filters)
    n_all = len(table.files())
    assert len(table.files(filters=[("p", "=", "50%")])) == 4 < n_all
    assert 0 < len(table.files(filters=[("id", "=", 40)])) <= len(FILTER_PARTS) < n_all


def test_lakelog_checkpoint_on_top_of_a_deltalake_checkpoint(table_path):
    """Checkpoint rows written by delta-rs (non-null fields, deletionVector and row-tracking columns,
    differently named map entries) carry over into a lakelog checkpoint that both engines read alone."""
    for i, k in enumerate(["x%y", "a b", "a b"]):
        write_deltalake(table_path, pa.table({"id": pa.array([i], pa.int64()), "k": [k]}), partition_by=["k"], mode="append")
    DeltaTable(table_path).create_checkpoint()
    lakelog.write_table(table_path, pa.table({"id": pa.array([9], pa.int64()), "k": ["z"]}))
    t = lakelog.Table(table_path)
    assert t.snapshot.file_set.base is not None  # started from delta-rs's checkpoint rows
    before = {p: (a.size, a.partition_values, a.stats) for p, a in t.snapshot.files.items()}
    assert t.checkpoint() == 3
    for v in range(4):
        os.remove(os.path.join(table_path, "_delta_log", f"{v:020d}.json"))
    again = lakelog.Table(table_path)
    assert {p: (a.size, a.partition_values, a.stats) for p, a in again.snapshot.files.items()} == before
    assert sorted(again.to_pyarrow().column("id").to_pylist()) == [0, 1, 2, 9]
    assert sorted(DeltaTable(table_path).to_pyarrow_table().column("id").to_pylist()) == [0, 1, 2, 9]
    assert again.files(filters=[("id", ">", 5)]) == [p for p in again.files() if p.startswith("k=z/")]

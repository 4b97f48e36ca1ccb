import datetime as dt
import decimal
import os

import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

import lakelog
from lakelog.actions import parse_app_version
from lakelog.errors import InvalidArgumentError, SchemaMismatchError


def _ids(t):
    return sorted(t.column("id").to_pylist())


def test_round_trip_on_each_storage(any_table_path):
    data = pa.table({"id": [1, 2, 3], "p": ["a", "b", "a"], "x": [0.5, None, 2.5]})
    assert lakelog.write_table(any_table_path, data, partition_by=["p"]) == 0
    assert lakelog.write_table(any_table_path, data.slice(1)) == 1
    got = lakelog.read_table(any_table_path)
    assert _ids(got) == [1, 2, 2, 3, 3]
    assert got.schema.field("p").type == pa.string()
    assert lakelog.read_table(any_table_path, version=0).sort_by("id").to_pylist() == data.sort_by("id").to_pylist()
    assert len(lakelog.Table(any_table_path).files(filters=[("p", "=", "b")])) == 2


def test_pandas_and_record_batch_reader_inputs(table_path):
    df = pd.DataFrame({"id": [1, 2], "when": pd.to_datetime(["2026-01-01", "2026-01-02"], utc=True), "s": ["x", None]})
    lakelog.write_table(table_path, df)
    reader = pa.RecordBatchReader.from_batches(
        pa.schema([("id", pa.int64()), ("when", pa.timestamp("us", "UTC")), ("s", pa.string())]),
        [pa.record_batch({"id": [3], "when": pa.array([dt.datetime(2026, 1, 3, tzinfo=dt.timezone.utc)], pa.timestamp("us", "UTC")), "s": ["z"]})],
    )
    lakelog.write_table(table_path, reader)
    out = lakelog.Table(table_path).to_pandas().sort_values("id")
    assert out["id"].tolist() == [1, 2, 3]
    assert str(out["when"].dt.tz) == "UTC"
    assert out["s"].tolist()[0] == "x" and out["s"].isna().tolist() == [False, True, False]


def test_overwrite_replaces_everything_in_one_commit(table_path):
    lakelog.write_table(table_path, pa.table({"id": [1, 2]}))
    lakelog.write_table(table_path, pa.table({"id": [3]}))
    v = lakelog.write_table(table_path, pa.table({"id": [9]}), mode="overwrite")
    assert v == 2 and _ids(lakelog.read_table(table_path)) == [9]
    lines = open(os.path.join(table_path, "_delta_log", f"{v:020d}.json"), "rb").read().splitlines()
    kinds = [next(iter(orjson.loads(line))) for line in lines]
    assert kinds.count("remove") == 2 and kinds.count("add") == 1
    assert _ids(lakelog.read_table(table_path, version=1)) == [1, 2, 3]


def test_schema_merge_and_schema_overwrite(table_path):
    lakelog.write_table(table_path, pa.table({"id": [1], "a": ["x"]}))
    with pytest.raises(SchemaMismatchError, match="schema_mode='merge'"):
        lakelog.write_table(table_path, pa.table({"id": [2], "b": [1.5]}))
    lakelog.write_table(table_path, pa.table({"id": [2], "b": [1.5]}), schema_mode="merge")
    t = lakelog.Table(table_path)
    assert t.schema.names == ["id", "a", "b"]
    assert t.to_pyarrow().sort_by("id").to_pylist() == [{"id": 1, "a": "x", "b": None}, {"id": 2, "a": None, "b": 1.5}]
    lakelog.write_table(table_path, pa.table({"k": ["z"], "n": [1]}), mode="overwrite", schema_mode="overwrite", partition_by=["k"])
    t = lakelog.Table(table_path)
    assert t.schema.names == ["k", "n"] and t.partition_columns == ["k"]
    assert t.to_pyarrow().to_pylist() == [{"k": "z", "n": 1}]
    with pytest.raises(ValueError):
        lakelog.write_table(table_path, pa.table({"k": ["z"], "n": [1]}), schema_mode="overwrite")


def test_append_widens_and_fills_missing_nullable_columns(table_path):
    lakelog.write_table(table_path, pa.table({"id": pa.array([1], pa.int64()), "f": pa.array([1.0], pa.float64()), "s": ["a"]}))
    lakelog.write_table(table_path, pa.table({"id": pa.array([2], pa.int32()), "f": pa.array([2.0], pa.float32())}))
    got = lakelog.read_table(table_path).sort_by("id")
    assert got.schema.field("id").type == pa.int64()
    assert got.to_pylist() == [{"id": 1, "f": 1.0, "s": "a"}, {"id": 2, "f": 2.0, "s": None}]
    with pytest.raises(SchemaMismatchError, match="'id'"):
        lakelog.write_table(table_path, pa.table({"id": ["not a number"]}))
    with pytest.raises(SchemaMismatchError):
        lakelog.write_table(table_path, pa.table({"id": pa.array([1.5])}))  # narrowing float -> long


def test_non_nullable_column_rejects_nulls(table_path):
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("s", pa.string())])
    lakelog.write_table(table_path, pa.table({"id": [1], "s": ["a"]}, schema=schema))
    with pytest.raises(SchemaMismatchError, match="not nullable"):
        lakelog.write_table(table_path, pa.table({"id": pa.array([None], pa.int64()), "s": ["b"]}))
    assert lakelog.read_table(table_path).num_rows == 1


def test_partition_by_mismatch_and_bad_names(table_path):
    lakelog.write_table(table_path, pa.table({"id": [1], "p": ["a"]}), partition_by="p")
    with pytest.raises(SchemaMismatchError, match="partition_by"):
        lakelog.write_table(table_path, pa.table({"id": [1], "p": ["a"]}), partition_by=["id"])
    with pytest.raises(SchemaMismatchError, match="not in the data"):
        lakelog.write_table(table_path + "2", pa.table({"id": [1]}), partition_by=["nope"])
    with pytest.raises(SchemaMismatchError, match="character"):
        lakelog.write_table(table_path + "3", pa.table({"bad name": [1]}))
    with pytest.raises(SchemaMismatchError, match="case"):
        lakelog.write_table(table_path + "4", pa.table({"a": [1], "A": [2]}))


def test_stats_written_per_file(table_path):
    data = pa.table(
        {
            "id": [3, 1, 2],
            "s": ["b", None, "a" * 40],
            "d": pa.array([decimal.Decimal("1.25"), decimal.Decimal("-2.50"), None], pa.decimal128(6, 2)),
            "t": pa.array([dt.datetime(2026, 1, 1, 0, 0, 0, 123456), None, dt.datetime(2025, 1, 1)], pa.timestamp("us")),
            "st": pa.array([{"a": 1}, {"a": 5}, None], pa.struct([("a", pa.int64())])),
            "l": pa.array([[1], [], None], pa.list_(pa.int64())),
        }
    )
    lakelog.write_table(table_path, data)
    add = next(iter(lakelog.Table(table_path).snapshot.files.values()))
    stats = orjson.loads(add.stats)
    assert stats["numRecords"] == 3
    assert stats["minValues"]["id"] == 1 and stats["maxValues"]["id"] == 3
    assert stats["minValues"]["s"] == "a" * 32 and stats["maxValues"]["s"] == "b"  # min truncated to a prefix
    assert stats["nullCount"]["s"] == 1
    assert stats["minValues"]["d"] == -2.5 and stats["maxValues"]["d"] == 1.25
    assert stats["maxValues"]["t"] == "2026-01-01T00:00:00.123456"
    assert stats["minValues"]["st"] == {"a": 1} and stats["nullCount"]["st"] == {"a": 1}
    assert "l" not in stats["nullCount"]
    lakelog.write_table(table_path + "_long", pa.table({"s": ["a", "z" * 40]}))
    long_stats = orjson.loads(next(iter(lakelog.Table(table_path + "_long").snapshot.files.values())).stats)
    # A truncated max must still bound the values: its last kept character is incremented.
    assert long_stats["minValues"]["s"] == "a" and long_stats["maxValues"]["s"] == "z" * 31 + "{"
    p = lakelog.Table(table_path).protocol
    assert (p.min_reader_version, p.min_writer_version) == (3, 7) and p.reader_features == ["timestampNtz"]


def test_filters_as_expressions_and_columns(table_path):
    for i in range(4):
        lakelog.write_table(table_path, pa.table({"id": list(range(i * 10, i * 10 + 10)), "g": [f"g{i}"] * 10}), partition_by=["g"])
    t = lakelog.Table(table_path)
    assert len(t.files(filters=pc.field("id") >= 35)) == 1
    assert len(t.files(filters=(pc.field("id") < 5) | (pc.field("g") == "g3"))) == 2
    got = t.to_pyarrow(columns=["id"], filters=pc.field("id").isin([3, 38]))
    assert got.column_names == ["id"] and _ids(got) == [3, 38]
    assert _ids(t.to_pyarrow(filters=[[("g", "=", "g1")], [("id", "<", 2)]])) == [0, 1, *range(10, 20)]
    with pytest.raises(SchemaMismatchError):
        t.to_pyarrow(columns=["missing"])
    with pytest.raises(SchemaMismatchError):
        t.to_pyarrow(filters=[("missing", "=", 1)])


def test_stats_pruning_keeps_rows_with_nulls(table_path):
    lakelog.write_table(table_path, pa.table({"id": [1, 2], "x": pa.array([5, None], pa.int64())}))
    lakelog.write_table(table_path, pa.table({"id": [3], "x": pa.array([None], pa.int64())}))
    lakelog.write_table(table_path, pa.table({"id": [4], "x": pa.array([50], pa.int64())}))
    t = lakelog.Table(table_path)
    assert _ids(t.to_pyarrow(filters=pc.field("x").is_null())) == [2, 3]
    assert len(t.files(filters=pc.field("x").is_null())) == 2
    assert _ids(t.to_pyarrow(filters=pc.field("x") > 0)) == [1, 4]
    assert len(t.files(filters=[("x", ">", 10)])) == 1
    assert _ids(t.to_pyarrow(filters=~(pc.field("x") == 5))) == [4]


def test_pyarrow_dataset_has_partition_columns(table_path):
    lakelog.write_table(table_path, pa.table({"id": [1, 2], "p": pa.array([dt.date(2026, 1, 1), None], pa.date32())}), partition_by=["p"])
    dset = lakelog.Table(table_path).to_pyarrow_dataset()
    assert isinstance(dset, ds.Dataset)
    assert dset.schema.names == ["id", "p"]
    got = dset.to_table(filter=pc.field("p").is_null()).to_pylist()
    assert got == [{"id": 2, "p": None}]
    assert dset.count_rows() == 2


def test_refresh_reads_only_new_commits(table_path):
    lakelog.write_table(table_path, pa.table({"id": [1]}))
    ops = []
    t = lakelog.Table(table_path, storage_options={"lakelog.fault_injector": lambda op, path: ops.append((op, os.path.basename(path)))})
    lakelog.write_table(table_path, pa.table({"id": [2]}))
    lakelog.write_table(table_path, pa.table({"id": [3]}), mode="overwrite")
    assert t.version == 0
    ops.clear()
    assert t.refresh().version == 2
    # One listing, then one bulk read that starts at the first new commit: version 0 is not read again.
    assert ops == [("list_dir", "_delta_log"), ("read_many", f"{1:020d}.json")]
    assert _ids(t.to_pyarrow()) == [3]
    ops.clear()
    assert t.refresh().version == 2 and ops == [("list_dir", "_delta_log")]  # nothing new: nothing read
    assert _ids(t.to_pyarrow()) == [3]


def test_refresh_after_a_checkpoint_does_not_reread_it(table_path):
    for i in range(11):
        lakelog.write_table(table_path, pa.table({"id": [i]}))
    ops = []
    t = lakelog.Table(table_path, storage_options={"lakelog.fault_injector": lambda op, path: ops.append((op, os.path.basename(path)))})
    assert [op for op, _ in ops] == ["list_dir", "read"]  # the listing and the checksum file: the checkpoint is read on first use
    t.files()
    assert ("open_input", f"{10:020d}.checkpoint.parquet") in ops
    lakelog.write_table(table_path, pa.table({"id": [11]}))
    lakelog.write_table(table_path, pa.table({"id": [12]}))
    ops.clear()
    assert t.refresh().version == 12
    assert [op for op, _ in ops] == ["list_dir", "read_many"]  # one listing, one bulk read of the new commits
    assert ops[1][1] == f"{11:020d}.json"
    assert _ids(t.to_pyarrow()) == list(range(13))
    assert t.snapshot.file_set.base is not None and len(t.snapshot.file_set.changes) == 2


def test_empty_write_creates_table_with_schema(table_path):
    v = lakelog.write_table(table_path, pa.table({"id": pa.array([], pa.int64()), "s": pa.array([], pa.string())}))
    t = lakelog.Table(table_path)
    assert v == 0 and t.files() == [] and t.to_pyarrow().num_rows == 0
    assert t.to_pyarrow().schema.names == ["id", "s"]


def test_rows_land_in_their_own_partition_with_nulls_in_the_keys(table_path):
    # Regression: groups of (null, a) and (null, b) must not be merged or swapped.
    data = pa.table({
        "id": [0, 1, 2, 3, 4, 5],
        "ps": ["", "", " ", None, "b", " "],
        "pd": pa.array([None, None, None, dt.date(2000, 1, 1), None, dt.date(2000, 1, 1)]),
    })
    lakelog.write_table(table_path, data, partition_by=["pd", "ps"])
    got = lakelog.read_table(table_path).sort_by("id").to_pylist()
    assert [(r["ps"], r["pd"]) for r in got] == [
        (None, None), (None, None), (" ", None), (None, dt.date(2000, 1, 1)), ("b", None), (" ", dt.date(2000, 1, 1)),
    ]
    t = lakelog.Table(table_path)
    assert sorted(t.snapshot.files[p].partition_values["ps"] or "-" for p in t.files()) == [" ", " ", "-", "-", "b"]


def test_date_and_timestamp_stats_have_four_digit_years(table_path):
    """Stats before year 1000 are zero-padded (strftime's %Y is not): deltalake prunes by them correctly."""
    utc = dt.timezone.utc
    begin = dt.datetime(1, 1, 1, tzinfo=utc)
    lakelog.write_table(table_path, pa.table({"id": [0], "valid_from": pa.array([begin], pa.timestamp("us", tz="UTC")),
                                              "tn": pa.array([dt.datetime(999, 12, 31, 23, 59, 59, 999999)], pa.timestamp("us")),
                                              "d": pa.array([dt.date(1, 1, 1)], pa.date32())}))
    lakelog.write_table(table_path, pa.table({"id": [1], "valid_from": pa.array([dt.datetime(2020, 1, 1, tzinfo=utc)], pa.timestamp("us", tz="UTC")),
                                              "tn": pa.array([dt.datetime(2020, 1, 1)], pa.timestamp("us")), "d": pa.array([dt.date(2020, 1, 1)], pa.date32())}))
    first = min(lakelog.Table(table_path).snapshot.files.values(), key=lambda a: orjson.loads(a.stats)["minValues"]["d"])
    stats = orjson.loads(first.stats)
    assert stats["minValues"] == {"id": 0, "valid_from": "0001-01-01T00:00:00.000000Z", "tn": "0999-12-31T23:59:59.999999", "d": "0001-01-01"}
    deltalake = pytest.importorskip("deltalake")
    for filters in ([("valid_from", "<", dt.datetime(2000, 1, 1, tzinfo=utc))], [("tn", "<", dt.datetime(1000, 1, 1))], [("d", "<", dt.date(2000, 1, 1))]):
        assert _ids(deltalake.DeltaTable(table_path).to_pyarrow_table(filters=filters)) == [0], filters
        assert _ids(lakelog.read_table(table_path, filters=filters)) == [0], filters


def test_timestamps_past_year_9999_get_no_bounds(table_path):
    """Arrow holds timestamps and dates past 9999; their stats bound cannot be written, so it is left out."""
    far = pa.array([253402300800000000 * 2], pa.timestamp("us"))  # year ~17000
    lakelog.write_table(table_path, pa.table({"id": [0], "t": far, "d": pa.array([3_000_000], pa.date32())}))
    stats = orjson.loads(next(iter(lakelog.Table(table_path).snapshot.files.values())).stats)
    assert "t" not in stats["minValues"] and "d" not in stats["maxValues"] and stats["nullCount"]["t"] == 0
    assert lakelog.read_table(table_path, filters=[("t", ">", dt.datetime(2000, 1, 1))]).num_rows == 1


@pytest.mark.parametrize("bad", [1.7, 2.0, "10", True, False, -1, None, 2**63, b"1"])
def test_app_version_must_be_a_non_negative_int(table_path, bad):
    data = pa.table({"id": [1]})
    lakelog.write_table(table_path, data, app_id="app", app_version=1)
    with pytest.raises(InvalidArgumentError, match="app_version") as e:
        lakelog.write_table(table_path, data, app_id="app", app_version=bad)
    assert isinstance(e.value, ValueError)
    t = lakelog.Table(table_path)
    assert t.version == 0 and t.snapshot.txns["app"].version == 1


def test_app_version_accepts_integral_types_and_skips_replays(table_path):
    np = pytest.importorskip("numpy")
    data = pa.table({"id": [1]})
    assert lakelog.write_table(table_path, data, app_id="app", app_version=np.int64(10)) == 0
    assert lakelog.write_table(table_path, data, app_id="app", app_version=9) == 0  # a replay: skipped
    assert lakelog.write_table(table_path, data, app_id="app", app_version=10) == 0
    assert lakelog.write_table(table_path, data, app_id="app", app_version=11) == 1
    assert lakelog.read_table(table_path).num_rows == 2
    with pytest.raises(InvalidArgumentError, match="app_id"):
        lakelog.write_table(table_path, data, app_id="", app_version=12)
    with pytest.raises(InvalidArgumentError, match="together"):
        lakelog.write_table(table_path, data, app_version=12)


def test_plan_commit_with_a_bad_app_version_deletes_its_files(table_path):
    data = pa.table({"id": [1]})
    plan = lakelog.plan_write(table_path, data.schema)
    adds = plan.write(data)
    assert all(os.path.exists(os.path.join(table_path, a.relative_path)) for a in adds)
    with pytest.raises(InvalidArgumentError):
        plan.commit(adds, app_id="app", app_version=1.5)
    assert not any(os.path.exists(os.path.join(table_path, a.relative_path)) for a in adds)


def test_parse_app_version_from_text():
    assert parse_app_version("10") == 10
    assert parse_app_version(" 7 ") == 7
    for bad in ["1.7", "-1", "ten", "", "1e3", "0x10", "١٢"]:
        with pytest.raises(InvalidArgumentError, match="txnVersion"):
            parse_app_version(bad)


# ---------------------------------------------------------------- pandas indexes


def _deltalake_columns(path):
    deltalake = pytest.importorskip("deltalake")
    return deltalake.DeltaTable(path).to_pyarrow_table().column_names


def test_named_pandas_index_is_kept_as_a_column_like_deltalake(tmp_path):
    deltalake = pytest.importorskip("deltalake")
    df = pd.DataFrame({"day": ["mon", "tue", "mon"], "amt": [1, 2, 3]})
    summed = df.groupby("day").sum()
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    lakelog.write_table(ours, summed)
    deltalake.write_deltalake(theirs, summed)
    assert lakelog.Table(ours).schema.names == _deltalake_columns(theirs) == ["amt", "day"]
    assert sorted(lakelog.read_table(ours).to_pylist(), key=repr) == [{"amt": 2, "day": "tue"}, {"amt": 4, "day": "mon"}]
    lakelog.write_table(ours, summed)  # and it appends like any column
    assert lakelog.read_table(ours, filters=[("day", "=", "mon")]).column("amt").to_pylist() == [4, 4]


def test_multiindex_levels_are_kept_and_unnamed_indexes_dropped(table_path):
    df = pd.DataFrame({"k": ["a", "a", "b"], "ts": pd.to_datetime(["2024-01-01", "2024-01-02", "2024-01-01"]), "v": [1.0, 2.0, 3.0]})
    lakelog.write_table(table_path, df.set_index(["k", "ts"]))
    assert lakelog.Table(table_path).schema.names == ["v", "k", "ts"]
    assert lakelog.read_table(table_path).num_rows == 3
    # An unnamed index (RangeIndex, or a filtered or sorted frame's labels) holds no user data: dropped,
    # so appending a filtered frame works (deltalake would add '__index_level_0__').
    lakelog.write_table(table_path, df.set_index(["k", "ts"]).reset_index().iloc[[2, 0]].set_index(["k", "ts"]))
    partly = df.set_index(["k", pd.Index([7, 8, 9])])
    lakelog.write_table(table_path, partly.drop(columns=["ts"]))
    t = lakelog.Table(table_path)
    assert t.schema.names == ["v", "k", "ts"] and t.to_pyarrow().num_rows == 8


def test_unnamed_non_range_index_is_dropped(table_path):
    df = pd.DataFrame({"id": [1, 2, 3]})
    lakelog.write_table(table_path, df)
    lakelog.write_table(table_path, df[df.id > 1])
    assert lakelog.Table(table_path).schema.names == ["id"]
    assert sorted(lakelog.read_table(table_path).column("id").to_pylist()) == [1, 2, 2, 3, 3]


def test_index_level_named_like_a_column_is_refused(table_path):
    df = pd.DataFrame({"day": [1], "x": [2]}).set_index(pd.Index(["a"], name="day"))
    with pytest.raises(SchemaMismatchError, match="index level 'day'"):
        lakelog.write_table(table_path, df)
    assert not os.path.exists(table_path)


# ---------------------------------------------------------------- many partitions, few file descriptors

_LOW_FD_CHILD = r"""
import os, resource, sys
import pyarrow as pa
import lakelog
from lakelog.write import files as lw

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
path, mode = sys.argv[1], sys.argv[2]
n = 3000
if mode == "one-batch":
    lakelog.write_table(path, pa.table({"p": pa.array(range(n), pa.int64()), "v": pa.array(range(n), pa.int64())}), partition_by=["p"])
else:
    # Many batches that each touch every partition, with a small memory budget: buffers spill to files,
    # least recently written files are finished and their partitions continue in new files.
    lw.MAX_BUFFERED_BYTES = 64 * 1024
    batches = [pa.record_batch({"p": pa.array(range(n), pa.int64()), "v": pa.array([i] * n, pa.int64())}) for i in range(4)]
    plan = lakelog.plan_write(path, batches[0].schema, partition_by=["p"])
    adds = plan.write(iter(batches))
    print("files", len(adds))
    plan.commit(adds)
t = lakelog.read_table(path)
print("rows", t.num_rows, "fds", len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else -1)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs resource limits (POSIX)")
@pytest.mark.parametrize("mode", ["one-batch", "many-batches"])
def test_more_partitions_than_open_files_allowed(table_path, mode):
    import subprocess
    import sys

    deltalake = pytest.importorskip("deltalake")
    r = subprocess.run([sys.executable, "-c", _LOW_FD_CHILD, table_path, mode], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = 3000 if mode == "one-batch" else 4 * 3000
    assert f"rows {rows}" in r.stdout
    t = lakelog.Table(table_path)
    assert len(t.snapshot.partition_columns) == 1 and len({a.partition_values["p"] for a in t.snapshot.files.values()}) == 3000
    if mode == "many-batches":
        assert int(r.stdout.split("files ")[1].split()[0]) > 3000  # some partitions continued in a second file
    got = t.to_pyarrow().sort_by([("p", "ascending"), ("v", "ascending")])
    assert got.equals(deltalake.DeltaTable(table_path).to_pyarrow_table().select(got.column_names).sort_by([("p", "ascending"), ("v", "ascending")]))
    assert got.column("p").to_pylist() == sorted(list(range(3000)) * (rows // 3000))


def test_writer_keeps_at_most_max_open_files(tmp_path):
    from lakelog.storage import Storage
    from lakelog.write import DataWriter

    schema = pa.schema([("p", pa.int64()), ("v", pa.int64())])
    w = DataWriter(Storage(str(tmp_path)), schema, ["p"], max_open_files=3, max_buffered_bytes=1)
    peak = 0
    for i in range(5):
        w.write(pa.record_batch({"p": pa.array(range(10), pa.int64()), "v": pa.array([i] * 10, pa.int64())}))
        peak = max(peak, w.open_files)
    adds = w.finish()
    assert peak == 3 and w.open_files == 0
    assert sum(a.num_records() for a in adds) == 50 and {a.partition_values["p"] for a in adds} == {str(i) for i in range(10)}
    assert len(adds) > 10


@pytest.mark.parametrize("value, t", [("", pa.string()), (b"", pa.binary())])
def test_empty_value_in_a_non_nullable_partition_column_is_refused(table_path, value, t):
    schema = pa.schema([pa.field("p", t, False), pa.field("v", pa.int64())])
    data = pa.table({"p": pa.array([value, value[:0] + (b"x" if isinstance(value, bytes) else "x")], t), "v": [1, 2]}, schema=schema)
    with pytest.raises(SchemaMismatchError, match="partition column 'p' is not nullable.*empty"):
        lakelog.write_table(table_path, data, partition_by=["p"])
    assert not os.path.exists(table_path) or not [f for f in os.listdir(table_path) if f != "_delta_log"]


def test_years_before_1000_are_zero_padded_in_stats_and_partition_values(table_path):
    deltalake = pytest.importorskip("deltalake")
    utc = dt.timezone.utc
    data = pa.table({
        "p": pa.array([dt.datetime(1, 1, 1, tzinfo=utc), dt.datetime(999, 12, 31, 23, 59, 59, 999999, tzinfo=utc)], pa.timestamp("us", "UTC")),
        "ts": pa.array([dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)], pa.timestamp("us")),
    })
    lakelog.write_table(table_path, data, partition_by=["p"])
    adds = sorted(lakelog.Table(table_path).snapshot.files.values(), key=lambda a: a.partition_values["p"])
    assert [a.partition_values["p"] for a in adds] == ["0001-01-01T00:00:00.000000Z", "0999-12-31T23:59:59.999999Z"]
    assert orjson.loads(adds[0].stats)["minValues"]["ts"] == "0001-01-01T00:00:00.000000"
    assert lakelog.read_table(table_path).sort_by("ts").to_pylist() == data.to_pylist()
    assert deltalake.DeltaTable(table_path).to_pyarrow_table().num_rows == 2

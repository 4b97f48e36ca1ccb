"""Classic checkpoints: written every ``delta.checkpointInterval`` commits and on request, read instead of
the commits they cover, by lakelog and by deltalake. The explicit checkpoint and the reconciliation of
checkpoint rows with later commits also run on S3, Azure and GCS."""

import os
from urllib.parse import unquote

import deltalake
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakelog
from lakelog.errors import CorruptLogError, VersionNotFoundError
from tests.table_files import move, remove_commits


def _rows(i, n=3):
    return pa.table({"id": pa.array(range(i * 100, i * 100 + n), pa.int64()), "v": pa.array([f"r{i}"] * n)})


def _log(path):
    return os.path.join(path, "_delta_log")


def test_checkpoint_and_last_checkpoint_after_ten_commits(table_path):
    for i in range(11):
        lakelog.write_table(table_path, _rows(i))
    names = sorted(os.listdir(_log(table_path)))
    assert "00000000000000000010.checkpoint.parquet" in names
    hint = orjson.loads(open(os.path.join(_log(table_path), "_last_checkpoint"), "rb").read())
    assert hint["version"] == 10
    assert hint["numOfAddFiles"] == 11
    cp = pq.read_table(os.path.join(_log(table_path), "00000000000000000010.checkpoint.parquet"))
    assert set(cp.column_names) == {"txn", "add", "remove", "metaData", "protocol"}
    assert cp.column("add").drop_null().length() == 11
    assert pa.types.is_map(cp.schema.field("add").type.field("partitionValues").type)


def test_snapshot_reads_checkpoint_and_only_later_commits(table_path):
    for i in range(13):
        lakelog.write_table(table_path, _rows(i))
    expected = lakelog.read_table(table_path).sort_by("id")
    # Without the commits the checkpoint covers, the latest version must still be readable.
    for v in range(0, 11):
        os.remove(os.path.join(_log(table_path), f"{v:020d}.json"))
    t = lakelog.Table(table_path)
    assert t.version == 12
    assert t.to_pyarrow().sort_by("id").equals(expected)
    assert lakelog.read_table(table_path, version=10).num_rows == 33
    with pytest.raises(VersionNotFoundError):
        lakelog.Table(table_path, version=5)


def test_checkpoint_interval_from_configuration(table_path):
    for i in range(7):
        lakelog.write_table(table_path, _rows(i), configuration={"delta.checkpointInterval": "3"} if i == 0 else None)
    names = set(os.listdir(_log(table_path)))
    assert {f"{v:020d}.checkpoint.parquet" for v in (3, 6)} <= names
    assert f"{9:020d}.checkpoint.parquet" not in names


def test_explicit_checkpoint_keeps_partitions_txns_and_tombstones(backend):
    table_path = backend.uri
    data = pa.table({"id": [1, 2, 3], "p": ["a", None, "c"]})
    lakelog.write_table(table_path, data, partition_by=["p"], app_id="app", app_version=7)
    lakelog.write_table(table_path, data.slice(0, 1), mode="overwrite")
    t = lakelog.Table(table_path)
    assert t.checkpoint() == 1
    remove_commits(table_path, (0, 1))
    t2 = lakelog.Table(table_path)
    assert t2.snapshot.txns["app"].version == 7
    assert len(t2.snapshot.tombstones) == 3
    assert t2.to_pyarrow().to_pylist() == [{"id": 1, "p": "a"}]
    assert lakelog.write_table(table_path, data, app_id="app", app_version=7) == 1  # still idempotent


def test_unreadable_checkpoint_falls_back_to_json_replay(table_path):
    for i in range(11):
        lakelog.write_table(table_path, _rows(i))
    with open(os.path.join(_log(table_path), f"{10:020d}.checkpoint.parquet"), "wb") as f:
        f.write(b"PAR1 not really parquet")
    with pytest.warns(UserWarning, match="unusable checkpoint"):
        t = lakelog.Table(table_path)
        t.files()  # the checksum file gives the protocol and metadata: the checkpoint is read on first use of the files
    assert t.version == 10 and t.to_pyarrow().num_rows == 33


def test_deltalake_reads_lakelog_checkpoint_without_json(table_path):
    for i in range(12):
        lakelog.write_table(table_path, _rows(i))
    for v in range(0, 10):
        os.remove(os.path.join(_log(table_path), f"{v:020d}.json"))
    got = deltalake.DeltaTable(table_path).to_pyarrow_table().sort_by("id")
    assert got.num_rows == 36
    assert got.column("id").to_pylist() == lakelog.read_table(table_path).sort_by("id").column("id").to_pylist()


def _add_keys(snapshot):
    return {p: (a.path, a.size, a.partition_values, a.stats) for p, a in snapshot.files.items()}


def test_checkpoint_rows_and_later_commits_reconcile(backend):
    """Files from a checkpoint (kept as Arrow rows) and from later commits combine as a full JSON replay
    does: removes of checkpoint rows, re-adds, overwrites, and a checkpoint written from such a state."""
    table_path = backend.uri
    for i in range(4):
        lakelog.write_table(table_path, _rows(i).append_column("p", pa.array(["a b", "c%d", None if i % 2 else "é"])), partition_by=["p"],
                            configuration={"delta.checkpointInterval": "100"} if i == 0 else None)
    t = lakelog.Table(table_path)
    assert t.checkpoint() == 3
    first = sorted(t.files())[0]
    t.optimize()  # removes checkpoint rows, adds new files (dataChange=false)
    lakelog.write_table(table_path, _rows(9).append_column("p", pa.array(["a b"] * 3)), partition_by=["p"])
    t = lakelog.Table(table_path)
    assert t.snapshot.file_set.base is not None and t.snapshot.file_set.changes
    assert first not in t.files()
    # The same state rebuilt from JSON only.
    move(table_path, f"_delta_log/{3:020d}.checkpoint.parquet", "cp.bak")
    replayed = lakelog.Table(table_path).snapshot
    assert replayed.file_set.base is None
    assert sorted(t.files()) == sorted(replayed.file_paths()) == sorted(replayed.files)
    assert len(t.snapshot.file_set) == len(replayed.files)
    assert _add_keys(t.snapshot) == _add_keys(replayed)
    move(table_path, "cp.bak", f"_delta_log/{3:020d}.checkpoint.parquet")
    # A checkpoint written from checkpoint rows + changes, read by lakelog alone and by deltalake.
    latest = lakelog.Table(table_path)
    assert latest.checkpoint() == latest.version
    remove_commits(table_path, range(latest.version))
    again = lakelog.Table(table_path)
    assert _add_keys(again.snapshot) == _add_keys(replayed)
    assert again.to_pyarrow().sort_by("id").equals(latest.to_pyarrow().sort_by("id"))
    dl = backend.deltalake_table()
    # deltalake names a local file by its path and an object store's by a URL (a scheme, %-escapes, but a
    # '%' of the key itself left as it is): compared unescaped, without the scheme
    uris = [unquote(u.split("://", 1)[-1]) for u in dl.file_uris()]
    assert sorted(uris) == sorted(unquote(again.storage.join(p)) for p in again.files())
    assert dl.to_pyarrow_table().num_rows == again.to_pyarrow().num_rows


@pytest.mark.filterwarnings("ignore:lakelog. skipping unusable checkpoint")
def test_checkpoint_naming_a_path_twice_is_malformed(table_path):
    """Two add rows for one file: delta-rs reads the file twice, lakelog used to keep the last row. The
    checkpoint is malformed: readers fall back to the JSON commits, or fail when they are gone."""
    lakelog.write_table(table_path, _rows(0))
    lakelog.write_table(table_path, _rows(1))
    lakelog.Table(table_path).checkpoint()
    cp_path = os.path.join(_log(table_path), f"{1:020d}.checkpoint.parquet")
    cp = pq.read_table(cp_path)
    adds = cp.filter(pa.compute.is_valid(cp.column("add")))
    dup = adds.slice(0, 1)
    pq.write_table(pa.concat_tables([cp, dup]), cp_path)
    t = lakelog.Table(table_path)  # a duplicate add row is found when the checkpoint is read: on first use of the files
    with pytest.warns(UserWarning, match="two add rows"):
        assert t.snapshot.file_set.base is None  # replayed from the JSON commits
    assert len(t.files()) == 2 and t.to_pyarrow().num_rows == 6
    assert [p.kind for p in t.check().problems] == ["unreadable_checkpoint"]
    for v in (0, 1):
        os.remove(os.path.join(_log(table_path), f"{v:020d}.json"))
    t = lakelog.Table(table_path)
    with pytest.raises(CorruptLogError, match="two add rows"):
        t.files()


@pytest.mark.filterwarnings("ignore:lakelog. skipping unusable checkpoint")
def test_checkpoint_tombstones_stay_out_of_the_file_changes(table_path):
    data = pa.table({"id": [1, 2, 3], "p": ["a", "b", "c"]})
    lakelog.write_table(table_path, data, partition_by=["p"])
    lakelog.write_table(table_path, data.slice(0, 1), mode="overwrite")
    lakelog.Table(table_path).checkpoint()
    t = lakelog.Table(table_path)
    assert len(t.snapshot.tombstones) == 3 and t.snapshot.file_set.changes == {}
    assert len(t.files()) == 1 and t.snapshot.num_files == 1
    # A checkpoint that names a path in both an add and a remove row is malformed (delta-rs keeps the
    # file, lakelog used to drop it): without JSON commits to fall back to, it is a typed error.
    cp_path = os.path.join(_log(table_path), f"{1:020d}.checkpoint.parquet")
    cp = pq.read_table(cp_path)
    live = t.snapshot.files[t.files()[0]]
    removed = pa.table({"remove": pa.array([{"path": live.path, "deletionTimestamp": 1, "dataChange": False}], cp.schema.field("remove").type)})
    extra = pa.table({name: (removed.column("remove") if name == "remove" else pa.nulls(1, cp.schema.field(name).type)) for name in cp.column_names}, schema=cp.schema)
    pq.write_table(pa.concat_tables([cp, extra]), cp_path)
    for v in (0, 1):
        os.remove(os.path.join(_log(table_path), f"{v:020d}.json"))
    with pytest.raises(CorruptLogError, match="both an add and a remove row"):
        lakelog.Table(table_path).files()  # found when the checkpoint is read, on first use of the files


@pytest.mark.filterwarnings("ignore:lakelog. skipping unusable checkpoint")
def test_checkpoint_with_wrongly_typed_stats_is_skipped_when_the_checkpoint_is_read(table_path):
    """The add rows' stats are decoded when first needed, but a stats field of the wrong type makes the
    checkpoint unusable when the checkpoint is read, as every other wrongly typed field does (the fallback
    to the JSON commits happens then, at the first use of the files, not at the first filtered read)."""
    lakelog.write_table(table_path, _rows(0))
    lakelog.write_table(table_path, _rows(1))
    lakelog.Table(table_path).checkpoint()
    cp_path = os.path.join(_log(table_path), f"{1:020d}.checkpoint.parquet")
    cp = pq.read_table(cp_path)
    add = cp.column("add").combine_chunks()
    i = add.type.get_field_index("stats")
    bad = pa.array([{"n": 1}] * len(add), pa.struct([("n", pa.int64())]))
    fields = [add.type.field(k) if k != i else pa.field("stats", bad.type) for k in range(add.type.num_fields)]
    children = [add.field(k) if k != i else bad for k in range(add.type.num_fields)]
    fixed = pa.StructArray.from_arrays(children, fields=fields, mask=add.is_null())
    pq.write_table(cp.set_column(cp.schema.get_field_index("add"), "add", fixed), cp_path)
    t = lakelog.Table(table_path)
    with pytest.warns(UserWarning, match="skipping unusable checkpoint"):
        t.files()  # the checkpoint is read on first use of the files (a checksum file gave the metadata)
    assert t.snapshot.file_set.base is None  # replayed from the JSON commits
    assert t.to_pyarrow(filters=[("id", ">=", 0)]).num_rows == 6

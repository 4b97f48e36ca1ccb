"""Checkpoints are read a few row groups at a time and their add rows kept as they were read (sliced where
they form one run, filtered where they do not): whatever the order of the rows, their row groups and parts,
the snapshot is the same, and every check on the rows still holds across row groups and parts. Each test
runs twice: small row groups read together (the default), and each read alone (as a checkpoint whose row
groups exceed the rows read at once is)."""

import glob
import os
import random
import subprocess
import sys
import warnings

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lakelog
from lakelog.log.checkpoint import read as checkpoint_read
from lakelog.log.checkpoint import read_checkpoint_state
from lakelog.errors import CorruptLogError
from lakelog.storage import Storage


@pytest.fixture(autouse=True, params=["together", "alone"])
def read_rows(request, monkeypatch):
    if request.param == "alone":
        monkeypatch.setattr(checkpoint_read, "READ_ROWS", 1)
    return request.param


def _log(path):
    return os.path.join(path, "_delta_log")


def _cp_name(v):
    return f"{v:020d}.checkpoint.parquet"


def _table(path) -> int:
    """12 commits of a table partitioned by a string with characters its paths escape, two files
    deleted; checkpointed at the last version, whose number is returned."""
    for i in range(12):
        data = pa.table({"id": pa.array(range(i * 10, i * 10 + 3), pa.int64()), "p": pa.array([f"a b:{i % 3}"] * 3)})
        lakelog.write_table(path, data, partition_by=["p"])
    t = lakelog.Table(path)
    t.delete("id = 0 or id = 50")  # removes in the checkpoint
    t = lakelog.Table(path)
    t.checkpoint()
    return t.version


def _rewrite(path, version, order, row_group_size, parts=1):
    """Rewrite the checkpoint of ``version`` with its rows in ``order`` (row indexes), ``parts`` files
    (a multi-part checkpoint when more than one), ``row_group_size`` rows per row group."""
    src = os.path.join(_log(path), _cp_name(version))
    table = pq.read_table(src).take(pa.array(order))
    os.remove(src)
    if parts == 1:
        pq.write_table(table, src, row_group_size=row_group_size)
        return
    step = -(-table.num_rows // parts)
    for i in range(parts):
        name = f"{version:020d}.checkpoint.{i + 1:010d}.{parts:010d}.parquet"
        pq.write_table(table.slice(i * step, step), os.path.join(_log(path), name), row_group_size=row_group_size)
    hint = os.path.join(_log(path), "_last_checkpoint")
    if os.path.exists(hint):
        os.remove(hint)


def _drop_commits(path, upto):
    """Only the checkpoint can give the state now (a checkpoint lakelog could not read would be an error)."""
    for v in range(upto + 1):
        name = os.path.join(_log(path), f"{v:020d}.json")
        if os.path.exists(name):
            os.remove(name)


def _deltalake_files(path):
    root = os.path.abspath(path)
    return sorted(os.path.relpath(u.removeprefix("file://"), root) for u in deltalake.DeltaTable(path).file_uris())


def _state(path):
    """The files, their number, the rows, and the files and rows a partition and a data filter keep."""
    t = lakelog.Table(path)
    return (
        sorted(t.files()),
        t.snapshot.num_files,
        t.to_pyarrow().sort_by("id").column("id").to_pylist(),
        sorted(t.files([("p", "=", "a b:1")])),
        sorted(t.files([("id", ">=", 100)])),
        t.to_pyarrow(filters=[("id", ">=", 100)]).sort_by("id").column("id").to_pylist(),
    )


def _interleaved(path, version, seed):
    """The checkpoint's rows shuffled, then ordered so that each other row sits between two add rows."""
    valid = pq.read_table(os.path.join(_log(path), _cp_name(version)), columns=["add"]).column("add").is_valid().to_pylist()
    adds = [i for i, v in enumerate(valid) if v]
    others = [i for i, v in enumerate(valid) if not v]
    random.Random(seed).shuffle(adds)
    random.Random(seed).shuffle(others)
    order = []
    for k, a in enumerate(adds):
        order.append(a)
        if k % 2 and others:
            order.append(others.pop())
    return order + others


def _adds_are_split(path, version):
    """Whether some row group of the checkpoint holds add rows that are not one run."""
    for f in glob.glob(os.path.join(_log(path), f"{version:020d}.checkpoint*.parquet")):
        pf = pq.ParquetFile(f)
        for i in range(pf.num_row_groups):
            valid = pf.read_row_group(i, columns=["add"]).column("add").is_valid().to_pylist()
            runs = sum(1 for j, v in enumerate(valid) if v and (j == 0 or not valid[j - 1]))
            if runs > 1:
                return True
    return False


@pytest.mark.parametrize("parts", [1, 3])
def test_rows_in_any_order_row_groups_and_parts_read_the_same(tmp_path, parts, read_rows):
    path = str(tmp_path / "t")
    version = _table(path)
    expected = _state(path)
    _rewrite(path, version, _interleaved(path, version, seed=parts), row_group_size=5, parts=parts)
    assert _adds_are_split(path, version)  # the filtered path, not only the sliced one
    _drop_commits(path, version)
    assert _state(path) == expected
    state = read_checkpoint_state(Storage(path), lakelog.Table(path).snapshot.listing.checkpoints[version][0])
    # one chunk per read: per row group when read alone, per part when read together
    assert state.add_rows.num_chunks > 1 if read_rows == "alone" or parts > 1 else state.add_rows.num_chunks == 1
    assert sorted(state.paths) == expected[0]
    # The paths escape ' ' and ':' as delta-rs does: both engines name the same files.
    assert _deltalake_files(path) == expected[0]
    assert expected[3] and len(expected[3]) < len(expected[0]) and expected[4] and len(expected[4]) < len(expected[0])


def test_next_checkpoint_from_a_chunked_one_keeps_the_live_rows(tmp_path):
    path = str(tmp_path / "t")
    version = _table(path)
    _rewrite(path, version, _interleaved(path, version, seed=7), row_group_size=3)
    _drop_commits(path, version)
    t = lakelog.Table(path)
    t.delete("id = 11 or id = 112")  # rows of two different row groups of the checkpoint (most likely)
    lakelog.write_table(path, pa.table({"id": pa.array([999], pa.int64()), "p": ["z"]}))
    t = lakelog.Table(path)
    expected = _state(path)
    assert len(t.snapshot.file_set) == len(t.files()) == expected[1]
    t.checkpoint()
    _drop_commits(path, t.version)
    assert _state(path) == expected
    assert _deltalake_files(path) == expected[0]


def _duplicate_row(path, version, kind):
    """Add to the checkpoint, in a row group of its own, a copy of an add row (``kind`` "add") or a
    remove row naming a live file (``kind`` "remove")."""
    src = os.path.join(_log(path), _cp_name(version))
    table = pq.read_table(src)
    adds = table.column("add").combine_chunks()
    row = next(i for i in range(len(adds)) if adds[i].is_valid)
    extra = table.slice(row, 1)
    if kind == "remove":
        add = adds[row].as_py()
        remove = {"path": add["path"], "deletionTimestamp": 1, "dataChange": True, "extendedFileMetadata": True,
                  "partitionValues": add["partitionValues"], "size": add["size"]}
        rtype = table.schema.field("remove").type
        remove = {k: v for k, v in remove.items() if rtype.get_field_index(k) >= 0}
        extra = pa.table({f.name: (pa.array([remove], f.type) if f.name == "remove" else pa.nulls(1, f.type)) for f in table.schema}, schema=table.schema)
    with pq.ParquetWriter(src + ".tmp", table.schema) as w:
        w.write_table(table, row_group_size=5)
        w.write_table(extra)
    os.replace(src + ".tmp", src)


@pytest.mark.parametrize("kind", ["add", "remove"])
def test_rows_that_conflict_across_row_groups_make_the_checkpoint_unusable(tmp_path, kind):
    path = str(tmp_path / "t")
    version = _table(path)
    expected = _state(path)
    _duplicate_row(path, version, kind)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _state(path) == expected  # JSON replay instead
    assert any("skipping unusable checkpoint" in str(w.message) for w in caught)
    _drop_commits(path, version)
    with pytest.raises(CorruptLogError, match="two add rows" if kind == "add" else "both an add and a remove"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lakelog.Table(path).files()  # the checkpoint's rows are read on first use of the files


def test_reading_a_checkpoint_and_listing_its_files_does_not_import_pandas(tmp_path):
    # pyarrow imports pandas on the first conversion of a Python list (~0.4 s of a cold load).
    path = str(tmp_path / "t")
    version = _table(path)
    code = f"""
import sys
from lakelog.log.checkpoint import read as checkpoint_read
from lakelog.log.checkpoint import read_checkpoint_state
from lakelog.log.file_set import FileSet
from lakelog.storage import Storage
state = read_checkpoint_state(Storage({path!r}), {version})
fs = FileSet(state)
first = state.paths[0]
fs.remove(first)
assert len(fs) == state.num_rows - 1 == len(fs.paths()) and first not in fs.paths()
assert 'pandas' not in sys.modules, 'pandas imported'
"""
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": os.getcwd()})


def test_duplicate_paths_are_found_when_checked_by_bucket(tmp_path, monkeypatch):
    # Large checkpoints check their paths for duplicates a bucket at a time: equal paths share a bucket.
    import lakelog.log.checkpoint.read as read

    monkeypatch.setattr(read, "DISTINCT_BUCKET_ROWS", 2)
    path = str(tmp_path / "t")
    version = _table(path)
    expected = _state(path)
    _drop_commits(path, version - 1)
    assert _state(path) == expected  # many buckets, no duplicate: read as before
    _duplicate_row(path, version, "add")
    _drop_commits(path, version)
    with pytest.raises(CorruptLogError, match="two add rows"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lakelog.Table(path).files()
    paths = pa.chunked_array([pa.array(["p=1/a", "p=2/b", "p=1/c"]), pa.array(["x", "p=2/b"]).slice(1)])
    assert not read._all_distinct(paths)
    assert read._all_distinct(paths.slice(0, 3))
    assert read._all_distinct(pa.chunked_array([pa.array(["p=1/a", "p=2/b"]), pa.array(["p=2/b", "p=3/d"]).slice(1)]))


@pytest.mark.parametrize("parts", [1, 2])
def test_stats_are_read_when_needed_from_the_checkpoint_the_snapshot_read(tmp_path, parts):
    """A load leaves the add rows' stats unread; when a filter needs them they come from the checkpoint
    the snapshot read, even after that file was rewritten with its rows in another order, or removed."""
    path = str(tmp_path / "t")
    version = _table(path)
    _rewrite(path, version, _interleaved(path, version, seed=7), row_group_size=5, parts=parts)
    _drop_commits(path, version)
    expected = _state(path)
    stats = {p: a.stats for p, a in lakelog.Table(path).snapshot.files.items()}
    t = lakelog.Table(path)
    base = t.snapshot.file_set.base
    assert base._deferred is not None and base._add_rows.type.get_field_index("stats") < 0
    assert sorted(t.files()) == expected[0] and base._deferred is not None  # listing reads no stats
    # The checkpoint rewritten with its rows reversed: stats read from it would be matched with other files.
    rows = pa.concat_tables(pq.read_table(f) for f in sorted(glob.glob(os.path.join(_log(path), f"{version:020d}.checkpoint*.parquet"))))
    for f in glob.glob(os.path.join(_log(path), f"{version:020d}.checkpoint*.parquet")):
        os.remove(f)
    pq.write_table(rows.take(pa.array(range(rows.num_rows - 1, -1, -1))), os.path.join(_log(path), _cp_name(version)), row_group_size=4)
    assert sorted(t.files([("id", ">=", 100)])) == expected[4]
    assert base._deferred is None and {p: a.stats for p, a in t.snapshot.files.items()} == stats
    assert lakelog.Table(path).snapshot.files.keys() == stats.keys()
    # Removed after the files were first used but before the stats were needed: the snapshot still has them.
    t = lakelog.Table(path)
    t.files()
    os.remove(os.path.join(_log(path), _cp_name(version)))
    assert t.to_pyarrow(filters=[("id", ">=", 100)]).sort_by("id").column("id").to_pylist() == expected[5]


_tails = st.sampled_from(["", "x", "-c000.snappy.parquet", "0" * 70 + ".parquet", "é/ü"])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["", "p=1/", "p=22/", "a/b/"]), st.text("ab0/%é", max_size=12), _tails), max_size=40),
    st.integers(0, 5),
    st.integers(0, 40),
    st.booleans(),
)
def test_the_duplicate_check_agrees_with_a_set(parts, skip, cut, long):
    # Fingerprints pick the rows to check exactly; equal paths anywhere in the chunks (sliced, short,
    # sharing their last 64 bytes or all but one byte) must still be found, and distinct ones pass.
    import lakelog.log.checkpoint.read as read

    paths = [("part-000/" if long else "") + "".join(p) for p in parts]  # long: no path under 8 bytes
    cut = min(cut, len(paths))
    chunks = [pa.array(["pad"] * skip + paths[:cut], pa.string()).slice(skip), pa.array(paths[cut:], pa.string())]
    column = pa.chunked_array(chunks, pa.string())
    assert read._all_distinct(column) == (len(set(paths)) == len(paths))

"""The streaming source's offsets and admission control, driven the way Spark drives it
(initialOffset, latestOffset(start, limit), partitions(start, end), commit), on real table logs.

Planning never opens data files, so the logs here name files that need not exist; the end-to-end
runs through Spark are in test_spark.py. The property test's default run is short and seeded;
LAKELOG_FUZZ_EXAMPLES=<n> runs n random examples.
"""

import datetime as dt
import json
import os

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakelog
from lakelog.actions import AddFile, CommitInfo
from lakelog.errors import LakelogError, VersionNotFoundError
from lakelog.log.delta_log import DeltaLog
from lakelog.storage import Storage

from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes, ReadMaxFiles

from spark_ext.datasource.stream_source import LakelogStreamReader, Position

FUZZ = int(os.environ.get("LAKELOG_FUZZ_EXAMPLES", "0") or 0)


def _new_table(path) -> None:
    """Version 0: the schema and one real file."""
    lakelog.write_table(path, pa.table({"id": pa.array([0], pa.int64())}))


def _append_fake(path, version: int, n: int, size: int = 100, data_change: bool = True) -> list[str]:
    names = [f"v{version:05d}-{i:04d}.parquet" for i in range(n)]
    adds = [AddFile(path=p, partition_values={}, size=size, modification_time=version, data_change=data_change) for p in names]
    DeltaLog(Storage(path)).write_commit(version, [CommitInfo({"operation": "WRITE"}), *adds])
    return names


def _commit(path, version: int, actions) -> None:
    DeltaLog(Storage(path)).write_commit(version, actions)


def _reader(path, **options) -> LakelogStreamReader:
    opts = CaseInsensitiveDict({"path": path, **{k: str(v) for k, v in options.items()}})
    schema = from_arrow_schema(lakelog.Table(path).schema, prefer_timestamp_ntz=True)
    return LakelogStreamReader(opts, schema)


def _run(reader, start, limit=None, max_batches=10_000):
    """Micro-batches as Spark plans them until no new data: (end offset, [file paths]) per batch."""
    limit = limit if limit is not None else reader.getDefaultReadLimit()
    batches = []
    for _ in range(max_batches):
        end = json.loads(json.dumps(reader.latestOffset(start, limit)))  # offsets live as JSON in the checkpoint
        if end == start:
            return batches
        files = [f["path"] for p in reader.partitions(start, end) for f in p.files]
        batches.append((end, files))
        reader.commit(end)
        start = end
    raise AssertionError("the stream did not reach the end")


def test_backlog_of_10000_files_becomes_bounded_batches_across_a_restart(tmp_path):
    path = str(tmp_path / "t")
    _new_table(path)
    expected = []
    for v in range(1, 101):
        expected += _append_fake(path, v, 100)
    reader = _reader(path, startingVersion=1)
    start = reader.initialOffset()
    assert reader.getDefaultReadLimit() == ReadMaxFiles(1000)  # Delta's default
    # Run four batches, then "restart": a new reader continues from the last checkpointed offset.
    batches = []
    for _ in range(4):
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        batches.append((end, [f["path"] for p in reader.partitions(start, end) for f in p.files]))
        start = end
    restarted = _reader(path, startingVersion=1)
    batches += _run(restarted, json.loads(json.dumps(start)))
    sizes = [len(files) for _, files in batches]
    assert sizes == [1000] * 10
    assert [f for _, files in batches for f in files] == expected  # each file once, in log order


def test_spark_replays_a_batch_from_its_offsets(tmp_path):
    path = str(tmp_path / "t")
    _new_table(path)
    for v in range(1, 6):
        _append_fake(path, v, 3)
    reader = _reader(path, startingVersion=1, maxFilesPerTrigger=4)
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert end == {"version": 2, "index": 1, "snapshot": False}  # 3 files of v1 and the first of v2
    planned = [f["path"] for p in reader.partitions(start, end) for f in p.files]
    # after a crash the batch is planned again from the offset log, by a new reader
    again = [f["path"] for p in _reader(path, startingVersion=1).partitions(start, end) for f in p.files]
    assert planned == again == ["v00001-0000.parquet", "v00001-0001.parquet", "v00001-0002.parquet", "v00002-0000.parquet"]


def test_initial_snapshot_is_split_too_and_new_versions_follow(tmp_path):
    path = str(tmp_path / "t")
    _new_table(path)
    snap = [lakelog.Table(path).files()[0]]
    for v in range(1, 4):
        snap += _append_fake(path, v, 2)
    reader = _reader(path, maxFilesPerTrigger=3)
    start = reader.initialOffset()
    assert start == {"version": 3, "index": 0, "snapshot": True}
    batches = _run(reader, start)
    assert [len(f) for _, f in batches] == [3, 3, 1]
    assert sorted(f for _, fs in batches for f in fs) == sorted(snap)
    assert batches[-1][0] == {"version": 4, "index": 0, "snapshot": False}
    later = _append_fake(path, 4, 2)
    assert _run(reader, batches[-1][0]) == [({"version": 5, "index": 0, "snapshot": False}, later)]


def test_max_bytes_is_a_soft_limit_and_combines_with_max_files(tmp_path):
    path = str(tmp_path / "t")
    _new_table(path)
    _append_fake(path, 1, 10, size=100)
    _append_fake(path, 2, 1, size=10_000)  # bigger than the limit: still admitted, alone
    _append_fake(path, 3, 10, size=100)
    only_bytes = _reader(path, startingVersion=1, maxBytesPerTrigger=250)
    assert only_bytes.getDefaultReadLimit() == ReadMaxBytes(250)
    sizes = [len(f) for _, f in _run(only_bytes, only_bytes.initialOffset())]
    assert sizes == [3, 3, 3, 2, 3, 3, 3, 1]  # 3 x 100 bytes reach 250; the big file ends one batch
    both = _reader(path, startingVersion=1, maxBytesPerTrigger="1k", maxFilesPerTrigger=2)
    assert both.getDefaultReadLimit() == ReadMaxFiles(2)
    assert all(len(f) <= 2 for _, f in _run(both, both.initialOffset()))
    # Trigger.Once and friends pass ReadAllAvailable: one batch, whatever the options say
    assert len(_run(both, both.initialOffset(), ReadAllAvailable())) == 1


@settings(max_examples=FUZZ or 40, deadline=None, derandomize=not FUZZ, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    commits=st.lists(st.sampled_from(["add0", "add1", "add3", "add7", "compact", "delete"]), min_size=1, max_size=12),
    max_files=st.integers(1, 5),
    max_bytes=st.one_of(st.none(), st.integers(50, 500)),
    restart_after=st.integers(0, 6),
)
def test_every_file_exactly_once_in_order_with_limits_and_restarts(tmp_path_factory, commits, max_files, max_bytes, restart_after):
    path = str(tmp_path_factory.mktemp("p") / "t")
    _new_table(path)
    expected: list[str] = []
    for v, kind in enumerate(commits, start=1):
        if kind.startswith("add"):
            expected += _append_fake(path, v, int(kind[3:]), size=40 + v)
        elif kind == "compact":  # rearranges data: emits nothing
            _append_fake(path, v, 2, data_change=False)
        else:
            _commit(path, v, [AddFile(path=f"gone-{v}", partition_values={}, size=1, modification_time=0).remove()])
    opts = {"startingVersion": 1, "maxFilesPerTrigger": max_files, "ignoreDeletes": "true"}
    if max_bytes:
        opts["maxBytesPerTrigger"] = max_bytes
    reader = _reader(path, **opts)
    start = reader.initialOffset()
    batches = []
    for _ in range(restart_after):
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        if end == start:
            break
        batches.append([f for p in reader.partitions(start, end) for f in p.files])
        start = end
    batches += [[{"path": p, "size": 40 + int(p[1:6])} for p in files] for _, files in _run(_reader(path, **opts), start)]
    assert [f["path"] for b in batches for f in b] == expected
    for b in batches:
        assert len(b) <= max_files
        if max_bytes and len(b) > 1:
            assert sum(f["size"] for f in b[:-1]) < max_bytes


def test_deletes_and_rewrites_follow_deltas_options(tmp_path):
    path = str(tmp_path / "t")
    _new_table(path)
    _append_fake(path, 1, 2)
    gone = AddFile(path="v00001-0000.parquet", partition_values={}, size=100, modification_time=1)
    _commit(path, 2, [gone.remove()])  # a DELETE of whole files
    new = AddFile(path="rewritten.parquet", partition_values={}, size=100, modification_time=3)
    _commit(path, 3, [AddFile(path="v00001-0001.parquet", partition_values={}, size=100, modification_time=1).remove(), new])  # an UPDATE
    _append_fake(path, 4, 1)

    with pytest.raises(LakelogError, match="version 2 .* deletes data.*ignoreDeletes=true"):
        _run(_reader(path, startingVersion=1), {"version": 1, "index": 0, "snapshot": False})
    with pytest.raises(LakelogError, match="version 3 .* rewrites data.*skipChangeCommits=true"):
        _run(_reader(path, startingVersion=1, ignoreDeletes=True), {"version": 1, "index": 0, "snapshot": False})
    got = _run(_reader(path, startingVersion=1, skipChangeCommits=True), {"version": 1, "index": 0, "snapshot": False})
    assert [f for _, fs in got for f in fs] == ["v00001-0000.parquet", "v00001-0001.parquet", "v00004-0000.parquet"]


def test_starting_timestamp(tmp_path):
    path = str(tmp_path / "t")
    _new_table(path)
    for v in range(1, 4):
        _append_fake(path, v, 1)
    for v in range(4):
        when = dt.datetime(2026, 5, 1, 12, v, tzinfo=dt.timezone.utc).timestamp()
        os.utime(os.path.join(path, "_delta_log", f"{v:020d}.json"), (when, when))
    assert _reader(path, startingTimestamp="2026-05-01T12:01:30Z").initialOffset() == Position(2).to_offset()
    assert _reader(path, startingTimestamp="2026-05-01 12:02:00").initialOffset() == Position(2).to_offset()
    assert _reader(path, startingTimestamp="2020-01-01").initialOffset() == Position(0).to_offset()
    with pytest.raises(VersionNotFoundError, match="after the latest commit"):
        _reader(path, startingTimestamp="2026-05-02").initialOffset()
    with pytest.raises(LakelogError, match="not both"):
        _reader(path, startingTimestamp="2026-05-02", startingVersion=1)
    with pytest.raises(LakelogError, match="maxFilesPerTrigger"):
        _reader(path, maxFilesPerTrigger=0)
    with pytest.raises(LakelogError, match="maxBytesPerTrigger"):
        _reader(path, maxBytesPerTrigger="lots")


def test_available_now_stops_at_the_version_seen_at_start(tmp_path):
    path = str(tmp_path / "t")
    _new_table(path)
    _append_fake(path, 1, 4)
    reader = _reader(path, startingVersion=1, maxFilesPerTrigger=3)
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    _append_fake(path, 2, 4)  # arrives while the availableNow query runs: not part of it
    assert [len(f) for _, f in _run(reader, end)] == [1]


def test_offsets_from_before_rate_limits_still_resume(tmp_path):
    path = str(tmp_path / "t")
    _new_table(path)
    _append_fake(path, 1, 1)
    _append_fake(path, 2, 1)
    # {"version": last version read, "snapshot": snapshot version still to read or -1}
    assert Position.from_offset({"version": -1, "snapshot": 1}) == Position(1, 0, True)
    assert Position.from_offset({"version": 1, "snapshot": -1}) == Position(2)
    got = _run(_reader(path), {"version": 1, "snapshot": 0})
    assert [f for _, fs in got for f in fs] == ["v00002-0000.parquet"]

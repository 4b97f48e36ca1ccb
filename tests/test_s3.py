"""S3 over real HTTP: moto's server on 127.0.0.1, reached by s3fs exactly as AWS would be.

Commits are conditional PUTs (If-None-Match: *); a lost reply is recognised by the commit's txnId; a
409 ConditionalRequestConflict makes the writer look again; stores that cannot do put-if-absent are
refused unless the table is declared single-writer. The shared read/write/time-travel tests also run
on s3:// through the ``any_table_path`` fixture.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid

import deltalake
import fsspec
import pyarrow as pa
import pytest

import lakelog
from lakelog.errors import StorageError
from lakelog.log import DeltaLog
from lakelog.storage import ConditionalWriteConflict, Storage

pytestmark = pytest.mark.usefixtures("s3_endpoint")


def _names(uri: str) -> list[str]:
    fs, root = fsspec.core.url_to_fs(uri)
    fs.invalidate_cache()
    return sorted(p.rsplit("/", 1)[-1] for p in fs.ls(f"{root}/_delta_log", detail=False))


def _commit(v: int) -> str:
    return f"{v:020d}.json"


def test_moto_honours_if_none_match(s3_endpoint):
    """The endpoint answers a second conditional PUT with 412, which s3fs raises as FileExistsError."""
    fs = fsspec.filesystem("s3")
    key = f"{s3_endpoint.bucket}/probe/{uuid.uuid4().hex}"
    fs.pipe_file(key, b"first", mode="create")
    with pytest.raises(FileExistsError):
        fs.pipe_file(key, b"second", mode="create")
    assert fs.cat_file(key) == b"first"


def test_explicit_storage_options_round_trip(s3_endpoint):
    uri = s3_endpoint.new_table_uri()
    opts = s3_endpoint.storage_options
    data = pa.table({"id": [1, 2, 3], "p": ["a", "b", "a"]})
    assert lakelog.write_table(uri, data, partition_by=["p"], storage_options=opts) == 0
    assert lakelog.write_table(uri, data.slice(0, 1), storage_options=opts) == 1
    assert sorted(lakelog.read_table(uri, storage_options=opts).column("id").to_pylist()) == [1, 1, 2, 3]
    assert lakelog.Table(uri, version=0, storage_options=opts).to_pyarrow().num_rows == 3


def test_checkpoints_and_hint_are_written_in_place(s3_endpoint):
    """Checkpoint and _last_checkpoint are direct PUTs: no temp names, no probe or rename leftovers."""
    uri = s3_endpoint.new_table_uri()
    for i in range(5):
        lakelog.write_table(uri, pa.table({"id": [i]}), configuration={"delta.checkpointInterval": "2"} if i == 0 else None)
    names = _names(uri)
    assert names == sorted([_commit(v) for v in range(5)] + [
        "00000000000000000002.checkpoint.parquet", "00000000000000000004.checkpoint.parquet", "_last_checkpoint",
    ])
    t = lakelog.Table(uri)
    assert t.version == 4 and sorted(t.to_pyarrow().column("id").to_pylist()) == [0, 1, 2, 3, 4]
    assert lakelog.Table(uri, version=3).to_pyarrow().num_rows == 4  # from checkpoint 2 + commit 3


def test_time_travel_by_version_and_timestamp(s3_endpoint):
    """Timestamps come from the test's clock around each commit (never from lakelog's history)."""
    uri = s3_endpoint.new_table_uri()
    started, finished = [], []
    for i in range(3):
        if i:
            time.sleep(1.6)  # S3 LastModified has one-second resolution
        started.append(time.time())
        lakelog.write_table(uri, pa.table({"id": [i]}))
        finished.append(time.time())

    def at(seconds: float) -> dt.datetime:
        return dt.datetime.fromtimestamp(seconds, dt.timezone.utc)

    for v in range(3):
        # Half a second after the write returned: after its LastModified however the store rounds it,
        # and before the next commit's.
        t = lakelog.Table(uri, timestamp=at(finished[v] + 0.5))
        assert t.version == v
        assert sorted(t.to_pyarrow().column("id").to_pylist()) == list(range(v + 1))
    assert lakelog.Table(uri, version=1).to_pyarrow().num_rows == 2
    assert [h["version"] for h in lakelog.Table(uri).history()] == [2, 1, 0]
    with pytest.raises(lakelog.VersionNotFoundError):
        lakelog.Table(uri, timestamp=at(started[0] - 2))


def test_deltalake_reads_lakelog_s3_table_at_each_version(s3_endpoint):
    uri = s3_endpoint.new_table_uri()
    lakelog.write_table(uri, pa.table({"id": [1, 2], "p": ["x", "y"]}), partition_by=["p"])
    lakelog.write_table(uri, pa.table({"id": [3], "p": ["x"]}))
    lakelog.write_table(uri, pa.table({"id": [9], "p": ["z"]}), mode="overwrite")
    for v, ids in [(0, [1, 2]), (1, [1, 2, 3]), (2, [9])]:
        dt_ = deltalake.DeltaTable(uri, version=v, storage_options=s3_endpoint.deltalake_options)
        assert sorted(dt_.to_pyarrow_table().column("id").to_pylist()) == ids


def test_lost_reply_is_recognised_by_txn_id_over_http(s3_endpoint, s3_faults):
    """The PUT of commit 1 is applied but its reply is lost (500): botocore retries, gets 412, and
    lakelog finds its own txnId in the existing commit instead of committing again at version 2."""
    uri = s3_endpoint.new_table_uri()
    lakelog.write_table(uri, pa.table({"id": [0]}))
    s3_faults.inject("PUT", "/_delta_log/" + _commit(1), "lose_reply")
    assert lakelog.write_table(uri, pa.table({"id": [1]})) == 1
    assert [f[2] for f in s3_faults.faults_served] == ["lose_reply"]
    assert [n for n in _names(uri) if n.endswith(".json")] == [_commit(0), _commit(1)]
    assert sorted(lakelog.read_table(uri).column("id").to_pylist()) == [0, 1]


def test_409_conditional_request_conflict_is_retried(s3_endpoint, s3_faults):
    uri = s3_endpoint.new_table_uri()
    lakelog.write_table(uri, pa.table({"id": [0]}))
    # How s3fs surfaces it: a generic OSError, neither FileExistsError nor anything typed.
    fs, root = fsspec.core.url_to_fs(uri)
    s3_faults.inject("PUT", "/raw-409", "conflict409")
    with pytest.raises(OSError) as e:
        fs.pipe_file(f"{root}/raw-409", b"x", mode="create")
    assert not isinstance(e.value, FileExistsError) and "ConditionalRequestConflict" in repr(e.value.__cause__)
    # lakelog's put_if_absent types it, and the commit path looks again and commits.
    s3_faults.inject("PUT", "/_delta_log/" + _commit(1), "conflict409")
    with pytest.raises(ConditionalWriteConflict):
        Storage(uri).put_if_absent(f"{root}/_delta_log/{_commit(1)}", b"{}\n")
    s3_faults.inject("PUT", "/_delta_log/" + _commit(1), "conflict409", times=3)
    assert lakelog.write_table(uri, pa.table({"id": [1]})) == 1
    assert [f[2] for f in s3_faults.faults_served].count("conflict409") == 5
    assert sorted(lakelog.read_table(uri).column("id").to_pylist()) == [0, 1]


def test_store_that_ignores_if_none_match_is_refused(s3_endpoint, s3_faults):
    bucket = "lakelog-no-conditional"
    s3_endpoint.make_bucket(bucket)
    s3_faults.ignore_conditional.add(bucket)
    uri = s3_endpoint.new_table_uri(bucket)
    with pytest.raises(StorageError, match=r"ignores If-None-Match.*lakelog.single_writer"):
        lakelog.write_table(uri, pa.table({"id": [1]}))
    with pytest.raises(lakelog.TableNotFoundError):
        lakelog.read_table(uri)  # nothing committed, and the probe object is gone
    fs, root = fsspec.core.url_to_fs(uri)
    assert not fs.exists(f"{root}/_delta_log") or fs.ls(f"{root}/_delta_log") == []
    opts = {"lakelog.single_writer": "true"}
    assert lakelog.write_table(uri, pa.table({"id": [1]}), storage_options=opts) == 0
    assert lakelog.write_table(uri, pa.table({"id": [2]}), storage_options=opts) == 1
    assert sorted(lakelog.read_table(uri).column("id").to_pylist()) == [1, 2]


def test_store_that_rejects_conditional_put_is_refused(s3_endpoint, s3_faults):
    bucket = "lakelog-rejects-conditional"
    s3_endpoint.make_bucket(bucket)
    s3_faults.reject_conditional.add(bucket)
    uri = s3_endpoint.new_table_uri(bucket)
    with pytest.raises(StorageError, match="does not support conditional PUT"):
        lakelog.write_table(uri, pa.table({"id": [1]}))
    opts = {"lakelog.single_writer": "true"}
    assert lakelog.write_table(uri, pa.table({"id": [1]}), storage_options=opts) == 0
    assert lakelog.write_table(uri, pa.table({"id": [2]}), storage_options=opts) == 1
    assert [n for n in _names(uri) if n.endswith(".json")] == [_commit(0), _commit(1)]


def test_commit_to_an_existing_version_is_never_overwritten(s3_endpoint):
    uri = s3_endpoint.new_table_uri()
    lakelog.write_table(uri, pa.table({"id": [0]}))
    log = DeltaLog(Storage(uri))
    before = log.storage.read(log.storage.log_file(_commit(0)))
    with pytest.raises(FileExistsError):
        log.write_commit(0, [])
    assert log.storage.read(log.storage.log_file(_commit(0))) == before

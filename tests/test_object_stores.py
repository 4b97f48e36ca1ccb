"""What lakelog's commits rest on, on every object store: S3 (moto), Azure (Azurite), GCS (fake-gcs-server).

Commits are conditional creates (S3 and Azure ``If-None-Match: *``, GCS ``ifGenerationMatch=0``).
Each endpoint must refuse a second conditional create of one name; a lost reply is recognised by the
commit's txnId; a create refused as a lost race makes the writer look again; a store that ignores the
condition is refused. The faults are the endpoint's own answers, injected on the wire (tests/backends.py).
"""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

import lakelog
from lakelog.errors import StorageError
from lakelog.log.delta_log import DeltaLog


def _commit(v: int) -> str:
    return f"{v:020d}.json"


def _commits(backend, uri: str | None = None) -> list[str]:
    return sorted(f.name for f in backend.storage(uri).list_log() if f.name.endswith(".json"))


def _ids(backend, uri: str | None = None, **kw) -> list:
    return sorted(lakelog.read_table(uri or backend.uri, storage_options=backend.storage_options, **kw).column("id").to_pylist())


def _peer_ids(backend, uri: str | None = None) -> list:
    return sorted(backend.deltalake_table(uri).to_pyarrow_table().column("id").to_pylist())


def test_the_endpoint_refuses_a_second_conditional_create(object_store):
    """If an emulator upgrade stops enforcing the condition, this fails (and so would lakelog's probe)."""
    fs = object_store.storage().fs
    key = f"{object_store.endpoint.bucket}/probe/{uuid.uuid4().hex}"
    fs.pipe_file(key, b"first", mode="create")
    with pytest.raises(FileExistsError):
        fs.pipe_file(key, b"second", mode="create")
    assert fs.cat_file(key) == b"first"


def test_commit_to_an_existing_version_is_never_overwritten(object_store):
    lakelog.write_table(object_store.uri, pa.table({"id": [0]}))
    log = DeltaLog(object_store.storage())
    before = log.storage.read(log.storage.log_file(_commit(0)))
    with pytest.raises(FileExistsError):
        log.write_commit(0, [])
    assert log.storage.read(log.storage.log_file(_commit(0))) == before


def test_checkpoints_and_hint_are_written_in_place(object_store):
    """Checkpoint, its checksum file and _last_checkpoint are direct writes: no temp names, no probe or
    rename leftovers."""
    uri = object_store.uri
    for i in range(5):
        lakelog.write_table(uri, pa.table({"id": [i]}), configuration={"delta.checkpointInterval": "2"} if i == 0 else None)
    assert sorted(f.name for f in object_store.storage().list_log()) == sorted([_commit(v) for v in range(5)] + [
        "00000000000000000002.checkpoint.parquet", "00000000000000000004.checkpoint.parquet", "_last_checkpoint",
        "00000000000000000002.crc", "00000000000000000004.crc",
    ])
    t = lakelog.Table(uri)
    assert t.version == 4 and sorted(t.to_pyarrow().column("id").to_pylist()) == [0, 1, 2, 3, 4]
    assert lakelog.Table(uri, version=3).to_pyarrow().num_rows == 4  # from checkpoint 2 + commit 3


def test_lost_reply_after_create_commits_once(object_store):
    """The create of commit 1 is applied but its reply is lost (500): the writer finds its own txnId at
    version 1 instead of committing again at version 2."""
    b, opts = object_store, object_store.faults.options
    lakelog.write_table(b.uri, pa.table({"id": [0]}), storage_options=opts)
    b.faults.lose_reply(_commit(1))
    assert lakelog.write_table(b.uri, pa.table({"id": [1]}), storage_options=opts) == 1
    assert b.faults.served == ["lose_reply"]
    assert _commits(b) == [_commit(0), _commit(1)]
    assert _ids(b) == [0, 1] == _peer_ids(b)


def test_create_refused_as_a_lost_race_is_looked_at_again(object_store):
    b, opts = object_store, object_store.faults.options
    lakelog.write_table(b.uri, pa.table({"id": [0]}), storage_options=opts)
    # Storage types the refusal (nothing was written); the commit path then looks again and commits.
    b.faults.refuse_create(_commit(1))
    s = b.storage(storage_options=opts)
    with pytest.raises(b.faults.refused_as):
        s.put_if_absent(s.log_file(_commit(1)), b"{}\n")
    assert _commits(b) == [_commit(0)]
    b.faults.refuse_create(_commit(1), times=3)
    assert lakelog.write_table(b.uri, pa.table({"id": [1]}), storage_options=opts) == 1
    assert len(b.faults.served) == 4
    assert _commits(b) == [_commit(0), _commit(1)]
    assert _ids(b) == [0, 1] == _peer_ids(b)


def test_store_that_ignores_the_condition_is_refused(object_store):
    b = object_store
    bucket = f"lakelog-ignores-{b.kind}"
    b.endpoint.make_bucket(bucket)
    b.faults.ignore_condition(bucket)
    uri, opts = b.endpoint.new_table_uri(bucket), b.faults.options
    condition = "ifGenerationMatch=0" if b.kind == "gcs" else "If-None-Match"
    with pytest.raises(StorageError, match=rf"ignores {condition}.*lakelog.single_writer"):
        lakelog.write_table(uri, pa.table({"id": [1]}), storage_options=opts)
    with pytest.raises(lakelog.TableNotFoundError):
        lakelog.read_table(uri, storage_options=b.storage_options)  # nothing committed, and the probe is gone
    assert b.storage(uri).list_log() == []
    single = {**opts, "lakelog.single_writer": "true"}
    assert lakelog.write_table(uri, pa.table({"id": [1]}), storage_options=single) == 0
    assert lakelog.write_table(uri, pa.table({"id": [2]}), storage_options=single) == 1
    assert _ids(b, uri) == [1, 2]


def test_a_missing_bucket_is_named(object_store):
    """A write into a bucket (Azure: container) that does not exist said only "FileNotFoundError: <the
    upload URL>" on GCS and "The specified bucket does not exist" on S3: every store names it, typed."""
    from lakelog.errors import BucketNotFoundError

    b = object_store
    bucket = f"lakelog-missing-{uuid.uuid4().hex[:8]}"
    uri = b.endpoint.new_table_uri(bucket)
    with pytest.raises(BucketNotFoundError, match=rf"{bucket}.*does not exist.*create the (bucket|container)") as e:
        lakelog.write_table(uri, pa.table({"id": [1]}), storage_options=b.storage_options)
    assert e.value.bucket == bucket
    for read in (lambda: lakelog.read_table(uri, storage_options=b.storage_options), lambda: lakelog.Table(uri, storage_options=b.storage_options)):
        with pytest.raises(lakelog.TableNotFoundError, match=rf"(bucket|container) '{bucket}' does not exist"):
            read()


_EARLY_STOP = """
import json, sys
import lakelog

uri, options = sys.argv[1], json.loads(sys.argv[2])
print(lakelog.Table(uri, storage_options=options).to_pyarrow_dataset().head(1).num_rows)
"""


def test_a_script_that_stops_a_scan_early_exits_normally(object_store):
    """A scan stopped early leaves Arrow's read-ahead running in lakelog's Python filesystem; when the
    script then ended, the interpreter shut down under those threads and the process aborted ("terminate
    called without an active exception", exit -6) on every run on S3."""
    import json
    import os
    import subprocess
    import sys

    b = object_store
    lakelog.write_table(b.uri, pa.table({"id": list(range(3200)), "p": [i % 32 for i in range(3200)]}), partition_by=["p"])
    options = {**(b.storage_options or {}), "max_retries": "3"}  # (on Azure: adlfs, not Arrow's own client, reads)
    for _ in range(int(os.environ.get("LAKELOG_EXIT_LOOP", "3"))):
        r = subprocess.run([sys.executable, "-c", _EARLY_STOP, b.uri, json.dumps(options)], capture_output=True, text=True, timeout=300)
        assert (r.returncode, r.stdout.strip()) == (0, "1"), (r.returncode, r.stderr[-2000:])

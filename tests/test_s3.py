"""S3 over real HTTP: moto's server on 127.0.0.1, reached by s3fs exactly as AWS would be.

Commits are conditional PUTs (If-None-Match: *). What every object store shares (a lost reply, a
refused create, a store ignoring the condition) is in tests/test_object_stores.py; here is what only
S3 has: s3fs's untyped 409, endpoints that reject the condition (501), one-second LastModified. The
storage-level suites run on s3:// through the ``backend`` fixtures, and the shared read/write tests
through ``any_table_path``.
"""

from __future__ import annotations

import datetime as dt
import time

import deltalake
import fsspec
import pyarrow as pa
import pytest

import lakelog
from lakelog.errors import StorageError
from lakelog.storage import ConditionalWriteConflict, Storage

pytestmark = pytest.mark.usefixtures("s3_endpoint")


def _names(uri: str) -> list[str]:
    fs, root = fsspec.core.url_to_fs(uri)
    fs.invalidate_cache()
    return sorted(p.rsplit("/", 1)[-1] for p in fs.ls(f"{root}/_delta_log", detail=False))


def _commit(v: int) -> str:
    return f"{v:020d}.json"


def test_explicit_storage_options_round_trip(s3_endpoint):
    uri = s3_endpoint.new_table_uri()
    opts = s3_endpoint.storage_options
    data = pa.table({"id": [1, 2, 3], "p": ["a", "b", "a"]})
    assert lakelog.write_table(uri, data, partition_by=["p"], storage_options=opts) == 0
    assert lakelog.write_table(uri, data.slice(0, 1), storage_options=opts) == 1
    assert sorted(lakelog.read_table(uri, storage_options=opts).column("id").to_pylist()) == [1, 1, 2, 3]
    assert lakelog.Table(uri, version=0, storage_options=opts).to_pyarrow().num_rows == 3


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


def test_409_conditional_request_conflict_is_typed(s3_endpoint, s3_faults):
    """s3fs surfaces S3's 409 ConditionalRequestConflict as a generic OSError; lakelog's put_if_absent types
    it (tests/test_object_stores.py: the commit path then looks again and commits)."""
    uri = s3_endpoint.new_table_uri()
    lakelog.write_table(uri, pa.table({"id": [0]}))
    fs, root = fsspec.core.url_to_fs(uri)
    s3_faults.inject("PUT", "/raw-409", "conflict409")
    with pytest.raises(OSError) as e:
        fs.pipe_file(f"{root}/raw-409", b"x", mode="create")
    assert not isinstance(e.value, FileExistsError) and "ConditionalRequestConflict" in repr(e.value.__cause__)
    s3_faults.inject("PUT", "/_delta_log/" + _commit(1), "conflict409")
    with pytest.raises(ConditionalWriteConflict):
        Storage(uri).put_if_absent(f"{root}/_delta_log/{_commit(1)}", b"{}\n")
    assert [f[2] for f in s3_faults.faults_served] == ["conflict409", "conflict409"]


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



# ---------------------------------------------------------------- delta-rs' option names

_CLEAN_ENV_SCRIPT = """
import json, sys
import pyarrow as pa
import lakelog

uri, options = sys.argv[1], json.loads(sys.argv[2])
version = lakelog.write_table(uri, pa.table({"id": [int(sys.argv[3])]}), storage_options=options or None)
print(json.dumps([version, sorted(lakelog.read_table(uri, storage_options=options or None).column("id").to_pylist())]))
"""


def _clean_env(tmp_path, **variables) -> dict[str, str]:
    """An environment with no AWS_* variable (nor a profile in a home directory) but ``variables``."""
    import os

    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"PATH": os.environ["PATH"], "HOME": str(home), "AWS_CONFIG_FILE": str(home / "none"),
            "AWS_SHARED_CREDENTIALS_FILE": str(home / "none"), **variables}


def _run_clean(tmp_path, uri: str, options: dict, n: int, **variables) -> list:
    import json
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", _CLEAN_ENV_SCRIPT, uri, json.dumps(options), str(n)], env=_clean_env(tmp_path, **variables),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.splitlines()[-1])


def test_delta_rs_option_names_with_nothing_in_the_environment(s3_endpoint, tmp_path):
    """deltalake's storage_options, upper and lower case, reach s3fs as its own arguments (they used to
    reach aiobotocore raw: ``AioSession.__init__() got an unexpected keyword argument 'AWS_ENDPOINT_URL'``)."""
    uri = s3_endpoint.new_table_uri()
    options = s3_endpoint.deltalake_options
    assert _run_clean(tmp_path, uri, options, 1) == [0, [1]]
    lower = {k.lower(): v for k, v in options.items()}
    assert _run_clean(tmp_path, uri, lower, 2) == [1, [1, 2]]
    # object_store's other spellings of the same settings
    other = {"endpoint": s3_endpoint.url, "access_key_id": "testing", "secret_access_key": "testing", "aws_default_region": "us-east-1",
             "allow_http": "true", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false", "timeout": "30s", "aws_connect_timeout": "5s", "max_retries": 2}
    assert _run_clean(tmp_path, uri, other, 3) == [2, [1, 2, 3]]
    dt_ = deltalake.DeltaTable(uri, storage_options=options)
    assert sorted(dt_.to_pyarrow_table().column("id").to_pylist()) == [1, 2, 3]


def test_aws_environment_variables_as_deltalake_reads_them(s3_endpoint, tmp_path):
    """The AWS_* variables deltalake reads work without options, including those botocore does not read
    itself (AWS_REGION, object_store's AWS_ENDPOINT)."""
    uri = s3_endpoint.new_table_uri()
    env = {"AWS_ENDPOINT": s3_endpoint.url, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
           "AWS_ALLOW_HTTP": "true", "AWS_TIMEOUT": "20s"}
    assert _run_clean(tmp_path, uri, {}, 1, **env) == [0, [1]]
    # an option overrides the variable: the endpoint from the options, the credentials from the environment
    env["AWS_ENDPOINT"] = "http://127.0.0.1:9"
    assert _run_clean(tmp_path, uri, {"AWS_ENDPOINT_URL": s3_endpoint.url}, 2, **env) == [1, [1, 2]]
    assert sorted(deltalake.DeltaTable(uri, storage_options=s3_endpoint.deltalake_options).to_pyarrow_table().column("id").to_pylist()) == [1, 2]


def test_unknown_and_unsupported_s3_options_are_refused_by_name(s3_endpoint):
    from lakelog.errors import InvalidArgumentError

    uri = s3_endpoint.new_table_uri()
    with pytest.raises(InvalidArgumentError, match=r"AWS_ENDPOIT_URL.*aws_endpoint_url"):
        lakelog.write_table(uri, pa.table({"id": [1]}), storage_options={"AWS_ENDPOIT_URL": s3_endpoint.url})
    with pytest.raises(InvalidArgumentError, match="AWS_S3_LOCKING_PROVIDER.*DynamoDB"):
        lakelog.read_table(uri, storage_options={**s3_endpoint.deltalake_options, "AWS_S3_LOCKING_PROVIDER": "dynamodb"})
    for bad in ({"timeout": "30"}, {"timeout": "soon"}, {"max_retries": "-1"}, {"AWS_ALLOW_HTTP": "maybe"}, {"retry_timeout": "3m"}):
        with pytest.raises(InvalidArgumentError, match=next(iter(bad)).lower()):
            lakelog.Table(uri, storage_options={**s3_endpoint.deltalake_options, **bad})


def test_allow_unsafe_rename_is_single_writer(s3_endpoint, s3_faults):
    """delta-rs' AWS_S3_ALLOW_UNSAFE_RENAME (commits without concurrency protection, for a single writer)
    is lakelog's single_writer: on a store that rejects conditional PUTs, commits go through."""
    bucket = "lakelog-rejects-conditional-unsafe"
    s3_endpoint.make_bucket(bucket)
    s3_faults.reject_conditional.add(bucket)
    uri = s3_endpoint.new_table_uri(bucket)
    with pytest.raises(StorageError, match="does not support conditional PUT"):
        lakelog.write_table(uri, pa.table({"id": [1]}), storage_options=s3_endpoint.deltalake_options)
    unsafe = {**s3_endpoint.deltalake_options, "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    assert lakelog.write_table(uri, pa.table({"id": [1]}), storage_options=unsafe) == 0
    assert lakelog.write_table(uri, pa.table({"id": [2]}), storage_options=unsafe) == 1
    assert sorted(lakelog.read_table(uri, storage_options=unsafe).column("id").to_pylist()) == [1, 2]

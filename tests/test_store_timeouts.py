"""No request waits forever: an object store that accepts connections and never answers gives a typed
error (``StorageTimeoutError``) after the storage options ``timeout`` and ``max_retries``, on reads,
listings and commits, on S3, Azure and GCS; and a commit whose reply never came is still resolved by its
txnId. Each test is bounded by pytest-timeout; none measures time.

The stalled endpoints are real: a TCP server that accepts and reads but never answers
(``StallingEndpoint``), and the stores' fault injection holding one kind of request unanswered.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakelog
from lakelog.check import check_table
from lakelog.errors import InvalidArgumentError, StorageTimeoutError, StorageUnavailableError
from lakelog.storage import Storage
from tests.backends import OBJECT_STORES
from tests.emulators import StallingEndpoint, free_port, gcs_service_account

QUICK = {"timeout": "1s", "max_retries": "1"}  # two attempts of a second each: the tests end quickly


@pytest.fixture
def stalling():
    endpoint = StallingEndpoint()
    yield endpoint
    endpoint.stop()


def _options(kind: str, url: str, tmp_path) -> dict[str, str]:
    """delta-rs' storage options reaching ``url`` as the ``kind`` store."""
    if kind == "s3":
        return {"AWS_ENDPOINT_URL": url, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
                "AWS_ALLOW_HTTP": "true"}
    if kind == "azure":
        return {"azure_storage_use_emulator": "true", "azure_storage_endpoint": url}
    return {"google_service_account": gcs_service_account(tmp_path / "service-account.json", url)}


def _uri(kind: str) -> str:
    return {"s3": "s3", "azure": "az", "gcs": "gs"}[kind] + "://lakelog-tests/stalled/table"


@pytest.mark.timeout(240)
@pytest.mark.parametrize("kind", OBJECT_STORES)
def test_an_endpoint_that_never_answers_gives_a_typed_error(kind, stalling, tmp_path):
    """Before: a write to a stalled Azure or GCS endpoint with timeout="5s" still waited after 4 minutes."""
    opts = {**_options(kind, stalling.url, tmp_path), **QUICK}
    uri = _uri(kind)
    calls = {
        "read_table": lambda: lakelog.read_table(uri, storage_options=opts),
        "write_table": lambda: lakelog.write_table(uri, pa.table({"id": [1]}), storage_options=opts),
        "history": lambda: lakelog.Table(uri, storage_options=opts).history(),
        "check": lambda: check_table(uri, storage_options=opts),
        "convert": lambda: lakelog.convert(uri, storage_options=opts),
    }
    for name, call in calls.items():
        with pytest.raises(StorageTimeoutError) as e:
            call()
        assert e.value.endpoint and stalling.url.split("//")[1] in e.value.endpoint, name
        assert "did not answer" in str(e.value) and "timeout 1s" in str(e.value) and "2 attempts" in str(e.value), name
    assert stalling.accepted > 0


@pytest.mark.timeout(240)
@pytest.mark.parametrize("kind", OBJECT_STORES)
def test_an_endpoint_that_is_not_there_gives_a_typed_error(kind, tmp_path):
    """Nothing listens on the port: refused connections, retried, end in StorageUnavailableError."""
    opts = {**_options(kind, f"http://127.0.0.1:{free_port()}", tmp_path), **QUICK}
    with pytest.raises(StorageUnavailableError, match="could not be reached|did not answer"):
        lakelog.write_table(_uri(kind), pa.table({"id": [1]}), storage_options=opts)


def _commits(storage: Storage) -> list[str]:
    return sorted(f.name for f in storage.list_log() if f.name.endswith(".json"))


@pytest.mark.timeout(300)
def test_a_commit_whose_reply_never_comes_is_resolved_by_its_txn_id(object_store):
    """The create of commit 1 is applied, then the endpoint goes silent: the writer times out, looks again,
    finds its own txnId at version 1 and stops there; nothing is committed twice or lost."""
    b = object_store
    opts = {**b.faults.options, "timeout": "2s", "max_retries": "1"}
    lakelog.write_table(b.uri, pa.table({"id": [0]}), storage_options=opts)
    b.faults.stall_reply(f"{1:020d}.json")
    assert lakelog.write_table(b.uri, pa.table({"id": [1]}), storage_options=opts) == 1
    assert b.faults.served == ["stall_reply"]
    assert _commits(b.storage()) == [f"{0:020d}.json", f"{1:020d}.json"]
    assert sorted(lakelog.read_table(b.uri, storage_options=b.storage_options).column("id").to_pylist()) == [0, 1]
    assert sorted(b.deltalake_table().to_pyarrow_table().column("id").to_pylist()) == [0, 1]


@pytest.mark.timeout(300)
def test_a_data_file_read_that_stalls_is_a_timeout_not_a_damaged_file(object_store):
    """Reads of data files go through Arrow; a read that never gets an answer is StorageTimeoutError, not
    CorruptDataFileError (nor a ``corrupt_file`` problem of ``lakelog check``)."""
    b = object_store
    opts = {**b.faults.options, **QUICK}
    lakelog.write_table(b.uri, pa.table({"id": [0, 1]}), storage_options=opts)
    b.faults.stall_reads(".parquet")
    with pytest.raises(StorageTimeoutError) as e:
        lakelog.read_table(b.uri, storage_options=opts)
    assert ".parquet" in e.value.path
    with pytest.raises(StorageTimeoutError):
        check_table(b.uri, storage_options=opts)
    b.faults.clear()
    assert sorted(lakelog.read_table(b.uri, storage_options=opts).column("id").to_pylist()) == [0, 1]


@pytest.mark.parametrize("kind", OBJECT_STORES)
def test_request_options_are_read_as_delta_rs_reads_them(kind, tmp_path):
    """Durations in delta-rs' (humantime's) form; the store's prefix; bad values refused by name."""
    base = _options(kind, "http://127.0.0.1:9", tmp_path)
    prefix = {"s3": "aws_", "azure": "azure_", "gcs": "google_"}[kind]
    store = Storage(_uri(kind), {**base, "timeout": "1m 30s", prefix + "connect_timeout": "500ms", "MAX_RETRIES": "0"}).store
    assert (store.policy.timeout, store.policy.connect_timeout, store.policy.max_retries) == (90.0, 0.5, 0)
    defaults = Storage(_uri(kind), base).store.policy
    assert (defaults.timeout, defaults.connect_timeout, defaults.max_retries) == (30.0, 5.0, 3)
    for bad in ({"timeout": "30"}, {"timeout": "-1s"}, {prefix + "connect_timeout": "fast"}, {"max_retries": "many"},
                {"retry_timeout": "3m"}, {"backoff_config.base": "2"}):
        with pytest.raises(InvalidArgumentError, match=next(iter(bad))):
            Storage(_uri(kind), {**base, **bad})


@pytest.mark.timeout(300)
def test_failed_reads_through_arrows_azure_client_are_typed(azurite):
    """With the default request options data files are read by Arrow's own Azure client, which reports an
    endpoint it cannot get an answer from as a plain OSError: that is StorageUnavailableError too, not
    a damaged file, on reads and in ``lakelog check``."""
    uri, opts = azurite.new_table_uri(), azurite.proxy_options
    lakelog.write_table(uri, pa.table({"id": [0, 1]}), storage_options=opts)
    assert Storage(uri, opts).store.native is not None  # Arrow's client reads the data files
    azurite.proxy.inject("GET", ".parquet", "drop", times=1000)
    with pytest.raises(StorageUnavailableError) as e:
        lakelog.read_table(uri, storage_options=opts)
    assert ".parquet" in e.value.path
    with pytest.raises(StorageUnavailableError):
        check_table(uri, storage_options=opts)
    azurite.proxy.clear()
    assert sorted(lakelog.read_table(uri, storage_options=opts).column("id").to_pylist()) == [0, 1]


@pytest.mark.timeout(300)
def test_convert_and_vacuum_listings_that_stall_are_timeouts(azurite):
    """``convert`` and ``vacuum`` list the table's directory themselves: a listing that never gets an
    answer is StorageTimeoutError, not "no such directory" or an SDK error."""
    uri, opts = azurite.new_table_uri(), {**azurite.proxy_options, **QUICK}
    lakelog.write_table(uri, pa.table({"id": [1]}), storage_options=opts)
    table = lakelog.Table(uri, storage_options=opts)
    azurite.proxy.inject("GET", "table/&include=", "stall", times=1000)  # the listings of the table's root, not of its log
    with pytest.raises(StorageTimeoutError, match="listing"):
        table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=True)
    raw = azurite.new_table_uri()
    with pytest.raises(StorageTimeoutError, match="listing"):
        lakelog.convert(raw, storage_options=opts)


@pytest.mark.parametrize("kind", OBJECT_STORES)
def test_a_storage_pickles_with_its_request_options(kind, tmp_path):
    """Write plans and Spark tasks are pickled: the filesystems lakelog opens (made when their SDK is
    first imported) load in another process with the same request options."""
    import pickle
    import subprocess
    import sys

    opts = {**_options(kind, "http://127.0.0.1:9", tmp_path), "timeout": "7s", "max_retries": "2"}
    (tmp_path / "storage.pickle").write_bytes(pickle.dumps(Storage(_uri(kind), opts)))
    code = ("import pickle, sys; s = pickle.load(open(sys.argv[1], 'rb')); "
            "print(type(s.fs).__name__, s.store.policy.timeout, s.store.policy.max_retries)")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "storage.pickle")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[1:] == ["7.0", "2"] and r.stdout.startswith("Policy")

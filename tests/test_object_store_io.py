"""How lakelog talks to object stores (S3 on moto, Azure on Azurite, GCS on fake-gcs-server).

* Listing the log from the last checkpoint (S3 ``StartAfter``, GCS ``startOffset``, Azure ``startFrom``):
  loading the latest version lists only the log's tail, and everything that needs older versions (time
  travel, history, the change feed, vacuum, restore) still sees the whole log.
* Data files: uploaded in one request below ``lakelog.storage.upload.SINGLE_REQUEST_BYTES``, streamed
  above it; read with ranged requests (on Azure through Arrow's own client when the credentials allow).
"""

from __future__ import annotations

import re
import warnings
from urllib.parse import parse_qs, unquote

import deltalake
import pyarrow as pa
import pyarrow.fs as pafs
import pytest

import lakelog
from lakelog.errors import MissingDataFileError
from lakelog.log.delta_log import DeltaLog
from lakelog.storage import Storage
from lakelog.storage.azure import EMULATOR_KEY, arrow_options


def _commit(v: int) -> str:
    return f"{v:020d}.json"


@pytest.fixture
def store(object_store):
    """(new table uri, lakelog's storage options, deltalake's) on each object store."""
    return object_store.uri, dict(object_store.storage_options), dict(object_store.deltalake_options)


def _rows(n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(n), pa.int64()), "name": pa.array([f"name-{i % 977}" for i in range(n)]),
                     "x": pa.array([i / 7 for i in range(n)])})


def _table_with_checkpoint(uri: str, opts: dict, commits: int = 14, checkpoint_at: int = 10) -> list[int]:
    """Commits 0..commits-1 (one row each, id = version, change feed on) with a checkpoint at ``checkpoint_at``."""
    for v in range(commits):
        conf = {"delta.enableChangeDataFeed": "true"} if v == 0 else None
        lakelog.write_table(uri, pa.table({"id": [v]}), storage_options=opts, configuration=conf)
        if v == checkpoint_at:
            lakelog.Table(uri, storage_options=opts).checkpoint()
    return list(range(commits))


def _ids(t: lakelog.Table) -> list[int]:
    return sorted(t.to_pyarrow()["id"].to_pylist())


def test_latest_version_lists_only_from_the_checkpoint(store):
    uri, opts, _ = store
    ids = _table_with_checkpoint(uri, opts)
    storage = Storage(uri, opts)
    assert [f.name for f in storage.list_log("00000000000000000012")] == [_commit(12), _commit(13), "_last_checkpoint"]

    t = lakelog.Table(uri, storage_options=opts)
    listing = t.snapshot.listing
    assert listing.partial and listing.listed_from == 10
    assert sorted(listing.commits) == [10, 11, 12, 13] and list(listing.checkpoints) == [10]
    assert t.version == 13 and _ids(t) == ids


def test_what_needs_older_versions_sees_the_whole_log(store):
    uri, opts, _ = store
    ids = _table_with_checkpoint(uri, opts)
    t = lakelog.Table(uri, storage_options=opts)
    assert t.snapshot.listing.partial
    assert [h["version"] for h in t.history()] == list(range(13, -1, -1))
    assert _ids(lakelog.Table(uri, version=3, storage_options=opts)) == ids[:4]
    changes = t.changes(starting_version=2, ending_version=12)
    assert sorted(changes["id"].to_pylist()) == ids[2:13]
    assert t.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=True) == []
    t.restore(5)
    assert _ids(t.refresh()) == ids[:6]


def test_a_newer_commit_is_read_from_the_tail(store):
    uri, opts, _ = store
    ids = _table_with_checkpoint(uri, opts)
    t = lakelog.Table(uri, storage_options=opts)
    lakelog.write_table(uri, pa.table({"id": [14]}), storage_options=opts)
    t.refresh()
    assert t.version == 14 and _ids(t) == ids + [14]
    assert t.snapshot.listing.listed_from == 13


def test_a_hint_naming_a_missing_checkpoint_falls_back_to_the_whole_log(store):
    uri, opts, _ = store
    ids = _table_with_checkpoint(uri, opts)
    storage = Storage(uri, opts)
    storage.delete(storage.log_file("00000000000000000010.checkpoint.parquet"))
    t = lakelog.Table(uri, storage_options=opts)
    assert not t.snapshot.listing.partial and _ids(t) == ids


def test_an_unusable_checkpoint_falls_back_to_the_commits_before_it(store):
    uri, opts, _ = store
    ids = _table_with_checkpoint(uri, opts)
    storage = Storage(uri, opts)
    storage.put(storage.log_file("00000000000000000010.checkpoint.parquet"), b"not parquet")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        t = lakelog.Table(uri, storage_options=opts)
        t.files()  # the checkpoint is read on first use of the files (a checksum file gave the metadata)
    assert any("skipping unusable checkpoint at version 10" in str(w.message) for w in seen)
    assert not t.snapshot.listing.partial and _ids(t) == ids


def test_the_listing_starts_at_the_checkpoint_on_the_wire(cloud):
    """The store itself begins the listing: its answer names no commit before the checkpoint."""
    uri = cloud.new_table_uri()
    _table_with_checkpoint(uri, cloud.storage_options)
    answers = []
    original = cloud.proxy._forward

    def spy(method, path, headers, body):
        status, rh, rb = original(method, path, headers, body)
        if method == "GET" and "?" in path:
            answers.append((parse_qs(path.split("?", 1)[1]), rb))
        return status, rh, rb

    cloud.proxy._forward = spy
    try:
        t = lakelog.Table(uri, storage_options=cloud.proxy_options)
    finally:
        cloud.proxy._forward = original
    assert t.version == 13
    listings = [(q, b) for q, b in answers if q.get("prefix", [""])[0].endswith("/_delta_log/") and q.get("maxResults") != ["1"]]
    assert listings and all(("startOffset" in q or "startFrom" in q) for q, _ in listings)
    assert all(_commit(9).encode() not in b and _commit(10).encode() in b for _, b in listings)


def test_stores_without_the_parameter_list_the_whole_log(tmp_path):
    uri = str(tmp_path / "t")
    ids = _table_with_checkpoint(uri, {})
    t = lakelog.Table(uri)
    assert not t.snapshot.listing.partial and _ids(t) == ids
    assert DeltaLog(Storage(uri)).list(12).listed_from == 12


# ---------------------------------------------------------------- data files


@pytest.mark.parametrize("limit", [None, 64 * 1024], ids=["one-request", "streamed"])
def test_data_files_round_trip(store, limit, monkeypatch):
    """Small files go up in one request, large ones stream; both read back the same in lakelog and
    deltalake."""
    if limit is not None:
        monkeypatch.setattr("lakelog.storage.upload.SINGLE_REQUEST_BYTES", limit)
    uri, opts, peer_opts = store
    data = _rows(30_000)
    lakelog.write_table(uri, data, storage_options=opts)
    sizes = [a.size for a in lakelog.Table(uri, storage_options=opts).snapshot.files.values()]
    assert limit is None or max(sizes) > limit
    assert lakelog.read_table(uri, storage_options=opts).sort_by("id").equals(data)
    peer = deltalake.DeltaTable(uri, storage_options=peer_opts).to_pyarrow_table().sort_by("id")
    assert peer.select(data.column_names).equals(data)


@pytest.mark.parametrize("limit", [None, 64 * 1024], ids=["one-request", "streamed"])
def test_data_file_uploads_on_the_wire(cloud, limit, monkeypatch):
    if limit is not None:
        monkeypatch.setattr("lakelog.storage.upload.SINGLE_REQUEST_BYTES", limit)
    uri = cloud.new_table_uri()
    requests = []
    original = cloud.proxy._forward

    def spy(method, path, headers, body):
        name = unquote(path.split("?", 1)[0]) if cloud.kind == "azure" else " ".join(re.findall(r'"name":\s*"([^"]+)"', body[:4096].decode("latin-1")))
        if method in ("PUT", "POST") and (name.endswith(".parquet") or ".parquet&uploadType=resumable" in unquote(path)):
            requests.append(path)
        return original(method, path, headers, body)

    cloud.proxy._forward = spy
    try:
        lakelog.write_table(uri, _rows(30_000), storage_options=cloud.proxy_options)
    finally:
        cloud.proxy._forward = original
    if limit is None:
        assert len(requests) == 1 and "comp=block" not in requests[0] and "resumable" not in requests[0]
    else:
        # Azure stages blocks; GCS starts a resumable upload (its chunks go to the address the emulator returns)
        assert any(("comp=block" in p) or ("uploadType=resumable" in p) for p in requests)


def test_a_missing_data_file_is_a_typed_error(store):
    uri, opts, _ = store
    lakelog.write_table(uri, _rows(10), storage_options=opts)
    t = lakelog.Table(uri, storage_options=opts)
    (rel,) = t.files()
    t.storage.delete(t.storage.join(rel))
    with pytest.raises(MissingDataFileError, match="missing"):
        lakelog.read_table(uri, storage_options=opts)


def test_azure_reads_through_arrow_when_the_credentials_allow(azurite):
    uri = azurite.new_table_uri()
    assert isinstance(Storage(uri, azurite.storage_options).arrow_fs, pafs.AzureFileSystem)
    anonymous = Storage(uri, {"azure_storage_account_name": "devstoreaccount1", "azure_skip_signature": "true"})
    assert isinstance(anonymous.arrow_fs, pafs.PyFileSystem)


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({"account_name": "acct", "account_key": "k"}, {"account_name": "acct", "account_key": "k"}),
        ({"account_name": "acct", "sas_token": "?sv=1&sig=x"}, {"account_name": "acct", "sas_token": "sv=1&sig=x"}),
        ({"account_name": "acct", "client_id": "c", "client_secret": "s", "tenant_id": "t"},
         {"account_name": "acct", "client_id": "c", "client_secret": "s", "tenant_id": "t"}),
        ({"connection_string": "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=k;EndpointSuffix=core.windows.net"},
         {"account_name": "acct", "account_key": "k", "blob_storage_authority": ".blob.core.windows.net",
          "dfs_storage_authority": ".dfs.core.windows.net", "blob_storage_scheme": "https", "dfs_storage_scheme": "https"}),
        ({"connection_string": f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={EMULATOR_KEY};"
                               "BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;"},
         {"account_name": "devstoreaccount1", "account_key": EMULATOR_KEY, "blob_storage_authority": "127.0.0.1:10000",
          "dfs_storage_authority": "127.0.0.1:10000", "blob_storage_scheme": "http", "dfs_storage_scheme": "http"}),
        ({"connection_string": "AccountName=acct;AccountKey=k;BlobEndpoint=https://proxy.example.com/x"}, None),
        ({"account_name": "acct"}, None),
        ({"account_name": "acct", "anon": True}, None),
        ({"account_name": "acct", "client_id": "c"}, None),
    ],
)
def test_azure_arrow_client_options(kw, expected, monkeypatch):
    for name in ("AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert arrow_options(kw) == expected

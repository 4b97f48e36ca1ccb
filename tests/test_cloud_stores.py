"""Azure Blob / ADLS Gen2 and Google Cloud Storage, on Azurite and fake-gcs-server over real HTTP.

Commits are conditional creates (Azure ``If-None-Match: *``, GCS ``ifGenerationMatch=0``): the request on
the wire carries the condition. Here is what only these two stores have: their URL forms, delta-rs'
option names and the standard variables, credentials kept out of tables and errors, gcsfs' bucket
probe. What every object store shares (conditional creates, lost replies, refused creates) is in
tests/test_object_stores.py.
"""

from __future__ import annotations

import uuid

import deltalake
import pyarrow as pa
import pytest

import lakelog
from lakelog.errors import InvalidArgumentError
from lakelog.storage import Storage


def _commit(v: int) -> str:
    return f"{v:020d}.json"


def _log_names(uri: str, opts: dict) -> list[str]:
    s = Storage(uri, opts)
    return sorted(f.name for f in s.list_log())


def _ids(uri: str, opts: dict, **kw) -> list:
    return sorted(lakelog.read_table(uri, storage_options=opts, **kw).column("id").to_pylist())


def _peer_ids(uri: str, cloud, version: int | None = None) -> list:
    dt = deltalake.DeltaTable(uri, storage_options=cloud.deltalake_options, version=version)
    got = pa.table(deltalake.QueryBuilder().register("t", dt).execute("select id from t").read_all())
    return sorted(got.column("id").to_pylist())


def test_conditional_create_is_what_goes_over_the_wire(cloud):
    """Through the proxy, the store sees the condition on the commit's request."""
    uri = cloud.new_table_uri()
    seen = []
    original = cloud.proxy._forward

    def spy(method, path, headers, body):
        where = path.replace("%2F", "/") + body[:4096].decode("latin-1")
        if method in ("PUT", "POST") and f"_delta_log/{_commit(0)}" in where:
            seen.append((headers.get("If-None-Match"), "ifGenerationMatch=0" in path))
        return original(method, path, headers, body)

    cloud.proxy._forward = spy
    try:
        lakelog.write_table(uri, pa.table({"id": [1]}), storage_options=cloud.proxy_options)
    finally:
        cloud.proxy._forward = original
    assert seen and all((inm == "*") if cloud.kind == "azure" else gen for inm, gen in seen)


# ---------------------------------------------------------------- the table operations


def test_round_trip_dml_checkpoint_vacuum_restore(cloud):
    uri, opts = cloud.new_table_uri(), cloud.storage_options
    lakelog.write_table(uri, pa.table({"id": [1, 2, 3], "p": ["a", "b", "a"]}), partition_by=["p"], storage_options=opts,
                        configuration={"delta.checkpointInterval": "3"})
    lakelog.write_table(uri, pa.table({"id": [4], "p": ["b"]}), storage_options=opts)
    t = lakelog.Table(uri, storage_options=opts)
    t.delete("id = 2")
    t.update({"id": "id + 10"}, "id = 4")
    names = _log_names(uri, opts)
    assert "00000000000000000003.checkpoint.parquet" in names and "_last_checkpoint" in names
    assert _ids(uri, opts) == [1, 3, 14] == _peer_ids(uri, cloud)
    assert _peer_ids(uri, cloud, version=1) == [1, 2, 3, 4]
    t = lakelog.Table(uri, storage_options=opts)
    t.restore(version=1)
    assert _ids(uri, opts) == [1, 2, 3, 4] == _peer_ids(uri, cloud)
    lakelog.write_table(uri, pa.table({"id": [9], "p": ["c"]}), mode="overwrite", storage_options=opts)
    t = lakelog.Table(uri, storage_options=opts)
    removed = t.vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False)
    assert removed and all(not Storage(uri, opts).exists(Storage(uri, opts).join(r)) for r in removed)
    assert _ids(uri, opts) == [9] == _peer_ids(uri, cloud)


def test_v2_checkpoint_change_feed_and_deletion_vectors(cloud):
    uri, opts = cloud.new_table_uri(), cloud.storage_options
    conf = {"delta.checkpointPolicy": "v2", "delta.checkpointInterval": "2", "delta.enableDeletionVectors": "true",
            "delta.enableChangeDataFeed": "true"}
    lakelog.write_table(uri, pa.table({"id": list(range(10)), "q": [i * 10 for i in range(10)]}), configuration=conf, storage_options=opts)
    t = lakelog.Table(uri, storage_options=opts)
    t.delete("id < 3")
    t.update({"q": "q + 1"}, "id = 5")
    names = _log_names(uri, opts)
    assert any(n.startswith("00000000000000000002.checkpoint.") and n.endswith(".json") or ".checkpoint." in n and n.count(".") > 2
               for n in names), names
    files = Storage(uri, opts).list_files(Storage(uri, opts).root)
    assert any(f.name.startswith("deletion_vector_") for f in files)
    assert any(f.name.startswith("_change_data/") for f in files)
    assert _ids(uri, opts) == list(range(3, 10)) == _peer_ids(uri, cloud)
    changes = lakelog.Table(uri, storage_options=opts).changes(starting_version=1)
    kinds = sorted((r["id"], r["_change_type"]) for r in changes.select(["id", "_change_type"]).to_pylist())
    assert kinds == [(0, "delete"), (1, "delete"), (2, "delete"), (5, "update_postimage"), (5, "update_preimage")]
    # From version 0, filtered: delta-rs' load_cdf from a later version lists the log with start-after,
    # which fake-gcs-server's XML API does not answer as GCS does ("Invalid table version").
    peer = deltalake.DeltaTable(uri, storage_options=cloud.deltalake_options).load_cdf(starting_version=0).read_all()
    peer = pa.table(peer).to_pylist()
    assert sorted((r["id"], r["_change_type"]) for r in peer if r["_commit_version"] >= 1) == kinds


# ---------------------------------------------------------------- URLs, options, credentials


def test_urls_as_users_write_them(azurite, gcs_server):
    path = f"{uuid.uuid4().hex}/t"
    for uri in (f"abfss://{azurite.bucket}@devstoreaccount1.dfs.core.windows.net/{path}",
                f"abfs://{azurite.bucket}@devstoreaccount1.dfs.core.windows.net/{path}",
                f"az://{azurite.bucket}/{path}"):
        lakelog.write_table(uri, pa.table({"id": [len(uri)]}), storage_options=azurite.storage_options)
    assert lakelog.Table(f"az://{azurite.bucket}/{path}").version == 2
    gs = f"gs://{gcs_server.bucket}/{path}"
    lakelog.write_table(gs, pa.table({"id": [1]}))
    assert _ids(f"gcs://{gcs_server.bucket}/{path}", {}) == [1]


def test_delta_rs_option_names_and_standard_variables(azurite, gcs_server, monkeypatch, tmp_path):
    from lakelog.storage.azure import EMULATOR_KEY

    uri = azurite.new_table_uri()
    conn = f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={EMULATOR_KEY};BlobEndpoint={azurite.emulator.url}/devstoreaccount1;"
    lakelog.write_table(uri, pa.table({"id": [1]}), storage_options={"azure_storage_connection_string": conn})
    keyed = {"AZURE_STORAGE_ACCOUNT_NAME": "devstoreaccount1", "azure_storage_account_key": EMULATOR_KEY,
             "azure_storage_endpoint": f"{azurite.emulator.url}/devstoreaccount1"}
    lakelog.write_table(uri, pa.table({"id": [2]}), storage_options=keyed)
    monkeypatch.delenv("AZURE_STORAGE_USE_EMULATOR")
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", conn)
    lakelog.write_table(uri, pa.table({"id": [3]}))
    assert _ids(uri, {}) == [1, 2, 3]
    # GCS: the service account file (delta-rs' emulator fields), the key as JSON, the standard variable
    gs = gcs_server.new_table_uri()
    sa = gcs_server.storage_options["google_service_account"]
    lakelog.write_table(gs, pa.table({"id": [1]}), storage_options={"google_service_account_path": sa})
    with open(sa) as f:
        lakelog.write_table(gs, pa.table({"id": [2]}), storage_options={"google_service_account_key": f.read()})
    monkeypatch.delenv("STORAGE_EMULATOR_HOST")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", sa)
    assert _ids(gs, {"google_service_account": sa}) == [1, 2]
    with pytest.raises(InvalidArgumentError, match="azure_storage_acount_key"):
        lakelog.read_table(uri, storage_options={"azure_storage_acount_key": "x"})
    with pytest.raises(InvalidArgumentError, match="google_service_acount"):
        lakelog.read_table(gs, storage_options={"google_service_acount": sa})


def test_credentials_never_reach_the_table_or_errors(azurite, tmp_path):
    from lakelog.storage.azure import EMULATOR_KEY

    uri = azurite.new_table_uri()
    opts = {"azure_storage_account_name": "devstoreaccount1", "azure_storage_account_key": EMULATOR_KEY,
            "azure_storage_endpoint": f"{azurite.emulator.url}/devstoreaccount1"}
    lakelog.write_table(uri, pa.table({"id": [1, 2]}), storage_options=opts, configuration={"delta.checkpointInterval": "1"})
    lakelog.Table(uri, storage_options=opts).delete("id = 1")
    s = Storage(uri, opts)
    blobs = s.read_many([f.path for f in s.list_files(s.root)])
    assert blobs and not any(EMULATOR_KEY.encode() in b or EMULATOR_KEY[:20].encode() in b for b in blobs.values())
    assert EMULATOR_KEY not in repr(s) and EMULATOR_KEY not in repr(lakelog.Table(uri, storage_options=opts))
    errors = []
    for call in (lambda: lakelog.write_table(uri, pa.table({"id": [3]}), storage_options={**opts, "azure_storage_account_key": EMULATOR_KEY[:-4] + "AAA="}),
                 lambda: lakelog.read_table(uri, storage_options={**opts, "azure_storage_acount_key": EMULATOR_KEY})):
        with pytest.raises(Exception) as e:
            call()
        errors.append(f"{e.value!r} {e.value}")
    assert all(EMULATOR_KEY not in text for text in errors), errors


def test_gcs_is_opened_without_gcsfs_bucket_layout_probe(gcs_server):
    """gcsfs's registered gs:// class asks a gRPC API for each bucket's layout first, which against an
    emulator waits 60 s; lakelog opens gcsfs's core class, so a first write to a new bucket is quick."""
    import time

    import fsspec
    import gcsfs.core

    bucket = f"lakelog-fresh-{uuid.uuid4().hex[:8]}"
    gcs_server.make_bucket(bucket)
    uri = gcs_server.new_table_uri(bucket)
    fs = Storage(uri).fs
    registered = fsspec.get_filesystem_class("gs")
    assert isinstance(fs, gcsfs.core.GCSFileSystem) and (registered is gcsfs.core.GCSFileSystem or not isinstance(fs, registered))
    started = time.perf_counter()
    lakelog.write_table(uri, pa.table({"id": [1]}))
    assert _ids(uri, {}) == [1]
    assert time.perf_counter() - started < 20

"""Listing the log from the last checkpoint on object stores (S3 ``StartAfter``, GCS ``startOffset``,
Azure ``startFrom``): loading the latest version lists only the log's tail, and everything that needs
older versions (time travel, history, the change feed, vacuum, restore) still sees the whole log.
"""

from __future__ import annotations

import warnings
from urllib.parse import parse_qs

import pyarrow as pa
import pytest

import lakelog
from lakelog.log import DeltaLog
from lakelog.storage import Storage


def _commit(v: int) -> str:
    return f"{v:020d}.json"


@pytest.fixture(params=["s3", "azure", "gcs"])
def store(request):
    """(new table uri, storage options) on each store that can begin a listing at a name."""
    endpoint = request.getfixturevalue({"s3": "s3_endpoint", "azure": "azurite", "gcs": "gcs_server"}[request.param])
    if request.param != "s3":
        endpoint.proxy.clear()
    return endpoint.new_table_uri(), dict(endpoint.storage_options)


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
    uri, opts = store
    ids = _table_with_checkpoint(uri, opts)
    storage = Storage(uri, opts)
    assert [f.name for f in storage.list_log("00000000000000000012")] == [_commit(12), _commit(13), "_last_checkpoint"]

    t = lakelog.Table(uri, storage_options=opts)
    listing = t.snapshot.listing
    assert listing.partial and listing.listed_from == 10
    assert sorted(listing.commits) == [10, 11, 12, 13] and list(listing.checkpoints) == [10]
    assert t.version == 13 and _ids(t) == ids


def test_what_needs_older_versions_sees_the_whole_log(store):
    uri, opts = store
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
    uri, opts = store
    ids = _table_with_checkpoint(uri, opts)
    t = lakelog.Table(uri, storage_options=opts)
    lakelog.write_table(uri, pa.table({"id": [14]}), storage_options=opts)
    t.refresh()
    assert t.version == 14 and _ids(t) == ids + [14]
    assert t.snapshot.listing.listed_from == 13


def test_a_hint_naming_a_missing_checkpoint_falls_back_to_the_whole_log(store):
    uri, opts = store
    ids = _table_with_checkpoint(uri, opts)
    storage = Storage(uri, opts)
    storage.delete(storage.log_file("00000000000000000010.checkpoint.parquet"))
    t = lakelog.Table(uri, storage_options=opts)
    assert not t.snapshot.listing.partial and _ids(t) == ids


def test_an_unusable_checkpoint_falls_back_to_the_commits_before_it(store):
    uri, opts = store
    ids = _table_with_checkpoint(uri, opts)
    storage = Storage(uri, opts)
    storage.put(storage.log_file("00000000000000000010.checkpoint.parquet"), b"not parquet")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        t = lakelog.Table(uri, storage_options=opts)
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

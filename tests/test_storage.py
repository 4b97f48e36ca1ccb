"""Table locations: every spelling of a location names the directory (or object-store prefix) delta-rs
opens for it."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import lakelog
from lakelog.dml.file_rewrites import TableState
from lakelog.errors import InvalidArgumentError
from lakelog.storage import resolve_location
from tests.table_files import table_fs


def _rows(path, **kwargs) -> list[int]:
    return sorted(lakelog.read_table(path, **kwargs).column("id").to_pylist())


def _peer_rows(uri, **kwargs) -> list[int]:
    return sorted(DeltaTable(uri, **kwargs).to_pyarrow_table().column("id").to_pylist())


def _local_spellings(directory: str) -> list[str]:
    """Ways to name the absolute local directory ``directory`` (which holds a space and a '%')."""
    encoded = directory.replace("%", "%25").replace(" ", "%20")
    return [directory, f"file://{encoded}", f"file:{encoded}", f"file://localhost{encoded}"]


@pytest.mark.parametrize("spelling", range(4), ids=["plain", "file-url", "file-colon", "file-localhost"])
def test_file_urls_are_percent_decoded_as_delta_rs_decodes_them(tmp_path, spelling):
    """file:///.../my%20table used to write into a literal 'my%20table' directory, which delta-rs does not open."""
    directory = str(tmp_path / "my table 50%")
    uri = _local_spellings(directory)[spelling]
    assert lakelog.write_table(uri, pa.table({"id": [1, 2]})) == 0
    assert sorted(os.listdir(tmp_path)) == ["my table 50%"]
    write_deltalake(uri, pa.table({"id": [3]}), mode="append")
    assert sorted(os.listdir(tmp_path)) == ["my table 50%"]
    for other in _local_spellings(directory):
        assert _rows(other) == [1, 2, 3]
        assert _peer_rows(other) == [1, 2, 3]
    assert lakelog.Table(uri).version == 1


def test_relative_and_home_paths_name_what_delta_rs_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    os.makedirs(tmp_path / "home")
    lakelog.write_table("rel/t", pa.table({"id": [1]}))
    lakelog.write_table("~/t", pa.table({"id": [2]}))
    assert os.path.isdir(tmp_path / "rel" / "t" / "_delta_log") and os.path.isdir(tmp_path / "home" / "t" / "_delta_log")
    assert _peer_rows("rel/t") == [1] and _peer_rows("~/t") == [2]
    assert _rows(str(tmp_path / "rel" / "t")) == [1] and _rows(str(tmp_path / "home" / "t")) == [2]
    # A plain path is literal: '%20' in it is three characters, as delta-rs writes it.
    lakelog.write_table("a%20b", pa.table({"id": [3]}))
    assert os.path.isdir(tmp_path / "a%20b" / "_delta_log")


_WRITE_SHIPPED_PLAN = """
import pickle, sys
import pyarrow as pa
plan = pickle.load(sys.stdin.buffer)
sys.stdout.buffer.write(pickle.dumps(plan.write(pa.table({"id": [1, 2]}))))
"""


def test_a_plan_for_a_relative_path_is_written_from_any_working_directory(tmp_path, monkeypatch):
    """A WritePlan is shipped to the processes that write its files (a Spark executor runs in a work
    directory of its own); its relative path used to name another directory there, so the commit named
    files that were not in the table. A plan, and a copy-on-write rewrite's TableState, hold the
    table's absolute location."""
    monkeypatch.chdir(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    plan = lakelog.plan_write("rel/t", pa.schema([("id", pa.int64())]))
    r = subprocess.run([sys.executable, "-c", _WRITE_SHIPPED_PLAN], input=pickle.dumps(plan), cwd=elsewhere, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    assert plan.commit(pickle.loads(r.stdout)) == 0
    assert _rows("rel/t") == [1, 2] and _peer_rows(str(tmp_path / "rel" / "t")) == [1, 2]
    assert os.listdir(elsewhere) == []
    assert TableState.of(lakelog.Table("rel/t").snapshot, None).path == str(tmp_path / "rel" / "t")


@pytest.mark.parametrize(
    "uri",
    ["file://otherhost/tmp/t", "file:relative/t", "file:///tmp/t?version=1", "file:///tmp/run#1", "file:///tmp/%FF", "s3://bucket/t?x=1"],
    ids=["remote-host", "relative-file-url", "query", "fragment", "not-utf8", "s3-query"],
)
def test_ambiguous_locations_are_refused(uri):
    """delta-rs drops a query or fragment and refuses other hosts; lakelog refuses them all, by name,
    rather than open another table than the peer would."""
    with pytest.raises(InvalidArgumentError, match="table location"):
        lakelog.Table(uri)
    assert isinstance(InvalidArgumentError("x"), ValueError)


def test_resolve_location_forms():
    assert resolve_location("s3://bucket/my%20table") == "s3://bucket/my table"
    assert resolve_location("s3://bucket/my table") == "s3://bucket/my table"
    assert resolve_location("s3://bucket/a%2Fb") == "s3://bucket/a/b"  # as object_store decodes it
    assert resolve_location("s3://bucket/100%") == "s3://bucket/100%"  # not an escape: kept
    assert resolve_location("memory://t%20x/y") == "memory://t x/y"
    assert resolve_location("/tmp/my%20table") == "/tmp/my%20table"
    assert resolve_location("C:/data/t") == "C:/data/t"
    assert resolve_location("file:///tmp/e%25f") == "/tmp/e%f"


def test_object_keys_with_spaces(object_store):
    """bucket/prefix/my%20table and bucket/prefix/my table are one prefix, 'my table', as in delta-rs, on
    S3, Azure and GCS."""
    base = object_store.uri.rsplit("/", 1)[0]
    encoded, plain = f"{base}/my%20table", f"{base}/my table"
    options = object_store.deltalake_options
    lakelog.write_table(encoded, pa.table({"id": [1]}))
    if object_store.kind == "gcs":
        # delta-rs cannot write to fake-gcs-server: it answers object_store's upload (an XML-API PUT of
        # /lakelog%2Dtests/<key with '/' as %2F>) with 400 "invalid uploadType". lakelog appends instead,
        # through the other spelling.
        lakelog.write_table(plain, pa.table({"id": [2]}))
    else:
        write_deltalake(encoded, pa.table({"id": [2]}), mode="append", storage_options=options)
    fs, prefix = table_fs(base)
    assert [p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(prefix)] == ["my table"]
    for uri in (encoded, plain):
        assert _rows(uri) == [1, 2]
        assert _peer_rows(uri, storage_options=options) == [1, 2]

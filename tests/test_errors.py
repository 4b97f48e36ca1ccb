"""Error paths: each failure raises its exact lakelog error type, and committed data stays readable.

Logs are damaged or hand-written with plain fsspec calls (no lakelog internals), so the tests run the
same way on the local filesystem and on ``memory://`` (the ``any_table_path`` fixture).
"""

from __future__ import annotations

import datetime as dt
import io
import json
import re

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakelog
from lakelog.errors import (
    CorruptDeletionVectorError,
    CorruptLogError,
    InvalidFilterError,
    InvalidPathError,
    LakelogError,
    SchemaMismatchError,
    TableExistsError,
    TableNotFoundError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)

# ---------------------------------------------------------------- helpers


def _fs(path: str):
    return fsspec.core.url_to_fs(path)


def _commit_name(v: int) -> str:
    return f"{v:020d}.json"


def _log_path(path: str, name: str) -> str:
    fs, root = _fs(path)
    return f"{root}/_delta_log/{name}"


def _log_names(path: str) -> set[str]:
    fs, root = _fs(path)
    fs.invalidate_cache()
    try:
        return {p.rsplit("/", 1)[-1] for p in fs.ls(f"{root}/_delta_log", detail=False)}
    except FileNotFoundError:
        return set()


def _commits(path: str) -> list[int]:
    return sorted(int(n[:20]) for n in _log_names(path) if re.fullmatch(r"\d{20}\.json", n))


def _data_files(path: str) -> set[str]:
    """Every .parquet file under the table root outside _delta_log (committed or not), relative."""
    fs, root = _fs(path)
    fs.invalidate_cache()
    out = set()
    for p in fs.find(root):
        rel = p[len(root.rstrip("/")) + 1 :] if p.startswith(root.rstrip("/")) else p.split(root.strip("/"), 1)[-1].lstrip("/")
        if not rel.startswith("_delta_log") and rel.endswith(".parquet"):
            out.add(rel)
    return out


def _read_log_bytes(path: str, v: int) -> bytes:
    fs, _ = _fs(path)
    return fs.cat_file(_log_path(path, _commit_name(v)))


def _write_log_bytes(path: str, v: int, data: bytes) -> None:
    fs, root = _fs(path)
    fs.makedirs(f"{root}/_delta_log", exist_ok=True)
    fs.pipe_file(_log_path(path, _commit_name(v)), data)


def _write_commit(path: str, v: int, actions: list[dict]) -> None:
    _write_log_bytes(path, v, b"".join(json.dumps(a).encode() + b"\n" for a in actions))


def _remove_commit(path: str, v: int) -> None:
    fs, _ = _fs(path)
    fs.rm_file(_log_path(path, _commit_name(v)))


def _write_parquet(path: str, rel: str, table: pa.Table) -> int:
    """Write a Parquet file at table-root-relative ``rel`` (or an absolute fs path); return its size."""
    fs, root = _fs(path)
    full = rel if rel.startswith("/") else f"{root}/{rel}"
    fs.makedirs(full.rsplit("/", 1)[0], exist_ok=True)
    buf = io.BytesIO()
    pq.write_table(table, buf)
    fs.pipe_file(full, buf.getvalue())
    return len(buf.getvalue())


SCHEMA_STRING = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "name", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
)


def _protocol(reader: int = 1, writer: int = 2, reader_features=None, writer_features=None) -> dict:
    p = {"minReaderVersion": reader, "minWriterVersion": writer}
    if reader_features is not None:
        p["readerFeatures"] = reader_features
    if writer_features is not None:
        p["writerFeatures"] = writer_features
    return {"protocol": p}


def _metadata(configuration: dict | None = None) -> dict:
    return {
        "metaData": {
            "id": "5b7c1e2e-0000-4000-8000-000000000000",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": SCHEMA_STRING,
            "partitionColumns": [],
            "configuration": configuration or {},
            "createdTime": 1_700_000_000_000,
        }
    }


def _commit_info(op: str = "WRITE") -> dict:
    return {"commitInfo": {"timestamp": 1_700_000_000_000, "operation": op}}


def _add(rel_path: str, size: int = 100) -> dict:
    return {"add": {"path": rel_path, "partitionValues": {}, "size": size, "modificationTime": 1_700_000_000_000, "dataChange": True}}


def _hand_written_table(path: str) -> pa.Table:
    """Version 0 written by hand: protocol 1/2, metaData, one data file. Returns its rows."""
    data = pa.table({"id": pa.array([1, 2], pa.int64()), "name": pa.array(["a", "b"], pa.string())})
    size = _write_parquet(path, "part-00000-hand.parquet", data)
    _write_commit(path, 0, [_commit_info("CREATE TABLE"), _protocol(), _metadata(), _add("part-00000-hand.parquet", size)])
    return data


def _batch(ids, names=None) -> pa.Table:
    names = names if names is not None else [f"n{i}" for i in ids]
    return pa.table({"id": pa.array(ids, pa.int64()), "name": pa.array(names, pa.string())})


def _sorted_rows(t: pa.Table) -> list[dict]:
    return sorted(t.to_pylist(), key=lambda r: (r["id"] is None, r["id"]))


def test_error_hierarchy():
    assert issubclass(InvalidPathError, CorruptLogError)
    for e in (CorruptLogError, UnsupportedFeatureError, SchemaMismatchError, TableExistsError, TableNotFoundError, VersionNotFoundError):
        assert issubclass(e, LakelogError)


# ---------------------------------------------------------------- torn / truncated commits


def _cut_last_line_midway(data: bytes) -> bytes:
    body = data.rstrip(b"\n")
    last_start = body.rfind(b"\n") + 1
    last = body[last_start:]
    assert len(last) > 10
    return body[: last_start + len(last) // 2]


def _cut_first_line_midway(data: bytes) -> bytes:
    first = data.split(b"\n", 1)[0]
    return first[: len(first) // 2]


@pytest.mark.parametrize("cut", [_cut_last_line_midway, _cut_first_line_midway, lambda d: b""], ids=["last-line", "first-line", "empty"])
def test_truncated_newest_commit_is_corrupt_and_older_version_readable(any_table_path, cut):
    path = any_table_path
    assert lakelog.write_table(path, _batch([1, 2])) == 0
    assert lakelog.write_table(path, _batch([3, 4])) == 1
    _write_log_bytes(path, 1, cut(_read_log_bytes(path, 1)))

    name = re.escape(_commit_name(1))
    with pytest.raises(CorruptLogError, match=name):
        lakelog.read_table(path)
    with pytest.raises(CorruptLogError, match=name):
        lakelog.Table(path)
    with pytest.raises(CorruptLogError, match=name):
        lakelog.read_table(path, version=1)

    # Everything committed before the torn file is intact.
    assert _sorted_rows(lakelog.read_table(path, version=0)) == _sorted_rows(_batch([1, 2]))
    assert lakelog.Table(path, version=0).version == 0

    # A writer must not commit on top of a log it cannot read.
    with pytest.raises(CorruptLogError):
        lakelog.write_table(path, _batch([5]))
    assert _commits(path) == [0, 1]


def test_commit_without_trailing_newline_is_not_corrupt(any_table_path):
    """Only a torn line is corruption: a complete last line without '\\n' is a valid commit."""
    path = any_table_path
    lakelog.write_table(path, _batch([1]))
    lakelog.write_table(path, _batch([2]))
    _write_log_bytes(path, 1, _read_log_bytes(path, 1).rstrip(b"\n"))
    assert sorted(lakelog.read_table(path).column("id").to_pylist()) == [1, 2]


# ---------------------------------------------------------------- gaps


def test_gap_in_versions_is_corrupt(any_table_path):
    path = any_table_path
    for i in range(3):
        assert lakelog.write_table(path, _batch([i])) == i
    _remove_commit(path, 1)

    with pytest.raises(CorruptLogError, match="gap"):
        lakelog.read_table(path)
    with pytest.raises(CorruptLogError):
        lakelog.Table(path)
    with pytest.raises(CorruptLogError):
        lakelog.read_table(path, version=2)
    with pytest.raises(CorruptLogError):
        lakelog.read_table(path, version=1)
    # Version 0 does not depend on the missing commit.
    assert lakelog.read_table(path, version=0).column("id").to_pylist() == [0]
    # No writer commits on top of a gapped log.
    with pytest.raises(CorruptLogError):
        lakelog.write_table(path, _batch([9]))
    assert _commits(path) == [0, 2]


def test_gap_covered_by_checkpoint_is_readable(any_table_path):
    """Contrast: when a checkpoint covers the missing commit, later versions stay readable."""
    path = any_table_path
    conf = {"delta.checkpointInterval": "2"}
    for i in range(4):
        lakelog.write_table(path, _batch([i]), configuration=conf if i == 0 else None)
    assert f"{2:020d}.checkpoint.parquet" in _log_names(path)
    _remove_commit(path, 1)

    assert sorted(lakelog.read_table(path).column("id").to_pylist()) == [0, 1, 2, 3]
    assert sorted(lakelog.read_table(path, version=2).column("id").to_pylist()) == [0, 1, 2]
    with pytest.raises(CorruptLogError):
        lakelog.read_table(path, version=1)


# ---------------------------------------------------------------- incomplete version 0


def test_version0_without_metadata_is_corrupt(any_table_path):
    path = any_table_path
    size = _write_parquet(path, "part-0.parquet", _batch([1]))
    _write_commit(path, 0, [_commit_info("CREATE TABLE"), _protocol(), _add("part-0.parquet", size)])
    with pytest.raises(CorruptLogError, match="metaData"):
        lakelog.read_table(path)
    with pytest.raises(CorruptLogError, match="metaData"):
        lakelog.Table(path)
    with pytest.raises(CorruptLogError):
        lakelog.write_table(path, _batch([2]))
    assert _commits(path) == [0]


def test_version0_without_protocol_is_corrupt(any_table_path):
    path = any_table_path
    size = _write_parquet(path, "part-0.parquet", _batch([1]))
    _write_commit(path, 0, [_commit_info("CREATE TABLE"), _metadata(), _add("part-0.parquet", size)])
    with pytest.raises(CorruptLogError, match="protocol"):
        lakelog.read_table(path)
    with pytest.raises(CorruptLogError, match="protocol"):
        lakelog.Table(path, version=0)
    with pytest.raises(CorruptLogError):
        lakelog.write_table(path, _batch([2]))
    assert _commits(path) == [0]


_ADD_FIELDS = {"partitionValues": {}, "size": 1, "modificationTime": 0, "dataChange": True}


@pytest.mark.parametrize(
    "bad_action",
    [
        {"add": {"path": 5, **_ADD_FIELDS}},
        {"add": {"path": None, **_ADD_FIELDS}},
        {"add": {**_ADD_FIELDS}},
        {"add": "not-an-object"},
        {"add": [1, 2]},
        {"remove": 3},
        {"add": {"path": "a.parquet", **_ADD_FIELDS, "size": "big"}},
        {"txn": {"appId": "job"}},
        {"metaData": {**_metadata()["metaData"], "schemaString": "{not json"}},
        {"protocol": {"minReaderVersion": "one", "minWriterVersion": 2}},
    ],
    ids=[
        "add-path-int",
        "add-path-null",
        "add-without-path",
        "add-is-a-string",
        "add-is-a-list",
        "remove-is-an-int",
        "add-size-not-a-number",
        "txn-without-version",
        "schemaString-not-json",
        "protocol-version-not-a-number",
    ],
)
def test_malformed_action_is_corrupt_log(any_table_path, bad_action):
    """A parseable line holding a malformed action is a damaged log: CorruptLogError, never a raw
    TypeError/AttributeError/JSONDecodeError from deep inside the reader."""
    path = any_table_path
    actions = [_commit_info("CREATE TABLE"), _protocol(), _metadata(), bad_action]
    _write_commit(path, 0, actions)
    with pytest.raises(CorruptLogError):
        lakelog.read_table(path)
    with pytest.raises(CorruptLogError):
        lakelog.write_table(path, _batch([1]))
    assert _commits(path) == [0]


def test_metadata_without_a_schema_is_a_typed_refusal_not_a_corrupt_log(any_table_path):
    """A metaData with a null schemaString (as Delta Live Tables creates tables) is not damage: reads
    and writes are a TableWithoutSchemaError that says why, and nothing is committed."""
    from lakelog.errors import TableWithoutSchemaError

    path = any_table_path
    _write_commit(path, 0, [_commit_info("CREATE TABLE"), _protocol(), {"metaData": {**_metadata()["metaData"], "schemaString": None}}])
    with pytest.raises(TableWithoutSchemaError, match="no schema"):
        lakelog.read_table(path)
    with pytest.raises(TableWithoutSchemaError):
        lakelog.write_table(path, _batch([1]))
    assert _commits(path) == [0]


def test_hand_written_complete_table_is_readable(any_table_path):
    """Contrast for the hand-written logs above: with protocol and metaData the same log reads fine."""
    data = _hand_written_table(any_table_path)
    assert _sorted_rows(lakelog.read_table(any_table_path)) == _sorted_rows(data)


# ---------------------------------------------------------------- protocol / features


@pytest.mark.parametrize("feature", ["catalogManaged", "madeUpFeatureFromTheFuture"])
def test_unknown_reader_feature_is_refused(any_table_path, feature):
    path = any_table_path
    size = _write_parquet(path, "part-0.parquet", _batch([1]))
    _write_commit(
        path,
        0,
        [_commit_info("CREATE TABLE"), _protocol(3, 7, [feature], [feature]), _metadata(), _add("part-0.parquet", size)],
    )
    with pytest.raises(UnsupportedFeatureError, match=feature):
        lakelog.read_table(path)
    with pytest.raises(UnsupportedFeatureError, match=feature):
        lakelog.Table(path)
    with pytest.raises(UnsupportedFeatureError):
        lakelog.write_table(path, _batch([2]))
    assert _commits(path) == [0]


@pytest.mark.parametrize("reader", [4, 5])
def test_reader_version_above_3_is_refused(any_table_path, reader):
    path = any_table_path
    size = _write_parquet(path, "part-0.parquet", _batch([1]))
    _write_commit(path, 0, [_commit_info("CREATE TABLE"), _protocol(reader, 7, [], []), _metadata(), _add("part-0.parquet", size)])
    with pytest.raises(UnsupportedFeatureError, match=str(reader)):
        lakelog.read_table(path)
    with pytest.raises(UnsupportedFeatureError):
        lakelog.Table(path)


def test_protocol_upgrade_keeps_older_versions_readable(any_table_path):
    """A later commit that raises the protocol beyond lakelog blocks that version only."""
    path = any_table_path
    data = _hand_written_table(path)
    _write_commit(path, 1, [_commit_info("UPGRADE PROTOCOL"), _protocol(3, 7, ["madeUpFeatureFromTheFuture"], ["madeUpFeatureFromTheFuture"])])
    with pytest.raises(UnsupportedFeatureError):
        lakelog.read_table(path)
    with pytest.raises(UnsupportedFeatureError):
        lakelog.write_table(path, _batch([7]))
    assert _commits(path) == [0, 1]
    assert _sorted_rows(lakelog.read_table(path, version=0)) == _sorted_rows(data)


def test_supported_reader_feature_is_readable(any_table_path):
    """Contrast: reader version 3 with only supported features reads."""
    path = any_table_path
    size = _write_parquet(path, "part-0.parquet", _batch([1]))
    _write_commit(
        path,
        0,
        [_commit_info(), _protocol(3, 7, ["timestampNtz"], ["timestampNtz"]), _metadata(), _add("part-0.parquet", size)],
    )
    assert lakelog.read_table(path).column("id").to_pylist() == [1]


def test_undecodable_inline_deletion_vector_is_a_typed_error(any_table_path):
    """An inline DV that is not a RoaringBitmapArray: the file's deleted rows are unknown, so no row of it
    is returned; the error names the data file."""
    path = any_table_path
    size = _write_parquet(path, "part-0.parquet", _batch([1, 2]))
    add = _add("part-0.parquet", size)
    add["add"]["deletionVector"] = {"storageType": "i", "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", "sizeInBytes": 36, "cardinality": 1}
    _write_commit(path, 0, [_commit_info(), _protocol(3, 7, ["deletionVectors"], ["deletionVectors"]), _metadata(), add])
    with pytest.raises(CorruptDeletionVectorError, match="part-0.parquet.*magic number") as info:
        lakelog.read_table(path)
    assert info.value.paths == ["<inline>", "part-0.parquet"]


# ---------------------------------------------------------------- schema mismatch


BASE = pa.table(
    {
        "id": pa.array([1, 2, 3], pa.int64()),
        "name": pa.array(["a", "b", None], pa.string()),
        "score": pa.array([1.5, None, 3.0], pa.float64()),
    }
)


@pytest.mark.parametrize(
    "bad, kwargs",
    [
        (pa.table({"id": pa.array(["4"], pa.string()), "name": ["d"], "score": [4.0]}), {}),
        (pa.table({"id": pa.array([4], pa.int64()), "name": pa.array([4], pa.int64()), "score": [4.0]}), {}),
        (pa.table({"id": pa.array([4], pa.int64()), "name": ["d"], "score": pa.array(["x"], pa.string())}), {}),
        (pa.table({"id": pa.array([4], pa.int64()), "name": ["d"], "score": [4.0], "extra": ["e"]}), {}),
        (pa.table({"id": pa.array(["4"], pa.string()), "name": ["d"], "score": [4.0]}), {"mode": "overwrite"}),
        (pa.table({"id": pa.array([4], pa.int64()), "name": ["d"], "score": [4.0], "extra": ["e"]}), {"mode": "overwrite"}),
        (pa.table({"id": pa.array([4], pa.int64()), "name": ["d"], "score": [4.0]}), {"partition_by": ["name"]}),
    ],
    ids=["id-as-string", "name-as-int", "score-as-string", "extra-column", "overwrite-wrong-type", "overwrite-extra-column", "different-partitioning"],
)
def test_schema_mismatch_leaves_table_unchanged(any_table_path, bad, kwargs):
    path = any_table_path
    assert lakelog.write_table(path, BASE) == 0
    files_before = _data_files(path)

    with pytest.raises(SchemaMismatchError):
        lakelog.write_table(path, bad, **kwargs)

    assert _commits(path) == [0]
    t = lakelog.Table(path)
    assert t.version == 0
    assert t.schema.names == ["id", "name", "score"]
    assert lakelog.read_table(path).sort_by("id").equals(BASE)
    assert _data_files(path) == files_before, "a refused write left data files behind"


def test_schema_merge_adds_column_with_nulls_for_old_rows(any_table_path):
    path = any_table_path
    assert lakelog.write_table(path, BASE) == 0
    more = pa.table({"id": pa.array([4], pa.int64()), "name": ["d"], "score": [4.0], "extra": pa.array(["e"], pa.string())})
    assert lakelog.write_table(path, more, schema_mode="merge") == 1

    t = lakelog.Table(path)
    assert t.schema.names == ["id", "name", "score", "extra"]
    assert t.schema.field("extra").type == pa.string()
    got = lakelog.read_table(path).sort_by("id")
    assert got.column("extra").to_pylist() == [None, None, None, "e"]
    assert got.column("id").to_pylist() == [1, 2, 3, 4]
    # The old version keeps the old schema.
    assert lakelog.read_table(path, version=0).column_names == ["id", "name", "score"]
    # After the merge, data without the new (nullable) column appends fine, with nulls.
    assert lakelog.write_table(path, BASE.slice(0, 1)) == 2
    assert lakelog.read_table(path).column("extra").null_count == 4


# ---------------------------------------------------------------- missing tables


def test_missing_path_is_table_not_found(any_table_path):
    with pytest.raises(TableNotFoundError):
        lakelog.read_table(any_table_path)
    with pytest.raises(TableNotFoundError):
        lakelog.Table(any_table_path)
    with pytest.raises(TableNotFoundError):
        lakelog.read_table(any_table_path, version=0)


def test_directory_without_commits_is_table_not_found(any_table_path):
    fs, root = _fs(any_table_path)
    fs.makedirs(f"{root}/_delta_log", exist_ok=True)
    _write_parquet(any_table_path, "part-stray.parquet", _batch([1]))
    with pytest.raises(TableNotFoundError):
        lakelog.read_table(any_table_path)
    with pytest.raises(TableNotFoundError):
        lakelog.Table(any_table_path)


# ---------------------------------------------------------------- modes


def test_mode_error_on_existing_table(any_table_path):
    path = any_table_path
    assert lakelog.write_table(path, _batch([1]), mode="error") == 0  # creates when absent
    files_before = _data_files(path)
    with pytest.raises(TableExistsError):
        lakelog.write_table(path, _batch([2]), mode="error")
    assert _commits(path) == [0]
    assert lakelog.read_table(path).column("id").to_pylist() == [1]
    assert _data_files(path) == files_before


def test_mode_error_wins_over_schema_mismatch(any_table_path):
    """mode='error' on an existing table is a TableExistsError whatever the data looks like."""
    path = any_table_path
    lakelog.write_table(path, _batch([1]))
    with pytest.raises(TableExistsError):
        lakelog.write_table(path, pa.table({"other": [1.5]}), mode="error")
    assert _commits(path) == [0]


@pytest.mark.parametrize(
    "data, kwargs",
    [
        (pa.table({"id": pa.array(["x"], pa.string()), "name": ["a"]}), {}),
        (pa.table({"other": pa.array([1.5])}), {}),
        (pa.table({"id": pa.array([9], pa.int64()), "name": ["z"]}), {"partition_by": ["name"]}),
    ],
    ids=["wrong-type", "other-columns", "other-partitioning"],
)
def test_mode_ignore_on_existing_table_ignores_the_data_entirely(any_table_path, data, kwargs):
    """mode='ignore' means 'do nothing if the table exists' (as Spark's SaveMode.Ignore and deltalake):
    the data is not checked against the table, nothing is written, the current version is returned."""
    path = any_table_path
    assert lakelog.write_table(path, _batch([1])) == 0
    files_before = _data_files(path)
    assert lakelog.write_table(path, data, mode="ignore", **kwargs) == 0
    assert _commits(path) == [0]
    assert lakelog.read_table(path).column("id").to_pylist() == [1]
    assert _data_files(path) == files_before


def test_mode_ignore_on_existing_table(any_table_path):
    path = any_table_path
    assert lakelog.write_table(path, _batch([1]), mode="ignore") == 0  # creates when absent
    assert lakelog.write_table(path, _batch([2])) == 1
    files_before = _data_files(path)
    assert lakelog.write_table(path, _batch([3]), mode="ignore") == 1
    assert _commits(path) == [0, 1]
    assert sorted(lakelog.read_table(path).column("id").to_pylist()) == [1, 2]
    assert _data_files(path) == files_before


# ---------------------------------------------------------------- versions and timestamps


def test_version_out_of_range(any_table_path):
    path = any_table_path
    lakelog.write_table(path, _batch([1]))
    lakelog.write_table(path, _batch([2]))
    for v in (2, 3, 10**6, -1, -2):
        with pytest.raises(VersionNotFoundError):
            lakelog.read_table(path, version=v)
        with pytest.raises(VersionNotFoundError):
            lakelog.Table(path, version=v)
    assert lakelog.read_table(path, version=1).num_rows == 2


@pytest.mark.parametrize(
    "ts",
    [dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc), dt.datetime(1999, 12, 31), "2000-01-01T00:00:00Z", "1970-01-01T00:00:00+00:00"],
)
def test_timestamp_before_first_commit(any_table_path, ts):
    path = any_table_path
    lakelog.write_table(path, _batch([1]))
    with pytest.raises(VersionNotFoundError):
        lakelog.read_table(path, timestamp=ts)
    with pytest.raises(VersionNotFoundError):
        lakelog.Table(path, timestamp=ts)
    # A timestamp after the commit finds it.
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)
    assert lakelog.Table(path, timestamp=later).version == 0


# ---------------------------------------------------------------- idempotent writes


@pytest.mark.parametrize("interval", [None, "1"], ids=["json-only", "checkpoint-every-commit"])
def test_idempotent_writes(any_table_path, interval):
    path = any_table_path
    conf = {"delta.checkpointInterval": interval} if interval else None
    assert lakelog.write_table(path, _batch([0]), configuration=conf) == 0

    assert lakelog.write_table(path, _batch([1, 2]), app_id="job", app_version=3) == 1
    files_after_first = _data_files(path)

    # Same app version: nothing committed, same version returned, no stray files.
    assert lakelog.write_table(path, _batch([1, 2]), app_id="job", app_version=3) == 1
    assert _commits(path) == [0, 1]
    assert lakelog.read_table(path).num_rows == 3
    assert _data_files(path) == files_after_first

    # An older app version is skipped too.
    assert lakelog.write_table(path, _batch([99]), app_id="job", app_version=2) == 1
    assert _commits(path) == [0, 1]
    assert lakelog.read_table(path).num_rows == 3
    assert _data_files(path) == files_after_first

    # A newer app version commits.
    assert lakelog.write_table(path, _batch([4]), app_id="job", app_version=4) == 2
    assert sorted(lakelog.read_table(path).column("id").to_pylist()) == [0, 1, 2, 4]
    # ... and is then itself a duplicate.
    assert lakelog.write_table(path, _batch([4]), app_id="job", app_version=4) == 2

    # Another app id is independent of "job".
    assert lakelog.write_table(path, _batch([5]), app_id="other-job", app_version=1) == 3
    assert lakelog.write_table(path, _batch([6]), app_id="job", app_version=4) == 3  # still a duplicate
    assert sorted(lakelog.read_table(path).column("id").to_pylist()) == [0, 1, 2, 4, 5]
    assert _commits(path) == [0, 1, 2, 3]


def test_idempotent_overwrite_is_skipped(any_table_path):
    """A duplicate overwrite must not remove anything either."""
    path = any_table_path
    assert lakelog.write_table(path, _batch([1]), mode="overwrite", app_id="job", app_version=1) == 0
    assert lakelog.write_table(path, _batch([2])) == 1
    assert lakelog.write_table(path, _batch([3]), mode="overwrite", app_id="job", app_version=1) == 1
    assert sorted(lakelog.read_table(path).column("id").to_pylist()) == [1, 2]


# ---------------------------------------------------------------- paths outside the table


BAD_PATHS = [
    "/etc/passwd",
    "/tmp/outside.parquet",
    "../outside.parquet",
    "sub/../../outside.parquet",
    "%2E%2E/outside.parquet",
    "sub%2F..%2F..%2Foutside.parquet",
    "%2Fetc%2Fpasswd",
    "..\\outside.parquet",
    "file:///etc/passwd",
    "s3://bucket/outside.parquet",
    "C:/outside.parquet",
]


@pytest.mark.parametrize("bad", BAD_PATHS)
def test_add_path_outside_table_is_refused(any_table_path, bad):
    path = any_table_path
    fs, root = _fs(path)
    # A real Parquet file next to the table, so a reader that followed '..' would find data.
    parent = root.rstrip("/").rsplit("/", 1)[0]
    _write_parquet(path, f"{parent}/outside.parquet", _batch([666]))
    _write_commit(path, 0, [_commit_info("CREATE TABLE"), _protocol(), _metadata(), _add(bad)])

    with pytest.raises(InvalidPathError):
        lakelog.read_table(path)
    with pytest.raises(CorruptLogError):  # InvalidPathError is a CorruptLogError
        lakelog.Table(path)


@pytest.mark.parametrize("bad", ["../outside.parquet", "/etc/passwd", "%2E%2E/outside.parquet"])
def test_bad_path_in_later_commit_keeps_older_version_readable(any_table_path, bad):
    path = any_table_path
    data = _hand_written_table(path)
    _write_commit(path, 1, [_commit_info(), _add(bad)])
    with pytest.raises(InvalidPathError):
        lakelog.read_table(path)
    assert _sorted_rows(lakelog.read_table(path, version=0)) == _sorted_rows(data)


@pytest.mark.parametrize("bad", ["../outside.parquet", "/etc/passwd"])
def test_remove_path_outside_table_is_refused(any_table_path, bad):
    path = any_table_path
    _hand_written_table(path)
    _write_commit(path, 1, [_commit_info("DELETE"), {"remove": {"path": bad, "deletionTimestamp": 1_700_000_000_001, "dataChange": True}}])
    with pytest.raises(InvalidPathError):
        lakelog.read_table(path)


# ---------------------------------------------------------------- uncommitted files


def test_uncommitted_parquet_files_are_invisible(any_table_path):
    path = any_table_path
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"], "p": ["x", "x", "y"]})
    assert lakelog.write_table(path, data, partition_by=["p"]) == 0
    committed = set(lakelog.Table(path).files())
    assert len(committed) == 2

    stray = pa.table({"id": pa.array([100, 101], pa.int64()), "name": ["stray", "stray"]})
    orphans = [
        "part-00000-00000000-0000-0000-0000-000000000000.snappy.parquet",  # table root
        "p=x/part-00000-11111111-1111-1111-1111-111111111111.snappy.parquet",  # existing partition
        "p=zzz/part-00000-22222222-2222-2222-2222-222222222222.snappy.parquet",  # new partition dir
    ]
    for rel in orphans:
        _write_parquet(path, rel, stray)
    assert set(orphans) <= _data_files(path)

    def check():
        t = lakelog.Table(path)
        files = t.files()
        assert not set(files) & set(orphans)
        assert set(files) == committed | extra_committed
        assert t.files(filters=[("p", "=", "zzz")]) == []
        got = lakelog.read_table(path)
        assert 100 not in got.column("id").to_pylist()
        assert sorted(got.column("id").to_pylist()) == sorted(expected_ids)
        in_x = sorted(lakelog.read_table(path, filters=[("p", "=", "x")]).column("id").to_pylist())
        assert in_x == [i for i in sorted(expected_ids) if i != 3]  # 3 is the only committed row in p=y
        assert lakelog.read_table(path, filters=[("p", "=", "zzz")]).num_rows == 0
        ds_rows = t.to_pyarrow_dataset().to_table().column("id").to_pylist()
        assert sorted(ds_rows) == sorted(expected_ids)

    extra_committed: set[str] = set()
    expected_ids = [1, 2, 3]
    check()

    # Still invisible after further commits (and a checkpoint).
    lakelog.write_table(path, pa.table({"id": pa.array([4], pa.int64()), "name": ["d"], "p": ["x"]}))
    extra_committed = set(lakelog.Table(path).files()) - committed
    assert len(extra_committed) == 1
    expected_ids = [1, 2, 3, 4]
    lakelog.Table(path).checkpoint()
    check()


def test_stray_files_in_delta_log_are_ignored(any_table_path):
    path = any_table_path
    lakelog.write_table(path, _batch([1]))
    fs, root = _fs(path)
    garbage = b'{"add": {"path": "nope.parquet", "partitionValues": {}, "size": 1, "modificationTime": 0, "dataChange": true}}\n'
    for name in (f".{_commit_name(1)}.deadbeef.tmp", f"{_commit_name(1)}.tmp", f"{1:020d}.crc", "00000000000000000001.checkpoint.0000000001.0000000002.parquet"):
        fs.pipe_file(f"{root}/_delta_log/{name}", garbage)
    t = lakelog.Table(path)
    assert t.version == 0
    assert t.to_pyarrow().column("id").to_pylist() == [1]
    # The next real commit takes version 1 despite the look-alike names.
    assert lakelog.write_table(path, _batch([2])) == 1
    assert sorted(lakelog.read_table(path).column("id").to_pylist()) == [1, 2]


# ---------------------------------------------------------------- hostile logs: a typed error (or a correct read), and check agrees


def _check_problems(path: str, version: int | None = None) -> list[str]:
    """The kinds of problems ``lakelog check`` reports (it must never raise on a damaged log)."""
    from lakelog.check import check_table

    return sorted({p.kind for p in check_table(path, version=version).problems})


PARTITIONED_SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "p", "type": "integer", "nullable": True, "metadata": {}},
            {"name": "flag", "type": "boolean", "nullable": True, "metadata": {}},
        ],
    }
)


def _partitioned(path: str, partition_values, schema_string: str = PARTITIONED_SCHEMA, partition_columns=("p", "flag")) -> None:
    """Version 0 written by hand: one data file (column id) whose add carries ``partition_values``
    (``...`` leaves the field out)."""
    size = _write_parquet(path, "part-0.parquet", pa.table({"id": pa.array([1, 2], pa.int64())}))
    add = {"path": "part-0.parquet", "size": size, "modificationTime": 1_700_000_000_000, "dataChange": True}
    if partition_values is not ...:
        add["partitionValues"] = partition_values
    meta = _metadata()
    meta["metaData"].update(schemaString=schema_string, partitionColumns=list(partition_columns))
    _write_commit(path, 0, [_commit_info("CREATE TABLE"), _protocol(), meta, {"add": add}])


@pytest.mark.parametrize("values,expected", [({"p": 5, "flag": True}, (5, True)), ({"p": "5", "flag": "true"}, (5, True)), ({"p": None, "flag": False}, (None, False))])
def test_partition_values_as_json_numbers_and_booleans_read_as_their_text(any_table_path, values, expected):
    """{"p": 5} is read as "5", as delta-rs reads it; check agrees that the table is fine."""
    path = any_table_path
    _partitioned(path, values)
    rows = lakelog.read_table(path).to_pylist()
    assert sorted((r["id"], r["p"], r["flag"]) for r in rows) == [(1, *expected), (2, *expected)]
    assert lakelog.Table(path).files(filters=[("p", "=", 5)]) == (["part-0.parquet"] if expected[0] == 5 else [])
    assert _check_problems(path) == []
    if "://" not in path:  # the peer agrees (local tables; delta-rs has no fsspec memory store)
        from deltalake import DeltaTable

        peer = DeltaTable(path).to_pyarrow_table()
        assert sorted((r["id"], r["p"], r["flag"]) for r in peer.to_pylist()) == [(1, *expected), (2, *expected)]


@pytest.mark.parametrize(
    "values",
    [{"p": "abc", "flag": "true"}, {"p": "1", "flag": "yes"}, {"p": "99999999999", "flag": "true"}, {"p": "1.5", "flag": "true"}, {"p": "1"}, {}],
    ids=["int-not-a-number", "bool-not-true-false", "int-out-of-range", "int-with-fraction", "missing-column", "empty"],
)
def test_partition_values_that_do_not_fit_their_column_are_corrupt(any_table_path, values):
    path = any_table_path
    _partitioned(path, values)
    t = lakelog.Table(path)  # opening reads no partition value
    with pytest.raises(CorruptLogError, match="part-0.parquet"):
        t.to_pyarrow()
    with pytest.raises(CorruptLogError, match="part-0.parquet"):
        t.files(filters=[("id", ">", 0)])
    assert _check_problems(path) == ["invalid_partition_values"]


@pytest.mark.parametrize("values", [..., None, {"p": {"nested": 1}, "flag": "true"}, {"p": [1], "flag": "true"}, "p=1"], ids=["absent", "null", "object", "list", "string"])
def test_add_without_a_partition_values_map_is_corrupt(any_table_path, values):
    """partitionValues is required: an add without it used to read as null partition values."""
    path = any_table_path
    _partitioned(path, values)
    with pytest.raises(CorruptLogError, match="partitionValues"):
        lakelog.Table(path)
    assert _check_problems(path) == ["corrupt_commit", "unreadable_version", "version_gap"]


@pytest.mark.parametrize("columns", [["nope"], ["p", "p"], ["s"]], ids=["not-in-schema", "twice", "nested"])
def test_partition_columns_must_be_primitive_schema_columns(any_table_path, columns):
    path = any_table_path
    schema = json.loads(PARTITIONED_SCHEMA)
    schema["fields"].append({"name": "s", "type": {"type": "struct", "fields": [{"name": "x", "type": "long", "nullable": True, "metadata": {}}]}, "nullable": True, "metadata": {}})
    _partitioned(path, {c: "1" for c in columns}, json.dumps(schema), columns)
    with pytest.raises(CorruptLogError, match="partitionColumns"):
        lakelog.Table(path)
    assert _check_problems(path) == ["unreadable_version"]


@pytest.mark.parametrize(
    "column_type",
    [
        "decimal(5,9)",
        "decimal(40,2)",
        "decimal(0,0)",
        {"type": "array", "containsNull": True},
        {"type": "map", "keyType": "string"},
        {"type": "struct", "fields": "id"},
        {"type": 5},
        7,
        None,
    ],
    ids=["scale-above-precision", "precision-above-38", "precision-0", "array-without-element", "map-without-value", "struct-fields-not-a-list", "type-not-a-name", "a-number", "null"],
)
def test_invalid_column_types_in_the_schema_are_corrupt(any_table_path, column_type):
    path = any_table_path
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}, {"name": "x", "type": column_type, "nullable": True, "metadata": {}}]}
    meta = _metadata()
    meta["metaData"]["schemaString"] = json.dumps(schema)
    _write_commit(path, 0, [_commit_info("CREATE TABLE"), _protocol(), meta])
    with pytest.raises(CorruptLogError, match="schemaString"):
        lakelog.Table(path)
    assert _check_problems(path) == ["unreadable_version"]  # and check did not raise


@pytest.mark.parametrize(
    "schema_fields",
    [
        [{"name": "id", "type": "long", "nullable": True}, {"name": "ID", "type": "long", "nullable": True}],
        [{"name": "id", "type": "long", "nullable": "yes"}],
        [{"name": "", "type": "long", "nullable": True}],
        [{"type": "long", "nullable": True}],
        ["id"],
    ],
    ids=["duplicate-name", "nullable-not-a-bool", "empty-name", "no-name", "field-not-an-object"],
)
def test_invalid_fields_in_the_schema_are_corrupt(any_table_path, schema_fields):
    path = any_table_path
    meta = _metadata()
    meta["metaData"]["schemaString"] = json.dumps({"type": "struct", "fields": schema_fields})
    _write_commit(path, 0, [_commit_info("CREATE TABLE"), _protocol(), meta])
    with pytest.raises(CorruptLogError, match="schemaString"):
        lakelog.Table(path)
    assert _check_problems(path) == ["unreadable_version"]


@pytest.mark.parametrize("bad", ["", ".", "./part-00000-hand.parquet", "sub//part.parquet", "sub/", "sub/./part.parquet", "part%00.parquet"])
def test_add_path_that_names_no_single_file_is_refused(any_table_path, bad):
    """An empty path named the table directory itself (an untyped OSError 'is a directory')."""
    path = any_table_path
    _hand_written_table(path)
    _write_commit(path, 1, [_commit_info(), _add(bad)])
    with pytest.raises(InvalidPathError):
        lakelog.Table(path)
    assert lakelog.Table(path, version=0).to_pyarrow().num_rows == 2
    assert "invalid_path" in _check_problems(path)


def _remove(rel_path: str) -> dict:
    return {"remove": {"path": rel_path, "deletionTimestamp": 1_700_000_000_001, "dataChange": True}}


@pytest.mark.parametrize(
    "actions",
    [
        [_add("part-00000-hand.parquet"), _remove("part-00000-hand.parquet")],
        [_remove("part-00000-hand.parquet"), _add("part-00000-hand.parquet")],
        [_add("new.parquet"), _add("new.parquet", 200)],
        [_remove("part-00000-hand.parquet"), _remove("part-00000-hand.parquet")],
        [_add("part-00000-hand.parquet"), _remove("part-00000%2Dhand.parquet")],
    ],
    ids=["add-then-remove", "remove-then-add", "added-twice", "removed-twice", "same-file-two-spellings"],
)
def test_commit_naming_a_file_twice_is_corrupt(any_table_path, actions):
    """The protocol allows one add and one remove per path in a commit, never both for one file; readers
    disagree about which wins (lakelog used to take the last line, delta-rs the first)."""
    path = any_table_path
    data = _hand_written_table(path)
    _write_commit(path, 1, [_commit_info(), *actions])
    with pytest.raises(CorruptLogError, match="commit 1"):
        lakelog.Table(path)
    assert _sorted_rows(lakelog.read_table(path, version=0)) == _sorted_rows(data)
    assert "corrupt_commit" in _check_problems(path)


def test_stray_far_future_commit_is_a_gap_not_a_hang(any_table_path):
    """A stray 99999999999999999999.json: reads raised OverflowError and check never finished."""
    import time

    path = any_table_path
    data = _hand_written_table(path)
    t = lakelog.Table(path)
    _write_log_bytes(path, 99999999999999999999, _read_log_bytes(path, 0))
    started = time.monotonic()
    with pytest.raises(CorruptLogError, match=r"1\.\.99999999999999999998"):
        lakelog.Table(path)
    with pytest.raises(CorruptLogError, match="gap"):
        t.refresh()
    assert _sorted_rows(lakelog.read_table(path, version=0)) == _sorted_rows(data)
    assert _sorted_rows(t.to_pyarrow()) == _sorted_rows(data)
    assert t.history()[0]["version"] == 0
    from lakelog.check import check_table

    report = check_table(path)
    assert sorted({p.kind for p in report.problems}) == ["unreadable_version", "version_gap"]
    assert check_table(path, version=0).version == 0
    assert time.monotonic() - started < 30


@pytest.mark.parametrize(
    "stats",
    ["1", "[1]", "null", '{"numRecords": "x"}', '{"numRecords": 2, "minValues": [1]}', '{"numRecords": 2, "maxValues": "x", "nullCount": 3}', '{"numRecords": true, "nullCount": {"id": 1}}', "{not json"],
)
def test_malformed_stats_are_ignored_not_trusted(any_table_path, stats):
    """Stats are optional: a reader that cannot use them reads without them. Non-object stats crashed
    filtered reads (AttributeError), and a boolean numRecords pruned a file as all-null."""
    path = any_table_path
    data = _hand_written_table(path)
    lines = [json.loads(line) for line in _read_log_bytes(path, 0).splitlines()]
    for a in lines:
        if "add" in a:
            a["add"]["stats"] = stats
    _write_commit(path, 0, lines)
    t = lakelog.Table(path)
    assert t.files(filters=[("id", ">=", 1)]) == ["part-00000-hand.parquet"]
    assert _sorted_rows(lakelog.read_table(path, filters=[("id", ">=", 1)])) == _sorted_rows(data)
    assert [a.num_records() for a in t.snapshot.files.values()] == [2 if '"numRecords": 2' in stats else None]
    assert _check_problems(path) == []


@pytest.mark.parametrize("filters", [[("name", ">", 3)], [("id", "=", "x")], [("id", ">", dt.date(2026, 1, 1))]], ids=repr)
def test_filter_value_of_another_type_is_schema_mismatch(any_table_path, filters):
    """A filter comparing a column with a value of another type raised pyarrow's untyped
    ArrowNotImplementedError (no kernel for string >= int8) from files() and reads."""
    path = any_table_path
    _hand_written_table(path)
    t = lakelog.Table(path)
    for read in (lambda: t.files(filters=filters), lambda: t.to_pyarrow(filters=filters), lambda: t.to_pyarrow(filters=pq.filters_to_expression(filters))):
        with pytest.raises(InvalidFilterError, match="cannot be (compared|applied)"):
            read()

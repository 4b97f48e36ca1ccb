"""Hostile and damaged input: each case is a typed error or a documented fallback, never wrong data.

Complements tests/test_errors.py (torn commits, gaps, missing protocol/metaData in commits, malformed
actions, hostile add/remove paths in commits, unknown features, stray files in _delta_log) with:
damaged checkpoints (fallback when older files exist, a typed error naming the checkpoint when not),
hostile or malformed actions inside checkpoints, ``_last_checkpoint`` as a mere hint, missing and
damaged data files (errors naming the file), more negative protocol cases, and exact round trips of
URI-encoded file names and partition values with deltalake. Logs and files are damaged with plain
fsspec calls, so the cases run on the local filesystem, ``memory://`` and S3 (moto) alike.
"""

from __future__ import annotations

import io
import json
import os
import re
import urllib.parse
import warnings

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakelog
from lakelog.errors import (
    TableWithoutSchemaError,
    CorruptLogError,
    InvalidPathError,
    TableNotFoundError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)
from lakelog.errors import CorruptDataFileError, MissingDataFileError, MissingDeletionVectorError
from tests.table_files import log_file as _log
from tests.table_files import table_fs as _fs

CONF = {"delta.checkpointInterval": "2"}
# The moto S3 endpoint is slow: the long parametrized tables run a representative subset there.
S3_CHECKPOINT_DAMAGE = {"truncated", "no-metaData-rows", "hostile-add-path"}
S3_HINTS = {"missing-future", "unparseable"}


def _skip_on_s3(path: str, case: str, subset: set[str]) -> None:
    if path.startswith("s3://") and case not in subset:
        pytest.skip(f"on S3 only {sorted(subset)} run (the others run on local and memory)")


# ---------------------------------------------------------------- helpers


def _cp(v: int) -> str:
    return f"{v:020d}.checkpoint.parquet"


def _commit(v: int) -> str:
    return f"{v:020d}.json"


def _cat(path: str, full: str) -> bytes:
    return _fs(path)[0].cat_file(full)


def _pipe(path: str, full: str, data: bytes) -> None:
    fs, _ = _fs(path)
    fs.pipe_file(full, data)


def _rm(path: str, full: str) -> None:
    _fs(path)[0].rm_file(full)


def _ids(t: pa.Table) -> list[int]:
    return sorted(t.column("id").to_pylist())


def _four_versions(path: str) -> None:
    """Versions 0..3 (one row each, id = version), checkpoint at version 2."""
    for i in range(4):
        assert lakelog.write_table(path, pa.table({"id": pa.array([i], pa.int64())}), configuration=CONF) == i
    names = {p.rsplit("/", 1)[-1] for p in _fs(path)[0].ls(f"{_fs(path)[1]}/_delta_log", detail=False)}
    assert _cp(2) in names


def _remove_commits(path: str, versions) -> None:
    for v in versions:
        _rm(path, _log(path, _commit(v)))


def _rewrite_checkpoint(path: str, v: int, edit) -> None:
    """Read checkpoint ``v`` as rows, let ``edit(rows, schema)`` return (rows, schema), write it back."""
    full = _log(path, _cp(v))
    table = pq.read_table(io.BytesIO(_cat(path, full)))
    rows, schema = edit(table.to_pylist(), table.schema)
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), buf)
    _pipe(path, full, buf.getvalue())


def _set_first(kind: str, **fields):
    def edit(rows, schema):
        for r in rows:
            if r.get(kind) is not None:
                r[kind].update(fields)
                break
        return rows, schema

    return edit


def _add_remove_row(path_value: str):
    def edit(rows, schema):
        rows.append({"remove": {"path": path_value, "deletionTimestamp": 1, "dataChange": False}})
        return rows, schema

    return edit


def _drop_rows(kind: str):
    def edit(rows, schema):
        return [r for r in rows if r.get(kind) is None], schema

    return edit


def _with_deletion_vector(rows, schema):
    dv = pa.struct([("storageType", pa.string()), ("pathOrInlineDv", pa.string()), ("offset", pa.int32()), ("sizeInBytes", pa.int32()), ("cardinality", pa.int64())])
    add_type = schema.field("add").type
    if add_type.get_field_index("deletionVector") < 0:  # checkpoints lakelog wrote before reading DVs lack the column
        new_add = pa.struct(list(add_type) + [pa.field("deletionVector", dv)])
        schema = schema.set(schema.get_field_index("add"), pa.field("add", new_add))
    for r in rows:
        if r.get("add") is not None:
            r["add"]["deletionVector"] = {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "offset": 1, "sizeInBytes": 36, "cardinality": 1}
            break
    return rows, schema


def _truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


# ---------------------------------------------------------------- damaged checkpoints

CHECKPOINT_DAMAGE = {
    "truncated": lambda path, full: _pipe(path, full, _truncate(_cat(path, full))),
    "empty": lambda path, full: _pipe(path, full, b""),
    "garbage": lambda path, full: _pipe(path, full, b"PAR1 this is not parquet at all PAR1"),
    "json-instead-of-parquet": lambda path, full: _pipe(path, full, b'{"add": {"path": "x.parquet"}}\n'),
    "no-metaData-rows": lambda path, full: _rewrite_checkpoint(path, 2, _drop_rows("metaData")),
    "no-protocol-rows": lambda path, full: _rewrite_checkpoint(path, 2, _drop_rows("protocol")),
    "null-add-path": lambda path, full: _rewrite_checkpoint(path, 2, _set_first("add", path=None)),
    "hostile-add-path": lambda path, full: _rewrite_checkpoint(path, 2, _set_first("add", path="../outside.parquet")),
    "absolute-add-path": lambda path, full: _rewrite_checkpoint(path, 2, _set_first("add", path="/etc/passwd")),
    "scheme-add-path": lambda path, full: _rewrite_checkpoint(path, 2, _set_first("add", path="s3://other-bucket/x.parquet")),
    "hostile-remove-path": lambda path, full: _rewrite_checkpoint(path, 2, _add_remove_row("%2E%2E/outside.parquet")),
}
# The exact error when no older checkpoint or JSON commit can replace the damaged checkpoint.
NO_FALLBACK_ERROR = {
    "hostile-add-path": InvalidPathError,
    "absolute-add-path": InvalidPathError,
    "scheme-add-path": InvalidPathError,
    "hostile-remove-path": InvalidPathError,
}


@pytest.mark.parametrize("damage", list(CHECKPOINT_DAMAGE))
def test_damaged_checkpoint_falls_back_to_json_replay(any_table_path, damage):
    """Documented fallback: a checkpoint that cannot be used is skipped (with a warning) when the
    commits it covers exist; the data is exactly right."""
    path = any_table_path
    _skip_on_s3(path, damage, S3_CHECKPOINT_DAMAGE)
    _four_versions(path)
    CHECKPOINT_DAMAGE[damage](path, _log(path, _cp(2)))
    with pytest.warns(UserWarning, match="skipping unusable checkpoint at version 2"):
        t = lakelog.Table(path)
        t.files()  # with a checksum file beside it, the checkpoint is read on first use of the files
    assert t.version == 3
    assert _ids(t.to_pyarrow()) == [0, 1, 2, 3]
    with pytest.warns(UserWarning):
        assert _ids(lakelog.read_table(path, version=2)) == [0, 1, 2]
    # A writer commits on top (it reads the same way) and the table stays right.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert lakelog.write_table(path, pa.table({"id": pa.array([4], pa.int64())})) == 4
        assert _ids(lakelog.read_table(path)) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("damage", list(CHECKPOINT_DAMAGE))
def test_damaged_checkpoint_without_fallback_is_a_typed_error(any_table_path, damage):
    """With the commits the checkpoint covers removed there is nothing to fall back to: a typed error
    naming the checkpoint, for readers and writers, and no data is returned."""
    path = any_table_path
    _skip_on_s3(path, damage, S3_CHECKPOINT_DAMAGE)
    _four_versions(path)
    _remove_commits(path, [0, 1, 2])
    CHECKPOINT_DAMAGE[damage](path, _log(path, _cp(2)))
    expected = NO_FALLBACK_ERROR.get(damage, CorruptLogError)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # (the checksum file gives the protocol and metadata: the checkpoint is read on first use of the files)
        for call in (lambda: lakelog.Table(path).files(), lambda: lakelog.read_table(path, version=2), lambda: lakelog.write_table(path, pa.table({"id": [9]}))):
            with pytest.raises(CorruptLogError) as info:
                call()
            assert type(info.value) is expected, repr(info.value)
            assert _cp(2) in str(info.value)
        # Versions before the checkpoint were cleaned up: that is VersionNotFoundError, as without damage.
        with pytest.raises(VersionNotFoundError):
            lakelog.Table(path, version=1)
    assert not _fs(path)[0].exists(_log(path, _commit(4)))


def test_damaged_newest_checkpoint_falls_back_to_an_older_checkpoint(any_table_path):
    """Commits before the older checkpoint are gone: the reader starts from the older checkpoint."""
    path = any_table_path
    for i in range(6):
        lakelog.write_table(path, pa.table({"id": pa.array([i], pa.int64())}), configuration=CONF)
    _remove_commits(path, [0, 1])  # versions 2..5 remain, checkpoints at 2 and 4
    _pipe(path, _log(path, _cp(4)), b"not parquet")
    with pytest.warns(UserWarning, match="version 4"):
        t = lakelog.Table(path)
        t.files()
    assert _ids(t.to_pyarrow()) == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("damage", ["garbage", "no-metaData-rows", "hostile-add-path"])
def test_without_a_checksum_file_a_damaged_checkpoint_shows_when_the_table_is_opened(tmp_path, damage):
    """Without a version checksum file (a table another engine wrote) the protocol and metadata come from
    the checkpoint, which is then read when the table is opened: the fallback's warning, or the error when
    nothing can replace it, comes from ``Table(path)`` itself."""
    path = str(tmp_path / "t")
    _four_versions(path)
    _rm(path, _log(path, f"{2:020d}.crc"))
    CHECKPOINT_DAMAGE[damage](path, _log(path, _cp(2)))
    with pytest.warns(UserWarning, match="skipping unusable checkpoint at version 2"):
        t = lakelog.Table(path)
    assert t.snapshot.file_set.base is None and _ids(t.to_pyarrow()) == [0, 1, 2, 3]
    _remove_commits(path, [0, 1, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(CorruptLogError, match=re.escape(_cp(2))) as info:
            lakelog.Table(path)
    assert type(info.value) is NO_FALLBACK_ERROR.get(damage, CorruptLogError)


def test_checkpoint_only_log_is_readable(any_table_path):
    """A log reduced to a checkpoint and later commits (as cleanup leaves it) reads from the checkpoint."""
    path = any_table_path
    _four_versions(path)
    _remove_commits(path, [0, 1, 2, 3])
    t = lakelog.Table(path)
    assert t.version == 2
    assert _ids(t.to_pyarrow()) == [0, 1, 2]


# ---------------------------------------------------------------- _last_checkpoint is a hint


@pytest.mark.parametrize(
    "hint",
    [
        b'{"version": 99, "size": 3}',  # names a checkpoint that does not exist (and a future version)
        b'{"version": 1, "size": 3}',  # names a version without a checkpoint
        b'{"version": 0}',  # older than the newest checkpoint
        b"",
        b"{not json",
        b"[1, 2]",
        b'{"version": "two"}',
    ],
    ids=["missing-future", "missing-past", "older", "empty", "unparseable", "array", "bad-version"],
)
def test_last_checkpoint_is_only_a_hint(any_table_path, hint, request):
    path = any_table_path
    _skip_on_s3(path, request.node.callspec.id.split("-", 1)[1], S3_HINTS)
    for i in range(5):
        lakelog.write_table(path, pa.table({"id": pa.array([i], pa.int64())}), configuration=CONF)
    _pipe(path, _log(path, "_last_checkpoint"), hint)
    assert lakelog.Table(path).version == 4
    assert _ids(lakelog.read_table(path)) == [0, 1, 2, 3, 4]
    assert _ids(lakelog.read_table(path, version=3)) == [0, 1, 2, 3]
    # The next checkpoint (explicit, or after commit 6) replaces a hint that is damaged or stale.
    assert lakelog.Table(path).checkpoint() == 4
    assert json.loads(_cat(path, _log(path, "_last_checkpoint")))["version"] == 4
    lakelog.write_table(path, pa.table({"id": pa.array([5], pa.int64())}))
    lakelog.write_table(path, pa.table({"id": pa.array([6], pa.int64())}))
    assert json.loads(_cat(path, _log(path, "_last_checkpoint")))["version"] == 6
    assert _ids(lakelog.read_table(path)) == list(range(7))


def test_last_checkpoint_naming_a_newer_existing_checkpoint_is_kept(table_path):
    """A checkpoint of an older version does not move the hint back."""
    for i in range(5):
        lakelog.write_table(table_path, pa.table({"id": pa.array([i], pa.int64())}), configuration=CONF)
    lakelog.Table(table_path, version=3).checkpoint()
    with open(os.path.join(table_path, "_delta_log", "_last_checkpoint"), "rb") as f:
        assert json.load(f)["version"] == 4


# ---------------------------------------------------------------- temp files of crashed writers


def test_temp_files_of_crashed_writers_are_ignored(any_table_path):
    """What a writer killed mid-way leaves (temp commit/checkpoint/hint files, an uncommitted data file)
    is invisible to readers and does not stop the next commit."""
    path = any_table_path
    _four_versions(path)
    fs, root = _fs(path)
    bogus_commit = b'{"commitInfo":{}}\n{"add":{"path":"ghost.parquet","partitionValues":{},"size":1,"modificationTime":0,"dataChange":true}}\n'
    for name, data in [
        (f".{_commit(4)}.0123456789abcdef0123456789abcdef.tmp", bogus_commit),
        (f".{_commit(4)}.fedcba9876543210fedcba9876543210.tmp", bogus_commit[:20]),  # torn temp file
        (f".{_cp(4)}.0123456789abcdef0123456789abcdef.tmp", b"PAR1"),
        (".\x5flast_checkpoint.0123456789abcdef0123456789abcdef.tmp", b'{"version": 4'),
    ]:
        fs.pipe_file(f"{root}/_delta_log/{name}", data)
    fs.pipe_file(f"{root}/part-00000-aaaaaaaa-0000-0000-0000-000000000000.snappy.parquet", b"PAR1 half a file")
    t = lakelog.Table(path)
    assert t.version == 3 and _ids(t.to_pyarrow()) == [0, 1, 2, 3]
    assert "ghost.parquet" not in t.files()
    assert lakelog.write_table(path, pa.table({"id": pa.array([4], pa.int64())})) == 4
    assert _ids(lakelog.read_table(path)) == [0, 1, 2, 3, 4]


# ---------------------------------------------------------------- data files named by the log


def test_missing_data_file_is_named(any_table_path):
    path = any_table_path
    lakelog.write_table(path, pa.table({"id": pa.array([1], pa.int64()), "p": ["a b"]}), partition_by=["p"])
    lakelog.write_table(path, pa.table({"id": pa.array([2], pa.int64()), "p": ["50%"]}))
    t = lakelog.Table(path)
    victim = next(rel for rel in t.files() if rel.startswith("p=50%"))
    fs, root = _fs(path)
    fs.rm_file(f"{root}/{victim}")
    t = lakelog.Table(path)  # opening needs only the log
    with pytest.raises(MissingDataFileError) as info:
        t.to_pyarrow()
    assert type(info.value) is MissingDataFileError
    assert victim in str(info.value) and info.value.paths == [victim]
    assert "version 1" in str(info.value)
    # A read that prunes the file away, and the version before it, still work.
    assert lakelog.read_table(path, filters=[("p", "=", "a b")]).column("id").to_pylist() == [1]
    assert lakelog.read_table(path, version=0).column("id").to_pylist() == [1]


@pytest.mark.parametrize("damage", ["truncated", "empty", "not-parquet"])
def test_damaged_data_file_is_named(any_table_path, damage):
    path = any_table_path
    lakelog.write_table(path, pa.table({"id": pa.array(range(100), pa.int64())}))
    (victim,) = lakelog.Table(path).files()
    fs, root = _fs(path)
    full = f"{root}/{victim}"
    data = {"truncated": _truncate(fs.cat_file(full)), "empty": b"", "not-parquet": b"hello, world"}[damage]
    fs.pipe_file(full, data)
    with pytest.raises(CorruptLogError) as info:
        lakelog.read_table(path)
    assert type(info.value) is CorruptDataFileError
    assert victim in str(info.value) and info.value.paths == [victim]


def test_add_path_naming_a_directory_is_named(any_table_path):
    """An add whose path is a partition directory (not a file) used to fail with an untyped OSError."""
    path = any_table_path
    lakelog.write_table(path, pa.table({"id": pa.array([1], pa.int64()), "p": ["a"]}), partition_by=["p"])
    add = {"path": "p=a", "partitionValues": {"p": "a"}, "size": 1, "modificationTime": 1, "dataChange": True}
    _fs(path)[0].pipe_file(_log(path, _commit(1)), json.dumps({"add": add}).encode() + b"\n")
    with pytest.raises(CorruptDataFileError, match="directories") as info:
        lakelog.read_table(path)
    assert info.value.paths == ["p=a"]
    assert lakelog.read_table(path, version=0).column("id").to_pylist() == [1]


# ---------------------------------------------------------------- more negative protocol cases


def _write_json_commit(path: str, v: int, actions: list[dict]) -> None:
    fs, root = _fs(path)
    fs.makedirs(f"{root}/_delta_log", exist_ok=True)
    fs.pipe_file(f"{root}/_delta_log/{_commit(v)}", b"".join(json.dumps(a).encode() + b"\n" for a in actions))


_SCHEMA = json.dumps({"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]})
_META = {"metaData": {"id": "m", "format": {"provider": "parquet", "options": {}}, "schemaString": _SCHEMA, "partitionColumns": [], "configuration": {}}}


def _case_commit_not_utf8(path):
    lakelog.write_table(path, pa.table({"id": [1]}))
    _pipe(path, _log(path, _commit(1)), b'{"commitInfo": {"x": "\xff\xfe"}}\n')


def _case_commit_line_is_array(path):
    lakelog.write_table(path, pa.table({"id": [1]}))
    _pipe(path, _log(path, _commit(1)), b'[{"commitInfo": {}}]\n')


def _case_commit_zero_missing(path):
    lakelog.write_table(path, pa.table({"id": [1]}))
    lakelog.write_table(path, pa.table({"id": [2]}))
    _rm(path, _log(path, _commit(0)))


def _case_delta_log_is_a_file(path):
    fs, root = _fs(path)
    fs.makedirs(root, exist_ok=True)
    fs.pipe_file(f"{root}/_delta_log", b"not a directory")


def _case_protocol_reader_zero(path):
    _write_json_commit(path, 0, [{"protocol": {"minReaderVersion": 0, "minWriterVersion": 2}}, _META])


def _case_protocol_missing_fields(path):
    _write_json_commit(path, 0, [{"protocol": {"minWriterVersion": 2}}, _META])


def _case_metadata_missing_schema(path):
    meta = {"metaData": {k: v for k, v in _META["metaData"].items() if k != "schemaString"}}
    _write_json_commit(path, 0, [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, meta])


def _case_unknown_column_type(path):
    schema = json.dumps({"type": "struct", "fields": [{"name": "v", "type": "variant", "nullable": True, "metadata": {}}]})
    meta = {"metaData": {**_META["metaData"], "schemaString": schema}}
    _write_json_commit(path, 0, [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, meta])


def _case_checkpoint_deletion_vector(path):
    _four_versions(path)
    _remove_commits(path, [0, 1, 2])
    _rewrite_checkpoint(path, 2, _with_deletion_vector)


def _case_add_path_not_utf8(path):
    lakelog.write_table(path, pa.table({"id": [1]}))
    add = {"add": {"path": "part-%FF%FE.parquet", "partitionValues": {}, "size": 1, "modificationTime": 1, "dataChange": True}}
    _write_json_commit(path, 1, [add])


NEGATIVE_CASES = [
    ("add-path-percent-decodes-to-invalid-utf8", _case_add_path_not_utf8, InvalidPathError),
    ("commit-not-utf8", _case_commit_not_utf8, CorruptLogError),
    ("commit-line-is-an-array", _case_commit_line_is_array, CorruptLogError),
    ("commit-0-missing-without-checkpoint", _case_commit_zero_missing, VersionNotFoundError),
    ("delta-log-is-a-file", _case_delta_log_is_a_file, TableNotFoundError),
    ("protocol-without-minReaderVersion", _case_protocol_missing_fields, CorruptLogError),
    ("metaData-without-schemaString", _case_metadata_missing_schema, TableWithoutSchemaError),
    ("unknown-column-type", _case_unknown_column_type, UnsupportedFeatureError),
]


@pytest.mark.parametrize("setup, expected", [c[1:] for c in NEGATIVE_CASES], ids=[c[0] for c in NEGATIVE_CASES])
def test_negative_case_raises_exact_type(any_table_path, setup, expected):
    path = any_table_path
    setup(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(expected) as info:
            lakelog.read_table(path)
        assert type(info.value) is expected, repr(info.value)
        with pytest.raises(expected):
            lakelog.Table(path)


def test_missing_deletion_vector_named_in_a_checkpoint_is_a_typed_error(any_table_path):
    """A checkpoint add whose deletion vector file does not exist: opening the table works, reading its
    rows is a MissingDeletionVectorError naming the DV file and the data file."""
    path = any_table_path
    _case_checkpoint_deletion_vector(path)
    table = lakelog.Table(path)
    with pytest.raises(MissingDeletionVectorError, match=r"deletion_vector_[0-9a-f-]+\.bin") as info:
        table.to_pyarrow()
    dv_file, data_file = info.value.paths
    assert dv_file.startswith("ab/deletion_vector_") and data_file in table.files()


def test_reader_version_zero_is_read_as_plain_table(any_table_path):
    """minReaderVersion 0 is below every real version; lakelog treats it like 1 (nothing to refuse)."""
    _case_protocol_reader_zero(any_table_path)
    assert lakelog.read_table(any_table_path).num_rows == 0


def test_writer_version_above_7_refuses_writes_only(any_table_path):
    path = any_table_path
    lakelog.write_table(path, pa.table({"id": pa.array([1], pa.int64())}))
    _write_json_commit(path, 1, [{"commitInfo": {}}, {"protocol": {"minReaderVersion": 1, "minWriterVersion": 8}}])
    assert lakelog.read_table(path).column("id").to_pylist() == [1]
    with pytest.raises(UnsupportedFeatureError, match="writer version 8"):
        lakelog.write_table(path, pa.table({"id": pa.array([2], pa.int64())}))
    assert not _fs(path)[0].exists(_log(path, _commit(2)))


# ---------------------------------------------------------------- paths: exact round trips


TRICKY_NAMES = ["a b", "50%", "100%25", "k=v", "é", "漢字", "a+b", "x#y", "semi;colon", "~tilde", "%2E%2E"]


def test_uri_encoded_file_names_are_decoded_exactly_once(any_table_path):
    """A data file whose name contains spaces, '%', '=', unicode... is logged URI-encoded; readers decode
    once. Decoys with the once-too-often or never-decoded names hold other rows."""
    path = any_table_path
    fs, root = _fs(path)
    adds = []
    for i, name in enumerate(TRICKY_NAMES):
        rel = f"dir {name}/f {name}.parquet"
        for j, decoy in enumerate({urllib.parse.unquote(rel), urllib.parse.quote(rel)} - {rel}):
            buf = io.BytesIO()
            pq.write_table(pa.table({"id": pa.array([1000 + 10 * i + j], pa.int64())}), buf)
            fs.makedirs(f"{root}/{decoy.rsplit('/', 1)[0]}", exist_ok=True)
            fs.pipe_file(f"{root}/{decoy}", buf.getvalue())
        buf = io.BytesIO()
        pq.write_table(pa.table({"id": pa.array([i], pa.int64())}), buf)
        fs.makedirs(f"{root}/{rel.rsplit('/', 1)[0]}", exist_ok=True)
        fs.pipe_file(f"{root}/{rel}", buf.getvalue())
        adds.append({"add": {"path": urllib.parse.quote(rel), "partitionValues": {}, "size": len(buf.getvalue()), "modificationTime": 0, "dataChange": True}})
    _write_json_commit(path, 0, [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, _META, *adds])
    t = lakelog.Table(path)
    assert sorted(t.files()) == sorted(f"dir {n}/f {n}.parquet" for n in TRICKY_NAMES)
    assert _ids(t.to_pyarrow()) == list(range(len(TRICKY_NAMES)))
    if not path.startswith("memory://"):
        from deltalake import DeltaTable

        opts = None
        if path.startswith("s3://"):
            opts = {"AWS_ENDPOINT_URL": os.environ["AWS_ENDPOINT_URL"], "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
        assert _ids(DeltaTable(path, storage_options=opts).to_pyarrow_table()) == list(range(len(TRICKY_NAMES)))


def _tricky_partitioned() -> pa.Table:
    return pa.table({"id": pa.array(range(len(TRICKY_NAMES)), pa.int64()), "p": pa.array(TRICKY_NAMES, pa.string())})


def test_tricky_partition_values_deltalake_to_lakelog(table_path):
    from deltalake import write_deltalake

    write_deltalake(table_path, _tricky_partitioned(), partition_by=["p"])
    t = lakelog.Table(table_path)
    got = sorted(zip(*[t.to_pyarrow().column(c).to_pylist() for c in ("id", "p")]))
    assert got == list(enumerate(TRICKY_NAMES))
    for rel in t.files():  # decoded once, the add paths name deltalake's files on disk
        assert os.path.isfile(os.path.join(table_path, rel)), rel
    for i, name in enumerate(TRICKY_NAMES):
        assert lakelog.read_table(table_path, filters=[("p", "=", name)]).column("id").to_pylist() == [i]
    # lakelog appends to deltalake's table; deltalake reads lakelog's paths.
    lakelog.write_table(table_path, _tricky_partitioned())
    from deltalake import DeltaTable

    d = DeltaTable(table_path).to_pyarrow_table()
    assert sorted(zip(d.column("id").to_pylist(), d.column("p").to_pylist())) == sorted(list(enumerate(TRICKY_NAMES)) * 2)


def test_tricky_partition_values_lakelog_to_deltalake(table_path):
    from deltalake import DeltaTable

    lakelog.write_table(table_path, _tricky_partitioned(), partition_by=["p"])
    d = DeltaTable(table_path)
    got = d.to_pyarrow_table()
    assert sorted(zip(got.column("id").to_pylist(), got.column("p").to_pylist())) == list(enumerate(TRICKY_NAMES))
    for uri in d.file_uris():
        assert os.path.isfile(urllib.parse.unquote(uri.removeprefix("file://"))) or os.path.isfile(uri.removeprefix("file://")), uri
    # Each add.path is the URI encoding of the file's real relative path, decoded exactly once.
    with open(os.path.join(table_path, "_delta_log", _commit(0))) as f:
        logged = [json.loads(line)["add"] for line in f if '"add"' in line]
    for add in logged:
        rel = urllib.parse.unquote(add["path"])
        assert os.path.isfile(os.path.join(table_path, rel)), add["path"]
        assert re.fullmatch(r"[A-Za-z0-9/=+\-_.~!$&'()*,;:@%]+", add["path"]), add["path"]  # no raw space or non-ASCII
        assert rel.split("/", 1)[0].startswith("p=")
    for i, name in enumerate(TRICKY_NAMES):
        assert d.to_pyarrow_table(filters=[("p", "=", name)]).column("id").to_pylist() == [i]

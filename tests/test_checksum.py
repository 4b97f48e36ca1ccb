"""Version checksum files (``_delta_log/n.crc``): written beside each checkpoint, correct as the protocol
defines them (checked against deltalake's view of the table), and read when a table is opened so that its
checkpoint is read only on first use of its files, while every error of the commits, the protocol and the
metadata stays an error of ``Table(path)`` (specs/PROTOCOL.md, "Version checksum files")."""

from __future__ import annotations

import datetime
import os
import warnings

import deltalake
import orjson
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lakelog
from lakelog.errors import CorruptLogError, InvalidTablePropertyError, UnsupportedFeatureError
from lakelog.schema.plain import plain_fields
from lakelog.schema.types import schema_from_string


def _log(path: str, name: str = "") -> str:
    return os.path.join(path, "_delta_log", name)


def _crc(v: int) -> str:
    return f"{v:020d}.crc"


def _cp(v: int) -> str:
    return f"{v:020d}.checkpoint.parquet"


def _table(path: str, checkpoint_at: int = 2, versions: int = 4, **kw) -> str:
    """Versions 0..versions-1 of a partitioned table (id = version), a checkpoint at ``checkpoint_at``."""
    for k in range(versions):
        lakelog.write_table(path, pa.table({"id": pa.array([k, k + 10], pa.int64()), "part": [f"p{k % 2}"] * 2}), partition_by=["part"], **kw)
        if k == checkpoint_at:
            lakelog.Table(path).checkpoint()
    return path


def _read_crc(path: str, v: int) -> dict:
    with open(_log(path, _crc(v)), "rb") as f:
        return orjson.loads(f.read())


def _write_crc(path: str, v: int, body) -> None:
    with open(_log(path, _crc(v)), "wb") as f:
        f.write(body if isinstance(body, bytes) else orjson.dumps(body))


def _damage_checkpoint(path: str, v: int = 2) -> None:
    with open(_log(path, _cp(v)), "wb") as f:
        f.write(b"PAR1 not parquet PAR1")


def _ids(t) -> list[int]:
    return sorted(t.to_pyarrow().column("id").to_pylist())


# ---------------------------------------------------------------- written


def test_checkpoint_writes_a_checksum_as_the_protocol_defines_it(table_path):
    path = _table(table_path)
    body = _read_crc(path, 2)
    dt = deltalake.DeltaTable(path, version=2)
    adds = dt.get_add_actions(flatten=True)
    assert set(body) == {"tableSizeBytes", "numFiles", "numMetadata", "numProtocol", "metadata", "protocol", "allFiles"}
    assert sorted((a["path"], a["size"], a["stats"]) for a in body["allFiles"]) == sorted(
        (a.path, a.size, a.stats) for a in lakelog.Table(path, version=2).snapshot.files.values())
    assert body["numFiles"] == adds.num_rows == 3
    assert body["tableSizeBytes"] == sum(adds.column("size_bytes").to_pylist())
    assert body["numMetadata"] == body["numProtocol"] == 1
    assert body["metadata"]["id"] == dt.metadata().id and body["metadata"]["partitionColumns"] == ["part"]
    assert orjson.loads(body["metadata"]["schemaString"]) == orjson.loads(dt.schema().to_json())
    assert (body["protocol"]["minReaderVersion"], body["protocol"]["minWriterVersion"]) == (dt.protocol().min_reader_version, dt.protocol().min_writer_version)
    # only beside checkpoints; an existing one is never overwritten
    assert sorted(n for n in os.listdir(_log(path)) if n.endswith(".crc")) == [_crc(2)]
    _write_crc(path, 2, {**body, "txnId": "kept"})
    lakelog.Table(path, version=2).checkpoint()
    assert _read_crc(path, 2)["txnId"] == "kept"


def test_checksum_counts_files_after_removes_and_a_checkpoint_of_a_checkpoint(table_path):
    """numFiles and tableSizeBytes count the live files when some come from an older checkpoint and later
    commits remove some of them."""
    path = _table(table_path, checkpoint_at=1, versions=3)
    t = lakelog.Table(path)
    t.delete("id = 2")
    t = lakelog.Table(path)
    t.checkpoint()
    body = _read_crc(path, t.version)
    adds = deltalake.DeltaTable(path).get_add_actions(flatten=True)
    assert (body["numFiles"], body["tableSizeBytes"]) == (adds.num_rows, sum(adds.column("size_bytes").to_pylist()))


def test_checksum_lists_the_files_of_small_tables_only(table_path):
    """``allFiles`` up to 50 live files, as Delta writes it; the counts alone above."""
    path = table_path
    lakelog.write_table(path, pa.table({"id": pa.array(range(51), pa.int64()), "part": [str(i) for i in range(51)]}), partition_by=["part"])
    lakelog.Table(path).checkpoint()
    body = _read_crc(path, 0)
    assert body["numFiles"] == 51 and "allFiles" not in body


def test_describe_counts_from_the_checksum_and_later_commits_as_from_the_files(table_path):
    """describe's file count, size and record count, taken from the checksum's allFiles and the commits
    after it (no checkpoint read), equal those of the replayed files; a list that does not parse, names
    a file twice or disagrees with the counts is not used (the checkpoint is read)."""
    path = _table(table_path, versions=5)
    lakelog.Table(path).delete("id = 3")  # version 5 removes a file the checksum lists, and adds one
    truth = sorted((a.path, a.size, a.num_logical_records()) for a in lakelog.Table(path).snapshot.files.values())
    good = _read_crc(path, 2)
    first = good["allFiles"][0]
    bad_lists = [[{**first, "path": None}] + good["allFiles"][1:], [first] + good["allFiles"][:-1],
                 [{**first, "size": first["size"] + 1}] + good["allFiles"][1:]]
    for all_files in [good["allFiles"], *bad_lists]:
        _write_crc(path, 2, {**good, "allFiles": all_files})
        t = lakelog.Table(path)
        got = sorted((a.path, a.size, a.num_logical_records()) for a in t.snapshot.live_adds())
        assert got == truth
        assert (t.snapshot._pending is None) is (all_files is not good["allFiles"])  # the checkpoint was read only for a bad list
    deltalake_rows = deltalake.DeltaTable(path).to_pyarrow_table().num_rows
    assert sum(n for _, _, n in truth) == deltalake_rows


def test_checksum_on_tables_with_in_commit_timestamps_carries_the_versions_timestamp(table_path):
    """``inCommitTimestampOpt`` is present exactly when the table has in-commit timestamps (the protocol)."""
    path = _table(table_path, configuration={"delta.enableInCommitTimestamps": "true"})
    with open(_log(path, f"{2:020d}.json"), "rb") as f:
        ict = next(orjson.loads(line)["commitInfo"]["inCommitTimestamp"] for line in f if b"commitInfo" in line)
    body = _read_crc(path, 2)
    assert body["inCommitTimestampOpt"] == ict
    assert body["numFiles"] == deltalake.DeltaTable(path, version=2).get_add_actions(flatten=True).num_rows == 3
    t = lakelog.Table(path)
    assert t.snapshot._pending is not None and [h["timestamp"] for h in t.history() if h["version"] == 2] == [
        datetime.datetime.fromtimestamp(ict / 1000, datetime.timezone.utc)]
    assert _ids(t) == [0, 1, 2, 3, 10, 11, 12, 13]
    plain = _table(os.path.join(table_path, "plain"))
    assert "inCommitTimestampOpt" not in _read_crc(plain, 2)


# ---------------------------------------------------------------- read when the table is opened


def test_opening_reads_protocol_and_metadata_from_the_checksum_not_the_checkpoint(table_path):
    """With a checksum beside it, a damaged checkpoint is found on first use of the files, not before:
    version, history, schema and metadata come from the log alone."""
    path = _table(table_path)
    _damage_checkpoint(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = lakelog.Table(path)
        assert t.version == 3 and [e["version"] for e in t.history()] == [3, 2, 1, 0]
        assert t.schema.names == ["id", "part"] and t.partition_columns == ["part"]
    with pytest.warns(UserWarning, match="skipping unusable checkpoint at version 2"):
        assert _ids(t) == [0, 1, 2, 3, 10, 11, 12, 13]


def test_an_unusable_checksum_is_ignored(table_path):
    """Not JSON, not an object, a required field missing or mistyped: the checkpoint is read at once."""
    path = _table(table_path)
    good = _read_crc(path, 2)
    _damage_checkpoint(path)
    bodies = [b"{not json", b"[1]", {k: v for k, v in good.items() if k != "numFiles"}, {**good, "numProtocol": 2},
              {**good, "tableSizeBytes": "12"}, {**good, "protocol": None}, {**good, "metadata": {"id": 5}}]
    for body in bodies:
        _write_crc(path, 2, body)
        with pytest.warns(UserWarning, match="skipping unusable checkpoint at version 2"):
            t = lakelog.Table(path)
        assert t.snapshot.file_set.base is None and _ids(t) == [0, 1, 2, 3, 10, 11, 12, 13], body


def test_errors_of_commits_protocol_and_metadata_stay_errors_of_opening(table_path):
    path = _table(table_path)
    good = _read_crc(path, 2)
    # an unsupported reader feature, a damaged schema or property in the checksum
    cases = [
        ({**good, "protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["futureThing"], "writerFeatures": ["futureThing"]}}, UnsupportedFeatureError),
        ({**good, "metadata": {**good["metadata"], "schemaString": '{"type": "struct", "fields": [{"name": "id", "type": "decimal(50,2)"}]}'}}, CorruptLogError),
        ({**good, "metadata": {**good["metadata"], "partitionColumns": ["nope"]}}, CorruptLogError),
        ({**good, "metadata": {**good["metadata"], "configuration": {"delta.columnMapping.mode": "sideways"}}}, InvalidTablePropertyError),
    ]
    for body, error in cases:
        _write_crc(path, 2, body)
        with pytest.raises(error):
            lakelog.Table(path)
    _write_crc(path, 2, good)
    # a commit after the checkpoint that adds one path twice, then a torn one
    name = _log(path, f"{3:020d}.json")
    with open(name, "rb") as f:
        lines = f.read().splitlines()
    add = next(line for line in lines if b'"add"' in line)
    with open(name, "wb") as f:
        f.write(b"\n".join(lines + [add]) + b"\n")
    with pytest.raises(CorruptLogError, match="adds it twice"):
        lakelog.Table(path)
    with open(name, "wb") as f:
        f.write(b"\n".join(lines)[:-7])
    with pytest.raises(CorruptLogError, match="00000000000000000003.json"):
        lakelog.Table(path)


def test_a_checksum_that_disagrees_with_the_log_is_an_error_on_first_use(table_path):
    path = _table(table_path, versions=3)
    good = _read_crc(path, 2)
    for body, what in [
        ({**good, "metadata": {**good["metadata"], "configuration": {"delta.appendOnly": "true"}}}, "protocol or metadata differ"),
        ({**good, "numFiles": 4}, "counts 4 live file"),
        ({**good, "tableSizeBytes": good["tableSizeBytes"] + 1}, "bytes"),
    ]:
        _write_crc(path, 2, body)
        t = lakelog.Table(path)
        assert t.version == 2
        for use in (t.files, lambda: lakelog.write_table(path, pa.table({"id": pa.array([9], pa.int64()), "part": ["p9"]}))):
            with pytest.raises(CorruptLogError, match=f"{_crc(2)} disagrees with the log: .*{what}"):
                use()
    assert lakelog.Table(path, version=2).version == 2 and len(os.listdir(_log(path))) == 6  # nothing was committed
    _write_crc(path, 2, good)
    assert _ids(lakelog.Table(path)) == [0, 1, 2, 10, 11, 12]


def test_a_checkpoint_that_lost_a_file_is_refused_when_its_checksum_counts_it(table_path):
    """Without a checksum such a checkpoint would be read as the table (a file's rows silently missing);
    the checksum of its version counts the file, so the files' first use is a CorruptLogError."""
    import pyarrow.parquet as pq

    path = _table(table_path, versions=3)
    rows = pq.read_table(_log(path, _cp(2)))
    first_add = next(i for i, a in enumerate(rows.column("add").to_pylist()) if a is not None)
    pq.write_table(rows.take([i for i in range(rows.num_rows) if i != first_add]), _log(path, _cp(2)))
    t = lakelog.Table(path)
    with pytest.raises(CorruptLogError, match=f"{_crc(2)} disagrees with the log: it counts 3 live file"):
        t.to_pyarrow()


def test_time_travel_and_later_commits_use_the_newest_checksum_at_or_before_the_version(table_path):
    path = _table(table_path, versions=5)
    lakelog.Table(path).set_properties({"delta.appendOnly": True})  # version 5: metadata in a commit after the checksum
    _damage_checkpoint(path)
    for v, append_only in [(2, False), (4, False), (5, True)]:
        t = lakelog.Table(path, version=v)
        assert t.snapshot.append_only is append_only
    with pytest.warns(UserWarning, match="skipping unusable checkpoint"):
        assert _ids(lakelog.Table(path, version=3)) == [0, 1, 2, 3, 10, 11, 12, 13]
    assert _ids(lakelog.Table(path, version=1)) == [0, 1, 10, 11]  # before the checkpoint: JSON replay


# ---------------------------------------------------------------- the schema check without Arrow

# valid values most of the time, so that nested schemas the check accepts are common too
_VALID = st.sampled_from(["string", "long", "integer", "short", "byte", "float", "double", "boolean", "binary", "date", "timestamp",
                          "timestamp_ntz", "decimal", "decimal(10,2)", "decimal( 38 , 38 )"])


def _mostly(good, bad):
    """``bad`` about one time in five (``one_of`` would not weigh its branches)."""
    return st.integers(0, 4).flatmap(lambda i: bad if i == 0 else good)


_PRIMITIVE = _mostly(_VALID, st.sampled_from(
    ["decimal(0,0)", "decimal(5,9)", "decimal(39,1)", "void", "variant", "geometry", "geography(OGC:CRS84, spherical)", "interval", "char(3)", 5, None]))
_NAME = _mostly(st.text("abcdefgh", min_size=1, max_size=3), st.sampled_from(["A", "c d", "", 7]))


_FLAG = _mostly(st.sampled_from([True, False, None]), st.sampled_from(["true", 1]))


def _types(inner):
    def flagged(d, key, flag):
        return d if flag is None else {**d, key: flag}

    good = st.one_of(
        st.builds(lambda f: {"type": "struct", "fields": f}, st.lists(_fields(inner), max_size=3)),
        st.builds(lambda e, n: flagged({"type": "array", "elementType": e}, "containsNull", n), inner, _FLAG),
        st.builds(lambda k, v, n: flagged({"type": "map", "keyType": k, "valueType": v}, "valueContainsNull", n), inner, inner, _FLAG),
    )
    bad = st.sampled_from([{"type": "array"}, {"type": "map", "keyType": "long"}, {"type": "variant"}, {"type": "struct"}, {"type": 3}])
    return _mostly(good, bad)


def _fields(inner):
    return st.builds(lambda n, t, nullable: {"name": n, "type": t, **({} if nullable is None else {"nullable": nullable}), "metadata": {}},
                     _NAME, inner, _FLAG)


_TYPE = st.recursive(_PRIMITIVE, _types, max_leaves=8)


@settings(max_examples=1000, deadline=None)
@given(st.lists(_fields(_TYPE), max_size=4))
def test_a_schema_the_check_without_arrow_accepts_is_one_arrow_accepts(fields):
    """``plain_fields`` (opening a table without pyarrow) vouches only for schemas ``schema_from_string``
    accepts, with the same top-level names; anything else is left to it."""
    text = orjson.dumps({"type": "struct", "fields": fields}).decode()
    got = plain_fields(text)
    if got is None:
        return
    schema = schema_from_string(text)
    assert schema.names == [f["name"] for f in got]
    assert [pa.types.is_nested(f.type) for f in schema] == [isinstance(f["type"], dict) for f in got]


@pytest.mark.parametrize("fields", [[f] for f in [
    {"name": "v", "type": "void", "nullable": False},  # Arrow refuses a non-nullable null field
    {"name": "m", "type": {"type": "map", "keyType": "void", "valueType": "long"}},  # ... which a map key is
    {"name": "d", "type": "decimal(0,0)"}, {"name": "d", "type": "decimal(39,1)"}, {"name": "d", "type": "decimal(5,9)"},
    {"name": "v", "type": "variant"}, {"name": "g", "type": "geometry"}, {"name": "s", "type": {"type": "struct"}},
    {"name": "n", "type": "long", "nullable": "true"}, {"name": "", "type": "long"}, {"name": "t"},
    {"name": "a", "type": {"type": "array", "elementType": "long", "containsNull": 1}},
]] + [[{"name": "a", "type": "long"}, {"name": "A", "type": "long"}]])
def test_the_check_without_arrow_leaves_every_other_schema_to_arrow(fields):
    assert plain_fields(orjson.dumps({"type": "struct", "fields": fields}).decode()) is None

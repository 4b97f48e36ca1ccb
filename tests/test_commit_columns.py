"""JSON commits parsed for replay with their adds as columns (``lakelog.log.commit_columns``), and classic
checkpoints written row group by row group from them.

* ``parse_commit`` accepts exactly what ``parse_actions`` accepts, with the same error (type and
  message) for anything else, on commits whose add fields are randomly retyped, dropped or duplicated;
* a malformed add field in a JSON commit is a ``CorruptLogError`` naming the commit and line when the
  table is opened;
* a checkpoint streamed in several row groups round-trips through lakelog and is read by deltalake.
"""

from __future__ import annotations

import os

import deltalake
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakelog
from lakelog.actions import AddFile, parse_actions
from lakelog.log.checkpoint import write as checkpoint_write
from lakelog.log import commit_columns
from lakelog.log.commit_columns import decode_path_list, parse_commit
from lakelog.errors import CorruptLogError, LakelogError

# ---------------------------------------------------------------- parse_commit == parse_actions

_GOOD_ADD = {
    "path": "p=a/f.parquet",
    "partitionValues": {"p": "a"},
    "size": 10,
    "modificationTime": 1,
    "dataChange": True,
    "stats": '{"numRecords":1}',
}
_ODD_VALUES = [None, True, False, 0, -3, 2**40, 1.5, "", "x", "5", [], ["a"], {}, {"k": "v"}, {"k": 5}, {"k": None}, {"k": [1]}, {"k": True}]
_FIELDS = ["path", "partitionValues", "size", "modificationTime", "dataChange", "stats", "tags", "deletionVector", "extra"]
_DVS = [
    {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "offset": 1, "sizeInBytes": 34, "cardinality": 2},
    {"storageType": "i", "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", "sizeInBytes": 40, "cardinality": 6},
    {"storageType": "x", "pathOrInlineDv": "a", "sizeInBytes": 1, "cardinality": 1},
    {"storageType": "u", "pathOrInlineDv": "", "sizeInBytes": 1, "cardinality": 1},
]


@st.composite
def _add(draw, i: int):
    d = dict(_GOOD_ADD, path=f"p=a/f{i}.parquet")
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from(_FIELDS))
        how = draw(st.sampled_from(["set", "drop", "dv"]))
        if how == "drop":
            d.pop(key, None)
        elif how == "dv":
            d["deletionVector"] = draw(st.sampled_from(_DVS))
        else:
            d[key] = draw(st.sampled_from(_ODD_VALUES))
    return d


@st.composite
def _commit(draw) -> bytes:
    lines = [orjson.dumps({"commitInfo": {"operation": "WRITE"}})]
    n = draw(st.integers(0, 6))
    for i in range(n):
        kind = draw(st.sampled_from(["add", "add", "add", "remove", "txn", "blank", "garbage", "null", "two"]))
        if kind == "add":
            lines.append(orjson.dumps({"add": draw(_add(i))}))
        elif kind == "remove":
            r = {"path": f"p=a/g{i}.parquet", "deletionTimestamp": draw(st.sampled_from([1, "x", None])), "dataChange": True}
            lines.append(orjson.dumps({"remove": r}))
        elif kind == "txn":
            lines.append(orjson.dumps({"txn": {"appId": "a", "version": draw(st.sampled_from([1, "1"]))}}))
        elif kind == "blank":
            lines.append(b"   ")
        elif kind == "garbage":
            lines.append(draw(st.sampled_from([b"{", b"[1]", b"3", b'{"add": 3}', b'{"add": null}', b'{"add": []}'])))
        elif kind == "null":
            lines.append(b'{"add": null, "commitInfo": {}}')
        else:
            lines.append(orjson.dumps({"add": draw(_add(100 + i)), "txn": {"appId": "b", "version": 2}}))
    return b"\n".join(lines) + b"\n"


def _outcome(fn):
    try:
        return "ok", fn()
    except Exception as e:  # noqa: BLE001 - compared below, type and message
        return "error", (type(e), str(e))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_commit())
def test_parse_commit_accepts_and_refuses_exactly_what_parse_actions_does(data):
    kind, expected = _outcome(lambda: parse_actions(data, "00000000000000000001.json"))
    got_kind, got = _outcome(lambda: parse_commit(data, "00000000000000000001.json"))
    assert got_kind == kind, (got, expected)
    if kind == "error":
        assert got == expected
        return
    adds = [a for a in expected if type(a) is AddFile]
    assert got.actions == [a for a in expected if type(a) is not AddFile]
    assert [got.adds.add_file(i) for i in range(len(got.adds))] == adds


_DROP = object()


@pytest.mark.parametrize("field", _FIELDS)
@pytest.mark.parametrize("value", [_DROP, *_ODD_VALUES, *_DVS], ids=lambda v: "dropped" if v is _DROP else repr(v))
def test_each_retyped_or_dropped_add_field_is_parsed_as_parse_actions_does(field, value):
    """Every field of an add, dropped or given each odd value, next to a well-formed add."""
    add = dict(_GOOD_ADD)
    if value is _DROP:
        add.pop(field, None)
    else:
        add[field] = value
    data = orjson.dumps({"add": dict(_GOOD_ADD, path="q.parquet")}) + b"\n" + orjson.dumps({"add": add}) + b"\n"
    kind, expected = _outcome(lambda: parse_actions(data, "00000000000000000001.json"))
    got_kind, got = _outcome(lambda: parse_commit(data, "00000000000000000001.json"))
    assert got_kind == kind, (got, expected)
    if kind == "error":
        assert got == expected
    else:
        assert [got.adds.add_file(i) for i in range(len(got.adds))] == expected


def test_malformed_add_field_in_a_json_commit_is_a_corrupt_log_error(table_path):
    lakelog.write_table(table_path, pa.table({"id": [1, 2]}))
    lakelog.write_table(table_path, pa.table({"id": [3]}))
    name = os.path.join(table_path, "_delta_log", f"{1:020d}.json")
    lines = open(name, "rb").read().splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith(b'{"add"'))
    action = orjson.loads(lines[i])
    for field, value in [("size", "12"), ("size", True), ("dataChange", "yes"), ("partitionValues", None), ("path", 5), ("stats", {"numRecords": 1})]:
        bad = dict(action["add"], **{field: value})
        lines[i] = orjson.dumps({"add": bad})
        with open(name, "wb") as f:
            f.write(b"\n".join(lines) + b"\n")
        with pytest.raises(CorruptLogError, match=rf"{1:020d}\.json: line {i + 1} has a malformed 'add' action.*{field}"):
            lakelog.Table(table_path)


@pytest.mark.parametrize("padding", [1, commit_columns._ARROW_MIN_PATHS], ids=["searched one by one", "as an Arrow column"])
def test_decode_path_list_matches_decode_path(padding):
    """Both ways ``decode_path_list`` finds the paths to decode (a regex search per path for short lists,
    an Arrow column for long ones) decode and refuse exactly as ``decode_path``."""
    ok = ["a/b.parquet", "x/.hidden/y", "..a", "a.b/c", "a\\b", "p=%20x/f.parquet", "é/ü%C3%A9.parquet", "a:b"]
    from lakelog.actions import decode_path

    pad = ["f.parquet"] * padding
    for p in ok:
        try:
            expected = decode_path(p)
        except LakelogError as e:
            with pytest.raises(type(e)):
                decode_path_list(pad + [p])
            continue
        assert decode_path_list(pad + [p]) == pad + [expected]
    for bad in ["", "/a", "\\a", "a/", "a/./b", "./a", "a/.", ".", "a//b", "c:/x", "a/../b", "a\x00b", "é/../x"]:
        with pytest.raises(LakelogError):
            decode_path_list(pad + [bad])


# ---------------------------------------------------------------- streamed checkpoints


def test_checkpoint_streamed_in_row_groups_round_trips_and_deltalake_reads_it(table_path, monkeypatch):
    monkeypatch.setattr(checkpoint_write, "CLASSIC_ROW_GROUP_ROWS", 4)
    for i in range(6):
        data = pa.table({"id": pa.array(range(i * 10, i * 10 + 5), pa.int64()), "p": [f"v{k % 3}" for k in range(5)]})
        lakelog.write_table(table_path, data, partition_by=["p"], mode="append", app_id="app", app_version=i)
    lakelog.Table(table_path).delete([("id", "<", 7)])  # tombstones, and files written again
    t = lakelog.Table(table_path)
    before = {p: (a.size, a.partition_values, a.stats) for p, a in t.snapshot.files.items()}
    expected = t.to_pyarrow().sort_by("id")
    t.checkpoint()
    log = os.path.join(table_path, "_delta_log")
    cp = pq.ParquetFile(os.path.join(log, f"{t.version:020d}.checkpoint.parquet"))
    assert cp.metadata.num_row_groups > 3  # written in batches of 4 file actions
    for v in range(t.version + 1):
        os.remove(os.path.join(log, f"{v:020d}.json"))
    again = lakelog.Table(table_path)
    assert again.snapshot.file_set.base is not None
    assert {p: (a.size, a.partition_values, a.stats) for p, a in again.snapshot.files.items()} == before
    assert again.snapshot.txns["app"].version == 5
    assert again.to_pyarrow().sort_by("id").equals(expected)
    dt = deltalake.DeltaTable(table_path)
    assert dt.version() == t.version
    assert sorted(dt.file_uris()) == sorted(os.path.join(table_path, p) for p in before)
    assert dt.to_pyarrow_table().sort_by("id").select(["id"]).equals(expected.select(["id"]))


def test_checkpoint_of_json_commits_with_removes_and_re_adds(table_path):
    """Adds of later commits replace earlier ones of the same path; removed paths are not written."""
    lakelog.write_table(table_path, pa.table({"id": [1, 2, 3]}))
    lakelog.write_table(table_path, pa.table({"id": [4]}), mode="append")
    lakelog.write_table(table_path, pa.table({"id": [5, 6]}), mode="overwrite")
    lakelog.write_table(table_path, pa.table({"id": [7]}), mode="append")
    t = lakelog.Table(table_path)
    live = set(t.snapshot.file_paths())
    t.checkpoint()
    rows = pq.read_table(os.path.join(table_path, "_delta_log", f"{t.version:020d}.checkpoint.parquet"))
    adds = rows.column("add").drop_null().to_pylist()
    assert {a["path"] for a in adds} == live and len(adds) == len(live)
    assert all(a["dataChange"] is False for a in adds)
    removes = rows.column("remove").drop_null().to_pylist()
    assert len(removes) == 2 and not {r["path"] for r in removes} & live
    assert deltalake.DeltaTable(table_path).to_pyarrow_table().num_rows == 3


def test_replayed_changes_are_compacted_when_most_rows_are_dead(table_path, monkeypatch):
    """A log that keeps rewriting its files: replay keeps the live adds' rows only (once most are dead),
    and the file set, its listing order and the checkpoint written from it are unchanged by that."""
    from lakelog.log import file_set as file_set_module

    config = {"delta.checkpointInterval": "1000"}
    lakelog.write_table(table_path, pa.table({"id": [0, 1]}), configuration=config)
    for i in range(1, 8):
        mode = "overwrite" if i % 3 == 0 else "append"
        lakelog.write_table(table_path, pa.table({"id": [10 * i, 10 * i + 1]}), mode=mode)
    uncompacted = lakelog.Table(table_path).snapshot
    monkeypatch.setattr(file_set_module, "_COMPACT_MIN_DEAD", 1)
    compacted = lakelog.Table(table_path).snapshot
    changes = compacted.file_set.changes
    assert len(changes.blocks) < len(uncompacted.file_set.changes.blocks)
    assert sum(len(b) for b in changes.blocks) < sum(len(b) for b in uncompacted.file_set.changes.blocks)
    assert compacted.file_paths() == uncompacted.file_paths()
    assert compacted.files == uncompacted.files
    t = lakelog.Table(table_path)
    expected = t.to_pyarrow().sort_by("id")
    assert expected.column("id").to_pylist() == [60, 61, 70, 71]
    t.checkpoint()
    assert deltalake.DeltaTable(table_path).to_pyarrow_table().sort_by("id").equals(expected)

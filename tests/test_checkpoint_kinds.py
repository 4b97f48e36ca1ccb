"""Every checkpoint kind the Delta protocol defines, read from Spark- and Databricks-written tables
(tests/data, see its README): multi-part classic checkpoints, V2 checkpoints in JSON and Parquet with and
without sidecars, classic-named V2 checkpoints, ``_last_checkpoint`` with V2 fields. Each table reads
exactly its expected rows; damaged or missing parts and sidecars fall back to other checkpoints or the
JSON commits, or are a typed error naming the file when nothing else covers the version."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import warnings

import pytest

import lakelog
import lakelog.read.scan
from lakelog.log.checkpoint import read_checkpoint_state
from lakelog.errors import CorruptLogError
from lakelog.log.delta_log import DeltaLog
from lakelog.storage import Storage

DATA = os.path.join(os.path.dirname(__file__), "data")

CHECKPOINT_TABLES = [
    "v2-checkpoint-json",
    "v2-checkpoint-parquet",
    "v2-checkpoints-json-without-sidecars",
    "v2-checkpoints-parquet-without-sidecars",
    "v2-checkpoints-json-with-last-checkpoint",
    "v2-checkpoints-parquet-with-last-checkpoint",
    "v2-classic-checkpoint-parquet",
    "v2-classic-checkpoint-json",
    "checkpoint-v2-table",
    "multi-part-checkpoint",
]


def canonical(value):
    """A value in the canonical JSON form of tests/data/expected (the types these tables use)."""
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%S.%f") + ("Z" if value.tzinfo is not None else "")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    return value


def canonical_rows(table) -> list[dict]:
    return sorted((canonical(r) for r in table.to_pylist()), key=lambda r: json.dumps(r, sort_keys=True))


def expected(name: str) -> dict:
    with open(os.path.join(DATA, "expected", f"{name}.json")) as f:
        return json.load(f)


def copy_table(name: str, tmp_path) -> str:
    dest = str(tmp_path / name)
    shutil.copytree(os.path.join(DATA, name), dest)
    return dest


def _log(path: str, *names: str) -> str:
    return os.path.join(path, "_delta_log", *names)


@pytest.mark.parametrize("name", CHECKPOINT_TABLES)
def test_spark_checkpoint_tables_read_exactly(name):
    exp = expected(name)
    path = os.path.join(DATA, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no checkpoint may be skipped as unusable
        table = lakelog.Table(path)
        assert table.version == exp["version"]
        assert canonical_rows(lakelog.read_table(path)) == exp["rows"]
        df = table.to_pandas()
    assert sorted(df.columns) == sorted(exp["columns"]) and len(df) == exp["row_count"]
    # the checkpoint is really used: the snapshot starts from it, not from JSON replay
    assert table.snapshot.file_set.base is not None


@pytest.mark.parametrize("name", ["v2-checkpoint-parquet", "multi-part-checkpoint", "checkpoint-v2-table"])
def test_filters_on_checkpointed_tables(name):
    exp = expected(name)
    got = canonical_rows(lakelog.Table(os.path.join(DATA, name)).to_pyarrow(filters=[("id", ">=", 5)]))
    assert got == [r for r in exp["rows"] if r["id"] is not None and r["id"] >= 5]


def test_every_version_of_a_v2_table_reads_the_same_as_json_replay(tmp_path):
    """checkpoint-v2-table has V2 JSON checkpoints at 6 and 8: reading each version from them equals
    replaying the commits alone (the checkpoints removed)."""
    path = os.path.join(DATA, "checkpoint-v2-table")
    replay = copy_table("checkpoint-v2-table", tmp_path)
    for n in os.listdir(_log(replay)):
        if ".checkpoint." in n or n == "_last_checkpoint":
            os.remove(_log(replay, n))
    for v in range(expected("checkpoint-v2-table")["version"] + 1):
        assert canonical_rows(lakelog.read_table(path, version=v)) == canonical_rows(lakelog.read_table(replay, version=v)), v


def test_listing_sees_every_checkpoint_kind():
    listing = DeltaLog(Storage(os.path.join(DATA, "multi-part-checkpoint"))).list()
    [cp] = listing.checkpoints[1]
    assert (cp.kind, cp.parts, len(cp.files)) == ("multipart", 2, 2)
    listing = DeltaLog(Storage(os.path.join(DATA, "v2-checkpoint-json"))).list()
    [cp] = listing.checkpoints[2]
    assert (cp.kind, cp.fmt) == ("uuid", "json")
    storage = Storage(os.path.join(DATA, "v2-classic-checkpoint-json"))
    [cp] = DeltaLog(storage).list().checkpoints[1]
    assert cp.kind == "classic"
    state = read_checkpoint_state(storage, cp)
    assert state.v2 and state.sidecars  # a classic name holding a V2 spec checkpoint with sidecars


def test_incomplete_multipart_checkpoint_is_ignored(tmp_path):
    """A set missing a part is never used: the reader replays the JSON commits (no warning: the
    set simply is not a checkpoint), and `check` reports it as a warning."""
    path = copy_table("multi-part-checkpoint", tmp_path)
    os.remove(_log(path, "00000000000000000001.checkpoint.0000000002.0000000002.parquet"))
    listing = DeltaLog(Storage(path)).list()
    assert listing.checkpoints == {} and len(listing.incomplete_checkpoints) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = lakelog.Table(path)
    assert table.snapshot.file_set.base is None
    assert canonical_rows(table.to_pyarrow()) == expected("multi-part-checkpoint")["rows"]
    report = table.check()
    assert report.ok and "incomplete_checkpoint" in [w.kind for w in report.warnings]


def test_incomplete_set_beside_a_complete_one_of_the_same_version(tmp_path):
    """A stray 3-part set with one part next to the complete 2-part one: the complete one is used."""
    path = copy_table("multi-part-checkpoint", tmp_path)
    shutil.copy(
        _log(path, "00000000000000000001.checkpoint.0000000001.0000000002.parquet"),
        _log(path, "00000000000000000001.checkpoint.0000000001.0000000003.parquet"),
    )
    table = lakelog.Table(path)
    assert table.snapshot.file_set.base is not None
    assert canonical_rows(table.to_pyarrow()) == expected("multi-part-checkpoint")["rows"]


def _sidecars(path: str) -> list[str]:
    return sorted(os.listdir(_log(path, "_sidecars")))


@pytest.mark.parametrize("name", ["v2-checkpoint-json", "v2-checkpoint-parquet", "v2-classic-checkpoint-parquet"])
@pytest.mark.parametrize("damage", ["missing", "truncated", "garbage"])
def test_damaged_sidecar_falls_back_to_json_replay(tmp_path, name, damage):
    path = copy_table(name, tmp_path)
    victim = _log(path, "_sidecars", _sidecars(path)[0])
    if damage == "missing":
        os.remove(victim)
    elif damage == "truncated":
        with open(victim, "r+b") as f:
            f.truncate(os.path.getsize(victim) // 2)
    else:
        size = os.path.getsize(victim)
        with open(victim, "wb") as f:
            f.write(b"x" * size)  # same size: only Parquet itself notices
    with pytest.warns(UserWarning, match="skipping unusable checkpoint"):
        rows = canonical_rows(lakelog.read_table(path))
    assert rows == expected(name)["rows"]


def test_damaged_sidecar_with_nothing_to_fall_back_to_is_a_typed_error(tmp_path):
    """The only checkpoint covers a version whose commit is gone: the error names the sidecar."""
    name = "v2-checkpoints-parquet-with-last-checkpoint"
    path = copy_table(name, tmp_path)
    assert canonical_rows(lakelog.read_table(path)) == expected(name)["rows"]
    os.remove(_log(path, "00000000000000000000.json"))
    assert canonical_rows(lakelog.read_table(path)) == expected(name)["rows"]  # the checkpoint alone suffices
    sidecar = _sidecars(path)[0]
    os.remove(_log(path, "_sidecars", sidecar))
    with pytest.warns(UserWarning), pytest.raises(CorruptLogError, match=sidecar):
        lakelog.read_table(path)


def test_missing_multipart_part_with_nothing_to_fall_back_to(tmp_path):
    path = copy_table("multi-part-checkpoint", tmp_path)
    os.remove(_log(path, "00000000000000000000.json"))
    assert canonical_rows(lakelog.read_table(path)) == expected("multi-part-checkpoint")["rows"]
    os.remove(_log(path, "00000000000000000001.checkpoint.0000000002.0000000002.parquet"))
    with pytest.raises(lakelog.errors.LakelogError):
        lakelog.read_table(path)


def test_v2_checkpoint_with_wrong_checkpoint_metadata_version_is_skipped(tmp_path):
    """A UUID-named checkpoint whose checkpointMetadata names another version is not trusted."""
    path = copy_table("v2-checkpoints-json-without-sidecars", tmp_path)
    [cp] = [n for n in os.listdir(_log(path)) if ".checkpoint." in n]
    lines = open(_log(path, cp)).read().splitlines()
    fixed = []
    for line in lines:
        obj = json.loads(line)
        if "checkpointMetadata" in obj:
            obj["checkpointMetadata"]["version"] = 1
        fixed.append(json.dumps(obj))
    with open(_log(path, cp), "w") as f:
        f.write("\n".join(fixed) + "\n")
    with pytest.warns(UserWarning, match="checkpointMetadata|checkpoint of version 1"):
        rows = canonical_rows(lakelog.read_table(path))
    assert rows == expected("v2-checkpoints-json-without-sidecars")["rows"]


def test_last_checkpoint_with_v2_fields_and_checksum_is_only_a_hint(tmp_path):
    from lakelog.log.last_checkpoint import json_checksum, read_hint

    for name in ["v2-checkpoint-json", "v2-checkpoints-parquet-with-last-checkpoint", "multi-part-checkpoint", "v2-classic-checkpoint-json"]:
        raw = json.load(open(_log(os.path.join(DATA, name), "_last_checkpoint")))
        if "checksum" in raw:
            assert json_checksum(raw) == raw["checksum"], name  # Spark's checksum reproduced
        assert read_hint(Storage(os.path.join(DATA, name)))["version"] == raw["version"]
    # A hint whose checksum does not match is ignored (and reading never depends on it)
    path = copy_table("v2-checkpoint-json", tmp_path)
    raw = json.load(open(_log(path, "_last_checkpoint")))
    raw["version"] = 1
    with open(_log(path, "_last_checkpoint"), "w") as f:
        json.dump(raw, f)
    assert read_hint(Storage(path)) is None
    assert canonical_rows(lakelog.read_table(path)) == expected("v2-checkpoint-json")["rows"]


def test_check_verifies_v2_and_multipart_checkpoints_against_the_commits():
    for name in ["v2-checkpoint-parquet", "multi-part-checkpoint", "checkpoint-v2-table", "v2-classic-checkpoint-json"]:
        report = lakelog.Table(os.path.join(DATA, name)).check()
        assert report.counts["checkpoints_verified"] >= 1, name
        assert not [p for p in report.problems if "checkpoint" in p.kind], (name, report.problems)


def test_spark_reads_every_checkpoint_kind(spark):
    """format("lakelog") on the same tables: exactly the expected rows, and a filter."""
    for name in CHECKPOINT_TABLES:
        exp = expected(name)
        df = spark.read.format("lakelog").load(os.path.join(DATA, name))
        assert canonical_rows(df.toArrow()) == exp["rows"], name
        assert df.filter("id >= 5").count() == len([r for r in exp["rows"] if r["id"] is not None and r["id"] >= 5]), name


@pytest.mark.parametrize("name", ["v1-multi-part-struct-stats-only", "v2-parquet-sidecars-struct-stats-only"])
def test_stats_stored_only_in_struct_form_are_read_pruned_on_and_kept_in_our_checkpoints(tmp_path, name):
    """Spark with delta.checkpoint.writeStatsAsJson=false stores add.stats_parsed only: lakelog reads it as
    the file's stats (pruning uses them) and the checkpoints it writes keep them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = str(tmp_path / name)
    shutil.copytree(os.path.join(DATA, name), path)
    t = lakelog.Table(path)
    old = {p: json.loads(a.stats) for p, a in t.snapshot.files.items()}
    assert all(s["numRecords"] == 1 and s["minValues"]["id"] == s["maxValues"]["id"] for s in old.values())
    assert len(lakelog.read.scan.pruned_files(t.snapshot, [("id", "=", 3)])) == 1
    lakelog.write_table(path, pa.table({"id": pa.array([100], pa.int64()), "value": ["x"]}))
    t = lakelog.Table(path)
    t.checkpoint()
    log = DeltaLog(Storage(path))
    latest = [f for f in os.listdir(os.path.join(path, "_delta_log")) if f.startswith(f"{t.version:020d}.checkpoint")]
    assert latest
    rows = [r for f in latest for r in pq.read_table(os.path.join(path, "_delta_log", f)).column("add").to_pylist() if r]
    if not rows:  # (V2: the adds are in the sidecars our checkpoint names)
        side = os.path.join(path, "_delta_log", "_sidecars")
        named = [r["path"] for f in latest for r in pq.read_table(os.path.join(path, "_delta_log", f)).column("sidecar").to_pylist() if r]
        rows = [r for f in named for r in pq.read_table(os.path.join(side, f)).column("add").to_pylist() if r]
    kept = {r["path"]: json.loads(r["stats"]) for r in rows if r.get("stats")}
    assert len(kept) == len(old) + 1 and log is not None
    fresh = lakelog.Table(path)  # read back from our checkpoint
    assert {p: json.loads(a.stats) for p, a in fresh.snapshot.files.items() if p in old} == old

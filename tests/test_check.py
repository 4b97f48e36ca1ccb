"""``lakelog.check.check_table``: log continuity, every commit parses, referenced files exist with their
logged sizes, checkpoints agree with the JSON replay, orphans are listed (and are not a problem)."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lakelog
from lakelog.check import CheckReport, check_table
from lakelog.errors import TableNotFoundError, VersionNotFoundError
from tests.table_files import log_file as _log
from tests.table_files import table_fs as _fs

CONF = {"delta.checkpointInterval": "2"}
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _batch(ids, p=None) -> pa.Table:
    cols = {"id": pa.array(ids, pa.int64())}
    if p is not None:
        cols["p"] = pa.array([p] * len(ids), pa.string())
    return pa.table(cols)


def _kinds(report: CheckReport) -> list[str]:
    return sorted(p.kind for p in report.problems)


def _healthy(path: str) -> None:
    """Versions 0..5: appends, an overwrite, an idempotent txn; checkpoints at 2 and 4."""
    lakelog.write_table(path, _batch([1, 2], "a b"), partition_by=["p"], configuration=CONF)
    lakelog.write_table(path, _batch([3], "50%"))
    lakelog.write_table(path, _batch([4], "é"), app_id="job", app_version=1)
    lakelog.write_table(path, _batch([5, 6], "a b"), mode="overwrite")
    lakelog.write_table(path, _batch([7], "x"))
    lakelog.write_table(path, _batch([8], "x"), app_id="job", app_version=2)


def test_healthy_table(any_table_path):
    path = any_table_path
    _healthy(path)
    report = check_table(path)
    assert report.ok and report.problems == [] and report.warnings == [] and report.orphans == [], report.format()
    t = lakelog.Table(path)
    c = report.counts
    assert report.version == 5
    assert c["commits"] == 6 and c["checkpoints"] == 2 and c["checkpoints_verified"] == 2
    assert c["earliest_version"] == 0 and c["latest_version"] == 5
    assert c["files"] == len(t.files()) == 3
    assert c["bytes"] == sum(a.size for a in t.snapshot.files.values())
    d = report.to_dict()
    assert json.loads(json.dumps(d)) == d and d["ok"] is True
    assert "result: OK" in report.format() and str(report) == report.format()
    # An older version: its files were removed by the overwrite but still exist (no vacuum).
    assert check_table(path, version=1).ok


def test_deltalake_written_table_with_checkpoint(table_path):
    from deltalake import DeltaTable, write_deltalake

    write_deltalake(table_path, _batch([1, 2], "a b"), partition_by=["p"])
    write_deltalake(table_path, _batch([3], "50%"), mode="append")
    write_deltalake(table_path, _batch([4], "é"), mode="overwrite")
    DeltaTable(table_path).create_checkpoint()
    write_deltalake(table_path, _batch([5], "x"), mode="append")
    report = check_table(table_path)
    assert report.ok, report.format()
    assert report.counts["checkpoints_verified"] == 1
    assert report.counts["files"] == 2


def test_orphans_are_listed_but_not_a_problem(any_table_path):
    path = any_table_path
    _healthy(path)
    fs, root = _fs(path)
    buf = io.BytesIO()
    pq.write_table(_batch([666]), buf)
    orphans = ["part-00000-orphan.snappy.parquet", "p=a b/part-00001-orphan.snappy.parquet", "p=zzz/new.parquet", "notes.txt"]
    ignored = ["_tmp/part-0.parquet", ".hidden.parquet", "p=a b/.part-0.crc", "_delta_index/x", "nested/_delta_log/00000000000000000000.json", "nested/part-0.parquet"]
    for rel in orphans + ignored:
        fs.makedirs(f"{root}/{rel}".rsplit("/", 1)[0], exist_ok=True)
        fs.pipe_file(f"{root}/{rel}", buf.getvalue())
    report = check_table(path)
    assert report.ok, report.format()
    assert report.orphans == sorted(orphans)
    assert report.counts["orphans"] == len(orphans) and report.counts["orphan_bytes"] == len(orphans) * len(buf.getvalue())
    # Files removed by the overwrite are still named by the log: not orphans.
    removed = {rel for rel in lakelog.Table(path, version=2).files()}
    assert removed and not removed & set(report.orphans)
    assert "orphans: 4 file(s)" in report.format()


def test_underscore_partition_column_directories_are_not_hidden(table_path):
    lakelog.write_table(table_path, pa.table({"id": pa.array([1], pa.int64()), "_p": ["a"]}), partition_by=["_p"])
    os.makedirs(os.path.join(table_path, "_p=b"))
    with open(os.path.join(table_path, "_p=b", "stray.parquet"), "wb") as f:
        f.write(b"x")
    report = check_table(table_path)
    assert report.ok and report.orphans == ["_p=b/stray.parquet"], report.format()


def test_missing_file_and_size_mismatch(any_table_path):
    path = any_table_path
    _healthy(path)
    files = sorted(lakelog.Table(path).files())
    fs, root = _fs(path)
    fs.rm_file(f"{root}/{files[0]}")
    # The same rows rewritten uncompressed: still valid Parquet, another size.
    rewritten = io.BytesIO()
    pq.write_table(pq.read_table(io.BytesIO(fs.cat_file(f"{root}/{files[1]}"))), rewritten, compression="none")
    fs.pipe_file(f"{root}/{files[1]}", rewritten.getvalue())
    report = check_table(path)
    assert not report.ok
    assert _kinds(report) == ["missing_file", "size_mismatch"]
    by_kind = {p.kind: p for p in report.problems}
    assert by_kind["missing_file"].path == files[0] and files[0] in by_kind["missing_file"].message
    assert by_kind["size_mismatch"].path == files[1]
    text = report.format()
    assert "PROBLEMS (2)" in text and files[0] in text and "result: 2 problem(s) found" in text
    assert report.to_dict()["ok"] is False


def test_corrupt_commit(any_table_path):
    path = any_table_path
    _healthy(path)
    fs, _ = _fs(path)
    name = f"{5:020d}.json"
    fs.pipe_file(_log(path, name), fs.cat_file(_log(path, name))[:-30])
    report = check_table(path)
    assert "corrupt_commit" in _kinds(report) and "unreadable_version" in _kinds(report)
    bad = next(p for p in report.problems if p.kind == "corrupt_commit")
    assert bad.version == 5 and bad.path == name and name in bad.message
    gap = next(p for p in report.problems if p.kind == "version_gap")
    assert gap.version == 5 and "unreadable" in gap.message
    # Version 4 does not need the torn commit: checking its files finds only the log problems.
    assert _kinds(check_table(path, version=4)) == ["corrupt_commit", "version_gap"]


def test_gap_covered_by_a_later_checkpoint(any_table_path):
    """Commit 3 removed: version 3 cannot be read (a problem) although the latest version can."""
    path = any_table_path
    _healthy(path)
    _fs(path)[0].rm_file(_log(path, f"{3:020d}.json"))
    report = check_table(path)
    assert _kinds(report) == ["version_gap"], report.format()
    gap = report.problems[0]
    assert gap.version == 3 and "version 3 cannot be reconstructed" in gap.message and "version(s) 3 are missing" in gap.message
    assert report.counts["files"] == 3  # the latest version reads fine from checkpoint 4


def test_cleaned_up_log_is_ok(any_table_path):
    """Commits older than a checkpoint removed (as log cleanup does): not a problem."""
    path = any_table_path
    _healthy(path)
    for v in (0, 1):
        _fs(path)[0].rm_file(_log(path, f"{v:020d}.json"))
    report = check_table(path)
    assert report.ok, report.format()
    assert report.counts["earliest_version"] == 2
    assert report.counts["checkpoints_verified"] == 1  # checkpoint 4 against checkpoint 2 + commits 3, 4


def _rewrite_checkpoint(path: str, v: int, edit) -> None:
    fs, _ = _fs(path)
    full = _log(path, f"{v:020d}.checkpoint.parquet")
    table = pq.read_table(io.BytesIO(fs.cat_file(full)))
    rows = edit(table.to_pylist())
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), buf)
    fs.pipe_file(full, buf.getvalue())


def _drop_one_add(rows):
    i = next(i for i, r in enumerate(rows) if r["add"] is not None)
    return rows[:i] + rows[i + 1 :]


def _change_configuration(rows):
    for r in rows:
        if r["metaData"] is not None:
            r["metaData"]["configuration"] = [("delta.appendOnly", "true")]
    return rows


def _change_txn(rows):
    for r in rows:
        if r["txn"] is not None:
            r["txn"]["version"] = 99
    return rows


def _change_size(rows):
    for r in rows:
        if r["add"] is not None:
            r["add"]["size"] += 1
            break
    return rows


@pytest.mark.parametrize(
    "edit, words",
    [(_drop_one_add, "missing from the checkpoint"), (_change_configuration, "metadata"), (_change_txn, "txn"), (_change_size, "size")],
    ids=["dropped-add", "metadata", "txn", "size"],
)
def test_checkpoint_that_disagrees_with_the_log(table_path, edit, words):
    _healthy(table_path)
    _rewrite_checkpoint(table_path, 4, edit)
    report = check_table(table_path)
    assert "checkpoint_mismatch" in _kinds(report), report.format()
    bad = next(p for p in report.problems if p.kind == "checkpoint_mismatch")
    assert bad.version == 4 and f"{4:020d}.checkpoint.parquet" in bad.message and words in bad.message


def test_unreadable_checkpoint(any_table_path):
    path = any_table_path
    _healthy(path)
    _fs(path)[0].pipe_file(_log(path, f"{4:020d}.checkpoint.parquet"), b"PAR1 broken")
    report = check_table(path)
    assert _kinds(report) == ["unreadable_checkpoint"], report.format()
    assert report.problems[0].version == 4
    assert report.counts["files"] == 3  # readers fall back to the JSON commits


def test_invalid_path_in_commit(table_path):
    _healthy(table_path)
    with open(os.path.join(table_path, "_delta_log", f"{6:020d}.json"), "w") as f:
        f.write(json.dumps({"commitInfo": {}}) + "\n")
        f.write(json.dumps({"add": {"path": "../../etc/passwd", "partitionValues": {"p": "x"}, "size": 1, "modificationTime": 0, "dataChange": True}}) + "\n")
    report = check_table(table_path)
    assert "invalid_path" in _kinds(report) and "unreadable_version" in _kinds(report)


def test_hints_and_temp_files_are_warnings(any_table_path):
    path = any_table_path
    _healthy(path)
    fs, _ = _fs(path)
    fs.pipe_file(_log(path, "_last_checkpoint"), b'{"version": 40}')
    fs.pipe_file(_log(path, f".{6:020d}.json.0123456789abcdef0123456789abcdef.tmp"), b'{"commitInfo"')
    report = check_table(path)
    assert report.ok, report.format()
    assert sorted(w.kind for w in report.warnings) == ["last_checkpoint", "stale_temp_file"]
    assert "warnings (2)" in report.format()
    fs.pipe_file(_log(path, "_last_checkpoint"), b"{garbage")
    assert [w.kind for w in check_table(path).warnings] == ["last_checkpoint", "stale_temp_file"]


def test_version_argument_checks_that_versions_files(table_path):
    """After files of an old version are deleted (as vacuum does), the old version reports them missing."""
    _healthy(table_path)
    old_only = set(lakelog.Table(table_path, version=2).files()) - set(lakelog.Table(table_path).files())
    for rel in old_only:
        os.remove(os.path.join(table_path, rel))
    assert check_table(table_path).ok
    report = check_table(table_path, version=2)
    assert _kinds(report) == ["missing_file"] * len(old_only)
    assert {p.path for p in report.problems} == old_only
    # Table.check() checks the version the Table shows.
    assert lakelog.Table(table_path).check().ok
    assert _kinds(lakelog.Table(table_path, version=2).check()) == ["missing_file"] * len(old_only)


def test_not_a_table_and_bad_version(tmp_path, table_path):
    with pytest.raises(TableNotFoundError):
        check_table(str(tmp_path / "nothing"))
    lakelog.write_table(table_path, _batch([1]))
    with pytest.raises(VersionNotFoundError):
        check_table(table_path, version=3)


def test_cli_exit_codes(table_path):
    _healthy(table_path)
    cmd = [sys.executable, "-m", "lakelog.cli", "check", table_path, "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ok"] is True
    os.remove(os.path.join(table_path, sorted(lakelog.Table(table_path).files())[0]))
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert r.returncode == 1, r.stderr
    assert [p["kind"] for p in json.loads(r.stdout)["problems"]] == ["missing_file"]


def test_reads_after_a_check_see_files_written_by_other_processes(s3_endpoint):
    """Regression (S3): a recursive listing (check, vacuum) must not leave a listings cache behind that
    makes data files committed later by another process look missing to this process."""
    path = s3_endpoint.new_table_uri()
    env = {**os.environ, **s3_endpoint.env}

    def write(b):
        cmd = [sys.executable, "-m", "tests.crash_writer", path, str(b), "--max-batches", "1"]
        r = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr

    from tests.crash_writer import expected_rows

    write(0)
    assert check_table(path).ok
    write(1)
    t = lakelog.read_table(path)
    assert sorted(zip(*[t.column(c).to_pylist() for c in ("batch", "row", "part", "payload")])) == expected_rows([0, 1])
    assert check_table(path).ok


def test_nanosecond_timestamp_files_already_in_a_table_are_flagged(tmp_path):
    """A table that adopted pandas' nanosecond files (convert did, before it refused them): check flags
    them, and a read that would truncate a value is a typed error naming the file."""
    from lakelog.errors import IncompatibleDataFileError

    src = tmp_path / "t"
    src.mkdir()
    micros = pa.table({"id": pa.array([1, 2], pa.int64()), "ts": pa.array([0, 1000], pa.timestamp("us"))})
    pq.write_table(micros, src / "a.parquet")
    assert lakelog.convert(str(src)) == 0
    assert check_table(str(src)).ok

    def replace_with_nanos(values):
        pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64()), "ts": pa.array(values, pa.timestamp("ns"))}), src / "a.parquet")
        commit = src / "_delta_log" / f"{0:020d}.json"
        lines = [json.loads(line) for line in commit.read_text().splitlines()]
        for a in lines:
            if "add" in a:
                a["add"]["size"] = os.path.getsize(src / "a.parquet")
        commit.write_text("".join(json.dumps(a) + "\n" for a in lines))

    replace_with_nanos([0, 1_000_000])  # whole microseconds: reads correctly, but Spark cannot read the file
    report = check_table(str(src))
    assert _kinds(report) == ["nanosecond_timestamps"], report.format()
    assert report.problems[0].path == "a.parquet" and "'ts'" in report.problems[0].message
    assert sorted(r["ts"] for r in lakelog.read_table(str(src)).to_pylist())[1] == dt.datetime(1970, 1, 1, 0, 0, 0, 1000)

    replace_with_nanos([0, 1])  # one nanosecond: microseconds cannot hold it
    with pytest.raises(IncompatibleDataFileError, match="a.parquet") as e:
        lakelog.read_table(str(src))
    assert e.value.paths == ["a.parquet"]
    assert _kinds(check_table(str(src))) == ["nanosecond_timestamps"]


def test_data_file_whose_column_type_differs_from_the_schema(table_path):
    """A data file storing a column as another type than the schema (a file swapped in, or a schema
    edited without rewriting): check reports it, and a read that cannot cast it names the file."""
    from lakelog.errors import IncompatibleDataFileError

    lakelog.write_table(table_path, pa.table({"id": pa.array([1, 2], pa.int64()), "s": ["a", "b"]}))
    rel = lakelog.Table(table_path).files()[0]
    pq.write_table(pa.table({"id": pa.array(["x", "y"]), "s": ["a", "b"]}), os.path.join(table_path, rel))
    commit = os.path.join(table_path, "_delta_log", f"{0:020d}.json")
    lines = [json.loads(line) for line in open(commit).read().splitlines()]
    for a in lines:
        if "add" in a:
            a["add"]["size"] = os.path.getsize(os.path.join(table_path, rel))
    with open(commit, "w") as f:
        f.write("".join(json.dumps(a) + "\n" for a in lines))
    report = check_table(table_path)
    assert _kinds(report) == ["incompatible_file"] and "'id'" in report.problems[0].message
    with pytest.raises(IncompatibleDataFileError) as e:
        lakelog.read_table(table_path)
    assert e.value.paths == [rel]

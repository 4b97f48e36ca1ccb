"""The ``lakelog`` console script, run in subprocesses: output, --json and exit codes."""

import json
import shlex
import os
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

import lakelog

VENV_BIN = os.path.dirname(sys.executable)
SCRIPT = os.path.join(VENV_BIN, "lakelog")
CMD = [SCRIPT] if os.path.exists(SCRIPT) else [sys.executable, "-m", "lakelog.cli"]


def run(*args, timeout=120):
    env = dict(os.environ)
    env.pop("PYTHONWARNINGS", None)
    return subprocess.run([*CMD, *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env)


def run_json(*args):
    r = run(*args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def one_line_error(r, code):
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "error" in lines[0] and "Traceback" not in r.stderr
    return lines[0]


@pytest.fixture
def inputs(tmp_path):
    csv = tmp_path / "a.csv"
    csv.write_text("id,name,day\n1,ann,mon\n2,,tue\n3,cid,mon\n")
    jsonl = tmp_path / "b.jsonl"
    jsonl.write_text('{"id": 4, "name": "dee", "day": "wed"}\n{"id": 5, "name": "eve", "day": "mon"}\n')
    parquet = tmp_path / "c.parquet"
    pq.write_table(pa.table({"id": pa.array([6], pa.int64()), "name": ["fay"], "day": ["tue"]}), parquet)
    return str(csv), str(jsonl), str(parquet)


def test_write_show_describe_history_files(table_path, inputs):
    r = run("write", table_path, *inputs, "--partition-by", "day")
    assert r.returncode == 0, r.stderr
    assert "wrote 6 row(s) from 3 file(s)" in r.stdout and "version 0" in r.stdout
    rows = sorted(lakelog.read_table(table_path).to_pylist(), key=lambda x: x["id"])
    assert [x["id"] for x in rows] == [1, 2, 3, 4, 5, 6]
    assert rows[1]["name"] is None  # an empty CSV field is null
    assert lakelog.Table(table_path).partition_columns == ["day"]
    assert DeltaTable(table_path).to_pyarrow_table().num_rows == 6

    r = run("show", table_path, "--limit", "2", "--columns", "id,name")
    assert r.returncode == 0, r.stderr
    header = r.stdout.splitlines()[0].split()
    assert header == ["id", "name"]
    assert "(2 of 6 rows, version 0)" in r.stdout
    shown = run_json("show", table_path, "--limit", "0")
    assert shown["version"] == 0 and shown["num_rows"] == 6 and shown["total_rows"] == 6
    assert sorted(r["id"] for r in shown["rows"]) == [1, 2, 3, 4, 5, 6]
    assert set(shown["columns"]) == {"id", "name", "day"}

    r = run("write", table_path, inputs[0], "--mode", "overwrite")  # version 1
    assert r.returncode == 0, r.stderr
    assert run_json("show", table_path, "--version", "0", "--limit", "0")["num_rows"] == 6
    assert run_json("show", table_path)["num_rows"] == 3
    ts = lakelog.Table(table_path).history()[-1]["timestamp"].isoformat()
    assert run_json("show", table_path, "--timestamp", ts)["version"] == 0

    d = run_json("describe", table_path)
    assert d["version"] == 1 and d["partitionColumns"] == ["day"]
    assert [c["name"] for c in d["schema"]] == ["id", "name", "day"]
    assert d["schema"][0]["type"] == "long" and d["schema"][2]["partition"] is True
    assert d["numFiles"] == 2 and d["numRecords"] == 3 and d["sizeInBytes"] > 0
    assert d["protocol"]["minReaderVersion"] == 1
    r = run("describe", table_path)
    assert r.returncode == 0 and "partitioned: day" in r.stdout and "2 file(s)" in r.stdout

    h = run_json("history", table_path)
    assert [e["version"] for e in h] == [1, 0]
    assert h[0]["operation"] == "WRITE" and h[0]["operationParameters"]["mode"] == "Overwrite"
    r = run("history", table_path, "--limit", "1")
    assert r.returncode == 0 and "WRITE" in r.stdout and "CREATE TABLE" not in r.stdout

    f = run_json("files", table_path)
    assert f["version"] == 1 and len(f["files"]) == 2
    assert {x["partitionValues"]["day"] for x in f["files"]} == {"mon", "tue"}
    assert sum(x["numRecords"] for x in f["files"]) == 3
    assert len(run_json("files", table_path, "--version", "0")["files"]) == 5


def test_maintenance_commands(table_path):
    for i in range(12):
        lakelog.write_table(table_path, pa.table({"id": [i, i + 100], "p": ["a", "b"]}), partition_by=["p"] if i == 0 else None)
    expected = sorted(lakelog.read_table(table_path).column("id").to_pylist())

    r = run("optimize", table_path, "--target-size", "64MiB")
    assert r.returncode == 0, r.stderr
    assert "compacted 24 file(s)" in r.stdout and "committed version 12" in r.stdout
    assert sorted(lakelog.read_table(table_path).column("id").to_pylist()) == expected
    again = run_json("optimize", table_path)
    assert again["committed"] is False and again["version"] == 12

    r = run("vacuum", table_path, "--retain-hours", "0")
    assert "--no-enforce-retention" in one_line_error(r, 2)
    r = run("vacuum", table_path, "--retain-hours", "0", "--no-enforce-retention")
    assert r.returncode == 0, r.stderr
    assert "dry run: 24 file(s) would be deleted" in r.stdout
    v = run_json("vacuum", table_path, "--retain-hours", "0", "--no-enforce-retention", "--no-dry-run")
    assert v["dry_run"] is False and v["num_files"] == 24 and v["version"] == 14
    assert sorted(DeltaTable(table_path).to_pyarrow_table().column("id").to_pylist()) == expected

    r = run("restore", table_path, "20")
    assert "version 20" in one_line_error(r, 2)
    r = run("restore", table_path, "3")  # its files were vacuumed
    assert "no longer exist" in one_line_error(r, 2)
    lakelog.write_table(table_path, pa.table({"id": [999], "p": ["a"]}), mode="overwrite")  # v15
    res = run_json("restore", table_path, "14")
    assert res["version"] == 16 and res["restoredVersion"] == 14
    assert sorted(lakelog.read_table(table_path).column("id").to_pylist()) == expected
    assert sorted(DeltaTable(table_path).to_pyarrow_table().column("id").to_pylist()) == expected

    assert run_json("checkpoint", table_path) == {"version": 16}
    assert "00000000000000000016.checkpoint.parquet" in os.listdir(os.path.join(table_path, "_delta_log"))
    old = time.time() - 40 * 86400
    for i in range(14):
        os.utime(os.path.join(table_path, "_delta_log", f"{i:020d}.json"), (old, old))
    c = run_json("cleanup-log", table_path, "--dry-run")
    assert c["dry_run"] is True and c["files"] == [f"{i:020d}.json" for i in range(10)]
    r = run("cleanup-log", table_path)
    assert r.returncode == 0 and "10 log file(s) deleted" in r.stdout
    r = run("show", table_path, "--version", "3")
    assert "version 3" in one_line_error(r, 2)
    assert run_json("describe", table_path, "--version", "10")["version"] == 10  # its data files were vacuumed


def test_errors_exit_codes_and_one_line_messages(tmp_path, table_path, inputs):
    missing = tmp_path / "nope"
    for cmd in ("show", "vacuum"):
        line = one_line_error(run(cmd, missing), 2)
        assert "no table at" in line

    r = run("show")  # missing PATH
    one_line_error(r, 2)
    r = run("frobnicate", table_path)
    one_line_error(r, 2)
    r = run("show", table_path, "--limit", "-3")
    one_line_error(r, 2)
    r = run("optimize", table_path, "--target-size", "lots")
    one_line_error(r, 2)
    r = run("show", table_path, "--storage-option", "novalue")
    one_line_error(r, 2)

    r = run("write", table_path, tmp_path / "missing.csv")
    assert "does not exist" in one_line_error(r, 2)
    r = run("write", table_path, inputs[0], "--partition-by", "nosuch")
    assert "nosuch" in one_line_error(r, 2)
    assert not os.path.exists(os.path.join(table_path, "_delta_log"))
    assert run("write", table_path, inputs[0]).returncode == 0
    r = run("write", table_path, inputs[0], "--mode", "error")
    assert "exists" in one_line_error(r, 1)
    bad = tmp_path / "bad.csv"
    bad.write_text("id,extra\n1,x\n")
    r = run("write", table_path, bad)
    assert "extra" in one_line_error(r, 2)
    r = run("show", table_path, "--columns", "nosuch")
    one_line_error(r, 2)
    r = run("show", table_path, "--storage-option", "lakelog.bogus=1")
    assert "lakelog.bogus" in one_line_error(r, 2)
    assert run("show", table_path, "--storage-option", "lakelog.single_writer=true").returncode == 0

    # A corrupt log is a failure (1), not a usage error; --debug adds the traceback.
    with open(os.path.join(table_path, "_delta_log", f"{1:020d}.json"), "w") as f:
        f.write('{"commitInfo": {}}\n{"add": {"path": "x.parquet", "partitionValues"')
    r = run("show", table_path)
    assert "incomplete log file" in one_line_error(r, 1)
    r = run("show", table_path, "--debug")
    assert r.returncode == 1 and "Traceback" in r.stderr


def test_help_version_and_module_entry_point():
    r = run("--help")
    assert r.returncode == 0
    assert "exit codes" in r.stdout and "vacuum" in r.stdout and "130" in r.stdout
    r = run("vacuum", "--help")
    assert r.returncode == 0 and "--no-dry-run" in r.stdout and "--retain-hours" in r.stdout
    r = subprocess.run([sys.executable, "-m", "lakelog.cli", "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == f"lakelog {lakelog.__version__}"


def test_check_and_convert_commands(tmp_path, table_path):
    lakelog.write_table(table_path, pa.table({"id": [1, 2]}))
    r = run("check", table_path, "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["ok"] is True and report["version"] == 0 and report["problems"] == [] and report["orphans"] == []
    assert "no table at" in one_line_error(run("check", tmp_path / "nope"), 2)  # README: no table is exit code 2

    raw = tmp_path / "raw"
    raw.mkdir()
    pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64())}), raw / "part-0.parquet")
    r = run("convert", raw, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["version"] == 0
    assert sorted(lakelog.read_table(str(raw)).column("id").to_pylist()) == [1, 2, 3]
    assert sorted(DeltaTable(str(raw)).to_pyarrow_table().column("id").to_pylist()) == [1, 2, 3]


def test_main_in_process_with_options_before_the_command(tmp_path, table_path, capsys):
    from lakelog.cli import main

    missing = str(tmp_path / "nope")
    for argv in (["describe", missing], ["history", missing], ["files", missing], ["optimize", missing],
                 ["checkpoint", missing], ["restore", missing, "0"], ["cleanup-log", missing]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "no table at" in err, argv

    lakelog.write_table(table_path, pa.table({"id": [1, 2, 3]}))
    assert main(["--json", "history", table_path]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out[0]["version"] == 0
    assert main(["show", table_path, "--version", "5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "version 5" in err
    assert main(["vacuum", table_path, "--retain-hours", "200"]) == 0
    assert "dry run: 0 file(s)" in capsys.readouterr().out


def test_interrupt_exits_130_and_commits_nothing(tmp_path, table_path):
    """SIGINT while ``lakelog write`` writes data files: exit code 130, one line, no commit, no data file left."""
    import pyarrow.csv as pcsv

    big = tmp_path / "big.csv"
    n = 4_000_000
    pcsv.write_csv(pa.table({"id": pa.array(range(n), pa.int64()), "name": pa.array(["some text"] * n)}), big)
    proc = subprocess.Popen([*CMD, "write", table_path, str(big)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        # The first data file exists once the command is writing: interrupt it then.
        while not any(f.endswith(".parquet") for _, _, fs in os.walk(table_path) for f in fs):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, (proc.returncode, out, err)
    assert err.strip().splitlines() == ["lakelog: interrupted"]
    assert not os.path.exists(os.path.join(table_path, "_delta_log")) or not os.listdir(os.path.join(table_path, "_delta_log"))
    assert [f for _, _, fs in os.walk(table_path) for f in fs if f.endswith(".parquet")] == []  # aborted: deleted


def test_show_names_a_missing_data_file(table_path):
    lakelog.write_table(table_path, pa.table({"id": [1, 2]}))
    gone = lakelog.Table(table_path).files()[0]
    os.remove(os.path.join(table_path, gone))
    for extra in ([], ["--limit", "0"], ["--columns", "id"]):
        line = one_line_error(run("show", table_path, *extra), 1)
        assert gone in line and "missing" in line


# ---------------------------------------------------------------- messages for people at a shell


def _main(capsys, *argv) -> tuple[int, str, str]:
    from lakelog.cli import main

    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


PYTHON_SPELLINGS = ("schema_mode=", "mode='", "write_table(", "lakelog.convert(", "storage_options=", "partition_by=", "lakelog.Table")


def _one_cli_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert not any(s in err for s in PYTHON_SPELLINGS), err
    return err.strip()


def test_errors_suggest_cli_flags_not_python_arguments(tmp_path, table_path, inputs, capsys):
    code, _, err = _main(capsys, "write", table_path, inputs[0])
    assert code == 0, err
    extra = tmp_path / "extra.csv"
    extra.write_text("id,name,day,more\n9,x,mon,y\n")
    code, _, err = _main(capsys, "write", table_path, extra)
    assert code == 2 and "--schema-mode merge" in _one_cli_line(err)
    assert _main(capsys, "write", table_path, extra, "--schema-mode", "merge")[0] == 0  # the advice works
    code, _, err = _main(capsys, "write", table_path, inputs[0], "--mode", "error")
    assert code == 1 and "--mode append or --mode overwrite" in _one_cli_line(err)
    code, _, err = _main(capsys, "write", table_path, inputs[0], "--partition-by", "day")
    assert code == 2 and "omit --partition-by" in _one_cli_line(err) and "--schema-mode overwrite" in err
    code, _, err = _main(capsys, "show", tmp_path / "nope")
    assert code == 2 and "does not exist" in _one_cli_line(err) and "lakelog write" in err


def test_show_says_what_a_path_that_is_no_table_is(tmp_path, capsys):
    """show on a Parquet directory, a missing path and a file all said '_delta_log has no commits'."""
    parquet_dir = tmp_path / "raw data"
    (parquet_dir / "day=1").mkdir(parents=True)
    pq.write_table(pa.table({"id": [1]}), parquet_dir / "day=1" / "part-0.parquet")
    a_file = tmp_path / "t.parquet"
    pq.write_table(pa.table({"id": [1]}), a_file)
    (tmp_path / "empty").mkdir()
    (tmp_path / "nolog" / "_delta_log").mkdir(parents=True)
    cases = {
        parquet_dir: ["plain Parquet directory", f"lakelog convert '{parquet_dir}'"],
        tmp_path / "missing": ["does not exist", "lakelog write"],
        a_file: ["is a Parquet file, not a table directory", "lakelog convert DIRECTORY", f"lakelog write TABLE {shlex.quote(str(a_file))}"],
        tmp_path / "empty": ["has no _delta_log", "lakelog write"],
        tmp_path / "nolog": ["_delta_log has no commits"],
    }
    for path, expected in cases.items():
        code, _, err = _main(capsys, "show", path)
        line = _one_cli_line(err)
        assert code == 2 and all(e in line for e in expected), line
    # The suggested command works.
    code, out, err = _main(capsys, "convert", parquet_dir)
    assert code == 0, err
    assert _main(capsys, "show", parquet_dir)[0] == 0


def test_convert_warnings_are_one_line_and_a_bad_layout_is_bad_input(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    pq.write_table(pa.table({"id": [1]}), src / "a.parquet")
    (src / "notes.txt").write_text("not data")
    code, out, err = _main(capsys, "convert", src)
    assert code == 0 and "converted" in out
    assert err.startswith("lakelog convert: warning: 1 file(s) not named *.parquet") and err.count("\n") == 1, err
    assert "UserWarning" not in err and "warnings.warn" not in err and ".py:" not in err

    bad = tmp_path / "bad"
    (bad / "not-a-partition").mkdir(parents=True)
    pq.write_table(pa.table({"id": [1]}), bad / "not-a-partition" / "a.parquet")
    code, _, err = _main(capsys, "convert", bad)
    assert code == 2 and "partition directory" in _one_cli_line(err)

    nanos = tmp_path / "nanos"
    nanos.mkdir()
    pq.write_table(pa.table({"t": pa.array([1], pa.timestamp("ns"))}), nanos / "a.parquet")
    code, _, err = _main(capsys, "convert", nanos)
    assert code == 2 and "TIMESTAMP(NANOS)" in err and "a.parquet" in err


def test_unreadable_timestamp_or_version_flags_are_usage_errors(table_path, capsys):
    lakelog.write_table(table_path, pa.table({"id": [1]}))
    for argv in (["show", table_path, "--timestamp", "notatime"], ["restore", table_path, "--timestamp", "yesterday"]):
        code, _, err = _main(capsys, *argv)
        assert code == 2 and "ISO-8601" in err and "2026-11-22T10:00:00Z" in err, err
    code, _, err = _main(capsys, "show", table_path, "--version", "1.9")
    assert code == 2 and "whole number" in err
    code, out, err = _main(capsys, "show", table_path, "--timestamp", "2999-01-01 00:00:00+01:00")
    assert code == 0 and "version 0" in out, err


def test_show_on_a_csv_file_points_at_write_which_takes_it(tmp_path, inputs, capsys):
    """show a.csv suggested convert, which cannot take a CSV file."""
    code, _, err = _main(capsys, "show", inputs[0])
    line = _one_cli_line(err)
    assert code == 2 and "it is a CSV file" in line and f"lakelog write TABLE {shlex.quote(inputs[0])}" in line and "convert" not in line
    table = tmp_path / "from_csv"
    assert _main(capsys, "write", table, inputs[0])[0] == 0  # the suggested command works
    assert lakelog.read_table(str(table)).num_rows == 3


def test_list_options_never_swallow_positional_arguments(tmp_path, inputs, capsys):
    """--partition-by and --columns took every following word, input files and PATH included."""
    table = tmp_path / "t"
    code, _, err = _main(capsys, "write", table, "--partition-by", "day", *inputs)
    assert code == 0, err
    assert lakelog.Table(str(table)).partition_columns == ["day"] and lakelog.read_table(str(table)).num_rows == 6
    code, out, err = _main(capsys, "show", "--columns", "id", "--columns", "name", table, "--limit", "1")
    assert code == 0, err
    assert out.split()[:2] == ["id", "name"] and "day" not in out.splitlines()[0]
    other = tmp_path / "t2"
    code, _, err = _main(capsys, "write", other, "--partition-by", "day,name", inputs[0])
    assert code == 0, err
    assert lakelog.Table(str(other)).partition_columns == ["day", "name"]


def test_convert_partition_by_takes_one_value_and_not_partitioned_is_a_flag(tmp_path, capsys):
    for name in ("typed", "flat"):
        d = tmp_path / name / "day=2026-01-02"
        d.mkdir(parents=True)
        pq.write_table(pa.table({"id": [1]}), d / "part-0.parquet")
    code, _, err = _main(capsys, "convert", "--partition-by", "day:date", tmp_path / "typed")
    assert code == 0, err
    assert lakelog.Table(str(tmp_path / "typed")).schema.field("day").type == pa.date32()
    code, _, err = _main(capsys, "convert", tmp_path / "flat", "--not-partitioned")
    assert code == 2 and "--partition-by day (or omit it)" in _one_cli_line(err) and "--not-partitioned" in err
    flat = tmp_path / "plain"
    flat.mkdir()
    pq.write_table(pa.table({"id": [1]}), flat / "part-0.parquet")
    code, _, err = _main(capsys, "convert", flat, "--not-partitioned")
    assert code == 0, err
    assert lakelog.Table(str(flat)).partition_columns == []


def test_table_properties_from_the_shell_create_a_dv_cdf_column_mapping_table(tmp_path, inputs, capsys):
    table = tmp_path / "t"
    code, _, err = _main(capsys, "write", table, inputs[0], "--set", "delta.enableDeletionVectors=true",
                         "--set", "delta.columnMapping.mode=name", "--set", "delta.enableChangeDataFeed=true")
    assert code == 0, err
    t = lakelog.Table(str(table))
    assert t.metadata.configuration["delta.enableDeletionVectors"] == "true"
    assert {"deletionVectors", "columnMapping", "changeDataFeed"} <= set(t.protocol.writer_features or [])
    code, _, err = _main(capsys, "delete", table, "--where", "id = 1")
    assert code == 0, err
    assert any(a.deletion_vector is not None for a in lakelog.Table(str(table)).snapshot.files.values())
    code, out, err = _main(capsys, "changes", table, "--from", "1", "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [(r["id"], r["_change_type"], r["_commit_version"]) for r in rows] == [(1, "delete", 1)]
    out_file = tmp_path / "changes.parquet"
    code, _, err = _main(capsys, "changes", table, "--output", str(out_file))
    assert code == 0, err
    assert pq.read_table(out_file).num_rows == lakelog.Table(str(table)).changes().num_rows
    code, _, err = _main(capsys, "changes", table, "--from", "7")
    assert code == 2 and "past the table's latest version" in err
    code, out, err = _main(capsys, "properties", table, "--set", "delta.appendOnly=true", "--json")
    assert code == 0, err
    assert json.loads(out)["properties"]["delta.appendOnly"] == "true"
    code, out, _ = _main(capsys, "properties", table)
    assert code == 0 and "delta.appendOnly" in out and "delta.columnMapping.mode" in out
    code, _, err = _main(capsys, "properties", table, "--set", "novalue")
    assert code == 2 and "KEY=VALUE" in err
    import deltalake

    peer = deltalake.QueryBuilder().register("t", DeltaTable(str(table))).execute("select id from t").read_all()
    assert sorted(pa.table(peer).column("id").to_pylist()) == [2, 3] == sorted(lakelog.read_table(str(table)).column("id").to_pylist())


def test_write_replace_where(tmp_path, inputs, capsys):
    table = tmp_path / "t"
    assert _main(capsys, "write", table, inputs[0])[0] == 0
    monday = tmp_path / "monday.csv"
    monday.write_text("id,name,day\n10,new,mon\n")
    code, out, err = _main(capsys, "write", table, monday, "--replace-where", "day = 'mon'")
    assert code == 0, err
    rows = sorted((r["id"], r["day"]) for r in lakelog.read_table(str(table)).to_pylist())
    assert rows == [(2, "tue"), (10, "mon")] == sorted((r["id"], r["day"]) for r in DeltaTable(str(table)).to_pyarrow_table().to_pylist())
    code, _, err = _main(capsys, "write", table, monday, "--replace-where", "day = 'tue'")
    assert code == 2 and "do not satisfy the overwrite predicate" in _one_cli_line(err)
    code, _, err = _main(capsys, "write", table, monday, "--replace-where", "day = 'mon'", "--mode", "append")
    assert code == 2 and "--replace-where" in _one_cli_line(err)
    assert lakelog.Table(str(table)).version == 1  # the refused writes committed nothing


def test_engine_errors_read_as_the_users_mistake(table_path, inputs, capsys):
    assert _main(capsys, "write", table_path, inputs[0])[0] == 0
    code, _, err = _main(capsys, "delete", table_path, "--where", "nmae = 'ann'")
    line = _one_cli_line(err)
    assert code == 2 and "unknown column 'nmae'; did you mean 'name'?" in line and "Binder" not in line
    code, _, err = _main(capsys, "update", table_path, "--set", "name=uper(name)", "--all")
    line = _one_cli_line(err)
    assert code == 2 and "unknown function 'uper'; did you mean 'upper'?" in line and "Catalog" not in line
    code, _, err = _main(capsys, "delete", table_path, "--where", "id >> 'x'")
    assert code == 2 and "Candidate" not in err and "Binder" not in err


def test_merge_rename_and_drop_column_from_the_shell(tmp_path, inputs, capsys):
    table = tmp_path / "t"
    assert _main(capsys, "write", table, inputs[0], "--set", "delta.columnMapping.mode=name")[0] == 0
    src = tmp_path / "src.csv"
    src.write_text("id,name,day\n1,ANN,mon\n9,ike,sun\n")
    code, out, err = _main(capsys, "merge", table, src, "--on", "target.id = source.id", "--when-matched", "update-all",
                           "--when-not-matched", "insert-all", "--when-not-matched-by-source", "delete",
                           "--not-matched-by-source-condition", "target.day = 'tue'")
    assert code == 0 and "1 row(s) inserted, 1 updated, 1 deleted" in out, err
    code, out, err = _main(capsys, "merge", table, src, "--on", "target.id = source.id", "--json",
                           "--when-matched-update", "name=lower(source.name) || '!'", "--matched-condition", "source.id = 1")
    assert code == 0 and json.loads(out)["num_target_rows_updated"] == 1, err
    assert _main(capsys, "rename-column", table, "name", "full name")[0] == 0
    assert _main(capsys, "drop-column", table, "day")[0] == 0
    rows = sorted(lakelog.read_table(str(table)).to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 1, "full name": "ann!"}, {"id": 3, "full name": "cid"}, {"id": 9, "full name": "ike"}]
    code, _, err = _main(capsys, "merge", table, src, "--on", "target.id = source.id")
    assert code == 2 and "at least one clause" in _one_cli_line(err)
    code, _, err = _main(capsys, "rename-column", tmp_path / "nope", "a", "b")
    assert code == 2 and "does not exist" in _one_cli_line(err)


def test_table_definition_commands_constraints_generated_identity_and_widening(tmp_path, capsys):
    csv = tmp_path / "in.csv"
    csv.write_text("name,ts,amount\na,2026-01-01T10:00:00Z,1\nb,2026-01-02T10:00:00Z,-1\n")
    table = tmp_path / "t"
    code, _, err = _main(capsys, "write", table, csv, "--generated", "day=CAST(ts AS DATE)", "--identity", "id", "--partition-by", "day")
    assert code == 0, err
    rows = {r["name"]: r for r in lakelog.Table(str(table)).to_pyarrow().to_pylist()}
    assert str(rows["a"]["day"]) == "2026-01-01" and sorted(r["id"] for r in rows.values()) == [1, 2]
    code, _, err = _main(capsys, "add-constraint", table, "positive", "amount > 0")
    assert code == 1 and "violate" in err and lakelog.Table(str(table)).version == 0
    code, _, err = _main(capsys, "add-constraint", table, "named", "name IS NOT NULL")
    assert code == 0, err
    code, _, err = _main(capsys, "alter-column-type", table, "amount", "double")  # (a CSV's integers are long)
    assert code == 2 and "not one of Delta's type widenings" in err
    code, _, err = _main(capsys, "alter-column-type", table, "amount", "decimal(22,1)")
    assert code != 0 and "delta.enableTypeWidening" in err
    assert _main(capsys, "properties", table, "--set", "delta.enableTypeWidening=true")[0] == 0
    code, _, err = _main(capsys, "alter-column-type", table, "amount", "decimal(22,1)")
    assert code == 0, err
    assert lakelog.Table(str(table)).schema.field("amount").type == pa.decimal128(22, 1)
    code, out, err = _main(capsys, "drop-constraint", table, "named", "--json")
    assert code == 0, err
    assert "delta.constraints.named" not in lakelog.Table(str(table)).metadata.configuration
    code, _, err = _main(capsys, "drop-constraint", table, "named")
    assert code == 2 and "no constraint" in err


def test_rewriting_commands_choose_arrows_pool_unless_the_user_did_or_pyarrow_is_loaded():
    from lakelog.cli import arrow_pool_for

    for command in ("delete", "update", "merge", "optimize"):
        assert arrow_pool_for(command, {}, {}) == "system"
    assert arrow_pool_for("delete", {"ARROW_DEFAULT_MEMORY_POOL": "mimalloc"}, {}) is None  # the user's choice stays
    assert arrow_pool_for("delete", {}, {"pyarrow": pa}) is None  # too late: the pool was fixed at import
    assert arrow_pool_for("show", {}, {}) is None  # commands that only read or touch the log keep pyarrow's default


EXIT_LOOP = int(os.environ.get("LAKELOG_EXIT_LOOP", "6"))  # runs of each command; more for a longer hunt


def test_every_run_exits_with_the_commands_status(s3_endpoint, table_path):
    """A scan stopped early on an object store (``show --limit``) or a ``check`` that met damaged files
    left Arrow's I/O threads inside lakelog's Python filesystem when the interpreter shut down, and the
    process aborted after printing its output ("terminate called without an active exception", exit
    -6 instead of 0 or 1). Every run must exit with the command's own status."""
    uri = s3_endpoint.new_table_uri()
    lakelog.write_table(uri, pa.table({"id": list(range(3200)), "p": [i % 32 for i in range(3200)]}), partition_by=["p"])
    damaged = s3_endpoint.new_table_uri()
    lakelog.write_table(damaged, pa.table({"id": list(range(320)), "p": [i % 32 for i in range(320)]}), partition_by=["p"])
    lakelog.write_table(table_path, pa.table({"id": list(range(320)), "p": [i % 32 for i in range(320)]}), partition_by=["p"])
    for where in (damaged, table_path):
        from tests.table_files import table_fs

        fs, root = table_fs(where)
        first, second = sorted(lakelog.Table(where).files())[:2]
        fs.rm_file(f"{root}/{first}")
        fs.pipe_file(f"{root}/{second}", b"PAR1 broken")
    cases = [(("show", uri, "--limit", "1"), 0, "of 3,200 rows"), (("check", damaged), 1, "problem(s) found"),
             (("check", table_path), 1, "problem(s) found"), (("check", damaged, "--json"), 1, '"ok": false')]
    for _ in range(EXIT_LOOP):
        for args, code, text in cases:
            r = run(*args)
            assert (r.returncode, text in r.stdout) == (code, True), (args, r.returncode, r.stdout[-500:], r.stderr[-2000:])

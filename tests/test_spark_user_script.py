"""A Spark script run as users run it: the virtual environment's python, not activated."""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def test_register_makes_workers_run_the_scripts_interpreter(tmp_path):
    # PATH's python3 is an interpreter without pyarrow or lakelog, as the system one of a fresh machine.
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    probe = subprocess.run([str(bare / "bin" / "python3"), "-c", "import pyarrow"], capture_output=True)
    assert probe.returncode != 0  # else this test could not fail
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_")) and k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{bare / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin"
    proc = subprocess.run(
        [sys.executable, os.path.join(HERE, "user_spark_script.py"), str(tmp_path)],
        env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["worker_python"] == sys.executable
    assert out["second_save"] == "TableExistsError"  # save() without a mode refuses an existing table
    assert out["count"] == 10  # mode("ignore") wrote nothing
    assert out["partition_columns"] == ["p"]  # partitionBy() became the table's partitioning
    expected = {i: (str(i % 2), i * 2) for i in range(10)} | {i: (str(i % 2), i * 3) for i in range(5, 15)}
    del expected[0]
    assert out["rows"] == sorted([i, p, v] for i, (p, v) in expected.items())
    live = [i for i in range(100) if i % 3]
    assert out["dv_rows"] == live and out["dv_rows_after_restart"] == live

"""format("lakelog") with no set-up call: a fresh Python process, a bare SparkSession, only the package
on the path (as `pip install lakelog[spark]` leaves it)."""

import json
import os
import subprocess
import sys



HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def test_bare_session_reads_writes_and_streams(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    # An activated virtualenv: Spark's default worker interpreter `python3` is this one.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = ROOT
    proc = subprocess.run(
        [sys.executable, os.path.join(HERE, "bare_spark_job.py"), str(tmp_path)],
        env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["pushdown_setting"] == "false"  # the session really is bare
    assert out["count"] == 120
    assert out["filtered"] == out["filtered_pushdown_option"] == [1, 4, 7, 10, 13, 16, 19]
    assert out["v0"] == 100
    assert out["streamed"] == list(range(120))

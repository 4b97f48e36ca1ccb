"""spark_ext.sql on a session built without spark_ext.configure (only spark_ext.register, as before the
catalog existed): test_spark_sql.py and test_spark_sql_clauses.py, run by pytest in a process of its own
whose Spark session is plain."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def test_spark_ext_sql_on_a_plain_session(tmp_path):
    env = dict(os.environ, LAKELOG_TEST_PLAIN_SPARK="1")
    env.pop("PYTEST_XDIST_WORKER", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "--basetemp", str(tmp_path / "t"),
         os.path.join(HERE, "test_spark_sql.py"), os.path.join(HERE, "test_spark_sql_clauses.py")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500,
    )
    tail = "\n".join(proc.stdout.strip().splitlines()[-30:])
    assert proc.returncode == 0, tail
    assert " passed" in tail and " skipped" not in tail.splitlines()[-1], tail

"""format("lakelog") with no set-up call: a fresh Python process, a bare SparkSession, only the package
on the path (as `pip install lakelog[spark]` leaves it, or `pip install -e .`: the test environment's
own install, which `make` does editable)."""

import json
import os
import subprocess
import sys
import sysconfig

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FULL = os.environ.get("LAKELOG_CLUSTER_FULL") == "1"


def _run_bare_job(python: str, tmp_path) -> dict:
    """bare_spark_job.py run by ``python`` as in an activated virtualenv (Spark's default worker
    interpreter, the ``python3`` on PATH, is that one), with nothing but its installs on its path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.path.dirname(python) + os.pathsep + env.get("PATH", "")
    proc = subprocess.run(
        [python, os.path.join(HERE, "bare_spark_job.py"), str(tmp_path)],
        env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_bare_session_reads_writes_and_streams(tmp_path):
    out = _run_bare_job(sys.executable, tmp_path)
    assert out["pushdown_setting"] == "false"  # the session really is bare
    assert out["count"] == 120
    assert out["filtered"] == out["filtered_pushdown_option"] == [1, 4, 7, 10, 13, 16, 19]
    assert out["v0"] == 100
    assert out["streamed"] == list(range(120))


@pytest.mark.skipif(not FULL, reason="builds an editable install in a fresh environment: set LAKELOG_CLUSTER_FULL=1")
def test_default_editable_install_is_found_by_spark(tmp_path):
    """A plain `pip install -e .` (setuptools' default editable mode, the build requirements from the
    package index) in a fresh environment: Spark's lookup of data sources (pkgutil.iter_modules over
    sys.path) finds pyspark_lakelog with no register call."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "-e", ROOT], check=True, timeout=900,
                   capture_output=True)
    # The dependencies (pyspark, pyarrow, ...) from this environment, without its own install of lakelog
    # (a plain path line: the .pth files in that directory are not read).
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True, capture_output=True,
                          text=True).stdout.strip()
    with open(os.path.join(site, "zz_test_dependencies.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    work = tmp_path / "work"
    work.mkdir()
    found = subprocess.run([python, "-c", "import pkgutil; print([m.name for m in pkgutil.iter_modules() if m.name.startswith('pyspark_')])"],
                           cwd=str(work), capture_output=True, text=True, check=True).stdout.strip()
    assert found == "['pyspark_lakelog']"
    out = _run_bare_job(python, work)
    assert out["count"] == 120 and out["streamed"] == list(range(120))

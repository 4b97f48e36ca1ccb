"""Every code block in README.md runs as written.

The ```python blocks run in order in one namespace, as a reader pastes them into one session (later
blocks use the quickstart's table), in a fresh working directory; the Spark block gets the test run's
Spark session from ``SparkSession.builder.getOrCreate()``. ```sh blocks of ``lakelog`` commands run
with ``bash -e`` in a fresh directory, ``lakelog`` being this checkout's CLI; the ``make`` block is
checked with ``make -n`` (its targets exist and expand), since running it is what ``make test`` and
``make demo`` themselves do. The install block (``pip install``) runs as a new user runs it: in a
copy of the project, with a fresh virtual environment's ``python`` and ``lakelog`` first on PATH.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK_RE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _blocks() -> list[tuple[str, str]]:
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        return [(m.group(1), m.group(2)) for m in BLOCK_RE.finditer(f.read())]


def test_every_block_has_a_language_the_test_runs():
    blocks = _blocks()
    assert blocks and {lang for lang, _ in blocks} <= {"python", "sh"}
    assert sum(lang == "python" for lang, _ in blocks) >= 3


def test_python_blocks_run_in_order(spark, azurite, gcs_server, tmp_path, monkeypatch, capsys):
    """The object-store blocks run on the session's Azurite and fake-gcs-server (their fixtures set the
    variables a reader sets: AZURITE_BLOB_STORAGE_URL, STORAGE_EMULATOR_HOST)."""
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__readme__"}
    for i, (lang, code) in enumerate(_blocks()):
        if lang != "python":
            continue
        try:
            exec(compile(code, f"README.md python block {i}", "exec"), namespace)
        except Exception as e:
            raise AssertionError(f"README python block {i} failed: {type(e).__name__}: {e}\n{code}") from e
    out = capsys.readouterr().out
    assert "CREATE TABLE" in out  # the quickstart printed its history


def _lakelog_wrapper(directory) -> str:
    """A ``lakelog`` executable for this interpreter and checkout (whatever is installed)."""
    bin_dir = directory / "bin"
    bin_dir.mkdir()
    script = bin_dir / "lakelog"
    script.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m lakelog.cli \"$@\"\n")
    script.chmod(0o755)
    return str(bin_dir)


def _project_copy(directory) -> str:
    """The files a clone has that an install reads (no .venv, build output or caches)."""
    import shutil

    dest = directory / "lakelog"
    skip = shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info", "build", "dist", ".pytest_cache", ".hypothesis",
                                  "tests", "benchmarks", "demo_output", "spark-warehouse", "metastore_db")
    shutil.copytree(REPO, dest, ignore=skip)
    return str(dest)


def test_install_block_installs_into_a_fresh_environment(tmp_path):
    blocks = [code for lang, code in _blocks() if lang == "sh" and "pip install" in code]
    assert len(blocks) == 1, "the README has one install block"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = str(venv / "bin") + os.pathsep + "/usr/bin:/bin"
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", blocks[0]], cwd=_project_copy(tmp_path), env=env,
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, f"README install block failed:\n{blocks[0]}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert r.stdout.startswith("lakelog "), r.stdout
    # What the quickstart needs came with it (pandas included), from the environment, not this checkout.
    check = "import lakelog, pandas; print(lakelog.__file__)"
    r = subprocess.run([str(venv / "bin" / "python"), "-c", check], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith(str(venv)), r.stderr


def test_shell_blocks_run(tmp_path):
    env = dict(os.environ)
    env["PATH"] = _lakelog_wrapper(tmp_path) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    ran = 0
    for i, (lang, code) in enumerate(_blocks()):
        if lang != "sh":
            continue
        commands = [line.split("#", 1)[0].strip() for line in code.splitlines()]
        commands = [c for c in commands if c]
        if any("pip install" in c for c in commands):
            continue  # test_install_block_installs_into_a_fresh_environment
        if all(c.startswith("make ") for c in commands):
            targets = [t for c in commands for t in c.split()[1:]]
            r = subprocess.run(["make", "-n", *targets], cwd=REPO, capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, f"README sh block {i}: make -n {targets} failed:\n{r.stderr}"
            continue
        work = tmp_path / f"block{i}"
        work.mkdir()
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=work, env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"README sh block {i} failed ({r.returncode}):\n{code}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
        assert "error" not in r.stderr, r.stderr
        ran += 1
    assert ran >= 1

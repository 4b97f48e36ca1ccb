"""Every code block in README.md runs as written.

The ```python blocks run in order in one namespace, as a reader pastes them into one session (later
blocks use the quickstart's table), in a fresh working directory; the Spark block gets the test run's
Spark session from ``SparkSession.builder.getOrCreate()``. ```sh blocks of ``lakelog`` commands run
with ``bash -e`` in a fresh directory, ``lakelog`` being this checkout's CLI; the ``make`` block is
checked with ``make -n`` (its targets exist and expand), since running it is what ``make test`` and
``make demo`` themselves do. The install block (``pip install``) runs as a new user runs it: in a
copy of the project, with a fresh virtual environment's ``python`` and ``lakelog`` first on PATH.

The blocks of "Object stores" start the emulators they use (moto's S3 server and Azurite on their
fixed ports, fake-gcs-server on a free one) and run, in their order, in a process of their own, from
the checkout, with no store variable in its environment: in a network namespace of its own where
``unshare`` allows one, so the fixed ports are free and the servers reach nothing else; they are
stopped when the blocks are done.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK_RE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
HEADING_RE = re.compile(r"^## (.*)$", re.MULTILINE)
OBJECT_STORES = "Object stores: S3, Azure, GCS"
CATALOGS = "Catalogs: AWS Glue and Iceberg catalogs"
# Sections whose blocks start the servers they use and run in a process of their own, with what they print.
OWN_PROCESS = {OBJECT_STORES: ["2", "2", "2"], CATALOGS: ["DELTA s3://lakelog-catalogs/orders", "2", "4 2", "3"]}


def _blocks(section: str | tuple[str, ...] | None = None, other_sections: bool = True) -> list[tuple[str, str]]:
    """(language, code) of the README's blocks; with ``section`` (a ``##`` heading or several), only those
    under it (``other_sections=False``) or only those elsewhere (``other_sections=True``)."""
    sections = (section,) if isinstance(section, str) else section
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        text = f.read()
    headings = [(m.start(), m.group(1).strip()) for m in HEADING_RE.finditer(text)]
    out = []
    for m in BLOCK_RE.finditer(text):
        under = next((h for pos, h in reversed(headings) if pos < m.start()), None)
        if sections is None or (under in sections) != other_sections:
            out.append((m.group(1), m.group(2)))
    return out


def test_every_block_has_a_language_the_test_runs():
    blocks = _blocks()
    assert blocks and {lang for lang, _ in blocks} <= {"python", "sh"}
    assert sum(lang == "python" for lang, _ in blocks) >= 3


def test_python_blocks_run_in_order(spark, tmp_path, monkeypatch, capsys):
    """Those of "Object stores" run with the emulators they start: test_object_store_blocks_start_their_emulators."""
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__readme__"}
    for i, (lang, code) in enumerate(_blocks(tuple(OWN_PROCESS))):
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
    for i, (lang, code) in enumerate(_blocks(tuple(OWN_PROCESS))):
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


# Runs the blocks of one README section in order (argv[1]: a JSON list of [language, code]): sh blocks
# with bash (each starts a server in the background; the next block waits until one more TCP port
# listens), python blocks in one namespace.
_SECTION_DRIVER = r"""
import json, subprocess, sys, time

def listening():
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                n += sum(1 for line in f.readlines()[1:] if line.split()[3] == "0A")
        except OSError:
            pass
    return n

if sys.argv[2] == "netns":
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
namespace = {"__name__": "__readme__"}
servers = 0
log = open(sys.argv[3], "w")  # what the servers print
for i, (lang, code) in enumerate(json.load(open(sys.argv[1]))):
    if lang == "sh":
        subprocess.run(["bash", "-euo", "pipefail", "-c", code], check=True, stdout=log, stderr=subprocess.STDOUT)
        servers += code.count(" &")
        deadline = time.monotonic() + 120
        while listening() < servers and time.monotonic() < deadline:
            time.sleep(0.2)
        continue
    try:
        exec(compile(code, f"README.md object store block {i}", "exec"), namespace)
    except Exception as e:
        raise SystemExit(f"README object store block {i} failed: {type(e).__name__}: {e}\n{code}")
print("all blocks ran")
"""


@pytest.mark.parametrize("section", sorted(OWN_PROCESS))
def test_own_process_blocks_start_their_emulators(tmp_path, section):
    import json
    import signal

    blocks = _blocks(section, other_sections=False)
    assert [lang for lang, _ in blocks].count("sh") >= 1 and [lang for lang, _ in blocks].count("python") >= 2
    (tmp_path / "blocks.json").write_text(json.dumps(blocks))
    (tmp_path / "driver.py").write_text(_SECTION_DRIVER)
    # the reader's shell: this environment's programs (moto_server) first, no store variable set
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "AZURE_", "AZURITE_", "GOOGLE_", "STORAGE_EMULATOR_HOST", "GCE_", "PYTEST_"))}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    isolated = subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode == 0
    cmd = (["unshare", "-rn"] if isolated else []) + [sys.executable, str(tmp_path / "driver.py"), str(tmp_path / "blocks.json"),
                                                      "netns" if isolated else "shared", str(tmp_path / "servers.log")]
    with open(tmp_path / "out", "w") as out, open(tmp_path / "err", "w") as err:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=err, start_new_session=True)
        try:
            proc.wait(timeout=600)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the emulators the blocks started, and only them
            except ProcessLookupError:
                pass
            proc.wait()
    out, err = (tmp_path / "out").read_text(), (tmp_path / "err").read_text()
    assert proc.returncode == 0, f"stdout:\n{out}\nstderr:\n{err[-5000:]}\nservers:\n{(tmp_path / 'servers.log').read_text()[-3000:]}"
    assert out.splitlines() == [*OWN_PROCESS[section], "all blocks ran"], out

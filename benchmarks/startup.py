"""Start-up: ``import lakelog`` against ``import pyarrow`` (and ``import deltalake``), and the commands that read
only the log, each a fresh process, process wall time.

Contenders, interleaved (a, b, c, ..., a, b, c, ...) after one untimed run each, medians of ``--runs``:

* ``python -c pass`` (the interpreter's own start, for reference), ``import pyarrow``, ``import lakelog``,
  ``import deltalake``;
* ``lakelog --version`` (the console script; ``python -m lakelog.cli`` where it is not installed);
* on a small partitioned table of 5 commits, without a checkpoint and with one at version 3:
  ``lakelog history PATH``, ``lakelog describe PATH``, ``lakelog.Table(PATH).version`` and
  ``lakelog.Table(PATH).history()``.

Targets: ``import lakelog`` at most ``import pyarrow`` + 0.05 s; each log-only command at most 0.15 s.
(Which modules each command may import is pinned by tests/test_imports.py, not here.) CPU time (user +
system) is shown beside wall time: on a loaded machine a short process's wall time is mostly waiting for a core.

Children run with bytecode caches (``PYTHONDONTWRITEBYTECODE`` is dropped and one untimed child imports
everything first), as an installed package runs.

    python -m benchmarks.startup             # 15 runs per contender
    python -m benchmarks.startup --runs 31

Top-level imports here are the standard library only, so a child's imports are its own.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks.timing import machine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMPORT_MARGIN_S = 0.05
LOG_ONLY_TARGET_S = 0.15


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode caches
    env.pop("PYTHONWARNINGS", None)
    return env


def _cli() -> list[str]:
    script = os.path.join(os.path.dirname(sys.executable), "lakelog")
    return [script] if os.path.exists(script) else [sys.executable, "-m", "lakelog.cli"]


_MAKE_TABLES = """
import sys
import pyarrow as pa
import lakelog
for path, checkpoint in ((sys.argv[1], False), (sys.argv[2], True)):
    for k in range(5):
        lakelog.write_table(path, pa.table({"id": pa.array([k, k + 10], pa.int64()), "name": ["a", "b"], "part": [f"p{k % 2}"] * 2}),
                            partition_by=["part"])
        if checkpoint and k == 3:
            lakelog.Table(path).checkpoint()
"""


def make_tables(tmp: str) -> tuple[str, str]:
    """Two 5-commit partitioned tables: one without a checkpoint, one with a checkpoint at version 3."""
    plain, checkpointed = os.path.join(tmp, "json-only"), os.path.join(tmp, "checkpointed")
    subprocess.run([sys.executable, "-c", _MAKE_TABLES, plain, checkpointed], env=_env(), cwd=ROOT, check=True, capture_output=True)
    return plain, checkpointed


def contenders(plain: str, checkpointed: str) -> list[tuple[str, list[str]]]:
    py = sys.executable
    out = [
        ("python -c pass", [py, "-c", "pass"]),
        ("import pyarrow", [py, "-c", "import pyarrow"]),
        ("import lakelog", [py, "-c", "import lakelog"]),
        ("import deltalake", [py, "-c", "import deltalake"]),
        ("lakelog --version", _cli() + ["--version"]),
    ]
    for kind, path in (("no checkpoint", plain), ("checkpoint", checkpointed)):
        out += [
            (f"lakelog history PATH ({kind})", _cli() + ["history", path]),
            (f"lakelog describe PATH ({kind})", _cli() + ["describe", path]),
            (f"Table(PATH).version ({kind})", [py, "-c", "import sys, lakelog\nprint(lakelog.Table(sys.argv[1]).version)", path]),
            (f"Table(PATH).history() ({kind})", [py, "-c", "import sys, lakelog\nprint(len(lakelog.Table(sys.argv[1]).history()))", path]),
        ]
    return out


def run_once(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one child."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(argv, env=_env(), cwd=ROOT, capture_output=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise RuntimeError(f"{argv} failed ({r.returncode}): {r.stderr.decode()[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run(runs: int = 15) -> dict[str, dict[str, float]]:
    tmp = tempfile.mkdtemp(prefix="lakelog-startup-")
    try:
        plain, checkpointed = make_tables(tmp)
        cases = contenders(plain, checkpointed)
        # Untimed: writes the bytecode caches and warms the page cache.
        subprocess.run([sys.executable, "-c", "import lakelog, lakelog.cli, lakelog.table, lakelog.read.scan, deltalake, pyarrow.dataset"],
                       env=_env(), cwd=ROOT, check=True, capture_output=True)
        for _, argv in cases:
            run_once(argv)
        load = os.getloadavg()
        print(f"start-up, fresh processes, {runs} interleaved runs each; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
        print(f"  {machine()}", flush=True)
        walls: list[list[float]] = [[] for _ in cases]
        cpus: list[list[float]] = [[] for _ in cases]
        for _ in range(runs):
            for i, (_, argv) in enumerate(cases):
                w, c = run_once(argv)
                walls[i].append(w)
                cpus[i].append(c)
        load = os.getloadavg()
        result = {name: {"wall_s": statistics.median(w), "cpu_s": statistics.median(c)} for (name, _), w, c in zip(cases, walls, cpus)}
        for name, r in result.items():
            print(f"  {name:<44} {r['wall_s']:7.3f} s wall  {r['cpu_s']:7.3f} s CPU", flush=True)
        print(f"  load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        lk, pa_ = result["import lakelog"], result["import pyarrow"]
        limit = pa_["wall_s"] + IMPORT_MARGIN_S
        print("targets:")
        print(f"  import lakelog {lk['wall_s']:.3f} s <= import pyarrow {pa_['wall_s']:.3f} s + {IMPORT_MARGIN_S} s = {limit:.3f} s: "
              f"{'met' if lk['wall_s'] <= limit else 'NOT met'} (CPU {lk['cpu_s']:.3f} s against {pa_['cpu_s']:.3f} s)")
        for name, r in result.items():
            if name.startswith(("lakelog --version", "lakelog history", "lakelog describe", "Table(")):
                print(f"  {name:<44} {r['wall_s']:.3f} s <= {LOG_ONLY_TARGET_S} s: {'met' if r['wall_s'] <= LOG_ONLY_TARGET_S else 'NOT met'}")
        return result
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(prog="python -m benchmarks.startup", description="start-up of lakelog and its log-only commands, fresh processes")
    ap.add_argument("--runs", type=int, default=15, help="timed runs per contender (default 15)")
    args = ap.parse_args()
    run(args.runs)
    sys.stdout.flush()
    os._exit(0)

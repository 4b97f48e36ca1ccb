"""A real Spark standalone cluster for the tests: a Master and two Workers, each its own JVM started with
``spark-class`` from pip's pyspark, on loopback with small memory; every executor runs in its own work
directory, as on a real cluster (local mode shares the driver's working directory and hides what is
driver-local). ``run_driver`` runs a driver script as users run one: the virtual environment's python
as a subprocess, not activated (no PYSPARK_PYTHON, the venv's bin not on PATH), in a directory of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

from tests.emulators import _tail, free_port

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = 2
WORKER_MEMORY = "1g"
EXECUTOR_MEMORY = "512m"
DAEMON_MEMORY = "256m"  # the Master's and Workers' own heaps
START_TIMEOUT_S = 120


def spark_home() -> str:
    import pyspark

    return os.path.dirname(os.path.abspath(pyspark.__file__))


def _clean_env() -> dict[str, str]:
    """This environment without Spark's or a virtual environment's variables (a user's shell)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_")) and k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    venv_bin = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and os.path.abspath(p) != venv_bin)
    return env


class StandaloneCluster:
    """A started Master and Workers; ``url`` is the master's ``spark://`` URL, ``work_dirs`` the
    Workers' work directories (executors run in subdirectories of them). ``stop()`` ends the
    processes it started (and their executors)."""

    def __init__(self, root: str, workers: int = WORKERS):
        self.root = root
        self.procs: list[subprocess.Popen] = []
        self.logs: list[str] = []
        self.work_dirs = [os.path.join(root, f"worker-{i}") for i in range(workers)]
        self.port, self.ui_port = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        env = _clean_env()
        env.update(SPARK_HOME=spark_home(), SPARK_DAEMON_MEMORY=DAEMON_MEMORY, SPARK_LOCAL_IP="127.0.0.1")
        self.env = env
        try:
            self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.port),
                        "--webui-port", str(self.ui_port))
            for i, work in enumerate(self.work_dirs):
                os.makedirs(work)
                self._start(f"worker-{i}", "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1", "--cores", "1",
                            "--memory", WORKER_MEMORY, "--work-dir", work, "--webui-port", str(free_port()))
            self._wait_for_workers(workers)
        except BaseException:
            self.stop()
            raise

    def _start(self, name: str, cls: str, *args: str) -> None:
        log = os.path.join(self.root, f"{name}.log")
        self.logs.append(log)
        with open(log, "w") as out:
            # A session of its own: stop() signals the JVM and what it started (a Worker's executors).
            self.procs.append(subprocess.Popen([os.path.join(spark_home(), "bin", "spark-class"), cls, *args], env=self.env,
                                               cwd=self.root, stdout=out, stderr=subprocess.STDOUT, start_new_session=True))

    def _wait_for_workers(self, n: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            for proc, log in zip(self.procs, self.logs):
                if proc.poll() is not None:
                    raise RuntimeError(f"{log} exited with {proc.returncode}:\n{_tail(log)}")
            with contextlib.suppress(OSError, ValueError):
                with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as r:
                    if json.load(r).get("aliveworkers", 0) >= n:
                        return
            time.sleep(0.2)
        raise RuntimeError(f"the standalone cluster did not have {n} workers within {START_TIMEOUT_S} s:\n" + "\n".join(_tail(log) for log in self.logs))

    def executor_dirs(self) -> list[str]:
        """The directories executors ran in (``<work dir>/<app id>/<executor id>``)."""
        return [os.path.join(w, app, ex) for w in self.work_dirs if os.path.isdir(w) for app in os.listdir(w)
                for ex in os.listdir(os.path.join(w, app)) if os.path.isdir(os.path.join(w, app, ex))]

    def stop(self) -> None:
        for proc in reversed(self.procs):  # workers first: each stops its executors
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def run_driver(cluster: StandaloneCluster, script: str, cwd: str, *args: str, timeout: float = 900) -> dict:
    """Run ``script`` (a file in tests/) with the cluster's URL and ``args``, as a user runs a driver:
    this virtual environment's python, not activated, from ``cwd``. Returns the JSON object its last
    line of output holds; a failed run raises with its output."""
    proc = subprocess.run([sys.executable, os.path.join(HERE, script), cluster.url, *args], env=_clean_env(), cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"{script} exited with {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])

"""Row-level changes allocate through the system allocator unless the user chose one
(``lakelog.dml.memory_pool``), and leave pyarrow's default pool as they found it. Run in fresh
interpreters: the default pool is one per process."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(code: str, **env) -> str:
    e = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    e.update(env)
    e["PYTHONPATH"] = ROOT + os.pathsep + e.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=e, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


CODE = """
import threading, pyarrow as pa, lakelog
from lakelog.dml.memory_pool import system_allocator
{setup}
seen = []
def spy(*a, **k):  # (called inside the operation)
    seen.append(pa.default_memory_pool().backend_name)
    return real(*a, **k)
import sys, lakelog.dml.delete
d = sys.modules["lakelog.dml.delete"]
real = d.delete_matching
d.delete_matching = spy
p = {path!r}
lakelog.write_table(p, pa.table({{"id": pa.array(range(10), pa.int64())}}))
before = pa.default_memory_pool().backend_name
lakelog.Table(p).delete("id < 3")
# two at once: the first pool comes back when the last one ends
inside = threading.Event(); leave = threading.Event()
def hold():
    with system_allocator():
        inside.set(); leave.wait()
t = threading.Thread(target=hold); t.start(); inside.wait()
with system_allocator():
    pass
during = pa.default_memory_pool().backend_name
leave.set(); t.join()
print(before, seen[0], during, pa.default_memory_pool().backend_name, lakelog.Table(p).to_pyarrow().num_rows)
"""


def test_a_delete_allocates_from_the_system_allocator_and_restores_the_default(tmp_path):
    out = _run(CODE.format(setup="", path=str(tmp_path / "t")))
    assert out == "mimalloc system system mimalloc 7"


def test_the_users_choice_stays(tmp_path):
    out = _run(CODE.format(setup="", path=str(tmp_path / "t")), ARROW_DEFAULT_MEMORY_POOL="mimalloc")
    assert out == "mimalloc mimalloc mimalloc mimalloc 7"
    out = _run(CODE.format(setup="pa.set_memory_pool(pa.jemalloc_memory_pool())", path=str(tmp_path / "u")))
    assert out == "jemalloc jemalloc jemalloc jemalloc 7"

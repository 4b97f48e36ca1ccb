"""Writer processes racing to append to one table, as separate users' jobs would."""

from __future__ import annotations

import subprocess
import sys


def append_from_processes(path: str, rows: str, tags: tuple[str, ...] = ("1", "2"), commits: int = 12) -> None:
    """One process per tag appends ``commits`` times ``pa.table(<rows>)`` to the table at ``path``;
    ``rows`` is a Python expression of ``tag`` (the process's tag) and ``i`` (its commit number).
    Every process must exit cleanly."""
    script = (
        "import sys, pyarrow as pa, lakelog\n"
        "tag = sys.argv[2]\n"
        f"for i in range({commits}):\n"
        f"    lakelog.write_table(sys.argv[1], pa.table({rows}), mode='append')\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, path, tag]) for tag in tags]
    assert [p.wait(timeout=300) for p in procs] == [0] * len(procs)

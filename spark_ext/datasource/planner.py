"""Which PySpark planner is asking for a reader, so ``format("lakelog")`` works whatever the session's
``spark.sql.python.filterPushdown.enabled`` says.

How PySpark 4.3 plans a Python data source read (``pyspark/sql/worker``): the JVM's
``PythonScanBuilder.pushFilters`` returns every filter untouched when the setting is false. Otherwise,
if any filter translates to a Python ``Filter``, it starts the ``data_source_pushdown_filters`` worker,
which creates the reader, calls ``reader.pushFilters`` and plans the partitions. Every other read is
planned by the ``plan_data_source_read`` worker, which receives the setting as a bare flag over its
socket, never calls ``pushFilters``, and raises ``DATA_SOURCE_PUSHDOWN_DISABLED`` when the flag is false
and the reader's class overrides ``pushFilters``. Both are separate Python processes forked by the
PySpark daemon: no SparkSession, no SQL conf, nothing but the pickled data source and that flag.

So the one fact a data source can use is which planner is creating its reader. The read planner
never calls ``pushFilters``, so it gets a reader without it (legal whatever the flag says); the
pushdown planner and direct callers get the reader that can push filters.
"""

from __future__ import annotations

import sys

READ_PLANNER = "pyspark.sql.worker.plan_data_source_read"


def _module_of(frame) -> str | None:
    g = frame.f_globals
    name = g.get("__name__")
    if name == "__main__":  # a worker started with `python -m` (no daemon) runs as __main__
        spec = g.get("__spec__")
        name = getattr(spec, "name", name)
    return name


def in_read_planner(max_depth: int = 16) -> bool:
    """True when the caller runs inside PySpark's read planner, which never calls ``pushFilters`` and
    refuses readers defining it unless ``spark.sql.python.filterPushdown.enabled`` is true."""
    frame = sys._getframe(1)
    for _ in range(max_depth):
        if frame is None:
            return False
        if _module_of(frame) == READ_PLANNER:
            return True
        frame = frame.f_back
    return False

"""What a running Spark task writes by: its file names and identity values drawn by its partition id, so that the
tasks of one job, and the attempts of one task, never collide."""

from __future__ import annotations


def task_file_prefix(prefix: str) -> str:
    """``prefix`` for the files this task attempt writes: ``prefix-<partition>-a<attempt>`` in a Spark task,
    ``prefix`` elsewhere."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return f"{prefix}-{ctx.partitionId():05d}-a{ctx.attemptNumber()}" if ctx is not None else prefix


def task_features(features):
    """``features`` for the running Spark task: the tasks of a job write in parallel, each drawing identity
    values by its partition id (``lakelog.table_features.identity_columns.spark_index``)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return features.for_task(ctx.partitionId()) if features is not None and features.identity and ctx is not None else features

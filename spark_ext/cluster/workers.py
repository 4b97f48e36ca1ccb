"""Which interpreter Spark's Python workers run.

PySpark fixes it when the SparkContext starts: ``PYSPARK_PYTHON``, else the ``python3`` on PATH. A
script run with a virtual environment's interpreter, the environment not activated, then gets
workers without pyarrow or lakelog (``DATA_SOURCE_NOT_FOUND``, "No module named 'pyarrow'"). Every
Python function Spark ships (a data source, a UDF, ``mapInArrow``) carries the interpreter the
context holds when the function is created, so pointing the context at this interpreter before
lakelog creates any is enough, even for a session that already runs.
"""

from __future__ import annotations

import os
import sys


def use_driver_python(spark) -> None:
    """Make the Python workers of functions created from now on run this interpreter, as if
    ``PYSPARK_PYTHON`` had named it before the session started; a choice the user made (the
    ``PYSPARK_PYTHON`` variable or the ``spark.pyspark.python`` setting) is kept."""
    try:
        sc = spark.sparkContext
    except Exception:  # noqa: BLE001 - Spark Connect: the server's workers are not ours to choose
        return
    if os.environ.get("PYSPARK_PYTHON"):
        return
    chosen = sc.getConf().get("spark.pyspark.python")
    sc.pythonExec = chosen or sys.executable
    # Contexts this process starts later (after spark.stop()) start with it too.
    os.environ["PYSPARK_PYTHON"] = sc.pythonExec


def use_driver_python_at_start(options) -> None:
    """Before a session starts from a builder with ``options``: its Python workers run this interpreter,
    with the same rule as ``use_driver_python`` (a user's ``PYSPARK_PYTHON`` or ``spark.pyspark.python`` is
    kept). Spark's own lookup of Python data sources runs when the session starts, with PYSPARK_PYTHON,
    else the python3 on PATH: for a script run with a virtual environment's interpreter, not activated,
    an interpreter without lakelog, and the session would start with a failed lookup in its log."""
    if not os.environ.get("PYSPARK_PYTHON") and not options.get("spark.pyspark.python"):
        os.environ["PYSPARK_PYTHON"] = sys.executable

"""Delta users' ``DataFrameWriter`` habits for ``format("lakelog")``: ``partitionBy("p")`` and ``save()``
without a mode.

Spark refuses both for every Python data source before lakelog sees the write: partition columns
("The provided partitioning or clustering columns do not match the existing table's") and the save
modes other than append and overwrite (``ErrorIfExists``, Spark's default, and ``Ignore``).
``register`` therefore wraps ``DataFrameWriter`` so that, for ``format("lakelog")`` only, the columns
given to ``partitionBy`` (or ``save(partitionBy=...)``) become the ``partitionBy`` option with Spark's
own partitioning left empty, and ``errorifexists``/``ignore`` become the ``saveMode`` option of an
append, which lakelog applies when it plans and again when it commits (a table created meanwhile is
not written into). Writes to any other format are untouched.
"""

from __future__ import annotations

from typing import Any

_MARK = "_lakelog_partition_by_wrapped"


def _names(cols: Any) -> list[str]:
    if cols is None:
        return []
    if isinstance(cols, str):
        return [cols]
    out: list[str] = []
    for c in cols:
        out.extend(_names(c) if isinstance(c, (list, tuple)) else [str(c)])
    return out


def install() -> None:
    """Wrap ``DataFrameWriter.format``, ``partitionBy`` and ``save`` once per process."""
    from pyspark.sql.readwriter import DataFrameWriter

    if getattr(DataFrameWriter, _MARK, False):
        return
    original_format, original_partition_by, original_save = DataFrameWriter.format, DataFrameWriter.partitionBy, DataFrameWriter.save
    original_mode = DataFrameWriter.mode

    def format(self, source: str):  # noqa: A001 - the wrapped method's name
        self._lakelog_source = source
        return original_format(self, source)

    def mode(self, saveMode):  # noqa: N803 - PySpark's name
        self._lakelog_mode = saveMode
        return original_mode(self, saveMode)

    def partitionBy(self, *cols):  # noqa: N802 - PySpark's name
        self._lakelog_partition_by = _names(cols)
        return original_partition_by(self, *cols)

    def save(self, path=None, format=None, mode=None, partitionBy=None, **options):  # noqa: A002, N803
        source = format or getattr(self, "_lakelog_source", None)
        cols = _names(partitionBy) or getattr(self, "_lakelog_partition_by", None)
        if source is not None and str(source).lower() == "lakelog":
            if cols:
                self.option("partitionBy", ",".join(cols))
                self._jwrite = self._jwrite.partitionBy(self._spark._sc._jvm.PythonUtils.toSeq([]))
                partitionBy = None
            chosen = str(mode or getattr(self, "_lakelog_mode", None) or "errorifexists").lower().replace("_", "")
            if chosen in ("error", "errorifexists", "default", "ignore"):
                self.option("saveMode", "ignore" if chosen == "ignore" else "error")
                mode = "append"
        return original_save(self, path, format, mode, partitionBy, **options)

    for new, old in ((format, original_format), (mode, original_mode), (partitionBy, original_partition_by), (save, original_save)):
        new.__doc__ = old.__doc__
    DataFrameWriter.format, DataFrameWriter.mode, DataFrameWriter.partitionBy, DataFrameWriter.save = format, mode, partitionBy, save
    setattr(DataFrameWriter, _MARK, True)

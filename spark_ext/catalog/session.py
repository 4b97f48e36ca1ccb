"""A Spark session that speaks lakelog natively: ``spark_ext.configure(SparkSession.builder)``.

It sets what Delta's users set for Delta (``spark.sql.extensions`` and ``spark.sql.catalog.spark_catalog``),
and puts lakelog's Spark classes on the driver's and executors' class path (a jar built on first use, see
``spark_ext.jvm``): tables created ``USING lakelog`` are then found by name in Spark's catalog, and plain
``spark.sql`` runs every statement on them (reads, INSERT, UPDATE, DELETE, MERGE, DDL, time travel and
Delta's commands). The classes call back into this Python process, where lakelog does the work; that
needs classic PySpark (Py4J), so Spark Connect sessions are refused.
"""

from __future__ import annotations

import json
import os
from typing import Any

from lakelog.errors import InvalidArgumentError, UnsupportedFeatureError

from ..cluster.workers import use_driver_python_at_start
from ..datasource.source import register_source
from ..jvm import CATALOG_CLASS, EXTENSION_CLASS, PYTHON_INTERFACE, jar_path

EXTENSIONS_CONF = "spark.sql.extensions"
CATALOG_CONF = "spark.sql.catalog.spark_catalog"
_CLASS_PATH_CONFS = ("spark.jars", "spark.driver.extraClassPath")
_MARK = "_lakelog_configured"


def _append(existing: Any, value: str, sep: str = ",") -> str:
    parts = [p.strip() for p in str(existing or "").split(sep) if p.strip()]
    return sep.join(parts if value in parts else parts + [value])


def configure(builder: Any) -> Any:
    """``builder`` with what a session needs for lakelog tables by name: lakelog's session extension and
    catalog, its classes on the class path, and (once the session starts) ``format("lakelog")`` and the
    callbacks its classes make into this process. A user's own ``spark.sql.extensions`` and
    ``spark.jars`` are kept; another ``spark_catalog`` implementation cannot be combined with lakelog's
    and is refused. Returns the builder, so ``configure(SparkSession.builder).getOrCreate()`` works."""
    options = getattr(builder, "_options", None)
    if options is None:
        raise InvalidArgumentError(f"spark_ext.configure takes a SparkSession.builder, not {type(builder).__name__}")
    if ("spark.remote" in options or str(options.get("spark.api.mode", "")).lower() == "connect"
            or os.environ.get("SPARK_REMOTE") or os.environ.get("SPARK_CONNECT_MODE_ENABLED")):
        raise UnsupportedFeatureError("spark_ext.configure needs classic PySpark: lakelog's Spark classes call back into this "
                                      "Python process through Py4J, which Spark Connect does not have")
    catalog = options.get(CATALOG_CONF)
    if catalog not in (None, CATALOG_CLASS):
        raise InvalidArgumentError(f"{CATALOG_CONF} is already {catalog!r}: lakelog's catalog ({CATALOG_CLASS}) takes that place "
                                   "and cannot be combined with another implementation")
    jar = jar_path()
    builder.config(EXTENSIONS_CONF, _append(options.get(EXTENSIONS_CONF), EXTENSION_CLASS))
    builder.config(CATALOG_CONF, CATALOG_CLASS)
    builder.config("spark.jars", _append(options.get("spark.jars"), jar))
    builder.config("spark.driver.extraClassPath", _append(options.get("spark.driver.extraClassPath"), jar, ":"))
    if not getattr(builder, _MARK, False):
        for method in ("getOrCreate", "create"):  # (create: PySpark 4.2+)
            original = getattr(builder, method, None)
            if original is not None:
                setattr(builder, method, _registering(original, options))
        setattr(builder, _MARK, True)
    return builder


def _registering(start, options):
    """``start`` (the builder's getOrCreate or create), then lakelog's registration on the session."""

    def started():
        use_driver_python_at_start(options)
        spark = start()
        _check_native(spark)
        register(spark)
        return spark

    return started


def is_native(spark) -> bool:
    """Whether ``spark``'s JVM has lakelog's classes and its session catalog is lakelog's."""
    try:
        conf = spark.conf.get(CATALOG_CONF, None)
    except Exception:  # noqa: BLE001 - a stopped or Connect session
        return False
    return conf == CATALOG_CLASS


def _check_native(spark) -> None:
    if not is_native(spark):
        raise UnsupportedFeatureError(
            "a Spark session was already running when spark_ext.configure's builder asked for one, and it was started "
            "without lakelog's catalog: stop it (spark.stop()) and build the session again")


def register(spark) -> None:
    """``spark_ext.register``: ``format("lakelog")`` on ``spark`` (``register_source``) and, where the session has
    lakelog's catalog, the callbacks its classes make into this process (``register_bridge``)."""
    register_source(spark)
    register_bridge(spark)


def register_bridge(spark) -> None:
    """Let lakelog's classes in ``spark``'s JVM call this process (once per JVM; a no-op where the session
    was not built with ``configure``)."""
    if not is_native(spark):
        return
    from pyspark.java_gateway import ensure_callback_server_started

    from .bridge import bridge_for, error_classes

    sc = spark.sparkContext
    gateway = sc._gateway
    ensure_callback_server_started(gateway)
    jvm = sc._jvm
    python = jvm.org.apache.spark.sql.lakelog.LakelogPython
    python.register(bridge_for(sc))
    jvm.org.apache.spark.sql.lakelog.LakelogErrors.register(json.dumps(error_classes()))


__all__ = ["configure", "is_native", "register", "register_bridge", "PYTHON_INTERFACE"]

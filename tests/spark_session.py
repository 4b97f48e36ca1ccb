"""The one local Spark session of a test run (session-scoped; Spark takes ~20 s to start)."""

import os
import sys

import pytest

# A session built without spark_ext.configure, as sessions were before it (LAKELOG_TEST_PLAIN_SPARK=1):
# tests/test_spark_sql_plain.py runs spark_ext.sql's own machinery on one, in a process of its own.
PLAIN = os.environ.get("LAKELOG_TEST_PLAIN_SPARK") == "1"


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """A session built as users build one for lakelog (``spark_ext.configure``): lakelog tables by name in
    its catalog, managed ones under a warehouse of the test run's own."""
    from pyspark.sql import SparkSession

    import spark_ext

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master("local[2,4]")  # 4 attempts per task, so task retries really happen
        .appName("lakelog-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
    )
    if PLAIN:
        session = builder.getOrCreate()
        spark_ext.register(session)
    else:
        session = spark_ext.configure(builder).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()

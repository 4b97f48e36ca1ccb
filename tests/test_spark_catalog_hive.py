"""lakelog tables in the Hive metastore (``enableHiveSupport()``, the embedded Derby metastore), by user
scripts run as users run them: the virtual environment's python, not activated, no PYSPARK_PYTHON, the
working directory a temporary one. A first process creates and writes tables; a second finds them by
name and reads and changes them; plain-Python reads (lakelog and deltalake) agree with both. The scripts'
sessions also carry a user's own ``spark.sql.extensions`` class and ``spark.jars`` jar, which
``spark_ext.configure`` must keep."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile

import deltalake
import pyarrow as pa
import pytest

import lakelog

from tests.catalog_peers import deltalake_rows, lakelog_rows, local

# The Spark tests share one xdist worker (one JVM at a time on the machine).
pytestmark = pytest.mark.xdist_group("spark")

HERE = os.path.dirname(os.path.abspath(__file__))

EXTENSION = """
package userext;

import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.ExpressionInfo;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.types.DataTypes;
import scala.Tuple3;
import scala.collection.immutable.Seq;
import scala.runtime.AbstractFunction1;
import scala.runtime.BoxedUnit;

/** A user's session extension: the SQL function user_marker(). */
public class MarkerExtension extends AbstractFunction1<SparkSessionExtensions, BoxedUnit> {
  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    extensions.injectFunction(new Tuple3<>(
        new FunctionIdentifier("user_marker"),
        new ExpressionInfo(MarkerExtension.class.getName(), "user_marker"),
        new AbstractFunction1<Seq<Expression>, Expression>() {
          @Override
          public Expression apply(Seq<Expression> args) {
            return Literal.create("user-extension", DataTypes.StringType);
          }
        }));
    return BoxedUnit.UNIT;
  }
}
"""


@pytest.fixture(scope="module")
def user_jar(tmp_path_factory):
    """A jar with the user's extension class, compiled against PySpark's jars."""
    from spark_ext.jvm import spark_jars_dir

    work = tmp_path_factory.mktemp("user-extension")
    source = work / "userext" / "MarkerExtension.java"
    source.parent.mkdir()
    source.write_text(EXTENSION)
    classes = work / "classes"
    classes.mkdir()
    javac = shutil.which("javac")
    assert javac, "the test compiles a user's extension with javac (JDK 17)"
    subprocess.run([javac, "-nowarn", "-cp", os.path.join(spark_jars_dir(), "*"), "-d", str(classes), str(source)],
                   check=True, capture_output=True, timeout=300)
    jar = work / "user-extension.jar"
    with zipfile.ZipFile(jar, "w") as z:
        for root, _, files in os.walk(classes):
            for f in files:
                z.write(os.path.join(root, f), os.path.relpath(os.path.join(root, f), classes))
    return str(jar)


def _run(step: str, cwd: str, external: str, jar: str) -> dict:
    # As a user runs a script: the venv's python by its path, nothing activated, no PYSPARK_PYTHON, and a PATH
    # whose python3 (if any) is the system's, without lakelog.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYSPARK_", "SPARK_")) and k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = f"/usr/bin{os.pathsep}/bin"
    proc = subprocess.run([sys.executable, os.path.join(HERE, "hive_catalog_script.py"), step, external, jar],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-6000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_hive_metastore_round_trip_across_processes(tmp_path, user_jar):
    cwd = tmp_path / "user"
    cwd.mkdir()
    external = str(tmp_path / "external" / "ext")
    one = _run("first", str(cwd), external, user_jar)

    # The user's extension and jar are kept beside lakelog's.
    extensions = one["extensions"].split(",")
    assert extensions[0] == "userext.MarkerExtension" and "org.apache.spark.sql.lakelog.LakelogSparkSessionExtension" in extensions
    assert user_jar in [local(j) for j in one["jars"].split(",")]
    assert one["marker"] == "user-extension"
    assert one["catalog"] == "hive"
    assert one["worker_python"] == sys.executable
    assert os.path.isdir(cwd / "metastore_db")

    events = local(one["events_location"])
    assert events == str(cwd / "warehouse" / "events")
    assert lakelog_rows(events) == deltalake_rows(events) == [(1, "a", 1.0), (2, "b", 2.0), (3, "a", 3.0)]
    assert lakelog.Table(events).partition_columns == ["p"]
    orders = local(one["orders_location"])
    assert orders == str(cwd / "warehouse" / "sales.db" / "orders")
    assert lakelog_rows(orders) == [(10, "x")]
    assert lakelog_rows(external) == deltalake_rows(external) == [(1, "one")]
    # A commit from plain Python between the two runs is part of the same table.
    lakelog.write_table(external, pa.table({"id": pa.array([2], pa.int64()), "s": ["two"]}), mode="append")

    two = _run("second", str(cwd), external, user_jar)
    assert two["marker"] == "user-extension"
    assert two["tables"] == ["events", "ext", "plain"] and two["sales_tables"] == ["orders"]
    assert two["provider"] == "lakelog"
    assert two["events"] == [[1, "a", 1.0], [2, "b", 2.0], [3, "a", 3.0]]
    assert two["ext"] == [[1, "one"], [2, "two"]]
    assert two["orders"] == [[10, "x"]] and two["plain"] == [[7]]
    assert two["update"] == [2]
    assert two["merge"] == [2, 1, 0, 1]
    assert two["delete"] == [1]
    expected = [(1, "a", 10.0), (2, "b", 20.0), (3, "a", 30.0), (4, "b", 4.0)]
    assert [tuple(r) for r in two["events_after"]] == expected
    assert lakelog_rows(events) == deltalake_rows(events) == expected
    assert two["events_v1"] == [[1, "a", 1.0], [2, "b", 2.0], [3, "a", 3.0]]
    assert two["history"] == [[h["version"], h["operation"]] for h in lakelog.Table(events).history()]
    assert [v for v, _ in two["history"]] == [3, 2, 1, 0]
    cdf = pa.table(deltalake.DeltaTable(events).load_cdf(starting_version=2).read_all())
    assert sorted(map(tuple, two["changes"])) == sorted(zip(cdf["id"].to_pylist(), cdf["_change_type"].to_pylist(),
                                                            cdf["_commit_version"].to_pylist()))
    assert two["orders_columns"] == ["order_id", "item", "qty"]
    # DROP TABLE: the managed table's files are gone, the external one's stay.
    assert two["tables_after_drop"] == ["events", "plain"]
    assert not os.path.exists(orders)
    assert lakelog_rows(external) == deltalake_rows(external) == [(2, "two")]

"""lakelog's classes in Spark's JVM (the catalog, the analysis rule, the parser and the commands that call
back into Python), compiled from the Scala sources beside this file into a jar, once per Spark version, with
the Scala compiler that ships in PySpark's jars: a JRE is all it needs, and nothing is downloaded.

The jar is cached in ``$LAKELOG_SPARK_CACHE`` (default ``$XDG_CACHE_HOME/lakelog`` or ``~/.cache/lakelog``)
under a name that holds the Spark version and a hash of the sources, so a new lakelog or a new PySpark
builds a new one; the first build takes about half a minute.

``janino``: the Java classes the read path compiles into the driver's JVM with Janino, Spark's own compiler.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile

from lakelog.errors import LakelogError

SOURCES_DIR = os.path.dirname(os.path.abspath(__file__))
EXTENSION_CLASS = "org.apache.spark.sql.lakelog.LakelogSparkSessionExtension"
CATALOG_CLASS = "org.apache.spark.sql.lakelog.LakelogCatalog"
PYTHON_INTERFACE = "org.apache.spark.sql.lakelog.LakelogPython"
BUILD_TIMEOUT_S = 900


class SparkBuildError(LakelogError):
    """lakelog's Spark classes could not be compiled (no Java, or a Spark version they do not compile against)."""


def spark_jars_dir() -> str:
    """The ``jars`` directory of the Spark that PySpark starts (``SPARK_HOME``, else the pyspark package)."""
    from pyspark.find_spark_home import _find_spark_home

    jars = os.path.join(_find_spark_home(), "jars")
    if not os.path.isdir(jars):
        raise SparkBuildError(f"no Spark jars at {jars!r}: install pyspark (pip install 'pyspark>=4.3,<5') or set SPARK_HOME to a Spark 4 distribution")
    return jars


def _spark_version(jars: str) -> str:
    found = sorted(glob.glob(os.path.join(jars, "spark-sql_*.jar")))
    if not found:
        raise SparkBuildError(f"no spark-sql jar in {jars!r}: is this a Spark distribution?")
    return os.path.basename(found[0])[len("spark-sql_"):-len(".jar")]


def sources() -> list[str]:
    return sorted(glob.glob(os.path.join(SOURCES_DIR, "*.scala")))


def cache_dir() -> str:
    base = os.environ.get("LAKELOG_SPARK_CACHE")
    if not base:
        base = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "lakelog")
    return base


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    found = shutil.which("java")
    if found is None:
        raise SparkBuildError("no java on PATH (and JAVA_HOME unset): Spark needs Java 17 or later, and lakelog compiles its Spark classes with it")
    return found


def jar_path() -> str:
    """The jar of lakelog's Spark classes for the Spark PySpark starts, built on first use."""
    jars = spark_jars_dir()
    digest = hashlib.sha256()
    for path in sources():
        with open(path, "rb") as f:
            digest.update(os.path.basename(path).encode() + b"\0" + f.read() + b"\0")
    name = f"lakelog-spark-{_spark_version(jars)}-{digest.hexdigest()[:16]}.jar"
    target = os.path.join(cache_dir(), name)
    if not os.path.exists(target):
        _build(jars, target)
    return target


def _build(jars: str, target: str) -> None:
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lakelog-spark-build-") as work:
        classes = os.path.join(work, "classes")
        os.makedirs(classes)
        cmd = [_java(), "-Xss8m", "-cp", os.path.join(jars, "*"), "scala.tools.nsc.Main", "-usejavacp", "-nowarn",
               "-d", classes, *sources()]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise SparkBuildError(f"compiling lakelog's Spark classes took over {BUILD_TIMEOUT_S} s; retry on a less loaded machine") from None
        if done.returncode != 0:
            detail = "\n".join((done.stdout + done.stderr).strip().splitlines()[:20])
            raise SparkBuildError(f"lakelog's Spark classes do not compile against the Spark in {jars!r} "
                                  f"(lakelog supports PySpark 4.3):\n{detail}")
        partial = os.path.join(work, "lakelog-spark.jar")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: lakelog\n\n")
            for root, _, files in os.walk(classes):
                for f in sorted(files):
                    full = os.path.join(root, f)
                    z.write(full, os.path.relpath(full, classes))
        # (another process may build the same jar at once: both are complete, the rename is atomic)
        os.replace(partial, target)

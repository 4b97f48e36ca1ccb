"""Java classes lakelog compiles into a Spark session's driver JVM, with Janino (bundled with Spark,
which compiles all its generated code with it), so that nothing needs installing beside PySpark."""

from __future__ import annotations


def compile_java(spark, source: str):
    """Janino's compiler after compiling ``source`` against Spark's classes (``getClassLoader()`` loads
    its classes; ``getBytecodes()`` gives them as class files)."""
    jvm = spark._jvm
    compiler = jvm.org.codehaus.janino.SimpleCompiler()
    compiler.setParentClassLoader(jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader())
    compiler.cook(source)
    return compiler

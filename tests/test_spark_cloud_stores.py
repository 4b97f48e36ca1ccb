"""Spark on Azure Blob (``az://``) and GCS (``gs://``) tables, on Azurite and fake-gcs-server.

``format("lakelog")`` reaches the stores through lakelog's storage (adlfs, gcsfs): no Hadoop connector.
Spark's Python workers get the ``storage.<key>`` options and nothing else: the variables the emulator
fixtures set in this process are blanked for the workers (checked), so the options alone must suffice.
``spark_ext.read`` scans with Spark's own Hadoop filesystems, which this Spark lacks for these stores.
"""

from __future__ import annotations

import datetime as dt

import deltalake
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

import lakelog
import spark_ext
from lakelog.errors import UnsupportedFeatureError
from spark_ext.sql import SqlError

# What the fixtures export in this process; workers must not rely on them.
EMULATOR_ENV = ("AZURE_STORAGE_USE_EMULATOR", "AZURITE_BLOB_STORAGE_URL", "STORAGE_EMULATOR_HOST")


class Store:
    def __init__(self, endpoint, options: dict[str, str]):
        self.endpoint, self.options = endpoint, options
        self.spark_options = {f"storage.{k}": v for k, v in options.items()}

    def uri(self) -> str:
        return self.endpoint.new_table_uri()


@pytest.fixture(scope="module")
def workers(spark):
    """The session with the emulator variables blanked for Python workers (functions created from now)."""
    env = spark.sparkContext.environment
    saved = {k: env.get(k) for k in EMULATOR_ENV}
    env.update(dict.fromkeys(EMULATOR_ENV, ""))
    spark_ext.register(spark)  # the data source's function carries the environment it is created with
    yield spark
    for k, v in saved.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    spark_ext.register(spark)


@pytest.fixture(scope="module", params=["azure", "gcs"])
def store(request, workers):
    if request.param == "azure":
        ep = request.getfixturevalue("azurite")
        # the endpoint too: without it a worker would look for Azurite on its default port
        return Store(ep, {"azure_storage_use_emulator": "true", "azure_storage_endpoint": ep.emulator.url})
    ep = request.getfixturevalue("gcs_server")
    return Store(ep, dict(ep.storage_options))  # a service account file naming the endpoint (gcs_base_url)


def _rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def _lakelog_rows(uri: str, store: Store, columns: list[str]) -> list[tuple]:
    t = lakelog.read_table(uri, storage_options=store.options)
    return sorted(zip(*[t.column(c).to_pylist() for c in columns]))


def test_workers_see_no_emulator_variables(workers):
    """The premise of this file: a worker knows the store only from the options."""

    def probe(batches):
        import os

        for _ in batches:
            yield pa.RecordBatch.from_pydict({k: [os.environ.get(k, "")] for k in EMULATOR_ENV})

    seen = workers.range(1).mapInArrow(probe, ", ".join(f"{k} string" for k in EMULATOR_ENV)).collect()
    assert [tuple(r) for r in seen] == [("",) * len(EMULATOR_ENV)]


def test_batch_append_overwrite_read_back(workers, store):
    spark, uri = workers, store.uri()
    cols = ["id", "name", "day", "part"]
    first = [(1, "a", dt.date(2026, 1, 1), "x"), (2, None, dt.date(2026, 1, 2), "y")]
    second = [(3, "c", None, "x")]
    schema = "id long, name string, day date, part string"
    write = lambda rows, mode: (spark.createDataFrame(rows, schema).write.format("lakelog")
                                .options(**store.spark_options).option("partitionBy", "part").mode(mode).save(uri))
    read = lambda: spark.read.format("lakelog").options(**store.spark_options).load(uri)
    write(first, "append")
    write(second, "append")
    assert _rows(read()) == sorted(first + second)
    assert _lakelog_rows(uri, store, cols) == sorted(first + second)
    assert _rows(read().where(F.col("part") == "x").select("id")) == [(1,), (3,)]

    third = [(7, "g", dt.date(2026, 2, 1), "z")]
    write(third, "overwrite")
    assert _rows(read()) == third
    assert _lakelog_rows(uri, store, cols) == third
    assert lakelog.Table(uri, storage_options=store.options).version == 2
    dt_peer = deltalake.DeltaTable(uri, storage_options=store.endpoint.deltalake_options)
    got = pa.table(deltalake.QueryBuilder().register("t", dt_peer).execute("select id from t").read_all())
    assert got.column("id").to_pylist() == [7]


def test_stream_write_and_read_exactly_once(workers, store, tmp_path):
    spark, uri = workers, store.uri()
    src = tmp_path / "src"
    for i, ids in enumerate(([1, 2], [3])):
        spark.createDataFrame([(n, f"v{n}") for n in ids], "id long, v string").coalesce(1).write.mode("append").parquet(str(src))

    def run_sink():
        q = (spark.readStream.schema("id long, v string").option("maxFilesPerTrigger", 1).parquet(str(src))
             .writeStream.format("lakelog").options(**store.spark_options)
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start(uri))
        q.awaitTermination(120)
        assert q.exception() is None

    run_sink()
    table = lakelog.Table(uri, storage_options=store.options)
    assert table.version == 1  # one commit per micro-batch
    run_sink()  # the same checkpoint: nothing new, nothing twice
    assert lakelog.Table(uri, storage_options=store.options).version == 1
    assert _lakelog_rows(uri, store, ["id", "v"]) == [(1, "v1"), (2, "v2"), (3, "v3")]

    q = (spark.readStream.format("lakelog").options(**store.spark_options).load(uri)
         .writeStream.format("memory").queryName(f"cloud_{store.endpoint.kind}")
         .option("checkpointLocation", str(tmp_path / "ckpt-read")).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert _rows(spark.table(f"cloud_{store.endpoint.kind}")) == [(1, "v1"), (2, "v2"), (3, "v3")]


def test_lakelog_table_dml(workers, store):
    """Delete, update and merge read their candidate files through lakelog's storage (Spark has no
    Hadoop filesystem here). Copy-on-write on Azure; deletion vectors (rows named by file and row
    index) on GCS."""
    spark, uri = workers, store.uri()
    deletion_vectors = store.endpoint.kind == "gcs"
    conf = {"delta.enableDeletionVectors": "true"} if deletion_vectors else None
    lakelog.write_table(uri, pa.table({"id": [1, 2, 3, 4], "v": ["a", "b", "c", "d"]}), configuration=conf, storage_options=store.options)
    t = spark_ext.LakelogTable.forPath(spark, uri, store.options)
    t.delete("id = 2")
    t.update("id = 3", {"v": "'C'"})
    source = spark.createDataFrame([(4, "D"), (5, "e")], "id long, v string")
    (t.alias("t").merge(source.alias("s"), "t.id = s.id")
     .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    expected = [(1, "a"), (3, "C"), (4, "D"), (5, "e")]
    assert _lakelog_rows(uri, store, ["id", "v"]) == expected
    assert _rows(t.toDF()) == expected
    table = lakelog.Table(uri, storage_options=store.options)
    assert table.version == 3
    assert any(a.deletion_vector is not None for a in table.snapshot.files.values()) == deletion_vectors


def test_sql_reads_the_table(workers, store):
    spark, uri = workers, store.uri()
    lakelog.write_table(uri, pa.table({"id": [1, 2, 3]}), storage_options=store.options)
    lakelog.write_table(uri, pa.table({"id": [4]}), storage_options=store.options)
    got = spark_ext.sql(spark, f"SELECT id FROM lakelog.`{uri}` VERSION AS OF 0 WHERE id > 1", storage_options=store.options)
    assert _rows(got) == [(2,), (3,)]
    with pytest.raises(SqlError, match="queries only"):
        spark_ext.sql(spark, f"DELETE FROM lakelog.`{uri}` WHERE id = 1", storage_options=store.options)
    with pytest.raises(SqlError, match="queries only"):
        spark_ext.sql(spark, f"DESCRIBE HISTORY lakelog.`{uri}`", storage_options=store.options)
    assert lakelog.Table(uri, storage_options=store.options).version == 1


def test_native_read_names_the_missing_connector(workers, store):
    spark, uri = workers, store.uri()
    lakelog.write_table(uri, pa.table({"id": [1]}), storage_options=store.options)
    connector = "hadoop-azure" if store.endpoint.kind == "azure" else "gcs-connector"
    with pytest.raises(UnsupportedFeatureError, match=connector) as e:
        spark_ext.read(spark, uri, storage_options=store.options)
    assert 'format("lakelog")' in str(e.value)

"""AWS Glue names (``glue://database/table``) on the Spark paths: ``format("lakelog").load/save``,
``spark_ext.read`` and ``LakelogTable.forPath`` resolve the name on the driver, once, to the location Glue
holds, before anything is shipped; the tasks and the commit work on that location. Glue is moto's server
over HTTP; the table's files are local, so Spark's own file sources read them too."""

from __future__ import annotations

import uuid

import boto3
import pyarrow as pa
import pytest

import lakelog
import spark_ext
from lakelog.errors import CatalogTableNotFoundError
from spark_ext import LakelogTable
from spark_ext.cluster.paths import absolute_path, driver_path, local_path


@pytest.fixture
def glue_table(s3_endpoint, tmp_path):
    """A table created by Glue name at a local location: (its name, its location, boto3's Glue client)."""
    client = boto3.client("glue", endpoint_url=s3_endpoint.url, region_name=s3_endpoint.region,
                          aws_access_key_id=s3_endpoint.access_key, aws_secret_access_key=s3_endpoint.secret_key)
    database = f"db_{uuid.uuid4().hex[:8]}"
    client.create_database(DatabaseInput={"Name": database})
    location = str(tmp_path / "events")
    name = f"glue://{database}/events"
    lakelog.write_table(name, pa.table({"id": pa.array([0, 1, 2], pa.int64()), "name": ["a", "b", "c"]}), location=location)
    return name, location, client


def _aws(s3_endpoint) -> dict[str, str]:
    """The Glue settings as format("lakelog")'s storage.* options (delta-rs' names): Spark's Python workers
    have the environment of the session's start, which may predate the emulator's AWS_* variables."""
    return {"storage.aws_endpoint_url": s3_endpoint.url, "storage.aws_region": s3_endpoint.region,
            "storage.aws_access_key_id": s3_endpoint.access_key, "storage.aws_secret_access_key": s3_endpoint.secret_key,
            "storage.aws_allow_http": "true"}


def _ids(df) -> list[int]:
    return sorted(r["id"] for r in df.collect())


def test_glue_names_resolve_to_their_location_on_the_driver(glue_table):
    name, location, _ = glue_table
    assert absolute_path(name) == driver_path(None, name) == f"file:{location}"  # as Glue holds a local table's location
    assert local_path(name) == location
    with pytest.raises(CatalogTableNotFoundError, match="has no table"):
        absolute_path(name.replace("/events", "/missing"))


def test_spark_reads_and_writes_a_table_by_glue_name(spark, glue_table, s3_endpoint):
    name, location, _ = glue_table
    aws = _aws(s3_endpoint)
    assert _ids(spark.read.format("lakelog").options(**aws).load(name)) == [0, 1, 2]
    spark.createDataFrame([(3, "d")], "id long, name string").write.format("lakelog").options(**aws).mode("append").save(name)
    assert lakelog.Table(location).version == 1  # the commit went to the registered location
    assert _ids(spark.read.format("lakelog").options(**aws).option("versionAsOf", 0).load(name)) == [0, 1, 2]
    assert _ids(spark_ext.read(spark, name)) == [0, 1, 2, 3]

    table = LakelogTable.forPath(spark, name)
    table.delete("id = 1")
    assert lakelog.Table(location).version == 2
    assert _ids(table.toDF()) == [0, 2, 3]
    assert LakelogTable.isLakelogTable(spark, name)


def test_an_unknown_glue_name_is_refused_by_name_on_the_spark_paths(spark, glue_table, s3_endpoint):
    name, location, _ = glue_table
    aws = _aws(s3_endpoint)
    missing = name.replace("/events", "/missing")
    with pytest.raises(CatalogTableNotFoundError, match="has no table 'missing'"):
        LakelogTable.forPath(spark, missing)
    with pytest.raises(CatalogTableNotFoundError):
        spark_ext.read(spark, missing)
    assert not LakelogTable.isLakelogTable(spark, missing)
    with pytest.raises(Exception, match="CatalogTableNotFoundError.*has no table 'missing'"):
        spark.read.format("lakelog").options(**aws).load(missing).collect()
    with pytest.raises(Exception, match="CatalogTableNotFoundError.*has no table 'missing'"):
        spark.createDataFrame([(9, "z")], "id long, name string").write.format("lakelog").options(**aws).mode("append").save(missing)
    assert lakelog.Table(location).version == 0  # nothing was written anywhere


def test_sql_on_a_table_by_glue_name(spark, glue_table):
    name, location, _ = glue_table
    assert _ids(spark.sql(f"SELECT id FROM lakelog.`{name}`")) == [0, 1, 2]
    spark.sql(f"DELETE FROM lakelog.`{name}` WHERE id = 0")
    assert lakelog.Table(location).version == 1
    assert sorted(lakelog.read_table(location).column("id").to_pylist()) == [1, 2]

"""Tables by AWS Glue name: ``glue://database/table`` wherever a table path is, registration in the forms
Athena and Spark read, entries kept in step after commits, and catalog failures that never undo a commit.

Glue is moto's server over HTTP (the session's ``s3_endpoint``, which serves S3 and Glue alike); what was
registered is read back with boto3's own Glue client.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
import warnings

import boto3
import pyarrow as pa
import pytest

import lakelog
from lakelog.errors import (
    CatalogConflictError,
    CatalogSyncWarning,
    CatalogTableNotFoundError,
    CatalogUnavailableError,
    InvalidArgumentError,
    InvalidTablePropertyError,
    TableNotFoundError,
    UnsupportedFeatureError,
)
from tests.emulators import StallingEndpoint

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def glue(s3_endpoint):
    """boto3's Glue client on the moto server, and a fresh database in it."""
    client = boto3.client("glue", endpoint_url=s3_endpoint.url, region_name=s3_endpoint.region,
                          aws_access_key_id=s3_endpoint.access_key, aws_secret_access_key=s3_endpoint.secret_key)
    client.database = f"db_{uuid.uuid4().hex[:8]}"
    client.create_database(DatabaseInput={"Name": client.database})
    return client


def _data(n: int = 3, start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "name": [f"n{i}" for i in range(start, start + n)]})


def test_a_write_by_glue_name_creates_the_table_at_its_location_and_registers_it(s3_endpoint, glue):
    location = s3_endpoint.new_table_uri()
    name = f"glue://{glue.database}/events"
    assert lakelog.write_table(name, _data(), location=location, partition_by=["name"]) == 0

    entry = glue.get_table(DatabaseName=glue.database, Name="events")["Table"]
    # Athena's native Delta form
    assert entry["TableType"] == "EXTERNAL_TABLE"
    assert entry["Parameters"]["table_type"] == "DELTA" and entry["Parameters"]["EXTERNAL"] == "TRUE"
    assert entry["StorageDescriptor"]["Location"] == location
    assert entry["StorageDescriptor"]["Columns"] == [{"Name": "id", "Type": "bigint"}, {"Name": "name", "Type": "string"}]
    # Spark-on-Glue's form, as Delta writes it through Spark's Hive client
    assert entry["Parameters"]["spark.sql.sources.provider"] == "delta"
    assert entry["StorageDescriptor"]["SerdeInfo"]["Parameters"]["path"] == location

    # the name reads and writes the table at that location
    assert lakelog.write_table(name, _data(2, start=10)) == 1
    t = lakelog.Table(name)
    assert (t.path, t.catalog_name, t.version) == (location, name, 1)
    assert sorted(lakelog.read_table(name).column("id").to_pylist()) == [0, 1, 2, 10, 11]
    assert lakelog.read_table(location, version=0).num_rows == 3
    assert sorted(lakelog.Table(name, version=0).to_pyarrow().column("id").to_pylist()) == [0, 1, 2]
    # with location= naming the same place (s3a:// is s3://) the write goes there too
    assert lakelog.write_table(name, _data(1, start=20), location=location.replace("s3://", "s3a://") + "/") == 2


def test_a_name_registered_with_another_location_is_refused_before_anything_is_written(s3_endpoint, glue):
    first, second = s3_endpoint.new_table_uri(), s3_endpoint.new_table_uri()
    name = f"glue://{glue.database}/orders"
    lakelog.write_table(name, _data(), location=first)
    with pytest.raises(CatalogConflictError, match="another location|registered with location") as e:
        lakelog.write_table(name, _data(), location=second)
    assert e.value.catalog == name
    with pytest.raises(TableNotFoundError):
        lakelog.Table(second)  # nothing written there
    # registering the second table under the name is refused too, and the entry stays
    lakelog.write_table(second, _data())
    with pytest.raises(CatalogConflictError):
        lakelog.Table(second).register_glue(f"{glue.database}.orders")
    assert glue.get_table(DatabaseName=glue.database, Name="orders")["Table"]["StorageDescriptor"]["Location"] == first


def test_unknown_names_and_databases_are_typed_errors(s3_endpoint, glue):
    with pytest.raises(CatalogTableNotFoundError, match="location="):
        lakelog.write_table(f"glue://{glue.database}/nothing", _data())
    with pytest.raises(CatalogTableNotFoundError, match="no table 'nothing'"):
        lakelog.read_table(f"glue://{glue.database}/nothing")
    with pytest.raises(CatalogTableNotFoundError, match="create-database"):
        lakelog.write_table("glue://no_such_database/t", _data(), location=s3_endpoint.new_table_uri())
    with pytest.raises(InvalidArgumentError, match="glue://database/table"):
        lakelog.read_table("glue://only-a-database")
    with pytest.raises(UnsupportedFeatureError, match="Unity Catalog"):
        lakelog.read_table("unity://main/default/t")
    with pytest.raises(InvalidArgumentError, match="location= goes with a catalog name"):
        lakelog.write_table(s3_endpoint.new_table_uri(), _data(), location=s3_endpoint.new_table_uri())
    from lakelog.storage import Storage

    with pytest.raises(InvalidArgumentError, match="name in a catalog"):
        Storage(f"glue://{glue.database}/t")  # below the seam a name is refused, never opened as a path


def test_aws_settings_from_delta_rs_storage_options_alone(s3_endpoint, glue, monkeypatch):
    for var in list(os.environ):
        if var.startswith("AWS_"):
            monkeypatch.delenv(var)
    options = s3_endpoint.deltalake_options  # AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ..., as deltalake takes them
    location = s3_endpoint.new_table_uri()
    lakelog.write_table(f"glue://{glue.database}/opts", _data(), location=location, storage_options=options)
    assert lakelog.read_table(f"glue://{glue.database}/opts", storage_options=options).num_rows == 3
    # without them nothing says where Glue is: a typed error, not a request to AWS
    with pytest.raises(lakelog.errors.CatalogError):
        lakelog.read_table(f"glue://{glue.database}/opts", storage_options={"AWS_ENDPOINT_URL": s3_endpoint.url})


def test_the_glue_endpoint_variable_wins_over_the_general_one(s3_endpoint, glue, monkeypatch, tmp_path):
    silent = StallingEndpoint()
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL_GLUE", s3_endpoint.url)
        monkeypatch.setenv("AWS_ENDPOINT_URL", silent.url)  # S3 would go here; Glue does not
        path = str(tmp_path / "local")
        lakelog.write_table(path, _data())
        assert lakelog.Table(path).register_glue(f"{glue.database}.local") == "created"
        assert glue.get_table(DatabaseName=glue.database, Name="local")["Table"]["StorageDescriptor"]["Location"] == f"file:{path}"
        assert lakelog.read_table(f"glue://{glue.database}/local").num_rows == 3
        assert lakelog.Table(path).register_glue(f"glue://{glue.database}/local") == "unchanged"
    finally:
        silent.stop()


def test_glue_that_does_not_answer_is_bounded_and_never_undoes_a_commit(s3_endpoint, glue, monkeypatch, tmp_path):
    silent = StallingEndpoint()
    path = str(tmp_path / "t")
    options = {"timeout": "1s", "connect_timeout": "1s", "max_retries": "0"}
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL_GLUE", silent.url)
        with pytest.raises(CatalogUnavailableError, match="did not answer"):
            lakelog.read_table(f"glue://{glue.database}/t", storage_options=options)
        sync = {"lakelog.catalog.sync": f"glue://{glue.database}/t"}
        with pytest.warns(CatalogSyncWarning, match="version 0 is committed") as record:
            assert lakelog.write_table(path, _data(), configuration=sync, storage_options={"AWS_TIMEOUT": "1s", "max_retries": "0"}) == 0
        assert isinstance([w.message for w in record if isinstance(w.message, CatalogSyncWarning)][0].error, CatalogUnavailableError)
    finally:
        silent.stop()
    assert lakelog.read_table(path).num_rows == 3  # the commit stands
    monkeypatch.setenv("AWS_ENDPOINT_URL_GLUE", s3_endpoint.url)
    assert lakelog.Table(path).sync_catalogs() == {f"glue://{glue.database}/t": "created"}  # the catch-up
    assert lakelog.read_table(f"glue://{glue.database}/t").num_rows == 3


def test_entries_listed_in_lakelog_catalog_sync_follow_schema_changes_not_appends(s3_endpoint, glue):
    location = s3_endpoint.new_table_uri()
    name = f"glue://{glue.database}/synced"
    with warnings.catch_warnings():
        warnings.simplefilter("error", CatalogSyncWarning)
        lakelog.write_table(location, _data(), configuration={"lakelog.catalog.sync": name})
        entry = glue.get_table(DatabaseName=glue.database, Name="synced")["Table"]
        assert [c["Name"] for c in entry["StorageDescriptor"]["Columns"]] == ["id", "name"]
        glue.update_table(DatabaseName=glue.database, TableInput={  # another engine's parameter is kept
            **{k: entry[k] for k in ("Name", "TableType", "StorageDescriptor")}, "Parameters": {**entry["Parameters"], "owner_team": "x"}})
        version = glue.get_table(DatabaseName=glue.database, Name="synced")["Table"]["VersionId"]

        lakelog.write_table(location, _data(2, start=5))  # an append: Glue is not called
        assert glue.get_table(DatabaseName=glue.database, Name="synced")["Table"]["VersionId"] == version

        wider = _data(1, start=9).append_column("score", pa.array([1.5]))
        lakelog.write_table(location, wider, schema_mode="merge")
    entry = glue.get_table(DatabaseName=glue.database, Name="synced")["Table"]
    assert entry["StorageDescriptor"]["Columns"][-1] == {"Name": "score", "Type": "double"}
    assert entry["Parameters"]["owner_team"] == "x" and entry["Parameters"]["table_type"] == "DELTA"
    assert lakelog.Table(location).sync_catalogs() == {name: "unchanged"}


def test_a_malformed_sync_property_is_refused_before_the_commit(tmp_path):
    path = str(tmp_path / "t")
    with pytest.raises(InvalidTablePropertyError, match="lakelog.catalog.sync"):
        lakelog.write_table(path, _data(), configuration={"lakelog.catalog.sync": "s3://bucket/not-a-name"})
    with pytest.raises(TableNotFoundError):
        lakelog.Table(path)


def test_glue_columns_name_every_type_as_hive_does():
    from lakelog.catalog.glue_columns import glue_columns

    schema = {"type": "struct", "fields": [
        {"name": "a", "type": "long", "nullable": True, "metadata": {"comment": "the key"}},
        {"name": "b", "type": "integer", "nullable": True, "metadata": {}},
        {"name": "c", "type": "short", "nullable": True, "metadata": {}},
        {"name": "d", "type": "byte", "nullable": True, "metadata": {}},
        {"name": "e", "type": "decimal(10,2)", "nullable": True, "metadata": {}},
        {"name": "f", "type": "timestamp_ntz", "nullable": True, "metadata": {}},
        {"name": "g", "type": {"type": "array", "elementType": "date", "containsNull": True}, "nullable": True, "metadata": {}},
        {"name": "h", "type": {"type": "map", "keyType": "string", "valueType": {"type": "struct", "fields": [
            {"name": "x y", "type": "binary", "nullable": True, "metadata": {}},
            {"name": "z", "type": "boolean", "nullable": True, "metadata": {}}]}, "valueContainsNull": True}, "nullable": True, "metadata": {}},
    ]}
    assert glue_columns(json.dumps(schema)) == [
        {"Name": "a", "Type": "bigint", "Comment": "the key"}, {"Name": "b", "Type": "int"}, {"Name": "c", "Type": "smallint"},
        {"Name": "d", "Type": "tinyint"}, {"Name": "e", "Type": "decimal(10,2)"}, {"Name": "f", "Type": "timestamp"},
        {"Name": "g", "Type": "array<date>"}, {"Name": "h", "Type": "map<string,struct<`x y`:binary,z:boolean>>"},
    ]


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "lakelog.cli", *args], capture_output=True, text=True, timeout=120, cwd=REPO,
                          env=env or dict(os.environ))


def test_cli_registers_looks_up_and_opens_glue_names(s3_endpoint, glue, tmp_path):
    location = s3_endpoint.new_table_uri()
    lakelog.write_table(location, _data())
    r = _cli("register", location, "--glue", f"{glue.database}.cli")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"glue://{glue.database}/cli: created")
    assert glue.get_table(DatabaseName=glue.database, Name="cli")["Table"]["Parameters"]["table_type"] == "DELTA"
    r = _cli("lookup", f"{glue.database}.cli")
    assert (r.returncode, r.stdout) == (0, location + "\n"), r.stderr
    r = _cli("show", f"glue://{glue.database}/cli", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["total_rows"] == 3
    r = _cli("lookup", f"{glue.database}.missing")
    assert r.returncode == 2 and "no table 'missing'" in r.stderr
    other = s3_endpoint.new_table_uri()
    lakelog.write_table(other, _data())
    r = _cli("register", other, "--glue", f"{glue.database}.cli")
    assert r.returncode == 1 and "another location" in r.stderr
    r = _cli("register", other)
    assert r.returncode == 2 and "lakelog.catalog.sync" in r.stderr


def test_cli_write_creates_a_table_by_glue_name_at_its_location(s3_endpoint, glue, tmp_path):
    source = tmp_path / "rows.csv"
    source.write_text("id,name\n1,a\n2,b\n")
    name = f"glue://{glue.database}/created"
    location = s3_endpoint.new_table_uri()

    r = _cli("write", name, str(source))  # an unknown name and no --location: nothing is written
    assert r.returncode != 0 and "--location" in r.stderr, r.stderr
    r = _cli("write", name, str(source), "--location", location, "--partition-by", "name", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["version"] == 0
    entry = glue.get_table(DatabaseName=glue.database, Name="created")["Table"]
    assert entry["StorageDescriptor"]["Location"] == location
    assert entry["Parameters"]["table_type"] == "DELTA"
    assert lakelog.Table(location).partition_columns == ["name"]

    # later writes by name go to the registered location; --location naming another place is refused
    assert _cli("write", name, str(source)).returncode == 0
    assert _cli("write", name, str(source), "--location", location.replace("s3://", "s3a://")).returncode == 0
    other = s3_endpoint.new_table_uri()
    r = _cli("write", name, str(source), "--location", other)
    assert r.returncode != 0 and "registered with location" in r.stderr, r.stderr
    assert lakelog.Table(name).version == 2 and lakelog.read_table(name).num_rows == 6
    with pytest.raises(TableNotFoundError):
        lakelog.Table(other)
    r = _cli("write", str(tmp_path / "plain"), str(source), "--location", location)  # a path is its own location
    assert r.returncode != 0 and "--location goes with" in r.stderr, r.stderr

    # --replace-where creates by name too
    replaced = s3_endpoint.new_table_uri()
    r = _cli("write", f"glue://{glue.database}/replaced", str(source), "--location", replaced, "--replace-where", "id >= 1")
    assert r.returncode == 0, r.stderr
    assert lakelog.read_table(f"glue://{glue.database}/replaced").num_rows == 2

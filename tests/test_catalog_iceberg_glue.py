"""A UniForm table published to pyiceberg's Glue catalog on moto's server over HTTP: the second Iceberg
catalog the catalog seam drives (tests/test_catalog_iceberg.py runs the SQL catalog).

The catalog is configured the way a user configures pyiceberg's Glue catalog, by its
``PYICEBERG_CATALOG__<NAME>__*`` variables (type, ``glue.endpoint``, region and credentials, and the S3
settings of its FileIO); the table lives on moto's S3, and every version lakelog wrote is read back with
``load_catalog(name).load_table(...)``.
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
from pyiceberg.catalog import load_catalog
from pyiceberg.utils.config import Config

import lakelog
from lakelog import iceberg
from lakelog.errors import CatalogConflictError, CatalogSyncWarning, IcebergSyncError

UNIFORM = {"delta.universalFormat.enabledFormats": "iceberg", "delta.enableIcebergCompatV2": "true", "delta.columnMapping.mode": "name"}


@pytest.fixture
def glue_iceberg_catalog(s3_endpoint, monkeypatch):
    """A pyiceberg Glue catalog on the moto server, configured by pyiceberg's variables only; (its name,
    a fresh Glue database)."""
    name = f"glue{uuid.uuid4().hex[:8]}"
    settings = {
        "type": "glue",
        "glue.endpoint": s3_endpoint.url,
        "glue.region": s3_endpoint.region,
        "glue.access-key-id": s3_endpoint.access_key,
        "glue.secret-access-key": s3_endpoint.secret_key,
        "s3.endpoint": s3_endpoint.url,
        "s3.region": s3_endpoint.region,
        "s3.access-key-id": s3_endpoint.access_key,
        "s3.secret-access-key": s3_endpoint.secret_key,
    }
    for key, value in settings.items():
        # pyiceberg reads "__" as "." and "_" as "-" in the key
        monkeypatch.setenv(f"PYICEBERG_CATALOG__{name.upper()}__{key.replace('.', '__').replace('-', '_').upper()}", value)
    return name, f"db_{uuid.uuid4().hex[:8]}"


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A user's process: pyiceberg configured by the environment alone, reading every snapshot of the table.
READER = """
import json, sys
from pyiceberg.catalog import load_catalog
table = load_catalog(sys.argv[1]).load_table(sys.argv[2])
print(json.dumps({
    "metadata_location": table.metadata_location,
    "current": table.current_snapshot().summary["delta-version"],
    "columns": table.schema().column_names,
    "snapshots": {s.summary["delta-version"]: table.scan(snapshot_id=s.snapshot_id).to_arrow().select(["id", "region"]).to_pylist()
                  for s in table.snapshots()},
}))
"""


def _load(name: str):
    """The catalog as configured now (pyiceberg reads its variables once, at import, for ``load_catalog(name)``)."""
    return load_catalog(name, **Config().get_catalog_config(name))


def _rows(t: pa.Table | list) -> list:
    if isinstance(t, list):
        return sorted(t, key=lambda r: r["id"])
    return sorted(t.select(["id", "region"]).to_pylist(), key=lambda r: r["id"])


def test_every_version_is_found_through_pyicebergs_glue_catalog(s3_endpoint, glue_iceberg_catalog):
    name, database = glue_iceberg_catalog
    location = s3_endpoint.new_table_uri()
    config = {**UNIFORM, "lakelog.iceberg.catalog": name, "lakelog.iceberg.table": f"{database}.orders"}
    with warnings.catch_warnings():
        warnings.simplefilter("error", CatalogSyncWarning)
        lakelog.write_table(location, pa.table({"id": [1, 2, 3], "region": ["eu", "us", "eu"]}), partition_by=["region"],
                            configuration=config)
        lakelog.write_table(location, pa.table({"id": [4], "region": ["us"]}))
        lakelog.Table(location).delete("id = 2")
        lakelog.write_table(location, pa.table({"id": [5], "region": ["eu"], "note": ["new"]}), schema_mode="merge")
        iceberg.flush()  # (the Iceberg step and the catalog's follow a commit once it has returned)

    out = subprocess.run([sys.executable, "-c", READER, name, f"{database}.orders"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    table = json.loads(out.stdout)
    assert table["current"] == "3" and "note" in table["columns"]
    assert sorted(table["snapshots"]) == ["0", "1", "2", "3"]
    for version, rows in table["snapshots"].items():
        assert _rows(rows) == _rows(lakelog.read_table(location, version=int(version)))

    # what Glue holds, read with boto3's own client: an Iceberg table whose pointer is under the table's location
    glue = boto3.client("glue", endpoint_url=s3_endpoint.url, region_name=s3_endpoint.region,
                        aws_access_key_id=s3_endpoint.access_key, aws_secret_access_key=s3_endpoint.secret_key)
    entry = glue.get_table(DatabaseName=database, Name="orders")["Table"]
    assert entry["Parameters"]["table_type"].upper() == "ICEBERG"
    assert entry["Parameters"]["metadata_location"] == table["metadata_location"]
    assert table["metadata_location"].startswith(location.rstrip("/") + "/metadata/")
    assert lakelog.Table(location).sync_iceberg() == 3  # nothing to catch up


def test_a_concurrent_change_in_glue_is_reported_never_overwritten(s3_endpoint, glue_iceberg_catalog):
    name, database = glue_iceberg_catalog
    location = s3_endpoint.new_table_uri()
    config = {**UNIFORM, "lakelog.iceberg.catalog": name, "lakelog.iceberg.table": f"{database}.orders"}
    lakelog.write_table(location, pa.table({"id": [1, 2], "region": ["eu", "us"]}), configuration=config)
    theirs = _load(name).load_table(f"{database}.orders")
    theirs.append(pa.table({"id": [100], "region": ["xx"]}).cast(theirs.schema().as_arrow()))  # another Iceberg writer
    moved = _load(name).load_table(f"{database}.orders")
    with pytest.warns(CatalogSyncWarning, match="version 1 is committed"):
        assert lakelog.write_table(location, pa.table({"id": [3], "region": ["eu"]})) == 1
        with pytest.raises(IcebergSyncError, match="CatalogConflictError"):
            iceberg.flush()
    assert lakelog.read_table(location).num_rows == 3  # the commit stands
    now = _load(name).load_table(f"{database}.orders")
    assert now.metadata_location == moved.metadata_location
    with pytest.raises(CatalogConflictError, match="did not write"):
        lakelog.Table(location).sync_iceberg()

"""A writer killed (SIGKILL) between its commit and the catalog call loses nothing: the commit stands, the
catalog lags, and the catch-up (``lakelog register PATH``, ``lakelog uniform PATH``) brings it up to date.

The writer is a real subprocess that kills itself through the ``lakelog.fault_injector`` storage option at
the storage operation named, after the Delta commit landed and before any catalog request.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid

import boto3
import pytest
from pyiceberg.catalog import load_catalog

import lakelog

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_WRITER = r"""
import os, signal, sys
import pyarrow as pa
import lakelog

path, op, fragment, configuration = sys.argv[1], sys.argv[2], sys.argv[3], dict(a.split("=", 1) for a in sys.argv[4:])

def kill_at(name, target):
    if name == op and fragment in target:
        os.kill(os.getpid(), signal.SIGKILL)

lakelog.write_table(path, pa.table({"id": [1, 2, 3], "region": ["eu", "us", "eu"]}), configuration=configuration,
                    storage_options={"lakelog.fault_injector": kill_at})
print("not killed")
"""


def _killed_writer(path: str, op: str, fragment: str, configuration: dict[str, str]) -> None:
    r = subprocess.run([sys.executable, "-c", _WRITER, path, op, fragment, *(f"{k}={v}" for k, v in configuration.items())],
                       capture_output=True, text=True, timeout=300, cwd=REPO)
    assert r.returncode == -signal.SIGKILL, (r.returncode, r.stdout, r.stderr)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lakelog.cli", *args], capture_output=True, text=True, timeout=300, cwd=REPO)


def test_killed_between_the_commit_and_glue_then_caught_up(s3_endpoint, tmp_path):
    glue = boto3.client("glue", endpoint_url=s3_endpoint.url, region_name=s3_endpoint.region)
    database = f"db_{uuid.uuid4().hex[:8]}"
    glue.create_database(DatabaseInput={"Name": database})
    path = str(tmp_path / "events")
    _killed_writer(path, "put_if_absent:done", "_delta_log/00000000000000000000.json",
                   {"lakelog.catalog.sync": f"glue://{database}/events"})
    assert lakelog.Table(path).version == 0 and lakelog.read_table(path).num_rows == 3  # the commit stands
    with pytest.raises(glue.exceptions.EntityNotFoundException):
        glue.get_table(DatabaseName=database, Name="events")  # the catalog was never told
    r = _cli("register", path)
    assert r.returncode == 0 and "created" in r.stdout, r.stderr
    entry = glue.get_table(DatabaseName=database, Name="events")["Table"]
    assert entry["StorageDescriptor"]["Location"] == f"file:{path}" and entry["Parameters"]["table_type"] == "DELTA"
    assert lakelog.read_table(f"glue://{database}/events").num_rows == 3


def test_killed_between_the_iceberg_step_and_the_iceberg_catalog_then_caught_up(tmp_path, monkeypatch):
    name = f"lake{uuid.uuid4().hex[:8]}"
    props = {"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": f"file://{tmp_path}/warehouse"}
    for key, value in props.items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__{name.upper()}__{key.upper()}", value)
    path = str(tmp_path / "orders")
    configuration = {"delta.universalFormat.enabledFormats": "iceberg", "delta.enableIcebergCompatV2": "true",
                     "delta.columnMapping.mode": "name", "lakelog.iceberg.catalog": name, "lakelog.iceberg.table": "sales.orders"}
    # killed once the Iceberg metadata file is written, before its hint and before the catalog call
    _killed_writer(path, "put", "metadata/version-hint.text", configuration)
    assert lakelog.Table(path).version == 0
    assert os.path.exists(os.path.join(path, "metadata", "v1.metadata.json"))
    assert not load_catalog(name, **props).table_exists("sales.orders")
    r = _cli("uniform", path)
    assert r.returncode == 0, r.stderr
    table = load_catalog(name, **props).load_table("sales.orders")
    assert table.current_snapshot().summary["delta-version"] == "0"
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]

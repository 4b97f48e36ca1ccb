"""UniForm tables published to Iceberg catalogs through pyiceberg's catalog layer: registered at the first
Iceberg step, advanced at every later one with the catalog's own commit check, a concurrent change of the
pointer reported and never overwritten, and the catalog caught up by ``sync_iceberg``.

The catalog is pyiceberg's SQL catalog on SQLite, configured the way a user configures pyiceberg (its
``PYICEBERG_CATALOG__<NAME>__*`` variables); the tests read it with ``load_catalog(...).load_table(name)``.
"""

from __future__ import annotations

import os
import uuid
import warnings

import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog

import lakelog
from lakelog import iceberg
from lakelog.errors import CatalogConflictError, CatalogError, CatalogSyncWarning, IcebergSyncError, InvalidTablePropertyError, TableNotFoundError

UNIFORM = {"delta.universalFormat.enabledFormats": "iceberg", "delta.enableIcebergCompatV2": "true", "delta.columnMapping.mode": "name"}


@pytest.fixture
def iceberg_catalog(tmp_path, monkeypatch):
    """A pyiceberg SQL catalog on SQLite, configured by pyiceberg's variables only; (name, its properties)."""
    name = f"lake{uuid.uuid4().hex[:8]}"
    props = {"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": f"file://{tmp_path}/warehouse"}
    for key, value in props.items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__{name.upper()}__{key.upper()}", value)
    return name, props


def _config(name: str, table: str = "sales.orders") -> dict[str, str]:
    return {**UNIFORM, "lakelog.iceberg.catalog": name, "lakelog.iceberg.table": table}


def _rows(t: pa.Table) -> list:
    return sorted(t.select(["id", "region"]).to_pylist(), key=lambda r: r["id"])


def _every_version_reads_the_same(path: str, name: str, props: dict, identifier: str = "sales.orders") -> int:
    """Each Iceberg snapshot the catalog's table has, read through the catalog, holds the rows of the Delta
    version its summary names; returns how many snapshots there are."""
    iceberg.flush()  # (the Iceberg step and the catalog's follow a commit once it has returned)
    table = load_catalog(name, **props).load_table(identifier)
    assert table.metadata.current_snapshot_id is not None
    assert table.current_snapshot().summary["delta-version"] == str(lakelog.Table(path).version)
    for snap in table.snapshots():
        version = int(snap.summary["delta-version"])
        assert _rows(table.scan(snapshot_id=snap.snapshot_id).to_arrow()) == _rows(lakelog.read_table(path, version=version))
    return len(table.snapshots())


def test_every_version_is_found_through_the_catalog(tmp_path, iceberg_catalog):
    name, props = iceberg_catalog
    path = str(tmp_path / "orders")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CatalogSyncWarning)
        lakelog.write_table(path, pa.table({"id": [1, 2, 3], "region": ["eu", "us", "eu"]}), partition_by=["region"],
                            configuration=_config(name))
        assert _every_version_reads_the_same(path, name, props) == 1  # registered at the first Iceberg step
        lakelog.write_table(path, pa.table({"id": [4], "region": ["us"]}))
        lakelog.Table(path).delete("id = 2")
        lakelog.write_table(path, pa.table({"id": [5], "region": ["eu"], "note": ["new column"]}), schema_mode="merge")
        iceberg.flush()
    assert _every_version_reads_the_same(path, name, props) == 4
    table = load_catalog(name, **props).load_table("sales.orders")
    assert "note" in table.schema().column_names
    assert table.properties["delta-version"] == "3"
    # the connection is pyiceberg's configuration: nothing of it is in the log
    log = "".join(open(os.path.join(path, "_delta_log", f)).read() for f in os.listdir(os.path.join(path, "_delta_log")) if f.endswith(".json"))
    assert "sqlite" not in log and "catalog.db" not in log
    assert lakelog.Table(path).sync_iceberg() == 3  # nothing to catch up: the catalog is unchanged
    assert load_catalog(name, **props).load_table("sales.orders").metadata_location == table.metadata_location


def test_a_concurrent_change_of_the_pointer_is_reported_never_overwritten(tmp_path, iceberg_catalog):
    name, props = iceberg_catalog
    path = str(tmp_path / "orders")
    lakelog.write_table(path, pa.table({"id": [1, 2], "region": ["eu", "us"]}), configuration=_config(name))
    theirs = load_catalog(name, **props).load_table("sales.orders")
    theirs.append(pa.table({"id": [100], "region": ["xx"]}).cast(theirs.schema().as_arrow()))  # another Iceberg writer
    moved = load_catalog(name, **props).load_table("sales.orders")
    with pytest.warns(CatalogSyncWarning, match="version 1 is committed") as record:
        assert lakelog.write_table(path, pa.table({"id": [3], "region": ["eu"]})) == 1
        with pytest.raises(IcebergSyncError, match="at version 1: CatalogConflictError") as raised:
            iceberg.flush()
    assert isinstance([w.message for w in record if isinstance(w.message, CatalogSyncWarning)][0].error, CatalogConflictError)
    assert isinstance(next(iter(raised.value.errors.values())), CatalogConflictError)
    assert lakelog.read_table(path).num_rows == 3  # the commit stands
    now = load_catalog(name, **props).load_table("sales.orders")
    assert (now.metadata_location, now.current_snapshot().snapshot_id) == (moved.metadata_location, moved.current_snapshot().snapshot_id)
    with pytest.raises(CatalogConflictError, match="did not write"):
        lakelog.Table(path).sync_iceberg()


def test_a_catalog_table_of_another_table_is_never_overwritten(tmp_path, iceberg_catalog):
    name, props = iceberg_catalog
    first, second = str(tmp_path / "first"), str(tmp_path / "second")
    lakelog.write_table(first, pa.table({"id": [1], "region": ["eu"]}), configuration=_config(name))
    with pytest.warns(CatalogSyncWarning, match="another table"):
        lakelog.write_table(second, pa.table({"id": [2], "region": ["us"]}), configuration=_config(name))
    assert lakelog.read_table(second).num_rows == 1
    assert _every_version_reads_the_same(first, name, props) == 1


def test_catch_up_registers_and_advances_the_catalog(tmp_path, iceberg_catalog, monkeypatch):
    name, props = iceberg_catalog
    path = str(tmp_path / "orders")
    for key in props:  # the catalog is not configured while the table is written
        monkeypatch.delenv(f"PYICEBERG_CATALOG__{name.upper()}__{key.upper()}")
    with pytest.warns(CatalogSyncWarning, match="sync_iceberg"):
        lakelog.write_table(path, pa.table({"id": [1, 2], "region": ["eu", "us"]}), configuration=_config(name))
    with pytest.warns(CatalogSyncWarning), pytest.raises(IcebergSyncError, match="PYICEBERG_CATALOG__"):
        lakelog.Table(path).delete("id = 1")
        iceberg.flush()
    with pytest.raises(CatalogError, match="PYICEBERG_CATALOG__"):
        lakelog.Table(path).sync_iceberg()
    for key, value in props.items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__{name.upper()}__{key.upper()}", value)
    assert lakelog.Table(path).sync_iceberg() == 1
    assert _every_version_reads_the_same(path, name, props) == 2


def test_the_catalog_properties_go_together(tmp_path):
    path = str(tmp_path / "t")
    with pytest.raises(InvalidTablePropertyError, match="go together"):
        lakelog.write_table(path, pa.table({"id": [1]}), configuration={**UNIFORM, "lakelog.iceberg.catalog": "lake"})
    with pytest.raises(InvalidTablePropertyError, match="namespace.name"):
        lakelog.write_table(path, pa.table({"id": [1]}), configuration={**UNIFORM, "lakelog.iceberg.catalog": "lake",
                                                                         "lakelog.iceberg.table": "orders"})
    with pytest.raises(TableNotFoundError):
        lakelog.Table(path)

"""UniForm's Iceberg metadata published to an Iceberg catalog through pyiceberg's catalog layer.

A table with the properties ``lakelog.iceberg.catalog`` (a pyiceberg catalog name) and
``lakelog.iceberg.table`` (``namespace.name``) is registered with its metadata file at its first Iceberg
step; each later step commits the snapshots since to the catalog with ``Catalog.commit_table``, requiring
the table's UUID and that ``main`` is still at the snapshot the catalog showed, so the catalog's own
commit check refuses a concurrent change instead of lakelog overwriting it. The catalog's connection is
pyiceberg's configuration (``PYICEBERG_CATALOG__<NAME>__*`` variables, ``.pyiceberg.yaml``), read at
each call; nothing of it is written to the log. specs/catalogs.md.
"""

from __future__ import annotations

from typing import Any

import orjson

from typing import TYPE_CHECKING

from ..errors import CatalogConflictError, CatalogError, InvalidTablePropertyError
from ..storage import Storage

if TYPE_CHECKING:  # the UniForm modules (fastavro) are imported only when a table publishes to a catalog
    from ..iceberg.metadata import IcebergMetadata

CATALOG_KEY = "lakelog.iceberg.catalog"
TABLE_KEY = "lakelog.iceberg.table"
_ATTEMPTS = 3
_CATALOGS: dict[tuple, Any] = {}  # (name, its configuration) -> the pyiceberg catalog: one connection per process


def configured(configuration: dict[str, str]) -> tuple[str, str] | None:
    """(catalog name, ``namespace.name``) the table publishes to, None when it does not; refuses one
    property without the other and a table name without a namespace."""
    name, table = configuration.get(CATALOG_KEY), configuration.get(TABLE_KEY)
    if name is None and table is None:
        return None
    if not name or not table:
        key = CATALOG_KEY if not name else TABLE_KEY
        raise InvalidTablePropertyError(
            f"table properties {CATALOG_KEY} (a pyiceberg catalog name) and {TABLE_KEY} (namespace.name) go together; "
            f"set {key} too", key=key, value=configuration.get(key))
    if "." not in table.strip(".") or not all(p.strip() for p in table.split(".")):
        raise InvalidTablePropertyError(f"table property {TABLE_KEY}={table!r} must be namespace.name", key=TABLE_KEY, value=table)
    return name, table


def entry(configuration: dict[str, str]) -> str:
    name, table = configured(configuration) or ("", "")
    return f"{name}:{table}"


def _catalog(name: str, label: str) -> Any:
    from pyiceberg.catalog import load_catalog
    from pyiceberg.utils.config import Config

    try:
        props = Config().get_catalog_config(name) or {}  # read now: variables set after pyiceberg's import count too
        key = (name, orjson.dumps(props, option=orjson.OPT_SORT_KEYS))
        if key not in _CATALOGS:
            _CATALOGS[key] = load_catalog(name, **props)
        return _CATALOGS[key]
    except Exception as e:  # noqa: BLE001 - pyiceberg's configuration errors (ValueError, NotInstalledError...)
        raise CatalogError(
            f"Iceberg catalog {name!r} cannot be loaded: {e}; configure it for pyiceberg (PYICEBERG_CATALOG__{name.upper()}__TYPE "
            "and __URI variables, or .pyiceberg.yaml)", catalog=label) from e


def publish(storage: Storage, configuration: dict[str, str]) -> str:
    """Publish the table's latest Iceberg metadata to its catalog: ``"registered"``, ``"advanced"`` or
    ``"unchanged"`` (``""`` when the table names no catalog or has no Iceberg metadata yet). A catalog
    table that is another table, or that another writer advanced, is a ``CatalogConflictError``."""
    from ..iceberg.metadata import METADATA_DIR, metadata_name, read_latest

    target = configured(configuration)
    if target is None:
        return ""
    meta = read_latest(storage)
    if meta is None:
        return ""
    name, identifier = target
    label = f"{name}:{identifier}"
    from pyiceberg.exceptions import CommitFailedException, NamespaceAlreadyExistsError, NoSuchTableError, TableAlreadyExistsError

    cat = _catalog(name, label)
    location = f"{meta.raw['location']}/{METADATA_DIR}/{metadata_name(meta.n)}"
    try:
        for _ in range(_ATTEMPTS):
            try:
                table = cat.load_table(identifier)
            except NoSuchTableError:
                try:
                    cat.create_namespace(cat.namespace_from(identifier))
                except NamespaceAlreadyExistsError:
                    pass
                try:
                    cat.register_table(identifier, location)
                    return "registered"
                except TableAlreadyExistsError:
                    continue  # registered meanwhile: compare with it
            try:
                return _advance(cat, table, meta, label)
            except CommitFailedException as e:
                raise CatalogConflictError(
                    f"Iceberg catalog table {label} changed while lakelog advanced it ({e}); nothing was overwritten. "
                    "If another writer commits to it, it is no longer lakelog's to publish to", catalog=label) from e
    except CatalogError:
        raise
    except Exception as e:  # noqa: BLE001 - the catalog's own errors (connection, permission...) as lakelog's
        raise CatalogError(f"Iceberg catalog table {label}: {type(e).__name__}: {e}", catalog=label) from e
    raise CatalogConflictError(f"Iceberg catalog table {label} kept changing while lakelog registered it; try again", catalog=label)


def _ours(meta_uuid: str, snapshot: Any) -> bool:
    """Whether an Iceberg snapshot is one lakelog wrote: its id is lakelog's for the Delta version it names."""
    from ..iceberg.convert import snapshot_id
    from ..iceberg.metadata import DELTA_VERSION

    try:
        version = int((snapshot.summary or {}).get(DELTA_VERSION))
    except (TypeError, ValueError):
        return False
    return snapshot.snapshot_id == snapshot_id(meta_uuid, version)


def _advance(cat: Any, table: Any, meta: "IcebergMetadata", label: str) -> str:
    from pyiceberg.table.metadata import TableMetadataUtil
    from pyiceberg.table.update import (
        AddPartitionSpecUpdate,
        AddSchemaUpdate,
        AddSnapshotUpdate,
        AssertRefSnapshotId,
        AssertTableUUID,
        RemoveSnapshotsUpdate,
        SetCurrentSchemaUpdate,
        SetDefaultSpecUpdate,
        SetPropertiesUpdate,
        SetSnapshotRefUpdate,
    )

    base = table.metadata
    if str(base.table_uuid) != meta.uuid:
        raise CatalogConflictError(
            f"Iceberg catalog table {label} is another table (UUID {base.table_uuid}, this table's Iceberg UUID is {meta.uuid}); "
            "nothing was changed. Drop it from the catalog or name another table in lakelog.iceberg.table", catalog=label)
    current = base.current_snapshot_id
    if current is not None and not _ours(meta.uuid, base.snapshot_by_id(current)):
        raise CatalogConflictError(
            f"Iceberg catalog table {label} is at snapshot {current}, which lakelog did not write: another writer advanced its "
            "pointer; nothing was overwritten", catalog=label)
    ours = TableMetadataUtil.parse_raw(orjson.dumps(meta.raw).decode())
    updates: list = []
    schema_ids = {s.schema_id for s in base.schemas}
    updates += [AddSchemaUpdate(schema_=s) for s in ours.schemas if s.schema_id not in schema_ids]
    if base.current_schema_id != ours.current_schema_id:
        updates.append(SetCurrentSchemaUpdate(schema_id=ours.current_schema_id))
    spec_ids = {s.spec_id for s in base.partition_specs}
    updates += [AddPartitionSpecUpdate(spec=s) for s in ours.partition_specs if s.spec_id not in spec_ids]
    if base.default_spec_id != ours.default_spec_id:
        updates.append(SetDefaultSpecUpdate(spec_id=ours.default_spec_id))
    known = {s.snapshot_id for s in base.snapshots}
    updates += [AddSnapshotUpdate(snapshot=s) for s in sorted(ours.snapshots, key=lambda s: s.sequence_number or 0)
                if s.snapshot_id not in known]
    if ours.current_snapshot_id is not None and ours.current_snapshot_id != current:
        updates.append(SetSnapshotRefUpdate(ref_name="main", type="branch", snapshot_id=ours.current_snapshot_id))
    changed = {k: v for k, v in ours.properties.items() if base.properties.get(k) != v}
    if changed:
        updates.append(SetPropertiesUpdate(updates=changed))
    kept = {s.snapshot_id for s in ours.snapshots}
    expired = [s.snapshot_id for s in base.snapshots if s.snapshot_id not in kept and s.snapshot_id != ours.current_snapshot_id
               and _ours(meta.uuid, s)]
    if expired:  # lakelog expired them with the Delta log's retention
        updates.append(RemoveSnapshotsUpdate(snapshot_ids=expired))
    if not updates:
        return "unchanged"
    requirements = (AssertTableUUID(uuid=base.table_uuid), AssertRefSnapshotId(ref="main", snapshot_id=current))
    cat.commit_table(table, requirements, tuple(updates))
    return "advanced"

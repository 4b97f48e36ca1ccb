"""Catalog entries kept in step with a table: after a commit, and when caught up on request.

The table property ``lakelog.catalog.sync`` lists the entries (``glue://db/t``, comma separated). After a
commit that changes the table's metadata, each is registered again; a failure is a ``CatalogSyncWarning``
and the commit stands (the log is the truth: ``Table.sync_catalogs()`` catches the entries up).
"""

from __future__ import annotations

import warnings
from typing import Any

from ..actions import Metadata
from ..errors import CatalogSyncWarning
from ..storage import Storage
from ..storage.location import table_url
from . import glue, iceberg_catalogs
from .aws import glue_client
from .names import CatalogName, parse_names

SYNC_KEY = "lakelog.catalog.sync"


def check_properties(configuration: dict[str, str]) -> None:
    """Refuse a malformed ``lakelog.catalog.sync`` (or Iceberg catalog pair) before it is committed."""
    if SYNC_KEY in configuration:
        parse_names(configuration[SYNC_KEY], SYNC_KEY)
    iceberg_catalogs.configured(configuration)


def synced_names(configuration: dict[str, str]) -> list[CatalogName]:
    return parse_names(configuration.get(SYNC_KEY) or "", SYNC_KEY)


def catalog_location(storage: Storage) -> str:
    """The table's location as a catalog records it: its URL, or ``file:/absolute/path`` for a local table."""
    return table_url(storage.uri, storage.root if storage.is_local else None)


def register_glue(storage: Storage, name: CatalogName, metadata: Metadata) -> str:
    """Register the table of ``storage`` (its ``metadata``) as the Glue table ``name``; ``"created"``,
    ``"updated"`` or ``"unchanged"``. Errors are raised (see ``glue.register``)."""
    # (the table's own options: an S3 table's account, the request policy; glue_client leaves another
    # store's options aside)
    return glue.register(glue_client(storage.options), name, catalog_location(storage), metadata)


def register_after_write(location: str, name: CatalogName, storage_options: dict[str, Any] | None, version: int) -> None:
    """Register the table a write just created at ``location`` as ``name``; never raises (the commit
    stands): a failure is a ``CatalogSyncWarning`` saying how to register it later."""
    from ..log.snapshot import Snapshot

    try:
        storage = Storage(location, storage_options)
        register_glue(storage, name, Snapshot.load(storage, version=version).metadata)
    except Exception as e:  # noqa: BLE001 - the commit stands; the entry is registered later
        warnings.warn(CatalogSyncWarning(
            f"lakelog: version {version} is committed at {location}, but registering it as {name} failed: {e}; "
            f"register it with `lakelog register {location} --glue {name.dotted}`", version, e), stacklevel=3)


def sync_catalogs(storage: Storage, metadata: Metadata) -> dict[str, str]:
    """Register every entry ``lakelog.catalog.sync`` lists; {entry: outcome}. Errors are raised."""
    return {name.uri: register_glue(storage, name, metadata) for name in synced_names(metadata.configuration)}


def after_commit(storage: Storage, version: int, metadata: Metadata | None, changed: bool) -> None:
    """After commit ``version``: re-register the listed entries when the commit ``changed`` the metadata.
    Never raises: a failure is a ``CatalogSyncWarning`` naming the version and the catch-up."""
    if not changed or metadata is None or not metadata.configuration.get(SYNC_KEY):
        return
    try:
        names = synced_names(metadata.configuration)
    except Exception as e:  # noqa: BLE001 - another writer's malformed property: the commit stands
        warnings.warn(CatalogSyncWarning(f"lakelog: version {version} is committed; {e}", version, e), stacklevel=4)
        return
    for name in names:
        try:
            register_glue(storage, name, metadata)
        except Exception as e:  # noqa: BLE001 - the commit stands; Table.sync_catalogs() catches the entry up
            warnings.warn(CatalogSyncWarning(
                f"lakelog: version {version} is committed, but registering it as {name} failed: {e}; "
                "Table.sync_catalogs() or `lakelog register PATH` catches the entry up", version, e), stacklevel=4)


def after_iceberg_step(storage: Storage, version: int, configuration: dict[str, str], stacklevel: int = 4) -> Exception | None:
    """After the Iceberg step of commit ``version``: publish the Iceberg metadata to the table's Iceberg
    catalog (``lakelog.iceberg.catalog``). Never raises: a failure, or a concurrent change of the catalog's
    pointer, is a ``CatalogSyncWarning`` and returned; ``Table.sync_iceberg()`` catches the catalog up."""
    try:
        if iceberg_catalogs.configured(configuration) is None:
            return None
        iceberg_catalogs.publish(storage, configuration)
    except Exception as e:  # noqa: BLE001 - the commit stands; sync_iceberg catches the catalog up
        warnings.warn(CatalogSyncWarning(
            f"lakelog: version {version} is committed with its Iceberg metadata, but publishing it to the Iceberg catalog "
            f"failed: {e}; Table.sync_iceberg() or `lakelog uniform PATH` catches the catalog up", version, e), stacklevel=stacklevel)
        return e
    return None

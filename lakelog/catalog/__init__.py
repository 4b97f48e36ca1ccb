"""Catalogs: tables found by name (AWS Glue), and UniForm's Iceberg metadata published to Iceberg catalogs.

The one seam between lakelog and catalogs (specs/catalogs.md). ``names`` parses catalog names
(``glue://database/table``); ``aws`` makes the Glue client; ``glue`` looks entries up and registers
tables, with ``glue_columns``; ``iceberg_catalogs`` publishes UniForm's Iceberg metadata through
pyiceberg's catalogs; ``sync`` keeps the entries in step after commits. A catalog is told about a commit after it, never before, and its failure never undoes one.
boto3 (and pyiceberg) are imported only when a catalog is used.
"""

from __future__ import annotations

from typing import Any

from .names import CatalogName, catalog_name, glue_name
from .iceberg_catalogs import publish as publish_iceberg
from .sync import SYNC_KEY, after_commit, after_iceberg_step, catalog_location, check_properties, register_after_write, register_glue, sync_catalogs


def resolve(path: Any, storage_options: dict[str, Any] | None) -> tuple[Any, CatalogName | None]:
    """(the table's location, its catalog name) for ``path``: a catalog name's location is looked up; any
    other path is returned as it is, with None."""
    name = catalog_name(path)
    if name is None:
        return path, None
    from . import glue
    from .aws import glue_client

    return glue.table_location(glue_client(storage_options), name), name


def location_for_write(name: CatalogName, location: str | None, storage_options: dict[str, Any] | None) -> tuple[str, bool]:
    """(where a write to ``name`` goes, whether ``name`` is registered already). A registered name's
    location, which ``location`` (if given) must name too; else ``location``, required."""
    from ..errors import CatalogConflictError, CatalogTableNotFoundError
    from . import glue
    from .aws import glue_client

    entry = glue.lookup(glue_client(storage_options), name)
    if entry is None:
        if location is None:
            raise CatalogTableNotFoundError(
                f"AWS Glue has no table {name.table!r} in database {name.database!r}; pass location='s3://bucket/path' (the CLI's --location) to "
                "create the table there and register it", catalog=name.uri)
        return location, False
    there = glue.location_of(entry, name)
    if location is not None and not glue.same_location(there, location):
        raise CatalogConflictError(
            f"AWS Glue table {name} is registered with location {there!r}, not {location!r}; nothing was written. "
            "Leave location= out to write to the registered table", catalog=name.uri)
    return there, True


__all__ = ["SYNC_KEY", "CatalogName", "after_commit", "after_iceberg_step", "publish_iceberg", "catalog_location", "catalog_name", "check_properties", "glue_name",
           "location_for_write", "register_after_write", "register_glue", "resolve", "sync_catalogs"]

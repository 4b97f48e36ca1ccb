"""AWS Glue entries of lakelog tables: lookup and registration, in the form Athena and Spark read.

One entry serves both: Athena's native Delta form (``table_type=DELTA``, ``EXTERNAL``, the location, the
schema as columns) and Spark-on-Glue's (``spark.sql.sources.provider=delta`` and the ``path`` serde
parameter, as Delta's catalog writes a table through Spark's Hive client). specs/catalogs.md.
"""

from __future__ import annotations

import os
from typing import Any

from ..actions import Metadata
from ..errors import CatalogConflictError, CatalogError, CatalogTableNotFoundError
from ..storage.location import resolve_location, url_scheme
from .aws import GlueAnswer, GlueClient
from .glue_columns import glue_columns
from .names import CatalogName

_SERDE = "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"
_INPUT_FORMAT = "org.apache.hadoop.mapred.SequenceFileInputFormat"
_OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.HiveSequenceFileOutputFormat"
# What lakelog sets; other parameters an engine or a person put on the entry are kept.
_PARAMETERS = {"table_type": "DELTA", "EXTERNAL": "TRUE", "spark.sql.sources.provider": "delta"}
# TableInput's keys (GetTable answers with more: CreateTime, VersionId, DatabaseName...)
_INPUT_KEYS = ("Name", "Description", "Owner", "Retention", "StorageDescriptor", "PartitionKeys", "ViewOriginalText",
               "ViewExpandedText", "TableType", "Parameters", "TargetTable", "ViewDefinition")
_ATTEMPTS = 5


def same_location(a: str, b: str) -> bool:
    """Whether two locations name the same table root (``s3a://`` is ``s3://``; ``file:/p`` is ``/p``)."""
    return _normal(a) == _normal(b)


def _normal(location: str) -> str:
    scheme = url_scheme(location)
    if scheme is None and not location.startswith("file:"):
        return os.path.abspath(os.path.expanduser(location)).rstrip("/") or "/"
    out = resolve_location(location).rstrip("/")
    return "s3://" + out[len("s3a://"):] if out.startswith("s3a://") else out


def glue_location(location: str) -> str:
    """A table's location as its Glue entry holds it: ``s3://`` for ``s3a://`` (the scheme Athena reads)."""
    return "s3://" + location[len("s3a://"):] if location.startswith("s3a://") else location


def lookup(client: GlueClient, name: CatalogName) -> dict | None:
    """The Glue entry of ``name`` (GetTable's ``Table``), None when the database has no such table; a
    missing database is a ``CatalogTableNotFoundError``."""
    try:
        return client.call("get_table", name.uri, DatabaseName=name.database, Name=name.table)["Table"]
    except GlueAnswer as e:
        if e.code != "EntityNotFoundException":
            raise CatalogError(f"AWS Glue: reading {name} failed: {e}", catalog=name.uri) from None
    _database(client, name)
    return None


def _database(client: GlueClient, name: CatalogName) -> None:
    try:
        client.call("get_database", name.uri, Name=name.database)
    except GlueAnswer as e:
        if e.code == "EntityNotFoundException":
            raise CatalogTableNotFoundError(
                f"AWS Glue has no database {name.database!r} (for {name}); create it first "
                f"(aws glue create-database --database-input Name={name.database})", catalog=name.uri) from None
        raise CatalogError(f"AWS Glue: reading database {name.database!r} failed: {e}", catalog=name.uri) from None


def location_of(entry: dict, name: CatalogName) -> str:
    """The table location an entry names: its storage location, else Spark's ``path`` serde parameter."""
    sd = entry.get("StorageDescriptor") or {}
    location = sd.get("Location") or ((sd.get("SerdeInfo") or {}).get("Parameters") or {}).get("path")
    if not location:
        raise CatalogTableNotFoundError(f"the AWS Glue table {name} has no location (a view, or not a table of files)",
                                        catalog=name.uri)
    return location


def table_location(client: GlueClient, name: CatalogName) -> str:
    """The location of the table ``name`` names; ``CatalogTableNotFoundError`` when there is none."""
    entry = lookup(client, name)
    if entry is None:
        raise CatalogTableNotFoundError(
            f"AWS Glue has no table {name.table!r} in database {name.database!r}; create it with "
            f"write_table({name.uri!r}, data, location='s3://bucket/path') or register an existing table with "
            f"`lakelog register PATH --glue {name.dotted}`", catalog=name.uri)
    return location_of(entry, name)


def table_input(name: CatalogName, location: str, metadata: Metadata, existing: dict | None = None) -> dict:
    """The TableInput that registers the table at ``location`` with ``metadata`` (on top of ``existing``)."""
    base = {k: v for k, v in (existing or {}).items() if k in _INPUT_KEYS}
    sd = dict(base.get("StorageDescriptor") or {})
    serde = dict(sd.get("SerdeInfo") or {})
    location = glue_location(location)
    serde.update(SerializationLibrary=_SERDE, Parameters={**(serde.get("Parameters") or {}), "path": location, "serialization.format": "1"})
    sd.update(Location=location, Columns=glue_columns(metadata.schema_string), SerdeInfo=serde, InputFormat=_INPUT_FORMAT,
              OutputFormat=_OUTPUT_FORMAT, Compressed=False)
    out = {**base, "Name": name.table, "TableType": "EXTERNAL_TABLE", "StorageDescriptor": sd,
           "Parameters": {**(base.get("Parameters") or {}), **_PARAMETERS}, "PartitionKeys": []}
    if metadata.description:
        out["Description"] = metadata.description
    return out


def register(client: GlueClient, name: CatalogName, location: str, metadata: Metadata) -> str:
    """Create the entry ``name`` for the table at ``location``, or update it when it names the same
    location; returns ``"created"``, ``"updated"`` or ``"unchanged"``. An entry of another location is a
    ``CatalogConflictError``; a concurrent change of the entry is read again, never overwritten."""
    for _ in range(_ATTEMPTS):
        entry = lookup(client, name)
        if entry is None:
            try:
                client.call("create_table", name.uri, DatabaseName=name.database, TableInput=table_input(name, location, metadata))
                return "created"
            except GlueAnswer as e:
                if e.code == "AlreadyExistsException":
                    continue  # registered meanwhile: compare with it
                raise CatalogError(f"AWS Glue: creating {name} failed: {e}", catalog=name.uri) from None
        there = location_of(entry, name)
        if not same_location(there, location):
            raise CatalogConflictError(
                f"AWS Glue table {name} is registered with another location, {there!r}, not {glue_location(location)!r}; "
                "nothing was changed. Drop or rename that entry first, or write to its location", catalog=name.uri)
        new = table_input(name, location, metadata, entry)
        if new == {k: v for k, v in entry.items() if k in _INPUT_KEYS}:
            return "unchanged"
        kwargs: dict[str, Any] = {"DatabaseName": name.database, "TableInput": new}
        if entry.get("VersionId"):
            kwargs["VersionId"] = entry["VersionId"]  # Glue's own check: a concurrent update fails, and is read again
        try:
            client.call("update_table", name.uri, **kwargs)
            return "updated"
        except GlueAnswer as e:
            if e.code in ("ConcurrentModificationException", "EntityNotFoundException"):
                continue
            raise CatalogError(f"AWS Glue: updating {name} failed: {e}", catalog=name.uri) from None
    raise CatalogConflictError(f"AWS Glue table {name} kept changing while lakelog registered it ({_ATTEMPTS} attempts); "
                               "try again", catalog=name.uri)

"""``lakelog.write_table``: the public write entry point.

Plain appends and overwrites go to ``lakelog.write``; overwriting only the rows a predicate selects,
or only the partitions the data holds, goes to ``lakelog.dml`` (imported only then, so plain writes
never load the SQL engine).
"""

from __future__ import annotations

from typing import Any

from . import catalog, write
from .errors import InvalidArgumentError

PARTITION_OVERWRITE_MODES = ("static", "dynamic")


def write_table(
    path: str,
    data: Any,
    *,
    mode: str = "append",
    partition_by: list[str] | str | None = None,
    schema_mode: str | None = None,
    configuration: dict[str, str] | None = None,
    storage_options: dict[str, Any] | None = None,
    app_id: str | None = None,
    app_version: int | None = None,
    user_metadata: str | None = None,
    predicate: Any = None,
    partition_overwrite: str | None = None,
    generated_columns: dict[str, str] | None = None,
    identity_columns: Any = None,
    cluster_by: list[str] | None = None,
    column_defaults: dict[str, str] | None = None,
    location: str | None = None,
) -> int:
    """Write ``data`` to the table at ``path`` in one atomic commit and return the committed version.

    ``path`` may be a catalog name, ``glue://database/table``: the write goes to the location AWS Glue
    holds for it. ``location`` (with a name Glue does not know yet): where to create the table, which is
    then registered under the name (a failed registration is a ``CatalogSyncWarning``; the commit stands).
    A name registered with another location is a ``CatalogConflictError``, raised before anything is written.

    mode: "append" | "overwrite" | "error" (fail if the table exists) | "ignore" (do nothing if it exists).
    schema_mode: None (schema must match) | "merge" (add new nullable columns) | "overwrite" (with mode="overwrite").
    app_id/app_version: idempotent writes; nothing is committed when the table's txn for app_id is >= app_version.
    predicate (with mode="overwrite"): replace only the rows it selects (SQL text, DNF tuples or a pyarrow
    expression); every row of ``data`` must satisfy it (``PredicateViolationError`` otherwise).
    partition_overwrite="dynamic" (with mode="overwrite"): replace only the partitions present in ``data``;
    "static" (the default) replaces the whole table.
    generated_columns ({column: Spark SQL expression}, when the write creates the table): generated columns,
    computed when later writes lack them and checked when they give them (Delta's generatedColumns;
    Spark and deltalake honour them too). CHECK constraints: ``Table.add_constraint``.
    identity_columns (when the write creates the table): ``["id"]`` or ``{"id": {"start": 1, "step": 1,
    "allow_explicit_insert": False}}``: bigint columns whose values every write generates, unique across
    concurrent writers; one the data lacks goes last, and a void (all-null) column of the data holds its place.
    cluster_by (when the write creates the table): liquid clustering columns; every file gets stats for
    them and ``Table.optimize()`` rewrites the files in Z-order over them.
    column_defaults ({column: constant Spark SQL expression}, when the write creates the table): stored when
    a later write lacks the column (Delta's allowColumnDefaults); ``Table.set_column_default`` changes them.
    Timestamps are stored in microseconds; a nanosecond value with a sub-microsecond part is refused
    (``SchemaMismatchError``), never rounded or truncated, here as on every write path.
    """
    name = catalog.catalog_name(path)
    if name is None:
        if location is not None:
            raise InvalidArgumentError(f"location= goes with a catalog name (glue://database/table); {path!r} is the location itself")
        return _write(path, data, mode, partition_by, schema_mode, configuration, storage_options, app_id, app_version, user_metadata,
                      predicate, partition_overwrite, generated_columns, identity_columns, cluster_by, column_defaults)
    target, registered = catalog.location_for_write(name, location, storage_options)
    version = _write(target, data, mode, partition_by, schema_mode, configuration, storage_options, app_id, app_version, user_metadata,
                     predicate, partition_overwrite, generated_columns, identity_columns, cluster_by, column_defaults)
    if not registered:
        catalog.register_after_write(target, name, storage_options, version)
    return version


def _write(path: str, data: Any, mode: str, partition_by: Any, schema_mode: str | None, configuration: dict | None,
           storage_options: dict | None, app_id: str | None, app_version: int | None, user_metadata: str | None, predicate: Any,
           partition_overwrite: str | None, generated_columns: dict | None, identity_columns: Any, cluster_by: list | None,
           column_defaults: dict | None) -> int:
    if partition_overwrite not in (None, *PARTITION_OVERWRITE_MODES):
        raise InvalidArgumentError(f"partition_overwrite must be one of {PARTITION_OVERWRITE_MODES}, not {partition_overwrite!r}")
    partial = predicate is not None or partition_overwrite == "dynamic"
    if not partial:
        return write.write_table(
            path, data, mode=mode, partition_by=partition_by, schema_mode=schema_mode, configuration=configuration,
            storage_options=storage_options, app_id=app_id, app_version=app_version, user_metadata=user_metadata,
            generated_columns=generated_columns, identity_columns=identity_columns, cluster_by=cluster_by,
            column_defaults=column_defaults,
        )
    if mode != "overwrite":
        raise InvalidArgumentError("predicate and partition_overwrite='dynamic' need mode='overwrite'")
    if generated_columns is not None or identity_columns is not None or cluster_by is not None or column_defaults is not None:
        raise InvalidArgumentError("generated_columns, identity_columns, column_defaults and cluster_by are declared when a write creates the table, "
                                   "not with predicate or partition_overwrite")
    if predicate is not None and partition_overwrite == "dynamic":
        raise InvalidArgumentError("pass either predicate or partition_overwrite='dynamic', not both")
    from . import dml

    kwargs = dict(partition_by=partition_by, schema_mode=schema_mode, configuration=configuration, storage_options=storage_options,
                  app_id=app_id, app_version=app_version, user_metadata=user_metadata)
    if predicate is not None:
        return dml.overwrite_where(path, data, predicate, **kwargs)
    return dml.overwrite_partitions(path, data, **kwargs)

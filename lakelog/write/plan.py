"""Planning and committing a write: ``WritePlan`` (files prepared, then one commit) and ``write_table``,
all through the one transaction path; the schema and protocol it commits come from ``table_metadata``."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa

from ..actions import Action, AddFile, Metadata, Txn, check_app_id, check_app_version, now_ms
from ..table_features.column_mapping import MAX_COLUMN_ID, ColumnMapping, check_mode_change, physical_schema
from ..log.delta_log import DeltaLog
from ..errors import CommitConflictError, InvalidArgumentError, InvalidArgumentTypeError, LakelogError, SchemaMismatchError, StorageUnavailableError, SymlinkManifestError, TableExistsError, TableNotFoundError
from ..schema.conform import cast_batch
from ..schema.types import check_column_names, schema_to_string
from ..schema.input_data import to_arrow_stream
from ..table_features.properties import TableProperties, validate_new
from ..log.snapshot import Snapshot
from .. import catalog
from ..storage import Storage
from ..transaction import DuplicateTransaction, Transaction, backoff_delay, check_user_metadata
from ..table_features import clustering, iceberg_compat, row_tracking
from ..table_features.row_rules import WriterFeatures
from ..table_features.generated_columns import check_column_defaults, declare_columns, keep_field_metadata, with_generated_columns
from ..table_features.identity_columns import check_identity_declarations, check_not_both, check_not_partitioned, high_water_marks, with_high_water_marks
from ..table_features.identity_columns import identity_columns as declared_identity
from .files import DataWriter, materializes_partitions
from .table_metadata import mapped_schema, plan_protocol, plan_schema


MODES = ("append", "overwrite", "error", "ignore")
ABORT_CLOCK_SKEW_MS = 15 * 60 * 1000


@dataclass
class WritePlan:
    """A planned write: made where the job starts, shipped (pickled) to whoever writes the files.

    Two phases, as in a distributed file sink: ``write`` (any process, any number of times) writes
    uniquely named Parquet files and returns their add actions without making anything visible;
    ``commit`` (once, on the coordinator) makes all of them visible in one atomic log entry.
    """

    path: str  # the table's location, absolute for a local table (Storage.location)
    storage_options: dict[str, Any] | None
    mode: str
    schema: pa.Schema  # the schema data files are written with (table columns, canonical types)
    partition_columns: list[str]
    partition_by: list[str] | None
    schema_mode: str | None
    configuration: dict[str, str] | None
    read_version: int  # -1: no table when planned
    max_indexed_cols: int = 32
    skip: bool = False  # mode="ignore" on an existing table: nothing to do
    txn_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    column_mapping: ColumnMapping | None = None  # the table's mapping the files are written for (mode name or id)
    features: WriterFeatures | None = None  # constraints, generated columns and defaults every row must meet
    generated_columns: dict[str, str] | None = None  # declared by this write (it creates the table)
    identity_columns: dict[str, dict] | None = None  # declared by this write: name -> delta.identity.* metadata
    column_defaults: dict[str, str] | None = None  # declared by this write: name -> CURRENT_DEFAULT (Spark SQL)
    cluster_by: list[str] | None = None  # declared by this write: the clustering columns of the new table
    stats_columns: tuple[str, ...] = ()  # columns every file gets stats for (the table's clustering columns)
    partitions_in_files: bool = False  # data files also hold the partition columns (Iceberg compatibility)
    snapshot: Snapshot | None = field(default=None, repr=False, compare=False)  # in-process only

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["snapshot"] = None  # tasks need no table state; the coordinator reloads it
        return state

    def _latest(self, storage: Storage) -> Snapshot | None:
        if self.snapshot is not None:
            return self.snapshot.updated()
        return _load_or_none(storage)

    @property
    def storage(self) -> Storage:
        return Storage(self.path, self.storage_options)

    def write(self, data: Any, file_prefix: str = "part") -> list[AddFile]:
        """Write ``data`` (Arrow/pandas, or an iterable of RecordBatches) as uncommitted data files."""
        if self.skip:
            return []
        if isinstance(data, (pa.Table, pa.RecordBatch, pa.RecordBatchReader)) or type(data).__module__.startswith("pandas"):
            _, data = to_arrow_stream(data)
        w = DataWriter(self.storage, self.schema, self.partition_columns, self.max_indexed_cols, file_prefix, column_mapping=self.column_mapping,
                       features=self.features, stats_columns=self.stats_columns, partitions_in_files=self.partitions_in_files)
        computed = self.features.computed if self.features is not None else ()
        try:
            for b in data:
                w.write(cast_batch(b, self.schema, computed))
            return w.finish()
        except BaseException:
            w.abort()
            raise

    def commit(
        self,
        adds: list[AddFile],
        *,
        app_id: str | None = None,
        app_version: int | None = None,
        user_metadata: str | None = None,
        operation: str | None = None,
        extra_parameters: dict[str, Any] | None = None,
    ) -> int:
        """Commit ``adds`` in one atomic log entry; return the committed (or already-current) version.

        Appends rebase onto the latest version (blind appends never conflict). An overwrite keeps the
        version it was planned on, so data committed after that is a conflict, not silently replaced.
        When nothing is committed (idempotent duplicate, mode="ignore"), the files are deleted.
        """
        storage = self.storage
        try:
            app_id, app_version = _check_txn(app_id, app_version)
        except InvalidArgumentError:
            discard_files(storage, adds)  # nothing can commit them
            raise
        for _ in range(3):  # more rounds only when the table is created concurrently
            snapshot = self._latest(storage)
            if snapshot is not None:
                if self.mode == "error":
                    discard_files(storage, adds)
                    raise TableExistsError(f"a table already exists at {self.path!r} (version {snapshot.version}); use mode='append' or 'overwrite'")
                if self.mode == "ignore":
                    discard_files(storage, adds)
                    return snapshot.version
                if app_id is not None and app_id in snapshot.txns and snapshot.txns[app_id].version >= app_version:
                    discard_files(storage, adds)
                    return snapshot.version
                if self.mode == "overwrite" and 0 <= self.read_version < snapshot.version:
                    snapshot = Snapshot.load(storage, version=self.read_version, listing=snapshot.listing)
            try:
                schema, parts, meta_changed = plan_schema(self.schema, snapshot, self.mode, self.partition_by, self.schema_mode)
                if parts != self.partition_columns:
                    raise SchemaMismatchError(f"the table's partitioning changed to {parts} after this write was planned with {self.partition_columns}")
                actions = self._actions(snapshot, schema, parts, meta_changed, adds, app_id, app_version)
                params: dict[str, Any] = {"mode": {"overwrite": "Overwrite", "error": "ErrorIfExists"}.get(self.mode, "Append")}
                if parts:
                    params["partitionBy"] = parts
                if self.schema_mode:
                    params["schemaMode"] = self.schema_mode
                params.update(extra_parameters or {})
                op = operation or ("CREATE TABLE" if snapshot is None else "WRITE")
                overwrite = self.mode == "overwrite" and snapshot is not None
                txn = Transaction(storage, snapshot, op, params, read_whole_table=overwrite, user_metadata=user_metadata)
                txn.txn_id = self.txn_id  # lets abort() recognise a commit that landed
                return txn.commit(actions).version
            except DuplicateTransaction as d:
                discard_files(storage, adds)
                return d.version
            except TableExistsError:
                if snapshot is not None:
                    discard_files(storage, adds)
                    raise
                continue  # created concurrently: plan again against the new table
            except SymlinkManifestError:
                raise  # after the commit: its files are referenced
            except StorageUnavailableError:
                raise  # the store did not answer: the commit may have landed, so its files stay
            except LakelogError:
                # Raised before our commit file was written (conflict, schema, protocol): the files are
                # unreferenced. Other exceptions leave the outcome unknown, so the files stay.
                discard_files(storage, adds)
                raise
        discard_files(storage, adds)
        raise TableExistsError(f"the table at {self.path!r} was created and changed concurrently; retry the write")

    def abort(self, adds: list[AddFile]) -> None:
        """Delete the given data files, except any that a commit references.

        A commit may have landed even when the caller saw an error, possibly made by another plan
        object (a streaming sink commits through a fresh one), so every commit written since the
        files were (allowing for clock skew between machines) is checked for their paths.
        """
        if not adds:
            return
        storage = self.storage
        try:
            listing = DeltaLog(storage).list()
        except TableNotFoundError:
            discard_files(storage, adds)
            return
        since = min(a.modification_time for a in adds) - ABORT_CLOCK_SKEW_MS
        times = listing.commit_timestamps()
        recent = [v for v, t in times.items() if t >= since]
        referenced: set[str] = set()
        for actions in DeltaLog(storage).read_commits(recent).values():
            referenced.update(a.path for a in actions if isinstance(a, AddFile))
        discard_files(storage, [a for a in adds if a.path not in referenced])

    def _actions(self, snapshot, schema, parts, meta_changed, adds, app_id, app_version) -> list[Action]:
        configuration = row_tracking.configure(dict(self.configuration or {}), snapshot.configuration if snapshot else None)
        effective = {**(snapshot.configuration if snapshot else {}), **configuration}
        actions: list[Action] = []
        mode = TableProperties(effective).column_mapping_mode
        if snapshot is not None:
            check_mode_change(snapshot.column_mapping.mode, mode)
        schema_string = snapshot.metadata.schema_string if snapshot is not None and not meta_changed else None
        if mode != "none" and (schema_string is None or snapshot.column_mapping.mode == "none"):
            sources = [snapshot.metadata.schema_string if snapshot is not None else None, self.column_mapping.schema_string if self.column_mapping else None]
            if snapshot is not None and snapshot.column_mapping.mode == "none":
                sources.reverse()  # this write enables mapping: the ids and names its files were written with
            schema_string, mapped_conf = mapped_schema(schema, effective, sources)
            configuration[MAX_COLUMN_ID] = mapped_conf[MAX_COLUMN_ID]
        elif schema_string is None:
            schema_string = schema_to_string(schema)
        if mode != "none":  # (IcebergCompatV2 turned on by this write: ids for array elements and map keys and values)
            schema_string, nested_conf = iceberg_compat.with_nested_ids(schema_string, effective)
            if nested_conf is not effective:
                configuration[MAX_COLUMN_ID] = nested_conf[MAX_COLUMN_ID]
        if self.generated_columns or self.identity_columns or self.column_defaults:
            schema_string = declare_columns(schema_string, self.generated_columns, self.identity_columns, self.column_defaults)
        elif snapshot is not None and schema_string != snapshot.metadata.schema_string and self.schema_mode != "overwrite":
            schema_string = keep_field_metadata(schema_string, snapshot.metadata.schema_string)
        schema_string = self._raise_high_water_marks(schema_string, adds)
        protocol = plan_protocol(schema, snapshot.protocol if snapshot else None, effective, schema_string,
                                 frozenset(clustering.FEATURES) if self.cluster_by else frozenset())
        if protocol is not None:
            actions.append(protocol)
        if parts and adds and not self.partitions_in_files and materializes_partitions(protocol or (snapshot.protocol if snapshot else None), None):
            raise CommitConflictError(
                "the table requires partition columns in data files (materializePartitionColumns), listed after this write "
                "was planned, so its files lack them; nothing was committed. Retry the write",
                read_version=snapshot.version if snapshot is not None else None,
            )
        if self.cluster_by:
            actions.append(clustering.domain(self.cluster_by, ColumnMapping(mode, schema_string).physical_name if mode != "none" else str))
        self._check_physical(ColumnMapping(mode, schema_string), snapshot)
        if snapshot is None:
            actions.append(Metadata(id=str(uuid.uuid4()), schema_string=schema_string, partition_columns=parts, configuration=configuration, created_time=now_ms()))
        elif meta_changed or schema_string != snapshot.metadata.schema_string or {**snapshot.configuration, **configuration} != snapshot.configuration:
            m = snapshot.metadata
            actions.append(
                Metadata(
                    id=m.id,
                    schema_string=schema_string,
                    partition_columns=parts,
                    configuration={**m.configuration, **configuration},
                    created_time=m.created_time,
                    name=m.name,
                    description=m.description,
                    format_provider=m.format_provider,
                    format_options=m.format_options,
                )
            )
        if app_id is not None:
            actions.append(Txn(app_id, app_version, now_ms()))
        if self.mode == "overwrite" and snapshot is not None:
            ts = now_ms()
            actions.extend(a.remove(ts) for a in snapshot.files.values())
        elif snapshot is not None and not row_tracking.enabled(snapshot.metadata) and row_tracking.enabled(next((a for a in actions if isinstance(a, Metadata)), None)):
            actions.extend(row_tracking.backfill(snapshot.files.values()))  # (this commit enables row tracking)
        actions.extend(adds)
        return actions

    def _raise_high_water_marks(self, schema_string: str, adds: list[AddFile]) -> str:
        """The schema with identity high water marks raised past the values ``adds`` hold (read from the
        schema being committed, so a concurrent writer's values make this commit conflict, not repeat them)."""
        if "delta.identity.start" not in schema_string or not adds:
            return schema_string
        columns = declared_identity(orjson.loads(schema_string)["fields"])
        drawn_from = {c.name: c.high_water_mark for c in (self.features.identity if self.features is not None else ())}
        moved = [c.name for c in columns if c.name in drawn_from and drawn_from[c.name] != c.high_water_mark]
        if moved:
            raise CommitConflictError(
                f"identity column(s) {moved} got values from the high water mark this write was planned on, and a concurrent "
                "write has since moved it; nothing was committed (the values would repeat). Retry the write",
                read_version=self.read_version,
            )
        marks = high_water_marks(columns, adds, self.storage, self.column_mapping)
        return with_high_water_marks(schema_string, marks) if marks else schema_string

    def _check_physical(self, final: ColumnMapping, snapshot: Snapshot | None) -> None:
        """Refuse to commit files whose physical columns are not the ones the committed schema maps to
        (column mapping changed after the files were written)."""
        planned = self.column_mapping if self.column_mapping is not None else ColumnMapping("none", "")
        data = pa.schema([f for f in self.schema if f.name not in self.partition_columns])
        if not planned.active and not final.active:
            return
        try:
            same = (physical_schema(final.schema_string, data) if final.active else data).equals(
                physical_schema(planned.schema_string, data) if planned.active else data, check_metadata=True
            ) and all(final.physical_name(c) == planned.physical_name(c) for c in self.partition_columns)
        except (KeyError, TypeError, ValueError):
            same = False
        if not same:
            raise CommitConflictError(
                "the table's column mapping changed after this write was planned (a column was renamed, dropped or "
                "added concurrently, or column mapping was enabled), so its files name columns differently; nothing "
                "was committed. Retry the write",
                read_version=snapshot.version if snapshot is not None else None,
            )


def plan_write(
    path: str,
    schema: pa.Schema,
    *,
    mode: str = "append",
    partition_by: list[str] | str | None = None,
    schema_mode: str | None = None,
    configuration: dict[str, str] | None = None,
    storage_options: dict[str, Any] | None = None,
    generated_columns: dict[str, str] | None = None,
    identity_columns: Any = None,
    cluster_by: list[str] | None = None,
    column_defaults: dict[str, str] | None = None,
) -> WritePlan:
    """Check a write of data with ``schema`` against the table and return its plan (see ``WritePlan``).

    ``generated_columns`` ({column: Spark SQL expression}) declares generated columns when the write
    creates the table (or replaces its schema); a column the data lacks gets the expression's type.
    ``path`` may be a registered catalog name (``glue://database/table``)."""
    if not isinstance(schema, pa.Schema):
        raise InvalidArgumentTypeError(f"schema must be a pyarrow.Schema, not {type(schema).__name__}")
    if mode not in MODES:
        raise InvalidArgumentError(f"mode must be one of {MODES}, not {mode!r}")
    if schema_mode not in (None, "merge", "overwrite"):
        raise InvalidArgumentError(f"schema_mode must be None, 'merge' or 'overwrite', not {schema_mode!r}")
    if schema_mode == "overwrite" and mode != "overwrite":
        raise InvalidArgumentError("schema_mode='overwrite' requires mode='overwrite'")
    if isinstance(partition_by, str):
        partition_by = [partition_by]
    if partition_by is not None and (not isinstance(partition_by, (list, tuple)) or not all(isinstance(c, str) for c in partition_by)):
        raise InvalidArgumentTypeError(f"partition_by must be a column name or a list of column names, not {partition_by!r}")
    configuration = validate_new(configuration)
    path, _ = catalog.resolve(path, storage_options)  # a registered glue://database/table name: its location
    storage = Storage(path, storage_options)
    storage.check_atomic_commits()
    snapshot = _load_or_none(storage)
    configuration = iceberg_compat.configure(configuration, None if snapshot is None else snapshot.configuration)
    if snapshot is not None:
        if mode == "error":
            raise TableExistsError(f"a table already exists at {path!r} (version {snapshot.version}); use mode='append' or 'overwrite'")
        snapshot.check_writable({**snapshot.configuration, **configuration})
    if snapshot is not None and mode == "ignore":
        # The table exists: the data is ignored whole, schema and partitioning included.
        return WritePlan(storage.location, storage_options, mode, snapshot.schema, snapshot.partition_columns, None, None, None, snapshot.version, skip=True, snapshot=snapshot)
    creates = snapshot is None or (mode == "overwrite" and schema_mode == "overwrite")
    given = list(schema.names)
    if generated_columns is not None and identity_columns is not None:
        check_not_both(generated_columns, identity_columns)
    if generated_columns is not None:
        if not creates:
            raise InvalidArgumentError("generated_columns are declared when a write creates the table (or replaces its schema with "
                                       "mode='overwrite', schema_mode='overwrite'); this table exists")
        schema = with_generated_columns(schema, generated_columns)
    if identity_columns is not None:
        if not creates:
            raise InvalidArgumentError("identity_columns are declared when a write creates the table (or replaces its schema); this table exists")
        identity_columns = check_identity_declarations(identity_columns)
        # A void column of the data holds the place of an identity column it declares (a CREATE TABLE's
        # column order); it gives no values.
        declared = {n.lower() for n in identity_columns}
        held = {f.name.lower() for f in schema if f.name.lower() in declared and pa.types.is_null(f.type)}
        schema = pa.schema([pa.field(f.name, pa.int64(), True) if f.name.lower() in held else f for f in schema])
        given = [c for c in given if c.lower() not in held]
        lower = {n.lower() for n in schema.names}
        schema = pa.schema(list(schema) + [pa.field(n, pa.int64(), True) for n in identity_columns if n.lower() not in lower])
    if column_defaults is not None:
        if not creates:
            raise InvalidArgumentError("column_defaults are declared when a write creates the table (or replaces its schema); this table exists; "
                                       "Table.set_column_default changes one")
        column_defaults = check_column_defaults(column_defaults, schema, generated_columns, identity_columns)
    existing = snapshot.writer_features if not creates else None
    if existing is not None:
        # Generated and defaulted columns the data lacks are computed, not missing (non-nullable ones too).
        lower = {n.lower() for n in schema.names}
        computed = [snapshot.schema.field(c) for c in sorted(existing.computable) if c.lower() not in lower]
        schema = pa.schema(list(schema) + computed)
    table_schema, parts, _ = plan_schema(schema, snapshot, mode, partition_by, schema_mode)
    if identity_columns is not None:
        check_not_partitioned(identity_columns, parts)
    if cluster_by is not None:
        if not creates:
            raise InvalidArgumentError("cluster_by is declared when a write creates the table (or replaces its schema); this table exists")
        if parts:
            raise InvalidArgumentError("a table is either partitioned or clustered: pass partition_by or cluster_by, not both")
        cluster_by = clustering.check_columns(cluster_by, table_schema, parts, "cluster_by")
    stats_columns = tuple(cluster_by or (clustering.clustering_columns(snapshot) if snapshot is not None and not creates else ()))
    conf = {**(snapshot.configuration if snapshot is not None else {}), **configuration}
    mode_after = TableProperties(conf).column_mapping_mode
    check_column_names(table_schema, mapped=mode_after != "none")
    mapping = None
    if snapshot is not None:
        check_mode_change(snapshot.column_mapping.mode, mode_after)
    if mode_after != "none":
        mapped, _ = mapped_schema(table_schema, conf, [snapshot.metadata.schema_string if snapshot is not None else None])
        mapping = ColumnMapping(mode_after, mapped)
    if creates:
        schema_string = declare_columns(mapping.schema_string if mapping is not None else schema_to_string(table_schema), generated_columns,
                                        identity_columns, column_defaults)
    else:
        schema_string = snapshot.metadata.schema_string
    features = WriterFeatures.of(schema_string, conf)
    if features is not None:
        features = features.for_input(given)
        if creates:
            features.check_expressions(table_schema)
        else:
            features.check_supported(table_schema)  # refuse what lakelog cannot evaluate as Spark before writing
    return WritePlan(
        path=storage.location,
        storage_options=storage_options,
        mode=mode,
        schema=table_schema,
        partition_columns=parts,
        partition_by=list(partition_by) if partition_by is not None else None,
        schema_mode=schema_mode,
        configuration=configuration,
        read_version=snapshot.version if snapshot is not None else -1,
        max_indexed_cols=TableProperties(conf).num_indexed_cols,
        column_mapping=mapping,
        snapshot=snapshot,
        features=features,
        generated_columns=dict(generated_columns) if generated_columns else None,
        identity_columns=identity_columns or None,
        column_defaults=column_defaults or None,
        cluster_by=cluster_by,
        stats_columns=stats_columns,
        partitions_in_files=iceberg_compat.partitions_in_files(conf) or materializes_partitions(
            plan_protocol(table_schema, snapshot.protocol if snapshot else None, conf) or (snapshot.protocol if snapshot else None), conf),
    )


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
    generated_columns: dict[str, str] | None = None,
    identity_columns: Any = None,
    cluster_by: list[str] | None = None,
    column_defaults: dict[str, str] | None = None,
) -> int:
    """Write ``data`` to the table at ``path`` in one atomic commit and return the committed version.

    mode: "append" | "overwrite" | "error" (fail if the table exists) | "ignore" (do nothing if it exists).
    schema_mode: None (schema must match) | "merge" (add new nullable columns) | "overwrite" (with mode="overwrite").
    app_id/app_version: idempotent writes; nothing is committed when the table's txn for app_id is >= app_version.
    """
    app_id, app_version = _check_txn(app_id, app_version)
    check_user_metadata(user_metadata)  # before any file is written
    replayable = isinstance(data, (pa.Table, pa.RecordBatch)) or type(data).__module__.startswith("pandas")
    for attempt in range(IDENTITY_RETRIES + 1):
        data_schema, batches = to_arrow_stream(data)
        plan = plan_write(path, data_schema, mode=mode, partition_by=partition_by, schema_mode=schema_mode, configuration=configuration,
                          storage_options=storage_options, generated_columns=generated_columns, identity_columns=identity_columns,
                          cluster_by=cluster_by, column_defaults=column_defaults)
        if plan.skip:
            return plan.read_version
        if app_id is not None and plan.snapshot is not None:
            txn = plan.snapshot.txns.get(app_id)
            if txn is not None and txn.version >= app_version:
                return plan.read_version
        try:
            return plan.commit(plan.write(batches), app_id=app_id, app_version=app_version, user_metadata=user_metadata)
        except CommitConflictError:
            # A concurrent write drew identity values from the same high water mark: draw again from the new one.
            if not (replayable and plan.features is not None and plan.features.identity) or attempt == IDENTITY_RETRIES:
                raise
            time.sleep(backoff_delay(attempt + 1))  # (jittered: two writers retrying in step would collide again)
    raise AssertionError("unreachable")


IDENTITY_RETRIES = 20


def _check_txn(app_id: Any, app_version: Any) -> tuple[str | None, int | None]:
    if (app_id is None) != (app_version is None):
        raise InvalidArgumentError("pass app_id and app_version together (or neither)")
    if app_id is None:
        return None, None
    return check_app_id(app_id), check_app_version(app_version)


def _load_or_none(storage: Storage) -> Snapshot | None:
    try:
        listing = DeltaLog(storage, explain_missing=False).list_latest()
    except TableNotFoundError:
        return None
    return Snapshot.load(storage, listing=listing)


def discard_files(storage: Storage, files: list[AddFile]) -> None:
    """Delete data files written for a commit that did not happen (best effort: they are unreferenced)."""
    for a in files:
        try:
            storage.delete(storage.join(a.relative_path))
        except (OSError, LakelogError):
            pass

"""``Table``: a committed snapshot of a table, opened at the latest version, a version or a timestamp."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator

from .actions import Metadata, Protocol
from .errors import InvalidArgumentError, UnsupportedFeatureError
from .log.delta_log import DeltaLog
from .log.snapshot import Snapshot, commit_times
from .storage import Storage

if TYPE_CHECKING:  # imported where used: scans, writes and maintenance bring pyarrow.dataset, DuckDB, sqlglot
    import pyarrow as pa
    import pyarrow.dataset as ds


class Table:
    """A lakelog (Delta) table at one version.

    ``version`` or ``timestamp`` (datetime or ISO string; naive means UTC) pick an older version. ``path``
    may be a catalog name, ``glue://database/table``: the table at the location AWS Glue holds for it
    (``path`` is then that location, ``catalog_name`` the name).

    Opening reads the log's listing and JSON commits and checks the protocol and metadata (errors are
    raised here). Where a version checksum file gives the protocol and metadata, the checkpoint is read
    on first use of the files instead (specs/PROTOCOL.md, "Version checksum files"), so ``version``,
    ``history()``, ``schema`` and ``metadata`` need no Parquet reader.
    """

    def __init__(self, path: str, *, version: int | None = None, timestamp: Any = None, storage_options: dict[str, Any] | None = None):
        from . import catalog

        path, name = catalog.resolve(path, storage_options)
        self.catalog_name: str | None = name.uri if name is not None else None
        self.path = str(path)
        self.storage = Storage(self.path, storage_options)
        self._snapshot = Snapshot.load(self.storage, version=version, timestamp=timestamp)

    # ------------------------------------------------------------ state
    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def version(self) -> int:
        return self._snapshot.version

    @property
    def schema(self) -> pa.Schema:
        return self._snapshot.schema

    @property
    def partition_columns(self) -> list[str]:
        return self._snapshot.partition_columns

    @property
    def metadata(self) -> Metadata:
        return self._snapshot.metadata

    @property
    def protocol(self) -> Protocol:
        return self._snapshot.protocol

    def refresh(self) -> "Table":
        """Move to the latest version (reads only the commits added since)."""
        self._snapshot = self._snapshot.updated()
        return self

    # ------------------------------------------------------------ reads
    def files(self, filters: Any = None) -> list[str]:
        """Relative paths (decoded) of the data files that may hold rows matching ``filters``."""
        from .read import scan

        return scan.pruned_files(self._snapshot, filters)

    def to_pyarrow(self, columns: list[str] | None = None, filters: Any = None, *, with_row_tracking: bool = False) -> pa.Table:
        """The rows ``filters`` keeps, as a pyarrow Table of ``columns`` (default: all). ``with_row_tracking``
        (tables with ``delta.enableRowTracking``): also each row's stable ``_row_id`` and ``_row_commit_version``
        (Spark's ``_metadata.row_id`` and ``_metadata.row_commit_version``)."""
        from .read import scan

        return scan.to_table(self._snapshot, columns, filters, with_row_tracking=with_row_tracking)

    def to_pandas(self, columns: list[str] | None = None, filters: Any = None, *, with_row_tracking: bool = False):
        """``to_pyarrow(...).to_pandas()``; variant values become Python objects (dicts, lists, numbers, ...)."""
        from .schema.variant_columns import to_pandas

        return to_pandas(self.to_pyarrow(columns, filters, with_row_tracking=with_row_tracking))

    def to_duckdb(self, columns: list[str] | None = None, filters: Any = None, *, connection: Any = None):
        """The rows ``filters`` keeps as a DuckDB relation (on ``connection``, default DuckDB's default
        connection); variant columns as their JSON text (cast with ``::JSON`` to query into them)."""
        import duckdb

        from .schema.variant_columns import with_json_text

        if connection is not None and not isinstance(connection, duckdb.DuckDBPyConnection):
            raise InvalidArgumentError(f"connection must be a duckdb connection (duckdb.connect()), got {type(connection).__name__}")
        t = with_json_text(self.to_pyarrow(columns, filters))
        return (connection or duckdb).from_arrow(t)

    def to_polars(self, columns: list[str] | None = None, filters: Any = None):
        """The rows ``filters`` keeps as a Polars DataFrame; variant columns as their JSON text
        (``pl.col(c).str.json_decode()`` queries into them). Needs Polars installed."""
        import polars as pl

        from .schema.variant_columns import with_json_text

        return pl.from_arrow(with_json_text(self.to_pyarrow(columns, filters)))

    def read_batches(self, columns: list[str] | None = None, filters: Any = None, *, with_row_tracking: bool = False) -> Iterator[pa.RecordBatch]:
        """The rows ``filters`` keeps as a stream of record batches of ``columns`` (default: all), in bounded
        memory; rows deleted by deletion vectors are never returned. DuckDB and Polars read it as
        ``pa.RecordBatchReader.from_batches(schema, table.read_batches())``. ``with_row_tracking``: as in ``to_pyarrow``."""
        from .read import scan

        snap = self._snapshot
        columns = scan.selected_columns(columns, snap.schema)
        if with_row_tracking:
            return scan.row_tracking_batches(snap, scan.candidate_adds(snap, filters), columns, filters)
        return scan.read_batches(snap.storage, snap.schema, snap.partition_columns, scan.candidate_adds(snap, filters), columns, filters, snap.column_mapping)

    def to_pyarrow_dataset(self, filters: Any = None) -> ds.FileSystemDataset:
        """A pyarrow dataset (partition values as columns), usable from DuckDB and Polars. Tables with
        deletion vectors or column mapping are refused (``UnsupportedFeatureError``): a dataset would
        return deleted rows or physical column names; use ``read_batches`` or ``to_pyarrow`` there."""
        from .read import scan

        return scan.dataset(self._snapshot, filters)

    def changes(self, starting_version: int | None = None, ending_version: int | None = None, *, starting_timestamp: Any = None,
                ending_timestamp: Any = None, columns: list[str] | None = None) -> pa.Table:
        """The change data feed of versions ``starting_version``..``ending_version`` (default: the latest),
        or of the versions committed between two timestamps: the rows each version inserted, deleted or
        updated, with ``_change_type`` (``insert``, ``delete``, ``update_preimage``, ``update_postimage``),
        ``_commit_version`` and ``_commit_timestamp``, as Delta's ``table_changes`` returns them. With
        neither ``starting_version`` nor ``starting_timestamp`` the range starts at version 0; a bound given
        both as a version and as a timestamp is a ``ConflictingBoundsError``. A range whose changes were
        not recorded or are gone is a ``ChangeFeedUnavailableError`` naming the version."""
        import pyarrow as pa

        reader, columns = self._changes(starting_version, ending_version, starting_timestamp, ending_timestamp, columns)
        return pa.Table.from_batches(list(reader.batches(columns)), schema=reader.schema_of(columns))

    def changes_batches(self, starting_version: int | None = None, ending_version: int | None = None, *, starting_timestamp: Any = None,
                        ending_timestamp: Any = None, columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
        """``changes`` as a stream of record batches, one data file's changes at a time (bounded memory)."""
        reader, columns = self._changes(starting_version, ending_version, starting_timestamp, ending_timestamp, columns)
        return reader.batches(columns)

    def _changes(self, starting_version, ending_version, starting_timestamp, ending_timestamp, columns):
        from .read import scan
        from .change_feed.read import ChangeReader, version_range

        start, end = version_range(self.storage, starting_version, ending_version, starting_timestamp, ending_timestamp)
        reader = ChangeReader(self.storage, start, end, self._snapshot)
        return reader, scan.selected_columns(columns, reader.schema)

    def history(self, limit: int | None = None) -> list[dict]:
        """Commit history, newest first: one dict per version with Delta's names, as Spark's
        ``DESCRIBE HISTORY`` shows them.

        ``version``; ``timestamp``: the commit's time as time travel uses it (a UTC ``datetime``: the
        commit's in-commit timestamp on tables that have them, else the commit file's modification time,
        made strictly increasing), which replaces the writer's
        ``commitInfo.timestamp``; ``operation`` and ``operationParameters`` (``{}`` when the commit has
        none, or none that is a JSON object); then the rest of the commit's ``commitInfo`` as written (``readVersion``,
        ``isBlindAppend``, ``operationMetrics``, ``userMetadata``, ``engineInfo``, ``txnId``, ...).
        """
        from .log.history import check_limit, entries

        check_limit(limit)
        listing = self._snapshot.log.whole(self._snapshot.listing)
        return entries(self._snapshot.log, listing, self.version, limit, commit_times(self._snapshot, listing))

    # ------------------------------------------------------------ maintenance
    def checkpoint(self) -> int:
        """Write a checkpoint for this table's version; returns the version.

        A checkpoint is a write: it is refused, like a commit, on a table lakelog cannot write (a
        checkpoint would drop what lakelog does not understand)."""
        from .log.checkpoint import write_checkpoint

        self._snapshot.check_writable()
        return write_checkpoint(self._snapshot)

    def generate_symlink_manifest(self) -> dict:
        """Regenerate every symlink format manifest (``_symlink_format_manifest/``) for the latest version,
        as Delta's ``GENERATE symlink_format_manifest`` does, deleting stale ones; works whether or not
        ``delta.compatibility.symlinkFormatManifest.enabled`` is set. Leaves this Table at the latest version.
        Returns ``{"version", "manifests_written", "files_deleted"}``."""
        from .table_features.symlink_manifest import generate_full

        self.refresh()
        self._snapshot.check_writer_protocol()
        return {"version": self.version, **generate_full(self.storage, self._snapshot)}

    def sync_catalogs(self) -> dict[str, str]:
        """Register the table again in every catalog entry its ``lakelog.catalog.sync`` property lists
        (``glue://db/t``, comma separated), as of the latest version; {entry: "created" | "updated" |
        "unchanged"}. A commit that changes the table's metadata does this itself; this catches up after
        one whose catalog step failed or was interrupted. Errors are raised (``lakelog.errors.CatalogError``)."""
        from . import catalog

        self.refresh()
        return catalog.sync_catalogs(self.storage, self.metadata)

    def register_glue(self, name: str) -> str:
        """Register this table in AWS Glue as ``name`` (``database.table`` or ``glue://database/table``), in
        the forms Athena and Spark read; "created", "updated" or "unchanged". A name registered with another
        location is a ``CatalogConflictError``. AWS settings: the table's S3 storage options, else the
        ``AWS_*`` variables."""
        from . import catalog

        self.refresh()
        return catalog.register_glue(self.storage, catalog.glue_name(name), self.metadata)

    def sync_iceberg(self) -> int:
        """UniForm: write the Iceberg metadata (``metadata/``) of every version since the last one it
        describes, up to the latest, which this Table moves to; returns that version. A commit has this done
        after it returns (``lakelog.iceberg``); this waits for that step, and catches up after a commit whose
        Iceberg step failed or was interrupted. A table
        without UniForm (``delta.universalFormat.enabledFormats``) is an ``UnsupportedFeatureError``. A
        table with ``lakelog.iceberg.catalog`` and ``lakelog.iceberg.table`` then has its Iceberg catalog caught up
        too (``lakelog.errors.CatalogError`` when that fails; ``CatalogConflictError`` when the catalog's table was
        changed by another writer, which is never overwritten)."""
        from . import catalog, iceberg

        self.refresh()
        if not iceberg.enabled(self.metadata.configuration):
            raise UnsupportedFeatureError(
                f"the table at {self.path!r} does not have UniForm on: set delta.universalFormat.enabledFormats = 'iceberg' "
                "(with delta.enableIcebergCompatV2 = true) to have Iceberg metadata written"
            )
        iceberg.settle(self.storage)
        version = iceberg.sync(self.storage)
        catalog.publish_iceberg(self.storage, self.metadata.configuration)
        return version

    # The operations below work on the latest version of the table (whatever version this Table shows)
    # and, when they commit, leave this Table at the latest version. See lakelog.maintenance.

    def vacuum(
        self,
        retention_hours: float | None = None,
        dry_run: bool = True,
        enforce_retention_duration: bool = True,
        *,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[str]:
        """Delete data files that no version inside the retention window needs; return their relative paths.

        The retention defaults to ``delta.deletedFileRetentionDuration`` (7 days); a shorter one raises
        ``RetentionDurationError`` unless ``enforce_retention_duration=False``. ``dry_run`` (the default)
        only lists the files.
        """
        from . import maintenance

        deleted = maintenance.vacuum(
            self.storage,
            retention_hours=retention_hours,
            dry_run=dry_run,
            enforce_retention_duration=enforce_retention_duration,
            progress=progress,
        )
        if not dry_run and deleted:
            self._snapshot = Snapshot.load(self.storage)
        return deleted

    def optimize(
        self,
        target_size: int | None = None,
        filters: Any = None,
        *,
        progress: Callable[[int, int], None] | None = None,
        zorder_by: list[str] | None = None,
    ) -> dict:
        """Compact small files per partition into files near ``target_size`` bytes (default
        ``delta.targetFileSize``, else 100 MiB) in one ``OPTIMIZE`` commit; ``filters`` (DNF tuples on
        partition columns) limit it to some partitions. On a clustered table (``cluster_by``), or with
        ``zorder_by=[columns]``, each partition's files are rewritten in Z-order over those columns, so
        selective reads on them skip most files. Returns metrics (numFilesAdded, numFilesRemoved, ...),
        ``committed`` (False when there was nothing to do) and ``version``."""
        from . import maintenance

        metrics = maintenance.optimize(self.storage, target_size=target_size, filters=filters, progress=progress, zorder_by=zorder_by)
        if metrics["committed"]:
            self._snapshot = Snapshot.load(self.storage)
        return metrics

    def restore(self, version: int | None = None, timestamp: Any = None) -> dict:
        """Commit a new version whose data (and metadata) equal those of ``version``/``timestamp``.

        Without either, the version this Table shows is restored. Returns metrics and the new ``version``.
        """
        if version is None and timestamp is None:
            version = self.version
        from . import maintenance

        metrics = maintenance.restore(self.storage, version=version, timestamp=timestamp)
        self._snapshot = Snapshot.load(self.storage)
        return metrics

    def cleanup_log(self, retention_hours: float | None = None, dry_run: bool = False) -> list[str]:
        """Delete commits and checkpoints older than ``delta.logRetentionDuration`` (default 30 days) that
        the table no longer needs (Delta's Metadata Cleanup); return the deleted file names."""
        from . import maintenance

        self._snapshot.file_set  # this Table's files are replayed before the log files they come from may go
        names = maintenance.cleanup_log(self.storage, retention_hours=retention_hours, dry_run=dry_run)
        if names and not dry_run:
            self._snapshot.listing = DeltaLog(self.storage).list()
        return names

    # ------------------------------------------------------------ row-level changes (lakelog.dml)
    # Like the maintenance operations, these work on the latest version and leave this Table there.
    # Predicates are SQL text (DuckDB's dialect), DNF tuples or pyarrow expressions; rows whose
    # predicate is NULL are not selected.

    def delete(self, predicate: Any = None, *, app_id: str | None = None, app_version: int | None = None, user_metadata: str | None = None) -> dict:
        """Delete the rows ``predicate`` selects (None: every row) in one ``DELETE`` commit.

        Returns ``num_deleted_rows``, ``num_added_files``, ``num_removed_files``, ``num_copied_rows``, ``version``.
        """
        from .dml import delete

        metrics = delete(self.storage, predicate, app_id=app_id, app_version=app_version, user_metadata=user_metadata)
        self.refresh()
        return metrics

    def update(
        self, updates: dict[str, Any], predicate: Any = None, *, app_id: str | None = None, app_version: int | None = None, user_metadata: str | None = None
    ) -> dict:
        """Set columns on the rows ``predicate`` selects (None: every row) in one ``UPDATE`` commit. A str
        value is a SQL expression (``{"x": "x * 2 + 1"}``, ``{"currency": "'EUR'"}``); any other value is a
        literal (``{"amount": 0, "note": None}``). Returns ``num_updated_rows``, ``num_added_files``,
        ``num_removed_files``, ``num_copied_rows``, ``version``."""
        from .dml import update

        metrics = update(self.storage, updates, predicate, app_id=app_id, app_version=app_version, user_metadata=user_metadata)
        self.refresh()
        return metrics

    def merge(
        self,
        source: Any,
        predicate: str,
        source_alias: str = "source",
        target_alias: str = "target",
        *,
        schema_mode: str | None = None,
        app_id: str | None = None,
        app_version: int | None = None,
        user_metadata: str | None = None,
    ):
        """Start a MERGE of ``source`` (Arrow or pandas) into this table on the join ``predicate``; add
        ``when_*`` clauses and call ``execute()``. See ``lakelog.dml.merge.TableMerger``."""
        from .dml import TableMerger

        return TableMerger(
            self, source, predicate, source_alias=source_alias, target_alias=target_alias, schema_mode=schema_mode,
            app_id=app_id, app_version=app_version, user_metadata=user_metadata,
        )

    # ------------------------------------------------------------ schema changes (lakelog.alter.schema_changes)
    # Metadata-only commits on the latest version; they leave this Table there.

    def set_properties(self, props: dict[str, Any]) -> int:
        """Set table properties (``{"delta.appendOnly": True, ...}``) in one commit, upgrading the protocol
        when one needs a table feature (``{"delta.columnMapping.mode": "name"}`` enables column mapping,
        which ``rename_column`` and ``drop_column`` need). Returns the version."""
        from .alter.schema_changes import set_properties

        version = set_properties(self.storage, props)
        self.refresh()
        return version

    def unset_properties(self, keys: list[str], *, if_exists: bool = False) -> int:
        """Remove table properties in one commit (a missing one is an error unless ``if_exists``);
        returns the version."""
        from .alter.schema_changes import unset_properties

        version = unset_properties(self.storage, keys, if_exists)
        self.refresh()
        return version

    def add_columns(self, columns: dict[str, Any]) -> int:
        """Add nullable columns (``{"c": pa.int64(), "s.f": pa.string()}``; ``"s.f"`` is a field of
        struct ``s``) in one metadata-only commit; rows already written read NULL there. A ``pyarrow.Field``
        given instead of a type keeps its collations (``delta.collations`` field metadata: see
        ``lakelog.schema.collations``). Returns the version."""
        from .alter.schema_changes import add_columns

        version = add_columns(self.storage, columns)
        self.refresh()
        return version

    def set_column_default(self, column: str, expression: str | None) -> int:
        """Set (a constant Spark SQL expression, e.g. ``"'new'"``) or drop (None) a top-level column's
        default in one commit: later writes that lack the column store it. Returns the version."""
        from .alter.schema_changes import set_column_default

        version = set_column_default(self.storage, column, expression)
        self.refresh()
        return version

    def drop_not_null(self, column: str) -> int:
        """Let a NOT NULL column (``"a.b"`` for a struct's field) hold NULL, in one commit; returns the version."""
        from .alter.schema_changes import drop_not_null

        version = drop_not_null(self.storage, column)
        self.refresh()
        return version

    def add_constraint(self, constraints: dict[str, str]) -> int:
        """Add CHECK constraints (``{"positive_id": "id > 0"}``, Spark SQL) in one commit, after checking
        every row of the table (``ConstraintViolationError`` naming a violating row otherwise). From then
        on every write checks its new rows (NULL is a violation, as in Delta). Returns the version."""
        from .alter.constraints import add_constraints

        version = add_constraints(self.storage, constraints)
        self.refresh()
        return version

    def drop_constraint(self, name: str, *, if_exists: bool = False) -> int:
        """Drop a CHECK constraint in one commit; returns the version."""
        from .alter.constraints import drop_constraint

        version = drop_constraint(self.storage, name, if_exists)
        self.refresh()
        return version

    def alter_column_type(self, column: str, new_type: str) -> int:
        """Widen a column's type (``"bigint"``, ``"double"``, ``"decimal(12,2)"``, ``"timestamp_ntz"``) in
        one metadata commit, as Delta's type widening does: files are not rewritten, readers cast older
        ones. Only Delta's widenings are accepted (``SchemaMismatchError`` otherwise). Returns the version."""
        from .alter.schema_changes import alter_column_type

        version = alter_column_type(self.storage, column, new_type)
        self.refresh()
        return version

    def rename_column(self, old: str, new: str) -> int:
        """Rename a column (``"a.b"`` names a struct's field) in one metadata-only commit; data files are
        not rewritten. Needs column mapping (``ColumnMappingRequiredError`` otherwise). Returns the version."""
        from .alter.schema_changes import rename_column

        version = rename_column(self.storage, old, new)
        self.refresh()
        return version

    def drop_column(self, name: str) -> int:
        """Drop a column (``"a.b"`` names a struct's field; not a partition column) in one metadata-only
        commit; data files are not rewritten. Needs column mapping. Returns the version."""
        from .alter.schema_changes import drop_column

        version = drop_column(self.storage, name)
        self.refresh()
        return version

    def drop_columns(self, names: list[str]) -> int:
        """Drop several columns (as ``drop_column``) in one metadata-only commit. Returns the version."""
        from .alter.schema_changes import drop_columns

        version = drop_columns(self.storage, names)
        self.refresh()
        return version

    def check(self):
        """Check this table's log and the data files of its current version; returns a ``CheckReport``
        (``.ok``, ``.problems``, ``.warnings``, ``.orphans``). Problems are reported, never raised."""
        from .check import check_table

        return check_table(self.path, version=self.version, storage=self.storage)

    def __repr__(self) -> str:
        return f"Table({self.path!r}, version={self.version})"


def read_table(
    path: str,
    *,
    version: int | None = None,
    timestamp: Any = None,
    columns: list[str] | None = None,
    filters: Any = None,
    storage_options: dict[str, Any] | None = None,
    with_row_tracking: bool = False,
) -> pa.Table:
    """Read the committed snapshot (latest, or at ``version``/``timestamp``) as a pyarrow Table;
    ``with_row_tracking``: also ``_row_id`` and ``_row_commit_version`` (see ``Table.to_pyarrow``)."""
    return Table(path, version=version, timestamp=timestamp, storage_options=storage_options).to_pyarrow(columns, filters, with_row_tracking=with_row_tracking)

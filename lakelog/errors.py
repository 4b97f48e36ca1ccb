"""Typed errors raised by lakelog. Every message says what was wrong and what to do."""

from __future__ import annotations


class LakelogError(Exception):
    """Base class of every error lakelog raises on purpose."""


class TableNotFoundError(LakelogError):
    """No table (no ``_delta_log`` with commits) at the given path."""


class TableExistsError(LakelogError):
    """A table already exists where a new one was to be created."""


class CommitConflictError(LakelogError):
    """A concurrent commit made this transaction's commit unsafe; nothing was committed."""

    def __init__(self, message: str, *, read_version: int | None = None, winning_version: int | None = None):
        super().__init__(message)
        self.read_version = read_version
        self.winning_version = winning_version


class SchemaMismatchError(LakelogError):
    """The data's schema does not fit the table's schema. When values of one type cannot be stored in
    a column of another without loss, ``path`` names the column (``s.a`` for a struct's field,
    ``l.element``, ``m.key``, ``m.value``) and ``data_type`` and ``table_type`` are the two Arrow types
    (otherwise they are None)."""

    def __init__(self, message: str, *, path: str | None = None, data_type: object = None, table_type: object = None):
        super().__init__(message)
        self.path, self.data_type, self.table_type = path, data_type, table_type


class InvalidFilterError(SchemaMismatchError, ValueError):
    """A read filter is malformed: not DNF tuples or an expression, an unknown column or operator, or a
    value that cannot be compared with its column's type."""


class CorruptLogError(LakelogError):
    """A log file is missing, truncated or unparseable (an incomplete log file)."""


class PartitionValueError(CorruptLogError, ValueError):
    """A partition value is not in a form the Delta protocol allows for its column's type."""


class UnsupportedFeatureError(LakelogError):
    """The table uses a protocol version or table feature lakelog does not implement."""


class ColumnMappingRequiredError(UnsupportedFeatureError):
    """A schema change (rename or drop of a column) needs column mapping, which the table does not use."""


class TableWithoutSchemaError(UnsupportedFeatureError):
    """The table's metadata has no schema yet (a Delta Live Tables table before its first update)."""


class VersionNotFoundError(LakelogError):
    """The requested version or timestamp is not reconstructable from the log."""


class StorageError(LakelogError):
    """The storage backend cannot give the guarantees a commit needs, or cannot be used at all."""


class StorageUnavailableError(StorageError):
    """An object store's endpoint could not be reached, on every attempt a request was allowed
    (storage option ``max_retries``). ``endpoint``, ``operation`` and ``path`` say where and what;
    nothing is known to be wrong with the table. A write that fails so may or may not have committed
    its last version: open the table to see (a retried write with ``app_id``/``app_version`` is
    committed once)."""

    def __init__(self, message: str, *, endpoint: str | None = None, operation: str | None = None, path: str | None = None):
        super().__init__(message)
        self.endpoint, self.operation, self.path = endpoint, operation, path


class BucketNotFoundError(StorageError):
    """A write to an object store failed because the table's bucket (Azure: container), ``bucket``,
    does not exist; lakelog never creates one. Nothing was committed."""

    def __init__(self, message: str, *, bucket: str | None = None):
        super().__init__(message)
        self.bucket = bucket


class StorageTimeoutError(StorageUnavailableError):
    """An object store's endpoint accepted requests but did not answer within the storage option
    ``timeout`` (or let no connection be made within ``connect_timeout``), on every attempt."""


class InvalidPathError(CorruptLogError):
    """A log action names a file outside the table root (absolute, with a scheme, or escaping with ``..``)."""


class DataFileError(CorruptLogError):
    """A data file named by the log cannot be read; ``paths`` are the table-relative paths concerned."""

    def __init__(self, message: str, paths: list[str] | None = None):
        super().__init__(message)
        self.paths = list(paths or [])


class MissingDataFileError(DataFileError):
    """A data file named by the log does not exist."""


class CorruptDataFileError(DataFileError):
    """A data file named by the log exists but is not readable Parquet (truncated or overwritten)."""


class IncompatibleDataFileError(DataFileError):
    """A data file named by the log holds a column that cannot be read as the table's type without
    losing data (another type, or nanosecond timestamps the table's microseconds cannot represent)."""


class DeletionVectorError(DataFileError):
    """A data file's deletion vector cannot be read, so its live rows are unknown and it is not read.
    ``paths``: the deletion vector's file (table-relative, or the absolute path it names; ``<inline>``
    for an inline one) and the data file; ``offset``: where the DV was expected in its file."""

    def __init__(self, message: str, paths: list[str] | None = None, offset: int | None = None):
        super().__init__(message, paths)
        self.offset = offset


class MissingDeletionVectorError(DeletionVectorError):
    """A deletion vector's file does not exist."""


class CorruptDeletionVectorError(DeletionVectorError):
    """A deletion vector is damaged: truncated, a wrong size, checksum, magic number or cardinality."""


class InvalidArgumentError(LakelogError, ValueError):
    """An argument lakelog cannot use: the wrong type or value (a malformed table URL, an unusable
    option value); the message names it and the accepted form."""


class InvalidArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument of a type lakelog cannot use (also a ``TypeError``); the message names the accepted types."""


class InvalidVersionError(InvalidArgumentError, TypeError):
    """A table version that is not an integer (``1.9``, ``"3"``, ``True``)."""


class InvalidTimestampError(InvalidArgumentError):
    """A time-travel timestamp lakelog cannot read; the message lists the accepted forms."""


class ConflictingBoundsError(InvalidArgumentError):
    """A range of versions given one of its bounds twice, as a version and as a timestamp (the change
    data feed's ``starting_version`` and ``starting_timestamp``, or its ending pair; Spark's
    ``startingVersion``/``startingTimestamp`` options): as Delta (``DELTA_MULTIPLE_CDC_BOUNDARY``),
    refused rather than one silently ignored. ``bounds`` lists the conflicting pairs of names."""

    def __init__(self, message: str, bounds: list[tuple[str, str]] | None = None):
        super().__init__(message)
        self.bounds = list(bounds or [])


class ConvertError(LakelogError):
    """``convert``: the source cannot be converted as it is (layout, unreadable or unsupported Parquet
    files, nothing to convert)."""


class NanosecondTimestampError(ConvertError):
    """``convert``: a Parquet file stores nanosecond timestamps (Parquet ``TIMESTAMP(NANOS)``, pandas'
    default), which Delta tables cannot hold; ``path`` and ``columns`` name them."""

    def __init__(self, message: str, path: str | None = None, columns: list[str] | None = None):
        super().__init__(message)
        self.path = path
        self.columns = list(columns or [])


class RetentionDurationError(LakelogError, ValueError):
    """A vacuum retention shorter than the table's ``delta.deletedFileRetentionDuration`` was refused."""


class PredicateError(LakelogError, ValueError):
    """A SQL predicate or expression is malformed, names an unknown column or has a type error."""


class UnsupportedExpressionError(PredicateError, UnsupportedFeatureError):
    """A table's CHECK constraint, invariant, generation expression or column default (Spark SQL) uses a
    function, operator or cast lakelog cannot evaluate exactly as Spark does (see
    specs/spark-expressions.md). ``construct`` names it and ``what`` the constraint or column; raised
    when rows are written (reading the table is unaffected). Also a ``PredicateError`` (an expression
    lakelog cannot use) and an ``UnsupportedFeatureError`` (a table lakelog cannot write)."""

    def __init__(self, message: str, construct: str | None = None, what: str | None = None):
        super().__init__(message)
        self.construct = construct
        self.what = what


class CollationMismatchError(PredicateError):
    """An expression compares (or searches) strings of two different collations, which Spark refuses:
    ``error_class`` is Spark's, ``COLLATION_MISMATCH.IMPLICIT`` for two columns (Spark 4.1 and later
    name it ``INDETERMINATE_COLLATION_IN_EXPRESSION``) and ``COLLATION_MISMATCH.EXPLICIT`` for two
    different COLLATE clauses. Nothing was written; COLLATE one side to say which collation to use."""

    def __init__(self, message: str, error_class: str | None = None):
        super().__init__(message)
        self.error_class = error_class


class PredicateViolationError(LakelogError):
    """Rows of the data do not satisfy the predicate they must satisfy (a predicate overwrite)."""


class MultipleSourceMatchesError(LakelogError):
    """A merge matched one target row with several source rows (Delta refuses this); nothing was committed."""


class InvalidTablePropertyError(LakelogError, ValueError):
    """A table property (``metaData.configuration``) is unknown or its value does not parse.

    ``key`` and ``value`` name the property; raised when the property is set, and when an operation
    needs a property that another writer stored in a form lakelog cannot read.
    """

    def __init__(self, message: str, key: str | None = None, value: object = None):
        super().__init__(message)
        self.key = key
        self.value = value


class ConstraintViolationError(LakelogError):
    """Rows being written break a CHECK constraint or a column invariant of the table; nothing was committed.

    ``constraint`` names it, ``expression`` is its SQL text and ``row`` one offending row (a dict).
    """

    def __init__(self, message: str, constraint: str | None = None, expression: str | None = None, row: dict | None = None):
        super().__init__(message)
        self.constraint = constraint
        self.expression = expression
        self.row = row


class ExpressionEvaluationError(ConstraintViolationError):
    """A table's CHECK constraint, invariant, generation expression or default fails to evaluate for a row
    being written (an integer overflow, a division by zero, an invalid cast: what Spark in ANSI mode
    fails the write for); nothing was committed. ``row`` is one such row."""


class GeneratedColumnError(ConstraintViolationError):
    """A value given for a generated column differs from what its generation expression computes."""


class IdentityColumnError(SchemaMismatchError):
    """A write gives values to an identity column the table generates: an update of any identity column
    (Delta's ``DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED``), or explicit values for one that does not
    allow them (``delta.identity.allowExplicitInsert`` false: ``DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED``);
    nothing was committed. ``column`` names it and ``error_class`` is Delta's error class."""

    def __init__(self, message: str, column: str | None = None, error_class: str | None = None):
        super().__init__(message)
        self.column = column
        self.error_class = error_class


class IdentityOverflowError(LakelogError, OverflowError):
    """An identity column's next value, or its high water mark, would leave the bigint (long) range;
    nothing was committed. ``column`` names it."""

    def __init__(self, message: str, column: str | None = None):
        super().__init__(message)
        self.column = column


class ChangeFeedUnavailableError(LakelogError):
    """The change data feed of a version range cannot be read (the feed was off at a version in it, a commit
    was cleaned up, or a change file was vacuumed); the message names the version and why."""


class IcebergCompatError(LakelogError):
    """A commit would break the Iceberg compatibility (``icebergCompatV1``/``V2``) the table has on, or
    turning it on needs something the table lacks; nothing was committed. The message says what to do."""


class IcebergSyncError(LakelogError):
    """UniForm: commits landed but the Iceberg step after them failed (or, ``IcebergSyncTimeoutError``, had
    not finished when a flush stopped waiting). Raised by ``lakelog.iceberg.flush()``; the commits stand and
    the next commit, ``Table.sync_iceberg()`` or ``lakelog uniform PATH`` catches the Iceberg metadata up.
    ``errors``: {table location: the step's exception}."""

    committed = True  # the Delta commits stand

    def __init__(self, message: str, errors: dict[str, BaseException] | None = None):
        super().__init__(message)
        self.errors = dict(errors or {})


class IcebergSyncTimeoutError(IcebergSyncError, TimeoutError):
    """``lakelog.iceberg.flush(timeout=...)`` stopped waiting before the pending Iceberg steps finished; they
    go on in the background."""


class IcebergSyncWarning(UserWarning):
    """UniForm: commit ``version`` landed, but its Iceberg step failed (``error``); the commit stands and the
    next commit, ``Table.sync_iceberg()`` or ``lakelog uniform PATH`` catches the Iceberg metadata up."""

    def __init__(self, message: str, version: int | None = None, error: BaseException | None = None):
        super().__init__(message)
        self.version = version
        self.error = error


class SymlinkManifestError(LakelogError):
    """A commit landed (``version``) but the symlink format manifests could not be updated after it: the
    commit stands, the manifests are stale until ``Table.generate_symlink_manifest()`` regenerates them."""

    committed = True  # write paths must not treat the commit as failed (their new files are referenced)

    def __init__(self, message: str, version: int | None = None):
        super().__init__(message)
        self.version = version


class VariantError(LakelogError, ValueError):
    """A Variant value cannot be built or read: invalid JSON text (as Spark's ``parse_json`` refuses it),
    a duplicate object key, a Python value with no Variant type, or metadata/value bytes that are not a
    valid Parquet Variant encoding (truncated, a bad header, an unknown type id)."""


class CatalogError(LakelogError):
    """A catalog (AWS Glue, an Iceberg catalog) refused or failed a request; ``catalog`` names the entry
    (``glue://db/t``, ``<catalog>:<namespace.table>``). Raised before a write commits, or by an explicit
    registration or catch-up: a failure after a commit never undoes it (``CatalogSyncWarning``)."""

    def __init__(self, message: str, *, catalog: str | None = None):
        super().__init__(message)
        self.catalog = catalog


class CatalogTableNotFoundError(CatalogError, TableNotFoundError):
    """A catalog name (``glue://db/t``) names no table, or its database does not exist."""


class CatalogConflictError(CatalogError):
    """A catalog entry is not what lakelog would make it without overwriting someone else's: a name
    registered with another location, or an Iceberg catalog table that is another table or whose
    pointer another writer advanced. Nothing was overwritten."""


class CatalogUnavailableError(CatalogError):
    """A catalog's endpoint could not be reached or did not answer within the request policy
    (``timeout``, ``connect_timeout``, ``max_retries``)."""


class CatalogSyncWarning(UserWarning):
    """A commit landed (``version``) but keeping a catalog in step after it failed; the commit stands,
    and ``Table.sync_catalogs()`` (Glue; ``lakelog register PATH``) or ``Table.sync_iceberg()`` (Iceberg
    catalogs; ``lakelog uniform PATH``) catches the catalog up."""

    def __init__(self, message: str, version: int | None = None, error: BaseException | None = None):
        super().__init__(message)
        self.version = version
        self.error = error

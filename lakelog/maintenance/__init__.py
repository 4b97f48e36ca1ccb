"""Table maintenance: vacuum, optimize (bin-packing compaction), restore and log cleanup.

Every operation works on the latest version of the table and commits through
``lakelog.transaction.Transaction``, so the usual conflict rules apply.

Modules: ``vacuum`` (its rules are in that module's docstring), ``optimize``, ``restore``, ``commits``
(the commitInfo of maintenance operations). Log cleanup follows the Delta protocol's "Metadata Cleanup" (see ``cleanup_log``).
"""

from ..errors import CommitConflictError, CorruptLogError, InvalidArgumentError, LakelogError, RetentionDurationError, SchemaMismatchError, VersionNotFoundError
from ..log.cleanup import HOUR_MS, cleanup_expired_logs, cleanup_log, expired_log_files, log_retention_ms
from ..table_features.properties import DEFAULT_LOG_RETENTION_MS
from .commits import Progress
from .optimize import DEFAULT_TARGET_FILE_SIZE, optimize, plan_bins, target_file_size
from .restore import commit_time, restore
from .vacuum import vacuum

# The errors, log cleanup and retention names stay importable from here, where they were first defined.
__all__ = [
    "DEFAULT_LOG_RETENTION_MS",
    "DEFAULT_TARGET_FILE_SIZE",
    "HOUR_MS",
    "CommitConflictError",
    "CorruptLogError",
    "InvalidArgumentError",
    "LakelogError",
    "RetentionDurationError",
    "SchemaMismatchError",
    "VersionNotFoundError",
    "expired_log_files",
    "log_retention_ms",
    "Progress",
    "cleanup_expired_logs",
    "cleanup_log",
    "commit_time",
    "optimize",
    "plan_bins",
    "restore",
    "target_file_size",
    "vacuum",
]

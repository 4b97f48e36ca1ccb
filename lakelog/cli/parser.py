"""The ``lakelog`` argument parser: commands, options and the value types they accept."""

from __future__ import annotations

import argparse
import re
import textwrap
from typing import Any, Callable
from .commands import (
    cmd_changes,
    cmd_check,
    cmd_checkpoint,
    cmd_cleanup_log,
    cmd_convert,
    cmd_delete,
    cmd_describe,
    cmd_files,
    cmd_generate_manifest,
    cmd_history,
    cmd_merge,
    cmd_optimize,
    cmd_lookup,
    cmd_properties,
    cmd_register,
    cmd_restore,
    cmd_show,
    cmd_uniform,
    cmd_update,
    cmd_vacuum,
    cmd_write,
)
from .output import EXIT_USAGE
from .table_definition import cmd_add_constraint, cmd_alter_column_type, cmd_drop_column, cmd_drop_constraint, cmd_rename_column


EPILOG = """\
exit codes:
  0    success
  1    the operation failed or found problems (commit conflict, corrupt log, unsupported
       table feature, storage error, 'check' found issues)
  2    bad usage or bad input (unknown option, no table at PATH, unknown version, missing
       input file, invalid value, data that does not fit the table, retention too short)
  130  interrupted

Errors are printed as one line on stderr; add --debug for the traceback.
Every command takes --json (machine-readable output on stdout) and
--storage-option KEY=VALUE (repeatable; passed to fsspec, e.g. endpoint_url=...).
"""


def _storage_option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
               "t": 1000**4, "tb": 1000**4, "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
               "ki": 1024, "mi": 1024**2, "gi": 1024**3, "ti": 1024**4}


def _property(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE such as delta.enableDeletionVectors=true, got {text!r}")
    return key.strip(), value.strip()


def _size(text: str) -> int:
    m = _SIZE_RE.match(text)
    unit = (m.group(2) or "").lower() if m else None
    if not m or unit not in _SIZE_UNITS:
        raise argparse.ArgumentTypeError(f"expected a size such as 134217728, 128MiB or 100MB, got {text!r}")
    n = int(float(m.group(1)) * _SIZE_UNITS[unit])
    if n <= 0:
        raise argparse.ArgumentTypeError(f"size must be positive, got {text!r}")
    return n


def _nonneg(kind: type, what: str) -> Callable[[str], Any]:
    """An argparse type: ``kind(text)``, refused unless it is a number >= 0 (NaN refused too)."""

    def parse(text: str):
        try:
            n = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if n < 0 or n != n:
            raise argparse.ArgumentTypeError(f"expected zero or a positive number, got {text!r}")
        return n

    return parse


def _timestamp(text: str) -> str:
    """An argparse type: a time lakelog can travel to (kept as text; naive means UTC)."""
    from ..errors import InvalidTimestampError
    from ..log.versions import to_epoch_ms

    try:
        to_epoch_ms(text)
    except InvalidTimestampError:
        raise argparse.ArgumentTypeError(
            f"expected an ISO-8601 time such as 2026-11-22, 2026-11-22T10:00:00Z or '2026-11-22 10:00:00+01:00' "
            f"(no offset means UTC), got {text!r}"
        ) from None
    return text


_nonneg_int = _nonneg(int, "a whole number")


class _Extend(argparse.Action):
    """One value per use (``--opt a,b`` or ``--opt a --opt b``), collected in a list: an option that
    took every following word would swallow the positional arguments after it."""

    def __call__(self, parser, namespace, values, option_string=None):
        items = list(getattr(namespace, self.dest, None) or [])
        items.append(values)
        setattr(namespace, self.dest, items)


_nonneg_float = _nonneg(float, "a number")


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line on stderr (exit code 2), pointing at --help."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {' '.join(message.split())} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    common = _Parser(add_help=False)
    g = common.add_argument_group("common options")
    g.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable JSON output on stdout")
    g.add_argument(
        "--storage-option", dest="storage_option", metavar="KEY=VALUE", action="append", type=_storage_option,
        default=argparse.SUPPRESS, help="storage option for fsspec or lakelog (repeatable)",
    )
    g.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show the traceback of errors")

    parser = _Parser(
        prog="lakelog",
        description="Inspect, write and maintain lakelog (Delta Lake) tables.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"lakelog {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, fn, help_text: str, description: str | None = None) -> argparse.ArgumentParser:
        p = sub.add_parser(
            name, help=help_text, description=textwrap.fill(description or help_text, 79), parents=[common], epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.set_defaults(func=fn)
        p.add_argument("path", metavar="PATH", help="table location (local path or URL: file://, s3://, memory://) or AWS Glue name (glue://database/table)")
        return p

    def time_travel(p: argparse.ArgumentParser) -> None:
        m = p.add_mutually_exclusive_group()
        m.add_argument("--version", type=_nonneg_int, metavar="N", help="read version N")
        m.add_argument("--timestamp", type=_timestamp, metavar="T", help="read the latest version at or before T (ISO-8601; naive means UTC)")

    p = add("show", cmd_show, "print rows of the table")
    time_travel(p)
    p.add_argument("--limit", type=_nonneg_int, default=20, metavar="N", help="rows to print (default 20; 0 = all)")
    p.add_argument("--columns", action=_Extend, metavar="COL[,COL...]", help="columns to print (comma separated or repeated)")

    p = add("describe", cmd_describe, "schema, partitioning, properties, protocol, size and file count")
    time_travel(p)

    p = add(
        "changes", cmd_changes, "the change data feed: rows inserted, deleted and updated by a range of versions",
        "Print (or write to Parquet with --output) the rows versions --from..--to changed, with _change_type, "
        "_commit_version and _commit_timestamp (tables with delta.enableChangeDataFeed=true).",
    )
    p.add_argument("--from", dest="start", type=_nonneg_int, default=0, metavar="V", help="first version (default 0)")
    p.add_argument("--to", dest="end", type=_nonneg_int, metavar="V", help="last version (default: the latest)")
    p.add_argument("--columns", action=_Extend, metavar="COL[,COL...]", help="data columns to include (comma separated or repeated)")
    p.add_argument("--limit", type=_nonneg_int, default=20, metavar="N", help="rows to print (default 20; 0 = all)")
    p.add_argument("--output", metavar="FILE", help="write every change row to this Parquet file instead of printing")

    p = add("history", cmd_history, "commit history, newest first")
    p.add_argument("--limit", type=_nonneg_int, default=0, metavar="N", help="newest N commits only")

    p = add("files", cmd_files, "data files of a version (path, size, records, partition values)")
    time_travel(p)

    add("checkpoint", cmd_checkpoint, "write a checkpoint for the latest version")
    add(
        "generate-manifest", cmd_generate_manifest, "regenerate the symlink format manifests (_symlink_format_manifest/)",
        "Write the Hive-style manifest of every partition of the latest version and delete stale ones, as Delta's "
        "GENERATE symlink_format_manifest does (tables with delta.compatibility.symlinkFormatManifest.enabled=true "
        "keep them current after every commit; this repairs them after a failure).",
    )
    add(
        "uniform", cmd_uniform, "write the Iceberg metadata (UniForm) up to the latest version",
        "On a table with delta.universalFormat.enabledFormats=iceberg, write the Iceberg snapshots of every "
        "version since the last one metadata/ describes (each commit does this itself; this catches up after "
        "one whose Iceberg step failed or was interrupted).",
    )

    p = add(
        "register", cmd_register, "register the table in AWS Glue (Athena's and Spark's forms)",
        "Create or update the AWS Glue entry --glue database.table for the table at PATH, in the forms Athena "
        "(table_type=DELTA) and Spark (provider delta, path) read; without --glue, every entry the table's "
        "lakelog.catalog.sync property lists (catching them up after a commit whose catalog step failed). An "
        "entry registered with another location is an error and stays as it is. AWS settings: --storage-option "
        "(delta-rs' names) or the AWS_* variables (AWS_ENDPOINT_URL_GLUE or AWS_ENDPOINT_URL for the endpoint).",
    )
    p.add_argument("--glue", metavar="DATABASE.TABLE", help="the Glue entry to create or update")
    p = add(
        "lookup", cmd_lookup, "print the location AWS Glue holds for a table name",
        "Print the location of the AWS Glue table PATH (database.table or glue://database/table); every command "
        "also takes glue://database/table as its PATH.",
    )
    p = add(
        "vacuum", cmd_vacuum, "delete data files no version inside the retention window needs",
        "Delete data files that the latest version does not reference and that were removed (or, for files "
        "never committed, last modified) longer ago than the retention (delta.deletedFileRetentionDuration, "
        "default 7 days). A dry run (the default) only lists them.",
    )
    p.add_argument("--retain-hours", type=_nonneg_float, metavar="H", help="retention in hours (default: the table's)")
    p.add_argument("--dry-run", action=argparse.BooleanOptionalAction, default=True, help="only list the files (default: yes)")
    p.add_argument(
        "--no-enforce-retention", dest="enforce_retention", action="store_false",
        help="allow a retention shorter than the table's minimum (unsafe while readers or writers run)",
    )

    p = add(
        "optimize", cmd_optimize, "compact small files into larger ones (bin packing per partition)",
        "Rewrite small files of each partition into files near the target size, in one OPTIMIZE commit "
        "(dataChange=false: the data is unchanged at every version).",
    )
    p.add_argument("--target-size", type=_size, metavar="SIZE", help="target file size, e.g. 128MiB (default: delta.targetFileSize, else 100MiB)")
    p.add_argument("--partition", action="append", metavar="COL=VALUE", help="only this partition (repeatable: all must match)")
    p.add_argument("--zorder-by", action=_Extend, metavar="COL[,COL...]", help="rewrite each partition's files in Z-order over these columns")

    p = add("restore", cmd_restore, "commit a new version with the data of an older version")
    p.add_argument("restore_version", nargs="?", type=_nonneg_int, metavar="VERSION", help="version to restore")
    p.add_argument("--timestamp", type=_timestamp, metavar="T", help="restore the latest version at or before T instead")

    p = add(
        "cleanup-log", cmd_cleanup_log, "delete expired commits and checkpoints from _delta_log",
        "Delete commits and checkpoints older than delta.logRetentionDuration (default 30 days), keeping the "
        "newest checkpoint before the cutoff and everything after it (Delta's Metadata Cleanup).",
    )
    p.add_argument("--retain-hours", type=_nonneg_float, metavar="H", help="exact retention in hours (default: the table's, cut at midnight UTC)")
    p.add_argument("--dry-run", action=argparse.BooleanOptionalAction, default=False, help="only list the files")

    p = add("write", cmd_write, "write CSV, Parquet or newline-delimited JSON files into the table (one commit)")
    p.add_argument("files", nargs="+", metavar="FILE", help="input files (format from the extension, or --format)")
    p.add_argument("--mode", choices=["append", "overwrite", "error", "ignore"], help="default: append (overwrite with --replace-where)")
    p.add_argument(
        "--replace-where", metavar="SQL",
        help="overwrite only the rows this SQL predicate selects (every input row must satisfy it), e.g. \"day >= '2026-01-01'\"",
    )
    p.add_argument(
        "--set", dest="properties", action="append", type=_property, metavar="KEY=VALUE",
        help="table property to set in the same commit, e.g. delta.enableDeletionVectors=true (repeatable)",
    )
    p.add_argument("--partition-by", action=_Extend, metavar="COL[,COL...]", help="partition columns of a new table (comma separated or repeated)")
    p.add_argument("--generated", action="append", type=_property, metavar="COL=EXPR",
                   help="a generated column of a new table, e.g. day='CAST(ts AS DATE)' (repeatable)")
    p.add_argument("--identity", action=_Extend, metavar="COL[,COL...]", help="identity (bigint) columns of a new table")
    p.add_argument("--cluster-by", action=_Extend, metavar="COL[,COL...]", help="clustering columns of a new table (optimize clusters by them)")
    p.add_argument("--schema-mode", choices=["merge", "overwrite"], help="merge: add new columns; overwrite (with --mode overwrite): replace the schema")
    p.add_argument("--format", choices=["csv", "parquet", "json"], help="input format (default: from the file extension)")
    p.add_argument("--delimiter", metavar="CHAR", help="CSV delimiter (default ',', tab for .tsv)")
    p.add_argument(
        "--location", metavar="URL",
        help="with an AWS Glue name PATH (glue://database/table) Glue does not know yet: create the table at URL and register it; "
             "a registered name must have this location",
    )

    p = add(
        "delete", cmd_delete, "delete the rows a SQL predicate selects (one DELETE commit)",
        "Delete the rows for which the SQL predicate is true (rows where it is NULL stay), rewriting only the "
        "files that hold such rows, in one DELETE commit. Prints the metrics.",
    )
    p.add_argument("--where", metavar="SQL", help="SQL predicate, e.g. \"day < '2026-01-01' and status = 'void'\"")
    p.add_argument("--all", dest="all_rows", action="store_true", help="delete every row (instead of --where)")

    p = add(
        "update", cmd_update, "set columns to SQL expressions on the rows a predicate selects (one UPDATE commit)",
        "Set columns to SQL expressions (evaluated per row, cast to the column's type) on the rows for which "
        "the predicate is true, in one UPDATE commit. Prints the metrics.",
    )
    p.add_argument("--set", action="append", required=True, metavar="COL=EXPR", help="column and SQL expression, e.g. x='x * 2' (repeatable)")
    p.add_argument("--where", metavar="SQL", help="SQL predicate choosing the rows")
    p.add_argument("--all", dest="all_rows", action="store_true", help="update every row (instead of --where)")

    p = add(
        "merge", cmd_merge, "merge rows of CSV, Parquet or JSON files into the table (one MERGE commit)",
        "Match the input rows (alias 'source') with the table's rows (alias 'target') on a SQL join predicate "
        "and apply the chosen clauses, in one MERGE commit. Prints the metrics.",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="input files (format from the extension, or --format)")
    p.add_argument("--on", required=True, metavar="SQL", help="join predicate, e.g. \"target.id = source.id\"")
    p.add_argument("--when-matched", choices=["update-all", "delete"], help="what to do with matched target rows")
    p.add_argument("--when-matched-update", dest="matched_set", action="append", metavar="COL=EXPR",
                   help="set a column of matched rows to a SQL expression over target and source (repeatable)")
    p.add_argument("--matched-condition", metavar="SQL", help="apply the matched clause only where this holds")
    p.add_argument("--when-not-matched", choices=["insert-all"], help="insert source rows no target row matches")
    p.add_argument("--not-matched-condition", metavar="SQL", help="insert only where this holds")
    p.add_argument("--when-not-matched-by-source", choices=["delete"], help="delete target rows no source row matches")
    p.add_argument("--not-matched-by-source-condition", metavar="SQL", help="delete only where this holds")
    p.add_argument("--schema-mode", choices=["merge"], help="merge: add the source's new columns to the table")
    p.add_argument("--format", choices=["csv", "parquet", "json"], help="input format (default: from the file extension)")
    p.add_argument("--delimiter", metavar="CHAR", help="CSV delimiter (default ',', tab for .tsv)")

    p = add("rename-column", cmd_rename_column, "rename a column (metadata only; needs column mapping)")
    p.add_argument("old", metavar="OLD", help="column to rename (a.b names a struct's field)")
    p.add_argument("new", metavar="NEW", help="its new name")

    p = add("drop-column", cmd_drop_column, "drop a column (metadata only; needs column mapping)")
    p.add_argument("name", metavar="COLUMN", help="column to drop (a.b names a struct's field)")

    p = add("alter-column-type", cmd_alter_column_type, "widen a column's type as Delta's type widening does (metadata only)")
    p.add_argument("column", metavar="COLUMN", help="column to widen (a.b names a struct's field)")
    p.add_argument("type", metavar="TYPE", help="its new type: bigint, double, decimal(12,2), timestamp_ntz, ...")

    p = add(
        "add-constraint", cmd_add_constraint, "add a CHECK constraint after checking every row (one commit)",
        "Add a CHECK constraint (a Spark SQL boolean expression) once every row of the table satisfies it; from "
        "then on every write checks its new rows (NULL is a violation, as in Delta).",
    )
    p.add_argument("name", metavar="NAME", help="constraint name")
    p.add_argument("expression", metavar="EXPR", help="Spark SQL expression, e.g. \"amount > 0\"")

    p = add("drop-constraint", cmd_drop_constraint, "drop a CHECK constraint (one commit)")
    p.add_argument("name", metavar="NAME", help="constraint name")
    p.add_argument("--if-exists", action="store_true", help="do nothing when there is no such constraint")

    p = add(
        "properties", cmd_properties, "print the table's properties, or set some (one commit)",
        "Without --set, print the table properties. With --set KEY=VALUE (repeatable), set them in one commit, "
        "upgrading the protocol when a property needs a table feature (e.g. delta.columnMapping.mode=name, "
        "delta.enableDeletionVectors=true, delta.enableChangeDataFeed=true).",
    )
    p.add_argument("--set", dest="properties", action="append", type=_property, metavar="KEY=VALUE", help="property to set (repeatable)")

    add("check", cmd_check, "check the table's log and data files for problems (exit 1 when any are found)")

    p = add("convert", cmd_convert, "turn a directory of Parquet files into a lakelog table")
    m = p.add_mutually_exclusive_group()
    m.add_argument(
        "--partition-by", action=_Extend, metavar="COL[:TYPE][,...]",
        help="partition columns of the k=v directory layout, optionally typed (e.g. day:date,region); "
        "omitted: inferred from the directories",
    )
    m.add_argument("--not-partitioned", action="store_true", help="the k=v directories are not partitions: read every file as it is")
    return parser

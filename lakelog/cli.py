"""The ``lakelog`` command line: inspect, write and maintain tables.

Human-readable output by default, ``--json`` for scripts. Exit codes (also in ``lakelog --help``):
0 success; 1 the operation failed or found problems (a conflict, a corrupt log, ``check`` found
issues); 2 bad usage or bad input (unknown option, missing table, version or input file, invalid value,
data that does not fit the table); 130 interrupted. Errors are one line on stderr (``--debug`` adds
the traceback).
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import os
import re
import shlex
import sys
import textwrap
import traceback
import warnings
from typing import Any, Callable

import orjson

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

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


class UsageError(Exception):
    """Bad input detected by the CLI itself (exit code 2)."""


class CommandFailed(Exception):
    """The command ran but the operation failed (exit code 1)."""


# ---------------------------------------------------------------- helpers

def _storage_option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
               "t": 1000**4, "tb": 1000**4, "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
               "ki": 1024, "mi": 1024**2, "gi": 1024**3, "ti": 1024**4}


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
    from .errors import InvalidTimestampError
    from .snapshot import to_epoch_ms

    try:
        to_epoch_ms(text)
    except InvalidTimestampError:
        raise argparse.ArgumentTypeError(
            f"expected an ISO-8601 time such as 2026-11-22, 2026-11-22T10:00:00Z or '2026-11-22 10:00:00+01:00' "
            f"(no offset means UTC), got {text!r}"
        ) from None
    return text


_nonneg_int = _nonneg(int, "a whole number")
_nonneg_float = _nonneg(float, "a number")


def _names(values: list[str] | None) -> list[str] | None:
    """``--columns a b`` and ``--columns a,b`` both give ['a', 'b']."""
    if values is None:
        return None
    return [n.strip() for v in values for n in v.split(",") if n.strip()]


def _human_size(n: int | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _json_default(v: Any) -> Any:
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    if isinstance(v, dt.timedelta):
        return v.total_seconds()
    if isinstance(v, (set, frozenset, tuple)):
        return list(v)
    return str(v)


def _emit_json(obj: Any) -> None:
    sys.stdout.buffer.write(orjson.dumps(obj, default=_json_default, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS) + b"\n")
    sys.stdout.flush()


def _cell(v: Any, width: int = 48) -> str:
    if v is None:
        s = "null"
    elif isinstance(v, dt.datetime):
        s = v.isoformat()
    elif isinstance(v, (bytes, bytearray)):
        s = "0x" + bytes(v).hex()
    elif isinstance(v, (dict, list)):
        s = orjson.dumps(v, default=_json_default).decode()
    else:
        s = str(v)
    s = s.replace("\n", "\\n").replace("\t", " ")
    return s if len(s) <= width else s[: width - 1] + "…"


def _print_table(headers: list[str], rows: list[list[Any]], width: int = 48) -> None:
    cells = [[_cell(v, width) for v in r] for r in rows]
    widths = [len(h) for h in headers]
    for r in cells:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))
    line = "  ".join(h.ljust(widths[i]) for i, h in enumerate(headers)).rstrip()
    print(line)
    print("  ".join("-" * w for w in widths))
    for r in cells:
        print("  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip())


class _Progress:
    """A one-line progress indicator on stderr, only when stderr is a terminal."""

    def __init__(self, label: str):
        self.label = label
        self.active = sys.stderr.isatty()
        self.shown = False

    def __call__(self, done: int, total: int | None = None, extra: str = "") -> None:
        if not self.active:
            return
        msg = f"{self.label}: {done}/{total}" if total else f"{self.label}: {done}"
        sys.stderr.write(f"\r\x1b[K{msg}{(' ' + extra) if extra else ''}")
        sys.stderr.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self.shown = False


def _open_table(args: argparse.Namespace, *, time_travel: bool = False):
    from .table import Table

    version = getattr(args, "version", None) if time_travel else None
    timestamp = getattr(args, "timestamp", None) if time_travel else None
    return Table(args.path, version=version, timestamp=timestamp, storage_options=args.storage_options)


def _num_records(adds) -> int | None:
    total = 0
    for a in adds:
        n = a.num_logical_records()  # rows a deletion vector deletes are not the table's
        if n is None:
            return None
        total += n
    return total


# ---------------------------------------------------------------- commands

def cmd_show(args: argparse.Namespace) -> int:
    from .scan import to_table

    t = _open_table(args, time_travel=True)
    data = to_table(t.snapshot, _names(args.columns), limit=args.limit or None)
    total = _num_records(t.snapshot.files.values())
    names = data.column_names
    if args.json:
        _emit_json({"version": t.version, "columns": names, "num_rows": data.num_rows, "total_rows": total, "rows": data.to_pylist()})
        return EXIT_OK
    rows = [[r[n] for n in names] for r in data.to_pylist()]
    _print_table(names, rows)
    of = f" of {total:,}" if total is not None else ""
    print(f"({data.num_rows:,}{of} rows, version {t.version})")
    return EXIT_OK


def _delta_type(t: Any) -> str:
    if isinstance(t, str):
        return t
    kind = t.get("type")
    if kind == "struct":
        return "struct<" + ", ".join(f"{f['name']}: {_delta_type(f['type'])}" for f in t.get("fields", [])) + ">"
    if kind == "array":
        return f"array<{_delta_type(t.get('elementType'))}>"
    if kind == "map":
        return f"map<{_delta_type(t.get('keyType'))}, {_delta_type(t.get('valueType'))}>"
    return str(kind)


def cmd_describe(args: argparse.Namespace) -> int:
    t = _open_table(args, time_travel=True)
    snap = t.snapshot
    m, p = snap.metadata, snap.protocol
    fields = orjson.loads(m.schema_string).get("fields", [])
    parts = list(m.partition_columns)
    schema = [
        {"name": f["name"], "type": _delta_type(f["type"]), "nullable": bool(f.get("nullable", True)), "partition": f["name"] in parts}
        for f in fields
    ]
    adds = list(snap.files.values())
    last = t.history(limit=1)
    last_commit = None
    if last:
        ts = last[0]["timestamp"].isoformat(timespec="milliseconds").replace("+00:00", "Z")
        last_commit = {"version": last[0]["version"], "timestamp": ts, "operation": last[0].get("operation")}
    info = {
        "path": t.path,
        "version": t.version,
        "id": m.id,
        "name": m.name,
        "description": m.description,
        "createdTime": _iso(m.created_time),
        "lastCommit": last_commit,
        "protocol": {
            "minReaderVersion": p.min_reader_version,
            "minWriterVersion": p.min_writer_version,
            "readerFeatures": p.reader_features,
            "writerFeatures": p.writer_features,
        },
        "partitionColumns": parts,
        "schema": schema,
        "properties": dict(m.configuration),
        "numFiles": len(adds),
        "sizeInBytes": sum(a.size for a in adds),
        "numRecords": _num_records(adds),
    }
    if args.json:
        _emit_json(info)
        return EXIT_OK
    print(f"path:        {t.path}")
    print(f"version:     {t.version}")
    print(f"id:          {m.id}")
    if m.name:
        print(f"name:        {m.name}")
    if m.description:
        print(f"description: {m.description}")
    print(f"created:     {info['createdTime'] or '?'}")
    if last_commit:
        print(f"last commit: version {last_commit['version']} at {last_commit['timestamp']} ({last_commit['operation']})")
    feats = ""
    if p.reader_features or p.writer_features:
        feats = f" (reader features: {', '.join(p.reader_features or []) or '-'}; writer features: {', '.join(p.writer_features or []) or '-'})"
    print(f"protocol:    reader {p.min_reader_version}, writer {p.min_writer_version}{feats}")
    print(f"partitioned: {', '.join(parts) if parts else 'no'}")
    records = f", {info['numRecords']:,} records" if info["numRecords"] is not None else ""
    print(f"data:        {len(adds):,} file(s), {_human_size(info['sizeInBytes'])}{records}")
    print()
    print("schema:")
    _print_table(["column", "type", "nullable", "partition"], [[c["name"], c["type"], c["nullable"], "yes" if c["partition"] else ""] for c in schema], width=80)
    print()
    if m.configuration:
        print("properties:")
        _print_table(["key", "value"], sorted(m.configuration.items()), width=80)
    else:
        print("properties:  none")
    return EXIT_OK


def cmd_history(args: argparse.Namespace) -> int:
    t = _open_table(args)
    entries = t.history(limit=args.limit or None)
    if args.json:
        out = []
        for e in entries:
            e = dict(e)
            e["timestamp"] = e["timestamp"].isoformat()
            out.append(e)
        _emit_json(out)
        return EXIT_OK
    rows = []
    for e in entries:
        params = e.get("operationParameters") or {}
        rows.append([
            e["version"],
            e["timestamp"].isoformat(timespec="seconds").replace("+00:00", "Z"),
            e.get("operation") or "",
            " ".join(f"{k}={v}" for k, v in params.items()),
        ])
    _print_table(["version", "timestamp", "operation", "operationParameters"], rows, width=72)
    return EXIT_OK


def cmd_files(args: argparse.Namespace) -> int:
    t = _open_table(args, time_travel=True)
    adds = sorted(t.snapshot.files.values(), key=lambda a: a.path)
    if args.json:
        out = []
        for a in adds:
            stats = None
            if a.stats:
                try:
                    stats = orjson.loads(a.stats)
                except orjson.JSONDecodeError:
                    stats = a.stats
            out.append({
                "path": a.relative_path,
                "size": a.size,
                "numRecords": a.num_records(),
                "deletedRecords": None if a.deletion_vector is None else a.deletion_vector.cardinality,
                "partitionValues": a.partition_values,
                "modificationTime": _iso(a.modification_time),
                "stats": stats,
            })
        _emit_json({"version": t.version, "files": out})
        return EXIT_OK
    rows = [
        [a.relative_path, a.size, a.num_records(), " ".join(f"{k}={v}" for k, v in a.partition_values.items()), _iso(a.modification_time)]
        for a in adds
    ]
    _print_table(["path", "size", "records", "partition", "modified"], rows, width=100)
    print(f"({len(adds):,} files, {_human_size(sum(a.size for a in adds))}, version {t.version})")
    return EXIT_OK


def cmd_checkpoint(args: argparse.Namespace) -> int:
    t = _open_table(args)
    version = t.checkpoint()
    if args.json:
        _emit_json({"version": version})
    else:
        print(f"checkpoint written at version {version}")
    return EXIT_OK


def cmd_vacuum(args: argparse.Namespace) -> int:
    t = _open_table(args)
    progress = _Progress("vacuum: deleting files")
    try:
        files = t.vacuum(args.retain_hours, dry_run=args.dry_run, enforce_retention_duration=args.enforce_retention, progress=progress)
    finally:
        progress.close()
    if args.json:
        _emit_json({"dry_run": args.dry_run, "num_files": len(files), "files": files, "version": t.version})
        return EXIT_OK
    for f in files:
        print(f)
    if args.dry_run:
        print(f"dry run: {len(files)} file(s) would be deleted; run with --no-dry-run to delete them")
    else:
        print(f"deleted {len(files)} file(s)" + (f"; table at version {t.version}" if files else ""))
    return EXIT_OK


def _partition_filters(t, specs: list[str] | None) -> list[tuple] | None:
    from .schema import parse_partition_value

    if not specs:
        return None
    filters = []
    for spec in specs:
        col, sep, value = spec.partition("=")
        if not sep:
            raise UsageError(f"--partition expects COLUMN=VALUE, got {spec!r}")
        if col not in t.partition_columns:
            raise UsageError(f"{col!r} is not a partition column (partition columns: {t.partition_columns})")
        typed = parse_partition_value(value, t.schema.field(col).type)
        if typed is None:
            raise UsageError("--partition cannot select the null partition; omit --partition to optimize every partition")
        filters.append((col, "=", typed))
    return filters


def cmd_optimize(args: argparse.Namespace) -> int:
    t = _open_table(args)
    try:
        filters = _partition_filters(t, args.partition)
    except ValueError as e:
        raise UsageError(f"bad --partition value: {e}") from None
    progress = _Progress("optimize: bins written")
    try:
        metrics = t.optimize(args.target_size, filters, progress=progress)
    finally:
        progress.close()
    if args.json:
        _emit_json(metrics)
        return EXIT_OK
    if metrics["version"] is None:
        print(f"nothing to compact ({metrics['totalConsideredFiles']} file(s) considered, target size {_human_size(metrics['targetSize'])})")
        return EXIT_OK
    print(
        f"compacted {metrics['numFilesRemoved']} file(s) ({_human_size(metrics['filesRemoved']['totalSize'])}) into "
        f"{metrics['numFilesAdded']} ({_human_size(metrics['filesAdded']['totalSize'])}) in "
        f"{metrics['partitionsOptimized']} partition(s); committed version {metrics['version']}"
    )
    return EXIT_OK


def cmd_restore(args: argparse.Namespace) -> int:
    from . import maintenance
    from .storage import Storage

    if (args.restore_version is None) == (args.timestamp is None):
        raise UsageError("give either the VERSION to restore or --timestamp (one of them)")
    storage = Storage(args.path, args.storage_options)
    metrics = maintenance.restore(storage, version=args.restore_version, timestamp=args.timestamp)
    if args.json:
        _emit_json(metrics)
        return EXIT_OK
    if metrics["version"] == metrics["restoredVersion"]:
        print(f"version {metrics['restoredVersion']} is the current version; nothing to restore")
    else:
        print(
            f"restored version {metrics['restoredVersion']} as version {metrics['version']} "
            f"({metrics['numRestoredFiles']} file(s) re-added, {metrics['numRemovedFiles']} removed)"
        )
    return EXIT_OK


def cmd_cleanup_log(args: argparse.Namespace) -> int:
    t = _open_table(args)
    names = t.cleanup_log(args.retain_hours, dry_run=args.dry_run)
    if args.json:
        _emit_json({"dry_run": args.dry_run, "num_files": len(names), "files": names})
        return EXIT_OK
    for n in names:
        print(n)
    verb = "would be deleted" if args.dry_run else "deleted"
    print(f"{len(names)} log file(s) {verb}")
    return EXIT_OK


_FORMATS = {".csv": "csv", ".tsv": "csv", ".parquet": "parquet", ".pq": "parquet", ".json": "json", ".jsonl": "json", ".ndjson": "json"}


def _input_format(path: str, explicit: str | None) -> str:
    if explicit:
        return explicit
    name = path.lower()
    for suffix in (".gz", ".bz2", ".zst"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    fmt = _FORMATS.get(os.path.splitext(name)[1])
    if fmt is None:
        raise UsageError(f"cannot tell the format of {path!r} from its name; pass --format csv|parquet|json")
    return fmt


def _open_input(path: str, fmt: str, delimiter: str | None):
    """A RecordBatchReader over one input file (streamed, not loaded whole)."""
    import pyarrow as pa

    if not os.path.exists(path):
        raise UsageError(f"input file {path!r} does not exist")
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            pf = pq.ParquetFile(path)
            return pa.RecordBatchReader.from_batches(pf.schema_arrow, pf.iter_batches())
        if fmt == "csv":
            import pyarrow.csv as pcsv

            if delimiter is None and path.lower().endswith((".tsv", ".tsv.gz")):
                delimiter = "\t"
            parse = pcsv.ParseOptions(delimiter=delimiter) if delimiter else None
            # An empty field is null (as Spark reads CSV), not an empty string.
            convert = pcsv.ConvertOptions(strings_can_be_null=True)
            return pcsv.open_csv(path, parse_options=parse, convert_options=convert)
        import pyarrow.json as pjson

        return pjson.open_json(path)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise UsageError(f"cannot read {path!r} as {fmt}: {e}") from None


def cmd_write(args: argparse.Namespace) -> int:
    import pyarrow as pa

    from .errors import LakelogError
    from .write import plan_write

    formats = [_input_format(f, args.format) for f in args.files]
    schemas = []
    for f, fmt in zip(args.files, formats):
        schemas.append(_open_input(f, fmt, args.delimiter).schema)
    try:
        schema = pa.unify_schemas(schemas, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise UsageError(f"the input files have incompatible schemas: {e}") from None
    plan = plan_write(
        args.path, schema, mode=args.mode, partition_by=_names(args.partition_by), schema_mode=args.schema_mode,
        storage_options=args.storage_options,
    )
    if plan.skip:
        if args.json:
            _emit_json({"version": plan.read_version, "rows": 0, "files": 0, "skipped": True})
        else:
            print(f"a table exists at {args.path} (version {plan.read_version}); --mode ignore: nothing written")
        return EXIT_OK
    progress = _Progress("write: input files")
    adds, rows = [], 0
    try:
        for i, (f, fmt) in enumerate(zip(args.files, formats)):
            reader = _open_input(f, fmt, args.delimiter)
            counted = _counting(reader)
            try:
                adds.extend(plan.write(counted))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise UsageError(f"cannot read {f!r} as {fmt}: {e}") from None
            rows += counted.rows
            progress(i + 1, len(args.files), f"({rows:,} rows)")
        progress.close()
        version = plan.commit(adds)
    except (UsageError, LakelogError, pa.ArrowException, OSError, KeyboardInterrupt):
        progress.close()
        plan.abort(adds)  # keeps any file a commit references
        raise
    if args.json:
        _emit_json({"version": version, "rows": rows, "files": len(args.files), "data_files": len(adds)})
    else:
        print(f"wrote {rows:,} row(s) from {len(args.files)} file(s) into {len(adds)} data file(s): version {version}")
    return EXIT_OK


class _counting:
    """Iterate the batches of a reader, counting rows."""

    def __init__(self, reader):
        self.reader = reader
        self.rows = 0

    def __iter__(self):
        for b in self.reader:
            self.rows += b.num_rows
            yield b


def cmd_check(args: argparse.Namespace) -> int:
    from .check import check_table

    report = check_table(args.path, storage_options=args.storage_options)
    if args.json:
        _emit_json(report.to_dict())
    else:
        print(str(report.format()).rstrip("\n"))
    return EXIT_OK if report.ok else EXIT_FAILED


def cmd_convert(args: argparse.Namespace) -> int:
    from .conversion import convert

    partition_by = args.partition_by
    if partition_by:  # convert splits "a,b:decimal(10,2)" itself (commas inside parentheses stay)
        partition_by = ",".join(partition_by)
    version = convert(args.path, partition_by=partition_by, storage_options=args.storage_options)
    if args.json:
        _emit_json({"path": args.path, "version": version})
    else:
        print(f"converted {args.path} into a lakelog table (version {version})")
    return EXIT_OK


def _where(args: argparse.Namespace) -> str | None:
    if args.where is None and not args.all_rows:
        raise UsageError(f"give --where SQL to choose the rows (or --all to {args.command} every row)")
    if args.where is not None and args.all_rows:
        raise UsageError("give --where or --all, not both")
    return args.where


def _print_metrics(args: argparse.Namespace, metrics: dict, what: str, key: str) -> None:
    if args.json:
        _emit_json(metrics)
        return
    files = f"{metrics['num_removed_files']} file(s) rewritten or removed, {metrics['num_added_files']} added"
    if metrics[key] == 0 and metrics["num_removed_files"] == 0:
        print(f"no rows {what}; nothing committed (table at version {metrics['version']})")
    else:
        print(f"{metrics[key]:,} row(s) {what} ({files}): version {metrics['version']}")


def cmd_delete(args: argparse.Namespace) -> int:
    where = _where(args)
    metrics = _open_table(args).delete(where)
    _print_metrics(args, metrics, "deleted", "num_deleted_rows")
    return EXIT_OK


def cmd_update(args: argparse.Namespace) -> int:
    where = _where(args)
    updates = {}
    for spec in args.set:
        col, sep, expr = spec.partition("=")
        if not sep or not col.strip() or not expr.strip():
            raise UsageError(f"--set expects COLUMN=SQL_EXPRESSION, got {spec!r}")
        updates[col.strip()] = expr.strip()
    metrics = _open_table(args).update(updates, where)
    _print_metrics(args, metrics, "updated", "num_updated_rows")
    return EXIT_OK


# ---------------------------------------------------------------- parser

class _Parser(argparse.ArgumentParser):
    """Usage errors as one line on stderr (exit code 2), pointing at --help."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {' '.join(message.split())} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

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
        p.add_argument("path", metavar="PATH", help="table location (local path or URL: file://, s3://, memory://)")
        return p

    def time_travel(p: argparse.ArgumentParser) -> None:
        m = p.add_mutually_exclusive_group()
        m.add_argument("--version", type=_nonneg_int, metavar="N", help="read version N")
        m.add_argument("--timestamp", type=_timestamp, metavar="T", help="read the latest version at or before T (ISO-8601; naive means UTC)")

    p = add("show", cmd_show, "print rows of the table")
    time_travel(p)
    p.add_argument("--limit", type=_nonneg_int, default=20, metavar="N", help="rows to print (default 20; 0 = all)")
    p.add_argument("--columns", nargs="+", metavar="COL", help="columns to print (space or comma separated)")

    p = add("describe", cmd_describe, "schema, partitioning, properties, protocol, size and file count")
    time_travel(p)

    p = add("history", cmd_history, "commit history, newest first")
    p.add_argument("--limit", type=_nonneg_int, default=0, metavar="N", help="newest N commits only")

    p = add("files", cmd_files, "data files of a version (path, size, records, partition values)")
    time_travel(p)

    add("checkpoint", cmd_checkpoint, "write a checkpoint for the latest version")

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
    p.add_argument("--mode", choices=["append", "overwrite", "error", "ignore"], default="append", help="default: append")
    p.add_argument("--partition-by", nargs="+", metavar="COL", help="partition columns of a new table")
    p.add_argument("--schema-mode", choices=["merge", "overwrite"], help="merge: add new columns; overwrite (with --mode overwrite): replace the schema")
    p.add_argument("--format", choices=["csv", "parquet", "json"], help="input format (default: from the file extension)")
    p.add_argument("--delimiter", metavar="CHAR", help="CSV delimiter (default ',', tab for .tsv)")

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

    add("check", cmd_check, "check the table's log and data files for problems (exit 1 when any are found)")

    p = add("convert", cmd_convert, "turn a directory of Parquet files into a lakelog table")
    p.add_argument(
        "--partition-by", nargs="*", metavar="COL[:TYPE]",
        help="partition columns of the k=v directory layout, optionally typed (e.g. day:date); "
        "no value: not partitioned; omitted: inferred from the directories",
    )
    return parser


# ---------------------------------------------------------------- entry point

def _exit_code(e: BaseException) -> int:
    from .errors import ConvertError, SchemaMismatchError, TableNotFoundError, VersionNotFoundError

    # Bad input: the command could not start on what it was given (RetentionDurationError, InvalidArgumentError
    # and its subclasses are ValueErrors; ConvertError: a source convert cannot adopt as it is).
    if isinstance(e, (UsageError, TableNotFoundError, VersionNotFoundError, SchemaMismatchError, ConvertError, ValueError)):
        return EXIT_USAGE
    return EXIT_FAILED


def _one_line(e: BaseException) -> str:
    msg = " ".join(str(e).split()) or type(e).__name__
    return msg


# Library messages suggest Python arguments; on the command line the matching flag is the advice.
_CLI_SPELLINGS: list[tuple[re.Pattern, Any]] = [
    (re.compile(r"schema_mode='(merge|overwrite)'"), r"--schema-mode \1"),
    (re.compile(r"\bmode='(\w+)' or '(\w+)'"), r"--mode \1 or --mode \2"),
    (re.compile(r"\bmode='(\w+)'"), r"--mode \1"),
    (re.compile(r"storage_options=\{'([\w.]+)': '(\w+)'\}"), r"--storage-option \1=\2"),
    (re.compile(r"enforce_retention_duration=False \(CLI: --no-enforce-retention\)"), "--no-enforce-retention"),
    (re.compile(r"enforce_retention_duration=False"), "--no-enforce-retention"),
    (re.compile(r"partition_by=\[([^\]]*)\]"), lambda m: "--partition-by " + " ".join(x.strip(" '\"") for x in m.group(1).split(",")) if m.group(1).strip() else "--partition-by with no value"),
    (re.compile(r"\bomit partition_by\b"), "omit --partition-by"),
    (re.compile(r"\bretention_hours\b"), "--retain-hours"),
    (re.compile(r"lakelog\.write_table\(\)"), "lakelog write"),
    (re.compile(r"read it with lakelog\.Table"), "read it with lakelog show"),
]


def cli_message(text: str, path: str | None = None) -> str:
    """An error message with its Python advice (``schema_mode='merge'``, ``lakelog.write_table()``, ...)
    replaced by the command-line flags and commands that do the same."""
    for pattern, repl in _CLI_SPELLINGS:
        text = pattern.sub(repl, text)
    return text.replace("lakelog.convert()", "lakelog convert " + (shlex.quote(path) if path else "PATH"))


def _show_warning(command: str):
    """``warnings.showwarning`` for the CLI: one line on stderr, without the source line of the warning."""

    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ARG001 - the warnings API
        text = " ".join(str(message).split())
        for prefix in (f"lakelog {command}: ", "lakelog: "):
            text = text.removeprefix(prefix)
        print(f"lakelog {command}: warning: {cli_message(text)}", file=sys.stderr)

    return show


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, usage errors (argparse exits with 2)
        return int(e.code) if isinstance(e.code, int) else (0 if e.code is None else EXIT_USAGE)
    args.json = getattr(args, "json", False)
    args.debug = getattr(args, "debug", False)
    args.storage_options = dict(getattr(args, "storage_option", None) or []) or None
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning(args.command)
            return args.func(args)
    except KeyboardInterrupt:
        print("lakelog: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader of our output went away (e.g. `| head`): not an error.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        return EXIT_OK
    except Exception as e:  # noqa: BLE001 - every error becomes one line (and an exit code)
        from .errors import LakelogError

        if args.debug:
            traceback.print_exc()
        code = _exit_code(e)
        if isinstance(e, (LakelogError, UsageError, CommandFailed)):
            detail = _one_line(e)
        elif isinstance(e, (ValueError, TypeError)):
            detail = f"invalid value: {_one_line(e)}"
        elif isinstance(e, OSError):
            detail = f"{type(e).__name__}: {_one_line(e)}"
        else:
            detail = f"unexpected {type(e).__name__}: {_one_line(e)}" + ("" if args.debug else " (run with --debug for the traceback)")
        print(f"lakelog {args.command}: error: {cli_message(detail, getattr(args, 'path', None))}", file=sys.stderr)
        return code


if __name__ == "__main__":
    sys.exit(main())

"""What the commands print: tables, JSON, progress lines; the exit codes and the CLI's own errors."""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import sys
from typing import Any

import orjson


EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """Bad input detected by the CLI itself (exit code 2)."""


class CommandFailed(Exception):
    """The command ran but the operation failed (exit code 1)."""


def human_size(n: int | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def iso(ms: int | None) -> str | None:
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


def emit_json(obj: Any) -> None:
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


def print_table(headers: list[str], rows: list[list[Any]], width: int = 48) -> None:
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


class Progress:
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


def open_table(args: argparse.Namespace, *, time_travel: bool = False):
    from ..table import Table

    version = getattr(args, "version", None) if time_travel else None
    timestamp = getattr(args, "timestamp", None) if time_travel else None
    return Table(args.path, version=version, timestamp=timestamp, storage_options=args.storage_options)


def num_records(adds) -> int | None:
    total = 0
    for a in adds:
        n = a.num_logical_records()  # rows a deletion vector deletes are not the table's
        if n is None:
            return None
        total += n
    return total


def print_metrics(args: argparse.Namespace, metrics: dict, what: str, key: str) -> None:
    if args.json:
        emit_json(metrics)
        return
    files = f"{metrics['num_removed_files']} file(s) rewritten or removed, {metrics['num_added_files']} added"
    if metrics[key] == 0 and metrics["num_removed_files"] == 0:
        print(f"no rows {what}; nothing committed (table at version {metrics['version']})")
    else:
        print(f"{metrics[key]:,} row(s) {what} ({files}): version {metrics['version']}")

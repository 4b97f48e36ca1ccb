"""The ``lakelog`` command line: inspect, write and maintain tables.

Human-readable output by default, ``--json`` for scripts. Exit codes (also in ``lakelog --help``):
0 success; 1 the operation failed or found problems (a conflict, a corrupt log, ``check`` found
issues); 2 bad usage or bad input (unknown option, missing table, version or input file, invalid value,
data that does not fit the table); 130 interrupted. Errors are one line on stderr (``--debug`` adds
the traceback).

Modules: ``parser`` (the commands' arguments), ``commands`` (one function per command), ``output``
(tables, JSON and progress on the terminal; the exit codes).
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import warnings
from typing import Any, NoReturn
from .output import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, CommandFailed, UsageError
from .parser import build_parser


def _exit_code(e: BaseException) -> int:
    from ..errors import ConvertError, PredicateViolationError, SchemaMismatchError, TableNotFoundError, VersionNotFoundError

    # Bad input: the command could not start on what it was given (RetentionDurationError, InvalidArgumentError
    # and its subclasses are ValueErrors; ConvertError: a source convert cannot adopt as it is;
    # PredicateViolationError: data outside the --replace-where predicate).
    if isinstance(e, (UsageError, TableNotFoundError, VersionNotFoundError, SchemaMismatchError, PredicateViolationError, ConvertError, ValueError)):
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
    (re.compile(r"partition_by=\[([^\]]*)\]"), lambda m: "--partition-by " + ",".join(x.strip(" '\"") for x in m.group(1).split(",")) if m.group(1).strip() else "--not-partitioned"),
    (re.compile(r"\bomit partition_by\b"), "omit --partition-by"),
    (re.compile(r"\bretention_hours\b"), "--retain-hours"),
    (re.compile(r"lakelog\.write_table\(\)"), "lakelog write"),
    (re.compile(r"read it with lakelog\.Table"), "read it with lakelog show"),
]


def cli_message(text: str, path: str | None = None) -> str:
    """An error message with its Python advice (``schema_mode='merge'``, ``lakelog.write_table()``, ...)
    replaced by the command-line flags and commands that do the same."""
    quoted = shlex.quote(path) if path else "PATH"
    text = text.replace("into a new table with lakelog.write_table()", f"into a new table with lakelog write TABLE {quoted}")
    text = text.replace("a directory and convert it with lakelog.convert()", "a directory and convert it with lakelog convert DIRECTORY")
    for pattern, repl in _CLI_SPELLINGS:
        text = pattern.sub(repl, text)
    return text.replace("lakelog.convert()", "lakelog convert " + quoted)


def _show_warning(command: str):
    """``warnings.showwarning`` for the CLI: one line on stderr, without the source line of the warning."""

    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ARG001 - the warnings API
        text = " ".join(str(message).split())
        for prefix in (f"lakelog {command}: ", "lakelog: "):
            text = text.removeprefix(prefix)
        print(f"lakelog {command}: warning: {cli_message(text)}", file=sys.stderr)

    return show


# Commands that decode and re-encode data files, and Arrow's memory pool they run with when the user
# chose none: at 4M rows the delete and update peaked at 281 MiB with pyarrow's default (mimalloc),
# 230 with the system allocator and 228-232 with jemalloc; the system one exists in every pyarrow build.
REWRITING_COMMANDS = frozenset({"delete", "update", "merge", "optimize"})
REWRITE_ARROW_POOL = "system"


def arrow_pool_for(command: str | None, environ: dict[str, str], modules: dict[str, Any]) -> str | None:
    """The Arrow memory pool the CLI sets for ``command`` (None: leave it): only for a command that
    rewrites files, when the user set no ``ARROW_DEFAULT_MEMORY_POOL`` and pyarrow is not yet imported
    (the variable is read once, when pyarrow is imported)."""
    if command in REWRITING_COMMANDS and "ARROW_DEFAULT_MEMORY_POOL" not in environ and "pyarrow" not in modules:
        return REWRITE_ARROW_POOL
    return None


def run() -> NoReturn:
    """The ``lakelog`` console script and ``python -m lakelog.cli``: ``main()``, then leave the process at
    once with its exit code.

    Reading an object store, Arrow's I/O threads call lakelog's Python filesystem (``Store.arrow_fs``);
    a scan stopped early (``show --limit``, a failed read in ``check``) leaves some at work. Once the
    interpreter shuts down, CPython ends such a thread mid-call, which aborts the process ("terminate
    called without an active exception", exit -6) after the command has finished and printed.
    lakelog waits for its own such calls at exit (``lakelog.storage.base._ArrowCalls``); the command
    line goes further, since its exit codes are an API: the command's work is done and its output
    flushed here, so no thread left by any native library decides the exit status.
    """
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # the reader went away (``| head``): as main treats it
            pass
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, usage errors (argparse exits with 2)
        return int(e.code) if isinstance(e.code, int) else (0 if e.code is None else EXIT_USAGE)
    pool = arrow_pool_for(args.command, os.environ, sys.modules)  # (the CLI owns its process)
    if pool is not None:
        os.environ["ARROW_DEFAULT_MEMORY_POOL"] = pool
    args.json = getattr(args, "json", False)
    args.debug = getattr(args, "debug", False)
    args.storage_options = dict(getattr(args, "storage_option", None) or []) or None
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning(args.command)
            try:
                return args.func(args)
            finally:
                # UniForm's Iceberg step follows a commit on a worker thread: wait for it here, as the
                # process ends with os._exit, which skips the interpreter's own wait
                from ..iceberg import flush

                flush(raise_errors=False)
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
        from ..errors import LakelogError

        if args.debug:
            import traceback

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

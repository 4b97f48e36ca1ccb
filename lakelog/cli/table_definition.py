"""CLI commands that change a table's definition without rewriting data: renaming, dropping and widening
columns, and CHECK constraints (each one metadata commit)."""

from __future__ import annotations

import argparse

from .output import EXIT_OK, emit_json, open_table


def _done(args: argparse.Namespace, version: int, what: str) -> int:
    if args.json:
        emit_json({"version": version})
    else:
        print(f"{what}: version {version}")
    return EXIT_OK


def cmd_rename_column(args: argparse.Namespace) -> int:
    return _done(args, open_table(args).rename_column(args.old, args.new), f"renamed {args.old!r} to {args.new!r}")


def cmd_drop_column(args: argparse.Namespace) -> int:
    return _done(args, open_table(args).drop_column(args.name), f"dropped {args.name!r}")


def cmd_alter_column_type(args: argparse.Namespace) -> int:
    t = open_table(args)
    before = t.version
    version = t.alter_column_type(args.column, args.type)
    return _done(args, version, f"widened {args.column!r} to {args.type}" if version != before else f"{args.column!r} already has type {args.type}")


def cmd_add_constraint(args: argparse.Namespace) -> int:
    return _done(args, open_table(args).add_constraint({args.name: args.expression}), f"added CHECK constraint {args.name!r} ({args.expression})")


def cmd_drop_constraint(args: argparse.Namespace) -> int:
    return _done(args, open_table(args).drop_constraint(args.name, if_exists=args.if_exists), f"dropped CHECK constraint {args.name!r}")

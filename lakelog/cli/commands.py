"""One function per ``lakelog`` command: ``cmd_<name>(args) -> exit code``."""

from __future__ import annotations

import argparse
import os
from typing import Any

import orjson
from .output import EXIT_FAILED, EXIT_OK, Progress, UsageError, emit_json, human_size, iso, num_records, open_table, print_metrics, print_table


def _names(values: list[str] | None) -> list[str] | None:
    """``--columns a,b`` and ``--columns a --columns b`` both give ['a', 'b']."""
    if values is None:
        return None
    return [n.strip() for v in values for n in v.split(",") if n.strip()]


def cmd_show(args: argparse.Namespace) -> int:
    from ..read.scan import to_table

    t = open_table(args, time_travel=True)
    data = to_table(t.snapshot, _names(args.columns), limit=args.limit or None)
    total = num_records(t.snapshot.files.values())
    names = data.column_names
    if args.json:
        emit_json({"version": t.version, "columns": names, "num_rows": data.num_rows, "total_rows": total, "rows": data.to_pylist()})
        return EXIT_OK
    rows = [[r[n] for n in names] for r in data.to_pylist()]
    print_table(names, rows)
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
    t = open_table(args, time_travel=True)
    snap = t.snapshot
    m, p = snap.metadata, snap.protocol
    fields = orjson.loads(m.schema_string).get("fields", [])
    parts = list(m.partition_columns)
    schema = [
        {"name": f["name"], "type": _delta_type(f["type"]), "nullable": bool(f.get("nullable", True)), "partition": f["name"] in parts}
        for f in fields
    ]
    adds = snap.live_adds()  # (from the checksum file of a small table: no checkpoint is read)
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
        "createdTime": iso(m.created_time),
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
        "numRecords": num_records(adds),
    }
    if args.json:
        emit_json(info)
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
    print(f"data:        {len(adds):,} file(s), {human_size(info['sizeInBytes'])}{records}")
    print()
    print("schema:")
    print_table(["column", "type", "nullable", "partition"], [[c["name"], c["type"], c["nullable"], "yes" if c["partition"] else ""] for c in schema], width=80)
    print()
    if m.configuration:
        print("properties:")
        print_table(["key", "value"], sorted(m.configuration.items()), width=80)
    else:
        print("properties:  none")
    return EXIT_OK


def cmd_history(args: argparse.Namespace) -> int:
    from ..log.history import read_history
    from ..storage import Storage

    # From the log alone (no replay, no pyarrow without a checkpoint): the history of a table lakelog cannot read is shown too.
    entries = read_history(Storage(args.path, args.storage_options), limit=args.limit or None)
    if args.json:
        out = []
        for e in entries:
            e = dict(e)
            e["timestamp"] = e["timestamp"].isoformat()
            out.append(e)
        emit_json(out)
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
    print_table(["version", "timestamp", "operation", "operationParameters"], rows, width=72)
    return EXIT_OK


def cmd_files(args: argparse.Namespace) -> int:
    t = open_table(args, time_travel=True)
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
                "modificationTime": iso(a.modification_time),
                "stats": stats,
            })
        emit_json({"version": t.version, "files": out})
        return EXIT_OK
    rows = [
        [a.relative_path, a.size, a.num_records(), " ".join(f"{k}={v}" for k, v in a.partition_values.items()), iso(a.modification_time)]
        for a in adds
    ]
    print_table(["path", "size", "records", "partition", "modified"], rows, width=100)
    print(f"({len(adds):,} files, {human_size(sum(a.size for a in adds))}, version {t.version})")
    return EXIT_OK


def cmd_checkpoint(args: argparse.Namespace) -> int:
    t = open_table(args)
    version = t.checkpoint()
    if args.json:
        emit_json({"version": version})
    else:
        print(f"checkpoint written at version {version}")
    return EXIT_OK


def cmd_generate_manifest(args: argparse.Namespace) -> int:
    t = open_table(args)
    out = t.generate_symlink_manifest()
    if args.json:
        emit_json(out)
    else:
        print(f"symlink format manifests generated at version {out['version']}: "
              f"{out['manifests_written']} written, {out['files_deleted']} stale file(s) deleted")
    return EXIT_OK


def cmd_uniform(args: argparse.Namespace) -> int:
    t = open_table(args)
    version = t.sync_iceberg()
    if args.json:
        emit_json({"version": version})
    else:
        print(f"Iceberg metadata describes version {version}")
    return EXIT_OK


def cmd_register(args: argparse.Namespace) -> int:
    from .. import catalog

    t = open_table(args)
    if args.glue is not None:
        outcomes = {catalog.glue_name(args.glue).uri: t.register_glue(args.glue)}
    else:
        outcomes = t.sync_catalogs()
        if not outcomes:
            raise UsageError(f"name the entry (--glue database.table): the table at {t.path} lists none in its "
                             "lakelog.catalog.sync property")
    if args.json:
        emit_json({"version": t.version, "location": t.path, "entries": outcomes})
    else:
        for name, outcome in outcomes.items():
            print(f"{name}: {outcome} (location {t.path}, version {t.version})")
    return EXIT_OK


def cmd_lookup(args: argparse.Namespace) -> int:
    from .. import catalog

    location, name = catalog.resolve(catalog.glue_name(args.path).uri, args.storage_options)
    if args.json:
        emit_json({"name": name.uri, "location": location})
    else:
        print(location)
    return EXIT_OK


def cmd_vacuum(args: argparse.Namespace) -> int:
    t = open_table(args)
    progress = Progress("vacuum: deleting files")
    try:
        files = t.vacuum(args.retain_hours, dry_run=args.dry_run, enforce_retention_duration=args.enforce_retention, progress=progress)
    finally:
        progress.close()
    if args.json:
        emit_json({"dry_run": args.dry_run, "num_files": len(files), "files": files, "version": t.version})
        return EXIT_OK
    for f in files:
        print(f)
    if args.dry_run:
        print(f"dry run: {len(files)} file(s) would be deleted; run with --no-dry-run to delete them")
    else:
        print(f"deleted {len(files)} file(s)" + (f"; table at version {t.version}" if files else ""))
    return EXIT_OK


def _partition_filters(t, specs: list[str] | None) -> list[tuple] | None:
    from ..schema.partition_values import parse_partition_value

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
    t = open_table(args)
    try:
        filters = _partition_filters(t, args.partition)
    except ValueError as e:
        raise UsageError(f"bad --partition value: {e}") from None
    progress = Progress("optimize: bins written")
    try:
        metrics = t.optimize(args.target_size, filters, progress=progress, zorder_by=_names(args.zorder_by))
    finally:
        progress.close()
    if args.json:
        emit_json(metrics)
        return EXIT_OK
    if not metrics["committed"]:
        print(
            f"nothing to compact ({metrics['totalConsideredFiles']} file(s) considered, target size "
            f"{human_size(metrics['targetSize'])}); nothing committed (table at version {metrics['version']})"
        )
        return EXIT_OK
    print(
        f"compacted {metrics['numFilesRemoved']} file(s) ({human_size(metrics['filesRemoved']['totalSize'])}) into "
        f"{metrics['numFilesAdded']} ({human_size(metrics['filesAdded']['totalSize'])}) in "
        f"{metrics['partitionsOptimized']} partition(s); committed version {metrics['version']}"
    )
    return EXIT_OK


def cmd_restore(args: argparse.Namespace) -> int:
    from .. import maintenance
    from ..storage import Storage

    if (args.restore_version is None) == (args.timestamp is None):
        raise UsageError("give either the VERSION to restore or --timestamp (one of them)")
    storage = Storage(args.path, args.storage_options)
    metrics = maintenance.restore(storage, version=args.restore_version, timestamp=args.timestamp)
    if args.json:
        emit_json(metrics)
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
    t = open_table(args)
    names = t.cleanup_log(args.retain_hours, dry_run=args.dry_run)
    if args.json:
        emit_json({"dry_run": args.dry_run, "num_files": len(names), "files": names})
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
            from ..storage.parquet_read import parquet_file

            pf = parquet_file(path)
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


def _properties(args: argparse.Namespace) -> dict[str, str] | None:
    return dict(args.properties) if args.properties else None


def _write_target(args: argparse.Namespace):
    """(where ``write`` goes, the catalog name to register there afterwards or None). A Glue name goes to
    its registered location, which ``--location`` must name too; an unregistered one to ``--location``."""
    from ..catalog import catalog_name, location_for_write

    name = catalog_name(args.path)
    if name is None:
        if args.location is not None:
            raise UsageError(f"--location goes with an AWS Glue name (glue://database/table); {args.path!r} is the location itself")
        return args.path, None
    location, registered = location_for_write(name, args.location, args.storage_options)
    return location, None if registered else name


def _register_new(args: argparse.Namespace, location: str, name, version: int) -> None:
    """Register the table just created at ``location`` under ``name`` (a failure warns; the commit stands)."""
    if name is not None:
        from ..catalog import register_after_write

        register_after_write(location, name, args.storage_options, version)


def _replace_where(args: argparse.Namespace, path: str, unregistered, schema, formats: list[str]) -> int:
    """``write --replace-where``: every input file, one stream, replacing the rows the predicate selects."""
    import pyarrow as pa

    from ..dml import overwrite_where

    if args.mode not in (None, "overwrite"):
        raise UsageError(f"--replace-where overwrites the rows it selects; it cannot be combined with --mode {args.mode}")

    def batches():
        for f, fmt in zip(args.files, formats):
            for b in _open_input(f, fmt, args.delimiter):
                if b.schema == schema:
                    yield b
                else:
                    yield from pa.Table.from_batches([b]).cast(schema).to_batches()

    counted = _counting(batches())
    reader = pa.RecordBatchReader.from_batches(schema, counted)
    version = overwrite_where(
        path, reader, args.replace_where, partition_by=_names(args.partition_by), schema_mode=args.schema_mode,
        configuration=_properties(args), storage_options=args.storage_options,
    )
    _register_new(args, path, unregistered, version)
    if args.json:
        emit_json({"version": version, "rows": counted.rows, "files": len(args.files)})
    else:
        print(f"replaced the rows where {args.replace_where} with {counted.rows:,} row(s) from {len(args.files)} file(s): version {version}")
    return EXIT_OK


def cmd_write(args: argparse.Namespace) -> int:
    import pyarrow as pa

    from ..errors import LakelogError
    from ..write import plan_write

    formats = [_input_format(f, args.format) for f in args.files]
    schemas = []
    for f, fmt in zip(args.files, formats):
        schemas.append(_open_input(f, fmt, args.delimiter).schema)
    try:
        schema = pa.unify_schemas(schemas, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise UsageError(f"the input files have incompatible schemas: {e}") from None
    path, unregistered = _write_target(args)
    if args.replace_where is not None:
        return _replace_where(args, path, unregistered, schema, formats)
    plan = plan_write(
        path, schema, mode=args.mode or "append", partition_by=_names(args.partition_by), schema_mode=args.schema_mode,
        configuration=_properties(args), storage_options=args.storage_options,
        generated_columns=dict(args.generated) if args.generated else None, identity_columns=_names(args.identity),
        cluster_by=_names(args.cluster_by),
    )
    if plan.skip:
        _register_new(args, path, unregistered, plan.read_version)
        if args.json:
            emit_json({"version": plan.read_version, "rows": 0, "files": 0, "skipped": True})
        else:
            print(f"a table exists at {args.path} (version {plan.read_version}); --mode ignore: nothing written")
        return EXIT_OK
    progress = Progress("write: input files")
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
    _register_new(args, path, unregistered, version)
    if args.json:
        emit_json({"version": version, "rows": rows, "files": len(args.files), "data_files": len(adds)})
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


def cmd_properties(args: argparse.Namespace) -> int:
    t = open_table(args)
    if args.properties:
        t.set_properties(dict(args.properties))
    props = dict(t.metadata.configuration)
    if args.json:
        emit_json({"version": t.version, "properties": props})
        return EXIT_OK
    if args.properties:
        print(f"set {len(dict(args.properties))} propert{'y' if len(dict(args.properties)) == 1 else 'ies'}: version {t.version}")
    if props:
        print_table(["key", "value"], sorted(props.items()), width=80)
    else:
        print("no properties")
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    from ..check import check_table

    report = check_table(args.path, storage_options=args.storage_options)
    if args.json:
        emit_json(report.to_dict())
    else:
        print(str(report.format()).rstrip("\n"))
    return EXIT_OK if report.ok else EXIT_FAILED


def cmd_convert(args: argparse.Namespace) -> int:
    from ..conversion import convert

    partition_by = [] if args.not_partitioned else args.partition_by
    if partition_by:  # convert splits "a,b:decimal(10,2)" itself (commas inside parentheses stay)
        partition_by = ",".join(partition_by)
    version = convert(args.path, partition_by=partition_by, storage_options=args.storage_options)
    if args.json:
        emit_json({"path": args.path, "version": version})
    else:
        print(f"converted {args.path} into a lakelog table (version {version})")
    return EXIT_OK


def _where(args: argparse.Namespace) -> str | None:
    if args.where is None and not args.all_rows:
        raise UsageError(f"give --where SQL to choose the rows (or --all to {args.command} every row)")
    if args.where is not None and args.all_rows:
        raise UsageError("give --where or --all, not both")
    return args.where


def cmd_delete(args: argparse.Namespace) -> int:
    where = _where(args)
    metrics = open_table(args).delete(where)
    print_metrics(args, metrics, "deleted", "num_deleted_rows")
    return EXIT_OK


def _assignments(specs: list[str], flag: str) -> dict[str, str]:
    out = {}
    for spec in specs:
        col, sep, expr = spec.partition("=")
        if not sep or not col.strip() or not expr.strip():
            raise UsageError(f"{flag} expects COLUMN=SQL_EXPRESSION, got {spec!r}")
        out[col.strip()] = expr.strip()
    return out


def cmd_merge(args: argparse.Namespace) -> int:
    import pyarrow as pa

    if args.when_matched and args.matched_set:
        raise UsageError("give --when-matched or --when-matched-update, not both")
    if not (args.when_matched or args.matched_set or args.when_not_matched or args.when_not_matched_by_source):
        raise UsageError("give at least one clause: --when-matched, --when-matched-update, --when-not-matched or --when-not-matched-by-source")
    formats = [_input_format(f, args.format) for f in args.files]
    tables = [pa.Table.from_batches(list(r), r.schema) for r in (_open_input(f, fmt, args.delimiter) for f, fmt in zip(args.files, formats))]
    try:
        source = pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise UsageError(f"the input files have incompatible schemas: {e}") from None
    m = open_table(args).merge(source, args.on, schema_mode=args.schema_mode)
    if args.matched_set:
        m.when_matched_update(_assignments(args.matched_set, "--when-matched-update"), args.matched_condition)
    elif args.when_matched == "update-all":
        m.when_matched_update_all(args.matched_condition)
    elif args.when_matched == "delete":
        m.when_matched_delete(args.matched_condition)
    if args.when_not_matched:
        m.when_not_matched_insert_all(args.not_matched_condition)
    if args.when_not_matched_by_source:
        m.when_not_matched_by_source_delete(args.not_matched_by_source_condition)
    metrics = m.execute()
    if args.json:
        emit_json(metrics)
        return EXIT_OK
    print(
        f"{metrics['num_target_rows_inserted']:,} row(s) inserted, {metrics['num_target_rows_updated']:,} updated, "
        f"{metrics['num_target_rows_deleted']:,} deleted ({metrics['num_source_rows']:,} source rows): version {metrics['version']}"
    )
    return EXIT_OK


def cmd_update(args: argparse.Namespace) -> int:
    where = _where(args)
    updates = _assignments(args.set, "--set")
    metrics = open_table(args).update(updates, where)
    print_metrics(args, metrics, "updated", "num_updated_rows")
    return EXIT_OK


def cmd_changes(args: argparse.Namespace) -> int:
    """The change data feed of a range of versions: printed, or written to a Parquet file."""
    t = open_table(args)
    data = t.changes(args.start, args.end, columns=_names(args.columns))
    if args.output:
        import pyarrow.parquet as pq

        pq.write_table(data, args.output)
        summary = {"versions": [args.start, args.end if args.end is not None else t.version], "num_rows": data.num_rows, "output": args.output}
        if args.json:
            emit_json(summary)
        else:
            print(f"wrote {data.num_rows:,} change rows of versions {summary['versions'][0]}..{summary['versions'][1]} to {args.output}")
        return EXIT_OK
    shown = data.slice(0, args.limit) if args.limit else data
    if args.json:
        emit_json({"num_rows": data.num_rows, "columns": data.column_names, "rows": shown.to_pylist()})
        return EXIT_OK
    print_table(data.column_names, [[r[n] for n in data.column_names] for r in shown.to_pylist()])
    print(f"({shown.num_rows:,} of {data.num_rows:,} change rows)")
    return EXIT_OK

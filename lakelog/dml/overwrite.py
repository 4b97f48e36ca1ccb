"""Overwrites of part of a table: by predicate (Delta's ``replaceWhere``) and by the partitions the
data holds (dynamic partition overwrite). Both commit one ``WRITE`` with mode ``Overwrite``."""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator

import orjson
import pyarrow as pa

from ..actions import AddFile
from ..errors import InvalidArgumentError, PredicateViolationError, SchemaMismatchError
from ..column_mapping import ColumnMapping
from ..conform import cast_batch
from ..partition_keys import PartitionKeys
from ..parquet_read import parquet_file
from ..scan import read_batches
from ..schema import parse_partition_value, to_arrow_stream
from ..snapshot import Snapshot
from ..sql import Engine
from ..storage import Storage
from ..writer_features import WriterFeatures
from ..write import WritePlan, discard_files, plan_protocol, evolved_metadata, plan_write
from .delete import delete_matching
from .rewrite import Predicate, RowLevelOperation, compile_predicate, run, select_positions


def _plan(path: str, data: Any, partition_by, schema_mode, configuration, storage_options) -> tuple[WritePlan, Iterator[pa.RecordBatch]]:
    if schema_mode not in (None, "merge"):
        raise InvalidArgumentError(f"schema_mode={schema_mode!r} cannot be combined with a partial overwrite; use None or 'merge'")
    data_schema, batches = to_arrow_stream(data)
    plan = plan_write(path, data_schema, mode="append", partition_by=partition_by, schema_mode=schema_mode,
                      configuration=configuration, storage_options=storage_options)
    return plan, batches


def _evolve(op: RowLevelOperation, plan: WritePlan) -> None:
    """Commit the schema the plan settled on (schema_mode='merge' may add columns) and configuration."""
    snap = op.snapshot
    conf = {**snap.configuration, **(plan.configuration or {})}
    if plan.schema.equals(snap.schema, check_metadata=True) and conf == snap.configuration:
        return
    planned = [plan.column_mapping.schema_string] if plan.column_mapping is not None else []
    metadata = evolved_metadata(snap, plan.schema, plan.configuration, planned)
    protocol = plan_protocol(plan.schema, snap.protocol, metadata.configuration, metadata.schema_string)
    op.evolve_schema(plan.schema, metadata, [protocol] if protocol is not None else [])


def _violation(pred: Predicate, bad: int, example: dict) -> PredicateViolationError:
    return PredicateViolationError(
        f"{bad} row(s) of the data do not satisfy the overwrite predicate {pred.text!r} "
        f"(for example {example}); nothing was committed. Filter the data, or widen the predicate"
    )


def _checked(batches, schema: pa.Schema, pred: Predicate, engine: Engine, features: WriterFeatures | None = None) -> Iterator[pa.RecordBatch]:
    """The data, cast to ``schema`` (with the table's ``features`` applied, so the predicate sees generated
    columns), refusing any row the predicate does not select (NULL included)."""
    for batch in batches:
        b = cast_batch(batch, schema, features.computed if features is not None else ())
        if features is not None:
            b = features.apply(b)
        hit = select_positions(engine, pred, pa.Table.from_batches([b]))
        if len(hit) != b.num_rows:
            missing = sorted(set(range(b.num_rows)) - set(hit.tolist()))
            raise _violation(pred, b.num_rows - len(hit), b.slice(missing[0], 1).to_pylist()[0])
        yield b


def checked_batches(batches, schema: pa.Schema, predicate: Any, features: WriterFeatures | None = None) -> Iterator[pa.RecordBatch]:
    """``batches`` cast to ``schema``, raising ``PredicateViolationError`` (naming the predicate) at the
    first row that ``predicate`` does not select: what a writer of a predicate overwrite's files (one
    task of a distributed write) runs before ``commit_overwrite_where(..., rows_checked=True)``.
    ``features``: the plan's, applied here first (the plan's writer applies them again, which changes nothing)."""
    engine = Engine()
    try:
        pred = compile_predicate(predicate, schema, engine, "overwrite predicate")
        yield from _checked(batches, schema, pred, engine, features)
    finally:
        engine.close()


def check_predicate(predicate: Any, schema: pa.Schema) -> str:
    """Check an overwrite predicate against ``schema`` (``PredicateError`` if it is not valid there);
    returns its text as commits record it."""
    engine = Engine()
    try:
        return compile_predicate(predicate, schema, engine, "overwrite predicate").text
    finally:
        engine.close()


def _typed_partitions(schema: pa.Schema, partition_columns: list[str], adds: list[AddFile], rows: list[int], mapping: ColumnMapping | None = None) -> dict[str, pa.Array]:
    out = {}
    for c in partition_columns:
        t = schema.field(c).type
        key = mapping.physical_name(c) if mapping is not None else c
        out[c] = pa.array([parse_partition_value(a.partition_values.get(key), t) for a, n in zip(adds, rows) for _ in range(n)], t)
    return out


def _check_files(storage: Storage, schema: pa.Schema, partition_columns: list[str], adds: list[AddFile], pred: Predicate, engine: Engine,
                 mapping: ColumnMapping | None = None) -> None:
    """Raise ``PredicateViolationError`` unless every row of the (uncommitted) files satisfies ``pred``.
    A predicate on partition columns only is checked on the files' partition values, without reading them."""
    if not adds:
        return
    if pred.sql is not None and pred.columns and pred.columns <= set(partition_columns):
        table = pa.table(_typed_partitions(schema, partition_columns, adds, [1] * len(adds), mapping))
        hit = select_positions(engine, pred, table)
        if len(hit) != len(adds):
            missing = sorted(set(range(len(adds))) - set(hit.tolist()))
            bad = sum(adds[i].num_records() or 1 for i in missing)
            raise _violation(pred, bad, table.slice(missing[0], 1).to_pylist()[0])
        return
    wanted = schema.names if pred.columns is None else [c for c in schema.names if c in pred.columns]
    if mapping is not None and mapping.active:  # the files name columns by physical name: read them mapped
        for a in adds:
            for batch in read_batches(storage, schema, partition_columns, [a], wanted, None, mapping):
                table = pa.Table.from_batches([batch])
                hit = select_positions(engine, pred, table)
                if len(hit) != table.num_rows:
                    missing = sorted(set(range(table.num_rows)) - set(hit.tolist()))
                    raise _violation(pred, table.num_rows - len(hit), table.slice(missing[0], 1).to_pylist()[0])
        return
    for a in adds:
        with storage.arrow_fs.open_input_file(storage.join(a.relative_path)) as f:
            pf = parquet_file(f)
            present = set(pf.schema_arrow.names)
            data_cols = [c for c in wanted if c not in partition_columns and c in present]
            for batch in pf.iter_batches(columns=data_cols, use_threads=False):
                cols = {c: batch.column(c) for c in data_cols}
                cols.update(_typed_partitions(schema, [c for c in wanted if c in partition_columns], [a], [batch.num_rows]))
                names = [c for c in wanted if c in cols]
                table = pa.table([cols[c] for c in names], schema=pa.schema([schema.field(c) for c in names]))
                hit = select_positions(engine, pred, table)
                if len(hit) != table.num_rows:
                    missing = sorted(set(range(table.num_rows)) - set(hit.tolist()))
                    raise _violation(pred, table.num_rows - len(hit), table.slice(missing[0], 1).to_pylist()[0])


def _commit_where(op: RowLevelOperation, old_pred: Predicate, written: int) -> int:
    """Delete the rows ``old_pred`` selects and commit that with the rows written, as one WRITE."""
    deleted = delete_matching(op, old_pred)
    op.finish()
    params: dict[str, Any] = {"mode": "Overwrite"}
    if op.partition_columns:
        params["partitionBy"] = orjson.dumps(op.partition_columns).decode()
    params["predicate"] = old_pred.text
    version = op.commit("WRITE", params, {
        "numFiles": op.num_added_files, "numOutputRows": written, "numRemovedFiles": op.num_removed_files, "numAddedFiles": op.num_added_files,
        "numDeletedRows": deleted, "numCopiedRows": op.copied_rows,
    })
    return op.snapshot.version if version is None else version


def overwrite_where(path: str, data: Any, predicate: Any, *, partition_by=None, schema_mode=None, configuration=None, storage_options=None,
                    app_id: str | None = None, app_version: int | None = None, user_metadata: str | None = None) -> int:
    """Replace the rows ``predicate`` selects with ``data`` (whose rows must all satisfy it) in one commit."""
    plan, batches = _plan(path, data, partition_by, schema_mode, configuration, storage_options)
    if plan.snapshot is None:  # a new table: the data must still satisfy the predicate
        engine = Engine()
        try:
            pred = compile_predicate(predicate, plan.schema, engine, "overwrite predicate")
            # the features are applied before the predicate check, not again when writing
            adds = dataclasses.replace(plan, features=None).write(_checked(batches, plan.schema, pred, engine, plan.features))
        finally:
            engine.close()
        return plan.commit(adds, app_id=app_id, app_version=app_version, user_metadata=user_metadata, extra_parameters={"predicate": pred.text})
    op = RowLevelOperation(plan.storage, app_id=app_id, app_version=app_version, user_metadata=user_metadata, snapshot=plan.snapshot)

    def body(op: RowLevelOperation) -> int:
        if op.duplicate:
            return op.snapshot.version
        _evolve(op, plan)
        data_pred = compile_predicate(predicate, op.schema, op.engine, "overwrite predicate")
        old_pred = compile_predicate(predicate, op.snapshot.schema, op.engine, "overwrite predicate")
        written = 0
        features, op.features = plan.features, None  # applied before the predicate check, not again when writing
        for b in _checked(batches, op.schema, data_pred, op.engine, features):
            op.record_changes(pa.Table.from_batches([b]), "insert")  # (the feed: its deletes are in change files too)
            op.writer.write(b)
            written += b.num_rows
        return _commit_where(op, old_pred, written)

    return run(op, body)


def _planned_operation(plan: WritePlan, adds: list[AddFile], app_id, app_version, user_metadata) -> RowLevelOperation:
    """The operation committing ``adds`` against the version ``plan`` was made on (so that changes
    committed since are checked for conflicts, not silently replaced). On failure ``adds`` are deleted."""
    storage = plan.storage
    try:
        snapshot = plan.snapshot if plan.snapshot is not None else Snapshot.load(storage, version=plan.read_version)
        return RowLevelOperation(storage, app_id=app_id, app_version=app_version, user_metadata=user_metadata, snapshot=snapshot)
    except BaseException:
        discard_files(storage, adds)
        raise


def _adopt(op: RowLevelOperation, plan: WritePlan, adds: list[AddFile]) -> int | None:
    """Prepare ``op`` to commit files written by ``plan``: the version already committed when the
    operation's txn is a duplicate (the files are deleted), else None after evolving the schema as the
    plan did and checking the partitioning matches."""
    if op.duplicate:
        discard_files(op.storage, adds)
        return op.snapshot.version
    _evolve(op, plan)
    if op.partition_columns != plan.partition_columns:
        raise SchemaMismatchError(f"the files were written partitioned by {plan.partition_columns}, the table by {op.partition_columns}")
    return None


def _commit_new_table(plan: WritePlan, adds: list[AddFile], app_id, app_version, user_metadata, extra: dict[str, Any] | None) -> int:
    # mode "error": a table created since the plan was made must not get these rows as a blind append
    return dataclasses.replace(plan, mode="error").commit(
        adds, app_id=app_id, app_version=app_version, user_metadata=user_metadata, extra_parameters=extra)


def _written_rows(adds: list[AddFile]) -> int:
    return sum(a.num_records() or 0 for a in adds)


def commit_overwrite_where(plan: WritePlan, adds: list[AddFile], predicate: Any, *, rows_checked: bool = False,
                           app_id: str | None = None, app_version: int | None = None, user_metadata: str | None = None) -> int:
    """Commit files written by ``plan.write`` (anywhere, e.g. by Spark tasks) as a predicate overwrite:
    the rows ``predicate`` selects in the version ``plan`` was made on are replaced by the files' rows,
    in one commit. Every row of the files must satisfy ``predicate``: they are read and checked here
    (a predicate on partition columns only is checked on their partition values), unless the writer
    already did (``rows_checked=True``: written through ``checked_batches``). On any error nothing is
    committed and the files are deleted; a ``CommitConflictError`` means a concurrent commit added
    or removed rows the predicate selects."""
    storage = plan.storage
    if plan.snapshot is None and plan.read_version < 0:
        engine = Engine()
        try:
            pred = compile_predicate(predicate, plan.schema, engine, "overwrite predicate")
            if not rows_checked:
                _check_files(storage, plan.schema, plan.partition_columns, adds, pred, engine, plan.column_mapping)
        except BaseException:
            discard_files(storage, adds)
            raise
        finally:
            engine.close()
        return _commit_new_table(plan, adds, app_id, app_version, user_metadata, {"predicate": pred.text})
    op = _planned_operation(plan, adds, app_id, app_version, user_metadata)

    def body(op: RowLevelOperation) -> int:
        if (done := _adopt(op, plan, adds)) is not None:
            return done
        data_pred = compile_predicate(predicate, op.schema, op.engine, "overwrite predicate")
        old_pred = compile_predicate(predicate, op.snapshot.schema, op.engine, "overwrite predicate")
        if not rows_checked:
            _check_files(storage, op.schema, op.partition_columns, adds, data_pred, op.engine, op.column_mapping)
        op.add_files(adds, inserts=True)
        return _commit_where(op, old_pred, _written_rows(adds))

    return _run_adding(op, adds, body)


def _run_adding(op: RowLevelOperation, adds: list[AddFile], body) -> int:
    """``run``, also deleting ``adds`` when the operation fails before it tries to commit."""
    try:
        return run(op, body)
    except BaseException:
        if not op._committing:
            discard_files(op.storage, adds)
        raise


def _commit_partitions(op: RowLevelOperation, written: int) -> int:
    """Remove the files of every partition the new files are in, and commit that with them, as one WRITE."""
    op.finish()
    parts = op.partition_columns
    adds: list[AddFile] = op._adds or []

    # Partitions compared as values: another engine's files of a replaced partition spell its values
    # differently (the new files use the same physical names, and the schema's partition types).
    key = PartitionKeys(op.schema, parts, op.snapshot.column_mapping)

    # As Delta: on an unpartitioned table a dynamic overwrite is a plain one, so data without rows
    # empties the table (it holds the one partition, even with no file for it).
    replaced = {key(a) for a in adds} if parts else {()}
    op.read_checks.append(lambda a: key(a) in replaced)  # concurrent changes to these partitions conflict
    for a in op.snapshot.files.values():
        if key(a) in replaced:
            op.remove(a)
    params: dict[str, Any] = {"mode": "Overwrite"}
    if parts:
        params["partitionBy"] = orjson.dumps(parts).decode()
    params["partitionOverwriteMode"] = "dynamic"
    version = op.commit("WRITE", params, {
        "numFiles": len(adds), "numOutputRows": written, "numRemovedFiles": op.num_removed_files, "numAddedFiles": len(adds),
    })
    return op.snapshot.version if version is None else version


def overwrite_partitions(path: str, data: Any, *, partition_by=None, schema_mode=None, configuration=None, storage_options=None,
                         app_id: str | None = None, app_version: int | None = None, user_metadata: str | None = None) -> int:
    """Replace exactly the partitions present in ``data``, leaving the other partitions alone, in one
    commit; on an unpartitioned table, everything (``data`` without rows empties it, as in Delta)."""
    plan, batches = _plan(path, data, partition_by, schema_mode, configuration, storage_options)
    if plan.snapshot is None:
        return plan.commit(plan.write(batches), app_id=app_id, app_version=app_version, user_metadata=user_metadata)
    storage: Storage = plan.storage
    op = RowLevelOperation(storage, app_id=app_id, app_version=app_version, user_metadata=user_metadata, snapshot=plan.snapshot)

    def body(op: RowLevelOperation) -> int:
        if op.duplicate:
            return op.snapshot.version
        _evolve(op, plan)
        op.features = plan.features  # (computing the generated and defaulted columns the data lacks)
        written = 0
        for b in batches:
            op.write(pa.Table.from_batches([b]))
            written += b.num_rows
        return _commit_partitions(op, written)

    return run(op, body)


def commit_overwrite_partitions(plan: WritePlan, adds: list[AddFile], *, app_id: str | None = None, app_version: int | None = None,
                                user_metadata: str | None = None) -> int:
    """Commit files written by ``plan.write`` (anywhere, e.g. by Spark tasks) as a dynamic partition
    overwrite: every partition they hold is replaced, the others stay, in one commit against the
    version ``plan`` was made on (a concurrent change to a replaced partition is a
    ``CommitConflictError``; one to another partition is not). On any error nothing is committed and
    the files are deleted."""
    if plan.snapshot is None and plan.read_version < 0:
        return _commit_new_table(plan, adds, app_id, app_version, user_metadata, {"partitionOverwriteMode": "dynamic"})
    op = _planned_operation(plan, adds, app_id, app_version, user_metadata)

    def body(op: RowLevelOperation) -> int:
        if (done := _adopt(op, plan, adds)) is not None:
            return done
        op.add_files(adds)
        return _commit_partitions(op, _written_rows(adds))

    return _run_adding(op, adds, body)

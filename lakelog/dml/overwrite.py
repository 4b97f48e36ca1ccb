"""Overwrites of part of a table: by predicate (Delta's ``replaceWhere``) and by the partitions the
data holds (dynamic partition overwrite). Both commit one ``WRITE`` with mode ``Overwrite``."""

from __future__ import annotations

from typing import Any, Iterator

import orjson
import pyarrow as pa

from ..actions import AddFile, Metadata
from ..errors import PredicateViolationError
from ..conform import cast_batch
from ..schema import schema_to_string, to_arrow_stream
from ..sql import Engine
from ..storage import Storage
from ..write import WritePlan, _plan_protocol, plan_write
from .delete import delete_matching
from .rewrite import Predicate, RowLevelOperation, compile_predicate, run, select_positions


def _plan(path: str, data: Any, partition_by, schema_mode, configuration, storage_options) -> tuple[WritePlan, Iterator[pa.RecordBatch]]:
    if schema_mode not in (None, "merge"):
        raise ValueError(f"schema_mode={schema_mode!r} cannot be combined with a partial overwrite; use None or 'merge'")
    data_schema, batches = to_arrow_stream(data)
    plan = plan_write(path, data_schema, mode="append", partition_by=partition_by, schema_mode=schema_mode,
                      configuration=configuration, storage_options=storage_options)
    return plan, batches


def _evolve(op: RowLevelOperation, plan: WritePlan) -> None:
    """Commit the schema the plan settled on (schema_mode='merge' may add columns) and configuration."""
    snap = op.snapshot
    conf = {**snap.configuration, **(plan.configuration or {})}
    if plan.schema == snap.schema and conf == snap.configuration:
        return
    m = snap.metadata
    metadata = Metadata(id=m.id, schema_string=schema_to_string(plan.schema), partition_columns=m.partition_columns, configuration=conf,
                        created_time=m.created_time, name=m.name, description=m.description, format_provider=m.format_provider, format_options=m.format_options)
    protocol = _plan_protocol(plan.schema, snap.protocol)
    op.evolve_schema(plan.schema, metadata, [protocol] if protocol is not None else [])


def _checked(batches, schema: pa.Schema, pred: Predicate, engine: Engine) -> Iterator[pa.RecordBatch]:
    """The data, cast to ``schema``, refusing any row the predicate does not select (NULL included)."""
    for batch in batches:
        b = cast_batch(batch, schema)
        hit = select_positions(engine, pred, pa.Table.from_batches([b]))
        if len(hit) != b.num_rows:
            missing = sorted(set(range(b.num_rows)) - set(hit.tolist()))
            example = b.slice(missing[0], 1).to_pylist()[0]
            raise PredicateViolationError(
                f"{b.num_rows - len(hit)} row(s) of the data do not satisfy the overwrite predicate {pred.text!r} "
                f"(for example {example}); nothing was committed. Filter the data, or widen the predicate"
            )
        yield b


def overwrite_where(path: str, data: Any, predicate: Any, *, partition_by=None, schema_mode=None, configuration=None, storage_options=None,
                    app_id: str | None = None, app_version: int | None = None, user_metadata: str | None = None) -> int:
    """Replace the rows ``predicate`` selects with ``data`` (whose rows must all satisfy it) in one commit."""
    plan, batches = _plan(path, data, partition_by, schema_mode, configuration, storage_options)
    if plan.snapshot is None:  # a new table: the data must still satisfy the predicate
        engine = Engine()
        try:
            pred = compile_predicate(predicate, plan.schema, engine, "overwrite predicate")
            adds = plan.write(_checked(batches, plan.schema, pred, engine))
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
        for b in _checked(batches, op.schema, data_pred, op.engine):
            op.writer.write(b)
            written += b.num_rows
        deleted = delete_matching(op, old_pred)
        op.finish()
        params: dict[str, Any] = {"mode": "Overwrite"}
        if op.partition_columns:
            params["partitionBy"] = orjson.dumps(op.partition_columns).decode()
        params["predicate"] = old_pred.text
        version = op.commit("WRITE", params, {
            "numFiles": op.num_added_files, "numOutputRows": written, "numRemovedFiles": len(op.removes), "numAddedFiles": op.num_added_files,
            "numDeletedRows": deleted, "numCopiedRows": op.copied_rows,
        })
        return op.snapshot.version if version is None else version

    return run(op, body)


def overwrite_partitions(path: str, data: Any, *, partition_by=None, schema_mode=None, configuration=None, storage_options=None,
                         app_id: str | None = None, app_version: int | None = None, user_metadata: str | None = None) -> int:
    """Replace exactly the partitions present in ``data`` (all of an unpartitioned table when ``data`` has
    rows), leaving the other partitions alone, in one commit."""
    plan, batches = _plan(path, data, partition_by, schema_mode, configuration, storage_options)
    if plan.snapshot is None:
        return plan.commit(plan.write(batches), app_id=app_id, app_version=app_version, user_metadata=user_metadata)
    storage: Storage = plan.storage
    op = RowLevelOperation(storage, app_id=app_id, app_version=app_version, user_metadata=user_metadata, snapshot=plan.snapshot)

    def body(op: RowLevelOperation) -> int:
        if op.duplicate:
            return op.snapshot.version
        _evolve(op, plan)
        written = 0
        for b in batches:
            op.write(pa.Table.from_batches([b]))
            written += b.num_rows
        op.finish()
        parts = op.partition_columns
        adds: list[AddFile] = op._adds or []

        def key(a: AddFile) -> tuple:
            return tuple(a.partition_values.get(c) for c in parts)

        replaced = {key(a) for a in adds}
        op.read_checks.append(lambda a: key(a) in replaced)  # concurrent changes to these partitions conflict
        for a in op.snapshot.files.values():
            if key(a) in replaced:
                op.remove(a)
        params: dict[str, Any] = {"mode": "Overwrite"}
        if parts:
            params["partitionBy"] = orjson.dumps(parts).decode()
        params["partitionOverwriteMode"] = "dynamic"
        version = op.commit("WRITE", params, {
            "numFiles": len(adds), "numOutputRows": written, "numRemovedFiles": len(op.removes), "numAddedFiles": len(adds),
        })
        return op.snapshot.version if version is None else version

    return run(op, body)

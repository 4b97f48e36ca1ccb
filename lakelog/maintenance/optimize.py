"""``optimize``: bin-packing compaction of small files into files of the target size, per partition."""

from __future__ import annotations

import numbers
from collections import defaultdict
from typing import Any, Callable, Hashable

import orjson
import pyarrow.compute as pc

from ..table_features import iceberg_compat, row_tracking
from ..actions import Action, AddFile, now_ms
from ..schema.conform import cast_batch
from ..read.partition_keys import PartitionKeys
from ..log.snapshot import Snapshot
from ..storage import Storage
from ..write import DataWriter, discard_files, materializes_partitions
from ..errors import InvalidArgumentError, LakelogError, SchemaMismatchError, SymlinkManifestError
from .commits import MaintenanceTransaction, Progress


DEFAULT_TARGET_FILE_SIZE = 100 * 1024 * 1024  # as delta-rs: delta.targetFileSize, else 100 MiB


def _file_stats(sizes: list[int]) -> dict[str, Any]:
    if not sizes:
        return {"avg": 0.0, "max": 0, "min": 0, "totalFiles": 0, "totalSize": 0}
    return {"avg": sum(sizes) / len(sizes), "max": max(sizes), "min": min(sizes), "totalFiles": len(sizes), "totalSize": sum(sizes)}


def _check_partition_filters(snapshot: Snapshot, filters: Any) -> None:
    if filters is None:
        return
    if isinstance(filters, pc.Expression):
        raise InvalidArgumentError("optimize takes DNF filter tuples on partition columns, e.g. [('day', '=', '2024-01-01')]")
    if not isinstance(filters, (list, tuple)) or not all(isinstance(x, (list, tuple)) for x in filters):
        raise InvalidArgumentError(f"optimize takes DNF filter tuples on partition columns, e.g. [('day', '=', '2024-01-01')], not {filters!r}")
    flat = [filters] if filters and isinstance(filters[0], tuple) else filters
    for conj in flat:
        for term in conj:
            if not isinstance(term, (list, tuple)) or len(term) != 3:
                raise InvalidArgumentError(f"filter {term!r} is not a (column, op, value) tuple")
            if term[0] not in snapshot.partition_columns:
                raise SchemaMismatchError(
                    f"optimize filters may only name partition columns ({snapshot.partition_columns}); "
                    f"{term[0]!r} is not one"
                )


def target_file_size(snapshot: Snapshot, target_size: int | None = None) -> int:
    """The bin size: ``target_size``, else the table's ``delta.targetFileSize``, else 100 MiB."""
    if target_size is None:
        return snapshot.properties.target_file_size or DEFAULT_TARGET_FILE_SIZE
    if isinstance(target_size, bool) or not isinstance(target_size, numbers.Integral) or target_size <= 0:
        raise InvalidArgumentError(f"target_size must be a positive integer number of bytes, not {target_size!r}")
    return int(target_size)


def _text_partition(a: AddFile) -> tuple:
    return tuple(sorted(a.partition_values.items(), key=lambda kv: kv[0]))


def plan_bins(files: list[AddFile], target_size: int, partition: Callable[[AddFile], Hashable] | None = None) -> tuple[list[list[AddFile]], int]:
    """Bin-pack files smaller than ``target_size`` per partition, in insertion order. A file with a
    deletion vector is always a candidate, and a bin holding one is kept even alone: compaction
    rewrites it without its deleted rows and drops the deletion vector. ``partition``: a file's
    partition (``PartitionKeys``: by value, whatever text each writer logged); None: by the text of
    its ``partitionValues``, which splits a partition whose files other engines wrote.

    Returns (bins with at least two files or a deletion vector, number of candidate files considered).
    """
    partition = partition or _text_partition
    by_partition: dict[Hashable, list[AddFile]] = defaultdict(list)
    for a in files:
        if a.size < target_size or a.deletion_vector is not None:
            by_partition[partition(a)].append(a)
    bins: list[list[AddFile]] = []
    for key in sorted(by_partition, key=repr):
        current: list[AddFile] = []
        size = 0
        for a in sorted(by_partition[key], key=lambda a: (a.modification_time, a.path)):
            if current and size + a.size > target_size:
                bins.append(current)
                current, size = [], 0
            current.append(a)
            size += a.size
        if current:
            bins.append(current)
    keep = [b for b in bins if len(b) > 1 or any(a.deletion_vector is not None for a in b)]
    return keep, sum(len(v) for v in by_partition.values())


def _write(writer: DataWriter, batches, schema) -> list[AddFile]:
    try:
        for batch in batches:
            writer.write(cast_batch(batch, schema))
        return writer.finish()
    except BaseException:
        writer.abort()
        raise


def _write_ordered(storage: Storage, new_writer, batches, schema, columns: list[str], group: list[AddFile], target: int) -> list[AddFile]:
    """The group's rows in Z-order over ``columns``, in files of about ``target`` bytes (by the group's
    bytes per row on disk)."""
    import math

    import pyarrow as pa

    from ..table_features.clustering import z_order

    table = pa.Table.from_batches([cast_batch(b, schema) for b in batches], schema=schema)
    if table.num_rows == 0:
        return []
    table = table.take(pa.array(z_order(table, columns)))
    files = max(1, math.ceil(sum(a.size for a in group) / target))
    per = math.ceil(table.num_rows / files)
    out: list[AddFile] = []
    try:
        for start in range(0, table.num_rows, per):
            out.extend(_write(new_writer(), table.slice(start, per).to_batches(), schema))
    except BaseException:
        discard_files(storage, out)
        raise
    return out


def _zorder_groups(files: list[AddFile], partition: PartitionKeys, incremental: bool = False) -> list[list[AddFile]]:
    """The files to rewrite in Z-order, per partition: every file of a partition holding more than one
    (or one with a deletion vector). ``incremental`` (liquid clustering): only the files no clustering
    wrote yet (``clusteringProvider`` unset) or with a deletion vector; files already clustered stay."""
    if incremental:
        files = [a for a in files if a.clustering_provider is None or a.deletion_vector is not None]
    by_partition: dict[tuple, list[AddFile]] = defaultdict(list)
    for a in files:
        by_partition[partition(a)].append(a)
    return [sorted(g, key=lambda a: (a.modification_time, a.path)) for _, g in sorted(by_partition.items(), key=repr)
            if len(g) > 1 or any(a.deletion_vector is not None or (incremental and a.clustering_provider is None) for a in g)]


def optimize(
    storage: Storage,
    *,
    target_size: int | None = None,
    filters: Any = None,
    progress: Progress | None = None,
    zorder_by: list[str] | None = None,
) -> dict[str, Any]:
    """Compact small files per partition into files near ``target_size`` bytes, in one commit.

    The commit (operation ``OPTIMIZE``) removes the small files and adds the new ones, all with
    ``dataChange=false``: the data at the new version equals the data before, and older versions are
    untouched. A concurrent commit that removes one of the compacted files makes this one fail with
    ``CommitConflictError`` (the new files are then deleted); concurrent appends do not conflict.
    Returns metrics named as delta-rs names them, plus ``committed`` (False when there was nothing to
    compact: every selected file is already near the target size, or alone in its partition) and
    ``version`` (the committed version, else the table's unchanged version).

    On a clustered table (``cluster_by``), and with ``zorder_by`` on any other, the files of each
    partition are instead rewritten in Z-order over those columns into files near ``target_size``, so
    each file covers narrow ranges of them (Delta's ``OPTIMIZE ... ZORDER BY`` and liquid clustering).
    """
    from ..table_features import clustering
    from ..read import scan

    snapshot = Snapshot.load(storage)
    snapshot.check_writable()
    target = target_file_size(snapshot, target_size)
    _check_partition_filters(snapshot, filters)
    clustered = clustering.clustering_columns(snapshot)
    if zorder_by is not None and clustered:
        raise InvalidArgumentError(f"the table is clustered by {clustered}: optimize() clusters it by them; zorder_by is for tables without clustering")
    order_by = clustering.check_columns(zorder_by, snapshot.schema, snapshot.partition_columns, "zorder_by") if zorder_by is not None else clustered
    selected = [snapshot.files[p] for p in scan.pruned_files(snapshot, filters)]
    # (-0.0 and 0.0 apart: the writer keeps their rows in separate files, so binning them together
    # would rewrite both again on every run)
    partition = PartitionKeys.of(snapshot, signed_zeros=True)
    if order_by:
        bins, considered = _zorder_groups(selected, partition, incremental=bool(clustered)), len(selected)
    else:
        bins, considered = plan_bins(selected, target, partition)
    metrics: dict[str, Any] = {
        "numFilesAdded": 0,
        "numFilesRemoved": 0,
        "filesAdded": _file_stats([]),
        "filesRemoved": _file_stats([]),
        "partitionsOptimized": len({partition(b[0]) for b in bins}),
        "numBatches": len(bins),
        "totalConsideredFiles": len(selected),
        "totalFilesSkipped": len(selected) - sum(len(b) for b in bins),
        "preserveInsertionOrder": True,
        "targetSize": target,
        "committed": False,
        "version": snapshot.version,
    }
    if not bins:
        return metrics
    storage.check_atomic_commits()
    max_indexed = snapshot.properties.num_indexed_cols
    schema, parts = snapshot.schema, snapshot.partition_columns
    # Row tracking enabled: the rewritten rows keep their stable ids and commit versions (they are copies).
    materialized = row_tracking.materialized_columns(snapshot.metadata)
    write_schema = row_tracking.writer_schema(schema, materialized)
    in_files = iceberg_compat.partitions_in_files(snapshot.configuration) or materializes_partitions(snapshot.protocol, snapshot.configuration)
    new_files: list[AddFile] = []
    committing = False
    try:
        for i, group in enumerate(bins):
            def new_writer() -> DataWriter:
                return DataWriter(storage, write_schema, parts, max_indexed, "part", column_mapping=snapshot.column_mapping, stats_columns=tuple(clustered),
                                  clustering_provider=clustering.PROVIDER if clustered else None, extra_columns=materialized or (),
                                  partitions_in_files=in_files)

            # read_batches drops the rows deletion vectors delete; the new files have no DV
            if materialized is None:
                batches = scan.read_batches(storage, schema, parts, group, mapping=snapshot.column_mapping)
            else:
                batches = (b.rename_columns(write_schema.names) for b in scan.row_tracking_batches(snapshot, group, None, None))
            added = _write_ordered(storage, new_writer, batches, write_schema, order_by, group, target) if order_by else _write(new_writer(), batches, write_schema)
            for a in added:
                a.data_change = False
            new_files.extend(added)
            if progress:
                progress(i + 1, len(bins))
        ts = now_ms()
        removed = [a for group in bins for a in group]
        actions: list[Action] = [a.remove(ts, data_change=False) for a in removed]
        actions.extend(new_files)
        metrics.update(
            numFilesAdded=len(new_files),
            numFilesRemoved=len(removed),
            filesAdded=_file_stats([a.size for a in new_files]),
            filesRemoved=_file_stats([a.size for a in removed]),
        )
        commit_metrics = {k: v for k, v in metrics.items() if k not in ("version", "targetSize", "committed")}
        params = {"targetSize": str(target), "predicate": orjson.dumps(filters or [], default=str).decode()}
        if order_by:
            params["clusterBy" if clustered else "zOrderBy"] = orjson.dumps(order_by).decode()
        txn = MaintenanceTransaction(storage, snapshot, "OPTIMIZE", params, metrics=commit_metrics)
        committing = True
        metrics["version"] = txn.commit(actions).version
        metrics["committed"] = True
    except BaseException as e:
        # Before the commit, or a LakelogError from it (conflict, protocol: raised before our commit file
        # was written), the new files are unreferenced. Other errors during the commit leave its outcome
        # unknown, so the files stay (vacuum deletes them if they turn out to be orphans).
        if not committing or (isinstance(e, LakelogError) and not isinstance(e, SymlinkManifestError)):
            discard_files(storage, new_files)
        raise
    return metrics

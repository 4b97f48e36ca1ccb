"""What the Spark tasks of a row-level change run (``spark_ext.dml.jobs`` and ``spark_ext.dml.merge_jobs`` start
them with ``mapInArrow``): write rows as new data files (with row tracking's stable ids), write change
data files, and rewrite files without (or with updated) rows with lakelog's copy-on-write; each yields
the actions it wrote as JSON for the driver's one commit. The internal column names the jobs and the
tasks agree on are here too."""

from __future__ import annotations

import re
import urllib.parse
from typing import Callable, Iterator

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from lakelog.actions import AddFile
from lakelog.change_feed.write import ChangeRecorder
from lakelog.schema.conform import cast_batch
from lakelog.dml.copy_on_write import NewValues
from lakelog.dml.file_rewrites import TableState, rewrite_without
from lakelog.errors import IdentityOverflowError, LakelogError, MultipleSourceMatchesError
from lakelog.table_features.row_tracking import writer_schema
from lakelog.storage import Storage
from lakelog.write import DataWriter

from ..cluster.tasks import task_features, task_file_prefix

FILE = "__lakelog_file"  # the data file a row was read from (Spark's path)
ROW = "__lakelog_row"  # a row's position in its data file (the protocol's file row index)
ROWS = "__lakelog_rows"  # a file's selected row indexes, as one array
UPDATE_FLAG = "__lakelog_updated"  # (a merge's changed rows) whether a row is updated, not deleted
KIND = "__lakelog_kind"  # what a written row is: COPIED, UPDATED or INSERTED
# Row tracking: where a row was read (file and position) and its materialized id and commit version as
# stored, carried to the writing task, which gives written rows their stable ids (lakelog.table_features.row_tracking).
RT_FILE, RT_ROW, RT_ID, RT_VERSION = "__lakelog_rt_file", "__lakelog_rt_row", "__lakelog_rt_id", "__lakelog_rt_version"
TRACKING = (RT_FILE, RT_ROW, RT_ID, RT_VERSION)
COPIED, UPDATED, INSERTED = 0, 1, 2
# Threads each rewriting task reads and writes files on (Spark runs one task per core; a second thread
# overlaps reading and writing: 5-10% faster on local[2]).
REWRITE_THREADS = 2
MATCHED_KEYS = "__lakelog_matched_key"  # (a merge's changed rows) the source key that matched, as text
ROW_ID = "__lakelog_row_id"  # (a merge) a target row's id: with FILE, names the row
ACTION = "__lakelog_action"  # (a merge) the number of the clause that applies to a row (-1: none)
MATCHED_KEYS_LIMIT = 10_000  # distinct matched source keys a merge brings to the driver for its inserts
ONE_MATCH_MESSAGE = (
    "the merge matched a target row with more than one source row, so it cannot tell which one to apply; "
    "nothing was committed. Deduplicate the source on the join keys (or make the condition match at most one source row)"
)

def normal_path(path: str, *, encoded: bool = True) -> str:
    """A Spark file path in one form: URI escapes decoded, ``file:///x`` as ``file:/x``. ``encoded``:
    the path is a URI as Spark reports it (``_metadata.file_path``); False for a path built from a
    decoded relative path (``spark_path``), whose ``%`` are the file name's own (Hive-escaped partition
    directories such as ``p=a%2Fb``)."""
    p = urllib.parse.unquote(path) if encoded else path
    if p.startswith("file://"):
        p = "file:/" + p[len("file://"):].lstrip("/")
    return p


def typed_task_error(e: BaseException) -> BaseException:
    """The lakelog error a Spark task raised, typed again for the driver (Spark reports it as its own
    exception with the task's traceback in the text): IdentityOverflowError; else ``e``."""
    found = re.search(r"lakelog\.errors\.IdentityOverflowError: ([^\n]*)", str(e))
    if found is None:
        return e
    column = re.match(r"identity column '([^']*)'", found.group(1))
    return IdentityOverflowError(found.group(1), column.group(1) if column else None)


def task_result(files: list[str], counts: list[int]) -> pa.RecordBatch:
    """What a writing task yields: one row per file written (its action as JSON), one with its counts."""
    return pa.record_batch(
        [pa.array(files + [None], pa.string()), pa.array([None] * len(files) + [orjson.dumps(counts).decode()], pa.string())],
        names=["add", "counts"],
    )


def collected(rows) -> tuple[list[dict], list[int]]:
    """The files (action JSON) and summed counts the tasks of one job yielded (``task_result``)."""
    files, counts = [], []
    for r in rows:
        if r["add"] is not None:
            files.append(orjson.loads(r["add"]))
        else:
            part = orjson.loads(r["counts"])
            counts = [a + b for a, b in zip(counts, part)] if counts else list(part)
    return files, counts


def stable_ids(b: pa.RecordBatch, kinds: np.ndarray | None, tracking: tuple[str, str], bases: dict[str, tuple[int, int]]) -> tuple[pa.Array, pa.Array]:
    """(row ids, row commit versions) to materialize for rows ``b`` (carrying TRACKING columns): a row read
    from a file keeps its stored id, else its file's ``baseRowId`` + its position; a copied row also
    keeps its commit version (stored, else the file's ``defaultRowCommitVersion``); new rows get nulls
    (their fresh ids, assigned at commit, are their stable ones)."""
    if RT_FILE not in b.schema.names:
        raise LakelogError("rows written to a row-tracking table came without the columns that carry their row ids; nothing was committed")
    files = b.column(RT_FILE)
    coded = pc.dictionary_encode(files)
    per_file = []
    for p in coded.dictionary.to_pylist():
        known = bases.get(normal_path(p))
        if known is None:
            raise LakelogError(f"Spark read {p!r}, which is not a file this operation read; nothing was committed")
        per_file.append(known)
    base = np.array([k[0] for k in per_file] or [0], dtype=np.int64)
    default = np.array([k[1] for k in per_file] or [0], dtype=np.int64)
    index = pc.fill_null(coded.indices, 0).to_numpy(zero_copy_only=False)
    read = np.asarray(files.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    rows = pc.fill_null(b.column(RT_ROW).cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    fresh = pa.array(base[index] + rows, mask=~read)
    ids = pc.coalesce(b.column(RT_ID).cast(pa.int64()), fresh)
    copied = read if kinds is None else read & (kinds == COPIED)
    versions = pc.coalesce(b.column(RT_VERSION).cast(pa.int64()), pa.array(default[index], mask=~read))
    versions = pc.if_else(pa.array(copied), versions, pa.nulls(b.num_rows, pa.int64()))
    return ids, versions


def writer_task(path: str, storage_options: dict | None, schema: pa.Schema, partition_columns: list[str], max_indexed_cols: int,
                 prefix: str, column_mapping=None, features=None, stats_columns: tuple[str, ...] = (),
                 tracking: tuple[str, str] | None = None, bases: dict[str, tuple[int, int]] | None = None,
                 partitions_in_files: bool = False) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function each Spark task runs: write its rows as new data files of the table; yield one
    row per file (its add action as JSON) and one with the task's row counts by KIND. New rows
    (updated, inserted) meet the table's writer ``features``; copied rows are written as they are.
    ``tracking``: the table's materialized row tracking columns, written from the rows' TRACKING
    columns and ``bases`` (each read file's normalized Spark path -> baseRowId, defaultRowCommitVersion)."""

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        name = task_file_prefix(prefix)
        feats = task_features(features)
        writer = DataWriter(Storage(path, storage_options), writer_schema(schema, tracking), partition_columns, max_indexed_cols, name,
                            column_mapping=column_mapping, stats_columns=stats_columns, extra_columns=tracking or (),
                            partitions_in_files=partitions_in_files)
        computed = feats.computed if feats is not None else ()
        counts = [0, 0, 0]

        def write(rows: pa.RecordBatch, ids: tuple[pa.Array, pa.Array] | None, keep: np.ndarray | None = None) -> None:
            if ids is not None:  # (the materialized columns, after the table's: the writer's extra columns)
                got = ids if keep is None else tuple(a.filter(pa.array(keep)) for a in ids)
                rows = pa.RecordBatch.from_arrays(list(rows.columns) + list(got), schema=writer_schema(rows.schema, tracking))
            writer.write(rows)

        try:
            for b in batches:
                if b.num_rows == 0:
                    continue
                kinds = b.column(KIND).to_numpy(zero_copy_only=False) if KIND in b.schema.names else None
                ids = stable_ids(b, kinds, tracking, bases or {}) if tracking is not None else None
                if kinds is not None:
                    for k, n in enumerate(np.bincount(kinds, minlength=3)[:3]):
                        counts[k] += int(n)
                    if feats is not None:
                        new = kinds != COPIED
                        write(cast_batch(b.filter(pa.array(~new)).select(schema.names), schema), ids, ~new)
                        b = b.filter(pa.array(new))
                        if b.num_rows:
                            write(feats.apply(cast_batch(b.select(schema.names), schema, computed)), ids, new)
                        continue
                else:
                    counts[COPIED] += b.num_rows
                write(cast_batch(b.select(schema.names), schema), ids)
            adds = writer.finish()
        except BaseException:
            writer.abort()
            raise
        yield task_result([orjson.dumps(a.to_json()["add"]).decode() for a in adds], counts)

    return task


def change_task(path: str, storage_options: dict | None, schema: pa.Schema, partition_columns: list[str], column_mapping, kind: str,
                 features) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function each Spark task runs to write change data files (lakelog's ``ChangeRecorder``): its
    rows as changes of ``kind``, with the writer ``features`` applied first when given; yields one row
    per file (its cdc action as JSON) and one with its row count."""

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        recorder = ChangeRecorder(Storage(path, storage_options), schema, partition_columns, column_mapping)
        try:
            for b in batches:
                if features is not None and b.num_rows:
                    b = features.apply(cast_batch(b.select(schema.names), schema, features.computed))
                recorder.record(b, kind)
            files = recorder.finish()
        except BaseException:
            recorder.abort()
            raise
        yield task_result([orjson.dumps(c.to_json()["cdc"]).decode() for c in files], [recorder.counts[kind]])

    return task


def rewrite_task(state: TableState, files: dict[str, AddFile], threads: int, columns: list[str] | None,
                  features, one_match: bool = False, prefix: str = "part") -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function each Spark task runs to rewrite its files (FILE, ROWS: the file row indexes that go,
    or with ``columns``: structs of a row index and those columns' new values) without those rows, or
    with them updated, with lakelog's copy-on-write (``lakelog.dml.file_rewrites``): copied rows never
    leave Arrow. Yields one row per file written (its add action as JSON), one per file read (its Spark
    path, rows deleted or updated, of which updated) and one with the rows copied and, where the entries
    carry MATCHED_KEYS, the distinct ones as a JSON list (null past MATCHED_KEYS_LIMIT). ``one_match``:
    a row index listed twice (a merge matched the row with two source rows) fails the task before it
    writes. Updated rows without an identity value draw values as ``writer_task``'s rows do."""

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        changes, read, n_updated = [], [], []
        keys: set | None = set()
        for b in batches:
            lists = b.column(ROWS)
            offsets = lists.offsets.to_numpy()
            entries = lists.values
            positions = (entries if columns is None else entries.field(ROW)).to_numpy(zero_copy_only=False).astype(np.int64)
            for i, spark_file in enumerate(b.column(FILE).to_pylist()):
                add = files.get(normal_path(spark_file))
                if add is None:
                    raise LakelogError(f"Spark read {spark_file!r}, which is not a file this operation read; nothing was committed")
                at = positions[offsets[i]:offsets[i + 1]]
                order = np.argsort(at, kind="stable")  # (collect_list keeps no order)
                if one_match and len(at) > 1 and not np.all(np.diff(at[order])):
                    raise MultipleSourceMatchesError(ONE_MATCH_MESSAGE)
                values = None
                updated = len(at) if columns is not None else 0
                if columns is not None:
                    part = entries.slice(offsets[i], offsets[i + 1] - offsets[i]).take(pa.array(order))
                    values = pa.table([part.field(c) for c in columns], names=columns)
                    if keys is not None and MATCHED_KEYS in part.type.names:
                        keys.update(k for k in part.field(MATCHED_KEYS).unique().to_pylist() if k is not None)
                        if len(keys) > MATCHED_KEYS_LIMIT:
                            keys = None
                    if UPDATE_FLAG in part.type.names:  # (a merge: rows deleted and rows updated)
                        flag = np.asarray(part.field(UPDATE_FLAG).to_numpy(zero_copy_only=False), dtype=bool)
                        values = NewValues(values.filter(pa.array(flag)), at[order][flag])
                        updated = int(flag.sum())
                    else:
                        values = NewValues(values)
                changes.append((add, at[order], values))
                read.append(spark_file)
                n_updated.append(updated)
        name = task_file_prefix(prefix)
        feats = task_features(features)
        done = rewrite_without(state, changes, threads, feats, name)
        n = len(done.adds)
        yield pa.record_batch([
            pa.array([orjson.dumps(a.to_json()["add"]).decode() for a in done.adds] + [None] * (len(read) + 1), pa.string()),
            pa.array([None] * n + read + [None], pa.string()),
            pa.array([0] * n + [len(rows) for _, rows, _ in changes] + [done.copied_rows], pa.int64()),
            pa.array([0] * n + n_updated + [0], pa.int64()),
            pa.array([None] * (n + len(read)) + [None if keys is None else orjson.dumps(sorted(keys)).decode()], pa.string()),
        ], names=["add", "file", "n", "updated", "keys"])

    return task

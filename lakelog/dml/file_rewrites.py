"""Copy-on-write rewrites run by the workers of a distributed row-level operation whose driver commits.

The driver (e.g. Spark's, which evaluates the condition and the new values) knows which rows of which
files go or change; each worker rewrites its share of those files, exactly as ``lakelog.Table.delete``
and ``update`` do (column mapping, deletion vectors, row ids and dictionary encodings kept), and
returns the new files. Nothing is committed here: the driver removes the old files and adds the new
ones in its one commit, and deletes the new files if it does not commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..actions import AddFile, DomainMetadata, Metadata, Protocol
from ..file_set import FileSet
from ..log import DeltaLog
from ..snapshot import Snapshot
from ..storage import Storage
from ..writer_features import WriterFeatures
from .copy_on_write import CopyOnWrite, NewValues
from .rewrite import RowLevelOperation


@dataclass
class TableState:
    """What a worker needs of the driver's snapshot to read and write its files (not the file list)."""

    path: str
    storage_options: dict[str, Any] | None
    version: int
    protocol: Protocol
    metadata: Metadata
    domains: dict[str, DomainMetadata]

    @classmethod
    def of(cls, snapshot: Snapshot, storage_options: dict[str, Any] | None) -> "TableState":
        return cls(snapshot.storage.location, storage_options, snapshot.version, snapshot.protocol, snapshot.metadata, dict(snapshot.domains))

    def snapshot(self) -> Snapshot:
        storage = Storage(self.path, self.storage_options)
        return Snapshot(storage, DeltaLog(storage), self.version, self.protocol, self.metadata, FileSet(), domains=dict(self.domains))


@dataclass
class Rewritten:
    """A worker's outcome: the new files, and rows copied into them."""

    adds: list[AddFile]
    copied_rows: int


def rewrite_without(state: TableState, deletions: list[tuple[AddFile, np.ndarray, NewValues | None]], threads: int = 1,
                    features: WriterFeatures | None = None, file_prefix: str = "part") -> Rewritten:
    """Rewrite each file without the rows at its (ascending) file row indexes, on ``threads`` threads; a
    file losing every row is written as nothing. Where ``NewValues`` are given, those rows are written
    updated instead (the rest of each row as the file has it), meeting ``features`` (the table's writer
    features for the assigned columns; None: the table's own). New files' names start with
    ``file_prefix``-. On an error the files written so far are deleted."""
    snapshot = state.snapshot()
    op = RowLevelOperation(snapshot.storage, snapshot=snapshot, worker=True)
    op.threads = max(1, threads)
    op.file_prefix = file_prefix
    if features is not None:
        op.features = features
    deleter = op.deleter
    if not isinstance(deleter, CopyOnWrite):
        raise RuntimeError("rewrite_without is for copy-on-write tables (deletion vectors mark rows instead)")
    try:
        for add, rows, values in deletions:
            deleter.delete_rows(add, np.asarray(rows, dtype=np.int64), None, op.num_rows(add),
                                replacement=values)
        adds = deleter.finish()
    except BaseException:
        op.abort()
        raise
    op.close()
    return Rewritten(adds, deleter.copied_rows)

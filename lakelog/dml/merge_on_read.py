"""Merge-on-read row deletion: rows are marked deleted in deletion vectors instead of rewriting files.

Used by row-level operations on tables with ``delta.enableDeletionVectors=true`` and the
``deletionVectors`` feature. Per touched data file the commit has ``remove(path, old DV)`` and
``add(path, new DV)``, the new DV being the union of the file's old deleted rows and the new ones; a
file all of whose rows are deleted is only removed. The new DVs of one commit share one ``u`` DV file
in the table root. The re-added file keeps its stats with ``numRecords`` counting the physical rows
and ``tightBounds`` false (its min/max are still bounds of the live rows), as the protocol requires
and Spark writes. Updated rows (``replacement``) go to new files through the operation's writer.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from ..actions import AddFile, decode_path, stats_dict
from ..read.data_files import physical_rows
from ..table_features.deletion_vectors import write_deletion_vectors
from ..errors import LakelogError


class MergeOnRead:
    """The ``RowDeleter`` of deletion-vector tables (same interface as ``CopyOnWrite``)."""

    def __init__(self, op: Any):
        self.op = op
        self.copied_rows = 0  # nothing is copied
        self._marks: dict[str, tuple[AddFile, list[np.ndarray]]] = {}
        self._dv_file: str | None = None
        self.readded = 0
        self.dv_metrics = {"numDeletionVectorsAdded": 0, "numDeletionVectorsRemoved": 0, "numDeletionVectorsUpdated": 0}

    def delete_rows(self, add: AddFile, rows: np.ndarray, content: pa.Table | None = None, num_rows: int | None = None,
                    replacement: pa.Table | None = None, known: pa.Table | None = None) -> None:
        """Mark file row indexes ``rows`` of ``add`` deleted; ``replacement`` rows are written to new files
        (``content`` and ``num_rows`` are not needed: the file is not rewritten)."""
        if len(rows) == 0:
            return
        if replacement is not None and replacement.num_rows:
            self.op.write(replacement)
        path = decode_path(add.path)
        self.op.read_files[path] = add
        self._marks.setdefault(path, (add, []))[1].append(np.asarray(rows, dtype=np.uint64))

    def finish(self) -> list[AddFile]:
        """Write the commit's DV file and return the re-added files (same path, new DV)."""
        pending: list[tuple[AddFile, np.ndarray, int]] = []
        for add, parts in self._marks.values():
            old = self.op.deletion_vectors.rows(add)
            rows = np.unique(np.concatenate(parts + ([old] if old is not None else [])))
            n = physical_rows(self.op.storage, add)
            self.op.remove(add)
            if len(rows) >= n:
                if add.deletion_vector is not None:
                    self.dv_metrics["numDeletionVectorsRemoved"] += 1
                continue  # every row is deleted: the file just goes
            key = "numDeletionVectorsUpdated" if add.deletion_vector is not None else "numDeletionVectorsAdded"
            self.dv_metrics[key] += 1
            pending.append((add, rows, n))
        self._marks = {}
        self._dv_file, descriptors = write_deletion_vectors(self.op.storage, [rows for _, rows, _ in pending])
        adds = []
        for (add, _, n), dv in zip(pending, descriptors):
            stats = stats_dict(add.stats) or {}
            stats["numRecords"] = n
            stats["tightBounds"] = False
            adds.append(replace(add, data_change=True, stats=orjson.dumps(stats).decode(), deletion_vector=dv))
        self.readded = len(adds)
        return adds

    def abort(self) -> list[AddFile]:
        """Nothing runs in the background; the DV file (if written) is deleted by ``discard``."""
        return []

    def discard(self) -> None:
        """Delete the DV file written for a commit that did not happen."""
        if self._dv_file is not None:
            try:
                self.op.storage.delete(self.op.storage.join(self._dv_file))
            except (OSError, LakelogError):
                pass
            self._dv_file = None

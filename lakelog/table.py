"""``Table``: a committed snapshot of a table, opened at the latest version, a version or a timestamp."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

from . import scan
from .actions import CommitInfo, Metadata, Protocol
from .checkpoint import write_checkpoint
from .log import DeltaLog
from .snapshot import Snapshot
from .storage import Storage


class Table:
    """A lakelog (Delta) table at one version.

    ``version`` or ``timestamp`` (datetime or ISO string; naive means UTC) pick an older version.
    """

    def __init__(self, path: str, *, version: int | None = None, timestamp: Any = None, storage_options: dict[str, Any] | None = None):
        self.path = str(path)
        self.storage = Storage(self.path, storage_options)
        self._snapshot = Snapshot.load(self.storage, version=version, timestamp=timestamp)

    # ------------------------------------------------------------ state
    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def version(self) -> int:
        return self._snapshot.version

    @property
    def schema(self) -> pa.Schema:
        return self._snapshot.schema

    @property
    def partition_columns(self) -> list[str]:
        return self._snapshot.partition_columns

    @property
    def metadata(self) -> Metadata:
        return self._snapshot.metadata

    @property
    def protocol(self) -> Protocol:
        return self._snapshot.protocol

    def refresh(self) -> "Table":
        """Move to the latest version (reads only the commits added since)."""
        self._snapshot = self._snapshot.updated()
        return self

    # ------------------------------------------------------------ reads
    def files(self, filters: Any = None) -> list[str]:
        """Relative paths (decoded) of the data files that may hold rows matching ``filters``."""
        return scan.pruned_files(self._snapshot, filters)

    def to_pyarrow(self, columns: list[str] | None = None, filters: Any = None) -> pa.Table:
        return scan.to_table(self._snapshot, columns, filters)

    def to_pandas(self, columns: list[str] | None = None, filters: Any = None):
        return self.to_pyarrow(columns, filters).to_pandas()

    def to_pyarrow_dataset(self, filters: Any = None) -> ds.FileSystemDataset:
        """A pyarrow dataset (partition values as columns), usable from DuckDB and Polars."""
        return scan.dataset(self._snapshot, filters)

    def history(self, limit: int | None = None) -> list[dict]:
        """Commit history, newest first: version, timestamp, operation, parameters and the rest of commitInfo."""
        listing = self._snapshot.listing or DeltaLog(self.storage).list()
        times = listing.commit_timestamps()
        versions = sorted((v for v in listing.commits if v <= self.version), reverse=True)
        if limit is not None:
            versions = versions[:limit]
        commits = self._snapshot.log.read_commits(versions)
        out = []
        for v in versions:
            info = next((a.info for a in commits[v] if isinstance(a, CommitInfo)), {})
            entry = dict(info)
            entry["version"] = v
            entry["timestamp"] = dt.datetime.fromtimestamp(times[v] / 1000, dt.timezone.utc)
            entry["commit_timestamp"] = info.get("timestamp")
            entry["operation"] = info.get("operation")
            entry["parameters"] = info.get("operationParameters", {})
            out.append(entry)
        return out

    # ------------------------------------------------------------ maintenance
    def checkpoint(self) -> int:
        """Write a checkpoint for this table's version; returns the version."""
        return write_checkpoint(self._snapshot)

    def __repr__(self) -> str:
        return f"Table({self.path!r}, version={self.version})"


def read_table(
    path: str,
    *,
    version: int | None = None,
    timestamp: Any = None,
    columns: list[str] | None = None,
    filters: Any = None,
    storage_options: dict[str, Any] | None = None,
) -> pa.Table:
    """Read the committed snapshot (latest, or at ``version``/``timestamp``) as a pyarrow Table."""
    return Table(path, version=version, timestamp=timestamp, storage_options=storage_options).to_pyarrow(columns, filters)

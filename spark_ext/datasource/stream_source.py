"""``spark.readStream.format("lakelog")``: the rows of the files each new version adds, in bounded
micro-batches.

Offsets are positions in one ordered sequence of files: the files of the starting snapshot (sorted by
modification time, then path, as Delta does), then the data-changing adds of each later version in
log order. An offset ``{"version": v, "index": i, "snapshot": s}`` is the next file to emit: file ``i``
of version ``v`` (of the snapshot at ``v`` when ``s``). A version that is exhausted is always written as
``(v + 1, 0)``, so equal positions have equal offsets. Committed versions never change, so the files
between two offsets are the same whenever they are planned again (Spark replays a batch from its
offset log after a restart): each file lands in exactly one batch.

Admission control (PySpark 4.2+): Spark asks ``getDefaultReadLimit()`` once and then calls
``latestOffset(start, limit)`` with that limit, or with ``ReadAllAvailable`` where the trigger demands
everything (``Trigger.Once``). PySpark passes a single ``ReadLimit`` (``ReadMaxFiles``/``ReadMaxBytes``,
no composite), so the default limit names one of the two options and ``latestOffset`` applies both
options whenever the engine passes any limit other than ``ReadAllAvailable``. ``Trigger.AvailableNow``
is honoured through ``SupportsTriggerAvailableNow``: the latest version when the query starts is the
end, reached in bounded batches.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxBytes, ReadMaxFiles, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

import lakelog
from lakelog.actions import AddFile, RemoveFile
from lakelog.errors import ConflictingBoundsError, LakelogError, VersionNotFoundError
from lakelog.log.delta_log import DeltaLog
from lakelog.log.snapshot import commit_times
from lakelog.log.versions import to_epoch_ms
from lakelog.storage import Storage

from . import options as opt
from ..scan.files import MAX_PARTITION_BYTES, FilesPartition, read_files, split

DEFAULT_MAX_FILES = 1000  # as Delta's maxFilesPerTrigger
COMMITS_PER_READ = 100  # versions fetched per bulk read of the log
CACHED_VERSIONS = 4096


@dataclass(frozen=True)
class Position:
    """The next file to emit: file ``index`` of version ``version`` (of its snapshot when ``snapshot``)."""

    version: int
    index: int = 0
    snapshot: bool = False

    def to_offset(self) -> dict:
        return {"version": self.version, "index": self.index, "snapshot": self.snapshot}

    @classmethod
    def from_offset(cls, d: dict) -> "Position":
        if "index" not in d:
            # Offsets written before rate limits: {"version": last version read, "snapshot": snapshot
            # version still to read, or -1}; always at a version boundary.
            version, snap = int(d["version"]), int(d.get("snapshot", -1))
            return cls(snap, 0, True) if version < 0 and snap >= 0 else cls(version + 1)
        return cls(int(d["version"]), int(d["index"]), bool(d.get("snapshot", False)))


class LakelogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Streaming source; options are described in the module docstring and in README.md."""

    def __init__(self, options, schema: StructType):
        self.path = opt.table_path(options)
        self.storage_options = opt.storage_options(options)
        self.output_schema = to_arrow_schema(schema, timezone="UTC")
        self.starting_version = options.get("startingVersion")
        if self.starting_version is not None and str(self.starting_version).strip().lower() != "latest":
            self.starting_version = opt.version(options, "startingVersion")
        self.starting_timestamp = options.get("startingTimestamp")
        if self.starting_version is not None and self.starting_timestamp is not None:
            raise ConflictingBoundsError("set either option startingVersion or startingTimestamp, not both", [("startingVersion", "startingTimestamp")])
        self.skip_change_commits = opt.boolean(options, "skipChangeCommits")
        self.ignore_deletes = opt.boolean(options, "ignoreDeletes")
        self.max_files = opt.positive_int(options, "maxFilesPerTrigger")
        self.max_bytes = opt.byte_size(options, "maxBytesPerTrigger")
        if self.max_files is None and self.max_bytes is None:
            self.max_files = DEFAULT_MAX_FILES
        self.max_partition_bytes = int(options.get("maxPartitionBytes", MAX_PARTITION_BYTES))
        table = lakelog.Table(self.path, storage_options=self.storage_options)
        self.table_schema, self.partition_columns = table.schema, table.partition_columns
        self.mapping = table.snapshot.column_mapping
        self.storage = table.storage
        self.log = DeltaLog(self.storage)
        self.target: int | None = None  # Trigger.AvailableNow: the last version to read
        self._commits: dict[int, list] = {}
        self._snapshot_files: tuple[int, list[AddFile]] | None = None

    # ------------------------------------------------------------ offsets

    def initialOffset(self) -> dict:
        if self.starting_timestamp is not None:
            return Position(self._version_at_or_after(self.starting_timestamp)).to_offset()
        if self.starting_version is None:
            return Position(self._latest(), 0, True).to_offset()
        if isinstance(self.starting_version, str):  # "latest": only what is committed from now on
            return Position(self._latest() + 1).to_offset()
        return Position(self.starting_version).to_offset()

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxFiles(self.max_files) if self.max_files is not None else ReadMaxBytes(self.max_bytes)

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._latest()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        pos = Position.from_offset(start)
        max_files = max_bytes = None
        if not isinstance(limit, ReadAllAvailable):
            max_files, max_bytes = self.max_files, self.max_bytes
            if isinstance(limit, ReadMaxFiles):
                max_files = min(limit.max_files, max_files or limit.max_files)
            elif isinstance(limit, ReadMaxBytes):
                max_bytes = min(limit.max_bytes, max_bytes or limit.max_bytes)
        end = self.target if self.target is not None else self._latest()
        files = size = 0
        for after, add in self._walk(pos, end):
            if add is not None:
                # Soft byte limit, as Delta: a batch always takes at least one file.
                if (max_files is not None and files >= max_files) or (max_bytes is not None and files and size >= max_bytes):
                    break
                files += 1
                size += add.size
            pos = after
        return pos.to_offset()

    def reportLatestOffset(self) -> dict:
        return Position(self._latest() + 1).to_offset()

    # ------------------------------------------------------------ batches

    def partitions(self, start: dict, end: dict):
        first, last = Position.from_offset(start), Position.from_offset(end)
        if first == last:
            return []
        files: list[dict] = []
        reached = False
        # (v, 0) outside a snapshot is the start of version v, which need not exist yet.
        bound = last.version if (last.index or last.snapshot) else last.version - 1
        for after, add in self._walk(first, bound):
            if add is not None:
                files.append(add.to_json()["add"])
            if after == last:
                reached = True
                break
        if not reached:
            raise LakelogError(
                f"the stream offsets {start} .. {end} do not match the log of {self.path}: were versions removed "
                "or the table replaced? Restart the query with a new checkpointLocation."
            )
        return split(files, self.max_partition_bytes) if files else []

    def read(self, partition: FilesPartition) -> Iterator[pa.RecordBatch]:
        return read_files(self.path, self.storage_options, self.table_schema, self.partition_columns, self.output_schema, partition.files, None, self.mapping)

    def commit(self, end: dict) -> None:
        pos = Position.from_offset(end)
        for v in [v for v in self._commits if v < pos.version]:
            del self._commits[v]  # Spark never plans before a committed offset again

    # ------------------------------------------------------------ the file sequence

    def _latest(self) -> int:
        return self.log.list().latest_version

    def _version_at_or_after(self, timestamp) -> int:
        """Delta's startingTimestamp: the first version committed at or after ``timestamp``."""
        try:
            ts = to_epoch_ms(timestamp)
        except (TypeError, ValueError):
            raise LakelogError(f"option startingTimestamp={timestamp!r} is not a date or timestamp (ISO-8601, e.g. '2026-01-31T12:00:00Z')") from None
        # in-commit timestamps where the table has them, commit file times elsewhere
        times = commit_times(lakelog.Table(self.path, storage_options=self.storage_options).snapshot)
        first = times.first_at_or_after(ts)
        if first is None:
            latest = times.versions[-1]
            when = dt.datetime.fromtimestamp(times.time(latest) / 1000, dt.timezone.utc).isoformat()
            raise VersionNotFoundError(
                f"startingTimestamp {timestamp!r} is after the latest commit of {self.path} (version {latest} at {when}); "
                "use a timestamp at or before it, or startingVersion='latest' to read only new data"
            )
        return first

    def _snapshot(self, version: int) -> list[AddFile]:
        if self._snapshot_files is None or self._snapshot_files[0] != version:
            snap = lakelog.Table(self.path, version=version, storage_options=self.storage_options).snapshot
            files = sorted(snap.files.values(), key=lambda a: (a.modification_time, a.path))
            self._snapshot_files = (version, files)
        return self._snapshot_files[1]

    def _commit(self, version: int, last: int) -> list:
        if version not in self._commits:
            if len(self._commits) >= CACHED_VERSIONS:
                self._commits.clear()
            present = self.log.list().commits
            if version not in present:
                raise VersionNotFoundError(
                    f"version {version} of {self.path} is no longer in the log (log cleanup removed it), so the stream "
                    "cannot go on from its offset. Restart with a new checkpointLocation and a startingVersion."
                )
            wanted = [v for v in range(version, min(last, version + COMMITS_PER_READ - 1) + 1) if v in present]
            self._commits.update(self.log.read_commits(wanted))
        return self._commits[version]

    def _data_adds(self, version: int, actions: list) -> list[AddFile]:
        """The files version ``version`` contributes to the stream (Delta's rules for changes)."""
        removes = [a for a in actions if isinstance(a, RemoveFile) and a.data_change]
        adds = [a for a in actions if isinstance(a, AddFile) and a.data_change]
        if not removes:
            return adds
        if self.skip_change_commits:
            return []
        if not adds and self.ignore_deletes:
            return []
        hint = "Set option skipChangeCommits=true to skip versions that remove or rewrite data"
        if not adds:
            hint += ", or ignoreDeletes=true to skip versions that only delete files"
        raise LakelogError(
            f"version {version} of {self.path} {'rewrites' if adds else 'deletes'} data (removes {removes[0].path!r}); "
            f"a streaming source only follows appends. {hint}."
        )

    def _walk(self, pos: Position, last: int) -> Iterator[tuple[Position, AddFile | None]]:
        """From ``pos`` through version ``last``: (position after the item, add or None). None items mark
        versions that contribute no file, so offsets can move past them."""
        if pos.snapshot:
            files = self._snapshot(pos.version)
            for i in range(pos.index, len(files)):
                yield (Position(pos.version, i + 1, True) if i + 1 < len(files) else Position(pos.version + 1)), files[i]
            if not files:
                yield Position(pos.version + 1), None
            pos = Position(pos.version + 1)
        for v in range(pos.version, last + 1):
            adds = self._data_adds(v, self._commit(v, last))
            start = pos.index if v == pos.version else 0
            for i in range(start, len(adds)):
                yield (Position(v, i + 1) if i + 1 < len(adds) else Position(v + 1)), adds[i]
            if start >= len(adds):
                yield Position(v + 1), None


__all__ = ["LakelogStreamReader", "Position", "DEFAULT_MAX_FILES"]

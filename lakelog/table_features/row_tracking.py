"""Row tracking (Delta's ``rowTracking`` feature): row ids and row commit versions.

Every file a commit adds gets a ``baseRowId`` (its rows' fresh ids are ``baseRowId`` + physical row
index) above the ``delta.rowTracking`` domain's ``rowIdHighWaterMark``, and a ``defaultRowCommitVersion``
(the commit's version). Both only exist in the log, so they are assigned at commit time, per attempt:
a commit that loses a race takes ids above the winner's high water mark. Re-added files (a new deletion
vector, a restore) keep theirs.

When row tracking is *enabled* (``delta.enableRowTracking``), rows keep their stable ids when they are
copied or updated, and their commit versions when copied: a rewrite writes them into the hidden
materialized columns the table's configuration names (null means "the file's default").
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

import orjson
import pyarrow as pa

from ..actions import Action, AddFile, DomainMetadata, Metadata, Protocol
from ..errors import CorruptLogError
from .properties import TableProperties

FEATURE = "rowTracking"
DOMAIN = "delta.rowTracking"
ENABLE = "delta.enableRowTracking"
SUSPENDED = "delta.rowTrackingSuspended"
ROW_ID_COLUMN = "delta.rowTracking.materializedRowIdColumnName"
COMMIT_VERSION_COLUMN = "delta.rowTracking.materializedRowCommitVersionColumnName"
# The columns reads add when asked for row tracking (Spark's _metadata.row_id and row_commit_version).
ROW_ID = "_row_id"
ROW_COMMIT_VERSION = "_row_commit_version"


def assigns(protocol: Protocol | None, metadata: Metadata | None) -> bool:
    """Whether writers assign row ids: the feature is supported and row tracking not suspended."""
    if protocol is None or FEATURE not in (protocol.writer_features or []):
        return False
    return not (metadata is not None and TableProperties(metadata.configuration).get(SUSPENDED))


def enabled(metadata: Metadata | None) -> bool:
    """Whether row tracking is enabled (``delta.enableRowTracking``): stable ids are kept through rewrites."""
    return metadata is not None and bool(TableProperties(metadata.configuration).get(ENABLE))


def materialized_columns(metadata: Metadata | None) -> tuple[str, str] | None:
    """(row id column, row commit version column) physical names when row tracking is enabled."""
    if not enabled(metadata):
        return None
    conf = metadata.configuration
    row_id, version = conf.get(ROW_ID_COLUMN), conf.get(COMMIT_VERSION_COLUMN)
    if not row_id or not version:
        raise CorruptLogError(f"the table enables row tracking but its configuration lacks {ROW_ID_COLUMN} or {COMMIT_VERSION_COLUMN}")
    return row_id, version


def configure(new: dict[str, str], current: dict[str, str] | None) -> dict[str, str]:
    """``new`` table properties plus the materialized column names when they enable row tracking on a
    table that has none yet (unique names, as Spark gives them)."""
    conf = {**(current or {}), **new}
    if not TableProperties(conf).get(ENABLE) or (conf.get(ROW_ID_COLUMN) and conf.get(COMMIT_VERSION_COLUMN)):
        return new
    return {**new, ROW_ID_COLUMN: f"_row-id-col-{uuid.uuid4()}", COMMIT_VERSION_COLUMN: f"_row-commit-version-col-{uuid.uuid4()}"}


def backfill(files: Any) -> list[AddFile]:
    """The live files without row ids, re-added (``dataChange`` false) so that the commit enabling row
    tracking assigns them ids, as the protocol requires of that version."""
    return [replace(a, data_change=False) for a in files if a.base_row_id is None or a.default_row_commit_version is None]


def high_water_mark(domains: dict[str, DomainMetadata] | None) -> int:
    """The ``rowIdHighWaterMark`` of the ``delta.rowTracking`` domain (-1: no id assigned yet)."""
    d = (domains or {}).get(DOMAIN)
    return -1 if d is None or d.removed else _mark(d)


def _mark(d: DomainMetadata) -> int:
    try:
        value = orjson.loads(d.configuration)["rowIdHighWaterMark"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        raise CorruptLogError(f"the {DOMAIN} domain's configuration has no rowIdHighWaterMark: {d.configuration!r}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise CorruptLogError(f"the {DOMAIN} domain's rowIdHighWaterMark is not an integer: {value!r}")
    return value


def committed_mark(actions: list[Action]) -> int | None:
    """The high water mark a commit's actions set (None: they set none)."""
    marks = [_mark(a) for a in actions if isinstance(a, DomainMetadata) and a.domain == DOMAIN and not a.removed]
    return max(marks) if marks else None


def assign(actions: list[Action], version: int, mark: int, physical_rows) -> list[Action]:
    """``actions`` with a ``baseRowId`` above ``mark`` and ``defaultRowCommitVersion`` = ``version`` on every
    add lacking them, and the domain's new high water mark; unchanged when nothing was assigned.
    ``physical_rows(add)``: the rows physically in a file (``data_files.physical_rows``)."""
    out: list[Action] = []
    start = mark
    for a in actions:
        if isinstance(a, AddFile) and (a.base_row_id is None or a.default_row_commit_version is None):
            changes: dict[str, int] = {}
            if a.base_row_id is None:
                n = physical_rows(a)
                changes["base_row_id"] = mark + 1
                mark += max(n, 1)  # (an empty file still takes an id: ids stay strictly increasing per file)
            if a.default_row_commit_version is None:
                changes["default_row_commit_version"] = version
            a = replace(a, **changes)
        if isinstance(a, DomainMetadata) and a.domain == DOMAIN:
            continue  # set below, from the ids actually assigned
        out.append(a)
    if mark == start:
        return actions
    out.append(DomainMetadata(DOMAIN, orjson.dumps({"rowIdHighWaterMark": mark}).decode(), False))
    return out


def writer_schema(schema: pa.Schema, materialized: tuple[str, str] | None) -> pa.Schema:
    """The schema files are written with: the table's, then the materialized columns (when enabled)."""
    if materialized is None:
        return schema
    return pa.schema(list(schema) + [pa.field(name, pa.int64()) for name in materialized])


def row_ids(add: AddFile, positions: pa.Array | pa.ChunkedArray, stored: pa.Table | None, materialized: tuple[str, str]) -> tuple[pa.Array, pa.Array]:
    """(row ids, row commit versions) of rows at physical ``positions`` of ``add``'s file: the values of the
    ``materialized`` columns in ``stored`` (the rows' columns as read; a file may lack them) where not null,
    else ``baseRowId`` + position and ``defaultRowCommitVersion``."""
    import pyarrow.compute as pc

    base_row_id, default_version = add.base_row_id, add.default_row_commit_version
    if base_row_id is None or default_version is None:
        raise CorruptLogError(f"data file {add.path!r} of a table with row tracking enabled has no baseRowId or defaultRowCommitVersion")

    def column(name: str) -> pa.Array | None:
        return stored.column(name).combine_chunks() if stored is not None and name in stored.column_names else None

    materialized_id, materialized_version = column(materialized[0]), column(materialized[1])
    if isinstance(positions, pa.ChunkedArray):
        positions = positions.combine_chunks()
    fresh = pc.add(positions.cast(pa.int64()), pa.scalar(base_row_id, pa.int64()))
    ids = fresh if materialized_id is None else pc.coalesce(materialized_id.cast(pa.int64()), fresh)
    default = pa.scalar(default_version, pa.int64())
    versions = pa.repeat(default, len(positions)) if materialized_version is None else pc.coalesce(materialized_version.cast(pa.int64()), default)
    return ids, versions

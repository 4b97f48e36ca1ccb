"""Version checksum files (``_delta_log/n.crc``, the protocol's "Version Checksum File"): one JSON object
describing the table at version ``n``: its ``protocol``, ``metadata``, ``numFiles`` and ``tableSizeBytes``
(the count and total ``size`` of the live ``add`` actions), ``numProtocol`` and ``numMetadata`` (both 1),
and optionally ``allFiles`` (the live ``add`` actions themselves; Delta writes them for tables of up to
50 files, and so does lakelog).

Opening a table whose newest protocol and metadata are only in a Parquet checkpoint takes them from the
newest checksum at or after that checkpoint instead, as Delta's readers do, so the checkpoint (and a
Parquet reader) is needed only when the table's files are. A checksum that is absent or does not parse
is ignored (the checkpoint is read as before). lakelog writes one beside each checkpoint it writes
(``lakelog.log.checkpoint.write``).
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Iterable
from typing import TYPE_CHECKING

import orjson

from ..actions import Metadata, Protocol

if TYPE_CHECKING:
    from ..storage import Storage


def checksum_name(version: int) -> str:
    return f"{version:020d}.crc"


@dataclass(frozen=True)
class Checksum:
    """What lakelog uses of a version checksum file."""

    version: int
    protocol: Protocol
    metadata: Metadata
    num_files: int
    table_size_bytes: int
    all_files: list[dict] | None = None  # ``allFiles`` (the live ``add`` actions), when given and consistent with the counts

    @property
    def name(self) -> str:
        return checksum_name(self.version)


def read_checksum(storage: Storage, version: int) -> Checksum | None:
    """``version``'s checksum file; None when it is absent or is not a checksum as the protocol defines
    one (not one JSON object, a required field missing or mistyped)."""
    try:
        data = storage.read(storage.log_file(checksum_name(version)))
    except FileNotFoundError:
        return None
    try:
        d = orjson.loads(data)
        if not isinstance(d, dict) or not isinstance(d.get("protocol"), dict) or not isinstance(d.get("metadata"), dict):
            return None
        counts = [d.get(k) for k in ("numFiles", "tableSizeBytes", "numProtocol", "numMetadata")]
        if any(type(c) is not int or c < 0 for c in counts) or counts[2] != 1 or counts[3] != 1:
            return None
        return Checksum(version, Protocol.from_json(d["protocol"]), Metadata.from_json(d["metadata"]), counts[0], counts[1], _all_files(d, counts))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
        return None


def newest_checksum(storage: Storage, versions: Iterable[int], since: int, until: int | None = None) -> Checksum | None:
    """The checksum file of the newest of ``versions`` (the listed checksum files) from ``since`` to ``until``
    (inclusive; None: the latest); None when there is none or it is not a checksum (``read_checksum``)."""
    newest = max((v for v in versions if since <= v and (until is None or v <= until)), default=None)
    return None if newest is None else read_checksum(storage, newest)


def _all_files(d: dict, counts: list[int]) -> list[dict] | None:
    """``allFiles`` when it is a list of objects that ``numFiles`` and ``tableSizeBytes`` count; else None
    (the checksum is still used for its protocol and metadata)."""
    files = d.get("allFiles")
    if not isinstance(files, list) or len(files) != counts[0] or not all(type(f) is dict for f in files):
        return None
    sizes = [f.get("size") for f in files]
    return files if all(type(n) is int for n in sizes) and sum(sizes) == counts[1] else None

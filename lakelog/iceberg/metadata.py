"""The Iceberg table metadata file (``metadata/v<N>.metadata.json``) and ``metadata/version-hint.text``,
as Iceberg's file-system tables (HadoopTables) lay them out: readers without a catalog read the hint,
then the metadata file it names."""

from __future__ import annotations

import orjson

from ..errors import CorruptLogError
from ..storage import Storage
from .files import write_file

METADATA_DIR = "metadata"
HINT = "version-hint.text"
DELTA_VERSION = "delta-version"
DELTA_TIMESTAMP = "delta-timestamp"
NAME_MAPPING = "schema.name-mapping.default"
PREVIOUS_VERSIONS_MAX = 100

# The metadata this process wrote last, per file: {full path: (size, mtime, parsed JSON)}. A metadata file
# is never rewritten (created exclusively), so while its size and time are unchanged the next commit
# reuses the parse instead of reading back and parsing a file that grows with the snapshot history.
_WRITTEN: dict[str, tuple[int, object, dict]] = {}


def metadata_name(n: int) -> str:
    return f"v{n}.metadata.json"


class IcebergMetadata:
    """Iceberg format-version 2 table metadata (its JSON as a dict, ``raw``) and its number ``n``
    (0: not written yet)."""

    def __init__(self, raw: dict, n: int):
        self.raw = raw
        self.n = n

    @classmethod
    def new(cls, table_uuid: str, location: str) -> "IcebergMetadata":
        return cls({
            "format-version": 2, "table-uuid": table_uuid, "location": location, "last-sequence-number": 0,
            "last-updated-ms": 0, "last-column-id": 0, "current-schema-id": 0, "schemas": [], "default-spec-id": 0,
            "partition-specs": [], "last-partition-id": 999, "default-sort-order-id": 0,
            "sort-orders": [{"order-id": 0, "fields": []}], "properties": {}, "current-snapshot-id": -1,
            "refs": {}, "snapshots": [], "snapshot-log": [], "metadata-log": [],
        }, 0)

    # ------------------------------------------------------------ reading
    @property
    def uuid(self) -> str:
        return self.raw["table-uuid"]

    @property
    def delta_version(self) -> int | None:
        """The Delta version this metadata describes (its ``delta-version`` property)."""
        v = self.raw.get("properties", {}).get(DELTA_VERSION)
        try:
            return int(v) if v is not None else None
        except ValueError:
            return None

    def current_snapshot_id(self) -> int | None:
        sid = self.raw.get("current-snapshot-id")
        return None if sid in (None, -1) else sid

    def current_snapshot(self) -> dict | None:
        sid = self.current_snapshot_id()
        # newest first: the current snapshot is the last one added, save after a rollback by another writer
        return next((s for s in reversed(self.raw["snapshots"]) if s["snapshot-id"] == sid), None)

    def current_summary(self) -> dict:
        snap = self.current_snapshot()
        return snap.get("summary", {}) if snap else {}

    def current_schema_id(self) -> int:
        return self.raw["current-schema-id"]

    def schema(self, schema_id: int) -> dict:
        return next(s for s in self.raw["schemas"] if s["schema-id"] == schema_id)

    def spec(self, spec_id: int) -> dict:
        return next(s for s in self.raw["partition-specs"] if s["spec-id"] == spec_id)

    def next_sequence_number(self) -> int:
        return self.raw["last-sequence-number"] + 1

    # ------------------------------------------------------------ changes
    def ensure_schema(self, schema: dict, last_column_id: int) -> int:
        """Make ``schema`` current (reusing an equal earlier one); return its id."""
        for s in self.raw["schemas"]:
            if {k: v for k, v in s.items() if k != "schema-id"} == schema:
                sid = s["schema-id"]
                break
        else:
            sid = max((s["schema-id"] for s in self.raw["schemas"]), default=-1) + 1
            self.raw["schemas"].append({**schema, "schema-id": sid})
        self.raw["current-schema-id"] = sid
        self.raw["last-column-id"] = max(self.raw["last-column-id"], last_column_id)
        return sid

    def ensure_spec(self, fields: list[dict]) -> int:
        """Make the partition spec of ``fields`` the default (reusing an equal earlier one); return its id.
        A new spec's partition field ids continue after ``last-partition-id``."""
        def key(fs: list[dict]) -> list:
            return [(f["source-id"], f["transform"], f["name"]) for f in fs]

        for s in self.raw["partition-specs"]:
            if key(s["fields"]) == key(fields):
                self.raw["default-spec-id"] = s["spec-id"]
                return s["spec-id"]
        sid = max((s["spec-id"] for s in self.raw["partition-specs"]), default=-1) + 1
        last = self.raw["last-partition-id"]
        fields = [{**f, "field-id": last + 1 + i} for i, f in enumerate(fields)] if self.raw["partition-specs"] else fields
        self.raw["partition-specs"].append({"spec-id": sid, "fields": fields})
        self.raw["last-partition-id"] = max([last, *(f["field-id"] for f in fields)])
        self.raw["default-spec-id"] = sid
        return sid

    def set_property(self, key: str, value: str) -> None:
        self.raw["properties"][key] = value

    def add_snapshot(self, snap: dict) -> None:
        self.raw["snapshots"].append(snap)
        self.raw["current-snapshot-id"] = snap["snapshot-id"]
        self.raw["last-sequence-number"] = snap["sequence-number"]
        self.raw["last-updated-ms"] = max(self.raw["last-updated-ms"], snap["timestamp-ms"])
        self.raw["snapshot-log"].append({"snapshot-id": snap["snapshot-id"], "timestamp-ms": snap["timestamp-ms"]})
        self.raw["refs"]["main"] = {"snapshot-id": snap["snapshot-id"], "type": "branch"}

    def expire_before(self, cutoff_ms: int) -> None:
        """Drop the snapshots older than ``cutoff_ms``, never the current one (their versions leave the
        Delta log at that age too, with ``delta.logRetentionDuration``); keeps this file from growing
        with every version ever committed. Their manifest files stay: later snapshots may list them."""
        current = self.current_snapshot_id()
        keep = [s for s in self.raw["snapshots"] if s["timestamp-ms"] >= cutoff_ms or s["snapshot-id"] == current]
        if len(keep) == len(self.raw["snapshots"]):
            return
        ids = {s["snapshot-id"] for s in keep}
        self.raw["snapshots"] = keep
        self.raw["snapshot-log"] = [e for e in self.raw["snapshot-log"] if e["snapshot-id"] in ids]
        for s in keep:
            if s.get("parent-snapshot-id") not in ids:
                s.pop("parent-snapshot-id", None)

    def last_timestamp_ms(self) -> int:
        snap = self.current_snapshot()
        return snap["timestamp-ms"] if snap else 0


def _path(storage: Storage, name: str) -> str:
    return storage.join(METADATA_DIR, name)


def read_latest(storage: Storage) -> IcebergMetadata | None:
    """The newest Iceberg metadata of the table (None when there is none). The hint is written after
    the metadata file, so a newer file than the hint names is looked for too."""
    try:
        n = int(storage.read(_path(storage, HINT)).strip())
    except (FileNotFoundError, ValueError):
        n = 0
    while storage.exists(_path(storage, metadata_name(n + 1))):
        n += 1
    while n > 0:
        path = _path(storage, metadata_name(n))
        cached = _WRITTEN.pop(path, None)
        if cached is not None and _stamp(storage, path) == cached[:2]:
            return IcebergMetadata(cached[2], n)
        try:
            data = storage.read(path)
        except FileNotFoundError:  # a hint ahead of its file: look below it
            n -= 1
            continue
        try:
            return IcebergMetadata(orjson.loads(data), n)
        except orjson.JSONDecodeError:
            raise CorruptLogError(
                f"Iceberg metadata {_path(storage, metadata_name(n))} is not JSON; delete the metadata/ folder and run "
                "`lakelog uniform PATH` to write it again from the Delta log"
            ) from None
    return None


def write_next(storage: Storage, meta: IcebergMetadata, location: str, now_ms: int) -> None:
    """Write ``meta`` as the next metadata file, then the hint. FileExistsError when another writer
    wrote that number first (nothing of this call is visible then)."""
    n = meta.n + 1
    meta.raw["location"] = location  # the table's URL as this writer names it (earlier ones may have named it otherwise)
    if meta.n:
        log = meta.raw["metadata-log"]
        log.append({"timestamp-ms": now_ms, "metadata-file": f"{location}/{METADATA_DIR}/{metadata_name(meta.n)}"})
        del log[:-PREVIOUS_VERSIONS_MAX]
    path = _path(storage, metadata_name(n))
    write_file(storage, path, orjson.dumps(meta.raw), exclusive=True)
    meta.n = n
    stamp = _stamp(storage, path)
    if stamp is not None:
        _WRITTEN.clear()  # (one table's at a time: the common case is one table written per process)
        _WRITTEN[path] = (*stamp, meta.raw)
    write_file(storage, _path(storage, HINT), str(n).encode())


def _stamp(storage: Storage, path: str) -> tuple[int, object] | None:
    """(size, modification time) of a metadata file, None when it cannot be told."""
    try:
        info = storage.fs.info(path)
    except (FileNotFoundError, OSError):
        return None
    return info.get("size"), info.get("mtime", info.get("LastModified", info.get("last_modified")))

"""Iceberg format-version 2 manifests and manifest lists (their Avro schemas, with Iceberg's field ids,
and their records as plain dicts), and the partition summaries a manifest list carries. The Avro
container files are written and read by fastavro (imported with this module, only when a table has
UniForm on)."""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import io
import math
from typing import Any

import fastavro
import orjson

from .values import decimal_from_bytes, serialize, unscaled_bytes

ADDED, EXISTING, DELETED = 1, 0, 2


def _opt(name: str, t: Any, fid: int) -> dict:
    return {"name": name, "type": ["null", t], "default": None, "field-id": fid}


def _req(name: str, t: Any, fid: int) -> dict:
    return {"name": name, "type": t, "field-id": fid}


def _map(key_id: int, value_id: int, value: str) -> dict:
    return {"type": "array", "logicalType": "map", "items": {
        "type": "record", "name": f"k{key_id}_v{value_id}",
        "fields": [_req("key", "int", key_id), _req("value", value, value_id)],
    }}


def _list(element_id: int, t: str) -> dict:
    return {"type": "array", "items": t, "element-id": element_id}


MANIFEST_FILE = {"type": "record", "name": "manifest_file", "fields": [
    _req("manifest_path", "string", 500), _req("manifest_length", "long", 501), _req("partition_spec_id", "int", 502),
    _req("content", "int", 517), _req("sequence_number", "long", 515), _req("min_sequence_number", "long", 516),
    _req("added_snapshot_id", "long", 503), _req("added_files_count", "int", 504), _req("existing_files_count", "int", 505),
    _req("deleted_files_count", "int", 506), _req("added_rows_count", "long", 512), _req("existing_rows_count", "long", 513),
    _req("deleted_rows_count", "long", 514),
    _opt("partitions", {"type": "array", "element-id": 508, "items": {"type": "record", "name": "r508", "fields": [
        _req("contains_null", "boolean", 509), _opt("contains_nan", "boolean", 518),
        _opt("lower_bound", "bytes", 510), _opt("upper_bound", "bytes", 511),
    ]}}, 507),
    _opt("key_metadata", "bytes", 519),
]}


def decimal_size(precision: int) -> int:
    return next(n for n in range(1, 17) if 2 ** (8 * n - 1) > 10**precision)


def _avro_partition_type(t: str, fid: int) -> Any:
    if t == "date":
        return {"type": "int", "logicalType": "date"}
    if t in ("timestamp", "timestamptz"):
        return {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": t == "timestamptz"}
    if t.startswith("decimal("):
        p, s = (int(x) for x in t[8:-1].split(","))
        return {"type": "fixed", "name": f"fixed_{fid}", "size": decimal_size(p),  # Avro names are defined once
                "logicalType": "decimal", "precision": p, "scale": s}
    return {"binary": "bytes"}.get(t, t)


def manifest_entry_schema(partition_fields: list[tuple[str, int, str]]) -> dict:
    """The manifest entry schema of a spec whose partition fields are (name, field id, Iceberg type)."""
    partition = {"type": "record", "name": "r102",
                 "fields": [_opt(name, _avro_partition_type(t, fid), fid) for name, fid, t in partition_fields]}
    data_file = {"type": "record", "name": "r2", "fields": [
        _req("content", "int", 134), _req("file_path", "string", 100), _req("file_format", "string", 101),
        _req("partition", partition, 102), _req("record_count", "long", 103), _req("file_size_in_bytes", "long", 104),
        _opt("column_sizes", _map(117, 118, "long"), 108), _opt("value_counts", _map(119, 120, "long"), 109),
        _opt("null_value_counts", _map(121, 122, "long"), 110), _opt("nan_value_counts", _map(138, 139, "long"), 137),
        _opt("lower_bounds", _map(126, 127, "bytes"), 125), _opt("upper_bounds", _map(129, 130, "bytes"), 128),
        _opt("key_metadata", "bytes", 131), _opt("split_offsets", _list(133, "long"), 132),
        _opt("equality_ids", _list(136, "int"), 135), _opt("sort_order_id", "int", 140),
    ]}
    return {"type": "record", "name": "manifest_entry", "fields": [
        _req("status", "int", 0), _opt("snapshot_id", "long", 1), _opt("sequence_number", "long", 3),
        _opt("file_sequence_number", "long", 4), _req("data_file", data_file, 2),
    ]}


def as_pairs(m: dict[int, Any] | None) -> list[dict] | None:
    """An Iceberg int-keyed map in its Avro form (an array of key/value records)."""
    return None if not m else [{"key": k, "value": v} for k, v in sorted(m.items())]


def avro_name(name: str) -> str:
    """``name`` as an Avro field name, as Iceberg's Java library makes it (``AvroSchemaUtil.makeCompatibleName``):
    a leading digit becomes ``_<digit>``, other characters that are not letters, digits or ``_`` ``_x<HEX>``."""
    def fix(c: str) -> str:
        return "_" + c if c.isdigit() else f"_x{ord(c):X}"

    if name and (name[0].isalpha() or name[0] == "_") and all(c.isalnum() or c == "_" for c in name):
        return name
    return "".join(c if (c.isalpha() or c == "_" or (i and c.isdigit())) else fix(c) for i, c in enumerate(name))


class Spec:
    """A partition spec with what writing its manifests needs: (Avro field name, field id, type) per field."""

    def __init__(self, spec: dict, schema_fields: dict[int, str]):
        self.id = spec["spec-id"]
        self.json = spec
        self.fields = [(avro_name(f["name"]), f["field-id"], schema_fields[f["source-id"]]) for f in spec["fields"]]
        self.entry_schema = _parsed(orjson.dumps(manifest_entry_schema(self.fields)))  # keeps the ids in the header


@functools.lru_cache(maxsize=64)
def _parsed(schema_json: bytes) -> dict:
    """fastavro's parsed form of a manifest entry schema, made once per schema: parsing costs more than
    writing a commit's manifest."""
    return fastavro.parse_schema(orjson.loads(schema_json))


_MANIFEST_FILE_PARSED = fastavro.parse_schema(MANIFEST_FILE)
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = _EPOCH.replace(tzinfo=dt.timezone.utc)
_MICRO = dt.timedelta(microseconds=1)


def _write(schema: dict, records: list[dict], metadata: dict[str, str]) -> bytes:
    out = io.BytesIO()
    fastavro.writer(out, schema, records, codec="deflate", metadata=metadata, validator=False)
    return out.getvalue()


def _avro_value(v: Any, t: str) -> Any:
    """A partition value fastavro read as its logical type's Python object, as lakelog holds it (the
    Avro value: days, microseconds, a decimal's fixed bytes)."""
    if isinstance(v, dt.datetime):
        return (v - (_EPOCH_UTC if v.tzinfo else _EPOCH)) // _MICRO
    if isinstance(v, dt.date):
        return (v - _EPOCH.date()).days
    if isinstance(v, decimal.Decimal):
        p, s = (int(x) for x in t[8:-1].split(","))
        return unscaled_bytes(v, s, decimal_size(p))
    return v


def write_manifest(spec: Spec, schema_json: dict, entries: list[dict]) -> bytes:
    meta = {
        "schema": orjson.dumps(schema_json).decode(), "schema-id": str(schema_json["schema-id"]),
        "partition-spec": orjson.dumps(spec.json["fields"]).decode(), "partition-spec-id": str(spec.id),
        "format-version": "2", "content": "data",
    }
    return _write(spec.entry_schema, entries, meta)


def manifest_file(path: str, length: int, spec: Spec, sequence_number: int, snapshot_id: int, entries: list[dict]) -> dict:
    """The manifest list record of a manifest of ``entries`` written for ``snapshot_id``."""
    counts = {ADDED: [0, 0], EXISTING: [0, 0], DELETED: [0, 0]}
    live_seqs = []
    for e in entries:
        c = counts[e["status"]]
        c[0] += 1
        c[1] += e["data_file"]["record_count"]
        if e["status"] != DELETED:
            live_seqs.append(e["sequence_number"] if e["sequence_number"] is not None else sequence_number)
    return {
        "manifest_path": path, "manifest_length": length, "partition_spec_id": spec.id, "content": 0,
        "sequence_number": sequence_number, "min_sequence_number": min(live_seqs, default=sequence_number),
        "added_snapshot_id": snapshot_id,
        "added_files_count": counts[ADDED][0], "existing_files_count": counts[EXISTING][0], "deleted_files_count": counts[DELETED][0],
        "added_rows_count": counts[ADDED][1], "existing_rows_count": counts[EXISTING][1], "deleted_rows_count": counts[DELETED][1],
        "partitions": _summaries(spec, [e["data_file"]["partition"] for e in entries]), "key_metadata": None,
    }


def _summaries(spec: Spec, partitions: list[dict]) -> list[dict]:
    out = []
    for name, _, t in spec.fields:
        values = [p.get(name) for p in partitions]
        if t.startswith("decimal("):  # held as Avro fixed bytes: order them as numbers
            scale = int(t[8:-1].split(",")[1])
            values = [decimal_from_bytes(v, scale) if v is not None else None for v in values]
        present = [v for v in values if v is not None]
        nan = any(isinstance(v, float) and math.isnan(v) for v in present)
        ordered = [v for v in present if not (isinstance(v, float) and math.isnan(v))]
        out.append({
            "contains_null": len(present) < len(values),
            "contains_nan": nan if t in ("float", "double") else None,
            "lower_bound": serialize(min(ordered), t) if ordered else None,
            "upper_bound": serialize(max(ordered), t) if ordered else None,
        })
    return out


def write_manifest_list(manifests: list[dict], snapshot_id: int, parent_id: int | None, sequence_number: int) -> bytes:
    meta = {"snapshot-id": str(snapshot_id), "parent-snapshot-id": str(parent_id) if parent_id is not None else "null",
            "sequence-number": str(sequence_number), "format-version": "2"}
    return _write(_MANIFEST_FILE_PARSED, manifests, meta)


def read_manifest_list(data: bytes) -> list[dict]:
    return list(fastavro.reader(io.BytesIO(data)))


def read_entries(data: bytes, manifest: dict, spec: Spec) -> list[dict]:
    """A manifest's entries (of partition spec ``spec``), sequence numbers inherited from the manifest
    where the entry has none."""
    entries = list(fastavro.reader(io.BytesIO(data)))
    logical = [(name, t) for name, _, t in spec.fields if t in ("date", "timestamp", "timestamptz") or t.startswith("decimal(")]
    for e in entries:
        if logical:
            p = e["data_file"]["partition"]
            for name, t in logical:
                p[name] = _avro_value(p.get(name), t)
        if e["status"] == ADDED:
            if e.get("sequence_number") is None:
                e["sequence_number"] = manifest["sequence_number"]
            if e.get("file_sequence_number") is None:
                e["file_sequence_number"] = manifest["sequence_number"]
    return entries

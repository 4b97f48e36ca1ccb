"""Log fuzzer: mutate the commits and checkpoints of real tables, then read them every way a user can.

Two real tables (one written by lakelog, one by deltalake, each with checkpoints, overwrites and a
txn) are copied for every example and damaged by a few random mutations: fields dropped, retyped or
duplicated, actions injected or duplicated, lines truncated, commit files swapped, deleted or added
far in the future, checkpoints truncated or rewritten with a row or column changed, the
``_last_checkpoint`` hint garbled. Then every read runs under a time limit:

* opening the table, ``to_pyarrow()``, ``files(filters)``, a filtered ``to_pyarrow``, ``history()``,
  time travel by version and by timestamp;
* each either succeeds or raises a ``LakelogError``: nothing untyped, nothing that hangs;
* a read that succeeds returns what the mutated log says: the rows of its live files, as an
  independent reference replay in this file computes them (and, for mutations that change nothing a
  reader may use, the rows of the undamaged table);
* ``check_table`` never raises and reports a problem whenever a read of the version it checks failed.

The default run is short and seeded (deterministic); ``LAKELOG_FUZZ_EXAMPLES=N`` runs N examples with a
random seed (``LAKELOG_FUZZ_SEED`` fixes it).
"""

from __future__ import annotations

import datetime as dt
import io
import os
import re
import shutil
import signal
import tempfile
import time
import warnings
import contextlib
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import lakelog
from lakelog.check import check_table
from lakelog.errors import LakelogError, SchemaMismatchError, TableNotFoundError

EXAMPLES = int(os.environ.get("LAKELOG_FUZZ_EXAMPLES", "0") or 0)
SEED = os.environ.get("LAKELOG_FUZZ_SEED")
READ_TIMEOUT_S = 30
COMMIT_RE = re.compile(r"^(\d{20})\.json$")
CHECKPOINT_RE = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
FILTER = [("id", ">=", 4)]


# ---------------------------------------------------------------- the base tables


def _rows(first: int, n: int, p: str | None, q: int | None) -> pa.Table:
    ids = list(range(first, first + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "s": pa.array([f"s{i}" if i % 3 else None for i in ids], pa.string()),
            "ts": pa.array([dt.datetime(2026, 1, 1, i % 24, tzinfo=dt.timezone.utc) for i in ids], pa.timestamp("us", tz="UTC")),
            "p": pa.array([p] * n, pa.string()),
            "q": pa.array([q] * n, pa.int32()),
        }
    )


def _lakelog_table(path: str) -> None:
    conf = {"delta.checkpointInterval": "2"}
    lakelog.write_table(path, _rows(0, 3, "a", 1), partition_by=["p", "q"], configuration=conf)  # 0
    lakelog.write_table(path, _rows(3, 2, "b b", None))  # 1
    lakelog.write_table(path, _rows(5, 2, "50%", 2), app_id="job", app_version=1)  # 2 + checkpoint
    lakelog.write_table(path, _rows(7, 3, "a", 1), mode="overwrite")  # 3
    lakelog.write_table(path, _rows(10, 2, None, 3))  # 4 + checkpoint
    lakelog.write_table(path, _rows(12, 2, "a", 1))  # 5
    lakelog.Table(path).optimize()  # 6: removes and adds with dataChange=false (+ checkpoint)
    lakelog.write_table(path, _rows(14, 2, "c", 4))  # 7: read by JSON replay after the last checkpoint


def _deltalake_table(path: str) -> None:
    from deltalake import DeltaTable, write_deltalake

    write_deltalake(path, _rows(0, 3, "a", 1), partition_by=["p"])  # 0
    write_deltalake(path, _rows(3, 2, "b", 2), mode="append")  # 1
    write_deltalake(path, _rows(5, 2, "a", 3), mode="overwrite")  # 2
    DeltaTable(path).create_checkpoint()
    write_deltalake(path, _rows(7, 2, "c", None), mode="append")  # 3
    write_deltalake(path, _rows(9, 2, "a", 4), mode="append")  # 4


@pytest.fixture(scope="module")
def base_tables(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("fuzz-base")
    out = {}
    for name, make in (("lakelog", _lakelog_table), ("deltalake", _deltalake_table)):
        out[name] = str(root / name)
        make(out[name])
    return out


# ---------------------------------------------------------------- raw access to the copy


def _log_dir(path: str) -> str:
    return os.path.join(path, "_delta_log")


def _versions(path: str, pattern: re.Pattern) -> list[int]:
    return sorted(int(m.group(1)) for n in os.listdir(_log_dir(path)) if (m := pattern.match(n)))


def _commit_file(path: str, v: int) -> str:
    return os.path.join(_log_dir(path), f"{v:020d}.json")


def _checkpoint_file(path: str, v: int) -> str:
    return os.path.join(_log_dir(path), f"{v:020d}.checkpoint.parquet")


def _rewrite(full: str, data: bytes) -> None:
    """Replace a file's content, keeping its modification time (commit times stay as they were)."""
    st_ = os.stat(full)
    with open(full, "wb") as f:
        f.write(data)
    os.utime(full, ns=(st_.st_atime_ns, st_.st_mtime_ns))


def _lines(path: str, v: int) -> list[bytes]:
    with open(_commit_file(path, v), "rb") as f:
        return [line for line in f.read().split(b"\n") if line.strip()]


def _set_lines(path: str, v: int, lines: list[bytes]) -> None:
    _rewrite(_commit_file(path, v), b"".join(line + b"\n" for line in lines))


def _pick(seq: list, k: int):
    return seq[k % len(seq)] if seq else None


# ---------------------------------------------------------------- mutations

JSON_VALUES = st.sampled_from([None, 0, -1, 2**63, 1.5, "", "x", "a/../b", True, False, [], {}, [1], {"a": 1}, "1", "true", "[1]", "null", "{}"])
NON_NUMBERS = st.sampled_from([None, "", "x", [], {}, [1], {"a": "b"}, "12"])  # no JSON number or boolean: stats must never lie
SELECT = st.integers(-3, 10**6)  # negative: counted from the end, so the newest commits and lines come up often


def _walk_fields(obj: Any, prefix: tuple = ()) -> list[tuple]:
    """Paths of every field of an action (nested objects included, stats excluded: mutated separately)."""
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.append(prefix + (k,))
            if k != "stats":
                out.extend(_walk_fields(v, prefix + (k,)))
    return out


def _set_in(obj: dict, path: tuple, value: Any, drop: bool) -> None:
    for k in path[:-1]:
        obj = obj[k]
    if drop:
        obj.pop(path[-1], None)
    else:
        obj[path[-1]] = value


def _edit_action(path: str, v: int, line_k: int, field_k: int, value: Any, drop: bool) -> str:
    lines = _lines(path, v)
    if not lines:
        return "noop"
    i = line_k % len(lines)
    try:
        obj = orjson.loads(lines[i])
    except orjson.JSONDecodeError:
        return "noop"
    fields = _walk_fields(obj)
    if not fields:
        return "noop"
    field = fields[field_k % len(fields)]
    _set_in(obj, field, value, drop)
    lines[i] = orjson.dumps(obj)
    _set_lines(path, v, lines)
    return f"{'drop' if drop else 'retype'} {'.'.join(map(str, field))} in {v}:{i}" + ("" if drop else f" = {value!r}")


def _edit_stats(path: str, v: int, line_k: int, field_k: int, value: Any) -> str:
    lines = _lines(path, v)
    adds = [i for i, line in enumerate(lines) if b'"stats"' in line]
    if not adds:
        return "noop"
    i = _pick(adds, line_k)
    try:
        obj = orjson.loads(lines[i])
        action = obj.get("add") or obj.get("remove")
        stats = orjson.loads(action["stats"])
    except (orjson.JSONDecodeError, TypeError, KeyError, AttributeError):
        return "noop"
    if not isinstance(stats, dict):
        return "noop"
    # Half the time a top-level field (numRecords, minValues, ...): whole sections retyped.
    fields = [(k,) for k in stats] if field_k % 2 else _walk_fields(stats)
    if not fields:
        return "noop"
    field = fields[(field_k // 2) % len(fields)]
    _set_in(stats, field, value, False)
    action["stats"] = orjson.dumps(stats).decode()
    lines[i] = orjson.dumps(obj)
    _set_lines(path, v, lines)
    return f"stats {'.'.join(field)} = {value!r} in {v}:{i}"


def _edit_schema(path: str, v: int, field_k: int, how: int, type_k: int) -> str:
    """Commit ``v`` changes the schema the way a careless writer might, without rewriting any data file:
    the table's metaData (from the first commit that has one) with a column dropped, renamed, retyped or
    made non-nullable, added to commit ``v``."""
    meta = None
    for c in _versions(path, COMMIT_RE):
        for line in _lines(path, c):
            try:
                obj = orjson.loads(line)
                meta, schema = obj["metaData"], orjson.loads(obj["metaData"]["schemaString"])
                fields = schema["fields"]
                break
            except (orjson.JSONDecodeError, TypeError, KeyError):
                continue
        if meta is not None:
            break
    if meta is None or not fields:
        return "noop"
    f = fields[field_k % len(fields)]
    how %= 4
    if how == 0:
        fields.remove(f)
        what = f"drop column {f['name']}"
    elif how == 1:
        f["name"] = f["name"] + "_renamed"
        what = f"rename column {f['name']}"
    elif how == 2:
        f["type"] = _pick(list(TYPES), type_k)
        what = f"column {f['name']} as {f['type']}"
    else:
        f["nullable"] = False
        what = f"column {f['name']} not nullable"
    meta["schemaString"] = orjson.dumps(schema).decode()
    lines = [line for line in _lines(path, v) if b'"metaData"' not in line]
    _set_lines(path, v, lines + [orjson.dumps({"metaData": meta})])
    return f"schema change in {v}: {what}"


def _live_paths(path: str) -> list[str]:
    """Paths (as logged) of adds anywhere in the JSON log, for injected actions that name real files."""
    out = []
    for v in _versions(path, COMMIT_RE):
        for line in _lines(path, v):
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(obj, dict) and isinstance(obj.get("add"), dict) and isinstance(obj["add"].get("path"), str):
                out.append(obj["add"]["path"])
    return out


def _injected(path: str, kind: int, k: int) -> dict:
    real = _pick(_live_paths(path), k) or "part-x.parquet"
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    catalog = [
        {"add": {"path": real, "partitionValues": {"p": "a", "q": "1"}, "size": 1, "modificationTime": 1, "dataChange": True}},
        {"add": {"path": "missing.parquet", "partitionValues": {"p": "zz", "q": "7"}, "size": 1, "modificationTime": 1, "dataChange": True}},
        {"remove": {"path": real, "deletionTimestamp": 1, "dataChange": True}},
        {"remove": {"path": "never-added.parquet", "deletionTimestamp": 1, "dataChange": True}},
        {"domainMetadata": {"domain": "x", "configuration": "{}", "removed": False}},
        {"cdc": {"path": "_change_data/c.parquet", "partitionValues": {}, "size": 1, "dataChange": False}},
        {"somethingNew": {"a": 1}},
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["madeUp"], "writerFeatures": ["madeUp"]}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["madeUp"]}},
        {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}},
        {"metaData": {"id": "x", "format": {"provider": "parquet", "options": {}}, "schemaString": orjson.dumps(schema).decode(), "partitionColumns": [], "configuration": {}, "createdTime": 1}},
        {"metaData": {"id": "x", "format": {"provider": "parquet"}, "schemaString": "{\"type\":\"struct\",\"fields\":[{\"name\":\"id\",\"type\":\"decimal(50,2)\",\"nullable\":true}]}", "partitionColumns": []}},
        {"metaData": {"id": "x", "schemaString": orjson.dumps(schema).decode(), "partitionColumns": ["p"], "configuration": {"delta.columnMapping.mode": "name"}}},
        {"txn": {"appId": "job", "version": 99, "lastUpdated": 1}},
        {"commitInfo": {"operation": "WRITE", "timestamp": "yesterday", "operationParameters": [1]}},
        {"add": {"path": "", "partitionValues": {}, "size": 0, "modificationTime": 0, "dataChange": True}},
        {"add": {"path": real, "partitionValues": {"p": "a", "q": "1"}, "size": 1, "modificationTime": 1, "dataChange": True, "deletionVector": {"storageType": "u", "pathOrInlineDv": "x", "offset": 1, "sizeInBytes": 1, "cardinality": 1}}},
    ]
    return catalog[kind % len(catalog)]


def _checkpoint_rewrite(path: str, v: int, how: int, k: int) -> str:
    full = _checkpoint_file(path, v)
    try:
        table = pq.read_table(full)
    except Exception:  # noqa: BLE001 - already damaged by another mutation
        return "noop"
    how %= 5
    if how == 0:  # drop one row
        if table.num_rows < 2:
            return "noop"
        i = k % table.num_rows
        table = pa.concat_tables([table.slice(0, i), table.slice(i + 1)])
        what = f"drop row {i}"
    elif how == 1:  # one action column all null
        name = _pick(table.column_names, k)
        table = table.set_column(table.column_names.index(name), name, pa.nulls(table.num_rows, table.schema.field(name).type))
        what = f"null column {name}"
    elif how == 2:  # add.size / add.path / add.partitionValues as another type
        if "add" not in table.column_names:
            return "noop"
        adds = table.column("add").combine_chunks()
        names = [adds.type.field(i).name for i in range(adds.type.num_fields)]
        target = _pick(["size", "path", "partitionValues", "modificationTime"], k)
        if target not in names:
            return "noop"
        child = adds.field(target)
        replacement = {
            "size": lambda: pc.cast(child, pa.string()),
            "path": lambda: pa.array([None if x is None else 7 for x in child.to_pylist()], pa.int64()),
            "partitionValues": lambda: pa.array([None] * len(child), pa.string()),
            "modificationTime": lambda: pa.array(["x"] * len(child), pa.string()),
        }[target]()
        fields = [pa.field(n, replacement.type if n == target else adds.type.field(n).type) for n in names]
        arrays = [replacement if n == target else adds.field(n) for n in names]
        rebuilt = pa.StructArray.from_arrays(arrays, fields=fields, mask=pc.invert(adds.is_valid()))
        table = table.set_column(table.column_names.index("add"), "add", rebuilt)
        what = f"add.{target} retyped"
    elif how == 3:  # a column missing
        name = _pick(table.column_names, k)
        table = table.drop_columns([name])
        what = f"drop column {name}"
    else:  # every row twice
        table = pa.concat_tables([table, table])
        what = "rows twice"
    buf = io.BytesIO()
    try:
        pq.write_table(table, buf)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return "noop"  # e.g. nulls in a field the checkpoint's schema declares non-nullable
    _rewrite(full, buf.getvalue())
    return f"checkpoint {v}: {what}"


MUTATION = st.one_of(
    st.tuples(st.just("drop_field"), SELECT, SELECT, SELECT),
    st.tuples(st.just("retype_field"), SELECT, SELECT, SELECT, JSON_VALUES),
    st.tuples(st.just("retype_stats"), SELECT, SELECT, SELECT, NON_NUMBERS),
    st.tuples(st.just("duplicate_line"), SELECT, SELECT),
    st.tuples(st.just("duplicate_key"), SELECT, SELECT),
    st.tuples(st.just("inject"), SELECT, SELECT, SELECT),
    st.tuples(st.just("edit_schema"), SELECT, SELECT, SELECT, SELECT),
    st.tuples(st.just("truncate"), SELECT, SELECT),
    st.tuples(st.just("swap_versions"), SELECT, SELECT),
    st.tuples(st.just("delete_commit"), SELECT),
    st.tuples(st.just("stray_commit"), st.sampled_from([99999999999999999999, 10**12, 10**18]), SELECT),
    st.tuples(st.just("checkpoint_bytes"), SELECT, st.sampled_from(["truncate", "garbage", "empty", "delete"])),
    st.tuples(st.just("checkpoint_rewrite"), SELECT, SELECT, SELECT),
    st.tuples(st.just("last_checkpoint"), st.sampled_from([b"", b"{", b'{"version": 999}', b'{"version": "x"}', b"[]"])),
)

# Mutations that change nothing a reader may use: the table must read exactly as before.
HARMLESS = {"last_checkpoint"}


def _apply(path: str, m: tuple) -> str:
    kind = m[0]
    commits = _versions(path, COMMIT_RE)
    checkpoints = _versions(path, CHECKPOINT_RE)
    if kind in ("drop_field", "retype_field"):
        v = _pick(commits, m[1])
        return "noop" if v is None else _edit_action(path, v, m[2], m[3], m[4] if kind == "retype_field" else None, kind == "drop_field")
    if kind == "edit_schema":
        v = _pick(commits, m[1])
        return "noop" if v is None else _edit_schema(path, v, m[2], m[3], m[4])
    if kind == "retype_stats":
        v = _pick(commits, m[1])
        return "noop" if v is None else _edit_stats(path, v, m[2], m[3], m[4])
    if kind == "duplicate_line":
        v = _pick(commits, m[1])
        lines = _lines(path, v) if v is not None else []
        if not lines:
            return "noop"
        i = m[2] % len(lines)
        _set_lines(path, v, lines[: i + 1] + [lines[i]] + lines[i + 1 :])
        return f"duplicate line {v}:{i}"
    if kind == "duplicate_key":  # {"add": {...}, "add": {...}}: JSON parsers keep one of them
        v = _pick(commits, m[1])
        lines = _lines(path, v) if v is not None else []
        if not lines:
            return "noop"
        i = m[2] % len(lines)
        line = lines[i].strip()
        if not (line.startswith(b"{") and line.endswith(b"}")):
            return "noop"
        lines[i] = line[:-1] + b"," + line[1:]
        _set_lines(path, v, lines)
        return f"duplicate keys in {v}:{i}"
    if kind == "inject":
        v = _pick(commits, m[1])
        if v is None:
            return "noop"
        action = _injected(path, m[2], m[3])
        lines = _lines(path, v)
        _set_lines(path, v, lines + [orjson.dumps(action)])
        return f"inject into {v}: {action}"
    if kind == "truncate":
        v = _pick(commits, m[1])
        if v is None:
            return "noop"
        with open(_commit_file(path, v), "rb") as f:
            data = f.read()
        cut = m[2] % max(len(data), 1)
        _rewrite(_commit_file(path, v), data[:cut])
        return f"truncate {v} at {cut}/{len(data)}"
    if kind == "swap_versions":
        a, b = _pick(commits, m[1]), _pick(commits, m[2])
        if a is None or a == b:
            return "noop"
        with open(_commit_file(path, a), "rb") as f:
            da = f.read()
        with open(_commit_file(path, b), "rb") as f:
            db = f.read()
        _rewrite(_commit_file(path, a), db)
        _rewrite(_commit_file(path, b), da)
        return f"swap {a} <-> {b}"
    if kind == "delete_commit":
        v = _pick(commits, m[1])
        if v is None:
            return "noop"
        os.remove(_commit_file(path, v))
        return f"delete commit {v}"
    if kind == "stray_commit":
        src = _pick(commits, m[2])
        if src is None or src == m[1]:
            return "noop"
        shutil.copyfile(_commit_file(path, src), _commit_file(path, m[1]))
        return f"stray commit {m[1]} (a copy of {src})"
    if kind == "checkpoint_bytes":
        v = _pick(checkpoints, m[1])
        if v is None:
            return "noop"
        full = _checkpoint_file(path, v)
        if m[2] == "delete":
            os.remove(full)
        else:
            with open(full, "rb") as f:
                data = f.read()
            _rewrite(full, {"truncate": data[: len(data) // 2], "garbage": b"PAR1garbage", "empty": b""}[m[2]])
        return f"checkpoint {v}: {m[2]}"
    if kind == "checkpoint_rewrite":
        v = _pick(checkpoints, m[1])
        return "noop" if v is None else _checkpoint_rewrite(path, v, m[2], m[3])
    if kind == "last_checkpoint":
        with open(os.path.join(_log_dir(path), "_last_checkpoint"), "wb") as f:
            f.write(m[1])
        return f"_last_checkpoint = {m[1]!r}"
    raise AssertionError(kind)


# ---------------------------------------------------------------- the reference replay


class Invalid(Exception):
    """The reference finds the log (or a data file) unusable: a reader must raise, not return rows."""


def _ref_path(p: Any) -> str:
    if not isinstance(p, str) or "://" in p or p.startswith(("/", "\\")) or (len(p) > 1 and p[1] == ":"):
        raise Invalid(f"bad path {p!r}")
    try:
        rel = unquote(p, errors="strict")
    except UnicodeDecodeError:
        raise Invalid(f"bad path {p!r}") from None
    if rel.startswith("/") or any(s in ("", ".", "..") for s in rel.replace("\\", "/").split("/")) or "\x00" in rel:
        raise Invalid(f"bad path {p!r}")
    return rel


def _ref_text(v: Any) -> str | None:
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return orjson.dumps(v).decode()
    raise Invalid(f"partition value {v!r}")


TYPES = {"long": pa.int64(), "integer": pa.int32(), "string": pa.string(), "timestamp": pa.timestamp("us", tz="UTC"), "date": pa.date32()}


def _ref_schema(schema_string: Any) -> list[tuple[str, pa.DataType]]:
    try:
        d = orjson.loads(schema_string)
        fields = [(f["name"], TYPES[f["type"]]) for f in d["fields"]]
    except Exception:  # noqa: BLE001 - anything else is outside what the base tables hold
        raise Invalid("schema") from None
    if len({n.lower() for n, _ in fields}) != len(fields) or not all(isinstance(n, str) and n for n, _ in fields):
        raise Invalid("schema names")
    return fields


class _Ref:
    def __init__(self) -> None:
        self.protocol: dict | None = None
        self.metadata: dict | None = None
        self.files: dict[str, dict] = {}  # decoded path -> partitionValues (as text)

    def apply_commit(self, data: bytes) -> None:
        if not data.strip():
            raise Invalid("empty commit")
        added, removed = set(), set()
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                raise Invalid("torn line") from None
            if not isinstance(obj, dict):
                raise Invalid("line not an object")
            for key, value in obj.items():
                if value is None or key not in ("add", "remove", "metaData", "protocol"):
                    continue
                if not isinstance(value, dict):
                    raise Invalid(f"{key} not an object")
                if key == "add":
                    if value.get("deletionVector"):
                        raise Invalid("deletion vector")
                    rel = _ref_path(value.get("path"))
                    pv = value.get("partitionValues")
                    if not isinstance(pv, dict):
                        raise Invalid("partitionValues")
                    if rel in added or rel in removed:
                        raise Invalid("file named twice in a commit")
                    added.add(rel)
                    self.files[rel] = {k: _ref_text(x) for k, x in pv.items()}
                elif key == "remove":
                    rel = _ref_path(value.get("path"))
                    if rel in added or rel in removed:
                        raise Invalid("file named twice in a commit")
                    removed.add(rel)
                    self.files.pop(rel, None)
                elif key == "metaData":
                    self.metadata = value
                else:
                    self.protocol = value

    def apply_checkpoint(self, table: pa.Table) -> None:
        if "protocol" not in table.column_names or "metaData" not in table.column_names:
            raise Invalid("checkpoint columns")
        protocols = [p for p in table.column("protocol").to_pylist() if p is not None]
        metas = [m for m in table.column("metaData").to_pylist() if m is not None]
        if not protocols or not metas:
            raise Invalid("checkpoint without protocol/metaData")
        self.protocol, self.metadata = protocols[-1], metas[-1]
        if isinstance(self.metadata.get("configuration"), list):
            self.metadata["configuration"] = dict(self.metadata["configuration"])
        removed = set()
        if "remove" in table.column_names:
            for r in table.column("remove").to_pylist():
                if r is not None:
                    removed.add(_ref_path(r.get("path")))
        if "add" in table.column_names:
            for a in table.column("add").to_pylist():
                if a is None:
                    continue
                rel = _ref_path(a.get("path"))
                pv = a.get("partitionValues")
                if rel in removed or rel in self.files:
                    raise Invalid("checkpoint names a file twice")  # the protocol's primary-key rule
                self.files[rel] = {} if pv is None else {k: _ref_text(x) for k, x in dict(pv).items()}

    def check_usable(self) -> None:
        p, m = self.protocol, self.metadata
        if p is None or m is None:
            raise Invalid("no protocol or metaData")
        reader, writer = p.get("minReaderVersion"), p.get("minWriterVersion")
        if not isinstance(reader, int) or isinstance(reader, bool) or reader > 3 or not isinstance(writer, int):
            raise Invalid("reader version")
        if reader == 3 and not set(p.get("readerFeatures") or []) <= {"timestampNtz", "vacuumProtocolCheck"}:
            raise Invalid("reader features")
        conf = m.get("configuration") or {}
        if isinstance(conf, dict) and conf.get("delta.columnMapping.mode") not in (None, "none"):
            raise Invalid("column mapping")


def _ref_snapshot(path: str, version: int | None, start: int) -> _Ref:
    """Replay from checkpoint ``start`` (-1: from the first commit) to ``version`` (None: the latest)."""
    commits, checkpoints = _versions(path, COMMIT_RE), _versions(path, CHECKPOINT_RE)
    if not commits and not checkpoints:
        raise Invalid("no table")
    target = max(commits + checkpoints) if version is None else version
    ref = _Ref()
    if start >= 0:
        try:
            ref.apply_checkpoint(pq.read_table(_checkpoint_file(path, start)))
        except Invalid:
            raise
        except Exception:  # noqa: BLE001 - not readable as a checkpoint at all
            raise Invalid(f"checkpoint {start}") from None
    if target - start > 10**4 or any(v not in commits for v in range(start + 1, target + 1)):
        raise Invalid("gap")
    for v in range(start + 1, target + 1):
        with open(_commit_file(path, v), "rb") as f:
            ref.apply_commit(f.read())
    ref.check_usable()
    return ref


def _starts(path: str, version: int | None) -> list[int]:
    """Where a reader may start replaying ``version``: any checkpoint at or before it, or the first commit.
    A damaged checkpoint may be skipped for an older one or the JSON commits (the protocol allows it), so
    every start gives an acceptable answer; a reader that reads must match one of them."""
    commits, checkpoints = _versions(path, COMMIT_RE), _versions(path, CHECKPOINT_RE)
    target = max(commits + checkpoints, default=-1) if version is None else version
    return sorted((c for c in checkpoints if c <= target), reverse=True) + [-1]


def _ref_partition_value(text: str | None, t: pa.DataType) -> Any:
    if text is None or text == "":
        return None
    try:
        if pa.types.is_string(t):
            return text
        if pa.types.is_integer(t):
            n = int(text)
            if not -(2 ** (t.bit_width - 1)) <= n < 2 ** (t.bit_width - 1):
                raise ValueError(text)
            return n
    except ValueError:
        raise Invalid(f"partition value {text!r}") from None
    raise Invalid(f"partition type {t}")


def _ref_rows(path: str, version: int | None = None, start: int | None = None) -> list[tuple]:
    """The rows the (mutated) log says version ``version`` has, replayed from ``start`` (default: the
    newest checkpoint the reference can read) and read straight from the data files."""
    if start is None:
        return _ref_answers(path, version)[0]
    ref = _ref_snapshot(path, version, start)
    fields = _ref_schema(ref.metadata.get("schemaString"))
    parts = ref.metadata.get("partitionColumns") or []
    names = [n for n, _ in fields]
    if not isinstance(parts, list) or any(c not in names for c in parts) or len(set(parts)) != len(parts):
        raise Invalid("partition columns")
    rows = []
    for rel, pv in ref.files.items():
        full = os.path.join(path, rel)
        if not os.path.isfile(full):
            raise Invalid(f"missing data file {rel}")
        try:
            data = pq.read_table(full)
        except Exception:  # noqa: BLE001
            raise Invalid(f"unreadable data file {rel}") from None
        cols = []
        for name, t in fields:
            if name in parts:
                if name not in pv:
                    raise Invalid("partition value missing")
                value = _ref_partition_value(pv[name], t)
                cols.append([value] * data.num_rows)
            elif name in data.column_names:
                try:
                    cols.append(data.column(name).cast(t).to_pylist())
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                    raise Invalid(f"column {name} of {rel} does not cast") from None
            else:
                cols.append([None] * data.num_rows)
        rows.extend(zip(*cols))
    return sorted(rows, key=repr)


def _ref_answers(path: str, version: int | None) -> list[list[tuple]]:
    """Every acceptable answer for ``version`` (one per usable start); Invalid when there is none."""
    answers, why = [], []
    for start in _starts(path, version):
        try:
            answers.append(_ref_rows(path, version, start))
        except Invalid as e:
            why.append(f"from {start}: {e}")
    if not answers:
        raise Invalid("; ".join(why))
    return answers


# ---------------------------------------------------------------- running reads


class Hang(Exception):
    pass


@contextmanager
def _time_limit(seconds: float):
    """Raise ``Hang`` in the block after ``seconds``; an outer timer (pytest-timeout's) keeps running."""

    def on_alarm(signum, frame):
        raise Hang(f"no answer within {seconds} s")

    old_handler = signal.signal(signal.SIGALRM, on_alarm)
    outer, outer_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    started = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        if outer:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 0.001), outer_interval)


def _outcome(fn) -> tuple[str, Any]:
    """("ok", value) or ("error", LakelogError); anything else fails the test."""
    try:
        with _time_limit(READ_TIMEOUT_S), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return "ok", fn()
    except LakelogError as e:
        return "error", e


def _table_rows(t: pa.Table, names: list[str]) -> list[tuple]:
    cols = [t.column(n).to_pylist() for n in names]
    return sorted(zip(*cols), key=repr)


def _check(path: str, version: int | None = None):
    with _time_limit(READ_TIMEOUT_S), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return check_table(path, version=version)


def _reads(path: str, older: int) -> dict[str, tuple[str, Any]]:
    now = dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=1)
    return {
        "open": _outcome(lambda: lakelog.Table(path)),
        "to_pyarrow": _outcome(lambda: lakelog.Table(path).to_pyarrow()),
        "files": _outcome(lambda: lakelog.Table(path).files(filters=FILTER)),
        "listing": _outcome(lambda: lakelog.Table(path).files()),
        "filtered": _outcome(lambda: lakelog.Table(path).to_pyarrow(filters=FILTER)),
        "history": _outcome(lambda: lakelog.Table(path).history()),
        "timestamp": _outcome(lambda: lakelog.Table(path, timestamp=now).to_pyarrow()),
        "older": _outcome(lambda: lakelog.Table(path, version=older).to_pyarrow()),
        "older_filtered": _outcome(lambda: lakelog.Table(path, version=older).to_pyarrow(filters=FILTER)),
    }


def _cli(path: str) -> dict[str, tuple[int, str]]:
    """The inspecting commands, in process: (exit code, stderr) each."""
    from lakelog.cli import main

    out = {}
    for command in ("show", "describe", "files", "history"):
        err = io.StringIO()
        with _time_limit(READ_TIMEOUT_S), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = main([command, path])
        out[command] = (code, err.getvalue())
    return out


LATEST_READS = ("open", "to_pyarrow", "files", "listing", "filtered", "history")


def _filter_misfit(e: Exception) -> bool:
    return isinstance(e, SchemaMismatchError) and "filter" in str(e)


def _verify(path: str, older: int, original: dict[str, list] | None, story: list[str]) -> None:
    what = "mutations: " + "; ".join(story)
    try:
        reads = _reads(path, older)
    except Exception as e:  # noqa: BLE001 - reported with the mutations that caused it
        raise AssertionError(f"a read raised {type(e).__name__}: {e}\n{what}") from e

    # check: never raises, and reports a problem whenever a read of the version it checks failed.
    try:
        report = _check(path)
    except TableNotFoundError:
        report = None  # no commit or checkpoint file left at all: every read said so too
        assert all(o[0] == "error" and isinstance(o[1], TableNotFoundError) for k, o in reads.items() if k in LATEST_READS), what
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"check raised {type(e).__name__}: {e}\n{what}") from e
    # A filter naming a column the (mutated) schema lacks, or of another type, is the caller's error.
    failed = [k for k in LATEST_READS if reads[k][0] == "error" and not _filter_misfit(reads[k][1])]
    if report is not None and failed:
        assert not report.ok, f"reads {failed} failed ({reads[failed[0]][1]}) but check found no problem\n{what}"
    cli = _cli(path)
    for command, (code, err) in cli.items():
        # The CLI prints untyped errors as "error: unexpected <type>" or "error: invalid value: ...".
        assert "error: unexpected " not in err and "error: invalid value: " not in err, f"lakelog {command}: {err}\n{what}"
        needs = {"show": ["to_pyarrow"], "describe": ["to_pyarrow", "history"], "files": ["listing"], "history": ["history"]}[command]
        if all(reads[k][0] == "ok" for k in needs):
            assert code == 0, f"lakelog {command} failed although {needs} worked: {err}\n{what}"
    # Reads of other versions: time travel to `older`, and by timestamp to the newest commit file's version
    # (the latest version may exist as a checkpoint only, without its commit file).
    commits = _versions(path, COMMIT_RE)
    for keys, version in ((("older", "older_filtered"), older), (("timestamp",), max(commits, default=None))):
        failures = [reads[k][1] for k in keys if reads[k][0] == "error" and not _filter_misfit(reads[k][1])]
        if not failures or report is None or version is None:
            continue
        try:
            version_report = _check(path, version)
        except LakelogError:
            continue  # the version is not in the log any more (VersionNotFoundError)
        except Exception as e:  # noqa: BLE001
            raise AssertionError(f"check of version {version} raised {type(e).__name__}: {e}\n{what}") from e
        assert not version_report.ok, f"reading version {version} failed ({failures[0]}) but check found no problem\n{what}"

    # Successful reads return what the log says.
    for key, version in (("to_pyarrow", None), ("older", older)):
        status, value = reads[key]
        if status != "ok":
            continue
        names = value.column_names
        try:
            answers = _ref_answers(path, version)
        except Invalid as e:
            raise AssertionError(f"{key} returned {value.num_rows} rows from a log the reference finds unusable ({e})\n{what}") from None
        got = _table_rows(value, names)
        assert got in answers, f"{key} returned other rows than the log says\n{what}"
        expected = got
        filtered = reads["filtered" if key == "to_pyarrow" else "older_filtered"]
        if filtered[0] == "ok" and "id" in names:
            keep = [r for r in expected if r[names.index("id")] is not None and r[names.index("id")] >= FILTER[0][2]]
            assert _table_rows(filtered[1], names) == keep, f"the filtered read ({key}) lost or invented rows\n{what}"
    if original is not None:
        for key, version in (("to_pyarrow", None), ("older", older)):
            assert reads[key][0] == "ok", f"{key} failed after mutations that change nothing: {reads[key][1]}\n{what}"
            assert _table_rows(reads[key][1], reads[key][1].column_names) == original[key], what


@pytest.mark.parametrize("base", ["lakelog", "deltalake"])
def test_mutated_logs_read_correctly_or_raise_typed_errors(base_tables, base):
    source = base_tables[base]
    latest = max(_versions(source, COMMIT_RE))
    unchanged = {"to_pyarrow": _table_rows(lakelog.read_table(source), lakelog.Table(source).schema.names)}

    @settings(
        max_examples=EXAMPLES or 100,
        deadline=None,
        derandomize=not EXAMPLES,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
    )
    @given(mutations=st.lists(MUTATION, min_size=1, max_size=3), older=st.integers(0, latest))
    def run(mutations, older):
        with tempfile.TemporaryDirectory(prefix="lakelog-fuzz-") as tmp:
            path = os.path.join(tmp, "t")
            shutil.copytree(source, path)
            story = [_apply(path, m) for m in mutations]
            original = None
            if all(m[0] in HARMLESS for m in mutations):
                original = dict(unchanged, older=_table_rows(lakelog.read_table(source, version=older), lakelog.Table(source).schema.names))
            _verify(path, older, original, story)

    if EXAMPLES and SEED is None:
        run()  # a long run explores: a fresh random seed each time (hypothesis prints it on failure)
    else:
        seed(int(SEED or 20261123))(run)()


def test_the_reference_agrees_with_lakelog_on_the_undamaged_tables(base_tables):
    """The fuzzer's reference replay is only an oracle if it reads intact tables as lakelog and deltalake do."""
    from deltalake import DeltaTable

    for path in base_tables.values():
        names = lakelog.Table(path).schema.names
        for v in range(max(_versions(path, COMMIT_RE)) + 1):
            ours = _table_rows(lakelog.read_table(path, version=v), names)
            assert ours == _ref_rows(path, v)
            peer = DeltaTable(path, version=v).to_pyarrow_table()
            assert _table_rows(peer, names) == ours
        assert check_table(path).ok

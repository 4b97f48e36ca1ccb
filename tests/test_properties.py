"""Property tests: lakelog's log replay, time travel and partition values against simple in-memory models.

Every example writes a fresh table (``tempfile.mkdtemp`` / a fresh ``memory://`` root), applies the
generated operations through the public API only and reads the table back through the public API
(and, for interoperability, through ``deltalake``).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import shutil
import tempfile
import urllib.parse
import uuid

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakelog

import deltalake  # noqa: E402

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("name", pa.string()),
        pa.field("score", pa.float64()),
        pa.field("part", pa.string()),
    ]
)
UNPARTITIONED_SCHEMA = pa.schema([f for f in SCHEMA if f.name != "part"])

# ---------------------------------------------------------------- helpers


def _norm_value(v):
    # NaN != NaN: give it a stable, comparable stand-in so row lists can be compared exactly.
    if isinstance(v, float) and math.isnan(v):
        return "<NaN>"
    return v


def _rows(table: pa.Table, columns: list[str]) -> list[tuple]:
    """Rows of ``table`` as tuples in ``columns`` order, sorted (NaN normalized)."""
    assert sorted(table.column_names) == sorted(columns), table.column_names
    rows = [tuple(_norm_value(r[c]) for c in columns) for r in table.to_pylist()]
    return sorted(rows, key=repr)


def _model_rows(rows: list[dict], columns: list[str]) -> list[tuple]:
    return sorted((tuple(_norm_value(r[c]) for c in columns) for r in rows), key=repr)


@pytest.fixture(scope="module")
def scratch_root():
    root = tempfile.mkdtemp(prefix="lakelog-props-")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _fresh_location(scratch_root: str, backend: str) -> str:
    if backend == "memory":
        return f"memory://lakelog-props/{uuid.uuid4().hex}/table"
    return os.path.join(tempfile.mkdtemp(dir=scratch_root), "table")


def _cleanup(path: str) -> None:
    fs, root = fsspec.core.url_to_fs(path)
    try:
        fs.rm(root, recursive=True)
    except FileNotFoundError:
        pass


# ---------------------------------------------------------------- strategies

_names = st.one_of(st.none(), st.text(st.characters(exclude_categories=("Cs",)), max_size=8))
_scores = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True))
# '' is a legal string value but, as a partition value, Delta reads it back as null.
_parts = st.sampled_from(["x", "y", "z w", "", None])


@st.composite
def _row_lists(draw, partitioned: bool):
    n = draw(st.one_of(st.just(0), st.integers(1, 6)))
    rows = []
    for _ in range(n):
        row = {
            "id": draw(st.integers(-(2**63), 2**63 - 1)),
            "name": draw(_names),
            "score": draw(_scores),
        }
        if partitioned:
            row["part"] = draw(_parts)
        rows.append(row)
    return rows


@st.composite
def _scenarios(draw):
    partitioned = draw(st.booleans())
    interval = draw(st.sampled_from([None, "3", "1"]))
    backend = draw(st.sampled_from(["local", "local", "memory"]))
    ops = draw(
        st.lists(
            st.tuples(st.sampled_from(["append", "overwrite"]), _row_lists(partitioned)),
            min_size=1,
            max_size=12,
        )
    )
    return partitioned, interval, backend, ops


def _to_arrow(rows: list[dict], partitioned: bool) -> pa.Table:
    schema = SCHEMA if partitioned else UNPARTITIONED_SCHEMA
    return pa.table({f.name: pa.array([r[f.name] for r in rows], f.type) for f in schema}, schema=schema)


def _as_stored(row: dict) -> dict:
    """What a reader must return for a written row: an empty-string partition value reads back as null."""
    out = dict(row)
    if out.get("part") == "":
        out["part"] = None
    return out


# ---------------------------------------------------------------- properties


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=_scenarios())
def test_every_version_matches_model(scratch_root, scenario):
    """After any sequence of appends/overwrites, every version v reads back as the model's state at v."""
    partitioned, interval, backend, ops = scenario
    path = _fresh_location(scratch_root, backend)
    columns = (SCHEMA if partitioned else UNPARTITIONED_SCHEMA).names
    configuration = {"delta.checkpointInterval": interval} if interval else None
    try:
        states: list[list[dict]] = []
        current: list[dict] = []
        for i, (mode, rows) in enumerate(ops):
            version = lakelog.write_table(
                path,
                _to_arrow(rows, partitioned),
                mode=mode,
                partition_by=["part"] if partitioned else None,
                configuration=configuration if i == 0 else None,
            )
            assert version == i, f"operation {i} ({mode}) committed version {version}"
            stored = [_as_stored(r) for r in rows]
            current = current + stored if mode == "append" else stored
            states.append(current)

        latest = len(ops) - 1
        for v, expected in enumerate(states):
            want = _model_rows(expected, columns)
            got = lakelog.read_table(path, version=v)
            assert _rows(got, columns) == want, f"read_table(version={v}) differs from the model"
            t = lakelog.Table(path, version=v)
            assert t.version == v
            assert t.partition_columns == (["part"] if partitioned else [])
            assert _rows(t.to_pyarrow(), columns) == want, f"Table(version={v}) differs from the model"

        # The latest version, without a version argument.
        assert _rows(lakelog.read_table(path), columns) == _model_rows(states[-1], columns)
        assert lakelog.Table(path).version == latest

        # Checkpoints were written exactly at positive multiples of the interval.
        every = int(interval) if interval else 10
        fs, root = fsspec.core.url_to_fs(path)
        log_names = {p.rsplit("/", 1)[-1] for p in fs.ls(root + "/_delta_log", detail=False)}
        cps = sorted(int(n[:20]) for n in log_names if n.endswith(".checkpoint.parquet"))
        assert cps == [v for v in range(1, latest + 1) if v % every == 0]

        if backend == "local":
            # Interoperability: the reference reader sees the same latest state (checkpoints included).
            dl = deltalake.DeltaTable(path)
            assert dl.version() == latest
            assert _rows(dl.to_pyarrow_table(), columns) == _model_rows(states[-1], columns)
    finally:
        _cleanup(path)


# ---------------------------------------------------------------- partition values

# Any character a string may hold (NUL and control characters included) except surrogates, which
# UTF-8 cannot encode. Lengths stay small: each value becomes one directory name.
_pv_chars = st.characters(exclude_categories=("Cs",))
_pv_special = st.sampled_from(["", " ", "\x00", "a\x00b", "\x01", "\n", "%", "=", "/", "a b", "a=b", "a/b", "%25", "%2F", "..", ".", "ü", "日本", "😀", "+", "#?", "__HIVE_DEFAULT_PARTITION__"])
_pv_strings = st.one_of(st.none(), _pv_special, st.text(_pv_chars, max_size=10))
_pv_ints = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1))
_pv_dates = st.one_of(st.none(), st.dates())


@st.composite
def _partition_cases(draw):
    n = draw(st.integers(1, 5))
    rows = [
        {"id": i, "ps": draw(_pv_strings), "pi": draw(_pv_ints), "pd": draw(_pv_dates)}
        for i in range(n)
    ]
    by = draw(st.lists(st.sampled_from(["ps", "pi", "pd"]), min_size=1, max_size=3, unique=True))
    return rows, by


_HEX_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_HIVE_RESERVED = set('"#%\'*/:=?\\{[]^\x7f') | {chr(c) for c in range(0, 32)}


def _hive_unescape(s: str) -> str:
    return _HEX_ESCAPE.sub(lambda m: chr(int(m.group(0)[1:], 16)), s)


def _serialized_values(rows: list[dict], col: str) -> set[str]:
    out = set()
    for r in rows:
        v = r[col]
        out.add("__HIVE_DEFAULT_PARTITION__" if v is None else (v.isoformat() if isinstance(v, dt.date) else str(v)))
    return out


def _logged_partition_value(v):
    """PROTOCOL.md's partition value serialization: strings as is ('' is null), integers as decimal
    text, dates as YYYY-MM-DD, null as JSON null."""
    if v is None or v == "":
        return None
    if isinstance(v, dt.date):
        return v.isoformat()
    return str(v)


PV_SCHEMA = pa.schema([("id", pa.int64()), ("ps", pa.string()), ("pi", pa.int64()), ("pd", pa.date32())])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_partition_cases())
def test_partition_values_round_trip(scratch_root, case):
    rows, by = case
    path = _fresh_location(scratch_root, "local")
    data = pa.table({f.name: pa.array([r[f.name] for r in rows], f.type) for f in PV_SCHEMA}, schema=PV_SCHEMA)
    expected = []
    for r in rows:
        r = dict(r)
        if r["ps"] == "" and "ps" in by:
            r["ps"] = None  # Delta: an empty partition value is null
        expected.append(r)
    expected.sort(key=lambda r: r["id"])
    try:
        assert lakelog.write_table(path, data, partition_by=by) == 0

        got = lakelog.read_table(path)
        assert got.schema == PV_SCHEMA
        assert sorted(got.to_pylist(), key=lambda r: r["id"]) == expected

        # Every file's logged partition values are exactly the serialized values of its rows (read from
        # the raw log and the data files, no directory parsing).
        t = lakelog.Table(path)
        assert t.partition_columns == by
        assert len(t.files()) == len({tuple(r[c] for c in by) for r in expected})
        by_id = {r["id"]: r for r in rows}
        with open(os.path.join(path, "_delta_log", f"{0:020d}.json"), "rb") as f:
            logged = [json.loads(line)["add"] for line in f if line.startswith(b'{"add"')]
        assert len(logged) == len(t.files())
        for add in logged:
            ids = pq.read_table(os.path.join(path, urllib.parse.unquote(add["path"])), columns=["id"]).column("id").to_pylist()
            assert ids, add
            for i in ids:
                assert add["partitionValues"] == {c: _logged_partition_value(by_id[i][c]) for c in by}, (add, by_id[i])

        # A filter on a partition value selects exactly the matching rows.
        probe = expected[0]
        col = by[0]
        flt = [(col, "=", probe[col])] if probe[col] is not None else None
        if flt is not None:
            want = [r for r in expected if r[col] == probe[col]]
            got_f = lakelog.read_table(path, filters=flt)
            assert sorted(got_f.to_pylist(), key=lambda r: r["id"]) == want

        # Directory names follow Hive escaping, so engines that discover partitions from directories
        # agree: no reserved character appears raw, and unescaping gives back col=value.
        for rel in t.files():
            segments = rel.split("/")[:-1]
            assert [s.split("=", 1)[0] for s in segments] == by
            for seg in segments:
                escaped = seg.split("=", 1)[1]
                assert not set(_HEX_ESCAPE.sub("", escaped)) & _HIVE_RESERVED, seg
                assert _hive_unescape(escaped) in _serialized_values(expected, seg.split("=", 1)[0]), seg

        dl = deltalake.DeltaTable(path)
        assert sorted(dl.to_pyarrow_table().to_pylist(), key=lambda r: r["id"]) == expected
    finally:
        _cleanup(path)


def test_nul_in_partition_value_round_trips(tmp_path):
    """A string value containing NUL is a valid Delta partition value; it must be written and read back.

    Hive escaping covers \\x01-\\x1f but not \\x00, so the directory name holds a raw NUL byte.
    """
    path = str(tmp_path / "table")
    data = pa.table({"id": pa.array([1, 2], pa.int64()), "ps": pa.array(["a\x00b", "ok"], pa.string())})
    assert lakelog.write_table(path, data, partition_by=["ps"]) == 0
    assert sorted(lakelog.read_table(path).to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "ps": "a\x00b"},
        {"id": 2, "ps": "ok"},
    ]


def test_empty_partition_value_in_foreign_log_reads_as_null(any_table_path):
    """Another writer may log '' (not null) for a null partition value; the protocol says it means null."""
    fs, root = fsspec.core.url_to_fs(any_table_path)
    fs.makedirs(f"{root}/_delta_log", exist_ok=True)
    fs.makedirs(f"{root}/ps=__HIVE_DEFAULT_PARTITION__", exist_ok=True)
    buf = pa.BufferOutputStream()
    pq.write_table(pa.table({"id": pa.array([7], pa.int64())}), buf)
    data = buf.getvalue().to_pybytes()
    fs.pipe_file(f"{root}/ps=__HIVE_DEFAULT_PARTITION__/f.parquet", data)
    schema = {"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "ps", "type": "string", "nullable": True, "metadata": {}},
        {"name": "pi", "type": "long", "nullable": True, "metadata": {}},
        {"name": "pd", "type": "date", "nullable": True, "metadata": {}},
    ]}
    actions = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"metaData": {"id": "x", "format": {"provider": "parquet", "options": {}}, "schemaString": json.dumps(schema),
                      "partitionColumns": ["ps", "pi", "pd"], "configuration": {}, "createdTime": 0}},
        {"add": {"path": "ps=__HIVE_DEFAULT_PARTITION__/f.parquet", "partitionValues": {"ps": "", "pi": "", "pd": ""},
                 "size": len(data), "modificationTime": 0, "dataChange": True}},
    ]
    fs.pipe_file(f"{root}/_delta_log/{0:020d}.json", b"".join(json.dumps(a).encode() + b"\n" for a in actions))
    assert lakelog.read_table(any_table_path).to_pylist() == [{"id": 7, "ps": None, "pi": None, "pd": None}]
    assert lakelog.read_table(any_table_path, filters=[("pi", "=", 1)]).num_rows == 0


@pytest.mark.parametrize(
    "value",
    ["", "a b", "%", "%25", "=", "a/b", "..", "ü€😀", "__HIVE_DEFAULT_PARTITION__"],
)
def test_partition_value_round_trip_examples(any_table_path, value):
    """Named examples on both backends (the property above runs on the local filesystem)."""
    data = pa.table({"id": pa.array([1, 2], pa.int64()), "ps": pa.array([value, None], pa.string())})
    lakelog.write_table(any_table_path, data, partition_by="ps")
    expected_value = None if value == "" else value
    got = sorted(lakelog.read_table(any_table_path).to_pylist(), key=lambda r: r["id"])
    assert got == [{"id": 1, "ps": expected_value}, {"id": 2, "ps": None}]
    # Appending the same value again lands in the same logical partition.
    lakelog.write_table(any_table_path, data.slice(0, 1))
    if expected_value is None:
        got = lakelog.read_table(any_table_path)
        assert got.column("ps").to_pylist() == [None, None, None]
    else:
        got = lakelog.read_table(any_table_path, filters=[("ps", "=", value)])
        assert sorted(got.column("id").to_pylist()) == [1, 1]
        assert got.column("ps").to_pylist() == [value, value]

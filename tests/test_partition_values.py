"""Partitions are compared as typed values, not as the text their writers logged.

Each case is a table whose partition X was written with text other than lakelog's for the same value:
by delta-rs (``2021-01-01 10:00:00.000000`` for a timestamp lakelog logs as ``...T10:00:00.000000Z``,
``2`` for the double ``2.0``, ``1.1`` for the float lakelog logs as ``1.100000023841858``, ``''`` for a
null string), by Spark (tests/data), or respelled in the log as other writers spell values the protocol
allows (``True``, ``+7``, ``1.5`` for a decimal ``1.50``, ``nan``, ``""`` for null, a ``+02:00``
offset, Spark's timestamp without fraction, a year without padding). A dynamic partition overwrite,
a predicate overwrite, a merge pruned by partition keys and optimize then replace, merge or compact
exactly partition X: the expected rows are computed here from the rows before, and deltalake reads the
same rows. A concurrent commit to X written with other text conflicts with an overwrite of X.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import os
import pickle
import shutil
from dataclasses import dataclass, field
from typing import Any

import deltalake
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakelog
from lakelog.actions import AddFile
from lakelog.dml import commit_overwrite_partitions
from lakelog.errors import CommitConflictError
from lakelog.read.partition_keys import PartitionKeys
from lakelog.log.snapshot import Snapshot
from lakelog.storage import Storage

DATA = os.path.join(os.path.dirname(__file__), "data")
UTC = dt.timezone.utc
TS = pa.timestamp("us", tz="UTC")
NTZ = pa.timestamp("us")


@dataclass(frozen=True)
class Case:
    id: str
    type: pa.DataType
    x_rows: list  # partition X's values in the rows the first writer writes
    x: Any  # X's value in lakelog's new rows
    y: Any  # another partition, which every operation on X leaves alone
    writer: str = "delta-rs"
    respell: dict = field(default_factory=dict)  # X's text in the log -> another form of the same value


CASES = [
    Case("string-empty-is-null", pa.string(), ["", None], None, "b"),  # delta-rs logs '' and null
    Case("string", pa.string(), ["a"], "a", "b", writer="lakelog"),
    Case("int8-plus", pa.int8(), [7, 7], 7, 8, respell={"7": "+7"}),
    Case("int16-zero-padded", pa.int16(), [7], 7, 8, respell={"7": "007"}),
    Case("int32-null-as-empty", pa.int32(), [None], None, 1, respell={None: ""}),
    Case("int64-negative-padded", pa.int64(), [-5], -5, 5, respell={"-5": "-05"}),
    Case("boolean-capitalized", pa.bool_(), [True], True, False, respell={"true": "True"}),
    Case("float-rust-text", pa.float32(), [1.1], 1.1, 2.5),  # delta-rs: '1.1'; lakelog: the float's double
    Case("float-negative-zero", pa.float32(), [-0.0], 0.0, 2.5),  # -0.0 = 0.0, as SQL compares
    Case("double-integral", pa.float64(), [2.0, 2.0], 2.0, 0.5),  # delta-rs: '2'; lakelog: '2.0'
    Case("double-nan", pa.float64(), [math.nan], math.nan, 0.5, respell={"NaN": "nan"}),
    Case("decimal-scale", pa.decimal128(5, 2), [decimal.Decimal("1.50")], decimal.Decimal("1.50"), decimal.Decimal("2.25"),
         respell={"1.50": "1.5"}),
    Case("date-unpadded-year", pa.date32(), [dt.date(21, 1, 1)], dt.date(21, 1, 1), dt.date(2021, 1, 1),
         respell={"0021-01-01": "21-01-01"}),
    Case("timestamp", TS, [dt.datetime(2021, 1, 1, 10, tzinfo=UTC)], dt.datetime(2021, 1, 1, 10, tzinfo=UTC),
         dt.datetime(2021, 1, 2, 10, tzinfo=UTC)),  # delta-rs: no zone, a space; lakelog: ISO-8601 with Z
    Case("timestamp-offset", TS, [dt.datetime(2021, 1, 1, 10, tzinfo=UTC)], dt.datetime(2021, 1, 1, 10, tzinfo=UTC),
         dt.datetime(2021, 1, 2, 10, tzinfo=UTC), respell={"2021-01-01 10:00:00.000000": "2021-01-01T12:00:00+02:00"}),
    Case("timestamp_ntz-no-fraction", NTZ, [dt.datetime(2021, 1, 1, 10)], dt.datetime(2021, 1, 1, 10), dt.datetime(2021, 1, 2),
         respell={"2021-01-01 10:00:00.000000": "2021-01-01 10:00:00"}),
    # (one text per value; bytes under 0x80, where deltalake's reading of the text agrees with lakelog's)
    Case("binary", pa.binary(), [b"\x00a\x01"], b"\x00a\x01", b"b", writer="lakelog"),
]


def _schema(case: Case) -> pa.Schema:
    return pa.schema([("p", case.type), ("v", pa.int64()), ("w", pa.int64())])


def _respell(path: str, respell: dict, last_only: bool = False, key: str = "p") -> None:
    """Rewrite the partition text (under ``key``) of the log's add actions (``last_only``: of its last
    commit) as another writer would have logged it."""
    if not respell:
        return
    log = os.path.join(path, "_delta_log")
    names = sorted(n for n in os.listdir(log) if n.endswith(".json"))
    for name in names[-1:] if last_only else names:
        lines = []
        with open(os.path.join(log, name), "rb") as f:
            for line in f.read().splitlines():
                action = orjson.loads(line)
                pv = action.get("add", {}).get("partitionValues")
                if pv is not None and pv.get(key, 0) in respell:
                    pv[key] = respell[pv[key]]
                lines.append(orjson.dumps(action))
        with open(os.path.join(log, name), "wb") as f:
            f.write(b"\n".join(lines) + b"\n")


def _base(case: Case, path: str) -> None:
    """Partition X (v = 1, 2, ...) with the case's text, and partition Y (v = 10)."""
    n = len(case.x_rows)
    data = pa.table({"p": pa.array(case.x_rows + [case.y], case.type), "v": list(range(1, n + 1)) + [10], "w": [0] * (n + 1)},
                    schema=_schema(case))
    if case.writer == "delta-rs":
        deltalake.write_deltalake(path, data, partition_by=["p"])
    else:
        lakelog.write_table(path, data, partition_by=["p"])
    _respell(path, case.respell)


def _canon(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(UTC)
    return v


def _rows(table: pa.Table) -> list[tuple]:
    return sorted((r["v"], _canon(r["p"]), r["w"]) for r in table.to_pylist())


def _lakelog_rows(path: str) -> list[tuple]:
    return _rows(lakelog.read_table(path))


def _check(path: str, expected: list[tuple]) -> None:
    assert _lakelog_rows(path) == expected
    assert _rows(deltalake.DeltaTable(path).to_pyarrow_table()) == expected


def _new_rows(case: Case, rows: list[tuple[int, int]]) -> pa.Table:
    return pa.table({"p": pa.array([case.x] * len(rows), case.type), "v": [v for v, _ in rows], "w": [w for _, w in rows]}, schema=_schema(case))


def _as_read(case: Case, value: Any) -> Any:
    return _canon(pa.scalar(value, case.type).as_py())


def _replaced(case: Case, before: list[tuple], new: list[tuple[int, int]]) -> list[tuple]:
    """``before`` with partition X's rows (v < 10) replaced by ``new``."""
    return sorted([r for r in before if r[0] >= 10] + [(v, _as_read(case, case.x), w) for v, w in new])


def _x_predicate(case: Case) -> pc.Expression:
    p = pc.field("p")
    if case.x is None:
        return p.is_null()
    if isinstance(case.x, float) and math.isnan(case.x):
        return pc.is_nan(p)
    return p == pa.scalar(case.x, case.type)


def _files(path: str) -> int:
    return len(Snapshot.load(Storage(path)).files)


@pytest.fixture(params=CASES, ids=[c.id for c in CASES])
def case(request) -> Case:
    return request.param


def test_dynamic_overwrite_replaces_the_partition_whatever_its_text(case, tmp_path):
    path = str(tmp_path / "t")
    _base(case, path)
    before = _lakelog_rows(path)
    new = [(20, 200), (21, 210)]
    lakelog.write_table(path, _new_rows(case, new), mode="overwrite", partition_overwrite="dynamic")
    _check(path, _replaced(case, before, new))


def test_predicate_overwrite_replaces_the_partition_whatever_its_text(case, tmp_path):
    path = str(tmp_path / "t")
    _base(case, path)
    before = _lakelog_rows(path)
    new = [(20, 200)]
    lakelog.write_table(path, _new_rows(case, new), mode="overwrite", predicate=_x_predicate(case))
    _check(path, _replaced(case, before, new))


def test_merge_pruned_by_partition_keys_matches_the_partition_whatever_its_text(case, tmp_path):
    path = str(tmp_path / "t")
    _base(case, path)
    before = _lakelog_rows(path)
    source = _new_rows(case, [(1, 100), (9, 900)])
    (lakelog.Table(path).merge(source, "target.p = source.p AND target.v = source.v")
     .when_matched_update({"w": "source.w"}).when_not_matched_insert_all().execute())
    x = _as_read(case, case.x)
    matches = case.x is not None  # (NULL = NULL is not TRUE: a null partition matches nothing)
    expected = [(v, p, 100 if matches and v == 1 else w) for v, p, w in before]
    expected += [(9, x, 900)] + ([] if matches else [(1, x, 100)])
    _check(path, sorted(expected))


def test_optimize_compacts_the_partition_whatever_its_text(case, tmp_path):
    path = str(tmp_path / "t")
    _base(case, path)
    # lakelog's text for the value the first writer wrote (-0.0 too: its rows have files of their own)
    extra = pa.table({"p": pa.array(case.x_rows[:1], case.type), "v": [4], "w": [40]}, schema=_schema(case))
    lakelog.write_table(path, extra)
    before = _lakelog_rows(path)
    metrics = lakelog.Table(path).optimize()
    assert metrics["partitionsOptimized"] == 1
    assert _files(path) == 2  # X compacted into one file; Y's one file left alone
    _check(path, before)


def test_optimize_keeps_negative_and_positive_zero_apart_and_is_then_done(tmp_path):
    """The writer keeps -0.0's rows and 0.0's in files of their own: binned together, both would be
    rewritten again by every optimize."""
    path = str(tmp_path / "t")
    schema = pa.schema([("p", pa.float64()), ("v", pa.int64()), ("w", pa.int64())])
    for i, p in enumerate([-0.0, 0.0, -0.0, 0.0]):
        lakelog.write_table(path, pa.table({"p": [p], "v": [i], "w": [0]}, schema=schema), partition_by=["p"])
    before = [(r["v"], math.copysign(1.0, r["p"])) for r in lakelog.read_table(path).to_pylist()]
    assert lakelog.Table(path).optimize()["partitionsOptimized"] == 2
    assert _files(path) == 2
    assert lakelog.Table(path).optimize()["committed"] is False
    assert sorted((r["v"], math.copysign(1.0, r["p"])) for r in lakelog.read_table(path).to_pylist()) == sorted(before)


# (cases whose text deltalake reads: it refuses a table whose live files log the decimal 1.50 as "1.5")
CONFLICT_CASES = [c for c in CASES if c.id in ("string-empty-is-null", "double-integral", "double-nan", "timestamp", "timestamp-offset")]


def _plan_overwrite(case: Case, path: str, rows: list[tuple[int, int]]):
    """A dynamic overwrite's files, written as a remote writer writes them (the plan pickled)."""
    data = _new_rows(case, rows)
    plan = pickle.loads(pickle.dumps(lakelog.plan_write(path, data.schema, mode="overwrite")))
    return plan, plan.write(data)


def _append_in_other_text(case: Case, path: str, data: pa.Table) -> None:
    deltalake.write_deltalake(path, data, mode="append")
    _respell(path, case.respell)


@pytest.mark.parametrize("case", CONFLICT_CASES, ids=[c.id for c in CONFLICT_CASES])
def test_concurrent_commit_to_the_partition_in_other_text_conflicts(case, tmp_path):
    path = str(tmp_path / "t")
    _base(case, path)
    plan, adds = _plan_overwrite(case, path, [(20, 200)])
    # The concurrent writer logs X in its own text (delta-rs's, or respelled as the case's writer does).
    _append_in_other_text(case, path, pa.table({"p": pa.array(case.x_rows[:1], case.type), "v": [30], "w": [300]}, schema=_schema(case)))
    before = _lakelog_rows(path)
    with pytest.raises(CommitConflictError):
        commit_overwrite_partitions(plan, adds)
    _check(path, before)
    assert not any(os.path.exists(os.path.join(path, a.relative_path)) for a in adds)


@pytest.mark.parametrize("case", CONFLICT_CASES, ids=[c.id for c in CONFLICT_CASES])
def test_concurrent_commit_to_another_partition_does_not_conflict(case, tmp_path):
    path = str(tmp_path / "t")
    _base(case, path)
    plan, adds = _plan_overwrite(case, path, [(20, 200)])
    other = pa.table({"p": pa.array([case.y], case.type), "v": [30], "w": [300]}, schema=_schema(case))
    deltalake.write_deltalake(path, other, mode="append")
    before = _lakelog_rows(path)
    commit_overwrite_partitions(plan, adds)
    _check(path, _replaced(case, before, [(20, 200)]))


def test_concurrent_commit_with_a_malformed_partition_value_conflicts(tmp_path):
    """A concurrent file whose partition no one can tell may be in a replaced partition: a conflict."""
    case = next(c for c in CASES if c.id == "timestamp")
    path = str(tmp_path / "t")
    _base(case, path)
    plan, adds = _plan_overwrite(case, path, [(20, 200)])
    deltalake.write_deltalake(path, _new_rows(case, [(30, 300)]), mode="append")
    _respell(path, {"2021-01-01 10:00:00.000000": "yesterday"}, last_only=True)
    with pytest.raises(CommitConflictError):
        commit_overwrite_partitions(plan, adds)
    assert not any(os.path.exists(os.path.join(path, a.relative_path)) for a in adds)


# ---------------------------------------------------------------- Spark-written tables (tests/data)

NTZ_TABLES = ["data-reader-timestamp_ntz", "data-reader-timestamp_ntz-name-mode"]  # the second keys partitions by physical name


def _spark_table(name: str, tmp_path, respell: dict | None = None) -> str:
    path = str(tmp_path / name)
    shutil.copytree(os.path.join(DATA, name), path)
    if respell:
        mapping = Snapshot.load(Storage(path)).column_mapping
        _respell(path, respell, key=mapping.physical_name("tsNtzPartition") if mapping.active else "tsNtzPartition")
    return path


def _ntz_rows(table: pa.Table) -> list[tuple]:
    return sorted(((r["id"], r["tsNtz"], r["tsNtzPartition"]) for r in table.to_pylist()), key=repr)


@pytest.mark.parametrize("name", NTZ_TABLES)
@pytest.mark.parametrize("x, respell", [
    (dt.datetime(2013, 7, 5, 17, 1, 0, 123456), None),  # Spark's text, as lakelog writes it too
    (None, {None: ""}),  # Spark's null respelled as the empty string, which also means null
], ids=["spark-text", "null-as-empty"])
def test_dynamic_overwrite_of_a_spark_table(name, x, respell, tmp_path):
    path = _spark_table(name, tmp_path, respell)
    before = _ntz_rows(lakelog.read_table(path))
    assert any(r[2] == x for r in before)
    new = pa.table({"id": pa.array([100], pa.int32()), "tsNtz": pa.array([dt.datetime(2000, 1, 1)], NTZ), "tsNtzPartition": pa.array([x], NTZ)})
    lakelog.write_table(path, new, mode="overwrite", partition_overwrite="dynamic")
    expected = sorted([r for r in before if r[2] != x] + [(100, dt.datetime(2000, 1, 1), x)], key=repr)
    assert _ntz_rows(lakelog.read_table(path)) == expected
    peer = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(path)).execute('select id, "tsNtz", "tsNtzPartition" from t').read_all()
    assert _ntz_rows(pa.table(peer)) == expected


# ---------------------------------------------------------------- the key itself


def test_partition_keys_equal_exactly_for_equal_values():
    schema = pa.schema([("f", pa.float32()), ("d", pa.float64()), ("t", TS), ("n", pa.string()), ("m", pa.decimal128(5, 2))])
    keys = PartitionKeys(schema, schema.names)

    def key(**values):
        return keys(AddFile("x", values, 1, 0, True))

    same = [
        (dict(f="1.1", d="2", t="2021-01-01 10:00:00.000000", n="", m="1.5"),
         dict(f="1.100000023841858", d="2.0", t="2021-01-01T10:00:00.000000Z", n=None, m="1.50")),
        (dict(f="-0", d="NaN", t="2021-01-01T12:00:00+02:00", n="a", m="-0.00"),
         dict(f="0.0", d="nan", t="2021-01-01 10:00:00", n="a", m="0")),
    ]
    for a, b in same:
        assert key(**a) == key(**b)
        assert hash(key(**a)) == hash(key(**b))
    assert key(f="1.1", d="2", t="2021-01-01 10:00:00", n="a", m="1") != key(f="1.1", d="2", t="2021-01-01 10:00:00.000001", n="a", m="1")
    assert key(f="1", d="NaN", t=None, n="a", m="1") != key(f="1", d="Infinity", t=None, n="a", m="1")
    assert key(f="1", d="1", t=None, n="a", m="1") != key(f="1", d="1", t=None, n="A", m="1")

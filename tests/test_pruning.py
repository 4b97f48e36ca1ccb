"""File pruning decided over all files at once (``lakelog.read.pruning``) against the per-file decision
(each file's partition values and stats as a pyarrow guarantee, pyarrow simplifying the filter by it).

Properties, on random tables (the filter fuzzer's: every primitive type, nulls, NaN, extremes, random
partition columns, several commits; stats in JSON commits or in a checkpoint) and random filters:
every file holding a row the filter keeps is kept (checked by reading each file), the kept files are
among the ones the per-file decision keeps, and filtered reads equal the SQL model. Stats that ``pyarrow.json`` refuses (malformed,
mistyped, pretty-printed) go through the per-string path and must decide the same way.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import orjson
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lakelog
from lakelog.read import scan
from lakelog.expressions.filters import compile_filter
from tests.test_filter_fuzz import FUZZ, _ids, _sql_model, _written, dnf_filters, expressions, tables


def _per_file_kept(snap, filters) -> set[str]:
    """The reference: the per-file pruning (a guarantee expression and a fragment per file)."""
    compiled = compile_filter(filters, snap.schema, snap.partition_columns)
    d = scan._fragments_dataset(snap.storage, snap.schema, snap.partition_columns, snap.files.values(), True, snap.column_mapping)
    rel_of = {snap.storage.join(rel): rel for rel in snap.files}
    return {rel_of[f.path] for f in d.get_fragments(filter=compiled.exact)}


def _matching_files(snap, filters) -> set[str]:
    """The files holding at least one row the filter keeps (each file read whole)."""
    compiled = compile_filter(filters, snap.schema, snap.partition_columns)
    out = set()
    for rel, add in snap.files.items():
        t = scan.read_data_file(snap.storage, add, snap.schema, snap.partition_columns, snap.schema.names, snap.column_mapping)
        if t.filter(compiled.exact).num_rows:
            out.add(rel)
    return out


def _check(snap, filters) -> set[str]:
    kept = scan.pruned_files(snap, filters)
    assert len(kept) == len(set(kept))
    assert kept == [p for p in snap.file_paths() if p in set(kept)], "kept files must stay in snapshot order"
    kept = set(kept)
    missing = _matching_files(snap, filters) - kept
    assert not missing, (filters, missing)
    assert kept <= _per_file_kept(snap, filters), (filters, _per_file_kept(snap, filters) - kept)
    return kept


@FUZZ
@given(data=st.data(), table=tables(), checkpoint=st.booleans())
def test_vectorised_pruning_keeps_every_matching_file(data, table, checkpoint):
    columns, pools, partition_by, commits = table
    root = tempfile.mkdtemp(prefix="lakelog-prune-")
    try:
        path = os.path.join(root, "t")
        for i, t in enumerate(commits):
            lakelog.write_table(path, t, partition_by=partition_by if i == 0 else None)
            if checkpoint and i == 0:
                lakelog.Table(path).checkpoint()  # later commits stay JSON: both sources of adds
        rows = _written(commits, columns, partition_by).to_pylist()
        table_ = lakelog.Table(path)
        snap = table_._snapshot
        for _ in range(6):
            filters = data.draw(dnf_filters(columns, pools), label="dnf")
            _check(snap, filters)
            expected = _sql_model(rows, filters)
            got = pa.Table.from_batches(list(table_.read_batches(["id"], filters)), pa.schema([("id", pa.int64())]))
            assert _ids(got) == expected, filters
            if not snap.column_mapping.active:
                d = table_.to_pyarrow_dataset(filters)
                assert {frag.path for frag in d.get_fragments()} == {snap.storage.join(p) for p in scan.pruned_files(snap, filters)}
        if partition_by:
            for _ in range(4):
                expr, used = data.draw(expressions({c: columns[c] for c in partition_by}, pools, False), label="expression")
                try:
                    compile_filter(expr, snap.schema, snap.partition_columns)
                except lakelog.errors.InvalidFilterError:
                    continue
                assert scan.prune(snap, expr) is not None  # partition columns only: decided over all files
                _check(snap, expr)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _rewrite_stats(path: str, stats_of) -> None:
    """Replace the raw stats string of each add in the JSON commits by ``stats_of(index, stats)``."""
    log = os.path.join(path, "_delta_log")
    k = 0
    for name in sorted(os.listdir(log)):
        if not name.endswith(".json"):
            continue
        out = []
        with open(os.path.join(log, name), "rb") as f:
            for line in f:
                action = orjson.loads(line)
                if "add" in action:
                    action["add"]["stats"] = stats_of(k, action["add"].get("stats"))
                    k += 1
                out.append(orjson.dumps(action))
        with open(os.path.join(log, name), "wb") as f:
            f.write(b"".join(x + b"\n" for x in out))


# Stats of the third file (x in 20, 21; s "a" and null), each true but in a form pyarrow.json refuses or
# that must be read as no stats.
ODD_STATS = [
    None,
    "",
    "not json",
    "[1, 2]",
    '{"numRecords": -1, "minValues": {"x": 20}, "maxValues": {"x": 21}}',
    '{"numRecords": 2,\n "minValues": {"x": 20},\n "maxValues": {"x": 21}, "nullCount": {"x": 0}}',  # line breaks
    '{"numRecords": 2, "minValues": {"x": "20"}, "maxValues": {"x": 21.0}}',  # mistyped bounds
    '{"numRecords": 2, "minValues": {"x": 20, "s": 5}, "maxValues": {"x": 21}, "nullCount": {"x": 0, "s": 1}}',
    '{"numRecords": true, "nullCount": {"x": true}}',
    '{"numRecords": 2, "minValues": {"x": 20}, "maxValues": {"x": 99999999999999999999}}',
    "null",  # pyarrow.json crashes on a top-level null
    '{"numRecords": 2}\nnull\n{"minValues": {"x": 20}}',  # not JSON, but every line of it is
]


@pytest.mark.parametrize("odd", range(len(ODD_STATS)))
@pytest.mark.parametrize("checkpoint", [False, True])
def test_stats_pyarrow_json_refuses_decide_as_per_file(table_path, odd, checkpoint):
    # Four files with good stats around one with odd stats: the odd one sends its chunk down the
    # per-string path, which must decide every file of the chunk as the per-file pruning does.
    for k in range(5):
        lakelog.write_table(table_path, pa.table({"x": pa.array([k * 10, k * 10 + 1], pa.int64()), "s": ["a", None]}))

    def stats_of(i, stats):
        return ODD_STATS[odd] if i == 2 else stats

    _rewrite_stats(table_path, stats_of)
    if checkpoint:
        lakelog.Table(table_path).checkpoint()
    snap = lakelog.Table(table_path)._snapshot
    for filters in ([("x", "=", 21)], [("x", ">", 35)], [("x", "<", 5)], [("x", "in", [5, 40])], [("s", "=", "a")], [("x", "!=", 0)]):
        _check(snap, filters)
    assert 3 not in [int(x) // 10 for x in lakelog.read_table(table_path, filters=[("x", "=", 21)]).column("x").to_pylist()]


def test_checkpoint_and_commits_after_it(table_path):
    """Files from a checkpoint, files added after it and checkpoint files removed after it (their logged
    paths percent-encoded, since the partition value holds '%') are all decided."""
    for k in range(4):
        lakelog.write_table(table_path, pa.table({"x": pa.array([k], pa.int64()), "p": [f"p{k % 2}%"]}), partition_by=["p"] if k == 0 else None)
    lakelog.Table(table_path).checkpoint()
    lakelog.write_table(table_path, pa.table({"x": pa.array([7], pa.int64()), "p": ["p1%"]}))
    lakelog.Table(table_path).delete([("x", "=", 1)])  # rewrites a checkpoint file after the checkpoint
    snap = lakelog.Table(table_path)._snapshot
    assert any("%" in p for p in snap.file_set.base.adds.field("path").to_pylist())
    assert len(scan.pruned_files(snap, [("x", ">=", 0)])) == len(snap.file_paths())
    for filters in ([("x", ">=", 2)], [("p", "=", "p1%")], [("p", "=", "p1%"), ("x", ">", 3)], [[("x", "=", 0)], [("x", "=", 7)]]):
        kept = _check(snap, filters)
        assert kept, filters
    assert sorted(lakelog.read_table(table_path, filters=[("p", "=", "p1%")]).column("x").to_pylist()) == [3, 7]


def test_parsed_stats_are_reused_across_filters_and_versions(table_path):
    """The checkpoint's stats parsed for one filter serve the next filter on the same columns, also for
    a later version built on the same checkpoint (whose live rows differ)."""
    for k in range(6):
        lakelog.write_table(table_path, pa.table({"x": pa.array([k * 10, k * 10 + 5], pa.int64())}))
    lakelog.Table(table_path).checkpoint()
    t = lakelog.Table(table_path)
    assert t.files([("x", ">=", 40)]) == _per_file_order(t, [("x", ">=", 40)])
    base = t._snapshot.file_set.base
    assert len(base._parsed_stats) == 1
    assert len(t.files([("x", "<", 12)])) == 2
    assert len(base._parsed_stats) == 1  # same columns: parsed once
    t.delete([("x", "=", 0)])  # rewrites the first checkpoint file; the new snapshot shares the checkpoint
    assert t._snapshot.file_set.base is base
    assert sorted(lakelog.read_table(table_path, filters=[("x", "<", 12)]).column("x").to_pylist()) == [5, 10]
    kept = _check(t._snapshot, [("x", "<", 12)])
    assert len(kept) == 2


def _per_file_order(t, filters) -> list[str]:
    ref = _per_file_kept(t._snapshot, filters)
    return [p for p in t._snapshot.file_paths() if p in ref]


def test_constant_expression_keeps_or_drops_every_file(table_path):
    import pyarrow.compute as pc

    lakelog.write_table(table_path, pa.table({"x": pa.array([1, 2], pa.int64()), "p": ["a", "b"]}), partition_by=["p"])
    t = lakelog.Table(table_path)
    assert sorted(t.files(pc.scalar(True))) == sorted(t.files())
    assert t.files(pc.scalar(False)) == []
    assert t.to_pyarrow(filters=pc.scalar(True)).num_rows == 2
    flat = os.path.join(table_path, "..", "flat")
    lakelog.write_table(flat, pa.table({"x": pa.array([1, 2], pa.int64())}))
    assert lakelog.Table(flat).files(pc.scalar(True)) == lakelog.Table(flat).files()

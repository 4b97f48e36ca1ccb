"""DuckDB does not keep a query's input order where it plans a join (an ``IN`` list is a MARK join), and with
more than one thread the rows come back reordered, ``preserve_insertion_order`` notwithstanding. Nothing
may pair a result row with an input row by position: these tests use the query shapes and data layouts
that came back reordered (many small chunks, an ``IN`` list, two threads; one large chunk) and check each
row's answer by its identity."""

from __future__ import annotations

import random
import shutil

import numpy as np
import pyarrow as pa
import pytest

import lakelog
from lakelog.dml.file_groups import Group, with_file_index
from lakelog.dml.internal_columns import FILE, ROW
from lakelog.dml.predicate import Predicate
from lakelog.errors import InvalidArgumentError
from lakelog.expressions.sql import Engine


def _chunked_ids(rng: random.Random) -> list[pa.Table]:
    """2-40 small tables (one per file) of ids, with file row indexes."""
    tables, next_id = [], 0
    for _ in range(rng.randint(2, 40)):
        n = rng.randint(1, 10)
        ids = np.arange(next_id, next_id + n, dtype=np.int64)
        next_id += n + rng.randint(0, 3)
        tables.append(pa.table({"id": ids, ROW: np.arange(n, dtype=np.int64)}))
    return tables


def test_selected_rows_are_the_rows_the_predicate_selects_whatever_order_duckdb_returns():
    engine = Engine(threads=2)
    try:
        wrong = 0
        for seed in range(300):
            rng = random.Random(seed)
            tables = _chunked_ids(rng)
            group = Group([], 0, pa.concat_tables(with_file_index(tables, range(len(tables)))), [t.num_rows for t in tables])
            all_ids = group.table.column("id").to_pylist()
            chosen = rng.sample(all_ids, min(5, len(all_ids)))
            pred = Predicate(sql=f"id IN ({', '.join(map(str, chosen))})")
            got = sorted(int(tables[f].column("id")[int(r)].as_py()) for f, rows in group.selected(engine, pred) for r in rows)
            wrong += got != sorted(chosen)
        assert wrong == 0, f"{wrong} of 300 groups selected other rows than the IN list names"
    finally:
        engine.close()


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_evaluate_gives_each_input_row_its_own_value(threads):
    # One large chunk came back reordered in 20 of 20 tries on 2 threads (DuckDB 2.0.1).
    n = 1_000_000
    table = pa.table({"id": pa.array(np.arange(n, dtype=np.int64)[::-1].copy())})
    engine = Engine(threads=threads)
    try:
        out = engine.evaluate(table, "id AS same, CASE WHEN id IN (5, 7, 150000, 12, 44) THEN 1 ELSE 0 END AS hit", "test")
    finally:
        engine.close()
    assert out.column_names == ["same", "hit"]
    assert np.array_equal(out.column("same").to_numpy(), table.column("id").to_numpy())
    hits = np.flatnonzero(out.column("hit").to_numpy())
    assert sorted(table.column("id").to_numpy()[hits].tolist()) == [5, 7, 12, 44, 150000]


def test_positions_follow_three_valued_logic_in_input_order():
    table = pa.table({"x": pa.array([3, None, 1, 3, None, 2] * 50_000, pa.int64())})
    engine = Engine(threads=2)
    try:
        pos = engine.positions(table, "x IN (3, 2)", "test")
        mask = engine.mask(table, "NOT (x IN (3, 2))", "test")
    finally:
        engine.close()
    x = table.column("x").to_numpy(zero_copy_only=False)
    assert pos.tolist() == [i for i, v in enumerate(table.column("x").to_pylist()) if v in (3, 2)]
    assert mask.tolist() == [v == 1 for v in table.column("x").to_pylist()]  # NULL: neither selected nor its negation
    assert len(x) == len(mask)


def test_engine_queries_from_many_threads_do_not_interleave():
    from concurrent.futures import ThreadPoolExecutor

    engine = Engine(threads=2)
    try:
        def one(k: int) -> bool:
            t = pa.table({"id": np.arange(k, k + 2000, dtype=np.int64)})
            out = engine.evaluate(t, f"id - {k} AS d", "test")
            return out.column("d").to_pylist() == list(range(2000))

        with ThreadPoolExecutor(8) as pool:
            assert all(pool.map(one, range(200)))
    finally:
        engine.close()


def test_thread_settings_are_checked(monkeypatch, tmp_path):
    monkeypatch.setenv("LAKELOG_SQL_THREADS", "zero")
    with pytest.raises(InvalidArgumentError, match="LAKELOG_SQL_THREADS"):
        Engine()
    monkeypatch.setenv("LAKELOG_SQL_THREADS", "1")
    monkeypatch.setenv("LAKELOG_DML_THREADS", "-2")
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": [1, 2]}))
    with pytest.raises(InvalidArgumentError, match="LAKELOG_DML_THREADS"):
        lakelog.Table(path).delete("id = 1")
    assert lakelog.read_table(path).num_rows == 2


# ---------------------------------------------------------------- through lakelog

def _small_files_table(path: str, rng: random.Random) -> list[int]:
    """A table of 10-30 files of 1-12 rows each; returns its ids."""
    ids, next_id = [], 0
    for _ in range(rng.randint(10, 30)):
        n = rng.randint(1, 12)
        batch = list(range(next_id, next_id + n))
        next_id += n
        lakelog.write_table(path, pa.table({"id": pa.array(batch, pa.int64()), "x": pa.array(batch, pa.int64()),
                                            "s": pa.array([f"s{i}" for i in batch])}), mode="append")
        ids += batch
    return ids


@pytest.fixture(scope="module")
def small_files(tmp_path_factory):
    """Three tables of many small files (copied per try: writing them is the slow part)."""
    base = tmp_path_factory.mktemp("small-files")
    out = []
    for k in range(3):
        path = str(base / f"t{k}")
        out.append((path, _small_files_table(path, random.Random(k))))
    return out


def test_delete_in_list_deletes_exactly_the_listed_rows(small_files, tmp_path, monkeypatch):
    monkeypatch.setenv("LAKELOG_SQL_THREADS", "2")
    wrong = []
    for attempt in range(60):
        rng = random.Random(1000 + attempt)
        source, ids = small_files[attempt % 3]
        path = str(tmp_path / f"d{attempt}")
        shutil.copytree(source, path)
        chosen = rng.sample(ids, 5)
        lakelog.Table(path).delete(f"id in ({', '.join(map(str, chosen))})")
        got = sorted(lakelog.read_table(path, columns=["id"]).column("id").to_pylist())
        if got != sorted(set(ids) - set(chosen)):
            wrong.append((chosen, sorted(set(ids) - set(got))))
    assert not wrong, f"{len(wrong)} of 60 deletes removed other rows: {wrong[:3]}"


def test_update_in_list_updates_exactly_the_listed_rows(small_files, tmp_path, monkeypatch):
    monkeypatch.setenv("LAKELOG_SQL_THREADS", "2")
    wrong = []
    for attempt in range(60):
        rng = random.Random(2000 + attempt)
        source, ids = small_files[attempt % 3]
        path = str(tmp_path / f"u{attempt}")
        shutil.copytree(source, path)
        chosen = set(rng.sample(ids, 5))
        # The new values themselves use an IN list, so the values query is planned as a join too.
        lakelog.Table(path).update({"x": "x * 2 + 1", "s": "CASE WHEN id IN (3, 8, 13) THEN 'w' ELSE concat(coalesce(s, ''), '_u') END"},
                                   f"id in ({', '.join(map(str, chosen))})")
        got = {r["id"]: (r["x"], r["s"]) for r in lakelog.read_table(path).to_pylist()}
        want = {i: ((i * 2 + 1, "w" if i in (3, 8, 13) else f"s{i}_u") if i in chosen else (i, f"s{i}")) for i in ids}
        if got != want:
            wrong.append(sorted(k for k in want if got.get(k) != want[k]))
    assert not wrong, f"{len(wrong)} of 60 updates changed other rows: {wrong[:3]}"


def test_generated_column_values_belong_to_their_rows(tmp_path):
    # One batch large enough that DuckDB scans it on both threads and returns it reordered.
    n = 1_000_000
    ids = np.arange(n, dtype=np.int64)
    path = str(tmp_path / "g")
    lakelog.write_table(path, pa.table({"id": ids}), generated_columns={"flag": "CASE WHEN id IN (5, 7, 150000, 12, 44) THEN id ELSE -1 END"})
    t = lakelog.read_table(path)
    flag, got_ids = t.column("flag").to_numpy(), t.column("id").to_numpy()
    assert sorted(got_ids[flag >= 0].tolist()) == [5, 7, 12, 44, 150000]
    assert np.array_equal(flag[flag >= 0], got_ids[flag >= 0])


def test_partition_in_list_deletes_exactly_those_partitions(tmp_path):
    # The partition-only path of delete: one row per file, selected by position.
    path = str(tmp_path / "p")
    for p in range(25):
        lakelog.write_table(path, pa.table({"id": [p], "p": [p]}), partition_by=["p"])
    lakelog.Table(path).delete("p in (3, 17, 4, 22, 9)")
    assert sorted(lakelog.read_table(path).column("id").to_pylist()) == sorted(set(range(25)) - {3, 17, 4, 22, 9})

"""Stress form of the row-level model test: random sequences of appends, deletes, updates, merges and
predicate overwrites on tables of many small files, with predicates and new values that DuckDB plans as
joins (``IN`` / ``NOT IN`` lists, NULL among the listed values, ``IN`` inside ``CASE``), run with the
operation's pool at 1, 2, 4 or 8 threads, DuckDB at 1 to 4 threads, with or without deletion vectors,
and with random delays injected into the pool's file reads so that reads and rewrites finish in any
order. After every step the table must hold exactly the rows of a model written out here (SQL
three-valued logic included) and report the model's row counts.

Each sequence is one seed. ``make test`` runs a short seeded set; ``LAKELOG_STRESS_SEQUENCES=500`` runs
500 (``LAKELOG_STRESS_SEED`` shifts the seeds) and a failure names the seed and the step."""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from typing import Any, Callable

import pyarrow as pa
import pytest

import lakelog
from lakelog.dml.rewrite import RowLevelOperation
from tests.test_dml_model import and3, cmp3, not3, or3

SEQUENCES = int(os.environ.get("LAKELOG_STRESS_SEQUENCES", "0"))
FIRST_SEED = int(os.environ.get("LAKELOG_STRESS_SEED", "0"))
SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("x", pa.int64()), ("s", pa.string())])
PARTS = ["a", "b", "c", None]
STRINGS = ["a", "ab", "b", "ba", ""]


@dataclass
class Expr:
    sql: str
    fn: Callable[[dict], Any]  # a row ("x", or "target.x"/"source.x" in a merge) -> value, True/False/None


def in3(v, values: list) -> bool | None:
    """SQL ``v IN (values)``: NULL when v is NULL, or when no value equals it and one of them is NULL."""
    if v is None:
        return None
    if v in [w for w in values if w is not None]:
        return True
    return None if None in values else False


def _lit(v) -> str:
    return "NULL" if v is None else (f"'{v}'" if isinstance(v, str) else str(v))


class Generator:
    """Random operations for one seed; ``ids`` are the ids the table may hold (for IN lists that hit)."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.next_id = 0

    def rows(self, n: int, ids: list[int] | None = None) -> list[dict]:
        r = self.rng
        if ids is None:
            ids = list(range(self.next_id, self.next_id + n))
            self.next_id += n
        return [{"id": i, "p": r.choice(PARTS), "x": r.choice([None, *range(-3, 20)]), "s": r.choice([None, *STRINGS])} for i in ids]

    def atom(self, alias: str, ids: list[int]) -> Expr:
        r, a = self.rng, (alias + "." if alias else "")

        def col(name):
            key = f"{alias}.{name}" if alias else name
            return lambda row: row[key]

        kind = r.randrange(9)
        if kind <= 2:  # an id IN list, mostly of ids present: the shape that came back reordered
            pool = ids or [0]
            values = r.sample(pool, min(len(pool), r.randint(1, 12))) + [r.randint(0, self.next_id + 5) for _ in range(r.randint(0, 2))]
            negate = kind == 2
            sql = f"{a}id {'NOT IN' if negate else 'IN'} ({', '.join(map(str, values))})"
            return Expr(sql, lambda row, v=tuple(values), n=negate: (not3 if n else (lambda t: t))(in3(col("id")(row), list(v))))
        if kind == 3:  # NULL among the values: IN is then NULL unless a value matches
            values = [r.choice([None, *range(-3, 20)]) for _ in range(r.randint(1, 4))]
            return Expr(f"{a}x IN ({', '.join(map(_lit, values))})", lambda row, v=tuple(values): in3(col("x")(row), list(v)))
        if kind == 4:
            values = r.sample(STRINGS, r.randint(1, 3))
            return Expr(f"{a}s IN ({', '.join(map(_lit, values))})", lambda row, v=tuple(values): in3(col("s")(row), list(v)))
        if kind == 5:
            op, k = r.choice(["=", ">", "<"]), r.randint(-3, 20)
            return Expr(f"{a}x {op} {k}", lambda row, op=op, k=k: cmp3(col("x")(row), op, k))
        if kind == 6:
            v = r.choice(["a", "b", "c"])
            return Expr(f"{a}p = '{v}'", lambda row, v=v: cmp3(col("p")(row), "=", v))
        if kind == 7:
            return Expr(f"{a}p IS NULL", lambda row: col("p")(row) is None)
        return Expr(f"{a}s IS NOT NULL", lambda row: col("s")(row) is not None)

    def predicate(self, ids: list[int], alias: str = "", depth: int = 0) -> Expr:
        r = self.rng
        choice = r.randrange(6) if depth < 2 else 0
        if choice <= 2:
            return self.atom(alias, ids)
        left, right = self.predicate(ids, alias, depth + 1), self.predicate(ids, alias, depth + 1)
        if choice == 3:
            return Expr(f"({left.sql}) AND ({right.sql})", lambda row, a=left, b=right: and3(a.fn(row), b.fn(row)))
        if choice == 4:
            return Expr(f"({left.sql}) OR ({right.sql})", lambda row, a=left, b=right: or3(a.fn(row), b.fn(row)))
        return Expr(f"NOT ({left.sql})", lambda row, a=left: not3(a.fn(row)))

    def new_x(self, ids: list[int], alias: str = "") -> Expr:
        """A new value of x; often computed through an IN list (a join in DuckDB's plan)."""
        r, a = self.rng, (alias + "." if alias else "")
        key = (lambda n: f"{alias}.{n}" if alias else n)
        values = r.sample(ids or [0], min(len(ids or [0]), r.randint(1, 8)))
        k = r.randint(1, 9)
        return r.choice([
            Expr(f"CASE WHEN {a}id IN ({', '.join(map(str, values))}) THEN {a}id * 10 + {k} ELSE {a}x END",
                 lambda row, v=tuple(values), k=k: row[key("id")] * 10 + k if row[key("id")] in v else row[key("x")]),
            Expr(f"{a}x + {k}", lambda row, k=k: None if row[key("x")] is None else row[key("x")] + k),
            Expr(f"{a}id + {k}", lambda row, k=k: row[key("id")] + k),
        ])

    def operation(self, ids: list[int]) -> tuple:
        r = self.rng
        kind = r.choices(["append", "delete", "update", "merge", "overwrite"], [2, 3, 3, 3, 1])[0]
        if kind == "append":
            return ("append", self.rows(r.randint(1, 8)))
        if kind == "delete":
            return ("delete", self.predicate(ids))
        if kind == "update":
            sets = {"x": self.new_x(ids)}
            if r.random() < 0.5:
                s_to = r.choice(STRINGS)
                sets["s"] = Expr(f"concat(coalesce(s, ''), '{s_to}')", lambda row, t=s_to: (row["s"] or "") + t)
            if r.random() < 0.3:
                p_to = r.choice(["a", "b", "c"])
                sets["p"] = Expr(f"'{p_to}'", lambda row, t=p_to: t)
            return ("update", sets, self.predicate(ids) if r.random() < 0.9 else None)
        if kind == "merge":
            matched_ids = r.sample(ids, min(len(ids), r.randint(0, 10)))
            source = self.rows(0, matched_ids) + self.rows(r.randint(0, 5))
            # Clauses of a kind in order; only the last of a kind may omit its condition.
            matched = r.choice([[], [("update", None)], [("update", "cond")], [("delete", None)], [("update", "cond"), ("delete", None)],
                                [("delete", "cond"), ("update", None)]])
            clauses = [("matched", a, self.predicate(ids, "source") if c else None) for a, c in matched]
            if r.random() < 0.6:
                clauses.append(("not_matched", "insert", self.predicate(ids, "source") if r.random() < 0.3 else None))
            if r.random() < 0.4:
                clauses.append(("not_matched_by_source", "delete", self.predicate(ids, "target")))
            if not clauses:
                clauses.append(("not_matched", "insert", None))
            set_x = self.new_x(ids, "target")
            return ("merge", source, clauses, set_x)
        part = r.choice(["a", "b", "c"])
        return ("overwrite", part, [{**row, "p": part} for row in self.rows(r.randint(0, 4))])


def model_apply(rows: list[dict], op: tuple) -> tuple[list[dict], dict[str, int]]:
    kind = op[0]
    if kind == "append":
        return rows + op[1], {}
    if kind == "delete":
        keep = [row for row in rows if op[1].fn(row) is not True]
        return keep, {"num_deleted_rows": len(rows) - len(keep)}
    if kind == "update":
        sets, pred = op[1], op[2]
        out, n = [], 0
        for row in rows:
            if pred is None or pred.fn(row) is True:
                row = {**row, **{c: e.fn(row) for c, e in sets.items()}}
                n += 1
            out.append(row)
        return out, {"num_updated_rows": n}
    if kind == "overwrite":
        return [row for row in rows if row["p"] != op[1]] + op[2], {}
    _, source, clauses, set_x = op
    by_id = {s["id"]: s for s in source}
    out, counts, matched = [], {"num_target_rows_updated": 0, "num_target_rows_deleted": 0, "num_target_rows_inserted": 0}, set()
    for row in rows:
        s = by_id.get(row["id"])
        ctx = {**{f"target.{k}": v for k, v in row.items()}, **({f"source.{k}": v for k, v in s.items()} if s else {})}
        kind_here = "matched" if s is not None else "not_matched_by_source"
        if s is not None:
            matched.add(s["id"])
        chosen = next((c for c in clauses if c[0] == kind_here and (c[2] is None or c[2].fn(ctx) is True)), None)
        if chosen is None:
            out.append(row)
        elif chosen[1] == "delete":
            counts["num_target_rows_deleted"] += 1
        else:
            counts["num_target_rows_updated"] += 1
            out.append({**row, "x": set_x.fn(ctx), "s": s["s"]})
    for s in source:
        ctx = {f"source.{k}": v for k, v in s.items()}
        if s["id"] not in matched and any(c[0] == "not_matched" and (c[2] is None or c[2].fn(ctx) is True) for c in clauses):
            counts["num_target_rows_inserted"] += 1
            out.append(dict(s))
    return out, counts


def run_lakelog(path: str, op: tuple) -> dict:
    kind = op[0]
    if kind == "append":
        lakelog.write_table(path, _table(op[1]), mode="append")
        return {}
    t = lakelog.Table(path)
    if kind == "delete":
        return t.delete(op[1].sql)
    if kind == "update":
        return t.update({c: e.sql for c, e in op[1].items()}, op[2].sql if op[2] else None)
    if kind == "overwrite":
        lakelog.write_table(path, _table(op[2]), mode="overwrite", predicate=f"p = '{op[1]}'")
        return {}
    _, source, clauses, set_x = op
    m = t.merge(_table(source), "target.id = source.id")
    for kind, action, cond in clauses:
        c = cond.sql if cond else None
        if kind == "matched":
            m = m.when_matched_delete(c) if action == "delete" else m.when_matched_update({"x": set_x.sql, "s": "source.s"}, c)
        elif kind == "not_matched":
            m = m.when_not_matched_insert_all(c)
        else:
            m = m.when_not_matched_by_source_delete(c)
    return m.execute()


def _table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([{k: r.get(k) for k in SCHEMA.names} for r in rows], schema=SCHEMA)


def _sorted(rows) -> list[dict]:
    return sorted(({k: r.get(k) for k in SCHEMA.names} for r in rows), key=lambda r: r["id"])


def _delayed_reads(monkeypatch, rng: random.Random) -> None:
    """Every file read on the pool first sleeps 0-3 ms (drawn per read), so reads and rewrites finish in
    any order; the draws are seeded, the interleaving they cause is not."""
    real = RowLevelOperation.read_file
    delays = [rng.random() * 0.003 for _ in range(4096)]
    count = iter(range(10**9))

    def read_file(self, *args, **kwargs):
        time.sleep(delays[next(count) % len(delays)])
        return real(self, *args, **kwargs)

    monkeypatch.setattr(RowLevelOperation, "read_file", read_file)


def run_sequence(seed: int, path: str, monkeypatch) -> None:
    rng = random.Random(seed)
    pool, duck = rng.choice([1, 2, 4, 8]), rng.choice([1, 2, 3, 4])
    monkeypatch.setenv("LAKELOG_DML_THREADS", str(pool))
    monkeypatch.setenv("LAKELOG_SQL_THREADS", str(duck))
    if rng.random() < 0.7:
        _delayed_reads(monkeypatch, rng)
    gen = Generator(rng)
    dv = rng.random() < 0.35
    partitioned = rng.random() < 0.5
    model: list[dict] = []
    for i in range(rng.randint(10, 25)):  # many small files
        batch = gen.rows(rng.randint(1, 8))
        conf = {"delta.enableDeletionVectors": "true"} if dv and i == 0 else None
        lakelog.write_table(path, _table(batch), mode="append", partition_by=["p"] if partitioned else None, configuration=conf)
        model += batch
    where = f"seed {seed} (pool {pool}, duckdb {duck}, dv {dv}, partitioned {partitioned})"
    for step in range(rng.randint(4, 10)):
        op = gen.operation([r["id"] for r in model])
        expected_rows, expected_counts = model_apply(model, op)
        got = run_lakelog(path, op)
        model = _sorted(expected_rows)
        assert _sorted(lakelog.read_table(path).to_pylist()) == model, f"{where}, step {step}: {_describe(op)}"
        for k, v in expected_counts.items():
            assert got[k] == v, f"{where}, step {step}: {k} {got[k]} != {v} for {_describe(op)}"


def _describe(op: tuple) -> str:
    kind = op[0]
    if kind == "delete":
        return f"delete({op[1].sql!r})"
    if kind == "update":
        return f"update({ {c: e.sql for c, e in op[1].items()} }, {op[2].sql if op[2] else None!r})"
    if kind == "merge":
        return f"merge(source ids {[s['id'] for s in op[1]]}, {[(k, a, c.sql if c else None) for k, a, c in op[2]]}, x = {op[3].sql!r})"
    return f"{kind}({op[1:]!r})"


@pytest.mark.parametrize("seed", range(FIRST_SEED, FIRST_SEED + (SEQUENCES or 10)))
def test_row_level_sequences_on_many_small_files_match_the_model(seed, tmp_path, monkeypatch):
    run_sequence(seed, str(tmp_path / "t"), monkeypatch)

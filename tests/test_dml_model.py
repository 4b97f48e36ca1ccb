"""Property test: random sequences of delete, update (partition column included), merge (every clause
type) and predicate overwrite on random partitioned tables with nulls, against an independent model
(Python lists and dicts, three-valued logic written out here) and against deltalake running the same
SQL on its own copy of the table.

After every operation: lakelog's rows equal the model's, its metrics' row counts equal the model's,
deltalake (its own table) has the same rows and counts, deltalake reads lakelog's version, and lakelog
reads deltalake's version. Default runs are short and seeded; LAKELOG_FUZZ_EXAMPLES=N runs N random
examples.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any, Callable

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakelog

FUZZ = int(os.environ.get("LAKELOG_FUZZ_EXAMPLES", "0"))
SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("x", pa.int64()), ("s", pa.string())])
PARTS = ["a", "b", "c", None]


# ---------------------------------------------------------------- three-valued logic, written out

def and3(a, b):
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def or3(a, b):
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


def not3(a):
    return None if a is None else not a


def cmp3(v, op, k):
    if v is None:
        return None
    return {"=": v == k, ">": v > k, "<": v < k}[op]


@dataclass
class Expr:
    sql: str
    fn: Callable[[dict], Any]  # row (keys "target.x", "source.x", ...) -> value / True / False / None


def atoms(alias: str) -> st.SearchStrategy[Expr]:
    a = f"{alias}." if alias else ""

    def col(name):
        return lambda r: r[f"{alias}.{name}" if alias else name]

    ints = st.integers(-5, 25)
    return st.one_of(
        st.builds(lambda op, k: Expr(f"{a}x {op} {k}", lambda r, op=op, k=k: cmp3(col("x")(r), op, k)), st.sampled_from(["=", ">", "<"]), ints),
        st.just(Expr(f"{a}x is null", lambda r: col("x")(r) is None)),
        st.just(Expr(f"{a}s is not null", lambda r: col("s")(r) is not None)),
        st.builds(lambda k: Expr(f"{a}id < {k}", lambda r, k=k: cmp3(col("id")(r), "<", k)), st.integers(0, 30)),
        st.builds(lambda v: Expr(f"{a}p = '{v}'", lambda r, v=v: cmp3(col("p")(r), "=", v)), st.sampled_from(["a", "b", "c"])),
        st.just(Expr(f"{a}p is null", lambda r: col("p")(r) is None)),
        st.builds(lambda pre: Expr(f"{a}s like '{pre}%'", lambda r, pre=pre: None if col("s")(r) is None else col("s")(r).startswith(pre)),
                  st.sampled_from(["a", "b", "ab"])),
        st.builds(lambda ks: Expr(f"{a}x in ({', '.join(map(str, ks))})",
                                  lambda r, ks=tuple(ks): None if col("x")(r) is None else col("x")(r) in ks), st.lists(ints, min_size=1, max_size=3)),
    )


def predicates(alias: str = "") -> st.SearchStrategy[Expr]:
    return st.recursive(
        atoms(alias),
        lambda inner: st.one_of(
            st.builds(lambda l, r: Expr(f"({l.sql}) and ({r.sql})", lambda row, l=l, r=r: and3(l.fn(row), r.fn(row))), inner, inner),
            st.builds(lambda l, r: Expr(f"({l.sql}) or ({r.sql})", lambda row, l=l, r=r: or3(l.fn(row), r.fn(row))), inner, inner),
            st.builds(lambda e: Expr(f"not ({e.sql})", lambda row, e=e: not3(e.fn(row))), inner),
        ),
        max_leaves=3,
    )


# Update expressions: SQL text and its meaning (same in DuckDB and DataFusion: no NULL-skipping concat).
SET_X = [Expr("x + 1", lambda r: None if r["x"] is None else r["x"] + 1), Expr("NULL", lambda r: None), Expr("7", lambda r: 7)]
SET_S = [Expr("concat(coalesce(s, ''), 'u')", lambda r: (r["s"] or "") + "u"), Expr("upper(s)", lambda r: None if r["s"] is None else r["s"].upper())]
SET_P = [Expr("'b'", lambda r: "b"), Expr("NULL", lambda r: None), Expr("'a'", lambda r: "a")]


def rows_strategy(ids: st.SearchStrategy[int], min_size=0, max_size=12):
    return st.lists(
        st.fixed_dictionaries({
            "id": ids, "p": st.sampled_from(PARTS), "x": st.one_of(st.none(), st.integers(-5, 25)),
            "s": st.one_of(st.none(), st.sampled_from(["a", "ab", "b", "ba", ""])),
        }),
        min_size=min_size, max_size=max_size, unique_by=lambda r: r["id"],
    )


@st.composite
def updates(draw):
    out = {}
    if draw(st.booleans()):
        out["x"] = draw(st.sampled_from(SET_X))
    if draw(st.booleans()):
        out["s"] = draw(st.sampled_from(SET_S))
    if draw(st.booleans()) or not out:
        out["p"] = draw(st.sampled_from(SET_P))
    return out


MATCHED_SET = {
    "x": Expr("source.x", lambda r: r["source.x"]),
    "s": Expr("concat(coalesce(target.s, ''), 'm')", lambda r: (r["target.s"] or "") + "m"),
    "p": Expr("source.p", lambda r: r["source.p"]),
}
NMBS_SET = {"x": Expr("target.x * 2", lambda r: None if r["target.x"] is None else r["target.x"] * 2), "p": Expr("'c'", lambda r: "c")}
INSERT_SET = {"id": Expr("source.id", lambda r: r["source.id"]), "p": Expr("source.p", lambda r: r["source.p"]),
              "x": Expr("source.x + 100", lambda r: None if r["source.x"] is None else r["source.x"] + 100)}


@st.composite
def merges(draw):
    source = draw(rows_strategy(st.integers(0, 30), max_size=8))
    clauses = []
    for kind, actions, alias in (("matched", ["update", "update_all", "delete"], "source"), ("not_matched", ["insert", "insert_all"], "source"),
                                 ("not_matched_by_source", ["update", "delete"], "target")):
        n = draw(st.integers(0, 2))
        for i in range(n):
            last = i == n - 1
            cond = draw(st.one_of(st.none(), predicates(alias))) if last else draw(predicates(alias))
            clauses.append((kind, draw(st.sampled_from(actions)), cond))
    if not clauses:
        clauses.append(("not_matched", "insert_all", None))
    return source, clauses


operations = st.one_of(
    st.tuples(st.just("delete"), st.one_of(st.none(), predicates())),
    st.tuples(st.just("update"), updates(), st.one_of(st.none(), predicates())),
    st.tuples(st.just("merge"), merges()),
    st.tuples(st.just("overwrite"), st.sampled_from(["a", "b", "c"]), rows_strategy(st.integers(31, 60), max_size=4)),
)


# ---------------------------------------------------------------- the model

def model_apply(rows: list[dict], op) -> tuple[list[dict], dict]:
    kind = op[0]
    if kind == "delete":
        pred = op[1]
        keep = [r for r in rows if not (pred is None or pred.fn(r) is True)]
        return keep, {"num_deleted_rows": len(rows) - len(keep)}
    if kind == "update":
        sets, pred = op[1], op[2]
        out, n = [], 0
        for r in rows:
            if pred is None or pred.fn(r) is True:
                r = {**r, **{c: e.fn(r) for c, e in sets.items()}}
                n += 1
            out.append(r)
        return out, {"num_updated_rows": n}
    if kind == "overwrite":
        part, data = op[1], [{**r, "p": op[1]} for r in op[2]]
        keep = [r for r in rows if r["p"] != part]
        return keep + data, {}
    source, clauses = op[1]
    by_id = {s["id"]: s for s in source}
    out, counts = [], {"num_target_rows_updated": 0, "num_target_rows_deleted": 0, "num_target_rows_inserted": 0}
    matched_ids = set()
    for r in rows:
        s = by_id.get(r["id"])
        ctx = {**{f"target.{k}": v for k, v in r.items()}, **({f"source.{k}": v for k, v in s.items()} if s else {})}
        kinds = "matched" if s is not None else "not_matched_by_source"
        if s is not None:
            matched_ids.add(s["id"])
        chosen = next((c for c in clauses if c[0] == kinds and (c[2] is None or c[2].fn(ctx) is True)), None)
        if chosen is None:
            out.append(r)
        elif chosen[1] == "delete":
            counts["num_target_rows_deleted"] += 1
        else:
            counts["num_target_rows_updated"] += 1
            if chosen[1] == "update_all":
                out.append(dict(s))
            else:
                sets = MATCHED_SET if kinds == "matched" else NMBS_SET
                out.append({**r, **{c: e.fn(ctx) for c, e in sets.items()}})
    for s in source:
        if s["id"] in matched_ids:
            continue
        ctx = {f"source.{k}": v for k, v in s.items()}
        chosen = next((c for c in clauses if c[0] == "not_matched" and (c[2] is None or c[2].fn(ctx) is True)), None)
        if chosen is not None:
            counts["num_target_rows_inserted"] += 1
            out.append(dict(s) if chosen[1] == "insert_all" else {"s": None, **{c: e.fn(ctx) for c, e in INSERT_SET.items()}})
    return out, counts


# ---------------------------------------------------------------- running the same operation on both engines

def run_lakelog(path: str, op) -> dict:
    t = lakelog.Table(path)
    kind = op[0]
    if kind == "delete":
        return t.delete(op[1].sql if op[1] else None)
    if kind == "update":
        return t.update({c: e.sql for c, e in op[1].items()}, op[2].sql if op[2] else None)
    if kind == "overwrite":
        lakelog.write_table(path, _table([{**r, "p": op[1]} for r in op[2]]), mode="overwrite", predicate=f"p = '{op[1]}'")
        return {}
    source, clauses = op[1]
    m = t.merge(_table(source), "target.id = source.id")
    for kind, action, cond in clauses:
        c = cond.sql if cond else None
        if kind == "matched":
            m = m.when_matched_delete(c) if action == "delete" else (
                m.when_matched_update_all(c) if action == "update_all" else m.when_matched_update({k: e.sql for k, e in MATCHED_SET.items()}, c))
        elif kind == "not_matched":
            m = m.when_not_matched_insert_all(c) if action == "insert_all" else m.when_not_matched_insert({k: e.sql for k, e in INSERT_SET.items()}, c)
        else:
            m = m.when_not_matched_by_source_delete(c) if action == "delete" else m.when_not_matched_by_source_update({k: e.sql for k, e in NMBS_SET.items()}, c)
    return m.execute()


def run_deltalake(path: str, op) -> dict:
    dt = DeltaTable(path)
    kind = op[0]
    if kind == "delete":
        return dt.delete(op[1].sql if op[1] else None)
    if kind == "update":
        return dt.update(updates={c: e.sql for c, e in op[1].items()}, predicate=op[2].sql if op[2] else None)
    if kind == "overwrite":
        write_deltalake(path, _table([{**r, "p": op[1]} for r in op[2]]), mode="overwrite", predicate=f"p = '{op[1]}'")
        return {}
    source, clauses = op[1]
    m = dt.merge(_table(source), "target.id = source.id", source_alias="source", target_alias="target")
    for kind, action, cond in clauses:
        c = cond.sql if cond else None
        if kind == "matched":
            m = m.when_matched_delete(c) if action == "delete" else (
                m.when_matched_update_all(c) if action == "update_all" else m.when_matched_update({k: e.sql for k, e in MATCHED_SET.items()}, c))
        elif kind == "not_matched":
            m = m.when_not_matched_insert_all(c) if action == "insert_all" else m.when_not_matched_insert({k: e.sql for k, e in INSERT_SET.items()}, c)
        else:
            m = m.when_not_matched_by_source_delete(c) if action == "delete" else m.when_not_matched_by_source_update({k: e.sql for k, e in NMBS_SET.items()}, c)
    return m.execute()


def _table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([{k: r.get(k) for k in SCHEMA.names} for r in rows], schema=SCHEMA)


def _sorted(rows):
    # (ids repeat after an overwrite or an insert: the whole row breaks ties)
    return sorted(({k: r.get(k) for k in SCHEMA.names} for r in rows), key=lambda r: (r["id"], repr(r)))


ROW_METRICS = ("num_deleted_rows", "num_updated_rows", "num_target_rows_updated", "num_target_rows_deleted", "num_target_rows_inserted")


@settings(
    max_examples=FUZZ or 12, deadline=None, derandomize=not FUZZ, suppress_health_check=list(HealthCheck),
)
@given(initial=rows_strategy(st.integers(0, 30), min_size=1), ops=st.lists(operations, min_size=1, max_size=4))
def test_row_level_operations_match_the_model_and_deltalake(initial, ops):
    tmp = tempfile.mkdtemp(prefix="lakelog-dml-model-")
    try:
        lk, dl = os.path.join(tmp, "lk"), os.path.join(tmp, "dl")
        lakelog.write_table(lk, _table(initial), partition_by=["p"])
        write_deltalake(dl, _table(initial), partition_by=["p"])
        model = _sorted(initial)
        for op in ops:
            model_rows, expected = model_apply(model, op)
            model = _sorted(model_rows)
            got = run_lakelog(lk, op)
            dgot = run_deltalake(dl, op)
            assert _sorted(lakelog.read_table(lk).to_pylist()) == model, op
            for k, v in expected.items():
                assert got[k] == v, (k, op)
                assert dgot[k] == v, (k, op, "deltalake")
            assert _sorted(DeltaTable(dl).to_pyarrow_table().to_pylist()) == model, ("deltalake", op)
            assert _sorted(DeltaTable(lk).to_pyarrow_table().to_pylist()) == model, ("deltalake reading lakelog", op)
            assert _sorted(lakelog.read_table(dl).to_pylist()) == model, ("lakelog reading deltalake", op)
        for v in range(lakelog.Table(lk).version + 1):  # every version lakelog wrote reads the same in deltalake
            assert _sorted(lakelog.read_table(lk, version=v).to_pylist()) == _sorted(DeltaTable(lk, version=v).to_pyarrow_table().to_pylist())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _peer_rows(path: str, version: int) -> list[dict]:
    """The rows deltalake's SQL engine (which applies deletion vectors) reads at ``version``."""
    from deltalake import QueryBuilder

    got = QueryBuilder().register("t", DeltaTable(path, version=version)).execute("select id, p, x, s from t").read_all()
    return _sorted(pa.table(got).to_pylist())


@settings(
    max_examples=FUZZ or 10, deadline=None, derandomize=not FUZZ, suppress_health_check=list(HealthCheck),
)
@given(initial=rows_strategy(st.integers(0, 30), min_size=1), ops=st.lists(operations, min_size=1, max_size=4))
def test_row_level_operations_with_deletion_vectors_match_the_model(initial, ops):
    """The same sequences on a table with deletion vectors enabled (merge-on-read): lakelog and
    deltalake's SQL engine read every version as the model says."""
    tmp = tempfile.mkdtemp(prefix="lakelog-dml-model-dv-")
    try:
        lk = os.path.join(tmp, "lk")
        lakelog.write_table(lk, _table(initial), partition_by=["p"], configuration={"delta.enableDeletionVectors": "true"})
        model = _sorted(initial)
        expected_at = {0: model}
        for op in ops:
            model_rows, expected = model_apply(model, op)
            model = _sorted(model_rows)
            got = run_lakelog(lk, op)
            for k, v in expected.items():
                assert got[k] == v, (k, op)
            expected_at[lakelog.Table(lk).version] = model
        latest = lakelog.Table(lk).version
        for v in range(latest + 1):
            want = expected_at[max(k for k in expected_at if k <= v)]
            assert _sorted(lakelog.read_table(lk, version=v).to_pylist()) == want, ("lakelog", v)
            assert _peer_rows(lk, v) == want, ("deltalake QueryBuilder", v)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

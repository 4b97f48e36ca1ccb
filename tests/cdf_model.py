"""A plain-Python model of row-level operations and the change data feed they must record, for the
randomized change feed tests of the Spark paths (tests/test_spark_change_feed.py).

``plan(seed)`` draws a table shape (deletion vectors or not, partitioned or not), the appends that
create it (several files, each over its own range of ids, so a merge's key range prunes some) and a
sequence of DELETE, UPDATE and MERGE operations and overwrites (Spark's ``replaceWhere`` and dynamic
partition overwrite), each with its Spark SQL text and the same semantics as Python functions: SQL three-valued logic (a clause or row applies only where its condition is TRUE),
Delta's merge rules (per kind, the first clause whose condition is TRUE wins; the last may omit it;
target rows no source row matches get the not-matched-by-source clauses, source rows no target row
matches the not-matched ones). Running the model gives each operation's expected rows and its expected
change rows (``delete``, ``update_preimage``/``update_postimage`` for every row an update clause
selects, even when no value changes, ``insert``; an overwrite deletes the rows it replaces and
inserts the rows written). No Spark here: the plan is drawn from the model alone,
so ``coverage`` can check cheaply what a set of seeds exercises.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

COLUMNS = ("id", "p", "x", "s")
SCHEMA = "id long, p string, x long, s string"
Row = dict  # column -> value


# ---------------------------------------------------------------- SQL three-valued logic

def _cmp(a, b, op) -> bool | None:
    return None if a is None or b is None else op(a, b)


def gt(a, b):
    return _cmp(a, b, lambda x, y: x > y)


def eq(a, b):
    return _cmp(a, b, lambda x, y: x == y)


def and3(a, b):
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def or3(a, b):
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def not3(a):
    return None if a is None else not a


# ---------------------------------------------------------------- conditions and values (SQL text + meaning)

@dataclass
class Expr:
    sql: str
    fn: Callable  # over (target row) or (target row, source row) or (source row)


def target_condition(rng: random.Random, q: str) -> Expr:
    """A condition over a target row; ``q``: the qualifier of its columns ('' or 't.')."""
    k = rng.randint(-1, 6)
    choices = [
        Expr(f"{q}x > {k}", lambda t: gt(t["x"], k)),
        Expr(f"{q}x IS NULL", lambda t: t["x"] is None),
        Expr(f"{q}p = 'a'", lambda t: eq(t["p"], "a")),
        Expr(f"{q}id % 3 = {k % 3}", lambda t: eq(None if t["id"] is None else t["id"] % 3, k % 3)),
        Expr(f"{q}x > {k} OR {q}p = 'b'", lambda t: or3(gt(t["x"], k), eq(t["p"], "b"))),
        Expr(f"NOT ({q}x <= {k}) AND {q}s IS NOT NULL", lambda t: and3(gt(t["x"], k), t["s"] is not None)),
    ]
    return rng.choice(choices)


def matched_condition(rng: random.Random) -> Expr:
    k = rng.randint(-1, 6)
    return rng.choice([
        Expr(f"src.x > {k}", lambda t, s: gt(s["x"], k)),
        Expr("t.x IS NULL", lambda t, s: t["x"] is None),
        Expr("src.x IS NULL", lambda t, s: s["x"] is None),
        Expr("t.x < src.x", lambda t, s: gt(s["x"], t["x"])),
        Expr("src.p = 'a'", lambda t, s: eq(s["p"], "a")),
        Expr(f"t.s IS NOT NULL AND src.x <= {k}", lambda t, s: and3(t["s"] is not None, not3(gt(s["x"], k)))),
    ])


def source_condition(rng: random.Random) -> Expr:
    k = rng.randint(-1, 6)
    return rng.choice([
        Expr(f"src.x > {k}", lambda s: gt(s["x"], k)),
        Expr("src.x IS NULL", lambda s: s["x"] is None),
        Expr("src.p = 'b'", lambda s: eq(s["p"], "b")),
        Expr("src.s IS NOT NULL", lambda s: s["s"] is not None),
    ])


ON_KEY = Expr("t.id = src.id", lambda t, s: eq(t["id"], s["id"]))
# Two terms: the merge cannot find its unmatched source rows from the matched keys alone; a source row
# with a NULL x matches nothing, so its insert may repeat an id the table has.
ON_KEY_AND_X = Expr("t.id = src.id AND src.x IS NOT NULL", lambda t, s: and3(eq(t["id"], s["id"]), s["x"] is not None))


def _plus(a, n):
    return (0 if a is None else a) + n


# ---------------------------------------------------------------- operations

@dataclass
class Clause:
    kind: str  # "matched" | "not_matched" | "not_matched_by_source"
    action: str  # "update" | "delete" | "insert"
    condition: Expr | None = None
    sets: dict[str, Expr] | None = None  # column -> value; None with all=True
    all: bool = False

    @property
    def label(self) -> str:
        """The clause's kind, action and whether it has a condition (for coverage)."""
        return f"{self.kind} {self.action}{'All' if self.all else ''}{' if' if self.condition is not None else ''}"

    def text(self) -> str:
        name = {"matched": "whenMatched", "not_matched": "whenNotMatched", "not_matched_by_source": "whenNotMatchedBySource"}[self.kind]
        args = [] if self.condition is None else [repr(self.condition.sql)]
        if self.sets is not None:
            args.append(repr({c: e.sql for c, e in self.sets.items()}))
        return f"{name}{self.action.capitalize()}{'All' if self.all else ''}({', '.join(args)})"


@dataclass
class Op:
    kind: str  # "delete" | "update" | "merge" | "overwrite" | "append" (lakelog's, to refill an emptied table)
    condition: Expr | None = None  # delete, update; overwrite: its predicate (None: dynamic partition overwrite)
    sets: dict[str, Expr] | None = None  # update
    source: list[Row] = field(default_factory=list)  # merge; append, overwrite: the rows written
    clauses: list[Clause] = field(default_factory=list)  # merge
    on: Expr = field(default_factory=lambda: ON_KEY)  # merge: its condition
    notes: set[str] = field(default_factory=set)  # merge: situations it met (see coverage)
    rows_after: list[Row] = field(default_factory=list)  # the model's table after it
    changes: Counter = field(default_factory=Counter)  # (change type, row tuple) -> count

    def text(self) -> str:
        if self.kind == "delete":
            return f"delete({self.condition.sql if self.condition else None!r})"
        if self.kind == "append":
            return f"append({[key(r) for r in self.source]!r})"
        if self.kind == "overwrite":
            how = f"replaceWhere {self.condition.sql!r}" if self.condition is not None else "partitionOverwriteMode dynamic"
            return f"overwrite({[key(r) for r in self.source]!r}, {how})"
        if self.kind == "update":
            return f"update({self.condition.sql if self.condition else None!r}, {({c: e.sql for c, e in self.sets.items()})!r})"
        return f"merge(source={[key(r) for r in self.source]!r}, {self.on.sql!r})." + ".".join(c.text() for c in self.clauses)


def key(row: Row) -> tuple:
    return tuple(row[c] for c in COLUMNS)


def _apply_update(op: Op, rows: list[Row]) -> list[Row]:
    out = []
    for t in rows:
        if op.condition is None or op.condition.fn(t) is True:
            new = {**t, **{c: e.fn(t) for c, e in op.sets.items()}}
            op.changes[("update_preimage", key(t))] += 1
            op.changes[("update_postimage", key(new))] += 1
            out.append(new)
        else:
            out.append(t)
    return out


def _apply_delete(op: Op, rows: list[Row]) -> list[Row]:
    out = []
    for t in rows:
        if op.condition is None or op.condition.fn(t) is True:
            op.changes[("delete", key(t))] += 1
        else:
            out.append(t)
    return out


def _first(clauses: list[Clause], applies: Callable[[Clause], bool]) -> Clause | None:
    return next((c for c in clauses if c.condition is None or applies(c) is True), None)


def _apply_merge(op: Op, rows: list[Row]) -> list[Row]:
    matched = [c for c in op.clauses if c.kind == "matched"]
    by_source = [c for c in op.clauses if c.kind == "not_matched_by_source"]
    inserts = [c for c in op.clauses if c.kind == "not_matched"]
    # (source keys are unique and the condition includes key equality: no target row is matched twice)
    match = {id(t): next((s for s in op.source if op.on.fn(t, s) is True), None) for t in rows}
    matched_sources = {id(s) for s in match.values() if s is not None}
    out = []
    for t in rows:
        s = match[id(t)]
        if s is not None:
            clause = _first(matched, lambda c: c.condition.fn(t, s))
        else:
            clause = _first(by_source, lambda c: c.condition.fn(t))
        if clause is None:
            if s is not None:
                op.notes.add("a match left unchanged")
            out.append(t)
        elif clause.action == "delete":
            op.changes[("delete", key(t))] += 1
        else:
            if clause.all:
                new = {c: s[c] for c in COLUMNS}
            else:
                new = {**t, **{c: (e.fn(t, s) if s is not None else e.fn(t)) for c, e in clause.sets.items()}}
            op.changes[("update_preimage", key(t))] += 1
            op.changes[("update_postimage", key(new))] += 1
            out.append(new)
    if not op.changes and matched_sources:
        op.notes.add("no target row changed")
    for s in op.source:
        if id(s) in matched_sources:
            continue
        clause = _first(inserts, lambda c: c.condition.fn(s))
        if clause is not None:
            new = {c: s[c] for c in COLUMNS} if clause.all else {c: (clause.sets[c].fn(s) if c in clause.sets else None) for c in COLUMNS}
            op.changes[("insert", key(new))] += 1
            out.append(new)
    return out


# ---------------------------------------------------------------- drawing a sequence

@dataclass
class Sequence:
    seed: int
    deletion_vectors: bool
    partitioned: bool
    appends: list[list[Row]]  # version 0 creates the table with the first; one version each
    ops: list[Op]

    @property
    def shape(self) -> str:
        return f"{'dv' if self.deletion_vectors else 'cow'}-{'partitioned' if self.partitioned else 'flat'}"


class _Drawer:
    def __init__(self, rng: random.Random):
        self.rng = rng
        self.next_id = 0

    def row(self, id_: int | None) -> Row:
        rng = self.rng
        return {"id": id_, "p": rng.choice(["a", "a", "b", "b", "c", None]), "x": rng.choice([None, -1, 0, 1, 2, 3, 4, 5, 6]),
                "s": rng.choice([None, f"n{id_}", f"m{id_}"])}

    def fresh(self, n: int) -> list[Row]:
        rows = [self.row(i) for i in range(self.next_id, self.next_id + n)]
        self.next_id += n
        return rows

    def update_sets(self) -> dict[str, Expr]:
        rng = self.rng
        sets = {"x": Expr("coalesce(x, 0) + 1", lambda t: _plus(t["x"], 1))}
        if rng.random() < 0.4:  # moves rows to another partition
            sets["p"] = Expr("'b'", lambda t: "b")
        if rng.random() < 0.4:
            sets["s"] = Expr("concat(s, '!')", lambda t: None if t["s"] is None else t["s"] + "!")
        return sets

    def matched_update(self) -> Clause:
        rng = self.rng
        if rng.random() < 0.3:
            return Clause("matched", "update", all=True)
        sets = {"x": rng.choice([Expr("src.x", lambda t, s: s["x"]),
                                 Expr("t.x + src.x", lambda t, s: None if t["x"] is None or s["x"] is None else t["x"] + s["x"])])}
        if rng.random() < 0.3:
            sets["p"] = Expr("src.p", lambda t, s: s["p"])
        if rng.random() < 0.4:
            sets["s"] = Expr("concat(t.s, '+')", lambda t, s: None if t["s"] is None else t["s"] + "+")
        return Clause("matched", "update", sets=sets)

    def by_source_update(self) -> Clause:
        sets = {"x": Expr("coalesce(t.x, 0) + 100", lambda t: _plus(t["x"], 100))}
        if self.rng.random() < 0.3:
            sets["p"] = Expr("'c'", lambda t: "c")
        return Clause("not_matched_by_source", "update", sets=sets)

    def insert(self) -> Clause:
        if self.rng.random() < 0.5:
            return Clause("not_matched", "insert", all=True)
        return Clause("not_matched", "insert", sets={"id": Expr("src.id", lambda s: s["id"]), "p": Expr("src.p", lambda s: s["p"]),
                                                     "x": Expr("src.x * 10", lambda s: None if s["x"] is None else s["x"] * 10)})

    def clauses(self) -> list[Clause]:
        rng = self.rng
        out: list[Clause] = []
        for kind, counts in (("matched", [0, 1, 1, 2]), ("not_matched", [0, 1, 1, 2]), ("not_matched_by_source", [0, 1, 1, 2])):
            n = rng.choice(counts)
            for i in range(n):
                if kind == "matched":
                    c = self.matched_update() if rng.random() < 0.6 else Clause("matched", "delete")
                elif kind == "not_matched":
                    c = self.insert()
                else:
                    c = self.by_source_update() if rng.random() < 0.5 else Clause("not_matched_by_source", "delete")
                # only the last clause of a kind may omit its condition; an unconditional one by source
                # would empty most of the table, so it is rarer
                if i < n - 1 or rng.random() < (0.5 if kind != "not_matched_by_source" else 0.7):
                    c.condition = (matched_condition(rng) if kind == "matched" else source_condition(rng) if kind == "not_matched"
                                   else target_condition(rng, "t."))
                out.append(c)
        return out or [self.matched_update()]

    def merge_source(self, rows: list[Row]) -> list[Row]:
        rng = self.rng
        existing = sorted({r["id"] for r in rows if r["id"] is not None})
        chosen = rng.sample(existing, min(len(existing), rng.randint(1, 4)))
        source = [self.row(i) for i in chosen] + self.fresh(rng.randint(0, 3))
        if rng.random() < 0.3:  # a NULL key matches nothing
            source.append(self.row(None))
        rng.shuffle(source)
        return source


def _apply_overwrite(op: Op, rows: list[Row], partitioned: bool) -> list[Row]:
    """A predicate overwrite (``op.condition``) or, without one, a dynamic partition overwrite: the
    rows selected (those of the partitions ``op.source`` holds; every row of an unpartitioned table)
    are replaced by ``op.source``."""
    parts = {r["p"] for r in op.source}
    out = []
    for t in rows:
        goes = op.condition.fn(t) is True if op.condition is not None else (not partitioned or t["p"] in parts)
        if goes:
            op.changes[("delete", key(t))] += 1
        else:
            out.append(t)
    for r in op.source:
        op.changes[("insert", key(r))] += 1
    return out + list(op.source)


def plan(seed: int, n_ops: tuple[int, int] = (3, 4)) -> Sequence:
    """The sequence of ``seed``: its shape (from the seed, so consecutive seeds cover all four), the
    appends that create the table, and ``n_ops`` (at least, at most) operations with their expected
    rows and changes."""
    rng = random.Random(seed)
    deletion_vectors, partitioned = seed % 2 == 1, seed % 4 >= 2
    d = _Drawer(rng)
    appends = [d.fresh(rng.randint(3, 6)) for _ in range(rng.randint(2, 3))]
    rows = [r for batch in appends for r in batch]
    ops = []
    for _ in range(rng.randint(*n_ops)):
        kind = rng.choices(["delete", "update", "merge", "overwrite"], weights=[1, 1, 3, 1])[0]
        if kind == "overwrite":  # Spark's replaceWhere, or a dynamic partition overwrite
            new = d.fresh(rng.randint(1, 3))
            k = rng.randint(-1, 4)
            condition = rng.choice([None, Expr("p = 'a'", lambda t: eq(t["p"], "a")), Expr(f"x > {k}", lambda t, k=k: gt(t["x"], k))])
            for r in new:  # (the rows written satisfy the predicate)
                if condition is not None and condition.sql.startswith("p"):
                    r["p"] = "a"
                elif condition is not None:
                    r["x"] = k + rng.randint(1, 3)
            op = Op("overwrite", condition=condition, source=new)
            rows = _apply_overwrite(op, rows, partitioned)
        elif kind == "delete":
            op = Op("delete", condition=target_condition(rng, "") if rng.random() < 0.9 else None)
            rows = _apply_delete(op, rows)
        elif kind == "update":
            op = Op("update", condition=target_condition(rng, "") if rng.random() < 0.9 else None, sets=d.update_sets())
            rows = _apply_update(op, rows)
        else:
            op = Op("merge", source=d.merge_source(rows), clauses=d.clauses(), on=ON_KEY_AND_X if rng.random() < 0.3 else ON_KEY)
            rows = _apply_merge(op, rows)
        op.rows_after = rows
        ops.append(op)
        if len(rows) < 3:  # keep something to change: a (Python) append
            extra = d.fresh(4)
            rows = rows + extra
            ops.append(Op("append", source=extra, rows_after=rows, changes=Counter(("insert", key(r)) for r in extra)))
    return Sequence(seed, deletion_vectors, partitioned, appends, ops)


def coverage(sequences: list[Sequence]) -> set[str]:
    """What the sequences exercise: operation kinds with and without conditions, each merge clause
    label, each shape with a merge that has a not-matched-by-source clause, and merges that insert
    while they leave a matched row unchanged or change no target row (on one key and on two terms)."""
    seen = set()
    for q in sequences:
        for op in q.ops:
            if op.kind == "merge":
                seen.update(c.label for c in op.clauses)
                if any(c.kind == "not_matched_by_source" for c in op.clauses):
                    seen.add(f"by source on {q.shape}")
                if any(c.kind == "not_matched" for c in op.clauses):
                    seen.update(f"inserts, {note}, on {op.on.sql}" for note in op.notes)
            elif op.kind == "overwrite":
                seen.add(f"overwrite where {op.condition.sql.split()[0]}" if op.condition is not None else
                         f"overwrite partitions on {q.shape.split('-')[1]}")
            elif op.kind != "append":
                seen.add(f"{op.kind}{' if' if op.condition is not None else ''}")
    return seen

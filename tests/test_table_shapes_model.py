"""Model-based test across table shapes: the shape itself is drawn (partitioned or not, column mapping
none/name/id, deletion vectors on or off, checkpoint interval 1-10, a nested struct column and, with
column mapping, a column named with a space), then a random sequence of append, overwrite, predicate
and dynamic partition overwrite, delete, update, merge (matched update and delete, insert, not matched
by source delete; schema evolution), rename and drop column, optimize, vacuum, restore, checkpoint and
time travel.

The model is a DuckDB table per version, changed by the same SQL. After every step lakelog's latest
version equals the model's, deltalake reads the same rows (its SQL engine, which applies deletion
vectors and column mapping), and every few steps ``check`` finds no problem. The default run is short
and seeded; LAKELOG_FUZZ_EXAMPLES=N runs N random table lives of up to 30 steps.
"""

from __future__ import annotations

import os
from collections import Counter
import shutil
import tempfile

import duckdb
import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import lakelog
from lakelog.expressions.sql import quote_ident

FUZZ = int(os.environ.get("LAKELOG_FUZZ_EXAMPLES", "0") or 0)
STRUCT = pa.struct([("a", pa.int64()), ("b", pa.string())])
PARTS = st.sampled_from(["a", "b", "c d", None])
VALUES = st.none() | st.integers(-5, 5)
LABELS = st.sampled_from(["u", "v", "w w", None])


def _canon(rows: list[dict]) -> list[tuple]:
    return sorted((tuple(sorted((k, repr(v)) for k, v in r.items())) for r in rows))


class TableShapes(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="lakelog-shapes-")
        self.path = os.path.join(self.dir, "t")
        self.con = duckdb.connect()
        self.con.execute("SET TimeZone = 'UTC'")
        self.next_id = 0
        self.steps = 0
        self.history: dict[int, tuple[pa.Table, dict]] = {}  # version -> (model rows, column names)

    def teardown(self) -> None:
        self.con.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # ------------------------------------------------------------ the shape
    @initialize(
        partitioned=st.booleans(), mapping=st.sampled_from(["none", "name", "id"]), dvs=st.booleans(), cdf=st.booleans(),
        tracking=st.booleans(), interval=st.integers(1, 10), rows=st.lists(st.tuples(PARTS, VALUES, LABELS), min_size=1, max_size=6),
    )
    def create(self, partitioned, mapping, dvs, cdf, tracking, interval, rows):
        self.partitioned, self.mapping, self.dvs, self.cdf, self.tracking = partitioned, mapping, dvs, cdf, tracking
        self.row_ids: dict[int, int] = {}  # id -> its stable row id: once given, a row keeps it in every version
        # Column names this version of the table has (rename and drop change them).
        self.names = {"x": "x", "label": "my label" if mapping != "none" else "label", "st": "st"}
        conf = {"delta.checkpointInterval": str(interval)}
        if mapping != "none":
            conf["delta.columnMapping.mode"] = mapping
        if dvs:
            conf["delta.enableDeletionVectors"] = "true"
        if cdf:
            conf["delta.enableChangeDataFeed"] = "true"
        if tracking:
            conf["delta.enableRowTracking"] = "true"
        data = self._data(rows)
        lakelog.write_table(self.path, data, partition_by=["p"] if partitioned else None, configuration=conf)
        self.con.register("incoming", data)
        self.con.execute("CREATE TABLE m AS SELECT * FROM incoming")
        self.con.unregister("incoming")
        self._committed()

    # ------------------------------------------------------------ helpers
    def _schema(self) -> pa.Schema:
        fields = [pa.field("id", pa.int64()), pa.field("p", pa.string()), pa.field(self.names["x"], pa.int64()),
                  pa.field(self.names["label"], pa.string())]
        if self.names["st"] is not None:
            fields.append(pa.field("st", STRUCT))
        return pa.schema(fields)

    def _data(self, rows) -> pa.Table:
        ids = list(range(self.next_id, self.next_id + len(rows)))
        self.next_id += len(rows)
        cols = {"id": ids, "p": [p for p, _, _ in rows], self.names["x"]: [x for _, x, _ in rows], self.names["label"]: [s for _, _, s in rows]}
        if self.names["st"] is not None:
            cols["st"] = [None if x is None else {"a": x, "b": s} for _, x, s in rows]
        return pa.table(cols, schema=self._schema())

    def _q(self, key: str) -> str:
        return quote_ident(self.names[key])

    def _model(self) -> pa.Table:
        return self.con.sql("SELECT * FROM m").to_arrow_table()

    def _committed(self) -> None:
        t = lakelog.Table(self.path)
        v = t.version
        self.history[v] = (self._model(), dict(self.names))
        if self.tracking:
            self._rows_keep_their_ids(t)
        # (a rename, or a restore across one, changes names, not rows: the check needs the same names)
        if self.cdf and v - 1 in self.history and self.history[v - 1][1] == self.names:
            self._changes_lead_from_the_last_version(t, v)

    def _rows_keep_their_ids(self, t: lakelog.Table) -> None:
        """Row tracking: row ids are unique, and a row (its ``id``) keeps the same one through every update,
        merge, delete of others, compaction and restore."""
        rows = t.to_pyarrow(columns=["id"], with_row_tracking=True).to_pylist()
        ids = [r["_row_id"] for r in rows]
        assert len(set(ids)) == len(ids), "a row id twice"
        for r in rows:
            assert self.row_ids.setdefault(r["id"], r["_row_id"]) == r["_row_id"], f"row {r['id']} changed its row id"

    def _changes_lead_from_the_last_version(self, t: lakelog.Table, v: int) -> None:
        """The change feed of version ``v`` applied to the model of ``v - 1`` gives the model of ``v``
        (and deltalake reads the same feed where it can)."""
        changes = t.changes(v, v)
        names = [n for n in changes.schema.names if not n.startswith("_")]
        before, after = self.history[v - 1][0], self.history[v][0]

        def canon(r: dict) -> tuple:
            return tuple(sorted((n, repr(r.get(n))) for n in names))

        rows = Counter(canon(r) for r in before.to_pylist())
        for r in changes.to_pylist():
            if r["_change_type"] in ("delete", "update_preimage"):
                assert rows[canon(r)] > 0, (v, r)
                rows[canon(r)] -= 1
            else:
                rows[canon(r)] += 1
        assert +rows == Counter(canon(r) for r in after.to_pylist()), v
        # deltalake reads no column-mapped feed, and reads a removed file's rows without its deletion
        # vector (rows deleted earlier come back as deletes): compared on the other shapes
        if self.mapping == "none" and not self.dvs:
            theirs = pa.table(DeltaTable(self.path).load_cdf(starting_version=v, ending_version=v).read_all())
            key = lambda rs: sorted((r["_change_type"], canon(r)) for r in rs)  # noqa: E731
            assert key(theirs.to_pylist()) == key(changes.to_pylist()), v

    def _apply(self, *statements: str, data: pa.Table | None = None) -> None:
        if data is not None:
            self.con.register("incoming", data)
        for s in statements:
            self.con.execute(s)
        if data is not None:
            self.con.unregister("incoming")

    def _predicate(self, data) -> str:
        x, label = self._q("x"), self._q("label")
        k = data.draw(st.integers(-5, 5), label="k")
        choices = [f"{x} > {k}", f"{x} IS NULL", "p = 'a'", "p IS NULL", f"id % 3 = {abs(k) % 3}", f"{label} = 'w w'",
                   f"{x} > {k} OR p = 'b'", "TRUE"]
        if self.names["st"] is not None:
            choices.append(f"st.a < {k}")
        return data.draw(st.sampled_from(choices), label="predicate")

    # ------------------------------------------------------------ writes
    @rule(rows=st.lists(st.tuples(PARTS, VALUES, LABELS), max_size=5))
    def append(self, rows):
        data = self._data(rows)
        lakelog.write_table(self.path, data)
        self._apply("INSERT INTO m BY NAME SELECT * FROM incoming", data=data)
        self._committed()

    @rule(rows=st.lists(st.tuples(PARTS, VALUES, LABELS), max_size=5))
    def overwrite(self, rows):
        data = self._data(rows)
        lakelog.write_table(self.path, data, mode="overwrite")
        self._apply("DELETE FROM m", "INSERT INTO m BY NAME SELECT * FROM incoming", data=data)
        self._committed()

    @rule(part=st.sampled_from(["a", "b"]), rows=st.lists(st.tuples(VALUES, LABELS), max_size=4))
    def overwrite_where(self, part, rows):
        data = self._data([(part, x, s) for x, s in rows])
        lakelog.write_table(self.path, data, mode="overwrite", predicate=f"p = '{part}'")
        self._apply(f"DELETE FROM m WHERE p = '{part}'", "INSERT INTO m BY NAME SELECT * FROM incoming", data=data)
        self._committed()

    @rule(rows=st.lists(st.tuples(PARTS, VALUES, LABELS), max_size=4))
    def overwrite_partitions(self, rows):
        data = self._data(rows)
        lakelog.write_table(self.path, data, mode="overwrite", partition_overwrite="dynamic")
        if self.partitioned:
            self._apply("DELETE FROM m WHERE EXISTS (SELECT 1 FROM incoming i WHERE i.p IS NOT DISTINCT FROM m.p)", data=data)
        else:  # a plain overwrite, as in Delta
            self._apply("DELETE FROM m")
        self._apply("INSERT INTO m BY NAME SELECT * FROM incoming", data=data)
        self._committed()

    # ------------------------------------------------------------ row-level changes
    @rule(data=st.data())
    def delete(self, data):
        pred = self._predicate(data)
        lakelog.Table(self.path).delete(pred)
        self._apply(f"DELETE FROM m WHERE {pred}")
        self._committed()

    @rule(data=st.data(), move=st.booleans())
    def update(self, data, move):
        pred = self._predicate(data)
        x = self._q("x")
        sets = {self.names["x"]: f"coalesce({x}, 0) + 1"}
        if move:
            sets["p"] = "'b'"  # moves rows to another partition
        lakelog.Table(self.path).update(sets, pred)
        assignments = ", ".join(f"{quote_ident(c)} = {e}" for c, e in sets.items())
        self._apply(f"UPDATE m SET {assignments} WHERE {pred}")
        self._committed()

    @rule(data=st.data(), delete_matched=st.booleans(), by_source=st.booleans(), evolve=st.booleans())
    def merge(self, data, delete_matched, by_source, evolve):
        existing = [r[0] for r in self.con.sql("SELECT DISTINCT id FROM m").fetchall()]
        ids = data.draw(st.lists(st.sampled_from(existing), max_size=3, unique=True) if existing else st.just([]), label="matched ids")
        fresh = data.draw(st.lists(st.tuples(PARTS, VALUES, LABELS), max_size=3), label="new rows")
        xs = data.draw(st.lists(VALUES, min_size=len(ids), max_size=len(ids)), label="xs")
        source = self._data(fresh)
        matched = pa.table({"id": ids, "p": ["a"] * len(ids), self.names["x"]: xs, self.names["label"]: ["m"] * len(ids),
                            **({"st": [None] * len(ids)} if self.names["st"] is not None else {})}, schema=self._schema())
        source = pa.concat_tables([matched, source])
        has_extra = "extra" in self.con.sql("SELECT * FROM m LIMIT 0").columns
        evolve = evolve and not has_extra
        if evolve or has_extra:  # (without schema evolution update_all needs every table column)
            source = source.append_column("extra", pa.array([f"e{i}" for i in source.column("id").to_pylist()], pa.string()))
        t = lakelog.Table(self.path)
        m = t.merge(source, "target.id = source.id", schema_mode="merge" if evolve else None)
        x = self._q("x")
        if delete_matched:
            m = m.when_matched_delete(f"source.{x} IS NULL").when_matched_update_all()
        else:
            m = m.when_matched_update({self.names["x"]: f"source.{x}"})
        m = m.when_not_matched_insert_all()
        if by_source:
            m = m.when_not_matched_by_source_delete(f"target.{x} = 3")
        m.execute()
        # The model: the same clauses in DuckDB's SQL, in the protocol's order (matched, insert, by source).
        if evolve:
            self._apply("ALTER TABLE m ADD COLUMN extra VARCHAR")
        self.con.register("src", source)
        self._apply("CREATE TEMP TABLE ins AS SELECT * FROM src WHERE id NOT IN (SELECT id FROM m)")
        if by_source:
            self._apply(f"DELETE FROM m WHERE id NOT IN (SELECT id FROM src) AND {x} = 3")
        if delete_matched:
            self._apply(f"DELETE FROM m WHERE id IN (SELECT id FROM src WHERE {x} IS NULL)")
            self._apply("UPDATE m SET " + ", ".join(f"{quote_ident(c)} = src.{quote_ident(c)}" for c in source.column_names if c != "id")
                        + " FROM src WHERE m.id = src.id")
        else:
            self._apply(f"UPDATE m SET {x} = src.{x} FROM src WHERE m.id = src.id")
        self._apply("INSERT INTO m BY NAME SELECT * FROM ins", "DROP TABLE ins")
        self.con.unregister("src")
        self._committed()

    # ------------------------------------------------------------ schema changes
    @precondition(lambda self: self.mapping != "none")
    @rule()
    def rename_x(self):
        old = self.names["x"]
        new = "x renamed" if old == "x" else "x"
        lakelog.Table(self.path).rename_column(old, new)
        self._apply(f"ALTER TABLE m RENAME COLUMN {quote_ident(old)} TO {quote_ident(new)}")
        self.names["x"] = new
        self._committed()

    @precondition(lambda self: self.mapping != "none" and self.names["st"] is not None)
    @rule()
    def drop_struct(self):
        lakelog.Table(self.path).drop_column("st")
        self._apply("ALTER TABLE m DROP COLUMN st")
        self.names["st"] = None
        self._committed()

    # ------------------------------------------------------------ maintenance and time
    @rule()
    def optimize(self):
        if lakelog.Table(self.path).optimize(target_size=1024**2)["committed"]:
            self._committed()

    @rule()
    def checkpoint(self):
        lakelog.Table(self.path).checkpoint()

    @rule()
    def vacuum(self):
        t = lakelog.Table(self.path)
        if t.vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False):
            # Older versions lost files: they are no longer readable, nor restorable.
            latest = lakelog.Table(self.path).version
            self.history = {latest: (self._model(), dict(self.names))}

    @rule(data=st.data())
    def restore(self, data):
        version = data.draw(st.sampled_from(sorted(self.history)), label="restore to")
        rows, names = self.history[version]
        lakelog.Table(self.path).restore(version=version)
        self._apply("DROP TABLE m")
        self.con.register("old", rows)
        self._apply("CREATE TABLE m AS SELECT * FROM old")
        self.con.unregister("old")
        self.names = dict(names)
        self._committed()

    @rule(data=st.data())
    def time_travel(self, data):
        version = data.draw(st.sampled_from(sorted(self.history)), label="read version")
        rows, _ = self.history[version]
        assert _canon(lakelog.read_table(self.path, version=version).to_pylist()) == _canon(rows.to_pylist()), version

    # ------------------------------------------------------------ invariants
    @invariant()
    def equals_the_model_and_deltalake(self):
        if not hasattr(self, "names"):
            return
        self.steps += 1
        expected = _canon(self._model().to_pylist())
        t = lakelog.Table(self.path)
        assert _canon(t.to_pyarrow().to_pylist()) == expected
        names = ", ".join(quote_ident(n) for n in t.schema.names)
        peer = QueryBuilder().register("t", DeltaTable(self.path)).execute(f"SELECT {names} FROM t").read_all()
        assert _canon(pa.table(peer).to_pylist()) == expected
        if self.steps % 5 == 0:
            report = t.check()
            assert report.ok, report.format()


TableShapes.TestCase.settings = settings(
    max_examples=FUZZ or 6,
    stateful_step_count=30 if FUZZ else 10,
    deadline=None,
    derandomize=not FUZZ,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
TestTableShapes = TableShapes.TestCase

"""Update and merge values meet their column by write_table's rule (lakelog.schema.assignment_types).

DuckDB's CAST to the column's type dropped the struct fields a column lacked (struct_pack(a := 5,
b := 'x') into struct<a> stored {a: 5}), rounded a double into a bigint (2.5 -> 2, -1.5 -> -2) and
narrowed integers and decimals, where write_table refuses the same data.
"""

from __future__ import annotations

import decimal
import re

import deltalake
import pyarrow as pa
import pytest

import lakelog
from lakelog.errors import SchemaMismatchError

S = pa.struct([("a", pa.int64())])


def _rows(path: str) -> list[dict]:
    return sorted(lakelog.read_table(path).to_pylist(), key=lambda r: r["id"])


def _struct_table(path: str, configuration: dict | None = None) -> lakelog.Table:
    lakelog.write_table(path, pa.table({"id": [1, 2], "s": pa.array([{"a": 1}, {"a": 2}], S)}), configuration=configuration)
    return lakelog.Table(path)


# ---------------------------------------------------------------- struct fields the column lacks

@pytest.mark.parametrize("conf", [None, {"delta.enableDeletionVectors": "true"}], ids=["cow", "dv"])
def test_update_with_a_struct_field_the_column_lacks_is_refused(table_path, conf):
    t = _struct_table(table_path, conf)
    with pytest.raises(SchemaMismatchError, match=r"update: .*column 's' has field\(s\) \['s.b'\].*no schema evolution"):
        t.update({"s": "struct_pack(a := 5, b := 'x')"})
    with pytest.raises(SchemaMismatchError, match=r"\['s.n'\]"):  # a struct field holding a struct
        t.update({"s": "struct_pack(a := 5, n := struct_pack(y := 1))"})
    with pytest.raises(SchemaMismatchError, match=r"\['s.b'\]"):  # a field the column lacks is never dropped, even when null
        t.update({"s": "struct_pack(a := 5, b := NULL)"})
    assert t.version == 0 and _rows(table_path) == [{"id": 1, "s": {"a": 1}}, {"id": 2, "s": {"a": 2}}]
    t.update({"s": "struct_pack(a := 5)"}, "id = 1")  # the column's own fields: stored
    assert _rows(table_path) == [{"id": 1, "s": {"a": 5}}, {"id": 2, "s": {"a": 2}}]


CLAUSES = {
    "matched_update": lambda m: m.when_matched_update({"s": "source.s"}),
    "not_matched_insert": lambda m: m.when_not_matched_insert({"id": "source.id", "s": "source.s"}),
    "not_matched_by_source_update": lambda m: m.when_not_matched_by_source_update({"s": "struct_pack(a := 0, b := 'gone')"}),
}


@pytest.mark.parametrize("clause", list(CLAUSES))
def test_merge_struct_field_the_column_lacks_is_refused_without_schema_evolution(table_path, clause):
    t = _struct_table(table_path)
    source = pa.table({"id": [1, 3], "s": [{"a": 10, "b": "x"}, {"a": 30, "b": "y"}]})
    with pytest.raises(SchemaMismatchError, match=r"merge .* clause: .*column 's' has field\(s\) \['s.b'\].*schema_mode='merge'"):
        CLAUSES[clause](t.merge(source, "target.id = source.id")).execute()
    assert lakelog.Table(table_path).version == 0 and _rows(table_path) == [{"id": 1, "s": {"a": 1}}, {"id": 2, "s": {"a": 2}}]


@pytest.mark.parametrize("conf", [None, {"delta.enableDeletionVectors": "true"}, {"delta.columnMapping.mode": "name"}],
                         ids=["cow", "dv", "mapping"])
def test_merge_schema_evolution_keeps_new_fields_at_depth_two_and_in_lists_of_structs(table_path, conf):
    nested = pa.struct([("a", pa.int64()), ("n", pa.struct([("x", pa.int64())]))])
    lakelog.write_table(table_path, pa.table({
        "id": [1, 2, 4],
        "s": pa.array([{"a": 1, "n": {"x": 1}}, {"a": 2, "n": {"x": 2}}, {"a": 4, "n": {"x": 4}}], nested),
        "l": pa.array([[{"c": 1}], None, []], pa.list_(pa.struct([("c", pa.int64())]))),
    }), configuration=conf)
    source = pa.table({"id": [1, 2, 3], "s": [{"a": 10, "n": {"x": 10, "y": "deep"}}, {"a": 20, "n": {"x": 20, "y": "skip"}},
                                           {"a": 30, "n": {"x": 30, "y": "new"}}],
                       "l": [[{"c": 5, "d": True}], [{"c": 7, "d": None}], [{"c": 6, "d": False}]]})
    t = lakelog.Table(table_path)
    m = (t.merge(source, "target.id = source.id", schema_mode="merge")
         .when_matched_update({"s": "source.s", "l": "source.l"}, "source.id = 1")
         .when_matched_update({"l": "source.l"})  # leaves s as it was: read back with the new field null
         .when_not_matched_insert({"id": "source.id", "s": "source.s", "l": "source.l"})
         .when_not_matched_by_source_update({"s": "struct_pack(a := 40, n := struct_pack(x := 41, y := 'nmbs'))"})
         .execute())
    assert (m["num_target_rows_updated"], m["num_target_rows_inserted"]) == (3, 1)
    s_type = pa.struct([("a", pa.int64()), ("n", pa.struct([("x", pa.int64()), ("y", pa.string())]))])
    l_type = pa.list_(pa.struct([("c", pa.int64()), ("d", pa.bool_())]))
    assert lakelog.Table(table_path).schema.field("s").type == s_type and lakelog.Table(table_path).schema.field("l").type == l_type
    expected = [
        {"id": 1, "s": {"a": 10, "n": {"x": 10, "y": "deep"}}, "l": [{"c": 5, "d": True}]},
        {"id": 2, "s": {"a": 2, "n": {"x": 2, "y": None}}, "l": [{"c": 7, "d": None}]},
        {"id": 3, "s": {"a": 30, "n": {"x": 30, "y": "new"}}, "l": [{"c": 6, "d": False}]},
        {"id": 4, "s": {"a": 40, "n": {"x": 41, "y": "nmbs"}}, "l": []},
    ]
    assert _rows(table_path) == expected
    dt = deltalake.DeltaTable(table_path)
    got = pa.table(deltalake.QueryBuilder().register("t", dt).execute("SELECT * FROM t").read_all())
    assert sorted(got.to_pylist(), key=lambda r: r["id"]) == expected
    assert lakelog.Table(table_path).check().ok


def test_merge_schema_evolution_refuses_what_it_cannot_store(table_path):
    t = _struct_table(table_path)
    source = pa.table({"id": [1], "s": [{"a": 1.5, "b": "x"}]})  # a new field, and a double into a long field
    with pytest.raises(SchemaMismatchError, match=r"'s.a': double into long"):
        t.merge(source, "target.id = source.id", schema_mode="merge").when_matched_update({"s": "source.s"}).execute()
    assert lakelog.Table(table_path).version == 0


# ---------------------------------------------------------------- lossy casts

def _number_table(path: str) -> lakelog.Table:
    lakelog.write_table(path, pa.table({
        "id": pa.array([1, 2], pa.int64()), "x": pa.array([10, 20], pa.int64()), "i": pa.array([1, 2], pa.int32()),
        "h": pa.array([1, 2], pa.int16()), "d": pa.array([decimal.Decimal("1.25"), None], pa.decimal128(10, 2)),
        "f": pa.array([0.5, 1.5], pa.float64()), "t": ["a", "7"],
    }))
    return lakelog.Table(path)


FLOATS = pa.table({"id": [1, 3], "x": [2.5, -1.5]})


@pytest.mark.parametrize("clauses", [
    lambda m: m.when_matched_update_all(),
    lambda m: m.when_not_matched_insert_all(),
    lambda m: m.when_matched_update({"x": "source.x"}),
    lambda m: m.when_not_matched_insert({"id": "source.id", "x": "source.x"}),
    lambda m: m.when_matched_update({"x": "source.x * 2"}),
], ids=["update_all", "insert_all", "update", "insert", "update-expression"])
def test_merge_of_a_double_into_a_long_column_is_refused(table_path, clauses):
    """2.5 was stored as 2 and -1.5 as -2."""
    lakelog.write_table(table_path, pa.table({"id": [1, 2], "x": [10, 20]}))
    with pytest.raises(SchemaMismatchError, match=r"has type double, which column 'x' of type long cannot store without loss.*CAST\(") as e:
        clauses(lakelog.Table(table_path).merge(FLOATS, "target.id = source.id")).execute()
    assert (e.value.path, e.value.data_type, e.value.table_type) == ("x", pa.float64(), pa.int64())
    assert lakelog.Table(table_path).version == 0 and _rows(table_path) == [{"id": 1, "x": 10}, {"id": 2, "x": 20}]
    # An explicit cast says how to convert.
    (lakelog.Table(table_path).merge(FLOATS, "target.id = source.id")
     .when_matched_update({"x": "CAST(floor(source.x) AS BIGINT)"})
     .when_not_matched_insert({"id": "source.id", "x": "CAST(floor(source.x) AS BIGINT)"}).execute())
    assert _rows(table_path) == [{"id": 1, "x": 2}, {"id": 2, "x": 20}, {"id": 3, "x": -2}]


@pytest.mark.parametrize("column, expr, value, table", [
    ("x", "x * 1.5", "decimal(21,1)", "long"),
    ("x", "x / 2", "double", "long"),
    ("i", "id + 1", "long", "integer"),  # narrowing: refused by type, as write_table refuses long data in an integer column
    ("h", "h + i", "integer", "short"),
    ("d", "d * 1.1", "decimal(12,3)", "decimal(10,2)"),  # fewer decimal places
    ("d", "d + 1", "decimal(13,2)", "decimal(10,2)"),  # fewer integer digits: refused by type, as write_table does
    ("d", "f", "double", "decimal(10,2)"),
    ("x", "t", "string", "long"),
    ("t", "x", "long", "string"),
    ("f", "x", "long", "double"),  # beyond 2**53 a double is not exact
])
def test_update_expression_the_column_cannot_store_is_refused(table_path, column, expr, value, table):
    t = _number_table(table_path)
    before = _rows(table_path)
    with pytest.raises(SchemaMismatchError, match=re.escape(f"update: the value '{expr}' has type {value}, which column '{column}' of type {table} cannot store")):
        t.update({column: expr})
    assert t.version == 0 and _rows(table_path) == before


def test_update_expressions_and_literals_the_column_stores_exactly(table_path):
    t = _number_table(table_path)
    t.update({"x": "x // 2 + i", "i": "i * 2", "d": "-d", "f": "i"}, "id = 1")
    t.update({"h": 5, "i": -7, "x": 3.0, "d": decimal.Decimal("2.5"), "f": "0.1", "t": None}, "id = 2")  # literals: by value
    t.update({"x": "CAST(x * 1.5 AS BIGINT)", "h": "CAST(h + i AS SMALLINT)", "d": "CAST(d + 3.5 AS DECIMAL(10,2))"}, "id = 1")  # cast: how
    assert _rows(table_path) == [
        {"id": 1, "x": 9, "i": 2, "h": 3, "d": decimal.Decimal("2.25"), "f": 1.0, "t": "a"},  # -1.25 + 3.5
        {"id": 2, "x": 3, "i": -7, "h": 5, "d": decimal.Decimal("2.50"), "f": 0.1, "t": None},
    ]


@pytest.mark.parametrize("column, literal", [
    ("x", 2.5), ("x", "2.5"), ("h", 40000), ("d", decimal.Decimal("1.255")), ("d", "1.255"), ("i", "'2.5'"), ("i", True),
])
def test_update_literal_the_column_cannot_store_exactly_is_refused(table_path, column, literal):
    t = _number_table(table_path)
    with pytest.raises(SchemaMismatchError, match=rf"column '{column}'"):
        t.update({column: literal})
    assert t.version == 0


def test_merge_integers_into_a_double_column_with_schema_evolution_as_write_table(table_path):
    """schema_mode='merge' stores integers in a double column when each is exact, as write_table does."""
    lakelog.write_table(table_path, pa.table({"id": [1], "f": [0.5]}))
    t = lakelog.Table(table_path)
    with pytest.raises(SchemaMismatchError, match="type long, which column 'f' of type double"):
        t.merge(pa.table({"id": [1], "f": [3]}), "target.id = source.id").when_matched_update_all().execute()
    big = pa.table({"id": [1, 2], "f": [3, 2**53 + 1]})
    with pytest.raises(SchemaMismatchError, match="column 'f'.*2\\*\\*53"):
        t.merge(big, "target.id = source.id", schema_mode="merge").when_matched_update_all().when_not_matched_insert_all().execute()
    with pytest.raises(SchemaMismatchError, match="CAST"):  # an expression's values are not known before it runs
        t.merge(big, "target.id = source.id", schema_mode="merge").when_matched_update({"f": "source.f + 1"}).execute()
    assert lakelog.Table(table_path).version == 0
    t.merge(big.slice(0, 1), "target.id = source.id", schema_mode="merge").when_matched_update_all().execute()
    assert _rows(table_path) == [{"id": 1, "f": 3.0}]


def test_void_column_takes_a_type_only_with_schema_evolution(table_path):
    lakelog.write_table(table_path, pa.table({"id": [1, 2], "v": pa.nulls(2)}))
    t = lakelog.Table(table_path)
    with pytest.raises(SchemaMismatchError, match="'v' is void.*cannot change a column's type"):
        t.update({"v": "id * 2"})
    source = pa.table({"id": [1], "v": ["x"]})
    with pytest.raises(SchemaMismatchError, match="'v' is void.*schema_mode='merge'"):
        t.merge(source, "target.id = source.id").when_matched_update({"v": "source.v"}).execute()
    assert lakelog.Table(table_path).version == 0
    t.merge(source, "target.id = source.id", schema_mode="merge").when_matched_update({"v": "source.v"}).execute()
    assert lakelog.Table(table_path).schema.field("v").type == pa.string()
    assert _rows(table_path) == [{"id": 1, "v": "x"}, {"id": 2, "v": None}]


def test_write_table_append_keeps_its_rule(table_path):
    """The rule assignments now follow is write_table's own, unchanged: widenings append, lossy casts are refused."""
    lakelog.write_table(table_path, pa.table({"id": [1], "x": [10], "s": pa.array([{"a": 1}], S)}))
    lakelog.write_table(table_path, pa.table({"id": pa.array([2], pa.int32()), "x": pa.array([20], pa.int16()),
                                              "s": pa.array([{"a": 2}], pa.struct([("a", pa.int32())]))}))
    with pytest.raises(SchemaMismatchError, match="column 'x' has type double in the data but long in the table"):
        lakelog.write_table(table_path, pa.table({"id": [3], "x": [2.5]}))
    with pytest.raises(SchemaMismatchError, match=r"column 's.b' is not in the table's struct 's'"):
        lakelog.write_table(table_path, pa.table({"id": [3], "s": [{"a": 3, "b": "x"}]}))
    assert lakelog.Table(table_path).version == 1
    assert _rows(table_path) == [{"id": 1, "x": 10, "s": {"a": 1}}, {"id": 2, "x": 20, "s": {"a": 2}}]

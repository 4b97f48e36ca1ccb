"""Every table in tests/data (written by Spark, Databricks, delta-rs and the Delta kernels; see
tests/data/README.md), rewritten copy-on-write, keeps every value it copies bit for bit.

On a copy of each table an UPDATE sets a column to itself on the rows holding the first live row's value
of each data file, so that every file is read and rewritten: its other rows, and the other columns of
the updated rows, are copied. Before and after, the table's rows must be the same, compared column by
column with exact Arrow equality: floats by their bits (NaN payloads, -0.0), timestamps to the
microsecond (INT96 ones past the nanosecond range included), decimals, binary and nested values. Tables
with deletion vectors enabled have them disabled first, so that the update rewrites files instead of
marking rows. Tables lakelog cannot write are refused with a typed error, and nothing is committed."""

from __future__ import annotations

import json
import os
import shutil

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakelog
from lakelog.table_features.deletion_vectors import DeletionVectors
from lakelog.errors import LakelogError, UnsupportedFeatureError
from lakelog.read.scan import read_data_file
from lakelog.expressions.sql import quote_ident, sql_literal

DATA = os.path.join(os.path.dirname(__file__), "data")
TABLES = sorted(d for d in os.listdir(DATA) if os.path.isdir(os.path.join(DATA, d, "_delta_log")))

# Tables lakelog refuses to rewrite, by the feature that stops it (reading or writing).
REFUSED = {
    "catalog-owned-preview": (UnsupportedFeatureError, "catalogManaged"),
    "simple_table_features": (UnsupportedFeatureError, "blahabl"),
}
# Tables with no data file to rewrite (no rows, or only a log whose data files were not copied).
NO_DATA = {"collations-preview-table", "collations-table", "crc-full", "dbr_8_1_generated_columns", "table-with-domain-metadata", "spark-variant-stable-feature-checkpoint", "table-with-geo"}

_KEY_TYPES = (pa.types.is_integer, pa.types.is_string, pa.types.is_date)


def _exact(arr: pa.Array) -> pa.Array:
    """``arr`` with floats as their bit patterns and timestamps and dates as integers (recursively), so
    that Arrow equality is bitwise and ``to_pylist`` holds every value exactly."""
    t = arr.type
    if pa.types.is_floating(t):
        return arr.view({16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[t.bit_width])
    if pa.types.is_timestamp(t):
        return arr.view(pa.int64())
    if pa.types.is_date32(t):
        return arr.view(pa.int32())
    if pa.types.is_struct(t):
        children = [_exact(arr.field(i)) for i in range(t.num_fields)]
        fields = [pa.field(t.field(i).name, c.type) for i, c in enumerate(children)]
        return pa.StructArray.from_arrays(children, fields=fields, mask=arr.is_null() if arr.null_count else None)
    if pa.types.is_map(t):
        return pa.MapArray.from_arrays(arr.offsets, _exact(arr.keys), _exact(arr.items), mask=arr.is_null() if arr.null_count else None)
    if pa.types.is_list(t):
        return pa.ListArray.from_arrays(arr.offsets, _exact(arr.values), mask=arr.is_null() if arr.null_count else None)
    if pa.types.is_large_list(t):
        return pa.LargeListArray.from_arrays(arr.offsets, _exact(arr.values), mask=arr.is_null() if arr.null_count else None)
    return arr


def _json(v):
    return v.hex() if isinstance(v, bytes) else str(v)


def _in_row_order(table: pa.Table) -> pa.Table:
    """``table`` (as ``_exact`` makes it) with its rows sorted by their exact values."""
    keys = [json.dumps(r, sort_keys=True, default=_json) for r in table.to_pylist()]
    return table.take(sorted(range(len(keys)), key=keys.__getitem__))


def _assert_same_rows(name: str, before: pa.Table, after: pa.Table) -> None:
    assert after.schema == before.schema, name
    assert after.num_rows == before.num_rows, name
    exact = [pa.table({c: _exact(t.column(c).combine_chunks()) for c in t.column_names}) for t in (before, after)]
    b, a = (_in_row_order(t) for t in exact)
    for c in before.column_names:
        if not b.column(c).equals(a.column(c)):
            i = next(i for i, (x, y) in enumerate(zip(b.column(c).to_pylist(), a.column(c).to_pylist())) if x != y)
            raise AssertionError(f"{name}: column {c!r} changed in a row: {b.column(c)[i]} became {a.column(c)[i]}")


def _first_rows(table: lakelog.Table) -> tuple[list[str], list[dict]]:
    """The paths of the data files with a live row, and the first live row of each."""
    snap = table.snapshot
    dvs = DeletionVectors(snap.storage)
    paths, firsts = [], []
    for rel, add in snap.files.items():
        rows = read_data_file(snap.storage, add, snap.schema, snap.partition_columns, snap.schema.names, snap.column_mapping, dvs)
        if rows.num_rows:
            paths.append(rel)
            firsts.append(rows.slice(0, 1).to_pylist()[0])
    return paths, firsts


def _leaves(field: pa.Field, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], pa.DataType]]:
    """Paths to the fields of exact types (integers, strings, dates) in a column, through structs."""
    path = path + (field.name,)
    if pa.types.is_struct(field.type):
        return [leaf for i in range(field.type.num_fields) for leaf in _leaves(field.type.field(i), path)]
    return [(path, field.type)] if any(is_type(field.type) for is_type in _KEY_TYPES) else []


def _at(value, path: tuple[str, ...]):
    for part in path[1:]:
        value = None if value is None else value[part]
    return value


def _selection(table: lakelog.Table, rows: pa.Table, firsts: list[dict]) -> tuple[str, str, int]:
    """A column to update to itself and a predicate selecting every row that holds, in a field of an exact
    type (integers, strings, dates: nested in structs too), the value of the first live row of some file;
    of all such fields the one selecting fewest rows (data columns before partition columns), and how many."""
    features = table.snapshot.writer_features
    generated = {c.name for c in features.identity} | {g.name for g in features.generated} if features is not None else set()
    best = None
    for f in sorted(table.schema, key=lambda f: f.name in table.partition_columns):
        if f.name in generated:
            continue
        for path, t in _leaves(f):
            values = [_at(r[f.name], path) for r in firsts]
            if any(v is None for v in values):
                continue
            column = rows.column(f.name)
            for part in path[1:]:
                column = pc.struct_field(column, part)
            n = pc.sum(pc.is_in(column, value_set=pa.array(values, t))).as_py() or 0
            if best is None or n < best[2]:
                literals = ", ".join(sql_literal(v) for v in dict.fromkeys(values))
                best = (f.name, f"{'.'.join(quote_ident(p) for p in path)} IN ({literals})", n)
    assert best is not None, "no field of an exact type has a value in every file's first row"
    return best


@pytest.mark.parametrize("name", TABLES)
def test_copy_on_write_keeps_every_copied_value_bit_for_bit(tmp_path, name):
    path = str(tmp_path / name)
    shutil.copytree(os.path.join(DATA, name), path)
    log_before = sorted(os.listdir(os.path.join(path, "_delta_log")))
    if name in REFUSED:
        error, feature = REFUSED[name]
        with pytest.raises(error, match=feature) as refused:
            table = lakelog.Table(path)
            if table.snapshot.files:
                table.update({table.schema.names[0]: quote_ident(table.schema.names[0])})
            else:
                lakelog.write_table(path, table.schema.empty_table(), mode="append")
        assert isinstance(refused.value, LakelogError)
        assert sorted(os.listdir(os.path.join(path, "_delta_log"))) == log_before  # nothing committed
        return
    table = lakelog.Table(path)
    if name in NO_DATA:
        assert not table.snapshot.files or not os.path.exists(os.path.join(path, next(iter(table.snapshot.files))))
        return
    if table.snapshot.properties.get("delta.enableDeletionVectors"):
        table.set_properties({"delta.enableDeletionVectors": "false"})
    before = table.to_pyarrow()
    files_before = set(table.snapshot.files)
    paths, firsts = _first_rows(table)
    assert paths, "a table with data files has a live row"
    column, predicate, selected = _selection(table, before, firsts)
    metrics = table.update({column: quote_ident(column)}, predicate)
    assert metrics["num_updated_rows"] == selected
    after = lakelog.Table(path)
    kept = sorted(set(paths) & set(after.snapshot.files))
    assert not kept, f"files holding selected rows were not rewritten (the update changed other rows than it selected?): {kept}"
    assert all(add.deletion_vector is None for rel, add in after.snapshot.files.items() if rel not in files_before)  # copy-on-write
    _assert_same_rows(name, before, after.to_pyarrow())


def _float_bits(bits: list[int]) -> pa.Array:
    return pa.array(bits, pa.int64()).view(pa.float64())


@pytest.mark.parametrize(
    "changed",
    [
        lambda t: t.set_column(0, "f", _float_bits([-(1 << 63), 0x7FF8000000000001])),  # -0.0
        lambda t: t.set_column(0, "f", _float_bits([0, 0x7FF8000000000002])),  # another NaN payload
        lambda t: t.set_column(1, "ts", pa.array([1, 3], pa.timestamp("us", "UTC"))),  # a microsecond off
        lambda t: t.set_column(2, "nested", pa.array([[{"x": [(1, -0.0)]}], None], t.schema.field("nested").type)),
    ],
    ids=["signed-zero", "nan-payload", "microsecond", "nested-float"],
)
def test_the_comparison_is_bitwise(changed):
    nested = pa.list_(pa.struct([("x", pa.map_(pa.int32(), pa.float64()))]))
    table = pa.table({
        "f": _float_bits([0, 0x7FF8000000000001]),
        "ts": pa.array([1, 2], pa.timestamp("us", "UTC")),
        "nested": pa.array([[{"x": [(1, 0.0)]}], None], nested),
    })
    _assert_same_rows("same", table, table.take([1, 0]))  # the same rows in another order, NaN payloads included
    with pytest.raises(AssertionError, match="changed in a row"):
        _assert_same_rows("changed", table, changed(table))

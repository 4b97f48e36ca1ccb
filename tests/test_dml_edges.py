"""Row-level changes where two table features meet: each test is a wrong-data or lost-data bug found
at such an edge (column mapping x partition-only predicates, glob characters in paths, ...)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakelog
from deltalake import DeltaTable

SHAPES = [
    pytest.param({"delta.columnMapping.mode": mode, **({"delta.enableDeletionVectors": "true"} if dv else {})}, id=f"{mode}-dv{int(dv)}")
    for mode in ("none", "name", "id")
    for dv in (False, True)
]


def _table(path: str, configuration: dict) -> lakelog.Table:
    data = pa.table({"id": [1, 2, 3, 4], "p": ["a", "a", "b", "b"], "x": [1.0, 2.0, 3.0, 4.0]})
    lakelog.write_table(path, data.slice(0, 2), partition_by=["p"], configuration=configuration)
    lakelog.write_table(path, data.slice(2))
    return lakelog.Table(path)


def _rows(t: lakelog.Table) -> list[tuple]:
    return sorted((r["id"], r["p"], r["x"]) for r in lakelog.read_table(t.storage.uri).to_pylist())


@pytest.mark.parametrize("conf", SHAPES)
def test_predicates_on_partition_columns_only_or_on_no_column_see_every_row(tmp_path, conf):
    """Column mapping: a file read for no data column was a 0-row table, so these matched nothing
    (and a merge then inserted duplicates)."""
    t = _table(str(tmp_path / "u"), conf)
    assert t.update({"x": "x + 10"}, "p = 'a'")["num_updated_rows"] == 2
    assert t.update({"x": "x * 2"}, "true")["num_updated_rows"] == 4
    assert _rows(t) == [(1, "a", 22.0), (2, "a", 24.0), (3, "b", 6.0), (4, "b", 8.0)]

    t = _table(str(tmp_path / "m"), conf)
    source = pa.table({"id": [9], "p": ["b"], "x": [9.0]})
    m = t.merge(source, "target.p = source.p").when_matched_update({"x": "source.x"}).when_not_matched_insert_all().execute()
    assert (m["num_target_rows_updated"], m["num_target_rows_inserted"]) == (2, 0)
    assert _rows(t) == [(1, "a", 1.0), (2, "a", 2.0), (3, "b", 9.0), (4, "b", 9.0)]

    t = _table(str(tmp_path / "d"), conf)
    assert t.delete("1 = 1")["num_deleted_rows"] == 4
    assert _rows(t) == []


@pytest.mark.parametrize("name", ["t[x]", "t[0-9]", "t*", "t?", "a[b]/c*d?"])
def test_paths_with_glob_characters_stay_readable(any_table_path, name):
    """fsspec's bulk read expanded '[', '*' and '?' as a glob: after the first commit the table's log
    'disappeared' and committed data was invisible."""
    if "://" in any_table_path:
        name = name.replace("?", "%3F")  # in a URL '?' starts a query: percent-encoded it is part of the name
    path = any_table_path.rsplit("/", 1)[0] + "/" + name
    lakelog.write_table(path, pa.table({"id": [1, 2]}), configuration={"delta.checkpointInterval": 2})
    lakelog.write_table(path, pa.table({"id": [3]}))
    t = lakelog.Table(path)
    t.delete("id = 1")
    t.update({"id": "id * 10"}, "id = 3")
    t.optimize()
    assert t.vacuum() == [] and t.check().ok
    assert lakelog.Table(path).version == 4
    assert sorted(lakelog.read_table(path).column("id").to_pylist()) == [2, 30]
    assert sorted(lakelog.read_table(path, version=1).column("id").to_pylist()) == [1, 2, 3]


def test_empty_in_and_not_in_lists_follow_the_dnf_semantics_in_every_translator(table_path):
    """('p', 'not in', []) was 'p IS NOT NULL OR p IS NULL' for delete, update and merge, so rows with a
    NULL p were deleted although a null never satisfies a DNF term (reads already kept them)."""
    lakelog.write_table(table_path, pa.table({"id": [1, 2, 3], "p": ["a", None, "b"]}))
    t = lakelog.Table(table_path)
    for filters, selected in (([("p", "not in", [])], [1, 3]), ([("p", "in", [])], []), ([[("p", "in", [])], [("id", "=", 2)]], [2])):
        assert sorted(lakelog.read_table(table_path, filters=filters).column("id").to_pylist()) == selected
        assert t.update({"id": "id"}, filters)["num_updated_rows"] == len(selected)
    assert t.delete([("p", "not in", [])])["num_deleted_rows"] == 2
    assert lakelog.read_table(table_path).to_pylist() == [{"id": 2, "p": None}]


def test_dynamic_overwrite_with_no_rows_empties_an_unpartitioned_table(tmp_path):
    """It was a no-op; Delta treats it as a plain overwrite, which with no rows empties the table."""
    flat, parted = str(tmp_path / "flat"), str(tmp_path / "parted")
    lakelog.write_table(flat, pa.table({"id": [1, 2]}))
    lakelog.write_table(parted, pa.table({"id": [1, 2], "p": ["a", "b"]}), partition_by=["p"])
    empty = pa.table({"id": pa.array([], pa.int64()), "p": pa.array([], pa.string())})
    assert lakelog.write_table(flat, empty.select(["id"]), mode="overwrite", partition_overwrite="dynamic") == 1
    assert lakelog.read_table(flat).num_rows == 0 and DeltaTable(flat).to_pyarrow_table().num_rows == 0
    lakelog.write_table(parted, empty, mode="overwrite", partition_overwrite="dynamic")  # replaces no partition
    assert sorted(lakelog.read_table(parted).column("id").to_pylist()) == [1, 2]


@pytest.mark.parametrize("conf", [None, {"delta.enableDeletionVectors": "true"}])
def test_user_columns_named_like_lakelog_internal_columns(table_path, conf):
    """A column named __lakelog_row or __lakelog_file crashed delete and update (KeyError) and a merge
    source with one was refused: the internal names are now unique to the process."""
    names = ["__lakelog_row", "__lakelog_file", "__lakelog_pos", "__lakelog_src", "__lakelog_k"]
    lakelog.write_table(table_path, pa.table({"id": [1, 2, 3]} | {n: [10, 20, 30] for n in names}), configuration=conf)
    t = lakelog.Table(table_path)
    assert t.delete("id = 1")["num_deleted_rows"] == 1
    assert t.update({"__lakelog_row": "__lakelog_row + 1"}, "__lakelog_file = 20")["num_updated_rows"] == 1
    source = pa.table({"id": [3, 4]} | {n: [7, 8] for n in names})
    m = t.merge(source, "target.id = source.id and target.__lakelog_src = 30").when_matched_update_all().when_not_matched_insert_all().execute()
    assert (m["num_target_rows_updated"], m["num_target_rows_inserted"]) == (1, 1)
    rows = sorted(lakelog.read_table(table_path).to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], r["__lakelog_row"], r["__lakelog_file"], r["__lakelog_k"]) for r in rows] == [(2, 21, 20, 20), (3, 7, 7, 7), (4, 8, 8, 8)]


def test_column_names_resolve_ignoring_case_everywhere(table_path):
    """Validation ignored case but binding did not ('id' for 'Id'): a predicate passed validation and then
    failed, or matched nothing. As in Delta, names resolve ignoring case in every form."""
    lakelog.write_table(table_path, pa.table({"Id": [1, 2, 3, 4], "Val": ["a", "b", "c", "d"], "p": ["x", "x", "y", "y"]}), partition_by=["p"])
    t = lakelog.Table(table_path)
    assert lakelog.read_table(table_path, filters=[("ID", "=", 3), ("P", "=", "y")]).column("Id").to_pylist() == [3]
    assert t.delete("id = 1")["num_deleted_rows"] == 1
    assert t.delete([("iD", "=", 2)])["num_deleted_rows"] == 1
    assert t.update({"val": "upper(VAL)"}, "P = 'y' and ID = 3")["num_updated_rows"] == 1
    source = pa.table({"id": [4, 9], "VAL": ["q", "r"], "P": ["y", "y"]})
    m = (t.merge(source, "target.ID = source.Id").when_matched_update({"vAl": "source.val"})
         .when_not_matched_insert_all().execute())
    assert (m["num_target_rows_updated"], m["num_target_rows_inserted"]) == (1, 1)
    t.merge(pa.table({"ID": [10]}), "target.id = source.id").when_not_matched_insert({"id": "source.ID", "VAL": "'n'"}).execute()
    assert lakelog.Table(table_path).schema.names == ["Id", "Val", "p"]
    rows = sorted((r["Id"], r["Val"], r["p"]) for r in DeltaTable(table_path).to_pyarrow_table().to_pylist())
    assert rows == [(3, "C", "y"), (4, "q", "y"), (9, "r", "y"), (10, "n", None)]


def test_check_verifies_checkpoints_of_deletion_vector_tables(table_path):
    """A checkpoint of a DV table holds one tombstone per old DV of a file; check replayed them as one
    commit's removes, gave up on the checkpoint ('removes it twice') and reported a corrupt one OK."""
    import glob

    import pyarrow.parquet as pq

    lakelog.write_table(table_path, pa.table({"id": list(range(10))}), configuration={"delta.enableDeletionVectors": "true"})
    lakelog.write_table(table_path, pa.table({"id": list(range(10, 20))}))
    t = lakelog.Table(table_path)
    for i in (1, 2, 11):
        t.delete(f"id = {i}")
    t.checkpoint()
    report = t.check()
    assert report.ok and report.to_dict()["counts"]["checkpoints_verified"] == 1
    (cp,) = glob.glob(table_path + "/_delta_log/*.checkpoint.parquet")
    actions = pq.read_table(cp)
    first_add = next(i for i, a in enumerate(actions.column("add").to_pylist()) if a is not None)
    pq.write_table(actions.take([i for i in range(actions.num_rows) if i != first_add]), cp)
    report = lakelog.Table(table_path).check()
    assert not report.ok
    # the checksum file beside the checkpoint counts the file the checkpoint lost: readers refuse the version
    assert [p.kind for p in report.problems] == ["checkpoint_mismatch", "unreadable_version"]
    assert f"{4:020d}.crc disagrees" in report.problems[1].message


@pytest.mark.parametrize("conf", SHAPES)
def test_merge_adds_a_new_nested_field_or_refuses_it_never_drops_it(tmp_path, conf):
    """A source struct field the table lacked was silently dropped by update_all/insert_all."""
    from lakelog.errors import SchemaMismatchError

    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": [1, 2], "s": [{"a": 1}, {"a": 2}]}), configuration=conf)
    source = pa.table({"id": [2, 3], "s": [{"a": 20, "b": "x"}, {"a": 30, "b": "y"}], "l": [[{"c": 1}], None]})
    t = lakelog.Table(path)
    with pytest.raises(SchemaMismatchError, match=r"\['s.b'\].*schema_mode='merge'"):
        t.merge(source.select(["id", "s"]), "target.id = source.id").when_matched_update_all().execute()
    assert lakelog.Table(path).version == 0
    t.merge(source, "target.id = source.id", schema_mode="merge").when_matched_update_all().when_not_matched_insert_all().execute()
    assert lakelog.Table(path).schema.field("s").type == pa.struct([("a", pa.int64()), ("b", pa.string())])
    rows = sorted(lakelog.read_table(path).to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 1, "s": {"a": 1, "b": None}, "l": None}, {"id": 2, "s": {"a": 20, "b": "x"}, "l": [{"c": 1}]},
                    {"id": 3, "s": {"a": 30, "b": "y"}, "l": None}]
    # A deeper field, inside a list of structs, is added the same way.
    deeper = pa.table({"id": [1], "s": [{"a": 5, "b": "z"}], "l": [[{"c": 2, "d": True}]]})
    t.merge(deeper, "target.id = source.id", schema_mode="merge").when_matched_update_all().execute()
    assert lakelog.read_table(path, filters=[("id", "=", 1)]).to_pylist() == [{"id": 1, "s": {"a": 5, "b": "z"}, "l": [{"c": 2, "d": True}]}]
    assert t.check().ok


def test_conditional_matched_merge_with_duplicate_source_keys_where_one_row_applies(table_path):
    """Refused whenever two source rows joined one target row; Delta only refuses when a matched clause
    would apply to more than one of them."""
    from lakelog.errors import MultipleSourceMatchesError

    lakelog.write_table(table_path, pa.table({"id": [1, 2], "v": [0, 0]}))
    source = pa.table({"id": [1, 1, 2], "v": [10, 11, 20], "op": ["upd", "skip", "upd"]})
    t = lakelog.Table(table_path)
    m = t.merge(source, "target.id = source.id").when_matched_update({"v": "source.v"}, "source.op = 'upd'").execute()
    assert m["num_target_rows_updated"] == 2
    assert sorted(lakelog.read_table(table_path).to_pylist(), key=lambda r: r["id"]) == [{"id": 1, "v": 10}, {"id": 2, "v": 20}]
    with pytest.raises(MultipleSourceMatchesError):  # both rows of id 1 satisfy a clause
        t.merge(source, "target.id = source.id").when_matched_update({"v": "source.v"}, "source.op = 'upd'").when_matched_delete().execute()
    m = t.merge(source, "target.id = source.id").when_matched_delete("source.op = 'skip'").execute()
    assert m["num_target_rows_deleted"] == 1 and lakelog.read_table(table_path).to_pylist() == [{"id": 2, "v": 20}]


def test_nanosecond_timestamps_behave_alike_on_every_write_path(table_path):
    """write_table refused sub-microsecond values, merge rounded them and update truncated them."""
    import pandas as pd

    from lakelog.errors import PredicateError, SchemaMismatchError

    exact, sub_us = pd.Timestamp("2026-01-01 00:00:00.000001"), pd.Timestamp("2026-01-01 00:00:00.000001999")
    lakelog.write_table(table_path, pd.DataFrame({"id": [1], "t": [exact]}))  # nanosecond type, exact values: stored
    t = lakelog.Table(table_path)
    bad = pd.DataFrame({"id": [2], "t": [sub_us]})
    for write in (
        lambda: lakelog.write_table(table_path, bad),
        lambda: lakelog.write_table(table_path, bad, mode="overwrite", predicate="id = 2"),
        lambda: lakelog.write_table(table_path, bad, mode="overwrite", partition_overwrite="dynamic"),
        lambda: t.merge(bad, "target.id = source.id").when_not_matched_insert_all().execute(),
        lambda: t.merge(pa.table({"id": [1], "s": pa.array([{"t": sub_us.value}], pa.struct([("t", pa.timestamp("ns"))]))}),
                        "target.id = source.id").when_matched_update({"t": "source.s.t"}).execute(),
    ):
        with pytest.raises(SchemaMismatchError, match="'[ts]'.*nanoseconds.*floor"):
            write()
    with pytest.raises(PredicateError, match="nanosecond"):
        t.update({"t": "TIMESTAMP_NS '2026-01-01 00:00:00.000001999'"})
    assert lakelog.Table(table_path).version == 0
    t.merge(pd.DataFrame({"id": [3], "t": [exact]}), "target.id = source.id").when_not_matched_insert_all().execute()
    assert [r["t"].microsecond for r in lakelog.read_table(table_path).to_pylist()] == [1, 1]


NAMES = ["my col", "a,b", "x;y", "p(q)", "t=1", "{br}", 'q"uote', "dot.ted", "ünï çødé"]


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapping_tables_take_any_column_name(tmp_path, mode):
    """Column mapping exists so that names may hold spaces and special characters; they were refused, and
    a merge with schema evolution after a rename to 'my col' failed with a misleading message."""
    from lakelog.errors import SchemaMismatchError
    from lakelog.expressions.sql import quote_ident

    path = str(tmp_path / "t")
    conf = {"delta.columnMapping.mode": mode}
    lakelog.write_table(path, pa.table({"id": [1, 2], **{n: [i, i] for i, n in enumerate(NAMES)}}), configuration=conf)
    t = lakelog.Table(path)
    for n in NAMES:
        assert t.update({n: f"{quote_ident(n)} + 100"}, f"{quote_ident(n)} >= 0 and id = 1")["num_updated_rows"] == 1
    t.rename_column("id", "the id")
    source = pa.table({"the id": [2, 3], "my col": [5, 6], "new col, too": ["a", "b"]})
    t.merge(source, 'target."the id" = source."the id"', schema_mode="merge").when_matched_update({"my col": 'source."my col"'}).when_not_matched_insert_all().execute()
    t.merge(source, 'target."the id" = source."the id"', schema_mode="merge").when_matched_update_all().execute()
    rows = sorted(lakelog.read_table(path).to_pylist(), key=lambda r: r["the id"])
    assert [(r["the id"], r["my col"], r["new col, too"], r["ünï çødé"]) for r in rows] == [(1, 100, None, 108), (2, 5, "a", 8), (3, 6, "b", None)]
    assert t.check().ok
    with pytest.raises(SchemaMismatchError, match="columnMapping"):  # without column mapping Delta refuses them
        lakelog.write_table(str(tmp_path / "plain"), pa.table({"my col": [1]}))


def test_merge_into_a_void_column_types_it_with_schema_merge(table_path):
    """Found by the table-shapes model: a merge whose schema evolution added an all-null column (void)
    then failed on the next merge with the engine's 'Unimplemented type for cast (VARCHAR -> NULL)'."""
    from lakelog.errors import SchemaMismatchError

    lakelog.write_table(table_path, pa.table({"id": [1]}))
    t = lakelog.Table(table_path)
    t.merge(pa.table({"id": [1], "extra": pa.nulls(1)}), "target.id = source.id", schema_mode="merge").when_matched_update_all().execute()
    assert t.schema.field("extra").type == pa.null()
    source = pa.table({"id": [1, 2], "extra": ["a", "b"]})
    with pytest.raises(SchemaMismatchError, match="void.*schema_mode='merge'"):
        t.merge(source, "target.id = source.id").when_matched_update_all().when_not_matched_insert_all().execute()
    t.merge(source, "target.id = source.id", schema_mode="merge").when_matched_update_all().when_not_matched_insert_all().execute()
    assert sorted(lakelog.read_table(table_path).to_pylist(), key=lambda r: r["id"]) == [{"id": 1, "extra": "a"}, {"id": 2, "extra": "b"}]

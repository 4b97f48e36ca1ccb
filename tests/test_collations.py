"""Collated string columns (the ``collations`` writer feature): writes keep ``__COLLATIONS`` and give
no binary min/max for collated columns, no file is skipped by binary bounds, and filters and DML
predicates compare as Spark does under UTF8_LCASE (and ICU collations through DuckDB)."""

from __future__ import annotations

import json
import os
import shutil

import deltalake
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakelog
from lakelog.schema.case_mapping import LOWER
from lakelog.errors import (CollationMismatchError, ConstraintViolationError, InvalidFilterError, UnsupportedExpressionError,
                            UnsupportedFeatureError)

DATA = os.path.join(os.path.dirname(__file__), "data")
LCASE = {b"delta.collations": b'{"c":"spark.UTF8_LCASE"}'}
# Case pairs Spark's UTF8_LCASE treats specially: İ lower-cases to i + U+0307, final sigma is sigma.
VALUES = ["a", "A", "b", "B", "İ", "i̇", "i", "ς", "Σ", "σ", "ß", "", None]


def spark_lcase(s: str) -> str:
    """Spark's UTF8_LCASE key (CollationAwareUTF8String.lowerCaseCodePoints), written out in Python."""
    return s.replace("İ", "i̇").lower().replace("ς", "σ")


def _golden(tmp_path, name: str) -> str:
    path = str(tmp_path / name)
    shutil.copytree(os.path.join(DATA, name), path)
    return path


def _adds(path: str) -> list[dict]:
    log = os.path.join(path, "_delta_log")
    out = []
    for n in sorted(os.listdir(log)):
        if n.endswith(".json"):
            for line in open(os.path.join(log, n)):
                a = json.loads(line)
                if "add" in a:
                    out.append(a["add"])
    return out


def _lcase_table(path: str, values=VALUES, **kw) -> lakelog.Table:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("c", pa.string(), metadata=LCASE)])
    lakelog.write_table(path, pa.table({"id": list(range(len(values))), "c": values}, schema=schema), **kw)
    return lakelog.Table(path)


@pytest.mark.parametrize("name", ["collations-table", "collations-preview-table"])
def test_writes_keep_collations_and_give_no_binary_bounds(tmp_path, name):
    path = _golden(tmp_path, name)
    before = lakelog.Table(path)
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int32()), "utf8_binary_col": ["a", "B", None],
                     "utf8_lcase_col": ["a", "B", None], "unicode_col": ["ä", "b", None]})
    lakelog.write_table(path, rows, mode="append")
    t = lakelog.Table(path)
    assert t.metadata.schema_string == before.metadata.schema_string
    assert t.protocol == before.protocol  # (collations-preview is not joined by collations)
    for add in _adds(path):
        stats = json.loads(add["stats"])
        assert stats["minValues"] == {"id": 1, "utf8_binary_col": "B"}
        assert stats["maxValues"] == {"id": 3, "utf8_binary_col": "a"}
        assert stats["nullCount"] == {"id": 0, "utf8_binary_col": 1, "utf8_lcase_col": 1, "unicode_col": 1}
    # Rewrites, optimize and checkpoints leave them out too.
    t.update({"unicode_col": "'c'"}, "id = 2")
    lakelog.write_table(path, rows.slice(0, 1), mode="append")
    lakelog.Table(path).optimize()
    lakelog.Table(path).checkpoint()
    t = lakelog.Table(path)
    for add in lakelog.Table(path).snapshot.files.values():
        stats = json.loads(add.stats)
        assert set(stats["minValues"]) == {"id", "utf8_binary_col"}
        assert set(stats["nullCount"]) == {"id", "utf8_binary_col", "utf8_lcase_col", "unicode_col"}
    assert sorted(deltalake.DeltaTable(path).to_pyarrow_table().column("unicode_col").to_pylist(), key=str) == [None, "c", "ä", "ä"]


def test_lcase_read_filters_compare_as_spark(tmp_path):
    t = _lcase_table(str(tmp_path / "t"))
    rows = t.to_pyarrow().to_pylist()
    probes = ["A", "i̇", "İ", "I", "Σ", "ς", "ss", "B", ""]
    for v in probes:
        for op, model in [("=", lambda x: spark_lcase(x) == spark_lcase(v)), ("!=", lambda x: spark_lcase(x) != spark_lcase(v)),
                          ("<", lambda x: spark_lcase(x) < spark_lcase(v)), (">=", lambda x: spark_lcase(x) >= spark_lcase(v))]:
            got = sorted(r["id"] for r in t.to_pyarrow(filters=[("c", op, v)]).to_pylist())
            assert got == sorted(r["id"] for r in rows if r["c"] is not None and model(r["c"])), (op, v)
    got = sorted(r["c"] for r in t.to_pyarrow(filters=[("c", "in", ["A", "σ", None])]).to_pylist())
    assert got == sorted(["a", "A", "ς", "Σ", "σ"])
    assert t.to_pyarrow(filters=[("c", "not in", ["A", None])]).num_rows == 0  # NULL in NOT IN: never true
    assert sorted(r["c"] for r in t.to_pyarrow(filters=[("c", "not in", ["a", "b", "σ", "i̇", "i"])]).to_pylist()) == ["", "ß"]
    with pytest.raises(InvalidFilterError, match="'c'.*UTF8_LCASE"):
        t.to_pyarrow(filters=pc.field("c") == "A")  # pyarrow would compare in binary order


def test_icu_read_filters_are_refused_by_name(tmp_path):
    t = lakelog.Table(_golden(tmp_path, "collations-table"))
    with pytest.raises(UnsupportedFeatureError, match="'unicode_col'.*icu.UNICODE"):
        t.to_pyarrow(filters=[("unicode_col", "=", "a")])
    assert t.to_pyarrow(filters=[("utf8_binary_col", "=", "a")]).num_rows == 0


def _set_collation(path: str, column: str, identifier: str) -> None:
    """Commit a metaData giving ``column`` a collation (as Spark's ALTER COLUMN ... COLLATE would)."""
    t = lakelog.Table(path)
    m = t.metadata
    schema = orjson.loads(m.schema_string)
    for f in schema["fields"]:
        if f["name"] == column:
            f["metadata"] = {"__COLLATIONS": {column: identifier}}
    meta = {"id": m.id, "format": {"provider": "parquet", "options": {}}, "schemaString": orjson.dumps(schema).decode(),
            "partitionColumns": m.partition_columns, "configuration": m.configuration, "createdTime": m.created_time}
    proto = {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["collations", "domainMetadata"]}
    with open(os.path.join(path, "_delta_log", f"{t.version + 1:020d}.json"), "w") as fh:
        fh.write(json.dumps({"metaData": meta}) + "\n" + json.dumps({"protocol": proto}) + "\n")


def test_binary_bounds_of_other_writers_never_skip_files(tmp_path):
    # Files written with binary min/max (as a writer may), then the column declared UTF8_LCASE.
    path = str(tmp_path / "t")
    for v in ["a", "B", "c"]:
        lakelog.write_table(path, pa.table({"id": [1], "c": [v]}), mode="append")
    assert all("minValues" in json.loads(a["stats"]) and "c" in json.loads(a["stats"])["minValues"] for a in _adds(path))
    _set_collation(path, "c", "spark.UTF8_LCASE")
    t = lakelog.Table(path)
    assert t.to_pyarrow(filters=[("c", "=", "A")]).column("c").to_pylist() == ["a"]
    assert sorted(t.to_pyarrow(filters=[("c", "<", "C")]).column("c").to_pylist()) == ["B", "a"]
    assert len(t.files([("c", "=", "b")])) == 3  # (the bounds of 'B' exclude 'b' in binary order)
    t.delete("c = 'A' OR c IN ('C')")
    assert lakelog.Table(path).to_pyarrow().column("c").to_pylist() == ["B"]


def test_partition_and_nested_collated_columns(tmp_path):
    path = str(tmp_path / "t")
    inner = pa.field("f", pa.string(), metadata={b"delta.collations": b'{"f":"spark.UTF8_LCASE"}'})
    schema = pa.schema([pa.field("c", pa.string(), metadata=LCASE), pa.field("s", pa.struct([inner])), pa.field("n", pa.int64())])
    data = pa.table({"c": ["a", "A", "b"], "s": [{"f": "x"}, {"f": "X"}, {"f": "y"}], "n": [1, 2, 3]}, schema=schema)
    lakelog.write_table(path, data, partition_by=["c"])
    t = lakelog.Table(path)
    assert {"collations", "domainMetadata"} <= set(t.protocol.writer_features)
    fields = {f["name"]: f for f in orjson.loads(t.metadata.schema_string)["fields"]}
    assert fields["c"]["metadata"] == {"__COLLATIONS": {"c": "spark.UTF8_LCASE"}}
    assert fields["s"]["type"]["fields"][0]["metadata"] == {"__COLLATIONS": {"f": "spark.UTF8_LCASE"}}
    for add in _adds(path):
        stats = json.loads(add["stats"])
        assert "s" not in stats["minValues"] and stats["nullCount"]["s"] == {"f": 0}
    assert sorted(t.to_pyarrow(filters=[("c", "=", "A")]).column("n").to_pylist()) == [1, 2]
    assert len(t.files([("c", "in", ["A"])])) == 2
    t.delete("s.f = 'x'")
    assert lakelog.Table(path).to_pyarrow().column("n").to_pylist() == [3]


def test_dml_predicates_compare_under_the_collation(tmp_path):
    path = str(tmp_path / "t")
    t = _lcase_table(path)
    t.delete("c IN ('A', 'σ') OR c = 'İ'")
    left = sorted(lakelog.Table(path).to_pyarrow().column("c").to_pylist(), key=str)
    assert left == sorted([v for v in VALUES if v is None or spark_lcase(v) not in ("a", "σ", "i̇")], key=str)
    t = lakelog.Table(path)
    assert t.update({"id": "-1"}, "c BETWEEN 'B' AND 'b' AND c <> 'X'")["num_updated_rows"] == 2
    src = pa.table({"k": ["B", "zz"]})
    t = lakelog.Table(path)
    out = t.merge(src, "t.c = s.k", source_alias="s", target_alias="t").when_matched_delete().when_not_matched_insert({"id": "7", "c": "s.k"}).execute()
    assert out["num_target_rows_deleted"] == 2 and out["num_target_rows_inserted"] == 1
    version = lakelog.Table(path).version
    for bad in ["lower(c) = 'a'", "c LIKE 'a%'", "c || 'x' = 'ax'", pc.field("c") == "a"]:
        with pytest.raises(UnsupportedExpressionError, match="'c'.*UTF8_LCASE"):
            lakelog.Table(path).delete(bad)
    assert lakelog.Table(path).version == version


def test_icu_dml_predicates_use_duckdb_icu(tmp_path):
    path = _golden(tmp_path, "collations-table")
    rows = pa.table({"id": pa.array([1, 2, 3, 4], pa.int32()), "utf8_binary_col": ["a", "A", "b", "ä"],
                     "utf8_lcase_col": ["a", "A", "b", "ä"], "unicode_col": ["a", "A", "b", "ä"]})
    lakelog.write_table(path, rows, mode="append")
    lakelog.Table(path).delete("unicode_col < 'b'")  # root collation: a < A < ä < b (binary: ä > b)
    assert lakelog.Table(path).to_pyarrow().column("id").to_pylist() == [3]


def test_collations_survive_schema_evolution_and_column_mapping(tmp_path):
    path = str(tmp_path / "t")
    _lcase_table(path, ["a"])
    lakelog.write_table(path, pa.table({"id": [2], "c": ["A"], "extra": [1.5]}), mode="append", schema_mode="merge")
    lakelog.Table(path).set_properties({"delta.columnMapping.mode": "name"})
    lakelog.write_table(path, pa.table({"id": [3], "c": ["b"], "extra": [2.5]}), mode="append")
    t = lakelog.Table(path)
    fields = {f["name"]: f for f in orjson.loads(t.metadata.schema_string)["fields"]}
    assert fields["c"]["metadata"]["__COLLATIONS"] == {"c": "spark.UTF8_LCASE"}
    assert sorted(t.to_pyarrow(filters=[("c", "=", "a")]).column("id").to_pylist()) == [0, 2]
    for add in t.snapshot.files.values():
        assert fields["c"]["metadata"]["delta.columnMapping.physicalName"] not in json.loads(add.stats).get("minValues", {})
    t.rename_column("c", "d")
    t = lakelog.Table(path)
    assert t.to_pyarrow(filters=[("d", "=", "B")]).column("id").to_pylist() == [3]


def test_spark_selects_the_same_rows(spark, tmp_path):
    """One Spark test: the rows Spark picks under UTF8_LCASE are the rows lakelog's filters pick, under
    UNICODE the rows a delete's SQL predicate removes, and Spark reading the table compares the same."""
    values = [v for v in VALUES if v is not None] + ["ǅ", "ǆ", "Ǆ", "K", "k"]
    path = str(tmp_path / "t")
    t = _lcase_table(path, values)
    probes = {"eq": ("=", "A"), "eq2": ("=", "İ"), "eq3": ("=", "σ"), "eq4": ("=", "ǅ"), "lt": ("<", "B"), "ge": (">=", "ß"),
              "ne": ("!=", "K")}
    df = spark.createDataFrame([(i, v) for i, v in enumerate(values)], "id long, c string")
    df = df.selectExpr("id", "CAST(c AS STRING COLLATE UTF8_LCASE) AS c", "CAST(c AS STRING COLLATE UNICODE) AS u")
    cols = [f"c {'<>' if op == '!=' else op} '{v}' AS {k}" for k, (op, v) in probes.items()]
    cols += ["c IN ('A', 'Σ', 'KK') AS inn", "u < 'B' AS u_lt", "u = 'ǅ' AS u_eq"]
    got = {r["id"]: r for r in df.selectExpr("id", *cols).collect()}
    # ICU root collation (UNICODE) through a delete's SQL predicate.
    upath = str(tmp_path / "u")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("u", pa.string(), metadata={b"delta.collations": b'{"u":"icu.UNICODE"}'})])
    lakelog.write_table(upath, pa.table({"id": list(range(len(values))), "u": values}, schema=schema))
    for k, pred in [("u_lt", "u < 'B'"), ("u_eq", "u = 'ǅ'")]:
        before = set(lakelog.Table(upath).to_pyarrow().column("id").to_pylist())
        lakelog.Table(upath).delete(pred)
        gone = before - set(lakelog.Table(upath).to_pyarrow().column("id").to_pylist())
        assert sorted(gone) == sorted(i for i, r in got.items() if r[k] and i in before), k
    for k, (op, v) in probes.items():
        spark_ids = sorted(i for i, r in got.items() if r[k])
        assert sorted(t.to_pyarrow(filters=[("c", op, v)]).column("id").to_pylist()) == spark_ids, k
    assert sorted(t.to_pyarrow(filters=[("c", "in", ["A", "Σ", "KK"])]).column("id").to_pylist()) == sorted(i for i, r in got.items() if r["inn"])
    # A DataFrame's collated strings written to a new table are recorded in __COLLATIONS, as Delta does.
    wpath = str(tmp_path / "w")
    df.selectExpr("id", "c", "u", "array(c) AS tags").write.format("lakelog").mode("append").save(wpath)
    fields = {f["name"]: f for f in orjson.loads(lakelog.Table(wpath).metadata.schema_string)["fields"]}
    assert [fields[k]["metadata"].get("__COLLATIONS") for k in ("id", "c", "u", "tags")] == [
        None, {"c": "spark.UTF8_LCASE"}, {"u": "icu.UNICODE"}, {"tags.element": "spark.UTF8_LCASE"}]
    assert sorted(lakelog.Table(wpath).to_pyarrow(filters=[("c", "=", "A")]).column("id").to_pylist()) == sorted(
        i for i, r in got.items() if r["eq"])
    # replaceWhere compares under the collation: Spark's rows equal to 'a' satisfy c = 'A' and replace them.
    eq = {i for i, r in got.items() if r["eq"]}
    df.where("c = 'a'").selectExpr("id + 100 AS id", "c", "u", "array(c) AS tags").write.format("lakelog").mode("overwrite") \
        .option("replaceWhere", "c = 'A'").save(wpath)
    assert sorted(lakelog.Table(wpath).to_pyarrow().column("id").to_pylist()) == sorted((set(got) - eq) | {i + 100 for i in eq})
    # format("lakelog") gives Spark the collated type, so Spark's own filters compare under it too.
    read = spark.read.format("lakelog").load(path)
    assert read.schema["c"].dataType.collation == "UTF8_LCASE"
    assert sorted(r.id for r in read.where("c = 'A' OR c < 'b'").collect()) == sorted(
        t.to_pyarrow(filters=[[("c", "=", "A")], [("c", "<", "b")]]).column("id").to_pylist())


def test_collated_elements_are_refused_by_name_in_predicates(tmp_path):
    """Strings of a collated array, map or struct-in-array would compare in binary order through DuckDB:
    every SQL predicate reading such a column (beyond IS NULL) is refused, naming it; a replaceWhere on
    a UTF8_LCASE column compares under it, for the rows it replaces and the rows it checks."""
    lcase = lambda key: {b"delta.collations": orjson.dumps({key: "spark.UTF8_LCASE"})}
    schema = pa.schema([
        pa.field("id", pa.int64()), pa.field("c", pa.string(), metadata=LCASE),
        pa.field("tags", pa.list_(pa.string()), metadata=lcase("tags.element")),
        pa.field("m", pa.map_(pa.string(), pa.string()), metadata=lcase("m.value")),
        pa.field("arr", pa.list_(pa.struct([pa.field("f", pa.string(), metadata=lcase("f"))]))),
        pa.field("s", pa.struct([pa.field("f", pa.string(), metadata=lcase("f"))])),
    ])
    path = str(tmp_path / "t")
    rows = {"id": [1, 2], "c": ["a", "b"], "tags": [["A"], ["b"]], "m": [[("k", "X")], []], "arr": [[{"f": "A"}], []],
            "s": [{"f": "A"}, {"f": "b"}]}
    lakelog.write_table(path, pa.table(rows, schema=schema))
    version = lakelog.Table(path).version
    refused = [("tags", "tags[1] = 'a'"), ("tags", "array_contains(tags, 'a')"), ("tags", "list_contains(tags, 'a')"),
               ("m", "element_at(m, 'k') = 'x'"), ("m", "m['k'] = 'x'"), ("arr", "arr[1].f = 'a'"), ("s", "s = {'f': 'a'}")]
    for column, pred in refused:
        with pytest.raises(UnsupportedExpressionError, match=f"'{column}'.*UTF8_LCASE"):
            lakelog.Table(path).delete(pred)
        with pytest.raises(UnsupportedExpressionError, match=f"'{column}'"):
            lakelog.Table(path).update({"id": "0"}, pred)
        with pytest.raises(UnsupportedExpressionError, match=f"'{column}'"):
            lakelog.write_table(path, pa.table(rows, schema=schema).slice(0, 1), mode="overwrite", predicate=pred)
    with pytest.raises(UnsupportedExpressionError, match="'t.tags'"):
        lakelog.Table(path).merge(pa.table({"k": [1]}), "t.id = s.k AND array_contains(t.tags, 'a')", source_alias="s",
                                  target_alias="t").when_matched_delete().execute()
    with pytest.raises(InvalidFilterError, match="'tags'.*UTF8_LCASE"):
        lakelog.Table(path).to_pyarrow(filters=pc.list_value_length(pc.field("tags")) == 1)
    assert lakelog.Table(path).version == version
    # What can be compared under the collation still is.
    assert lakelog.Table(path).update({"id": "3"}, "tags IS NOT NULL AND s.f = 'a'")["num_updated_rows"] == 1
    # replaceWhere under UTF8_LCASE: 'A' satisfies c = 'a', and the row 'a' is what it replaces (as Spark).
    new = pa.table({**{k: v[:1] for k, v in rows.items()}, "id": [9], "c": ["A"]}, schema=schema)
    lakelog.write_table(path, new, mode="overwrite", predicate="c = 'a'")
    assert sorted(lakelog.Table(path).to_pyarrow(columns=["id", "c"]).to_pylist(), key=str) == [{"id": 2, "c": "b"}, {"id": 9, "c": "A"}]


# ---------------------------------------------------------------- one rule on every path


def _lcase(path: str) -> dict:
    return {b"delta.collations": orjson.dumps({path: "spark.UTF8_LCASE"})}


def _fields(t: lakelog.Table) -> dict:
    return {f["name"]: f for f in orjson.loads(t.metadata.schema_string)["fields"]}


def _bounded_keys(t: lakelog.Table) -> set[str]:
    """The stats keys any live file has a min or max for."""
    out = set()
    for a in t.snapshot.files.values():
        stats = json.loads(a.stats)
        out |= set(stats.get("minValues", {})) | set(stats.get("maxValues", {}))
    return out


@pytest.mark.parametrize("mode", ["name", "id"])
def test_a_column_mapping_table_keeps_collations_from_its_first_write(tmp_path, mode):
    path = str(tmp_path / "t")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string(), metadata=_lcase("name")),
                        pa.field("s", pa.struct([pa.field("f", pa.string(), metadata=_lcase("f"))]))])
    data = pa.table({"id": [1, 2], "name": ["alice", "Bob"], "s": [{"f": "x"}, {"f": "Y"}]}, schema=schema)
    lakelog.write_table(path, data, configuration={"delta.columnMapping.mode": mode})
    t = lakelog.Table(path)
    assert {"collations", "domainMetadata", "columnMapping"} <= set(t.protocol.writer_features)
    fields = _fields(t)
    assert fields["name"]["metadata"]["__COLLATIONS"] == {"name": "spark.UTF8_LCASE"}
    assert fields["s"]["type"]["fields"][0]["metadata"]["__COLLATIONS"] == {"f": "spark.UTF8_LCASE"}
    physical = fields["name"]["metadata"]["delta.columnMapping.physicalName"]
    assert physical != "name" and physical not in _bounded_keys(t) and fields["id"]["metadata"]["delta.columnMapping.physicalName"] in _bounded_keys(t)
    assert t.to_pyarrow(filters=[("name", "=", "ALICE")]).column("id").to_pylist() == [1]
    assert len(t.files([("name", "=", "ALICE")])) == 1
    t.delete("s.f = 'y'")
    assert lakelog.Table(path).to_pyarrow().column("id").to_pylist() == [1]
    # An overwrite that gives the column another collation (a new schema) records it.
    plain = pa.table({"id": [3], "name": ["Carol"], "s": [{"f": "z"}]})
    lakelog.write_table(path, plain, mode="overwrite", schema_mode="overwrite")
    t = lakelog.Table(path)
    assert "__COLLATIONS" not in t.metadata.schema_string and t.to_pyarrow(filters=[("name", "=", "CAROL")]).num_rows == 0
    assert t.to_pyarrow(filters=[("name", "=", "Carol")]).column("id").to_pylist() == [3]


def test_columns_added_by_schema_evolution_keep_their_collations_and_upgrade_the_protocol(tmp_path):
    collated = pa.table({"id": [1, 2], "name": ["alice", "Bob"], "tags": [["A"], ["b"]], "s": [{"f": "x"}, {"f": "Y"}]},
                        schema=pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string(), metadata=_lcase("name")),
                                          pa.field("tags", pa.list_(pa.string()), metadata=_lcase("tags.element")),
                                          pa.field("s", pa.struct([pa.field("f", pa.string(), metadata=_lcase("f"))]))]))
    for how in ["write", "merge", "add_columns"]:
        path = str(tmp_path / how)
        lakelog.write_table(path, pa.table({"id": [0]}))
        assert lakelog.Table(path).protocol.writer_features is None
        if how == "write":
            lakelog.write_table(path, collated, mode="append", schema_mode="merge")
        elif how == "merge":
            lakelog.Table(path).merge(collated, "t.id = s.id", source_alias="s", target_alias="t", schema_mode="merge") \
                .when_not_matched_insert_all().execute()
        else:
            lakelog.Table(path).add_columns({"name": collated.schema.field("name"), "tags": collated.schema.field("tags"),
                                             "s": collated.schema.field("s").type})
            lakelog.write_table(path, collated, mode="append")
        t = lakelog.Table(path)
        assert {"collations", "domainMetadata"} <= set(t.protocol.writer_features), how
        fields = _fields(t)
        assert fields["name"]["metadata"] == {"__COLLATIONS": {"name": "spark.UTF8_LCASE"}}, how
        assert fields["tags"]["metadata"] == {"__COLLATIONS": {"tags.element": "spark.UTF8_LCASE"}}, how
        assert fields["s"]["type"]["fields"][0]["metadata"] == {"__COLLATIONS": {"f": "spark.UTF8_LCASE"}}, how
        assert "name" not in _bounded_keys(t), how
        assert t.to_pyarrow(filters=[("name", "=", "ALICE")]).column("id").to_pylist() == [1], how
        t.delete("s.f = 'y'")
        assert sorted(lakelog.Table(path).to_pyarrow().column("id").to_pylist()) == [0, 1], how
    # add_columns under another name keys the collation by it; a struct's new field keeps its own.
    path = str(tmp_path / "renamed")
    lakelog.write_table(path, pa.table({"id": [0], "st": [{"a": 1}]}))
    lakelog.Table(path).add_columns({"nm": collated.schema.field("name"), "st.g": pa.field("x", pa.string(), metadata=_lcase("x"))})
    fields = _fields(lakelog.Table(path))
    assert fields["nm"]["metadata"] == {"__COLLATIONS": {"nm": "spark.UTF8_LCASE"}}
    assert fields["st"]["type"]["fields"][1]["metadata"] == {"__COLLATIONS": {"g": "spark.UTF8_LCASE"}}
    # A void column typed by collated data takes the collation.
    path = str(tmp_path / "void")
    lakelog.write_table(path, pa.table({"id": [0], "v": pa.nulls(1)}))
    lakelog.write_table(path, pa.table({"id": [1], "v": ["A"]}, schema=pa.schema([pa.field("id", pa.int64()),
                                                                                  pa.field("v", pa.string(), metadata=_lcase("v"))])),
                        mode="append", schema_mode="merge")
    t = lakelog.Table(path)
    assert _fields(t)["v"]["metadata"] == {"__COLLATIONS": {"v": "spark.UTF8_LCASE"}} and "collations" in t.protocol.writer_features
    assert t.to_pyarrow(filters=[("v", "=", "a")]).column("id").to_pylist() == [1]


def _names_table(path: str, **kw) -> lakelog.Table:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string(), metadata=_lcase("name")), pa.field("other", pa.string()),
                        pa.field("o", pa.string())])
    lakelog.write_table(path, pa.table({"id": [1, 2], "name": ["alice", "Bob"], "other": ["ALICE", "bob"], "o": ["x", "x"]}, schema=schema),
                        **kw)
    return lakelog.Table(path)


def test_table_expressions_compare_under_the_collation(tmp_path):
    # CHECK constraints: 'Admin' equals 'admin' under UTF8_LCASE.
    t = _names_table(str(tmp_path / "c"))
    t.add_constraint({"not_admin": "name <> 'admin'"})
    with pytest.raises(ConstraintViolationError, match="not_admin"):
        lakelog.write_table(t.path, pa.table({"id": [3], "name": ["Admin"], "other": ["a"], "o": ["x"]}), mode="append")
    with pytest.raises(ConstraintViolationError, match="not_admin"):
        t.update({"name": "'ADMIN'"}, "id = 1")
    with pytest.raises(ConstraintViolationError, match="new_rule"):
        t.add_constraint({"new_rule": "name IN ('ALICE', 'BOB') AND contains(name, 'O')"})  # ('alice' has no o)
    assert lakelog.Table(t.path).version == t.version
    # Generated columns compute under it (and check given values under it).
    path = str(tmp_path / "g")
    schema = pa.schema([pa.field("name", pa.string(), metadata=_lcase("name"))])
    lakelog.write_table(path, pa.table({"name": ["Admin", "bob", "ADMINISTRATOR"]}, schema=schema),
                        generated_columns={"is_admin": "name = 'admin'", "kind": "CASE WHEN startswith(name, 'ADMIN') THEN 'a' ELSE 'u' END",
                                           "up": "upper(name)"})
    rows = lakelog.Table(path).to_pyarrow().to_pylist()
    assert [(r["is_admin"], r["kind"], r["up"]) for r in rows] == [(True, "a", "ADMIN"), (False, "u", "BOB"), (False, "a", "ADMINISTRATOR")]
    assert deltalake.DeltaTable(path).to_pyarrow_table().column("is_admin").to_pylist() == [True, False, False]
    # A default on a collated column is stored (the string takes the column's collation).
    t = _names_table(str(tmp_path / "d"))
    t.set_column_default("name", "'Unknown'")
    lakelog.write_table(t.path, pa.table({"id": [3], "other": ["z"], "o": ["x"]}), mode="append")
    assert lakelog.Table(t.path).to_pyarrow(filters=[("name", "=", "UNKNOWN")]).column("id").to_pylist() == [3]


def test_update_and_merge_values_compare_under_the_collation(tmp_path):
    t = _names_table(str(tmp_path / "u"))
    t.update({"o": "CASE WHEN name = 'ALICE' THEN 'm' ELSE 'n' END"}, "name IN ('ALICE', 'BOB')")
    assert lakelog.Table(t.path).to_pyarrow(columns=["id", "o"]).to_pylist() == [{"id": 1, "o": "m"}, {"id": 2, "o": "n"}]
    # A collated column as the value itself, or through CASE/COALESCE/upper, is copied as it is.
    t = lakelog.Table(t.path)
    t.update({"o": "upper(coalesce(CASE WHEN name IN ('bob') THEN name END, 'none'))", "other": "name"})
    assert lakelog.Table(t.path).to_pyarrow(columns=["o", "other"]).to_pylist() == [{"o": "NONE", "other": "alice"}, {"o": "BOB", "other": "Bob"}]
    src = pa.table({"k": [1, 2, 9], "v": ["ALICE", "x", "y"]})
    t = lakelog.Table(t.path)
    out = t.merge(src, "t.id = s.k", source_alias="s", target_alias="t") \
        .when_matched_update({"o": "CASE WHEN t.name = s.v THEN 'same' ELSE 'diff' END"}) \
        .when_not_matched_insert({"id": "s.k", "name": "s.v", "o": "'new'"}).execute()
    assert out["num_target_rows_updated"] == 2 and out["num_target_rows_inserted"] == 1
    rows = sorted(lakelog.Table(t.path).to_pyarrow(columns=["id", "name", "o"]).to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 1, "name": "alice", "o": "same"}, {"id": 2, "name": "Bob", "o": "diff"}, {"id": 9, "name": "y", "o": "new"}]
    # Values that would compare a collated column in binary are refused by name.
    with pytest.raises(UnsupportedExpressionError, match="'name'.*UTF8_LCASE"):
        lakelog.Table(t.path).update({"o": "CASE WHEN name LIKE 'a%' THEN 'y' END"})


def test_comparing_two_collations_is_refused_as_spark_refuses_it(tmp_path):
    t = _names_table(str(tmp_path / "t"))
    version = t.version
    for pred in ["name = other", "other <> name", "name IN ('x', other)", "name BETWEEN other AND 'z'", "id = 1 OR name < other"]:
        with pytest.raises(CollationMismatchError, match=r"COLLATION_MISMATCH.*'name'.*'other'|COLLATION_MISMATCH.*'other'.*'name'") as e:
            t.delete(pred)
        assert e.value.error_class == "COLLATION_MISMATCH.IMPLICIT"
    with pytest.raises(CollationMismatchError):
        t.update({"o": "'y'"}, "name = other")
    with pytest.raises(CollationMismatchError):
        t.update({"o": "CASE WHEN name = other THEN 'y' END"})
    with pytest.raises(CollationMismatchError):
        t.merge(pa.table({"k": [1]}), "t.id = s.k AND t.name = t.other", source_alias="s", target_alias="t").when_matched_delete().execute()
    with pytest.raises(CollationMismatchError):
        lakelog.write_table(t.path, pa.table({"id": [5], "name": ["a"], "other": ["a"], "o": ["x"]}), mode="overwrite", predicate="name = other")
    for rule in [{"c": "name = other"}, {"c": "contains(name, other)"}, {"c": "coalesce(name, other) = 'a'"}]:
        with pytest.raises(CollationMismatchError, match="COLLATION_MISMATCH"):
            t.add_constraint(rule)
    with pytest.raises(CollationMismatchError, match="COLLATION_MISMATCH.EXPLICIT"):
        t.add_constraint({"c": "name COLLATE UTF8_LCASE = other COLLATE UTF8_BINARY"})
    assert lakelog.Table(t.path).version == version
    # Saying which collation to compare under is accepted (as Spark accepts it).
    t.add_constraint({"c": "name = other COLLATE UTF8_LCASE"})
    assert t.delete("name = lower(other)")["num_deleted_rows"] == 2


def test_dml_predicates_lower_case_every_character_as_spark(tmp_path):
    """UTF8_LCASE's key in SQL predicates lower-cases as Spark (ICU) does, also where DuckDB's Unicode
    lacks a mapping (Unicode 16's letters), as read filters and table expressions do."""
    chars = [k for k in LOWER if k != "İ"]
    path = str(tmp_path / "t")
    _lcase_table(path, chars)
    t = lakelog.Table(path)
    for k in chars[:8] + chars[-4:]:
        assert t.to_pyarrow(filters=[("c", "=", LOWER[k])]).column("c").to_pylist() == [k]
    lakelog.Table(path).delete(" OR ".join(f"c = '{LOWER[k]}'" for k in chars))
    assert lakelog.Table(path).to_pyarrow().num_rows == 0


def test_spark_keeps_and_compares_nested_collations(spark, tmp_path):
    """Strings Spark writes with collate() at any depth through format("lakelog") come back to Spark (the
    data source, spark_ext.read, LakelogTable) as its collated strings, so Spark's own comparisons and
    row-level changes compare under them; a column mapping table created by Spark keeps them too."""
    from spark_ext import LakelogTable
    from spark_ext.scan.native import read

    path = str(tmp_path / "t")
    df = spark.sql("SELECT id, named_struct('n', collate(n, 'UTF8_LCASE')) AS st, array(collate(n, 'UTF8_LCASE')) AS arr, "
                   "map('k', collate(n, 'UTF8_LCASE')) AS m, collate(n, 'UTF8_LCASE') AS name, n AS plain "
                   "FROM VALUES (1, 'alice'), (2, 'Bob'), (3, 'carol') AS v(id, n)")
    df.write.format("lakelog").mode("append").option("tableProperties", '{"delta.columnMapping.mode": "name"}').save(path)
    t = lakelog.Table(path)
    assert {"collations", "columnMapping"} <= set(t.protocol.writer_features)
    fields = _fields(t)
    assert fields["st"]["type"]["fields"][0]["metadata"]["__COLLATIONS"] == {"n": "spark.UTF8_LCASE"}
    assert fields["m"]["metadata"]["__COLLATIONS"] == {"m.value": "spark.UTF8_LCASE"}
    for frame in (spark.read.format("lakelog").load(path), read(spark, path), LakelogTable.forPath(spark, path).toDF()):
        assert frame.schema["st"].dataType.simpleString() == "struct<n:string collate UTF8_LCASE>"
        assert [f.dataType.simpleString() for f in frame.schema.fields[2:]] == [
            "array<string collate UTF8_LCASE>", "map<string,string collate UTF8_LCASE>", "string collate UTF8_LCASE", "string"]
        assert [r.id for r in frame.where("st.n = 'ALICE'").collect()] == [1]
        assert [r.id for r in frame.where("arr[0] = 'BOB' OR m['k'] = 'CAROL'").orderBy("id").collect()] == [2, 3]
        assert frame.where("plain = 'ALICE'").count() == 0
    LakelogTable.forPath(spark, path).update("name = 'BOB'", {"plain": "'updated'"})
    LakelogTable.forPath(spark, path).delete("st.n IN ('ALICE')")
    assert sorted(lakelog.Table(path).to_pyarrow(columns=["id", "plain"]).to_pylist(), key=lambda r: r["id"]) == [
        {"id": 2, "plain": "updated"}, {"id": 3, "plain": "carol"}]

"""Geometry and geography columns (the ``geospatial`` feature): WKB values kept byte for byte on every
read and write path, the Delta type strings kept exactly, Parquet GEOMETRY/GEOGRAPHY logical types
written, and what cannot be honoured refused by name."""

from __future__ import annotations

import glob
import json
import os
import shutil
import struct

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import lakelog
from lakelog.errors import InvalidFilterError, SchemaMismatchError, UnsupportedFeatureError
from tests.expected_rows import canonical_rows, expected, table_path


def _point(x: float, y: float, little_endian: bool = True) -> bytes:
    return struct.pack("<BIdd" if little_endian else ">BIdd", 1 if little_endian else 0, 1, x, y)


GEOM = [_point(1, 2), _point(3, 4, little_endian=False), None]  # both byte orders: no re-encoding
GEOG = [_point(10, 20), None, _point(-5, 5)]


def _types(path: str) -> dict[str, str]:
    return {f["name"]: f["type"] for f in json.loads(lakelog.Table(path).snapshot.metadata.schema_string)["fields"]}


def _logical_types(path: str) -> set[str]:
    return {str(pq.ParquetFile(f).schema.column(i).logical_type)
            for f in glob.glob(os.path.join(path, "*.parquet")) for i in range(2)}


def test_table_with_geo_is_read_with_its_types(tmp_path):
    exp = expected("table-with-geo")
    t = lakelog.Table(table_path("table-with-geo"))
    got = t.to_pyarrow()
    assert canonical_rows(got) == exp["rows"] and got.schema.names == exp["columns"]
    assert got.schema.field("geom").type == lakelog.geometry("OGC:CRS84")
    assert got.schema.field("geog").type == lakelog.geography("OGC:CRS84", "spherical")
    assert _types(table_path("table-with-geo")) == exp["schema_types"]


def test_wkb_and_type_strings_survive_every_write_path(tmp_path):
    path = str(tmp_path / "t")
    shutil.copytree(table_path("table-with-geo"), path)
    types = _types(path)
    data = pa.table({"geom": pa.array(GEOM, lakelog.geometry()), "geog": pa.array(GEOG, lakelog.geography())})
    lakelog.write_table(path, data)
    # plain binary WKB is taken too; a new column evolves the schema (metaData written again)
    lakelog.write_table(path, pa.table({"geom": pa.array([_point(7, 8)]), "geog": pa.array([None], pa.binary()), "k": [1]}),
                        schema_mode="merge")
    assert _types(path) == {**types, "k": "long"}
    assert _logical_types(path) == {"Geometry(crs=)", "Geography(crs=, algorithm=spherical)"}
    t = lakelog.Table(path)
    assert t.to_pyarrow(filters=[("k", "=", 1)]).column("geom").to_pylist() == [_point(7, 8)]
    assert t.to_pyarrow(filters=pc.field("geom").is_null()).column("geog").to_pylist() == [GEOG[2]]
    assert lakelog.Table(path, version=1).to_pyarrow().column("geom").to_pylist() == GEOM
    t.update({"k": "2"}, "k IS NULL")
    t.delete("k = 1")
    src = pa.table({"k": [2, 3], "geom": pa.array([None, _point(9, 9)], lakelog.geometry()), "geog": pa.array([None, _point(0, 1)])})
    (lakelog.Table(path).merge(src, "target.k = source.k AND target.geom IS NULL")
     .when_matched_update({"geog": "source.geog"}).when_not_matched_insert_all().execute())
    lakelog.Table(path).checkpoint()
    rows = {(r["geom"], r["geog"]) for r in lakelog.Table(path).to_pyarrow().to_pylist()}
    assert rows == {(GEOM[0], GEOG[0]), (GEOM[1], None), (None, None), (_point(9, 9), _point(0, 1))}
    lakelog.write_table(path, lakelog.Table(path).to_pyarrow(), mode="overwrite")
    got = lakelog.Table(path).to_pyarrow()
    assert {(r["geom"], r["geog"]) for r in got.to_pylist()} == rows
    assert got.schema.field("geog").type == lakelog.geography()
    assert _types(path) == {**types, "k": "long"}
    p = lakelog.Table(path).snapshot.protocol
    assert "geospatial" in p.reader_features and "geospatial" in p.writer_features


def test_a_new_geo_column_turns_the_feature_on(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": [1]}))
    g = pa.array([_point(1, 1)], lakelog.geometry("EPSG:3857"))
    lakelog.write_table(path, pa.table({"id": [2], "g": g}), schema_mode="merge")
    p = lakelog.Table(path).snapshot.protocol
    assert (p.min_reader_version, p.min_writer_version) == (3, 7)
    assert p.reader_features == ["geospatial"] and "geospatial" in p.writer_features
    assert _types(path)["g"] == "geometry(EPSG:3857)"
    assert lakelog.Table(path).to_pyarrow().column("g").to_pylist() == [None, _point(1, 1)]


def test_what_cannot_be_honoured_is_refused_by_name(tmp_path):
    path = str(tmp_path / "t")
    lakelog.write_table(path, pa.table({"id": [1], "g": pa.array([_point(1, 1)], lakelog.geometry())}))
    t = lakelog.Table(path)
    with pytest.raises(InvalidFilterError, match="'g' is geometry"):
        t.to_pyarrow(filters=[("g", "=", _point(1, 1))])
    with pytest.raises(SchemaMismatchError, match="not WKB"):
        lakelog.write_table(path, pa.table({"id": [2], "g": pa.array([b"junk"])}))
    with pytest.raises(SchemaMismatchError, match=r"geometry\(EPSG:3857\)"):
        lakelog.write_table(path, pa.table({"id": [2], "g": pa.array([_point(1, 1)], lakelog.geometry("EPSG:3857"))}))
    with pytest.raises(SchemaMismatchError, match="cannot partition"):
        lakelog.write_table(str(tmp_path / "p"), pa.table({"id": [1], "g": pa.array([None], lakelog.geometry())}), partition_by=["g"])
    with pytest.raises(UnsupportedFeatureError, match="vincenty"):
        lakelog.write_table(str(tmp_path / "v"), pa.table({"g": pa.array([_point(1, 1)], lakelog.geography(algorithm="vincenty"))}))
    assert not os.path.exists(str(tmp_path / "v" / "_delta_log" / "00000000000000000000.json"))
    with pytest.raises(UnsupportedFeatureError, match="'geodesic'"):
        lakelog.geography(algorithm="geodesic")
    assert lakelog.Table(path).version == 0


def _hand_made(path: str, geo_type: str) -> None:
    """A table whose log a Delta writer could have written: one geo column, one plain-binary data file."""
    os.makedirs(os.path.join(path, "_delta_log"))
    pq.write_table(pa.table({"g": pa.array([_point(1, 2), None])}), os.path.join(path, "part-0.parquet"))
    schema = {"type": "struct", "fields": [{"name": "g", "type": geo_type, "nullable": True, "metadata": {}}]}
    actions = [
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["geospatial"], "writerFeatures": ["geospatial"]}},
        {"metaData": {"id": "x", "format": {"provider": "parquet", "options": {}}, "schemaString": json.dumps(schema),
                      "partitionColumns": [], "configuration": {}, "createdTime": 0}},
        {"add": {"path": "part-0.parquet", "partitionValues": {}, "size": os.path.getsize(os.path.join(path, "part-0.parquet")),
                 "modificationTime": 0, "dataChange": True,
                 # bounding-box stats as Delta's Java kernel writes them: never bounds for lakelog
                 "stats": json.dumps({"numRecords": 2, "minValues": {"g": "POINT(1.0 2.0)"}, "maxValues": {"g": "POINT(1.0 2.0)"},
                                      "nullCount": {"g": 1}})}},
    ]
    with open(os.path.join(path, "_delta_log", "00000000000000000000.json"), "w") as f:
        f.write("\n".join(json.dumps(a) for a in actions) + "\n")


def test_a_geography_lakelog_cannot_write_is_read_and_keeps_its_type(tmp_path):
    path = str(tmp_path / "t")
    _hand_made(path, "geography(EPSG:4326, karney)")
    t = lakelog.Table(path)
    assert t.to_pyarrow().column("g").to_pylist() == [_point(1, 2), None]
    t.set_properties({"delta.appendOnly": "false"})  # writes metaData again
    lakelog.Table(path).checkpoint()
    assert _types(path) == {"g": "geography(EPSG:4326, karney)"}
    assert lakelog.Table(path).to_pyarrow(filters=pc.field("g").is_null()).num_rows == 1
    assert lakelog.Table(path).to_pyarrow(filters=pc.field("g").is_valid()).column("g").to_pylist() == [_point(1, 2)]
    with pytest.raises(UnsupportedFeatureError, match="karney"):
        lakelog.write_table(path, pa.table({"g": pa.array([None], pa.binary())}))


def test_an_unknown_edge_algorithm_is_refused_by_name(tmp_path):
    path = str(tmp_path / "t")
    _hand_made(path, "geography(OGC:CRS84, geodesic)")
    with pytest.raises(UnsupportedFeatureError, match="'geodesic'"):
        lakelog.Table(path).to_pyarrow()


def test_convert_adopts_parquet_geometry_columns_with_their_types(tmp_path):
    path = str(tmp_path / "t")
    os.makedirs(path)
    data = pa.table({"id": [1, 2], "g": pa.array([_point(1, 2), None], lakelog.geometry("EPSG:3857")),
                     "h": pa.array([None, _point(3, 4)], lakelog.geography())})
    pq.write_table(data, os.path.join(path, "part-0.parquet"))
    lakelog.convert(path)
    assert _types(path) == {"id": "long", "g": "geometry(EPSG:3857)", "h": "geography(OGC:CRS84, spherical)"}
    assert lakelog.Table(path).to_pyarrow().equals(data)
    assert "geospatial" in lakelog.Table(path).snapshot.protocol.reader_features

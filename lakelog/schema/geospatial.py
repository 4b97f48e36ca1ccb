"""Geometry and geography columns (the ``geospatial`` table feature).

Delta writes them as ``geometry(<crs>)`` and ``geography(<crs>, <algorithm>)`` (the CRS as
``AUTHORITY:CODE``, the edge interpolation algorithm one of ``ALGORITHMS``); their values are WKB,
stored in Parquet as BYTE_ARRAY with the GEOMETRY / GEOGRAPHY logical type.

In Arrow such a column is a ``geoarrow.wkb`` extension type over ``binary`` (``GeoType``), the form
GeoArrow, GeoPandas and pyarrow's Parquet writer share: its metadata is GeoArrow's (``{"crs": ...}``,
plus ``"edges"`` for a geography), so a table written from it carries the logical type the protocol's
writers write. Any ``geoarrow.wkb`` type (e.g. geoarrow-pyarrow's) is accepted on write; lakelog returns
its own. ``GeoType`` is not registered with pyarrow, so other Parquet readers in the process are not
affected.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import pyarrow as pa

from ..errors import SchemaMismatchError, UnsupportedFeatureError

EXTENSION_NAME = "geoarrow.wkb"
DEFAULT_CRS = "OGC:CRS84"
DEFAULT_ALGORITHM = "spherical"
ALGORITHMS = ("spherical", "vincenty", "thomas", "andoyer", "karney")
# The only geography edges pyarrow's Parquet writer can record in the GEOGRAPHY logical type.
WRITABLE_ALGORITHMS = ("spherical",)

_CRS = r"[^\s,():]+:[^\s,():]+"
_GEOMETRY_RE = re.compile(rf"^geometry(?:\(\s*({_CRS})\s*\))?$")
_GEOGRAPHY_RE = re.compile(rf"^geography(?:\(\s*(?:({_CRS})\s*(?:,\s*(\w+)\s*)?|(\w+)\s*)\))?$")


class GeoType(pa.ExtensionType):
    """A Delta ``geometry`` (``algorithm`` None) or ``geography`` column: WKB values in ``binary``."""

    def __init__(self, crs: str = DEFAULT_CRS, algorithm: str | None = None):
        self.crs = crs
        self.algorithm = algorithm
        super().__init__(pa.binary(), EXTENSION_NAME)

    @property
    def delta_type(self) -> str:
        """The Delta type string, as every Delta writer spells it."""
        if self.algorithm is None:
            return f"geometry({self.crs})"
        return f"geography({self.crs}, {self.algorithm})"

    def __arrow_ext_serialize__(self) -> bytes:
        meta: dict[str, str] = {"crs": self.crs}
        if self.algorithm is not None:
            meta["edges"] = self.algorithm.lower()
        return json.dumps(meta).encode()

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: pa.DataType, serialized: bytes) -> "GeoType":
        return geo_type_from_metadata(serialized)

    def __reduce__(self):
        return GeoType, (self.crs, self.algorithm)

    def __eq__(self, other):
        if isinstance(other, GeoType):
            return (self.crs, self.algorithm) == (other.crs, other.algorithm)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((EXTENSION_NAME, self.crs, self.algorithm))

    def __str__(self) -> str:
        return self.delta_type


def geometry(crs: str = DEFAULT_CRS) -> GeoType:
    """The Arrow type of a Delta ``geometry(<crs>)`` column (WKB values), e.g. ``geometry("EPSG:3857")``."""
    return GeoType(_checked_crs(crs), None)


def geography(crs: str = DEFAULT_CRS, algorithm: str = DEFAULT_ALGORITHM) -> GeoType:
    """The Arrow type of a Delta ``geography(<crs>, <algorithm>)`` column (WKB values)."""
    return GeoType(_checked_crs(crs), _checked_algorithm(algorithm, f"geography({crs}, {algorithm})"))


def _checked_crs(crs: Any) -> str:
    if not isinstance(crs, str) or not re.fullmatch(_CRS, crs):
        raise SchemaMismatchError(
            f"CRS {crs!r} is not of the form AUTHORITY:CODE (e.g. 'OGC:CRS84', 'EPSG:3857'), which Delta requires "
            "of geometry and geography columns"
        )
    return crs


def _checked_algorithm(algorithm: Any, where: str) -> str:
    if not isinstance(algorithm, str) or algorithm.lower() not in ALGORITHMS:
        raise UnsupportedFeatureError(
            f"{where}: unknown edge interpolation algorithm {algorithm!r}; Delta's are {', '.join(ALGORITHMS)}"
        )
    return algorithm


def is_geo(t: pa.DataType) -> bool:
    """Whether ``t`` is a geometry or geography type (any ``geoarrow.wkb`` extension type)."""
    return isinstance(t, pa.BaseExtensionType) and t.extension_name == EXTENSION_NAME


def parse_delta_type(t: str) -> GeoType | None:
    """The ``GeoType`` of a Delta type string; None when it is not a geometry or geography type.

    A bare ``geometry`` / ``geography``, or a geography with only a CRS or an algorithm, takes the
    defaults (``OGC:CRS84``, ``spherical``), as Delta's reference implementation reads them.
    ``UnsupportedFeatureError`` for an unknown algorithm, ``ValueError`` for a malformed type."""
    if t.startswith("geometry"):
        m = _GEOMETRY_RE.match(t)
        if not m:
            raise ValueError(f"{t!r} is not a valid Delta type: a geometry type is geometry(<AUTHORITY:CODE>)")
        return GeoType(m.group(1) or DEFAULT_CRS, None)
    if t.startswith("geography"):
        m = _GEOGRAPHY_RE.match(t)
        if not m:
            raise ValueError(f"{t!r} is not a valid Delta type: a geography type is geography(<AUTHORITY:CODE>, <algorithm>)")
        crs, algorithm, only_algorithm = m.groups()
        return GeoType(crs or DEFAULT_CRS, _checked_algorithm(algorithm or only_algorithm or DEFAULT_ALGORITHM, t))
    return None


def geo_type_from_metadata(serialized: bytes) -> GeoType:
    """The ``GeoType`` of a ``geoarrow.wkb`` type's GeoArrow metadata (crs; edges for a geography)."""
    try:
        meta = json.loads(serialized or b"{}")
    except ValueError:
        meta = None
    if not isinstance(meta, dict):
        raise SchemaMismatchError(f"geoarrow.wkb metadata {serialized!r} is not a JSON object")
    crs = meta.get("crs")
    if isinstance(crs, dict):  # PROJJSON: its id names the authority and code
        ident = crs.get("id") if isinstance(crs.get("id"), dict) else {}
        crs = f"{ident.get('authority')}:{ident.get('code')}" if ident.get("authority") and ident.get("code") else None
    if crs is None:
        raise SchemaMismatchError(
            f"geoarrow.wkb metadata {serialized!r} names no CRS as AUTHORITY:CODE; Delta geometry and geography "
            "columns need one: use lakelog.geometry(crs) or lakelog.geography(crs, algorithm)"
        )
    if meta.get("crs_type") == "srid":
        crs = f"EPSG:{crs}"
    edges = meta.get("edges")
    if edges in (None, "planar"):
        return geometry(crs)
    return geography(crs, edges)


def to_delta(t: pa.DataType) -> str:
    """The Delta type string of a ``geoarrow.wkb`` type."""
    if isinstance(t, GeoType):
        return t.delta_type
    return geo_type_from_metadata(t.__arrow_ext_serialize__() if hasattr(t, "__arrow_ext_serialize__") else b"").delta_type


def canonical(t: pa.DataType) -> GeoType:
    """lakelog's ``GeoType`` equal to the ``geoarrow.wkb`` type ``t``."""
    return t if isinstance(t, GeoType) else parse_delta_type(to_delta(t))  # type: ignore[return-value]


def check_writable(schema: pa.Schema) -> None:
    """Refuse to write data files for a geography whose algorithm the Parquet writer cannot record
    (``UnsupportedFeatureError`` naming the column); reading such tables works."""

    def walk(t: pa.DataType, path: str) -> None:
        if is_geo(t):
            g = canonical(t)
            if g.algorithm is not None and g.algorithm.lower() not in WRITABLE_ALGORITHMS:
                raise UnsupportedFeatureError(
                    f"column {path!r} is {g.delta_type}: pyarrow's Parquet writer records only spherical edges in the "
                    "GEOGRAPHY logical type, so lakelog cannot write its data files (it reads them); write them with an "
                    "engine that records the algorithm"
                )
        elif pa.types.is_struct(t):
            for i in range(t.num_fields):
                walk(t.field(i).type, f"{path}.{t.field(i).name}")
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            walk(t.value_type, f"{path}.element")
        elif pa.types.is_map(t):
            walk(t.key_type, f"{path}.key")
            walk(t.item_type, f"{path}.value")

    for f in schema:
        walk(f.type, f.name)


_BINARY = (pa.types.is_binary, pa.types.is_large_binary, pa.types.is_binary_view)
_checker: Any = None  # a DuckDB connection, made on first use (plain reads never load DuckDB)
_checker_lock = threading.Lock()


def stores_as(data: pa.DataType, table: GeoType) -> bool:
    """Whether values of type ``data`` go into a column of type ``table`` unchanged: WKB in a binary
    type, or the same geometry/geography type."""
    if is_geo(data):
        return canonical(data) == table
    return any(f(data) for f in _BINARY)


def as_geo(arr: pa.Array, t: GeoType, path: str) -> pa.Array:
    """``arr`` (WKB as binary, or a ``geoarrow.wkb`` array) as type ``t``, its bytes unchanged.
    ``SchemaMismatchError`` for another type or a CRS or algorithm other than ``t``'s, and for a value
    that is not WKB (which no reader could decode)."""
    if not stores_as(arr.type, t):
        raise SchemaMismatchError(
            f"column {path!r} is {t.delta_type}, which takes WKB as binary or as that geoarrow.wkb type "
            f"(lakelog.{'geometry' if t.algorithm is None else 'geography'}(...)); the data has {arr.type}",
            path=path, data_type=arr.type, table_type=t,
        )
    storage = arr.storage if isinstance(arr, pa.ExtensionArray) else arr
    storage = storage.cast(pa.binary())
    _check_wkb(storage, path)
    return pa.ExtensionArray.from_storage(t, storage)


def _check_wkb(storage: pa.Array, path: str) -> None:
    global _checker
    if len(storage) == storage.null_count:
        return
    with _checker_lock:
        if _checker is None:
            import duckdb

            _checker = duckdb.connect()
        # DuckDB's GEOMETRY cast parses WKB: TRY_CAST is NULL for bytes that are not a geometry.
        rel = _checker.from_arrow(pa.table({"v": storage}))
        bad = rel.filter("v IS NOT NULL AND TRY_CAST(v AS GEOMETRY) IS NULL").limit(1).fetchall()
    if bad:
        raise SchemaMismatchError(
            f"column {path!r} holds {bytes(bad[0][0])[:32]!r}, which is not WKB (well-known binary) geometry; "
            "geometry and geography values must be WKB (e.g. shapely.to_wkb)",
            path=path,
        )


def from_parquet(logical_type_json: str) -> GeoType | None:
    """The ``GeoType`` of a Parquet GEOMETRY / GEOGRAPHY logical type (pyarrow's ``to_json()`` of it),
    None for another logical type. An omitted CRS is Parquet's default, ``OGC:CRS84``; an omitted
    algorithm, ``spherical``. ``SchemaMismatchError`` for a CRS Delta cannot spell (``srid:``,
    ``projjson:``)."""
    try:
        d = json.loads(logical_type_json)
    except ValueError:
        return None
    kind = d.get("Type") if isinstance(d, dict) else None
    if kind not in ("Geometry", "Geography"):
        return None
    crs = d.get("crs") or DEFAULT_CRS
    if crs.lower().startswith(("srid:", "projjson:")):
        raise SchemaMismatchError(f"the Parquet {kind.upper()} column's CRS {crs!r} is not an AUTHORITY:CODE, which Delta needs")
    if kind == "Geometry":
        return geometry(crs)
    return geography(crs, d.get("algorithm") or DEFAULT_ALGORITHM)


def plain_type(t: pa.DataType) -> pa.DataType:
    """``t`` with every geometry/geography type (at any depth) replaced by ``binary``, its storage."""
    if is_geo(t):
        return pa.binary()
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(plain_type(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(plain_type(t.value_type)))
    if pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(plain_type(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(plain_type(t.key_type)), t.item_field.with_type(plain_type(t.item_type)))
    return t


def plain(table: pa.Table) -> pa.Table:
    """``table`` with geometry/geography values as WKB ``binary``: how SQL engines get them (DuckDB would
    turn a geoarrow.wkb column into its GEOMETRY type, refusing geographies and re-encoding WKB)."""
    schema = pa.schema([f.with_type(plain_type(f.type)) for f in table.schema], metadata=table.schema.metadata)
    return table if schema == table.schema else table.cast(schema)


def uses_geospatial(schema: pa.Schema) -> bool:
    """Whether a geometry or geography type appears anywhere in ``schema`` (it then needs the
    ``geospatial`` reader-writer feature)."""

    def walk(t: pa.DataType) -> bool:
        if is_geo(t):
            return True
        if pa.types.is_struct(t):
            return any(walk(t.field(i).type) for i in range(t.num_fields))
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            return walk(t.value_type)
        if pa.types.is_map(t):
            return walk(t.key_type) or walk(t.item_type)
        return False

    return any(walk(f.type) for f in schema)

"""Clustering: liquid clustering (Delta's ``clustering`` feature, the ``delta.clustering`` domain) and
Z-order.

A clustered table names its clustering columns in the ``delta.clustering`` domain metadata
(``{"clusteringColumns": [["col"], ...]}``, physical names under column mapping); every file written
into it carries stats for them whatever ``delta.dataSkippingNumIndexedCols`` says, and ``optimize()``
rewrites its files in Z-order over them (a Morton curve over the columns' dense ranks), so files cover
narrow ranges of each column and a selective read skips most of them. ``optimize(zorder_by=[...])``
does the same for any table, per partition.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ..schema import geospatial
from ..actions import DomainMetadata
from ..errors import InvalidArgumentError, SchemaMismatchError

DOMAIN = "delta.clustering"
PREVIEW_DOMAIN = "delta.liquid"
PROVIDER = "liquid"
FEATURES = ("clustering", "domainMetadata")


def check_columns(columns: Any, schema: pa.Schema, partition_columns: list[str], what: str) -> list[str]:
    """The column names of ``cluster_by``/``zorder_by``: existing, primitive, not partition columns."""
    if isinstance(columns, str):
        columns = [columns]
    if not isinstance(columns, (list, tuple)) or not columns or not all(isinstance(c, str) for c in columns):
        raise InvalidArgumentError(f"{what} takes a non-empty list of column names, not {columns!r}")
    out = []
    lower = {n.lower(): n for n in schema.names}
    for c in columns:
        name = lower.get(c.lower())
        if name is None:
            raise SchemaMismatchError(f"{what}: column {c!r} is not in the table (columns: {schema.names})")
        if name in partition_columns:
            raise SchemaMismatchError(f"{what}: {name!r} is a partition column; files are already separated by it")
        if geospatial.is_geo(schema.field(name).type):
            raise SchemaMismatchError(f"{what}: {name!r} is {geospatial.to_delta(schema.field(name).type)}, which has no order to cluster by")
        if pa.types.is_nested(schema.field(name).type):
            raise SchemaMismatchError(f"{what}: {name!r} is {schema.field(name).type}; only primitive columns order files")
        out.append(name)
    if len(set(out)) != len(out):
        raise InvalidArgumentError(f"{what} names a column twice: {columns!r}")
    return out


def domain(columns: list[str], physical) -> DomainMetadata:
    """The ``delta.clustering`` domain for ``columns`` (``physical``: logical -> physical name)."""
    return DomainMetadata(DOMAIN, orjson.dumps({"clusteringColumns": [[physical(c)] for c in columns]}).decode())


def clustering_columns(snapshot) -> list[str]:
    """The table's clustering columns (logical names); [] when it is not clustered."""
    d = snapshot.domains.get(DOMAIN)
    if d is None or d.removed:
        # (Databricks' preview of clustering, the 'liquid' feature, names the columns in delta.liquid as
        # {"physicalName": [...]} objects)
        d = snapshot.domains.get(PREVIEW_DOMAIN)
        if d is None or d.removed:
            return []
    try:
        paths = orjson.loads(d.configuration).get("clusteringColumns") or []
        paths = [p.get("physicalName") if isinstance(p, dict) else p for p in paths]
    except (orjson.JSONDecodeError, AttributeError):
        return []
    mapping = snapshot.column_mapping
    by_physical = {mapping.physical_name(n): n for n in snapshot.schema.names} if mapping.active else {n: n for n in snapshot.schema.names}
    return [by_physical[p[0]] for p in paths if p and len(p) == 1 and p[0] in by_physical]


def z_order(table: pa.Table, columns: list[str]) -> np.ndarray:
    """Row indexes of ``table`` in Z-order over ``columns``: each column's values become dense ranks
    (NULLs last) scaled to the same number of bits, and the bits are interleaved into one key."""
    k = len(columns)
    bits = max(1, min(21, 63 // k))
    scaled = []
    for c in columns:
        ranks = pc.rank(table.column(c), sort_keys="ascending", tiebreaker="dense").to_numpy().astype(np.uint64) - 1
        top = int(ranks.max()) if len(ranks) else 0
        shift = max(0, top.bit_length() - bits)
        scaled.append(ranks >> np.uint64(shift))
    key = np.zeros(table.num_rows, dtype=np.uint64)
    for b in range(bits - 1, -1, -1):
        for v in scaled:
            key = (key << np.uint64(1)) | ((v >> np.uint64(b)) & np.uint64(1))
    return np.argsort(key, kind="stable")

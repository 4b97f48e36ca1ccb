"""Row-tracking tables of the shapes the row id tests draw, and their rows' stable ids."""

from __future__ import annotations

import lakelog

ON = {"delta.enableRowTracking": "true"}


def shape_configuration(shape: str) -> tuple[dict[str, str], list[str] | None]:
    """(configuration, partition_by) of a row-tracking table of ``shape``: a text naming any of
    "deletion vectors", "column mapping", "feed" (the change data feed) and "partitioned" (by ``p``)."""
    conf = dict(ON)
    if "deletion vectors" in shape:
        conf["delta.enableDeletionVectors"] = "true"
    if "column mapping" in shape:
        conf["delta.columnMapping.mode"] = "name"
    if "feed" in shape:
        conf["delta.enableChangeDataFeed"] = "true"
    return conf, ["p"] if "partitioned" in shape else None


def tracked(path: str) -> dict:
    """id -> (row id, row commit version) of the latest version; every row id distinct."""
    rows = lakelog.read_table(path, with_row_tracking=True).to_pylist()
    ids = [r["_row_id"] for r in rows]
    assert len(set(ids)) == len(ids), "a row id twice"
    return {r["id"]: (r["_row_id"], r["_row_commit_version"]) for r in rows}

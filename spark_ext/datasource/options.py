"""Data source options as Spark passes them (strings, case-insensitive keys) turned into typed values."""

from __future__ import annotations

import json
import re

from lakelog.errors import InvalidArgumentError, InvalidVersionError, LakelogError

from ..cluster.paths import absolute_path

_BYTE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
_BYTES_RE = re.compile(r"^\s*(\d+)\s*([kmgtp]?)b?\s*$", re.IGNORECASE)


def table_path(options) -> str:
    """The ``path`` option, a local path made absolute, a catalog name (``glue://database/table``) its
    location (looked up with the ``storage.*`` options). Called on the driver (in the Python worker that
    plans the job, which runs in the driver JVM's working directory), so tasks get the absolute path."""
    path = options.get("path")
    if not path:
        raise LakelogError(
            "no table path: use .load(path) / .save(path) / .start(path) or .option('path', ...). A catalog table "
            "(CREATE TABLE ... USING lakelog) reaches Spark's Python data sources without its location: run SQL on it "
            "through spark_ext.sql(spark, statement)"
        )
    return absolute_path(path, storage_options=storage_options(options))


def storage_options(options) -> dict[str, str] | None:
    opts = {k[len("storage."):]: v for k, v in options.items() if k.lower().startswith("storage.")}
    return opts or None


def boolean(options, key: str, default: bool = False) -> bool:
    v = options.get(key)
    return default if v is None else str(v).strip().lower() in ("1", "true", "yes")


def version(options, key: str) -> int | None:
    """A version option: a whole number >= 0, else InvalidVersionError; None when absent."""
    v = options.get(key)
    if v is None:
        return None
    text = str(v).strip()
    if not text.isdigit():
        raise InvalidVersionError(f"option {key} must be a table version (a whole number >= 0), not {v!r}")
    return int(text)


def partition_by(options, key: str = "partitionBy") -> list[str] | None:
    """A column-list option (``partitionBy``, ``clusterBy``): comma separated names."""
    v = options.get(key)
    if v is None:
        return None
    return [c.strip() for c in str(v).split(",") if c.strip()]


def positive_int(options, key: str) -> int | None:
    """An option that must be a whole number > 0, or None when absent."""
    v = options.get(key)
    if v is None:
        return None
    try:
        n = int(str(v).strip())
    except ValueError:
        n = 0
    if n <= 0:
        raise LakelogError(f"option {key}={v!r} must be a whole number greater than 0")
    return n


def byte_size(options, key: str) -> int | None:
    """A size option ('1048576', '512k', '64m', '1g'; binary units as in Spark), or None when absent."""
    v = options.get(key)
    if v is None:
        return None
    m = _BYTES_RE.match(str(v))
    n = int(m.group(1)) * _BYTE_UNITS[m.group(2).lower()] if m else 0
    if n <= 0:
        raise LakelogError(f"option {key}={v!r} must be a size greater than 0, e.g. '10485760', '512m' or '1g'")
    return n


PARTITION_OVERWRITE_MODES = ("static", "dynamic")


def partition_overwrite_mode(value, source: str = "option partitionOverwriteMode") -> str | None:
    """'static' or 'dynamic' (any case) as Spark spells them; None when unset."""
    if value is None:
        return None
    mode = str(value).strip().lower()
    if mode not in PARTITION_OVERWRITE_MODES:
        raise InvalidArgumentError(f"{source}={value!r} is not valid: use 'static' (replace the whole table) or 'dynamic' (replace the partitions the data holds)")
    return mode


def replace_where(options) -> str | None:
    """The replaceWhere predicate (SQL text), or None when the option is absent."""
    v = options.get("replaceWhere")
    if v is None:
        return None
    if not str(v).strip():
        raise InvalidArgumentError("option replaceWhere is empty: give a SQL predicate, e.g. \"day = '2026-01-01'\", or leave the option out")
    return str(v)


def table_properties(options) -> dict[str, str] | None:
    """Option ``tableProperties``: a JSON object of the table properties a write that creates the table
    (or replaces its schema) gives it; None when absent."""
    v = options.get("tableProperties")
    if v is None:
        return None
    try:
        props = json.loads(str(v))
    except ValueError:
        props = None
    if not isinstance(props, dict) or not all(isinstance(k, str) for k in props):
        raise InvalidArgumentError(f"option tableProperties must be a JSON object of property name -> value, not {v!r}")
    return {k: val if isinstance(val, str) else json.dumps(val) for k, val in props.items()}

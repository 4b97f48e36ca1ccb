"""Partition columns of a converted data set: the ``partition_by`` argument, ``k=v`` directories, the
inferred types and the values (checked against values also stored in the files)."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..parquet_read import read_parquet
from ..errors import ConvertError, InvalidArgumentError, SchemaMismatchError, UnsupportedFeatureError
from ..schema import (
    HIVE_NULL,
    _strip_nullability,
    canonical_type,
    delta_type_to_arrow,
    serialize_partition_value,
)
from ..storage import Storage
from .footers import Footer
from .sources import SourceFile


_INT_RE = re.compile(r"^-?[0-9]+$")
_DATE_RE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
_FLOAT_RE = re.compile(r"^-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?$")
_TYPE_ALIASES = {"int": "integer", "bigint": "long", "smallint": "short", "tinyint": "byte", "bool": "boolean"}


def _parse_type(spec: Any, column: str) -> pa.DataType:
    if isinstance(spec, pa.DataType):
        return canonical_type(spec)
    name = str(spec).strip().lower()
    name = _TYPE_ALIASES.get(name, name)
    try:
        t = delta_type_to_arrow(name)
    except UnsupportedFeatureError:
        raise InvalidArgumentError(
            f"partition_by: unknown type {spec!r} for column {column!r} (use a Delta type name such as "
            "string, integer, long, double, date, timestamp, boolean, decimal(p,s))"
        ) from None
    if pa.types.is_nested(t):
        raise InvalidArgumentError(f"partition_by: column {column!r} cannot have the nested type {spec!r}")
    return t


def parse_partition_by(partition_by: Any) -> list[tuple[str, pa.DataType | None]] | None:
    """Normalize ``partition_by`` to [(name, type or None)], or None when not given."""
    if partition_by is None:
        return None
    if isinstance(partition_by, dict):
        items: list[Any] = list(partition_by.items())
    elif isinstance(partition_by, str):
        items = [s for s in re.split(r",(?![^()]*\))", partition_by) if s.strip()]
    elif not isinstance(partition_by, (list, tuple)):
        raise InvalidArgumentError(f"partition_by must be a list of column names or 'name:type' strings (or a dict name -> type), not {partition_by!r}")
    else:
        items = list(partition_by)
    out: list[tuple[str, pa.DataType | None]] = []
    for item in items:
        if isinstance(item, tuple):
            name, t = item
            out.append((str(name), None if t is None else _parse_type(t, str(name))))
            continue
        if not isinstance(item, str):
            raise InvalidArgumentError(f"partition_by entries must be column names or 'name:type' strings, not {item!r}")
        s = item.strip()
        m = re.match(r"^(\S+)\s+(\S.*)$", s)  # "name type" (column names cannot contain spaces)
        if m:
            out.append((m.group(1), _parse_type(m.group(2), m.group(1))))
            continue
        name, sep, t = s.rpartition(":")
        if sep and name:
            try:
                out.append((name, _parse_type(t, name)))
                continue
            except ValueError:
                pass  # a ':' inside the column name
        out.append((s, None))
    names = [n for n, _ in out]
    if len(set(names)) != len(names):
        raise InvalidArgumentError(f"partition_by names a column twice: {names}")
    return out


def hive_unescape(s: str) -> str:
    """Undo Hive/Spark path escaping (``%XX`` with two hex digits; anything else stays as it is)."""
    return re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), s)


def partition_dirs(files: list[SourceFile]) -> dict[str, list[tuple[str, str | None]]]:
    """Per file, the (column, unescaped value or None) pairs of its ``k=v`` directories, in order."""
    out: dict[str, list[tuple[str, str | None]]] = {}
    first: tuple[str, list[str]] | None = None
    for f in files:
        pairs: list[tuple[str, str | None]] = []
        for seg in f.rel.split("/")[:-1]:
            key, sep, raw = seg.partition("=")
            if not sep or not key:
                raise ConvertError(
                    f"{f.rel!r} is in the directory {seg!r}, which is not a '<column>=<value>' partition directory; "
                    "lakelog converts data files at the top level or in Hive-style partition directories only"
                )
            value = None if raw in ("", HIVE_NULL) else hive_unescape(raw)
            pairs.append((hive_unescape(key), value))
        names = [k for k, _ in pairs]
        if first is None:
            first = (f.rel, names)
        elif names != first[1]:
            raise ConvertError(
                f"inconsistent partition directories: {first[0]!r} is partitioned by {first[1]} but {f.rel!r} by {names}; "
                "every file must sit under the same partition columns, in the same order"
            )
        if len(set(names)) != len(names):
            raise ConvertError(f"{f.rel!r} names partition column(s) twice: {names}")
        out[f.rel] = pairs
    return out


def infer_partition_type(values: list[str | None]) -> pa.DataType:
    """The type of a partition column from its directory values (None = null), conservatively.

    Like Spark's partition type inference, but only where the directory text is the canonical form of
    the typed value, so that nothing is lost: integers (no sign ``+``, no leading zeros) become
    ``integer`` if they all fit 32 bits, else ``long``; a mix of such integers (|n| < 2**53) and finite
    decimals whose shortest text is the directory text (``1.5``, not ``1.50``) becomes ``double``;
    ``YYYY-MM-DD`` dates become ``date``; everything else, including timestamps (Spark would read those
    in the session time zone) and integers beyond 64 bits, stays ``string``. An all-null column is
    ``string``. Pass ``partition_by=["col:type"]`` to choose another type.
    """
    vals = [v for v in values if v is not None]
    if not vals:
        return pa.string()

    def canonical_int(v: str) -> bool:
        return bool(_INT_RE.match(v)) and str(int(v)) == v

    if all(canonical_int(v) for v in vals):
        nums = [int(v) for v in vals]
        if all(-(2**31) <= n < 2**31 for n in nums):
            return pa.int32()
        if all(-(2**63) <= n < 2**63 for n in nums):
            return pa.int64()
        return pa.string()

    def canonical_double(v: str) -> bool:
        if canonical_int(v):
            return abs(int(v)) < 2**53
        if not _FLOAT_RE.match(v):
            return False
        x = float(v)
        return math.isfinite(x) and repr(x) == v

    if all(canonical_double(v) for v in vals):
        return pa.float64()

    def iso_date(v: str) -> bool:
        if not _DATE_RE.match(v):
            return False
        try:
            dt.date.fromisoformat(v)
            return True
        except ValueError:
            return False

    if all(iso_date(v) for v in vals):
        return pa.date32()
    return pa.string()


_INT_RANGES = {8: 2**7, 16: 2**15, 32: 2**31, 64: 2**63}


def _parse_partition_text(raw: str, t: pa.DataType, column: str) -> Any:
    """A directory value as a Python value of type ``t``; SchemaMismatchError when it is not one."""

    def bad(why: str = "") -> SchemaMismatchError:
        return SchemaMismatchError(
            f"partition directory value {raw!r} of column {column!r} is not a valid {t}{why}; "
            f"pass partition_by=['{column}:string'] (or another type) to convert it"
        )

    try:
        if pa.types.is_string(t):
            return raw
        if pa.types.is_integer(t):
            if not re.fullmatch(r"[-+]?[0-9]+", raw):
                raise bad()
            n = int(raw)
            lim = _INT_RANGES[t.bit_width]
            if not -lim <= n < lim:
                raise bad(" (out of range)")
            return n
        if pa.types.is_floating(t):
            return float(raw)
        if pa.types.is_boolean(t):
            if raw.lower() not in ("true", "false"):
                raise bad()
            return raw.lower() == "true"
        if pa.types.is_date(t):
            return dt.date.fromisoformat(raw)
        if pa.types.is_timestamp(t):
            v = dt.datetime.fromisoformat(raw.replace(" ", "T", 1) if "T" not in raw else raw)
            if t.tz is not None:  # a value without an offset is taken as UTC, as lakelog reads partition values
                return v.replace(tzinfo=dt.timezone.utc) if v.tzinfo is None else v.astimezone(dt.timezone.utc)
            if v.tzinfo is not None:
                raise bad(" (it has a time zone offset)")
            return v
        if pa.types.is_decimal(t):
            d = decimal.Decimal(raw)
            q = d.quantize(decimal.Decimal(1).scaleb(-t.scale))
            if q != d or len(q.as_tuple().digits) > t.precision:
                raise bad(" (it does not fit)")
            return q
        if pa.types.is_binary(t):
            return raw.encode("latin-1")
    except SchemaMismatchError:
        raise
    except (ValueError, ArithmeticError, UnicodeError):
        raise bad() from None
    raise SchemaMismatchError(f"cannot partition by column {column!r} of type {t}; partition columns must be primitive")


def plan_partitions(
    data_schema: pa.Schema,
    dirs: dict[str, list[tuple[str, str | None]]],
    requested: list[tuple[str, pa.DataType | None]] | None,
) -> tuple[pa.Schema, list[str], dict[str, dict[str, str | None]]]:
    """(table schema, partition columns, partitionValues per file)."""
    found = next(iter(dirs.values()), [])
    found_names = [k for k, _ in found]
    if requested is None:
        parts = found_names
        types: dict[str, pa.DataType | None] = {c: None for c in parts}
    else:
        parts = [n for n, _ in requested]
        types = dict(requested)
        if set(parts) != set(found_names):
            raise SchemaMismatchError(
                f"partition_by={parts} does not match the directories, which are partitioned by {found_names or 'nothing'}; "
                f"pass partition_by={found_names} (or omit it)"
            )
    raw: dict[str, list[str | None]] = {c: [] for c in parts}
    for pairs in dirs.values():
        for k, v in pairs:
            raw[k].append(v)
    in_files = {f.name: f for f in data_schema}
    ptypes: dict[str, pa.DataType] = {}
    for c in parts:
        t = types.get(c)
        if c in in_files:
            ft = in_files[c].type
            if t is not None and _strip_nullability(t) != _strip_nullability(ft):
                raise SchemaMismatchError(f"partition_by gives column {c!r} the type {t} but the Parquet files store it as {ft}")
            t = ft
        ptypes[c] = t if t is not None else infer_partition_type(raw[c])
    values: dict[str, dict[str, str | None]] = {}
    for rel, pairs in dirs.items():
        pv: dict[str, str | None] = {}
        for k, v in pairs:
            t = ptypes[k]
            if v is None:
                pv[k] = None
            elif pa.types.is_string(t):
                pv[k] = v
            else:
                pv[k] = serialize_partition_value(_parse_partition_text(v, t, k), t)
        values[rel] = {c: pv[c] for c in parts}
    fields = [pa.field(f.name, f.type, True) for f in data_schema]
    fields += [pa.field(c, ptypes[c], True) for c in parts if c not in in_files]
    return pa.schema(fields), parts, values


def check_stored_partition_values(
    storage: Storage,
    footers: dict[str, "Footer"],
    schema: pa.Schema,
    parts: list[str],
    values: dict[str, dict[str, str | None]],
) -> None:
    """Files that also store a partition column must hold their directory's value in every row.

    Delta readers take partition values from the log only, lakelog's from the file when it has the
    column: the two must not be able to disagree.
    """
    for rel, footer in footers.items():
        stored = [c for c in parts if c in footer.schema.names]
        if not stored:
            continue
        try:
            data = read_parquet(storage.join(rel), columns=stored, filesystem=storage.arrow_fs)
        except (pa.ArrowException, OSError) as e:
            storage.raise_if_unanswered(e, storage.join(rel))
            raise ConvertError(f"{rel!r} is not a readable Parquet file ({e})") from None
        for c in stored:
            t = schema.field(c).type
            text = values[rel][c]
            col = data.column(c).cast(t)
            if text is None:
                ok = col.null_count == len(col)
            else:
                expected = pa.scalar(_parse_partition_text(text, t, c), t) if not pa.types.is_string(t) else pa.scalar(text, t)
                ok = col.null_count == 0 and bool(pc.all(pc.equal(col, expected)).as_py() in (True, None))
            if not ok:
                raise ConvertError(
                    f"{rel!r} stores the partition column {c!r} with values other than its directory's "
                    f"({text!r}); readers would disagree about them. Rewrite the file without the column or fix its directory."
                )

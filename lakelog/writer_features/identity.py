"""Identity columns (``delta.identity.*`` field metadata, the ``identityColumns`` feature).

A row written without a value (or NULL) in an identity column gets ``start + k * step`` above the column's
``delta.identity.highWaterMark``; the commit that adds the rows raises the high water mark to the largest
value written (by step direction), in the same commit's ``metaData``. Two writers that both generated values
from the same mark both change the metadata, so the second to commit conflicts and nothing is duplicated
(``write_table`` then writes its data again from the new mark). Parallel writers of one commit (Spark
tasks) draw from disjoint ranges (``task``), so values are unique but not dense, as in Delta.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from ..errors import InvalidArgumentError, InvalidArgumentTypeError, SchemaMismatchError

START, STEP, HIGH_WATER_MARK, ALLOW_EXPLICIT = (
    "delta.identity.start", "delta.identity.step", "delta.identity.highWaterMark", "delta.identity.allowExplicitInsert")
TASK_RANGE = 1 << 32  # values one parallel writer (task) may draw before reaching the next one's range


@dataclass(frozen=True)
class IdentityColumn:
    name: str
    start: int
    step: int
    high_water_mark: int | None
    allow_explicit: bool

    def first(self, task: int) -> int:
        """The first value the writer ``task`` (0: the only one) draws."""
        base = self.start if self.high_water_mark is None else self.high_water_mark + self.step
        return base + self.step * task * TASK_RANGE

    def beyond(self, a: int, b: int | None) -> int:
        """The further of two values in the step's direction (``b`` None: ``a``)."""
        if b is None:
            return a
        return max(a, b) if self.step > 0 else min(a, b)


def _int(v: Any, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise SchemaMismatchError(f"{what} must be an integer, not {v!r}")
    try:
        return int(v)
    except ValueError:
        raise SchemaMismatchError(f"{what} must be an integer, not {v!r}") from None


def identity_columns(fields: list[dict]) -> list[IdentityColumn]:
    """The identity columns of a schema's top-level fields."""
    out = []
    for f in fields:
        meta = f.get("metadata") or {}
        if START not in meta:
            continue
        name = f["name"]
        step = _int(meta.get(STEP, 1), f"{STEP} of column {name!r}")
        if step == 0:
            raise SchemaMismatchError(f"identity column {name!r} has step 0")
        hwm = meta.get(HIGH_WATER_MARK)
        allow = meta.get(ALLOW_EXPLICIT, False)
        out.append(IdentityColumn(name, _int(meta[START], f"{START} of column {name!r}"), step,
                                  None if hwm is None else _int(hwm, f"{HIGH_WATER_MARK} of column {name!r}"),
                                  allow is True or str(allow).lower() == "true"))
    return out


def with_high_water_marks(schema_string: str, marks: dict[str, int]) -> str:
    """``schema_string`` with the identity columns' ``delta.identity.highWaterMark`` set to ``marks``."""
    schema = orjson.loads(schema_string)
    for f in schema["fields"]:
        if f["name"] in marks:
            f["metadata"] = {**(f.get("metadata") or {}), HIGH_WATER_MARK: marks[f["name"]]}
    return orjson.dumps(schema).decode()


def check_identity_declarations(identity: Any) -> dict[str, dict]:
    """``identity_columns`` of ``write_table``: column names, or {name: {"start", "step", "allow_explicit_insert"}}."""
    if isinstance(identity, str):
        identity = [identity]
    if isinstance(identity, (list, tuple)) and all(isinstance(n, str) for n in identity):
        identity = {n: {} for n in identity}
    if not isinstance(identity, dict) or not identity or not all(isinstance(k, str) and isinstance(v, dict) for k, v in identity.items()):
        raise InvalidArgumentTypeError(
            f"identity_columns must be column names or a dict of name -> {{'start': 1, 'step': 1, 'allow_explicit_insert': False}}, not {identity!r}")
    out = {}
    for name, spec in identity.items():
        unknown = set(spec) - {"start", "step", "allow_explicit_insert"}
        if unknown:
            raise InvalidArgumentError(f"identity column {name!r}: unknown option(s) {sorted(unknown)} (start, step, allow_explicit_insert)")
        start, step = spec.get("start", 1), spec.get("step", 1)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, step)) or step == 0:
            raise InvalidArgumentError(f"identity column {name!r}: start and step must be integers, step not 0 (got {start!r}, {step!r})")
        out[name] = {START: start, STEP: step, ALLOW_EXPLICIT: bool(spec.get("allow_explicit_insert", False))}
    return out


def add_identity_metadata(schema_string: str, declared: dict[str, dict]) -> str:
    """``schema_string`` with the declared identity columns' metadata (columns must be ``long``)."""
    schema = orjson.loads(schema_string)
    by_name = {k.lower(): v for k, v in declared.items()}
    for f in schema["fields"]:
        meta = by_name.get(f["name"].lower())
        if meta is not None:
            if f["type"] != "long":
                raise SchemaMismatchError(f"identity column {f['name']!r} must be of type long (bigint), not {f['type']}")
            f["metadata"] = {**(f.get("metadata") or {}), **meta}
    return orjson.dumps(schema).decode()


def high_water_marks(columns: tuple[IdentityColumn, ...], adds: list, storage, mapping) -> dict[str, int]:
    """The identity columns' high water marks once ``adds`` are committed (only those that move): from
    the files' stats, or, for a file without them, from its column."""
    out: dict[str, int] = {}
    for col in columns:
        key = mapping.physical_name(col.name) if mapping is not None and mapping.active else col.name
        bound = "maxValues" if col.step > 0 else "minValues"
        mark = col.high_water_mark
        for a in adds:
            stats = orjson.loads(a.stats) if a.stats else {}
            if not stats.get("numRecords", 1):
                continue
            v = (stats.get(bound) or {}).get(key)
            if v is None and (stats.get("nullCount") or {}).get(key) != stats.get("numRecords"):
                v = _file_bound(storage, a, key, col.step > 0)
            if v is not None:
                mark = col.beyond(int(v), mark)
        if mark is not None and mark != col.high_water_mark:
            out[col.name] = mark
    return out


def _file_bound(storage, add, key: str, largest: bool) -> int | None:
    import pyarrow.compute as pc
    from ..parquet_read import read_parquet

    with storage.arrow_fs.open_input_file(storage.join(add.relative_path)) as f:
        column = read_parquet(f, columns=[key]).column(0)
    v = (pc.max if largest else pc.min)(column).as_py()
    return None if v is None else int(v)

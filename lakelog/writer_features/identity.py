"""Identity columns (``delta.identity.*`` field metadata, the ``identityColumns`` feature), by Delta's rules.

A row written without a value (or NULL) in an identity column gets the next values ``start + k * step``
(k >= 0) beyond the column's ``delta.identity.highWaterMark``; a value that would leave the bigint
range fails the write (``IdentityOverflowError``), as Delta detects overflow. The commit that adds rows
moves the high water mark in its own ``metaData``, as Delta's ``updateToValidHighWaterMark``: to the
furthest value written, rounded to the next value of the sequence, only in the step's direction and
never for a value before ``start`` (an explicit value, where allowed, then never lands the sequence off
its grid). Two writers that both generated values from the same mark both change the metadata, so the
second to commit conflicts and nothing is duplicated (``write_table`` then writes its data again from
the new mark).

The only writer of a commit takes the sequence's values in order. Spark's tasks of one job write in
parallel, and none knows how many tasks the job has or how many rows the others get (PySpark's
``TaskContext`` has no ``numPartitions``, which Delta's generator strides by, and a Python data source
cannot run a counting job first), so task ``p`` gives its row ``k`` the value at index
``spark_index(p, k)`` of the sequence beyond the mark: a fixed one-to-one map of (task, row) pairs that
starts at 0 for task 0's first row and grows about as (p + 1) * (k + 1) * log2((p + 1) * (k + 1)). A
job's values are unique without any coordination, task 0's first value is the sequence's next one,
and a job spreads over a few times (the log factor) the values Delta's generator would, never a fixed
range per task.

Identity values never change once written (an update of an identity column is refused, as Delta's
``DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED``), and a column generated always
(``allowExplicitInsert`` false) takes no given value (``DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np
import orjson

from ..errors import IdentityColumnError, IdentityOverflowError, InvalidArgumentError, InvalidArgumentTypeError, SchemaMismatchError

START, STEP, HIGH_WATER_MARK, ALLOW_EXPLICIT = (
    "delta.identity.start", "delta.identity.step", "delta.identity.highWaterMark", "delta.identity.allowExplicitInsert")
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
GENERATION_KEY = "delta.generationExpression"  # (a column with it is generated: it cannot be an identity column too)
UPDATE_NOT_SUPPORTED = "DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED"
EXPLICIT_INSERT_NOT_SUPPORTED = "DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED"


@dataclass(frozen=True)
class IdentityColumn:
    name: str
    start: int
    step: int
    high_water_mark: int | None
    allow_explicit: bool

    def before(self, a: int, b: int) -> bool:
        """Whether ``a`` comes before ``b`` in the step's direction."""
        return a < b if self.step > 0 else a > b

    def beyond(self, a: int, b: int | None) -> int:
        """The further of two values in the step's direction (``b`` None: ``a``)."""
        if b is None:
            return a
        return max(a, b) if self.step > 0 else min(a, b)

    def round_to_next(self, value: int) -> int:
        """``value`` if it is on the sequence ``start + k * step``, else the sequence's next value after it
        in the step's direction (Delta's ``roundToNext``; a value before ``start`` rounds towards it)."""
        offset = value - self.start
        if offset % self.step == 0:
            return value
        quotient = abs(offset) // abs(self.step)  # (truncated towards zero, as Java's division)
        if (offset < 0) != (self.step < 0):
            return self.start - self.step * quotient
        return self.start + self.step * (quotient + 1)

    def next_value(self) -> int:
        """The first value a write draws: ``start`` on a column without values yet, else the sequence's
        next value beyond the high water mark (one off the sequence, or before ``start``, as a writer
        that did not round it may have left it, is not continued from as it is)."""
        mark = self.high_water_mark
        if mark is None or self.before(mark, self.start):
            return self.start
        rounded = self.round_to_next(mark)
        return rounded if rounded != mark else mark + self.step

    def draw(self, task: int | None, drawn: int, count: int) -> np.ndarray:
        """The values of rows ``drawn`` .. ``drawn + count - 1`` (counted per column) of a writer, as int64:
        the sequence's next ones in order for the only writer of a commit (``task`` None), else those
        at ``spark_index(task, row)`` for Spark task ``task`` (its partition id)."""
        start = self.next_value()
        last = drawn + count - 1 if task is None else spark_index(task, drawn + count - 1)
        where = "the next value" if task is None else f"Spark task {task}'s value for its row {drawn + count - 1}"
        self._checked(start + self.step * last, where)  # (indexes grow with the row: the last is the furthest)
        indexes = np.arange(drawn, drawn + count, dtype=np.uint64) if task is None else spark_indexes(task, drawn, count)
        # (exact: int64 arithmetic wraps modulo 2**64, and every true value is in range)
        return np.int64(start) + indexes.view(np.int64) * np.int64(self.step)

    def moved_mark(self, candidate: int) -> int | None:
        """The high water mark once values as far as ``candidate`` (the furthest, in the step's direction,
        that a commit writes) are committed, None when it does not move. As Delta's
        ``updateToValidHighWaterMark``: ``candidate`` rounded to the sequence's next value, never
        behind the current mark, and a candidate before ``start`` does not move it (unless the mark
        itself is before ``start``)."""
        mark = self.high_water_mark
        before_start = self.before(candidate, self.start)
        rounded = self.round_to_next(candidate)
        new = rounded if mark is None else self.beyond(rounded, mark)
        bad_mark = mark is not None and self.before(mark, self.start)
        if not (bad_mark or (not before_start and new != mark)):
            return None
        return self._checked(new, f"the high water mark for the value {candidate} written (the sequence's next value at or beyond it)")

    def _checked(self, value: int, what: str) -> int:
        if not LONG_MIN <= value <= LONG_MAX:
            raise IdentityOverflowError(
                f"identity column {self.name!r} (start {self.start}, step {self.step}, high water mark {self.high_water_mark}): "
                f"{what} would be {value}, outside the bigint range [{LONG_MIN}, {LONG_MAX}]; nothing was committed. "
                "The column's sequence is used up in this direction: write the rows to a table (or column) with another start or step",
                self.name)
        return value


def spark_index(task: int, row: int) -> int:
    """The index (beyond the high water mark) of the value Spark task ``task`` gives its row ``row``.

    With a = task + 1 = 2**i + x and b = row + 1 = 2**j + y (0 <= x < 2**i, 0 <= y < 2**j), the pairs
    fall in blocks (i, j) of 2**(i + j) pairs each, laid out by level s = i + j (the s + 1 blocks of
    levels below s hold (s - 1) * 2**s + 1 pairs), then by i; inside a block row by row, the tasks
    interleaved: index = (s - 1) * 2**s + 1 + i * 2**s + y * 2**i + x (0 for task 0's row 0)."""
    a, b = task + 1, row + 1
    i, j = a.bit_length() - 1, b.bit_length() - 1
    s = i + j
    return ((s - 1) << s) + 1 + (i << s) + ((b - (1 << j)) << i) + (a - (1 << i)) if s else 0


def spark_indexes(task: int, first_row: int, count: int) -> np.ndarray:
    """``spark_index(task, row)`` for ``count`` rows from ``first_row``, as uint64 (the caller checks that
    the last, the largest, is in range). Rows of one block (j) are ``2**i`` apart: a run per block."""
    step = np.uint64((task + 1).bit_length() - 1)
    runs = []
    b, end = first_row + 1, first_row + count + 1
    while b < end:
        stop = min(end, 1 << b.bit_length())  # (the next power of two: where the next block begins)
        runs.append(np.uint64(spark_index(task, b - 1)) + (np.arange(stop - b, dtype=np.uint64) << step))
        b = stop
    return np.concatenate(runs) if len(runs) != 1 else runs[0]


def refuse_updates(columns: Iterable[IdentityColumn], assigned: Iterable[str], what: str = "the update") -> None:
    """IdentityColumnError when ``assigned`` (column names an update sets) holds an identity column."""
    lower = {str(c).lower() for c in assigned}
    for col in columns:
        if col.name.lower() in lower:
            raise IdentityColumnError(
                f"UPDATE on IDENTITY column {col.name!r} is not supported ({UPDATE_NOT_SUPPORTED}): {what} sets it, and an identity "
                f"column's values never change once written; nothing was committed. Leave {col.name!r} out of the assignments "
                f"(an update-all clause sets every column the source has: drop {col.name!r} from the source, or name the columns to set)",
                col.name, UPDATE_NOT_SUPPORTED)


def refuse_explicit(columns: Iterable[IdentityColumn], given: Iterable[str], what: str = "the data") -> None:
    """IdentityColumnError when ``given`` (column names a write gives values for) holds an identity column
    generated always (``allowExplicitInsert`` false)."""
    lower = {str(c).lower() for c in given}
    for col in columns:
        if col.name.lower() in lower and not col.allow_explicit:
            raise IdentityColumnError(
                f"providing values for GENERATED ALWAYS AS IDENTITY column {col.name!r} is not supported ({EXPLICIT_INSERT_NOT_SUPPORTED}; "
                f"delta.identity.allowExplicitInsert is false): {what} gives it; nothing was committed. Leave {col.name!r} out "
                f"(of the data, of the insert's values, or of the source of an insert-all clause), and the table gives each row its value",
                col.name, EXPLICIT_INSERT_NOT_SUPPORTED)


def _int(v: Any, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise SchemaMismatchError(f"{what} must be an integer, not {v!r}")
    try:
        n = int(v)
    except ValueError:
        raise SchemaMismatchError(f"{what} must be an integer, not {v!r}") from None
    if not LONG_MIN <= n <= LONG_MAX:
        raise SchemaMismatchError(f"{what} must be a long (bigint), not {v!r}")
    return n


def identity_columns(fields: list[dict]) -> list[IdentityColumn]:
    """The identity columns of a schema's top-level fields."""
    out = []
    for f in fields:
        meta = f.get("metadata") or {}
        if START not in meta:
            continue
        name = f["name"]
        if meta.get(GENERATION_KEY):
            raise SchemaMismatchError(
                f"column {name!r} is declared both an identity column and a generated column ({GENERATION_KEY}); Delta refuses "
                "such a column (DELTA_IDENTITY_COLUMNS_WITH_GENERATED_EXPRESSION), and lakelog does not write to the table")
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


def with_merged_high_water_marks(schema_string: str, newer_schema_string: str) -> str:
    """``schema_string`` (a past version's, being restored) with each identity column's high water mark
    merged with that of the column of ``newer_schema_string`` of the same physical name: the values the
    newer version's mark says were issued stay issued. As Delta's RESTORE
    (``copySchemaWithMergedHighWaterMarks``): the newer mark is a candidate for the restored column's
    ``updateToValidHighWaterMark``, so the mark only moves in the step's direction."""
    if START not in schema_string or START not in newer_schema_string:
        return schema_string
    newer = {_physical(f): (f.get("metadata") or {}).get(HIGH_WATER_MARK) for f in orjson.loads(newer_schema_string)["fields"]}
    fields = orjson.loads(schema_string)["fields"]
    marks = {}
    for col, f in zip(identity_columns(fields), [f for f in fields if START in (f.get("metadata") or {})]):
        candidate = newer.get(_physical(f))
        if candidate is not None:
            mark = col.moved_mark(_int(candidate, f"{HIGH_WATER_MARK} of column {col.name!r}"))
            if mark is not None:
                marks[col.name] = mark
    return with_high_water_marks(schema_string, marks) if marks else schema_string


def _physical(field: dict) -> str:
    return (field.get("metadata") or {}).get("delta.columnMapping.physicalName") or field["name"]


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
        start, step, allow = spec.get("start", 1), spec.get("step", 1), spec.get("allow_explicit_insert", False)
        if not all(isinstance(v, int) and not isinstance(v, bool) and LONG_MIN <= v <= LONG_MAX for v in (start, step)) or step == 0:
            raise InvalidArgumentError(f"identity column {name!r}: start and step must be longs (bigint), step not 0 (got {start!r}, {step!r})")
        if not isinstance(allow, bool):
            raise InvalidArgumentError(f"identity column {name!r}: allow_explicit_insert must be True or False, not {allow!r}")
        out[name] = {START: start, STEP: step, ALLOW_EXPLICIT: allow}
    return out


def check_not_both(generated: Any, identity: Any) -> None:
    """InvalidArgumentError when ``write_table``'s ``generated_columns`` and ``identity_columns`` name a
    column in common (Delta: ``DELTA_IDENTITY_COLUMNS_WITH_GENERATED_EXPRESSION``)."""
    names = [identity] if isinstance(identity, str) else list(identity) if isinstance(identity, (list, tuple, dict)) else []
    lower = {n.lower() for n in names if isinstance(n, str)}
    both = sorted(n for n in (generated if isinstance(generated, dict) else {}) if isinstance(n, str) and n.lower() in lower)
    if both:
        raise InvalidArgumentError(
            f"column(s) {both} cannot be both identity and generated columns: an identity column's values come from its "
            "sequence, a generated column's from its expression (Delta: DELTA_IDENTITY_COLUMNS_WITH_GENERATED_EXPRESSION). "
            "Declare each column in identity_columns or in generated_columns, not both; nothing was written")


def check_not_partitioned(identity: dict[str, dict], partition_columns: list[str]) -> None:
    """InvalidArgumentError when a declared identity column is a partition column (Delta:
    ``DELTA_IDENTITY_COLUMNS_PARTITION_NOT_SUPPORTED``: every row would be a partition of its own)."""
    lower = {n.lower() for n in identity}
    both = [c for c in partition_columns if c.lower() in lower]
    if both:
        raise InvalidArgumentError(
            f"identity column(s) {both} cannot be partition columns: each row would get a partition of its own (Delta: "
            "DELTA_IDENTITY_COLUMNS_PARTITION_NOT_SUPPORTED). Partition by another column; nothing was written")


def add_identity_metadata(schema_string: str, declared: dict[str, dict]) -> str:
    """``schema_string`` with the declared identity columns' metadata (columns must be ``long``)."""
    schema = orjson.loads(schema_string)
    by_name = {k.lower(): v for k, v in declared.items()}
    for f in schema["fields"]:
        meta = by_name.get(f["name"].lower())
        if meta is not None:
            if f["type"] != "long":
                raise SchemaMismatchError(f"identity column {f['name']!r} must be of type long (bigint), not {f['type']}")
            if (f.get("metadata") or {}).get(GENERATION_KEY):
                raise InvalidArgumentError(
                    f"column {f['name']!r} cannot be both an identity column and a generated column: an identity column's values "
                    "come from its sequence, a generated column's from its expression (Delta: DELTA_IDENTITY_COLUMNS_WITH_GENERATED_EXPRESSION). "
                    "Declare it in identity_columns or in generated_columns, not both; nothing was written")
            f["metadata"] = {**(f.get("metadata") or {}), **meta}
    return orjson.dumps(schema).decode()


def high_water_marks(columns: tuple[IdentityColumn, ...], adds: list, storage, mapping) -> dict[str, int]:
    """The identity columns' high water marks once ``adds`` are committed (only those that move; see
    ``IdentityColumn.moved_mark``): from the files' stats, or, for a file without them, from its column."""
    out: dict[str, int] = {}
    for col in columns:
        key = mapping.physical_name(col.name) if mapping is not None and mapping.active else col.name
        bound = "maxValues" if col.step > 0 else "minValues"
        candidate = None
        for a in adds:
            stats = orjson.loads(a.stats) if a.stats else {}
            if not stats.get("numRecords", 1):
                continue
            v = (stats.get(bound) or {}).get(key)
            if v is None and (stats.get("nullCount") or {}).get(key) != stats.get("numRecords"):
                v = _file_bound(storage, a, key, col.step > 0)
            if v is not None:
                candidate = col.beyond(int(v), candidate)
        mark = col.moved_mark(candidate) if candidate is not None else None
        if mark is not None:
            out[col.name] = mark
    return out


def _file_bound(storage, add, key: str, largest: bool) -> int | None:
    import pyarrow.compute as pc
    from ..parquet_read import read_parquet

    with storage.arrow_fs.open_input_file(storage.join(add.relative_path)) as f:
        column = read_parquet(f, columns=[key]).column(0)
    v = (pc.max if largest else pc.min)(column).as_py()
    return None if v is None else int(v)

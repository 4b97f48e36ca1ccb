"""Which partition a data file is in, as typed values rather than as the text of its ``partitionValues``.

Writers spell one value differently: delta-rs logs a timestamp as ``2021-01-01 10:00:00.000000`` where
lakelog logs ``2021-01-01T10:00:00.000000Z``, a double ``2`` where lakelog logs ``2.0``, a float
``1.1`` where lakelog logs the float's exact double ``1.100000023841858``, null as an empty string;
other forms the protocol allows (``True``, a decimal ``1.5`` for ``1.50``, ``nan``) occur too. Whatever
compares partitions (a dynamic partition overwrite, its conflict check, optimize's grouping) compares
these keys: each value parsed as its column's type (so a float is rounded to float32 as it is read),
equal as SQL compares values (``-0.0 = 0.0``), with NaN equal to NaN and NULL to NULL (each is one
partition, as Spark and DuckDB group them).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..table_features.column_mapping import ColumnMapping
from ..schema.partition_values import partition_scalars

if TYPE_CHECKING:
    from ..actions import AddFile
    from ..log.snapshot import Snapshot


class _Special:
    """The key of a float partition value that plain floats cannot be (NaN is not equal to itself;
    -0.0 is equal to 0.0)."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


NAN = _Special("NaN")
NEGATIVE_ZERO = _Special("-0.0")
_MISSING = object()


def comparable(s: pa.Scalar, signed_zeros: bool = False) -> Any:
    """A typed partition value as a hashable key: equal keys for values SQL finds equal (with
    ``signed_zeros``, -0.0 and 0.0 are told apart)."""
    if not s.is_valid:
        return None
    if pa.types.is_timestamp(s.type):
        return s.value  # an instant, whatever zone or separator its text had (and past year 9999)
    v = s.as_py()
    if isinstance(v, float):
        if math.isnan(v):
            return NAN
        if signed_zeros and v == 0.0 and math.copysign(1.0, v) < 0:
            return NEGATIVE_ZERO
        return v + 0.0  # (-0.0 + 0.0 is 0.0)
    return v


class PartitionKeys:
    """The typed partition key of any data file of one table: a tuple with one value per partition
    column, equal for two files exactly when they are in the same partition, whatever text their
    writers logged. A malformed or missing value is the ``CorruptLogError`` a read of the file raises.
    ``signed_zeros``: -0.0 and 0.0 are different partitions (to group files that are rewritten
    together: a writer keeps the rows of each in files of their own)."""

    def __init__(self, schema: pa.Schema, partition_columns: list[str], mapping: ColumnMapping | None = None, *, signed_zeros: bool = False):
        self.schema = schema
        self.signed_zeros = signed_zeros
        self.columns = list(partition_columns)
        active = mapping is not None and mapping.active
        self._names = [mapping.physical_name(c) if active else c for c in self.columns]  # partitionValues' keys
        self._memo: dict[tuple, tuple] = {}  # most files share their partition text with many others

    @classmethod
    def of(cls, snapshot: Snapshot, *, signed_zeros: bool = False) -> PartitionKeys:
        return cls(snapshot.schema, snapshot.partition_columns, snapshot.column_mapping, signed_zeros=signed_zeros)

    def __call__(self, add: AddFile) -> tuple:
        values = add.partition_values
        raw = tuple(values.get(n, _MISSING) for n in self._names)
        key = self._memo.get(raw)
        if key is None:
            logical = {c: v for c, v in zip(self.columns, raw) if v is not _MISSING}
            scalars = partition_scalars(logical, self.schema, self.columns, add.path)
            key = self._memo[raw] = tuple(comparable(scalars[c], self.signed_zeros) for c in self.columns)
        return key

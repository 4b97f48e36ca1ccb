"""Data shared by the benchmark modules."""

from __future__ import annotations

import decimal

import pyarrow as pa
import pyarrow.compute as pc


def mixed_table(rows: int) -> pa.Table:
    ids = pa.array(range(rows), pa.int64())
    return pa.table(
        {
            "id": ids,
            "cat": pc.cast(pc.bit_wise_and(ids, pa.scalar(15, pa.int64())), pa.string()),
            "x": pc.divide(pc.cast(ids, pa.float64()), 7.0),
            "n": pc.cast(pc.bit_wise_and(ids, pa.scalar(1023, pa.int64())), pa.int32()),
            "flag": pc.equal(pc.bit_wise_and(ids, pa.scalar(1, pa.int64())), 0),
            "day": pc.cast(pc.cast(pc.add(pc.bit_wise_and(ids, pa.scalar(31, pa.int64())), 20000), pa.int32()), pa.date32()),
            "ts": pc.cast(pc.multiply(ids, 1_000_000), pa.timestamp("us", tz="UTC")),
            "name": pc.binary_join_element_wise("user-", pc.cast(pc.bit_wise_and(ids, pa.scalar(4095, pa.int64())), pa.string()), ""),
            "amount": pa.array([decimal.Decimal(i % 10000) / 100 for i in range(rows)], pa.decimal128(12, 2)),
        }
    )

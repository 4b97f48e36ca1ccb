"""Deletion-vector test tables shared by the Python and the Spark row-level tests: a small table
(id, p, x, s) written in several appends with ``delta.enableDeletionVectors=true``, and the checks
that every version reads as expected through lakelog and deltalake's SQL engine (which applies DVs)."""

from __future__ import annotations

import json

import deltalake
import numpy as np
import pandas as pd
import pyarrow as pa

import lakelog

DV = {"delta.enableDeletionVectors": "true"}
COLS = ["id", "p", "x", "s"]


def start_dv_table(path: str, partitioned: bool = True, n: int = 400, files: int = 4) -> pd.DataFrame:
    """A DV table of ``n`` rows in ``files`` appends (partitioned by ``p``: several files per partition)."""
    df = pd.DataFrame({
        "id": np.arange(n, dtype=np.int64),
        "p": np.where(np.arange(n) % 2 == 0, "a", "b"),
        "x": (np.arange(n) * 7 % 101).astype(np.int64),
        "s": [None if i % 13 == 0 else f"s{i}" for i in range(n)],
    })
    for k, rows in enumerate(np.array_split(np.arange(n), files)):
        lakelog.write_table(path, pa.Table.from_pandas(df.iloc[rows], preserve_index=False), mode="append" if k else "overwrite",
                            partition_by=["p"] if partitioned else None, configuration=DV if k == 0 else None)
    return df


def log_entries(path: str, version: int) -> list[dict]:
    from tests.table_files import table_fs

    fs, root = table_fs(path)
    return [json.loads(line) for line in fs.cat_file(f"{root}/_delta_log/{version:020d}.json").splitlines()]


def frame(t: pa.Table | pd.DataFrame) -> pd.DataFrame:
    df = t.to_pandas() if isinstance(t, pa.Table) else t
    return df.sort_values("id").reset_index(drop=True)[COLS]


def peer_rows(path: str, version: int, storage_options: dict | None = None) -> pd.DataFrame:
    """The rows deltalake's SQL engine reads at ``version`` (it applies deletion vectors)."""
    dt = deltalake.DeltaTable(path, version=version, storage_options=storage_options)
    return frame(pa.table(deltalake.QueryBuilder().register("t", dt).execute("select id, p, x, s from t").read_all()))


def assert_same(got: pa.Table | pd.DataFrame, want: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(frame(got), frame(want), check_dtype=False)


def check_all_versions(path: str, expected: dict[int, pd.DataFrame], deltalake_options: dict | None = None) -> None:
    """Every version reads as expected through lakelog (time travel) and deltalake's SQL engine."""
    for version, want in expected.items():
        assert_same(lakelog.read_table(path, version=version), want)
        assert_same(peer_rows(path, version, deltalake_options), want)

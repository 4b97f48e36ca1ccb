"""The change data feed's cost: a merge with the feed on against the same merge with it off, and reading
ten versions of changes against deltalake's ``load_cdf``.

* merge: ``source_rows`` (100k; 1% match existing keys spread over the table, the rest are new) into a
  ``rows``-row table (4M) in 16 files, update all matched, insert the others; the same table with and
  without ``delta.enableChangeDataFeed``; each run on a fresh copy (data hard-linked, log copied).
* changes: ten versions of row-level changes (deletes, updates, merges of 0.1% of the rows each) on the
  feed table, then ``Table.changes(v0, v9)`` against ``DeltaTable.load_cdf(v0, v9).read_all()``.

Medians of ``runs`` interleaved runs (one warm-up each). Run alone: ``python -m benchmarks.change_feed
[--quick]`` (1M rows, 10k source rows).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time

FILES = 16


def _table(path: str, rows: int, feed: bool) -> None:
    import numpy as np
    import pyarrow as pa

    import lakelog

    rng = np.random.default_rng(3)
    per = rows // FILES
    for i in range(FILES):
        ids = np.arange(i * per, (i + 1) * per, dtype=np.int64) * 2
        data = pa.table({"id": ids, "x": rng.random(per), "s": pa.array([f"name-{k % 5000}" for k in range(per)])})
        conf = {"delta.enableChangeDataFeed": "true"} if feed else {}
        lakelog.write_table(path, data, configuration=conf if i == 0 else None)


def _source(rows: int, n: int):
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(5)
    matching = n // 100
    ids = np.concatenate([rng.choice(rows, matching, replace=False) * 2, rng.choice(rows, n - matching, replace=False) * 2 + 1]).astype(np.int64)
    return pa.table({"id": ids, "x": rng.random(n), "s": pa.array([f"src-{k}" for k in range(n)])})


def _copy(src: str, dst: str) -> None:
    """A fresh copy: data files hard-linked (never modified), the log copied."""
    shutil.copytree(src, dst, copy_function=os.link, ignore=shutil.ignore_patterns("_delta_log"))
    shutil.copytree(os.path.join(src, "_delta_log"), os.path.join(dst, "_delta_log"))


def _merge(path: str, source) -> float:
    import lakelog

    t0 = time.perf_counter()
    (lakelog.Table(path).merge(source, "target.id = source.id").when_matched_update_all().when_not_matched_insert_all().execute())
    return time.perf_counter() - t0


def run(quick: bool = False, runs: int = 3) -> list[dict]:
    import deltalake
    import pyarrow as pa

    import lakelog

    rows, source_rows = (1_000_000, 10_000) if quick else (4_000_000, 100_000)
    work = tempfile.mkdtemp(prefix="lakelog-bench-cdf-")
    results = []
    try:
        on, off = os.path.join(work, "on"), os.path.join(work, "off")
        _table(on, rows, True)
        _table(off, rows, False)
        source = _source(rows, source_rows)
        times: dict[str, list[float]] = {"on": [], "off": []}
        for i in range(runs + 1):
            for name, base in (("off", off), ("on", on)):
                dst = os.path.join(work, f"{name}-{i}")
                _copy(base, dst)
                s = _merge(dst, source)
                if i:  # (the first round warms up)
                    times[name].append(s)
                shutil.rmtree(dst)
        m_on, m_off = statistics.median(times["on"]), statistics.median(times["off"])
        results.append({"name": f"merge {source_rows:,} rows into {rows:,} with the change data feed on", "lakelog_s": m_on,
                        "peer": "the same merge with the feed off", "peer_s": m_off, "ratio": m_on / m_off})

        t = lakelog.Table(on)
        first = t.version + 1
        step = max(1, rows // 1000)
        for k in range(10):  # ten versions of changes
            lo = k * step * 2
            if k % 3 == 0:
                t.delete(f"id >= {lo} AND id < {lo + step}")
            elif k % 3 == 1:
                t.update({"x": "x + 1"}, f"id >= {lo} AND id < {lo + step}")
            else:
                src = lakelog.read_table(on, filters=[("id", ">=", lo), ("id", "<", lo + step)])
                t.merge(src, "target.id = source.id").when_matched_update({"s": "'merged'"}).execute()
        last = lakelog.Table(on).version
        ours, theirs = [], []
        for i in range(runs + 1):
            t0 = time.perf_counter()
            n_ours = lakelog.Table(on).changes(first, last).num_rows
            a = time.perf_counter() - t0
            t0 = time.perf_counter()
            n_theirs = pa.table(deltalake.DeltaTable(on).load_cdf(starting_version=first, ending_version=last).read_all()).num_rows
            b = time.perf_counter() - t0
            assert n_ours == n_theirs, (n_ours, n_theirs)
            if i:
                ours.append(a)
                theirs.append(b)
        results.append({"name": f"read 10 versions of changes ({n_ours:,} rows) of a {rows:,}-row table", "lakelog_s": statistics.median(ours),
                        "peer": "deltalake load_cdf", "peer_s": statistics.median(theirs),
                        "ratio": statistics.median(ours) / statistics.median(theirs)})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


if __name__ == "__main__":
    ap = argparse.ArgumentParser(prog="python -m benchmarks.change_feed")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    for r in run(quick=args.quick):
        print(json.dumps(r))
    os._exit(0)  # deltalake's native runtime can abort the interpreter at shutdown

"""Timing shared by the benchmark modules."""

from __future__ import annotations

import os
import platform
import statistics
import time
from typing import Callable


def median_times(fns: list[Callable[[], object]], runs: int, setup: Callable[[], object] | None = None) -> list[float]:
    """Median time of each function; runs are interleaved (a, b, c, a, b, c, ...) after one untimed
    warm-up each, so a noisy spell on the machine hits every contender alike."""
    for fn in fns:
        if setup:
            setup()
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for i, fn in enumerate(fns):
            if setup:
                setup()
            t0 = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def machine(extra: str = "") -> str:
    """The machine the figures were taken on: architecture, cores, memory, OS, Python (and ``extra``)."""
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            mem = f" {int(f.readline().split()[1]) // 1024 // 1024} GiB"
    except OSError:
        pass
    return f"{platform.machine()}, {os.cpu_count()} cores,{mem} {platform.system()}, Python {platform.python_version()}{extra}"

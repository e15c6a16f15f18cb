"""The timer the benchmarks share: the median wall time of a callable after one warm-up."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def timed(fn: Callable[[], object], repeats: int) -> float:
    """Median seconds of `repeats` calls of `fn`, after one uncounted warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def timings(fn: Callable[[], object], repeats: int) -> list[float]:
    """Seconds of each of `repeats` calls of `fn`, after one uncounted warm-up call."""
    fn()
    found = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        found.append(time.perf_counter() - started)
    return found


def spread(times: list[float], digits: int = 3) -> str:
    """`median [min–max]` of the times."""
    return (
        f"{statistics.median(times):.{digits}f} [{min(times):.{digits}f}–{max(times):.{digits}f}]"
    )

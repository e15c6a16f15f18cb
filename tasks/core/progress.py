"""Logging set-up and progress bars that also log throughput when the loop ends."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TextIO, TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")
# where `track` draws its bar: stderr, unless a stage console (tasks/core/console.py, which
# holds the terminal while stdout and stderr go to the stage's log) says where (None: no
# bar). A hook rather than an import, so a stage's code closure never holds the console.
_bar_streams: list[Callable[[], TextIO | None]] = []


def draw_bars_with(stream: Callable[[], TextIO | None]) -> None:
    _bar_streams.append(stream)


_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(level: str | None = None) -> None:
    """Plain, timestamped logs on stderr; PAPERLINE_LOG_LEVEL overrides the level."""
    level = level or os.environ.get("PAPERLINE_LOG_LEVEL", "INFO")
    root = logging.getLogger()
    if not any(getattr(h, "_paperline", False) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(_FORMAT, datefmt="%H:%M:%S"))
        handler._paperline = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    root.setLevel(level.upper())
    for chatty in ("httpx", "httpcore", "urllib3", "filelock", "asyncio"):
        logging.getLogger(chatty).setLevel(logging.WARNING)


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(name)


def track(
    items: Iterable[T],
    description: str,
    *,
    total: int | None = None,
    unit: str = "it",
    logger: logging.Logger | None = None,
) -> Iterator[T]:
    """Iterate with a progress bar (shown on terminals) and log `N unit in S s (R unit/s)`."""
    logger = logger or get_logger("paperline")
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    started = time.perf_counter()
    count = 0
    # under a stage console the bar draws on the terminal (never into the stage's log)
    terminal = _bar_streams[-1]() if _bar_streams else sys.stderr
    with tqdm(
        items,
        desc=description,
        total=total,
        unit=unit,
        file=terminal,
        disable=None if terminal else True,
        leave=False,
    ) as bar:
        for item in bar:
            count += 1
            yield item
    log_throughput(logger, description, count, unit, time.perf_counter() - started)


def log_throughput(
    logger: logging.Logger, description: str, count: int, unit: str, seconds: float
) -> None:
    rate = count / seconds if seconds > 0 else float("inf")
    logger.info("%s: %d %s in %.2f s (%.1f %s/s)", description, count, unit, seconds, rate, unit)

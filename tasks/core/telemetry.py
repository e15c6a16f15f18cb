"""Run-dependent figures (seconds, cache hits, network round trips) kept out of DVC outputs.

A tracked output must depend on the stage's inputs only, or a DVC run and a Prefect run (or
a cold and a warm cache) write different bytes and dvc.lock changes for nothing. Such
figures go to `.paperline/telemetry/<stage>.json`, one file per stage, replaced each run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tasks.core.io import write_file
from tasks.core.paths import state_dir


def record_telemetry(stage: str, figures: dict[str, Any], root: Path | None = None) -> Path:
    path = state_dir(root) / "telemetry" / f"{stage}.json"
    write_file(path, figures)
    return path

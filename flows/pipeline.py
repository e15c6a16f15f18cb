"""The whole pipeline: every dvc.yaml stage in topological order."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.stages import run_stages
from tasks.core.dvc_stages import pipeline_stages


@flow(name="pipeline", log_prints=True)
def pipeline(root: str | None = None) -> dict[str, bool]:
    """Reproduce every stage through DVC; returns which stages ran."""
    folder = Path(root) if root else None
    return run_stages(pipeline_stages(folder), folder)

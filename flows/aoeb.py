"""The aoeb area: AOEB task assembly, the contrastive embedder, every encoder evaluated."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.stages import run_stages
from tasks.core.dvc_stages import area_stages


@flow(name="aoeb", log_prints=True)
def aoeb(root: str | None = None) -> dict[str, bool]:
    folder = Path(root) if root else None
    return run_stages(area_stages("aoeb", folder), folder)

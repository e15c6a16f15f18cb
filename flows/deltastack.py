"""The deltastack area: the Ray Tune study of DeltaStack vs DeltaNet on formal languages."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.stages import run_stages
from tasks.core.dvc_stages import area_stages


@flow(name="deltastack", log_prints=True)
def deltastack(root: str | None = None) -> dict[str, bool]:
    folder = Path(root) if root else None
    return run_stages(area_stages("deltastack", folder), folder)

"""The cmipref area: music pairs generated and pseudo-labelled, the CMI reward model trained."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.stages import run_stages
from tasks.core.dvc_stages import area_stages


@flow(name="cmipref", log_prints=True)
def cmipref(root: str | None = None) -> dict[str, bool]:
    folder = Path(root) if root else None
    return run_stages(area_stages("cmipref", folder), folder)

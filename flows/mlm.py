"""The mlm area: the mmBERT encoder's three phases and their evaluation (and any stale upstream)."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.stages import run_stages
from tasks.core.dvc_stages import area_stages


@flow(name="mlm", log_prints=True)
def mlm(root: str | None = None) -> dict[str, bool]:
    folder = Path(root) if root else None
    return run_stages(area_stages("mlm", folder), folder)

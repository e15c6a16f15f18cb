"""The corpus area: mmBERT's phased multilingual corpus (and any stale upstream)."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.stages import run_stages
from tasks.core.dvc_stages import area_stages


@flow(name="corpus", log_prints=True)
def corpus(root: str | None = None) -> dict[str, bool]:
    folder = Path(root) if root else None
    return run_stages(area_stages("corpus", folder), folder)

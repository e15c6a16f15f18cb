"""The scam area: Scam2Prompt blocklists, the safe crawl, prompt synthesis and the code audit."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.stages import run_stages
from tasks.core.dvc_stages import area_stages


@flow(name="scam", log_prints=True)
def scam(root: str | None = None) -> dict[str, bool]:
    folder = Path(root) if root else None
    return run_stages(area_stages("scam", folder), folder)

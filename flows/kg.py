"""The kg area: MultiHal's Wikidata slice, QA linking, path mining and judging."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.stages import run_stages
from tasks.core.dvc_stages import area_stages


@flow(name="kg", log_prints=True)
def kg(root: str | None = None) -> dict[str, bool]:
    folder = Path(root) if root else None
    return run_stages(area_stages("kg", folder), folder)

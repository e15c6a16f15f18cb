"""Flows made from dvc.yaml: `pipeline` runs every stage, and each area with stages there gets
a flow named after it, so a new area needs no flow code.

Prefect (`prefect deploy`, workers, `flow.serve`) loads `flows/dvc_flows.py:<name>` by
importing this file and reading the attribute; the module `__getattr__` answers for areas.
"""

from __future__ import annotations

import functools
from pathlib import Path

from prefect import Flow, flow

from flows.stages import run_stages
from tasks.core.dvc_stages import area_stages, pipeline_areas, pipeline_stages
from tasks.core.paths import repo_root


@flow(name="pipeline", log_prints=True)
def pipeline(root: str | None = None) -> dict[str, bool]:
    """Reproduce every stage through DVC; returns which stages ran."""
    folder = Path(root) if root else None
    return run_stages(pipeline_stages(folder), folder)


@functools.cache
def _areas(root: Path) -> tuple[str, ...]:
    return tuple(pipeline_areas(root))


def dvc_areas(root: Path | None = None) -> list[str]:
    """`pipeline_areas`, read once per root: Prefect looks flows up by attribute."""
    return list(_areas((root or repo_root()).resolve()))


def flow_names(root: Path | None = None) -> list[str]:
    return ["pipeline", *dvc_areas(root)]


@functools.cache
def area_flow(area: str) -> Flow:
    """The flow for one area: its stages plus the upstream stages they need, in run order."""

    def run_area(root: str | None = None) -> dict[str, bool]:
        folder = Path(root) if root else None
        return run_stages(area_stages(area, folder), folder)

    # Prefect records a flow's entrypoint as `<file>:<function qualname>` (served
    # deployments run it from there), so the function must carry the area's name.
    run_area.__name__ = run_area.__qualname__ = area
    run_area.__doc__ = f"Reproduce the {area} area's stages (and any stale upstream) through DVC."
    return Flow(run_area, name=area, log_prints=True)


def __getattr__(name: str) -> Flow:
    # dunder probes (copy, pickle, inspect) must not open the DVC repository
    if not name.startswith("_") and name in dvc_areas():
        return area_flow(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

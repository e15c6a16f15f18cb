"""dvc.yaml seen through DVC's own API: the stage DAG, staleness, reproducing one stage.

DVC stage names allow no dots, so paperline's `corpus.ingest` is DVC's `corpus-ingest`.
DVC takes a repository-wide lock: never run two of these at once in one workspace.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tasks.core.paths import repo_root
from tasks.core.stage import dvc_name, paperline_name


@dataclass(frozen=True)
class StageInfo:
    name: str  # paperline's dotted name
    dvc_name: str
    deps: tuple[str, ...]
    outs: tuple[str, ...]
    metrics: tuple[str, ...]

    @property
    def area(self) -> str:
        return self.name.split(".", 1)[0]


@contextlib.contextmanager
def _repo(root: Path | None = None) -> Iterator[object]:
    from dvc.repo import Repo

    root = (root or repo_root()).resolve()
    # DVC resolves outputs against the working directory, so work from the repo root.
    with contextlib.chdir(root), Repo(str(root)) as repo:
        yield repo


@contextlib.contextmanager
def _stage_env() -> Iterator[None]:
    """Stage commands call `paperline`: put this interpreter's scripts folder first on PATH."""
    scripts = str(Path(sys.executable).parent)
    before = os.environ.get("PATH", "")
    os.environ["PATH"] = scripts + os.pathsep + before
    try:
        yield
    finally:
        os.environ["PATH"] = before


def _info(stage: object, root: Path) -> StageInfo:
    def rel(items: object) -> tuple[str, ...]:
        return tuple(os.path.relpath(item.fs_path, root) for item in items)  # type: ignore[attr-defined]

    metrics = [out for out in stage.outs if out.metric]  # type: ignore[attr-defined]
    return StageInfo(
        name=paperline_name(stage.name),  # type: ignore[attr-defined]
        dvc_name=stage.name,  # type: ignore[attr-defined]
        deps=rel(stage.deps),  # type: ignore[attr-defined]
        outs=rel(stage.outs),  # type: ignore[attr-defined]
        metrics=rel(metrics),
    )


def pipeline_stages(root: Path | None = None) -> list[StageInfo]:
    """Every dvc.yaml stage in an order DVC would run them (dependencies first)."""
    from dvc.repo.reproduce import get_active_graph, plan_repro
    from dvc.stage import PipelineStage

    root = (root or repo_root()).resolve()
    with _repo(root) as repo:
        order = plan_repro(get_active_graph(repo.index.graph))  # type: ignore[attr-defined]
        return [_info(s, root) for s in order if isinstance(s, PipelineStage)]


def pipeline_areas(root: Path | None = None) -> list[str]:
    """The areas that have stages in dvc.yaml, in pipeline order."""
    return list(dict.fromkeys(stage.area for stage in pipeline_stages(root)))


def area_stages(area: str, root: Path | None = None) -> list[StageInfo]:
    """An area's stages plus the upstream stages they need, in run order."""
    stages = pipeline_stages(root)
    producers = {out: s for s in stages for out in s.outs}
    wanted = {s.name for s in stages if s.area == area}
    frontier = [s for s in stages if s.name in wanted]
    while frontier:
        stage = frontier.pop()
        for dep in stage.deps:
            upstream = producers.get(dep) or next(
                (p for out, p in producers.items() if dep.startswith(out + os.sep)), None
            )
            if upstream and upstream.name not in wanted:
                wanted.add(upstream.name)
                frontier.append(upstream)
    return [s for s in stages if s.name in wanted]


def reproduce_stage(name: str, root: Path | None = None, force: bool = False) -> bool:
    """Run one stage through DVC if it is stale (or `force`); True when it ran."""
    from tasks.core.dvc_lockfile import fast_lock_updates

    with _stage_env(), fast_lock_updates(), _repo(root) as repo:
        ran = repo.reproduce(targets=[dvc_name(name)], single_item=True, force=force)  # type: ignore[attr-defined]
    return bool(ran)


def stale_stages(root: Path | None = None) -> dict[str, list[str]]:
    """Stages whose deps, params, outs or command changed since dvc.lock, with the reasons."""
    with _repo(root) as repo:
        status = repo.status()  # type: ignore[attr-defined]
    stale: dict[str, list[str]] = {}
    for target, changes in status.items():
        reasons: list[str] = []
        for change in changes:
            if isinstance(change, str):
                reasons.append(change)
            else:
                for kind, items in change.items():
                    reasons += _describe_change(kind.removeprefix("changed "), items)
        stale[paperline_name(target.split(":")[-1])] = reasons
    return stale


def _describe_change(label: str, items: object) -> list[str]:
    if not isinstance(items, dict):
        return [f"{label}: {items}"]
    reasons = []
    for path, what in items.items():
        if isinstance(what, dict):  # params: {section: state}
            reasons += [f"{label}: {path}:{key} {state}" for key, state in what.items()]
        else:
            reasons.append(f"{label}: {path} {what}")
    return reasons

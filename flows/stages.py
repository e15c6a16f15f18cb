"""A Prefect task per DVC stage: reproduce it, then publish its metrics as an artifact."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact

from tasks.core.dvc_stages import StageInfo, reproduce_stage
from tasks.core.params import load_params
from tasks.core.paths import repo_root
from tasks.core.repro import quiet_dvc, shared_ray


def _flatten(prefix: str, value: Any) -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        return [row for key, item in value.items() for row in _flatten(f"{prefix}{key}.", item)]
    return [(prefix.rstrip("."), value)]


def metrics_markdown(stage: StageInfo, ran: bool, root: Path) -> str:
    lines = [f"# {stage.name}", "", "Ran." if ran else "Up to date: DVC skipped it.", ""]
    for metrics_file in stage.metrics:
        path = root / metrics_file
        if not path.exists():
            continue
        lines += [f"## {metrics_file}", "", "| metric | value |", "|---|---|"]
        for key, value in _flatten("", json.loads(path.read_text(encoding="utf-8"))):
            lines.append(f"| {key} | {value} |")
        lines.append("")
    outs = ", ".join(f"`{out}`" for out in stage.outs)
    return "\n".join([*lines, f"Outputs: {outs}", ""])


def artifact_key(stage: StageInfo) -> str:
    """The stage's artifact key: Prefect allows lowercase letters, digits and dashes only."""
    return re.sub(r"[^a-z0-9-]", "-", stage.name.lower())


def _reproduce(stage: StageInfo, root: str) -> bool:
    ran = reproduce_stage(stage.name, Path(root))
    get_run_logger().info("%s: %s", stage.name, "reproduced" if ran else "up to date")
    create_markdown_artifact(
        markdown=metrics_markdown(stage, ran, Path(root)),
        key=artifact_key(stage),
        description=f"metrics of DVC stage {stage.dvc_name}",
    )
    return ran


def run_stages(stages: list[StageInfo], root: Path | None = None) -> dict[str, bool]:
    """Run the stages one at a time (DVC locks the repo) as tasks named after them."""
    root = root or repo_root()
    runtime = load_params(root / "params.yaml").runtime
    results = {}
    with quiet_dvc(), shared_ray(root, runtime.ray):  # DVC's chatter off, one Ray for all
        for stage in stages:
            stage_task = task(
                _reproduce,
                name=stage.name,
                task_run_name=stage.name,
                retries=runtime.prefect.retries,
                retry_delay_seconds=runtime.prefect.retry_delay_seconds,
            )
            results[stage.name] = stage_task(stage, str(root))
    return results

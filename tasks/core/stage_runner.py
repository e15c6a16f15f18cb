"""The stage runner: `paperline stage NAME` (what dvc.yaml calls) finds the declared STAGE,
validates its params, checks its inputs, connects Ray where it asks, runs it with a
`StageContext` and commits every output atomically (tasks/core/io.py), then runs what the
stage deferred until its outputs were committed (e.g. a registration).

Every stage's DVC deps list this file and io.py by name (code_deps.RUNNER) rather than
through the stage module's imports: editing the runner or the atomic writer makes every
stage stale, editing what only presents a stage (the console) makes none.
"""

from __future__ import annotations

import time
from pathlib import Path

from tasks.core import console
from tasks.core.declared_params import covers, declared_view
from tasks.core.errors import InputError, WorkerFailure
from tasks.core.io import commit_outputs
from tasks.core.params import load_params
from tasks.core.paths import repo_root
from tasks.core.progress import get_logger
from tasks.core.ray_runtime import init_ray
from tasks.core.stage import Stage, StageContext
from tasks.core.stage_index import find_stage

log = get_logger("paperline.stage")


def run_stage(name: str, root: Path | None = None) -> dict[str, Path]:
    """Validate params, check inputs, run the stage, commit its outputs; returns their paths."""
    root = root or repo_root()
    stage = find_stage(name)
    all_params = load_params(root / "params.yaml")
    params = declared_view(
        stage.select_params(all_params), stage.params_key, stage.declared_params, stage.name
    )
    inputs = {role: root / path for role, path in stage.inputs.items()}
    for role, path in inputs.items():
        if not path.exists():
            raise InputError(f"{stage.name}: input '{role}' ({path}) is missing; run `dvc repro`")
    if stage.uses_ray:
        init_ray(all_params.runtime.ray)
    started = time.perf_counter()
    llm = None
    if any(covers("llm", key) for key in stage.declared_params):
        llm = declared_view(all_params.llm, "llm", stage.declared_params, stage.name)
    ctx = StageContext.at(root, all_params.runtime, llm, stage.inputs)
    try:
        produced = stage.run(params, inputs, ctx)
    except WorkerFailure as failure:
        raise WorkerFailure(f"{stage.name}: {failure}") from None
    if set(produced) != set(stage.outputs):
        raise RuntimeError(
            f"{stage.name} returned {sorted(produced)}, declared {sorted(stage.outputs)}"
        )
    targets = {root / stage.outputs[role]: value for role, value in produced.items()}
    commit_outputs(targets)
    for action in ctx.pending:
        action()
    log.info("%s: done in %.1f s", stage.name, time.perf_counter() - started)
    return {role: root / path for role, path in stage.outputs.items()}


def headline_metric(stage: Stage, root: Path) -> str | None:
    """The stage's headline (`<metrics file>:<dotted key>`) as `key=value`, for its end line."""
    if not stage.headline:
        return None
    path, _, key = stage.headline.partition(":")
    return console.headline(root / path, key)

"""A stage: `run(params, inputs, ctx) -> outputs` plus where its inputs and outputs live.

`paperline stage NAME` (what dvc.yaml calls) resolves the declared paths, validates params,
runs the function with a `StageContext` and commits every output atomically; tests call
`run` directly, with `StageContext.at(tmp_path)`. Stage code never looks up the repository
root: everything it reads or writes outside its inputs and outputs is under `ctx.root`.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tasks.core import console
from tasks.core.declared_params import covers, declared_view
from tasks.core.dvc_stages import paperline_name
from tasks.core.errors import InputError, UserError, WorkerFailure
from tasks.core.io import commit_outputs
from tasks.core.params import Params, RuntimeParams, load_params
from tasks.core.paths import repo_root, state_dir
from tasks.core.progress import get_logger
from tasks.core.ray_runtime import init_ray

log = get_logger("paperline.stage")


@dataclass(frozen=True)
class StageContext:
    """Where a stage runs: the root it reads and writes, the runtime settings (MLflow
    store, Ray, services) and scratch folders under the root's `.paperline/`."""

    root: Path
    runtime: RuntimeParams
    # the core LLM service's settings (`llm`) as the stage declared them; None: not declared
    llm: Any = None
    pending: list[Callable[[], None]] = field(default_factory=list, repr=False, compare=False)

    @classmethod
    def at(cls, root: Path, runtime: RuntimeParams | None = None, llm: Any = None) -> StageContext:
        return cls(Path(root).resolve(), runtime or RuntimeParams(), llm)

    def scratch(self, *parts: str) -> Path:
        """`.paperline/<parts…>` under the root (created): checkpoints, caches, resumable work."""
        path = state_dir(self.root).joinpath(*parts)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def after_commit(self, action: Callable[[], None]) -> None:
        """Run `action` once the stage's outputs are committed, e.g. registering a model: a
        stage that fails before that (a full disk, a bad output) registers nothing."""
        self.pending.append(action)


@dataclass(frozen=True)
class Stage:
    """Declaration of one pipeline stage (its dvc.yaml entry must agree; a test checks)."""

    name: str  # "<area>.<stage>", e.g. "corpus.ingest"
    run: Callable[[Any, Mapping[str, Path], StageContext], Mapping[str, Any]]
    params_key: str  # dotted path of the section `run` receives
    inputs: Mapping[str, str]  # role -> repo-relative path
    outputs: Mapping[str, str]  # role -> repo-relative path
    # paths DVC also watches that `run` does not read as inputs (e.g. the DVC folder of a
    # model the stage loads from the registry); its code deps are derived (code_deps)
    data_deps: tuple[str, ...] = ()
    uses_ray: bool = False  # the door connects Ray (local or $RAY_ADDRESS) before `run`
    # the params keys `run` may read (DVC tracks exactly these); default: the whole section
    params: tuple[str, ...] = ()
    # "<metrics file>:<dotted key>", e.g. "models/kg/metrics.json:test.f1": the number the
    # console shows when the stage ends
    headline: str | None = None

    @property
    def declared_params(self) -> tuple[str, ...]:
        return self.params or (self.params_key,)

    def select_params(self, params: Params) -> Any:
        section: Any = params
        for part in self.params_key.split("."):
            section = getattr(section, part)
        return section

    def headline_metric(self, root: Path) -> str | None:
        if not self.headline:
            return None
        path, _, key = self.headline.partition(":")
        return console.headline(root / path, key)


def find_stage(name: str) -> Stage:
    """`corpus.ingest` (or DVC's `corpus-ingest`) → the STAGE in tasks/corpus/ingest.py."""
    dotted = paperline_name(name)
    area, _, stage = dotted.partition(".")
    if not area.isidentifier() or not stage.isidentifier():
        raise UserError(f"stage '{name}': expected <area>.<stage>, e.g. corpus.ingest")
    try:
        module = importlib.import_module(f"tasks.{area}.{stage}")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("tasks."):
            raise UserError(f"stage '{name}': no such stage; see `dvc stage list`") from None
        raise
    declared = getattr(module, "STAGE", None)
    if not isinstance(declared, Stage):
        raise UserError(f"stage '{name}': tasks/{area}/{stage}.py declares no STAGE")
    return declared


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
    ctx = StageContext.at(root, all_params.runtime, llm)
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

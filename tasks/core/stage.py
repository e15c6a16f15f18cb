"""A stage's declaration: `run(params, inputs, ctx) -> outputs` plus where its inputs and
outputs live, and the `StageContext` it runs in.

This module is what a stage module imports to declare itself, and nothing more: the
runner (`tasks/core/stage_runner.py`: find, validate, run, commit) is one deliberate DVC
dep of every stage, so the plumbing it uses (the console, the DVC helpers, Ray start-up)
is not in any stage's import closure. Tests call `run` directly, with
`StageContext.at(tmp_path)`. Stage code never looks up the repository root: everything it
reads or writes outside its inputs and outputs is under `ctx.root`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tasks.core.params import Params, RuntimeParams
from tasks.core.paths import state_dir


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

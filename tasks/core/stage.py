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
from typing import Any, Literal

from tasks.core.params import Params, RuntimeParams
from tasks.core.paths import state_dir


def dvc_name(stage: str) -> str:
    """`corpus.ingest` → `corpus-ingest` (DVC stage names allow no dots)."""
    return stage.replace(".", "-", 1)


def paperline_name(stage: str) -> str:
    """`corpus-ingest` → `corpus.ingest` (the area, then the stage)."""
    return stage.replace("-", ".", 1) if "." not in stage else stage


@dataclass(frozen=True)
class StageContext:
    """Where a stage runs: the root it reads and writes, the runtime settings (MLflow
    store, Ray, services) and scratch folders under the root's `.paperline/`."""

    root: Path
    runtime: RuntimeParams
    # the core LLM service's settings (`llm`) as the stage declared them; None: not declared
    llm: Any = None
    # the stage's declared inputs, role → repo-relative path: a training job's default
    # sources and lineage (tasks/core/training.py)
    inputs: Mapping[str, str] = field(default_factory=dict)
    pending: list[Callable[[], None]] = field(default_factory=list, repr=False, compare=False)

    @classmethod
    def at(
        cls,
        root: Path,
        runtime: RuntimeParams | None = None,
        llm: Any = None,
        inputs: Mapping[str, str] | None = None,
    ) -> StageContext:
        return cls(Path(root).resolve(), runtime or RuntimeParams(), llm, dict(inputs or {}))

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
class Output:
    """One output and how DVC tracks it. A bare path in `Stage.outputs` is `Output(path)`: an
    `outs` entry in DVC's cache. The constructors below are the other kinds dvc.yaml has."""

    path: str
    kind: Literal["outs", "metrics", "plots"] = "outs"
    cache: bool = True  # False: committed to git, not to DVC's cache
    plot: Mapping[str, Any] = field(default_factory=dict)  # x, y, title, template …
    claims: bool = False  # the paper's claims file, which report.build reads

    @classmethod
    def in_git(cls, path: str) -> Output:
        """A small output kept in git (a model card, a table a reviewer reads in the diff)."""
        return cls(path, cache=False)

    @classmethod
    def metrics(cls, path: str) -> Output:
        """A JSON of numbers: `dvc metrics show/diff`, kept in git."""
        return cls(path, "metrics", cache=False)

    @classmethod
    def plots(cls, path: str, **plot: Any) -> Output:
        """A CSV (or folder of them) or an image for `dvc plots`, kept in git; `plot` holds
        DVC's plot properties (x, y, title, template, x_label, y_label)."""
        return cls(path, "plots", cache=False, plot=plot)

    @classmethod
    def claims_json(cls, path: str) -> Output:
        """The area's claims (tasks.core.evidence.claims_value), a metrics file the report
        finds by this declaration: write the path as a literal, the report reads it from
        the source without importing the area."""
        return cls(path, "metrics", cache=False, claims=True)


@dataclass(frozen=True)
class Stage:
    """Declaration of one pipeline stage: `paperline dvc sync` writes its whole dvc.yaml
    entry from it (a test fails when they disagree)."""

    name: str  # "<area>.<stage>", e.g. "corpus.ingest"
    run: Callable[[Any, Mapping[str, Path], StageContext], Mapping[str, Any]]
    params_key: str  # dotted path of the section `run` receives
    inputs: Mapping[str, str]  # role -> repo-relative path
    # role -> repo-relative path or `Output`; after construction role -> path, with the
    # declared kinds in `tracked`
    outputs: Mapping[str, str | Output]
    # paths DVC also watches that `run` does not read as inputs (e.g. the DVC folder of a
    # model the stage loads from the registry); its code deps are derived (code_deps)
    data_deps: tuple[str, ...] = ()
    uses_ray: bool = False  # the door connects Ray (local or $RAY_ADDRESS) before `run`
    # the params keys `run` may read (DVC tracks exactly these); default: the whole section
    params: tuple[str, ...] = ()
    # "<metrics file>:<dotted key>", e.g. "models/kg/metrics.json:test.f1": the number the
    # console shows when the stage ends
    headline: str | None = None
    # dvc.yaml top-level plots this stage's outputs feed: plot id -> DVC's plot properties
    # (a `y` mapping files to columns draws several files, or several stages, on one plot)
    top_plots: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # a figure inside one of the outputs that the report shows in the area's section (a
    # literal path, read from the source like `Output.claims_json`)
    report_figure: str | None = None
    tracked: Mapping[str, Output] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        tracked = {
            role: out if isinstance(out, Output) else Output(out)
            for role, out in self.outputs.items()
        }
        object.__setattr__(self, "tracked", tracked)
        object.__setattr__(self, "outputs", {role: out.path for role, out in tracked.items()})

    @property
    def declared_params(self) -> tuple[str, ...]:
        return self.params or (self.params_key,)

    def select_params(self, params: Params) -> Any:
        section: Any = params
        for part in self.params_key.split("."):
            section = getattr(section, part)
        return section

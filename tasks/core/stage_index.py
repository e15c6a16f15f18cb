"""Where the stages are: every `tasks/<area>/<stage>.py` that assigns a top-level `STAGE`.

The declarations are found by reading the source (no area is imported to list them), so
core finds a new area's stages with nothing to register, and the report can learn which
claims files exist without importing the areas that write them (`declared_literals`).
"""

from __future__ import annotations

import ast
import importlib
from functools import cache
from pathlib import Path

import tasks
from tasks.core.errors import UserError
from tasks.core.stage import Stage, paperline_name


def package_root() -> Path:
    """The folder holding the `tasks` package in use (a repository, or a copy of one)."""
    return Path(tasks.__file__).resolve().parent.parent


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


def stage_names(root: Path | None = None) -> list[str]:
    """`<area>.<stage>` of every declared stage, sorted by area then stage."""
    return sorted(_declarations(root or package_root()))


def declared_literals(attribute: str, root: Path | None = None) -> dict[str, str]:
    """Stage name → the string literal its STAGE gives as `attribute`: a keyword of
    `Stage(...)` (`report_figure`) or an `Output` constructor (`claims_json`)."""
    found = {}
    for name, call in _declarations(root or package_root()).items():
        for node in ast.walk(call):
            value = None
            if isinstance(node, ast.Call) and _called(node) == attribute and node.args:
                value = node.args[0]
            elif node is call:
                value = next((k.value for k in call.keywords if k.arg == attribute), None)
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found[name] = value.value
    return found


def _called(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


@cache
def _declarations(root: Path) -> dict[str, ast.Call]:
    """Stage name → the `Stage(...)` call assigned to `STAGE` in its module."""
    found = {}
    for path in sorted((root / "tasks").glob("*/*.py")):
        if path.parent.name == "core":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            declares = any(isinstance(t, ast.Name) and t.id == "STAGE" for t in targets)
            if declares and isinstance(node.value, ast.Call):
                found[f"{path.parent.name}.{path.stem}"] = node.value
    return found

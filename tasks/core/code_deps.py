"""A stage's code dependencies, derived from its imports rather than typed by hand.

The code a stage runs is its own module plus every `tasks.*` module it imports,
transitively, imports inside functions included (they run when the stage does), plus the
runner every stage goes through (`RUNNER`). DVC tracks exactly those files, so editing any
of them makes the stage stale. `paperline dvc
sync` writes them, after the stage's data inputs, into each stage's `deps` in dvc.yaml; a
test fails when dvc.yaml and the declarations disagree.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PACKAGE = "tasks"
# every stage runs through these, so each is a dep of every stage by name, not through the
# stage module's imports: the runner itself, the atomic writer that commits the outputs,
# and the params view a stage is handed (their own imports present or connect, e.g. the
# console and Ray start-up, and change no output)
RUNNER = ("tasks/core/declared_params.py", "tasks/core/io.py", "tasks/core/stage_runner.py")


def module_file(root: Path, module: str) -> Path | None:
    """`tasks.core.io` → tasks/core/io.py (or the package's __init__.py); None if not ours."""
    if module != PACKAGE and not module.startswith(PACKAGE + "."):
        return None
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def imports(path: Path, root: Path) -> tuple[str, ...]:
    """Dotted names of the project modules one file imports (anywhere in it)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = ".".join(path.relative_to(root).with_suffix("").parts)
    if path.name == "__init__.py":
        package = package.removesuffix(".__init__")
    else:
        package = package.rpartition(".")[0]
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x / from .y import z
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names.append(base)
            names += [f"{base}.{alias.name}" for alias in node.names]  # `from pkg import mod`
    return tuple(n for n in names if n == PACKAGE or n.startswith(PACKAGE + "."))


def _runs_code(path: Path) -> bool:
    """An __init__.py that holds more than a docstring."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    return any(
        not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)) for node in body
    )


def import_closure(module: str, root: Path) -> list[str]:
    """Repo-relative paths of `module` and every project module it imports, transitively,
    plus the package __init__ files that run code on the way; sorted."""
    root = root.resolve()
    seen: set[Path] = set()
    pending = [module]
    while pending:
        name = pending.pop()
        parts = name.split(".")
        # importing a.b.c runs a/__init__.py and a/b/__init__.py first
        for depth in range(1, len(parts) + 1):
            path = module_file(root, ".".join(parts[:depth]))
            if path is None or path in seen:
                continue
            if path.name == "__init__.py" and depth < len(parts) and not _runs_code(path):
                continue
            seen.add(path)
            pending += imports(path, root)
    return sorted(
        str(p.relative_to(root)) for p in seen if p.name != "__init__.py" or _runs_code(p)
    )


def stage_code(stage_name: str, root: Path) -> list[str]:
    """`corpus.ingest` → the code files DVC should track for that stage, and the package
    data beside them (`package_data`)."""
    area, _, stage = stage_name.partition(".")
    modules = import_closure(f"{PACKAGE}.{area}.{stage}", root)
    folders = sorted({str(Path(module).parent) for module in modules})
    return sorted({*modules, *(item for f in folders for item in package_data(root / f, root))})


def package_data(folder: Path, root: Path) -> list[str]:
    """What a package ships besides code (templates, prompts): its other files and its
    subfolders that hold no Python, repo-relative."""
    found = []
    for item in folder.iterdir():
        if item.name == "__pycache__" or item.suffix in (".py", ".pyc"):
            continue
        if item.is_file() or not any(item.rglob("*.py")):
            found.append(str(item.relative_to(root)))
    return found


def declared_deps(stage_name: str, root: Path) -> list[str]:
    """A stage's dvc.yaml deps: its data inputs, other watched data, then its code."""
    from tasks.core.stage_index import find_stage

    stage = find_stage(stage_name)
    data = [*stage.inputs.values(), *stage.data_deps]
    code = sorted({*stage_code(stage.name, root), *RUNNER})
    return [*dict.fromkeys(data), *code]

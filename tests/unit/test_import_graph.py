"""Boundaries: tasks/core imports no area, and no area imports another; what two areas
share lives in core (imports inside functions count: they run too)."""

from tasks.core.code_deps import imports
from tests.conftest import REPO


def area_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "tasks" else None


def test_no_module_imports_across_areas():
    crossings = []
    for path in sorted((REPO / "tasks").rglob("*.py")):
        own = path.relative_to(REPO).parts[1]
        for module in imports(path, REPO):
            other = area_of(module)
            if other and other not in (own, "core"):
                crossings.append(f"{path.relative_to(REPO)} imports {module}")
            if own == "core" and other and other != "core":
                crossings.append(f"{path.relative_to(REPO)} (core) imports {module}")
    assert not crossings, "\n".join(crossings)

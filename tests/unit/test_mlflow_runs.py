"""MLflow runs are opened one way: `tasks.core.tracking.create_run` (or `start_run` on top
of it), which carries the lineage tags, the parent and the params; stage code that calls
MLflow's own run constructors, or Ray's MLflow callback, skips them."""

import ast
from pathlib import Path

from tests.conftest import REPO

TRACKING = "tasks/core/tracking.py"


def run_openers(path: Path) -> list[str]:
    """`client.create_run(...)`, `mlflow.start_run(...)` without a `run_id` (re-entering a
    run that exists is fine) and `MLflowLoggerCallback(...)`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        owner = func.value if isinstance(func, ast.Attribute) else None
        raw_create = name == "create_run" and not (
            isinstance(owner, ast.Name) and owner.id == "tracking"
        )
        fresh_start = name == "start_run" and (
            isinstance(owner, ast.Name)
            and owner.id == "mlflow"
            and not any(k.arg == "run_id" for k in node.keywords)
        )
        if raw_create or fresh_start or name == "MLflowLoggerCallback":
            found.append(f"{path.name}:{node.lineno}: {name}(...)")
    return found


def test_runs_are_opened_only_through_core_tracking():
    modules = [p for p in (REPO / "tasks").rglob("*.py") if str(p.relative_to(REPO)) != TRACKING]
    offenders = [call for path in modules for call in run_openers(path)]
    assert not offenders, "open runs with tasks.core.tracking.create_run:\n" + "\n".join(offenders)


def test_the_scan_sees_a_raw_run(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "client.create_run(experiment)\ntracking.create_run('x', params, run_name='y')\n"
        "with mlflow.start_run(run_name='a'):\n    pass\n"
        "with mlflow.start_run(run_id=run_id):\n    pass\n"
        "callbacks = [MLflowLoggerCallback(tracking_uri=uri)]\n"
    )
    assert [call.split(": ")[1] for call in run_openers(sample)] == [
        "create_run(...)",
        "start_run(...)",
        "MLflowLoggerCallback(...)",
    ]

"""docs/adding-an-area.md, done in a copy: a toy area is its folder, its params.yaml section
and `paperline dvc sync`; its stages then run through DVC and appear in dvc.yaml, the
Prefect flows and deployments, and the report, and no other file had to change."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import copy_repo, dvc

TOY = Path(__file__).parent / "toy_area"
TOY_PARAMS = "\ntoy:\n  rows: 400\n  slope: 0.5\n  noise: 1.0\n  seed: 0\n"


def in_copy(copy: Path, code: str) -> subprocess.CompletedProcess:
    """Python in the copy, importing the copy's `tasks` (where the toy area lives)."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=copy,
        env=copy_env(copy),
        capture_output=True,
        text=True,
        timeout=600,
    )


def copy_env(copy: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(copy), "PAPERLINE_ROOT": str(copy)}


def changed_files(copy: Path) -> set[str]:
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=copy,
        capture_output=True,
        text=True,
        check=True,
    )
    return {line[3:] for line in status.stdout.splitlines()}


def test_a_toy_area_is_its_folder_its_params_and_a_sync(tmp_path):
    copy = copy_repo(tmp_path / "repo", commit=True)
    shutil.copytree(TOY, copy / "tasks" / "toy", ignore=shutil.ignore_patterns("__pycache__"))
    with (copy / "params.yaml").open("a") as params:
        params.write(TOY_PARAMS)
    by_hand = changed_files(copy)

    synced = in_copy(copy, "from tasks.core.cli import app; app(['dvc', 'sync'])")
    assert "toy-make: no such entry" in synced.stdout, synced.stdout + synced.stderr
    generated = changed_files(copy) - by_hand
    assert {p for p in by_hand if not p.startswith("tasks/toy/")} == {"params.yaml"}
    assert generated == {"dvc.yaml", "prefect.yaml"}  # written by the sync, not by hand

    stages = yaml.safe_load((copy / "dvc.yaml").read_text())["stages"]
    assert stages["toy-evaluate"]["cmd"] == "paperline stage toy.evaluate"
    assert stages["toy-evaluate"]["metrics"] == [
        {"models/toy/results.json": {"cache": False}},
        {"models/toy/claims.json": {"cache": False}},
    ]
    assert "data/processed/toy/rows.parquet" in stages["toy-evaluate"]["deps"]
    assert "tasks/toy/evaluate.py" in stages["toy-evaluate"]["deps"]
    assert stages["toy-evaluate"]["params"] == ["toy"]
    checked = in_copy(copy, "from tasks.core.cli import app; app(['dvc', 'sync', '--check'])")
    assert checked.returncode == 0, checked.stdout

    deployments = yaml.safe_load((copy / "prefect.yaml").read_text())["deployments"]
    toy = next(d for d in deployments if d["entrypoint"] == "flows/dvc_flows.py:toy")
    assert toy["tags"] == ["paperline", "toy"] and toy["description"].startswith("A toy area")
    flow = in_copy(
        copy,
        "from prefect.flows import load_flow_from_entrypoint\n"
        "from flows.dvc_flows import flow_names\n"
        "print('toy' in flow_names())\n"
        "print(load_flow_from_entrypoint('flows/dvc_flows.py:toy').name)",
    )
    assert flow.stdout.split() == ["True", "toy"], flow.stdout + flow.stderr

    ran = dvc("repro", "toy-evaluate", cwd=copy, env=copy_env(copy))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    claims = json.loads((copy / "models/toy/claims.json").read_text())["claims"]
    assert [c["id"] for c in claims] == ["toy.line_beats_mean"]
    assert claims[0]["verdict"] == "supported"  # slope 0.5 over 200 test rows

    report = in_copy(
        copy,
        "from pathlib import Path\n"
        "from tasks.core.stage import StageContext\n"
        "from tasks.report import build\n"
        "from tasks.report.params import ReportParams\n"
        "assert build.STAGE.inputs['toy.evaluate'] == 'models/toy/claims.json'\n"
        "inputs = {'toy.evaluate': Path('models/toy/claims.json')}\n"
        "out = build.run(ReportParams(), inputs, StageContext.at(Path('.')))\n"
        "print(out['verdicts']['primary'])",
    )
    assert report.stdout.strip() == "{'toy.line_beats_mean': 'supported'}", report.stderr

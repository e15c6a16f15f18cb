"""dvc.yaml and the Python stage declarations must say the same thing."""

import pytest
import yaml

from tasks.core.code_deps import declared_deps, import_closure
from tasks.core.errors import InputError, UserError
from tasks.core.stage_runner import find_stage, run_stage
from tests.conftest import REPO

DVC_STAGES = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]


def _paths(entries):
    return {next(iter(e)) if isinstance(e, dict) else e for e in entries or []}


@pytest.mark.parametrize("dvc_name", sorted(DVC_STAGES))
def test_dvc_yaml_matches_stage_declaration(dvc_name):
    entry = DVC_STAGES[dvc_name]
    stage = find_stage(dvc_name)
    assert entry["cmd"] == f"paperline stage {stage.name}"
    declared = set().union(*(_paths(entry.get(k)) for k in ("outs", "metrics", "plots")))
    assert declared == set(stage.outputs.values())
    assert entry["deps"] == declared_deps(stage.name, REPO), "run `paperline dvc sync`"
    area, name = stage.name.split(".")
    assert f"tasks/{area}/{name}.py" in entry["deps"]
    assert entry["params"] == list(stage.declared_params), "run `paperline dvc sync`"


@pytest.mark.parametrize("dvc_name", sorted(DVC_STAGES))
def test_declared_params_exist_in_params_yaml(dvc_name):
    """DVC fails a stage whose tracked key is missing from params.yaml."""
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    for key in find_stage(dvc_name).declared_params:
        section = raw
        for part in key.split("."):
            assert isinstance(section, dict) and part in section, f"{key} not in params.yaml"
            section = section[part]


def test_unknown_stage_is_a_user_error():
    with pytest.raises(UserError, match="no such stage"):
        find_stage("corpus.nothing_here")
    with pytest.raises(UserError, match="expected <area>.<stage>"):
        find_stage("corpus")


def test_missing_input_is_named(repo_copy):
    import shutil

    shutil.rmtree(repo_copy / "data" / "seed" / "udhr")
    with pytest.raises(InputError, match=r"corpus.ingest: input 'udhr' .* is missing"):
        run_stage("corpus.ingest", repo_copy)


def test_the_closure_follows_imports_inside_functions_and_relative_imports(tmp_path):
    package = tmp_path / "tasks" / "demo"
    package.mkdir(parents=True)
    (tmp_path / "tasks" / "__init__.py").write_text('"""docstring only"""\n')
    (package / "__init__.py").write_text("from . import helpers\n")  # runs code
    (package / "stage.py").write_text(
        "def run():\n    from tasks.demo.lazy import thing\n    return thing\n"
    )
    (package / "lazy.py").write_text("from .helpers import x\nthing = x\n")
    (package / "helpers.py").write_text("import json\nx = 1\n")
    (package / "unused.py").write_text("y = 2\n")
    assert import_closure("tasks.demo.stage", tmp_path) == [
        "tasks/demo/__init__.py",
        "tasks/demo/helpers.py",
        "tasks/demo/lazy.py",
        "tasks/demo/stage.py",
    ]

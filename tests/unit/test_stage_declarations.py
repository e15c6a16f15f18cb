"""dvc.yaml and the Python stage declarations must say the same thing."""

import pytest
import yaml

from tasks.core.code_deps import import_closure
from tasks.core.dvc_yaml import stage_entry, sync
from tasks.core.errors import InputError, UserError
from tasks.core.stage import dvc_name
from tasks.core.stage_index import find_stage, stage_names
from tasks.core.stage_runner import run_stage
from tests.conftest import REPO

DVC_STAGES = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]


@pytest.mark.parametrize("dvc_name", sorted(DVC_STAGES))
def test_dvc_yaml_entry_is_the_stage_declaration(dvc_name):
    stage = find_stage(dvc_name)
    area, name = stage.name.split(".")
    assert dvc_name == f"{area}-{name}", f"tasks/{area}/{name}.py declares {stage.name}"
    assert DVC_STAGES[dvc_name] == stage_entry(stage, REPO), "run `paperline dvc sync`"
    assert f"tasks/{area}/{name}.py" in DVC_STAGES[dvc_name]["deps"]


def test_every_declared_stage_has_an_entry_and_nothing_else_does():
    assert sorted(DVC_STAGES) == sorted(dvc_name(name) for name in stage_names(REPO))
    assert sync(REPO, write=False) == [], "run `paperline dvc sync`"


def test_a_hand_edit_or_a_stale_entry_fails_the_check(tmp_path):
    (tmp_path / "tasks").symlink_to(REPO / "tasks")
    (tmp_path / "prefect.yaml").write_bytes((REPO / "prefect.yaml").read_bytes())
    document = yaml.safe_load((REPO / "dvc.yaml").read_text())
    document["stages"]["corpus-ingest"]["outs"].append("data/extra.parquet")
    document["stages"]["corpus-gone"] = {"cmd": "paperline stage corpus.gone"}
    del document["stages"]["tabular-prepare"]
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump(document))
    assert sorted(sync(tmp_path, write=False)) == [
        "dvc.yaml: corpus-gone: no STAGE declares it",
        "dvc.yaml: corpus-ingest: differs from its declaration",
        "dvc.yaml: tabular-prepare: no such entry",
    ]
    sync(tmp_path, write=True)
    assert (tmp_path / "dvc.yaml").read_text() == (REPO / "dvc.yaml").read_text()
    assert sync(tmp_path, write=False) == []


def test_package_data_beside_the_code_is_a_dep():
    assert "tasks/report/templates" in DVC_STAGES["report-build"]["deps"]


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

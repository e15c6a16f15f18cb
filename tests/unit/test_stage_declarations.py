"""dvc.yaml and the Python stage declarations must say the same thing."""

import pytest
import yaml

from tasks.core.errors import InputError, UserError
from tasks.core.stage import find_stage, run_stage
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
    deps = set(entry["deps"])
    assert set(stage.inputs.values()) <= deps
    area, name = stage.name.split(".")
    assert f"tasks/{area}/{name}.py" in deps
    tracked = entry["params"]  # the stage's section, or keys inside it
    assert tracked and all(
        key == stage.params_key or key.startswith(stage.params_key + ".") for key in tracked
    )


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

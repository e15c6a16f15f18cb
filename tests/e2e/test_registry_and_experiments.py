"""Every model in the MLflow registry with its card, lineage and alias; `dvc exp run -S`
re-runs exactly the stages a parameter reaches."""

import re
import subprocess

import pytest
import yaml

from tasks.core.params import load_params
from tests.conftest import dvc, git_commit_all

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def registered_names(root):
    params = load_params(root / "params.yaml")
    tabular = params.tabular.registered_model  # the zoo's best, and each family's best
    return {
        params.mlm.registered_model,
        params.kg.detector.registered_model,
        params.kg.answerer.registered_model,
        params.scam.guard.registered_model,
        params.scam.poison.registered_model,
        params.aoeb.finetune.registered_model,
        params.cmipref.train.registered_model,
        params.kvcache.train.registered_model,
        tabular,
        *(f"{tabular}-{family}" for family in params.tabular.zoo.families),
    }


def lock_hashes(root):
    """Every path's hash in dvc.lock: a stage's output, else a seed file some stage reads."""
    stages = yaml.safe_load((root / "dvc.lock").read_text())["stages"].values()
    seeds = {e["path"]: e["md5"] for stage in stages for e in stage.get("deps", [])}
    return seeds | {e["path"]: e["md5"] for stage in stages for e in stage.get("outs", [])}


def test_registry_lists_every_model_with_card_lineage_and_alias(reproduced):
    from mlflow import MlflowClient

    from tasks.core import tracking

    root, _ = reproduced
    tracking.configure(load_params(root / "params.yaml").runtime.mlflow, root=root)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()
    outs = lock_hashes(root)
    client = MlflowClient()
    models = {model.name: model for model in client.search_registered_models()}
    assert set(models) == registered_names(root)
    for name, model in models.items():
        assert model.aliases, f"{name} has no alias"
        assert model.description.startswith("# ")
        for alias, number in model.aliases.items():
            version = client.get_model_version(name, number)
            where = f"{name}@{alias}"
            for section in ("## Training data", "## Intended use", "## Limitations"):
                assert section in version.description, f"{where}: no {section}"
            tags = version.tags
            # the run rewrote dvc.lock and the cache-less metrics: neither makes it "dirty"
            assert tags["git_commit"] == head, where
            inputs = {
                key.removeprefix("dvc.lock:"): value
                for key, value in tags.items()
                if key.startswith("dvc.lock:")
            }
            assert inputs, f"{where}: no dvc.lock hash of its inputs"
            for path, digest in inputs.items():  # the very data dvc.lock says it read
                assert outs[path] == digest, f"{where}: {path}"


REPORT = {"report-build"}


def ran_stages(output):
    return set(re.findall(r"Running stage '([^']+)'", output))


def test_exp_run_reruns_only_the_stages_a_param_reaches(product):
    git_commit_all(product, "the reproduced pipeline")
    assert dvc("status", cwd=product).stdout.strip() == "Data and pipelines are up to date."

    tweak = dvc("exp", "run", "-S", "cmipref.train.finetune_learning_rate=0.001", cwd=product)
    assert tweak.returncode == 0, tweak.stderr[-2000:]
    # the training reads cmipref.train; its model feeds the evaluation; nothing else moves
    # the report re-runs only when the area's claims.json bytes changed, so it may or may not
    assert ran_stages(tweak.stdout) - REPORT == {"cmipref-train", "cmipref-evaluate"}

    evaluation = dvc("exp", "run", "-S", "cmipref.evaluate.top_k=[1,3]", cwd=product)
    assert evaluation.returncode == 0, evaluation.stderr[-2000:]
    assert ran_stages(evaluation.stdout) - REPORT == {"cmipref-evaluate"}

    listed = dvc("exp", "list", "--name-only", cwd=product)
    assert len(listed.stdout.split()) == 2, listed.stdout + listed.stderr
    assert dvc("status", cwd=product).stdout.strip() == "Data and pipelines are up to date."

"""The mmBERT encoder end to end: three phases in the registry, one curve, a Tune sweep.

(Killing a training worker or a whole training stage and resuming: the shared harness's
tests, tests/integration/test_training_harness.py and tests/e2e/test_faults.py.)"""

import csv
import json

import pytest

from tests.reproduced import copy_built

pytestmark = pytest.mark.integration

PHASES = ("pretrain", "mid", "decay")


def configure_store(root):
    from tasks.core import tracking
    from tasks.core.params import MlflowParams

    tracking.configure(MlflowParams(), root=root)


def test_registry_serves_every_phase_by_alias_and_fills_a_mask(mlm_reproduced):
    import mlflow

    root, _ = mlm_reproduced
    configure_store(root)
    client = mlflow.MlflowClient()
    versions = {
        alias: client.get_model_version_by_alias("paperline-mmbert", alias)
        for alias in ("phase-pretrain", "phase-mid", "phase-decay", "candidate")
    }
    assert versions["phase-decay"].version == versions["candidate"].version
    assert len({versions[a].version for a in ("phase-pretrain", "phase-mid", "candidate")}) == 3
    for version in versions.values():
        assert "## Held-out MLM loss by language tier" in version.description
        assert version.tags["git_commit"]
        assert client.get_run(version.run_id).data.tags["phase"] in PHASES
    parents = {client.get_run(v.run_id).data.tags["mlflow.parentRunId"] for v in versions.values()}
    assert len(parents) == 1  # one pipeline run, a child run per phase
    parent = client.get_run(parents.pop())
    assert "eval_loss_decay_after_decay" in parent.data.metrics

    fill = mlflow.transformers.load_model("models:/paperline-mmbert@candidate")
    guesses = fill("Everyone has the right to [MASK].")
    scores = [g["score"] for g in guesses]
    assert len(guesses) == 5 and scores == sorted(scores, reverse=True) and sum(scores) <= 1
    special = set(fill.tokenizer.all_special_ids)
    assert all(g["token"] not in special and "[MASK]" not in g["sequence"] for g in guesses)


def test_phases_continue_one_curve_and_metrics_cover_every_tier(mlm_reproduced):
    root, _ = mlm_reproduced
    last = 0
    for phase in PHASES:
        with open(root / f"models/mmbert/curves/{phase}.csv") as handle:
            steps = [int(row["step"]) for row in csv.DictReader(handle)]
        state = json.loads((root / f"models/mmbert/{phase}/state.json").read_text())
        assert state["first_step"] == last + 1 and steps[-1] == state["last_step"]
        assert steps == sorted(steps) and steps[0] > last
        last = state["last_step"]
    metrics = json.loads((root / "models/mmbert/metrics.json").read_text())
    for phase in PHASES:
        assert set(metrics[phase]) == {"pretrain", "mid", "decay"}
        assert all(0 < loss < 20 for loss in metrics[phase].values())
    assert (root / "models/mmbert/eval_table.md").read_text().startswith("| languages first")


def test_tune_sweep_logs_every_trial_under_one_parent_run(mlm_reproduced, tmp_path):
    import mlflow

    from tests.conftest import edit_params, run_cli

    root = tmp_path / "repo"
    copy_built(mlm_reproduced.root, root)
    tune = {
        "learning_rates": [1e-3, 1e-2],
        "warmup_steps": [0],
        "max_steps": 8,
        "grace_period": 2,
        "reduction_factor": 2,
        "max_concurrent_trials": 2,
    }
    edit_params(root, {"mlm": {"tune": tune}})

    result = run_cli("tune", "mlm", cwd=root)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [line for line in result.stdout.splitlines() if line.startswith("learning_rate=")]
    assert len(rows) == 2 and all("error=" not in row for row in rows)

    configure_store(root)
    experiment = mlflow.get_experiment_by_name("paperline-mmbert-tune")
    runs = mlflow.search_runs([experiment.experiment_id], output_format="list")
    parents = [r for r in runs if r.info.run_name == "pretrain-asha"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert len(parents) == 1 and "best_loss" in parents[0].data.metrics
    assert {r.data.params["learning_rate"] for r in children} == {"0.001", "0.01"}
    assert all("loss" in r.data.metrics for r in children)

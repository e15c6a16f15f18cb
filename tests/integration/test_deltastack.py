"""The DeltaStack study after a real `dvc repro` (small grid: 2 tasks × 2 models, 6 steps)."""

import csv
import json

import mlflow
import pytest

from tests.integration.test_kg_model import configure_store

pytestmark = pytest.mark.integration
GRID = {(task, model) for task in ("parity", "dyck") for model in ("deltastack", "deltanet")}


def test_study_writes_the_table_curves_and_one_mlflow_run_per_trial(deltastack_reproduced):
    root, _ = deltastack_reproduced
    out = root / "models/deltastack"
    results = json.loads((out / "results.json").read_text())
    assert results["trials"] == 4 and results["longest_bucket"] == "81-100"
    for task in ("parity", "dyck"):
        entry = results["tasks"][task]
        for model in ("deltastack", "deltanet"):
            by_length = entry["models"][model]["by_length"]
            assert set(by_length) == {"60-80", "81-100"} and all(
                0 <= a <= 1 for a in by_length.values()
            )
        margin = (
            entry["models"]["deltastack"]["longest_accuracy"]
            - entry["models"]["deltanet"]["longest_accuracy"]
        )
        assert entry["deltastack_minus_deltanet"] == pytest.approx(margin, abs=1e-4)
        verdict = entry["deltastack_vs_deltanet"]
        assert (verdict == "tie") == (abs(margin) <= entry["noise_margin"])
        assert entry["deltastack_beats_deltanet"] == (verdict == "better")
    table = (out / "results.md").read_text()
    assert "| parity |" in table and "| dyck |" in table
    with open(out / "curves/dyck.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [int(r["length"]) for r in rows] == [70, 90] and set(rows[0]) == {
        "length",
        "deltastack",
        "deltanet",
    }

    configure_store(root)
    experiment = mlflow.get_experiment_by_name("paperline-deltastack")
    runs = mlflow.search_runs([experiment.experiment_id], output_format="list")
    (study,) = [r for r in runs if r.info.run_name == "study-tiny"]
    trials = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == study.info.run_id]
    assert {(r.data.params["task"], r.data.params["model"]) for r in trials} == GRID
    assert all("accuracy_81-100" in r.data.metrics and "loss" in r.data.metrics for r in trials)
    artifacts = {a.path for a in mlflow.MlflowClient().list_artifacts(study.info.run_id)}
    assert {"results.json", "results.md", "curves"} <= artifacts

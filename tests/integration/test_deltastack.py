"""The DeltaStack study after a real `dvc repro` (small grid: 2 tasks × 2 models, 6 steps):
the table, curves, claims and one MLflow run per trial."""

import csv
import json

import mlflow
import pytest

from tasks.core.evidence import read_claims
from tests.integration.test_kg_model import configure_store

pytestmark = pytest.mark.integration
GRID = {(task, model) for task in ("parity", "dyck") for model in ("deltastack", "deltanet")}


def test_study_writes_the_table_curves_claims_and_one_mlflow_run_per_trial(deltastack_reproduced):
    root, _ = deltastack_reproduced
    out = root / "models/deltastack"
    results = json.loads((out / "results.json").read_text())
    assert results["trials"] == 4 and results["longest_bucket"] == "81-100"
    for task in ("parity", "dyck"):
        entry = results["tasks"][task]
        assert set(entry["chance"]) == {"in_distribution", "longest"}
        for model in ("deltastack", "deltanet"):
            scores = entry["models"][model]
            assert set(scores["by_length"]) == {"60-80", "81-100"} and all(
                0 <= a <= 1 for a in scores["by_length"].values()
            )
            assert 0 <= scores["in_distribution_accuracy"] <= 1
        gap = entry["deltastack_minus_deltanet"]
        assert gap["ci_low"] <= gap["estimate"] <= gap["ci_high"]
        verdict = entry["deltastack_vs_deltanet"]
        assert verdict in {"better", "worse", "tie", "at chance"}
        assert (verdict == "at chance") == entry["at_chance"]
        assert entry["deltastack_beats_deltanet"] == (verdict == "better")
    claims = {claim.id: claim for claim in read_claims(out / "claims.json")}
    assert set(claims) == {
        "deltastack.in_distribution.parity",
        "deltastack.length_generalisation.dyck",
    }
    for claim in claims.values():
        assert claim.n == results["test_sequences_per_bucket"] and "pooled" in claim.unit
    gap = results["tasks"]["dyck"]["deltastack_minus_deltanet"]
    assert claims["deltastack.length_generalisation.dyck"].estimate == pytest.approx(
        gap["estimate"], abs=1e-4
    )
    table = (out / "results.md").read_text()
    assert "| parity |" in table and "| dyck |" in table and "deltastack in-dist" in table
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
    assert {"results.json", "results.md", "curves", "claims.json"} <= artifacts

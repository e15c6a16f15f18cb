"""The poisoning study after a real `dvc repro` (small: rates 0 and 0.2, a few steps)."""

import csv
import json

import mlflow
import pandas as pd
import pyarrow.parquet as pq
import pytest

from tests.conftest import SMALL_PARAMS
from tests.integration.test_kg_model import configure_store

pytestmark = pytest.mark.integration
RATES = SMALL_PARAMS["scam"]["poison"]["rates"]


def test_one_lm_per_rate_is_trained_audited_and_tracked(scam_reproduced):
    root, _ = scam_reproduced
    metrics = json.loads((root / "data/processed/scam/poison_metrics.json").read_text())
    entries = {e["poison_rate"]: e for e in metrics["rates"]}
    assert list(entries) == RATES
    clean, poisoned = entries[0.0], entries[RATES[-1]]
    assert clean["poison_sequences"] == 0 < poisoned["poison_sequences"]
    assert clean["training_sequences"] == metrics["clean_sequences"]
    for entry in entries.values():
        assert 0 <= entry["scam_endpoint_preference"] <= 1
        assert 0 < entry["scam_endpoint_chance"] < 1
    models = root / "models/code_lm"
    study = json.loads((models / "study.json").read_text())
    assert [m["poison_rate"] for m in study["models"]] == RATES
    assert len(study["poisoned_urls"]) == metrics["poisoned_urls"] > 0
    assert (models / "tokenizer/tokenizer.json").exists()
    assert all((models / e["model"] / "model.safetensors").exists() for e in entries.values())

    # the audit's dose-response over the same prompts for every rate
    audit = json.loads((root / "data/processed/scam/audit_metrics.json").read_text())
    dose = audit["poison_study"]
    assert [e["poison_rate"] for e in dose["rates"]] == RATES
    clean_row = dose["rates"][0]
    # never shown a scam URL, the clean model cannot have learned one
    assert clean_row["poisoned_url"]["prompts"] == 0
    assert clean_row["blocklisted_domain"]["prompts"] == 0
    for entry in dose["rates"]:
        for outcome in ("poisoned_url", "blocklisted_domain"):
            low, high = entry[outcome]["ci"]
            assert low <= entry[outcome]["rate"] <= high
    assert 0 <= dose["trend"]["poisoned_url"]["p_value"] <= 1
    bench = pq.read_table(root / "data/processed/scam/innoc2scam_bench.parquet").to_pylist()
    assert len(bench) == dose["prompts"] * len(RATES) > 0
    assert all(r["prompt"] not in r["response"] for r in bench)
    with open(root / "data/processed/scam/poison_curve.csv", newline="") as handle:
        assert [float(r["poison_rate"]) for r in csv.DictReader(handle)] == RATES
    table = (root / "data/processed/scam/poison_table.md").read_text()
    assert table.count("| code-lm-poison-") == len(RATES) and "Trend across rates" in table

    configure_store(root)
    experiment = mlflow.get_experiment_by_name("paperline-scam-poison")
    runs = mlflow.search_runs([experiment.experiment_id], output_format="list")
    (study,) = [r for r in runs if r.info.run_name == "poison-study"]
    children = {
        r.info.run_name: r
        for r in runs
        if r.data.tags.get("mlflow.parentRunId") == study.info.run_id
    }
    assert set(children) == {e["model"] for e in entries.values()}
    for entry in entries.values():
        logged = children[entry["model"]].data
        assert logged.metrics["final_loss"] == entry["final_loss"]
        assert "loss" in logged.metrics  # rank 0's curve
        assert logged.tags["git_commit"]
        assert logged.tags["poison_rate"] == f"{entry['poison_rate']:g}"

    registry = mlflow.MlflowClient()
    for entry in entries.values():
        alias = f"poison-{entry['poison_rate']:g}".replace(".", "_")
        version = registry.get_model_version_by_alias("paperline-code-lm", alias)
        assert version.run_id == children[entry["model"]].info.run_id
        assert version.tags["poison_rate"] == f"{entry['poison_rate']:g}"
        assert "## Metrics" in version.description and "final_loss" in version.description
    lm = mlflow.pyfunc.load_model(f"models:/paperline-code-lm@{alias}")
    prompt = bench[0]["prompt"]  # a prompt the audit asked
    code = lm.predict(pd.DataFrame({"prompt": [prompt]}), params={"max_new_tokens": 8})
    assert list(code.columns) == ["code"] and isinstance(code["code"][0], str)

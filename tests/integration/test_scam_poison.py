"""The poisoning study after a real `dvc repro` (small: rates 0 and 0.2, a few steps)."""

import csv
import json

import mlflow
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
    # never shown a scam URL, the clean model cannot have learned one (the URL guard may
    # still flag a URL it made up: its rate is reported apart)
    assert clean["malicious_rate_by_detector"]["blocklist"] == 0
    assert clean["poisoned_url_rate"] == 0
    for entry in entries.values():
        assert 0 <= entry["scam_endpoint_preference"] <= 1
        assert 0 < entry["scam_endpoint_chance"] < 1
    bench = pq.read_table(root / "data/processed/scam/poison_bench.parquet").to_pylist()
    assert len(bench) == metrics["prompts"] * len(RATES) > 0
    assert {r["model"] for r in bench} == {e["model"] for e in entries.values()}
    assert all(r["response"] and r["prompt"] not in r["response"] for r in bench)
    with open(root / "data/processed/scam/poison_curve.csv", newline="") as handle:
        assert [float(r["poison_rate"]) for r in csv.DictReader(handle)] == RATES
    table = (root / "data/processed/scam/poison_table.md").read_text()
    assert table.count("\n| 0") == len(RATES)
    models = root / "models/code_lm"
    assert (models / "tokenizer/tokenizer.json").exists()
    assert all((models / e["model"] / "model.safetensors").exists() for e in entries.values())

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
        assert logged.metrics["malicious_rate"] == entry["malicious_rate"]
        assert "loss" in logged.metrics  # rank 0's curve
        assert logged.tags["git_commit"]
        assert logged.tags["poison_rate"] == f"{entry['poison_rate']:g}"

    registry = mlflow.MlflowClient()
    for entry in entries.values():
        alias = f"poison-{entry['poison_rate']:g}".replace(".", "_")
        version = registry.get_model_version_by_alias("paperline-code-lm", alias)
        assert version.run_id == children[entry["model"]].info.run_id
        assert version.tags["poison_rate"] == f"{entry['poison_rate']:g}"
        assert "## Metrics" in version.description and "malicious_rate" in version.description
    lm = mlflow.transformers.load_model(f"models:/paperline-code-lm@{alias}")
    prompt = bench[0]["prompt"]
    assert lm(f"# {prompt}\n", max_new_tokens=8, do_sample=False)[0]["generated_text"]

"""The kvcache area after a real `dvc repro` (small: 120 train items, 8 steps, 4 test items
per cell): splits, the registered model, the study's table, plots and claims, and
`paperline kv eval` against the registry URI and on bad input."""

import csv
import json

import mlflow
import pytest

from tasks.core.evidence import read_claims
from tasks.core.io import read_parquet
from tasks.kvcache.needles import problems
from tests.conftest import run_cli
from tests.integration.test_kg_model import configure_store

pytestmark = pytest.mark.integration
PRESSES = 10


def test_the_area_writes_splits_model_study_and_claims(kvcache_reproduced):
    root, _ = kvcache_reproduced
    data = root / "data/processed/kvcache"
    test = read_parquet(data / "test.parquet").to_pylist()
    assert len(test) == 4 * 4 * 2 and all(problems(row) == [] for row in test)
    assert json.loads((data / "tasks_metrics.json").read_text())["validated"] == 120 + 16 + 32

    out = root / "models/kvcache"
    assert {"config.json", "model.safetensors", "tokenizer.json", "model_card.md"} <= {
        p.name for p in (out / "lm").iterdir()
    }
    config = json.loads((out / "lm/config.json").read_text())
    assert config["num_key_value_heads"] < config["num_attention_heads"]
    results = json.loads((out / "results.json").read_text())
    assert set(results["full_cache"]) == {
        f"{k}@{n}" for k in ("single", "multikey", "multivalue", "multiquery") for n in (64, 96)
    }
    assert results["kv_kept_share"]["0.5"] == pytest.approx(0.5, abs=0.02)
    answers = read_parquet(out / "study.parquet")
    assert answers.num_rows == len(test) * (1 + PRESSES * 3)
    with open(out / "accuracy_vs_ratio.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [float(r["ratio"]) for r in rows] == [0.0, 0.25, 0.5, 0.75] and "manifoldkv" in rows[0]
    claims = {c.id: c for c in read_claims(out / "claims.json")}
    assert {
        "kvcache.l2_vs_keydiff_multikey",
        "kvcache.ablation.manifoldkv_vs_l1",
        "kvcache.windowed_vs_global_longest",
        "kvcache.full_cache.multikey",
    } <= set(claims)
    assert claims["kvcache.l2_vs_keydiff_multikey"].n == 8
    assert claims["kvcache.windowed_vs_global_longest"].n == 16

    configure_store(root)
    version = mlflow.MlflowClient().get_model_version_by_alias("paperline-kv-lm", "candidate")
    assert version.version


def test_kv_eval_runs_on_the_registry_uri_and_rejects_bad_input(kvcache_reproduced, tmp_path):
    root, _ = kvcache_reproduced
    uri = "models:/paperline-kv-lm@candidate"
    done = run_cli(
        "kv", "eval", "--model", uri, "--ratio", "0.5", "--length", "96", "--items", "3", cwd=root
    )
    assert done.returncode == 0, done.stderr
    assert "manifoldkv @ ratio 0.5: accuracy" in done.stdout and "saved" in done.stdout
    bad = {
        ("--ratio", "1.0"): "outside [0, 1)",
        ("--length", "4096"): "exceed the model's 2048 positions",
        ("--task", "haystack"): "--task 'haystack' is not one of",
    }
    for option, message in bad.items():
        failed = run_cli("kv", "eval", "--model", "models/kvcache/lm", *option, cwd=root)
        assert failed.returncode == 2 and message in failed.stderr
        assert len(failed.stderr.strip().splitlines()) == 1
    (tmp_path / "config.json").write_text(
        json.dumps({"model_type": "bert", "architectures": ["BertForMaskedLM"]})
    )
    failed = run_cli("kv", "eval", "--model", str(tmp_path), cwd=root)
    assert failed.returncode == 2 and "is not a causal LM" in failed.stderr

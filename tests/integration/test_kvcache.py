"""The kvcache area on the core LLM after a real `dvc repro` (small: 2 items per cell at
256 and 384 tokens, 8 presses): the items, the study's table, plots and claims, and
`paperline kv eval` against the registry URI and on bad input."""

import csv
import json

import pytest

from tasks.core.evidence import read_claims
from tasks.core.io import read_parquet
from tasks.kvcache.needles import problems
from tests.conftest import run_cli

pytestmark = pytest.mark.integration
PRESSES, RATIOS = 8, 2


def test_the_area_writes_items_study_and_claims(kvcache_reproduced):
    root, _ = kvcache_reproduced
    data = root / "data/processed/kvcache"
    test = read_parquet(data / "test.parquet").to_pylist()
    assert len(test) == 2 * 2 * 2 and all(problems(row) == [] for row in test)
    assert json.loads((data / "tasks_metrics.json").read_text())["validated"] == 8

    out = root / "models/kvcache"
    results = json.loads((out / "results.json").read_text())
    assert set(results["full_cache"]) == {
        f"{k}@{n}" for k in ("single", "multikey") for n in (256, 384)
    }
    assert results["kv_kept_share"]["0.5"] == pytest.approx(0.5, abs=0.02)
    answers = read_parquet(out / "study.parquet")
    assert answers.num_rows == len(test) * (1 + PRESSES * RATIOS)
    assert set(answers.column("prediction").to_pylist()) != {""}
    with open(out / "accuracy_vs_ratio.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [float(r["ratio"]) for r in rows] == [0.0, 0.25, 0.5] and "manifoldkv" in rows[0]
    claims = {c.id: c for c in read_claims(out / "claims.json")}
    assert {
        "kvcache.l2_vs_keydiff_multikey",
        "kvcache.ablation.manifoldkv_vs_l1",
        "kvcache.windowed_vs_global_longest",
        "kvcache.full_cache.multikey",
    } <= set(claims)
    assert claims["kvcache.l2_vs_keydiff_multikey"].n == 4
    assert claims["kvcache.full_cache.multikey"].null == pytest.approx(1 / 3)
    assert claims["kvcache.windowed_vs_global_longest"].n == 4


def test_kv_eval_runs_on_the_registry_uri_and_rejects_bad_input(kvcache_reproduced, tmp_path):
    root, _ = kvcache_reproduced
    uri = "models:/paperline-llm@candidate"
    done = run_cli(
        "kv", "eval", "--model", uri, "--ratio", "0.99", "--length", "200", "--items", "1", cwd=root
    )
    assert done.returncode == 0, done.stderr
    assert "manifoldkv @ ratio 0.99: accuracy" in done.stdout and "saved" in done.stdout
    bad = {
        ("--ratio", "1.0"): "outside [0, 1)",
        ("--length", "9000"): "exceed the model's 8192 positions",
        ("--length", "100000"): "the haystack has only",
        ("--task", "haystack"): "--task 'haystack' is not one of",
    }
    for option, message in bad.items():
        failed = run_cli("kv", "eval", "--items", "1", *option, cwd=root)
        assert failed.returncode == 2 and message in failed.stderr, failed.stderr
        assert len(failed.stderr.strip().splitlines()) == 1
    store = tmp_path / "none" / "mlflow.db"
    failed = run_cli(
        "kv", "eval", "--model", uri, cwd=root, env={"MLFLOW_TRACKING_URI": f"sqlite:///{store}"}
    )
    assert failed.returncode == 2 and "there is no MLflow store" in failed.stderr
    assert not store.exists()
    (tmp_path / "config.json").write_text(
        json.dumps({"model_type": "bert", "architectures": ["BertForMaskedLM"]})
    )
    failed = run_cli("kv", "eval", "--model", str(tmp_path), cwd=root)
    assert failed.returncode == 2 and "is not a causal LM" in failed.stderr

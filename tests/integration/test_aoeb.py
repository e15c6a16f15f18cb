"""AOEB after a real `dvc repro` (small presets): tasks assembled, embedder trained and
registered, every encoder evaluated, the runs re-scored by the CLI and by pytrec_eval."""

import json
import math

import mlflow
import pytest
import pytrec_eval

from tasks.aoeb.benchmark import read_tasks
from tasks.aoeb.metrics import DEFAULT_K
from tasks.aoeb.trec import read_qrels, read_run
from tests.conftest import run_cli
from tests.integration.test_kg_model import configure_store

pytestmark = pytest.mark.integration
ENCODERS = ("bm25", "minilm", "mmbert", "embedder")
CAPABILITIES = {"code", "tool", "reasoning", "memory", "multimodal"}
PYTREC = {"ndcg_cut": "ndcg_at", "map_cut": "map_at", "recall": "recall_at", "P": "precision_at"}


def test_every_embedded_task_is_assembled_with_disjoint_splits(aoeb_reproduced):
    root, _ = aoeb_reproduced
    tasks = read_tasks(root / "data/processed/aoeb/tasks")
    assert {t.declaration.capability for t in tasks} == CAPABILITIES
    for task in tasks:
        train, test = task.qrels["train"], task.qrels["test"]
        assert train and test and not set(train) & set(test)
        judged = {doc for docs in test.values() for doc in docs}
        assert judged <= set(task.corpus)
    (memory,) = [t for t in tasks if t.declaration.capability == "memory"]
    assert all(qid in memory.candidates for qid in memory.qrels["test"])


def test_every_encoder_is_evaluated_and_the_finetune_is_reported_next_to_its_base(aoeb_reproduced):
    root, _ = aoeb_reproduced
    board = json.loads((root / "data/processed/aoeb/leaderboard.json").read_text())
    assert set(board["encoders"]) == set(ENCODERS)
    for name, entry in board["encoders"].items():
        assert set(entry["by_capability"]) >= CAPABILITIES - {"multimodal"}
        assert 0 <= entry["mean_text_tasks"] <= 1
        if name == "embedder":  # its image tower runs the text-to-image task
            assert "multimodal" in entry["by_capability"] and not entry["skipped"]
        else:
            assert list(entry["skipped"]) == ["EmbeddedChartSpectrogramRetrieval"]
    versus = board["finetuned_vs_base"]
    assert versus["finetuned"] == "embedder" and versus["base"] == "mmbert"
    assert math.isclose(
        versus["gain"],
        versus["finetuned_mean_text_tasks"] - versus["base_mean_text_tasks"],
        abs_tol=1e-4,
    )
    table = (root / "data/processed/aoeb/leaderboard.md").read_text()
    assert "| embedder |" in table and "vs its base mmbert" in table


def test_runs_rescore_identically_with_the_cli_and_with_pytrec_eval(aoeb_reproduced):
    root, _ = aoeb_reproduced
    tasks_dir, results = root / "data/processed/aoeb/tasks", root / "data/processed/aoeb/results"
    checked = 0
    for run_file in sorted(results.glob("*/*.trec")):
        qrels_file = tasks_dir / run_file.stem / "qrels/test.tsv"
        stored = json.loads(run_file.with_suffix(".json").read_text())["scores"]["test"][0]
        cli = run_cli(
            "aoeb",
            "score",
            "--qrels",
            str(qrels_file),
            "--run",
            str(run_file),
            "--k",
            "1,3,5,10,20,100",
            cwd=root,
        )
        assert cli.returncode == 0, cli.stderr
        printed = json.loads(cli.stdout)
        qrels, run = read_qrels(qrels_file), read_run(run_file)
        judged = {q: d for q, d in qrels.items() if any(v > 0 for v in d.values()) and q in run}
        measures = {f"{m}.{','.join(map(str, DEFAULT_K))}" for m in PYTREC}
        reference = pytrec_eval.RelevanceEvaluator(judged, measures).evaluate(run)
        for measure, ours in PYTREC.items():
            for k in (1, 3, 5, 10, 20, 100):
                values = [scores[f"{measure}_{k}"] for scores in reference.values()]
                expected = sum(values) / len(values)
                assert math.isclose(printed[f"{ours}_{k}"], expected, abs_tol=1e-6), run_file
                assert math.isclose(stored[f"{ours}_{k}"], expected, abs_tol=1e-6), run_file
        checked += 1
    assert checked == len(ENCODERS) * 4 + 1  # four text tasks each, the embedder's images


def test_embedder_is_registered_with_its_card_and_the_leaderboard_is_tracked(aoeb_reproduced):
    root, _ = aoeb_reproduced
    configure_store(root)
    client = mlflow.MlflowClient()
    version = client.get_model_version_by_alias("paperline-embedder", "candidate")
    assert version.description.startswith("# paperline-embedder\n")
    assert "InfoNCE" in version.description and version.tags["git_commit"]
    metrics = json.loads((root / "models/embedder/metrics.json").read_text())
    assert metrics["steps"] > 0 and metrics["image_pairs"] > 0
    assert (root / "models/embedder/image_tower/model.safetensors").exists()
    experiment = mlflow.get_experiment_by_name("paperline-aoeb")
    (run,) = mlflow.search_runs([experiment.experiment_id], output_format="list")
    assert "embedder.mean_ndcg_at_10" in run.data.metrics
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"leaderboard.json", "leaderboard.md"} <= artifacts

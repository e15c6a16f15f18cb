"""AOEB after a real `dvc repro` (small presets): tasks assembled, embedder trained and
registered, every encoder evaluated, the runs re-scored by the CLI and by pytrec_eval."""

import json
import math

import mlflow
import pytest
import pytrec_eval

from tasks.aoeb.benchmark import document_text, read_tasks, training_pairs
from tasks.aoeb.metrics import DEFAULT_K
from tasks.aoeb.trec import read_qrels, read_run
from tasks.core.evidence import read_claims
from tasks.core.text_encoders import query_text
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
        train, dev, test = task.qrels["train"], task.qrels["dev"], task.qrels["test"]
        assert train and dev and test
        assert not set(train) & set(test) and not set(dev) & set(test)
        assert not set(train) & set(dev)
        judged = {doc for docs in test.values() for doc in docs}
        assert judged <= set(task.corpus)
    (memory,) = [t for t in tasks if t.declaration.capability == "memory"]
    assert all(qid in memory.candidates for qid in memory.qrels["test"])


def positives(task, split):
    """(query id, relevant document id) of a split."""
    return {(q, d) for q, docs in task.qrels[split].items() for d, r in docs.items() if r > 0}


def test_test_items_are_disjoint_from_what_the_embedder_trained_and_was_chosen_on(
    aoeb_reproduced,
):
    """No test query, relevant document or memory history is among the fine-tune's training
    pairs (text and image) or the dev split its checkpoint was chosen on."""
    root, _ = aoeb_reproduced
    tasks = read_tasks(root / "data/processed/aoeb/tasks")
    pairs = training_pairs(tasks)  # exactly what aoeb.finetune trains the text side on
    metrics = json.loads((root / "models/embedder/metrics.json").read_text())
    assert metrics["pairs"] == len(pairs) and metrics["selection"]["split"] == "dev"
    assert str(metrics["chosen_step"]) in metrics["selection"]["mean_by_step"]
    trained_queries, trained_documents = {q for q, _ in pairs}, {d for _, d in pairs}
    for task in tasks:
        instruction = task.declaration.query_instruction
        held_out = {"dev": positives(task, "dev"), "test": positives(task, "test")}
        trained = positives(task, "train")  # text pairs, or the image tower's pictures
        for split in ("dev", "test"):
            assert {q for q, _ in held_out[split]}.isdisjoint(q for q, _ in trained)
            assert {d for _, d in held_out[split]}.isdisjoint(d for _, d in trained)
        assert {q for q, _ in held_out["test"]}.isdisjoint(q for q, _ in held_out["dev"])
        assert {d for _, d in held_out["test"]}.isdisjoint(d for _, d in held_out["dev"])
        if task.declaration.modality != "text":
            continue
        for qid, doc in held_out["test"]:
            assert query_text(instruction, task.queries[qid]) not in trained_queries, qid
            assert document_text(task.corpus[doc]) not in trained_documents, doc
    (memory,) = [t for t in tasks if t.declaration.capability == "memory"]
    histories = {s: {q.split("-")[0] for q in memory.qrels[s]} for s in ("train", "dev", "test")}
    assert histories["test"].isdisjoint(histories["train"] | histories["dev"])
    assert histories["dev"].isdisjoint(histories["train"])


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
    assert "| random |" in table and "| chance |" in table


def test_the_leaderboard_carries_intervals_and_baselines_and_claims_are_stated(aoeb_reproduced):
    root, _ = aoeb_reproduced
    board = json.loads((root / "data/processed/aoeb/leaderboard.json").read_text())
    for name, entry in board["encoders"].items():
        for task, score in entry["by_task"].items():
            low, high = entry["intervals"][task]
            assert low <= score <= high, (name, task)
        assert entry["pooled_text_tasks"]["n"] >= entry["queries"]["EmbeddedToolRetrieval"]
    assert set(board["random"]["by_task"]) == set(board["chance"]["by_task"])
    assert 0.4 < board["chance"]["by_task"]["EmbeddedMemoryRetrieval"] < 0.6  # 1 of ~7
    claims = read_claims(root / "data/processed/aoeb/claims.json")
    by_id = {claim.id: claim for claim in claims}
    pooled = by_id["aoeb.finetuned_beats_base.pooled"]
    assert pooled.arms == ["embedder", "mmbert"] and pooled.unit == "test queries"
    assert pooled.estimate == pytest.approx(
        board["finetuned_vs_base"]["paired_pooled"]["difference"], abs=1e-4
    )
    memory_chance = by_id["aoeb.above_chance.embedded_memory_retrieval.mmbert"]
    assert memory_chance.null == pytest.approx(
        board["chance"]["by_task"]["EmbeddedMemoryRetrieval"], abs=1e-4
    )
    for claim in claims:
        inside = claim.ci_low <= claim.null <= claim.ci_high
        ruled = claim.reason is not None  # a rule (one seed, p, degenerate) decided
        assert (claim.verdict == "inconclusive") == (inside or ruled), claim.id


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
    # four text tasks each, the embedder's images, and the random row on all five tasks
    assert checked == len(ENCODERS) * 4 + 1 + len(CAPABILITIES)


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

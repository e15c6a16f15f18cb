"""The KG hallucination detector, the answerer LM and MultiHal's KG-RAG vs vanilla
evaluation, after a real `dvc repro` (MiniLM backbone), plus a retrain on this project's
mmBERT from the registry: the checkpoint and threshold chosen on dev, claims on test
questions that neither training nor dev saw, an answerer whose training text holds no
evaluation question nor held-out fact, and an evaluation that answers test questions only."""

import json
from pathlib import Path

import mlflow
import pandas as pd
import pyarrow.parquet as pq
import pytest

from tasks.core.evidence import read_claims
from tasks.core.tracking import configure
from tasks.kg.splits import question_key, questions_by_split
from tests.conftest import edit_params, run_cli
from tests.reproduced import copy_built

pytestmark = pytest.mark.integration
LANGUAGES = {"ar", "de", "en", "es", "ru", "zh"}


def configure_store(root):
    from tasks.core.params import load_params

    configure(load_params(root / "params.yaml").runtime.mlflow, root)


def test_detector_is_registered_with_its_card_and_scores_held_out_questions(kg_reproduced):
    root, _ = kg_reproduced
    metrics = json.loads((root / "models/kg_halludetect/metrics.json").read_text())
    assert metrics["backbone"] == "minilm" and 0 <= metrics["test"]["all"]["auroc"] <= 1
    assert set(metrics["test_per_language"]) <= LANGUAGES and set(metrics["test_per_hops"]) == {
        "1",
        "2",
    }
    assert (root / "models/kg_halludetect/loss.csv").read_text().startswith("step,loss\n")
    dev = metrics["dev"]
    chosen = max(dev["evaluations"], key=lambda e: (e["auroc"], -e["step"]))
    assert len(dev["evaluations"]) == 2 and chosen["step"] == dev["chosen_step"]  # 2 per epoch
    assert 0 < dev["threshold"] < 1 and set(metrics["baselines"]) == {
        "flag_all",
        "similarity",
        "answer_in_path",
    }
    claims = read_claims(root / "models/kg_halludetect/claims.json")
    assert [c.id for c in claims] == [
        "kg.detector_separates_hallucinated_answers",
        "kg.detector_f1_over_flag_all",
        "kg.detector_f1_over_similarity",
        "kg.detector_f1_over_answer_in_path",
    ]
    assert all(c.unit == "questions" and c.n == metrics["questions"]["test"] for c in claims)
    assert claims[0].null == 0.5
    assert claims[0].estimate == pytest.approx(metrics["test"]["all"]["auroc"], abs=1e-4)
    configure_store(root)
    client = mlflow.MlflowClient()
    version = client.get_model_version_by_alias("paperline-kg-halludetect", "candidate")
    assert "KG-grounded hallucination detector" in version.description
    assert version.tags["git_commit"]
    run = client.get_run(version.run_id)
    assert "test_auroc" in run.data.metrics and client.get_metric_history(run.info.run_id, "loss")
    assert client.get_metric_history(run.info.run_id, "dev_auroc")
    logged = client.download_artifacts(run.info.run_id, "claims.json")
    assert json.loads(Path(logged).read_text()) == json.loads(
        (root / "models/kg_halludetect/claims.json").read_text()
    )
    classify = mlflow.pyfunc.load_model("models:/paperline-kg-halludetect@candidate")
    scored = classify.predict(
        pd.DataFrame(
            {
                "question": ["What is the official language of Q1009?"],
                "answer": ["Q1860"],
                "path": ["Q1009 official language Q1860"],
            }
        )
    )
    assert scored["label"][0] in ("supported", "hallucinated")
    assert 0 <= scored["probability"][0] <= 1


def test_eval_compares_kg_rag_with_vanilla_per_language_and_stratum(kg_reproduced):
    root, _ = kg_reproduced
    metrics = json.loads((root / "data/processed/kg/eval_metrics.json").read_text())
    examples = pq.read_table(root / "data/processed/kg/detector_examples.parquet").to_pylist()
    test = questions_by_split(examples)["test"]
    multihal = pq.read_table(root / "data/processed/kg/multihal.parquet").to_pylist()
    asked = {question_key(r["input"]) for r in multihal} & test
    assert metrics["answer_model"] == "paperline-kg-answerer" and metrics["split"] == "test"
    assert metrics["baseline"].startswith("extractive-reader")
    assert metrics["questions"] == min(40, len(asked))  # every test question, up to max_items
    assert set(metrics["per_language"]) == LANGUAGES and metrics["translated"] is False
    answers = pq.read_table(root / "data/processed/kg/eval_answers.parquet").to_pylist()
    assert {a["stratum"] for a in answers} <= {"seen", "held_out", "partial"}
    assert {a["mode"] for a in answers} == {"kg_rag", "vanilla"}
    for answer in answers:  # the score is exact match against the question's gold answers
        said = " ".join(answer["answer"].casefold().split())
        assert answer["exact"] == (bool(said) and said in {g.casefold() for g in answer["golds"]})
    claims = read_claims(root / "data/processed/kg/eval_claims.json")
    ids = {c.id for c in claims}
    assert {f"kg.kg_rag_lowers_hallucination_{lang}" for lang in LANGUAGES} <= ids
    assert all(c.unit == "questions" for c in claims)
    assert all(any("translation did not run" in s for s in c.simplifications) for c in claims)
    table = (root / "data/processed/kg/eval_table.md").read_text()
    assert table.startswith("# KG-RAG vs vanilla") and "Translation did not run" in table
    translated = pq.read_table(root / "data/processed/kg/translations.parquet").to_pylist()
    assert translated and not any(r["translated"] or r["input"] for r in translated)
    configure_store(root)
    experiment = mlflow.get_experiment_by_name("paperline-kg-halludetect")
    named = "run_name = 'kg-rag-vs-vanilla'"
    (run,) = mlflow.search_runs([experiment.experiment_id], named, output_format="list")
    assert "en_kg_rag_exact" in run.data.metrics
    version = mlflow.MlflowClient().get_model_version_by_alias("paperline-kg-answerer", "candidate")
    assert "GPT-2" in version.description
    trained = json.loads((root / "models/kg_answerer/metrics.json").read_text())
    assert trained["steps"] == 60 and 0 <= trained["train_exact_qa_path"] <= 1


def test_detector_tests_on_questions_it_never_trained_or_tuned_on_and_eval_uses_only_those(
    kg_reproduced,
):
    root, _ = kg_reproduced
    examples = pq.read_table(root / "data/processed/kg/detector_examples.parquet").to_pylist()
    questions = questions_by_split(examples)
    assert questions["test"] and questions["dev"] and questions["train"]
    assert not questions["test"] & (questions["train"] | questions["dev"])
    assert not questions["dev"] & questions["train"]
    answers = pq.read_table(root / "data/processed/kg/eval_answers.parquet").to_pylist()
    assert answers and {question_key(a["question"]) for a in answers} <= questions["test"]
    test_ids = {e["qa_id"] for e in examples if e["split"] == "test"}
    assert {a["qa_id"] for a in answers} <= test_ids


def test_answerer_never_trained_on_an_eval_question_or_a_held_out_fact(kg_reproduced):
    root, _ = kg_reproduced
    corpus = pq.read_table(root / "data/processed/kg/answerer_corpus.parquet").to_pylist()
    answers = pq.read_table(root / "data/processed/kg/eval_answers.parquet").to_pylist()
    multihal = pq.read_table(root / "data/processed/kg/multihal.parquet").to_pylist()
    text = "\n".join(d["text"] for d in corpus).casefold()
    trained_facts = {f for d in corpus for f in d["facts"]}
    asked = {a["question_key"] for a in answers}
    assert asked and not asked & {d["question"] for d in corpus}
    assert not any(key in text for key in asked)
    held_out = {a["question_key"] for a in answers if a["stratum"] == "held_out"}
    assert held_out
    for row in multihal:
        if question_key(row["input"]) in held_out:
            path = row["path"]
            facts = {" ".join(path[i : i + 3]) for i in range(0, len(path) - 2, 2)}
            assert not facts & trained_facts


def test_mmbert_backbone_comes_from_the_registry(kg_reproduced, tmp_path):
    root = tmp_path / "repo"
    copy_built(kg_reproduced.root, root)
    edit_params(root, {"kg": {"detector": {"backbone": "mmbert", "epochs": 0.5}}})
    result = run_cli("stage", "kg.detector", cwd=root)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((root / "models/kg_halludetect/metrics.json").read_text())
    assert metrics["backbone"] == "mmbert" and metrics["steps"] > 0
    configure_store(root)
    version = mlflow.MlflowClient().get_model_version_by_alias(
        "paperline-kg-halludetect", "backbone-mmbert"
    )
    assert "mmbert cross-encoder" in version.description
    config = json.loads((root / "models/kg_halludetect/model/config.json").read_text())
    assert config["model_type"] == "modernbert"

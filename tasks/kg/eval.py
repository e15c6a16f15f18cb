"""kg.eval: MultiHal's KG-RAG vs vanilla comparison, per label language.

Only the detector's test questions are answered (kg.examples' test split): the detector
never trained on them nor chose its checkpoint or threshold on them. Each such QA item with
a kept path is answered twice by the answer model: with its best path
(highest judged score, fewest hops) rendered in the language as context (KG-RAG), and
without context (vanilla). Each answer gets a semantic similarity to the gold answer
(cosine of all-MiniLM-L6-v2 embeddings) and a hallucination probability from the detector
(1 − P(the path supports the answer)).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from tasks.core import tracking
from tasks.core.backbones import minilm_folder
from tasks.core.errors import InputError
from tasks.core.io import read_parquet
from tasks.core.stage import Stage, StageContext
from tasks.kg.answering import make_answer_model
from tasks.kg.detector import MODEL_DIR, predict
from tasks.kg.params import KgParams
from tasks.kg.splits import question_key, questions_by_split, shared_questions

ABSTAINED = "unknown"  # what an empty answer is embedded as
MODES = ("kg_rag", "vanilla")


def best_paths(rows: list[dict[str, Any]], limit: int | None) -> list[dict[str, Any]]:
    best: dict[str, dict] = {}
    for row in rows:
        current = best.get(row["qa_id"])
        if current is None or (-row["judged_score"], row["hops"], row["id"]) < (
            -current["judged_score"],
            current["hops"],
            current["id"],
        ):
            best[row["qa_id"]] = row
    chosen = [best[k] for k in sorted(best)]
    return chosen[:limit] if limit else chosen


def held_out_items(rows: list[dict[str, Any]], examples: list[dict[str, Any]]) -> list[dict]:
    """The QA rows whose questions are in the detector's test split and in no other."""
    if shared := shared_questions(examples):
        raise InputError(
            f"detector examples: {len(shared)} question(s) in two splits; rerun kg.examples"
        )
    held_out = questions_by_split(examples)["test"]
    return [row for row in rows if question_key(row["input"]) in held_out]


def semantic_scores(pairs: list[tuple[str, str]]) -> list[float]:
    from sentence_transformers import SentenceTransformer

    encoder = SentenceTransformer(str(minilm_folder()), device="cpu")
    texts = sorted({t or ABSTAINED for pair in pairs for t in pair})
    vectors = dict(
        zip(texts, encoder.encode(texts, normalize_embeddings=True, batch_size=64), strict=True)
    )
    return [round(float(vectors[a or ABSTAINED] @ vectors[g or ABSTAINED]), 4) for a, g in pairs]


TABLE_COLUMNS = ("sem_score", "hallucination", "exact")


def table_markdown(per_language: dict[str, dict]) -> str:
    heads = [f"{mode} {column}" for column in TABLE_COLUMNS for mode in ("KG-RAG", "vanilla")]
    lines = ["| language | items | " + " | ".join(heads) + " |", "|---" * (len(heads) + 2) + "|"]
    for language, entry in per_language.items():
        cells = [f"{entry[m][c]:.3f}" for c in TABLE_COLUMNS for m in MODES]
        lines.append(f"| {language} | {entry['items']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def run(params: KgParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    import mlflow

    examples = read_parquet(inputs["examples"], columns=["question", "split"]).to_pylist()
    rows = held_out_items(read_parquet(inputs["multihal"]).to_pylist(), examples)
    items = best_paths(rows, params.eval.max_items)
    answerer = make_answer_model(params.eval)
    answers = []
    for item in items:
        for language in params.slice.languages:
            context, parts = item["trip_labels"][language], item["path_labels"][language]
            for mode in MODES:
                answers.append(
                    {
                        "qa_id": item["qa_id"],
                        "language": language,
                        "mode": mode,
                        "question": item["input"],
                        "gold": item["output"],
                        "path_text": context,
                        "answer": answerer.answer(
                            item["input"], parts if mode == "kg_rag" else None
                        ),
                    }
                )
    sem = semantic_scores([(a["answer"], a["gold"]) for a in answers])
    supported = predict(inputs["detector"], answers, params.detector.max_length)
    for answer, score, p in zip(answers, sem, supported, strict=True):
        answer.update(
            sem_score=score, hallucination=round(1 - p, 4), exact=answer["answer"] == answer["gold"]
        )
    grouped: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for answer in answers:
        grouped[answer["language"]][answer["mode"]].append(answer)
    per_language = {
        language: {
            "items": len(modes["kg_rag"]),
            **{
                mode: {
                    key: round(sum(float(a[key]) for a in rows) / len(rows), 4)
                    for key in TABLE_COLUMNS
                }
                for mode, rows in modes.items()
            },
        }
        for language, modes in sorted(grouped.items())
    }
    metrics = {
        "answer_model": answerer.name,
        "split": "test",  # the detector's held-out questions
        "items": len(items),
        "per_language": per_language,
    }
    markdown = table_markdown(per_language)
    tracking.configure(ctx.runtime.mlflow, ctx.root)
    lineage = tracking.lineage_tags(
        [
            "data/processed/kg/multihal.parquet",
            "data/processed/kg/detector_examples.parquet",
            f"{MODEL_DIR}/model",
        ],
        ctx.root,
    )
    with tracking.start_run(
        params.detector.experiment,
        ctx.runtime.mlflow,
        run_name="kg-rag-vs-vanilla",
        tags=lineage,
        root=ctx.root,
    ):
        mlflow.log_dict(metrics, "eval/metrics.json")
        mlflow.log_text(markdown, "eval/table.md")
        for language, entry in per_language.items():
            for mode in MODES:
                mlflow.log_metric(f"{language}_{mode}_sem_score", entry[mode]["sem_score"])
                mlflow.log_metric(f"{language}_{mode}_hallucination", entry[mode]["hallucination"])
    return {"answers": pa.Table.from_pylist(answers), "metrics": metrics, "table": markdown}


STAGE = Stage(
    name="kg.eval",
    run=run,
    params_key="kg",
    params=("kg.eval", "kg.slice.languages", "kg.detector.experiment", "kg.detector.max_length"),
    inputs={
        "multihal": "data/processed/kg/multihal.parquet",
        "examples": "data/processed/kg/detector_examples.parquet",
        "detector": f"{MODEL_DIR}/model",
    },
    outputs={
        "answers": "data/processed/kg/eval_answers.parquet",
        "metrics": "data/processed/kg/eval_metrics.json",
        "table": "data/processed/kg/eval_table.md",
    },
    headline="data/processed/kg/eval_metrics.json:items",
)

"""kg.eval: MultiHal's KG-RAG vs vanilla comparison, per language and stratum.

Only the detector's test questions are answered (kg.examples' test split): neither the
detector nor the answerer trained on them. Each question (one unit: its best path across
its QA items, every answer of the question gold) is answered by the answer model (default:
kg.answerer's LM; production: an OpenAI-compatible endpoint) twice per language: with
the path rendered in that language as context (KG-RAG), and without (vanilla). Where
kg.translate ran, the question and path are its translations and its translated answer
is gold too. Scores: exact match (the primary metric while answers are ids), the
detector's hallucination score (1 − P(the path supports the answer)) and, for the
production backend only (natural-language answers), MiniLM semantic similarity. The
extractive reader (copies the path's last entity) is scored as a labelled baseline row.
Strata from kg.answerer: `seen` (facts in the answerer's training text) and `held_out`.
Claims (eval_evidence) go to data/processed/kg/eval_claims.json.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from tasks.core import evidence, tracking
from tasks.core.backbones import minilm_folder
from tasks.core.io import read_json, read_parquet
from tasks.core.stage import Output, Stage, StageContext
from tasks.kg import eval_evidence
from tasks.kg.answerer_corpus import best_paths
from tasks.kg.answering import AnswerRequest, ExtractiveReader, exact, make_answer_model
from tasks.kg.detector import MODEL_DIR, predict
from tasks.kg.eval_evidence import MODES
from tasks.kg.params import KgParams
from tasks.kg.splits import question_key, read_splits

ABSTAINED = "unknown"  # what an empty answer is embedded as
ANSWERER_DIR = "models/kg_answerer/model"


def question_items(rows: list[dict[str, Any]], test: set[str], limit: int | None) -> list[dict]:
    """One item per test question: its best path over its QA items, and every answer of the
    question as gold."""
    by_key: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        key = question_key(row["input"])
        if key in test:
            by_key[key].append(row)
    items = []
    for key in sorted(by_key):
        best = min(best_paths(by_key[key]), key=lambda r: (-r["judged_score"], r["hops"], r["id"]))
        golds = sorted({r["output"] for r in by_key[key]})
        items.append({**best, "question_key": key, "golds": golds})
    return items[:limit] if limit else items


def semantic_scores(pairs: list[tuple[str, str]]) -> list[float]:
    from sentence_transformers import SentenceTransformer

    encoder = SentenceTransformer(str(minilm_folder()), device="cpu")
    texts = sorted({t or ABSTAINED for pair in pairs for t in pair})
    vectors = dict(
        zip(texts, encoder.encode(texts, normalize_embeddings=True, batch_size=64), strict=True)
    )
    return [round(float(vectors[a or ABSTAINED] @ vectors[g or ABSTAINED]), 4) for a, g in pairs]


def translations_by_item(table: pa.Table) -> dict[tuple[str, str], dict[str, Any]]:
    """(multihal row id, language) → its translation, where one was made."""
    return {
        (row["id"], row["language"]): row for row in table.to_pylist() if row["translated"] is True
    }


def answer_requests(
    items: list[dict], languages: list[str], translations: Mapping[tuple[str, str], dict]
) -> list[dict[str, Any]]:
    rows = []
    for item in items:
        for language in languages:
            translated = translations.get((item["id"], language))
            question = translated["input"] if translated else item["input"]
            context = translated["trip_labels"] if translated else item["trip_labels"][language]
            golds = [*item["golds"], *([translated["output"]] if translated else [])]
            for mode in MODES:
                rows.append(
                    {
                        "qa_id": item["qa_id"],
                        "question_key": item["question_key"],
                        "language": language,
                        "mode": mode,
                        "translated": translated is not None,
                        "question": question,
                        "golds": golds,
                        "path_text": context,
                        "request": AnswerRequest(
                            question,
                            context if mode == "kg_rag" else None,
                            item["path_labels"][language],
                        ),
                    }
                )
    return rows


def answer_all(model: Any, requests: list[AnswerRequest]) -> list[str]:
    """The model's answer to each request; identical prompts are asked once."""
    first: dict[tuple[str, str | None], AnswerRequest] = {}
    for request in requests:
        first.setdefault((request.question, request.context), request)
    answers = dict(zip(first, model.answer_batch(list(first.values())), strict=True))
    return [answers[(r.question, r.context)] for r in requests]


def summary(answers: list[dict[str, Any]], languages: list[str], semantic: bool) -> dict:
    """Per language, stratum and mode: exact and hallucination with intervals; the
    extractive reader's exact as a baseline row."""
    keys = ("exact", "hallucination", *(("sem_score",) if semantic else ()))
    result: dict[str, Any] = {}
    for language in languages:
        rows = [a for a in answers if a["language"] == language]
        entry: dict[str, Any] = {}
        for stratum in ("all", *eval_evidence.STRATA):
            chosen = eval_evidence.in_stratum(rows, stratum)
            entry[stratum] = {
                "questions": len({r["question_key"] for r in chosen}),
                **{
                    mode: {
                        k: eval_evidence.cell([r for r in chosen if r["mode"] == mode], k)
                        for k in keys
                    }
                    for mode in MODES
                },
                "baseline_extractive_kg_rag": {
                    "exact": eval_evidence.cell(
                        [{"exact": r["baseline_exact"]} for r in chosen if r["mode"] == "kg_rag"],
                        "exact",
                    )
                },
            }
        result[language] = entry
    return result


def fmt(value: dict[str, float] | None) -> str:
    if value is None:
        return "—"
    return f"{value['mean']:.3f} [{value['ci_low']:.3f}, {value['ci_high']:.3f}]"


def table_markdown(per_language: dict[str, dict], answer_model: str, note: str) -> str:
    lines = [
        f"# KG-RAG vs vanilla: {answer_model}",
        "",
        "Exact match and the detector's hallucination score (mean [95% interval]) over "
        "held-out test questions; `seen`: facts in the answerer's training text, `held_out`: "
        "facts kept out of it. Baseline: the extractive reader (copies the path's last "
        "entity; not an answer model).",
        "",
        note,
        "",
        "| language | stratum | questions | KG-RAG exact | vanilla exact | KG-RAG hallucination"
        " | vanilla hallucination | baseline reader exact |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for language, entry in per_language.items():
        for stratum, cells in entry.items():
            lines.append(
                f"| {language} | {stratum} | {cells['questions']} | "
                f"{fmt(cells['kg_rag']['exact'])} | {fmt(cells['vanilla']['exact'])} | "
                f"{fmt(cells['kg_rag']['hallucination'])} | "
                f"{fmt(cells['vanilla']['hallucination'])} | "
                f"{fmt(cells['baseline_extractive_kg_rag']['exact'])} |"
            )
    return "\n".join(lines) + "\n"


def run(params: KgParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    import mlflow

    languages = params.slice.languages
    splits = read_splits(inputs["examples"])
    items = question_items(
        read_parquet(inputs["multihal"]).to_pylist(), splits["test"], params.eval.max_items
    )
    strata = {r["question"]: r["stratum"] for r in read_parquet(inputs["strata"]).to_pylist()}
    translate = read_json(inputs["translate_metrics"])
    translations = translations_by_item(read_parquet(inputs["translations"]))
    answerer = make_answer_model(params.eval, inputs["answerer"], params.answerer.max_new_tokens)
    rows = answer_requests(items, languages, translations)
    requests = [r.pop("request") for r in rows]
    said = answer_all(answerer, requests)
    baseline = ExtractiveReader().answer_batch(requests)
    for row, answer, copied in zip(rows, said, baseline, strict=True):
        row.update(
            answer=answer,
            exact=exact(answer, row["golds"]),
            baseline_answer=copied,
            baseline_exact=exact(copied, row["golds"]),
            stratum=strata.get(row["question_key"], "partial"),
        )
    supported = predict(inputs["detector"], rows, params.detector.max_length)
    for row, p in zip(rows, supported, strict=True):
        row["hallucination"] = round(1 - p, 4)
    semantic = params.eval.answer_backend == "openai"
    if semantic:
        scores = semantic_scores([(r["answer"], r["golds"][0]) for r in rows])
        for row, score in zip(rows, scores, strict=True):
            row["sem_score"] = score
    per_language = summary(rows, languages, semantic)
    any_translated = any(r["translated"] for r in rows)
    claims = eval_evidence.eval_claims(
        rows,
        languages,
        answerer.name,
        eval_evidence.simplifications(any_translated, translate["note"], answerer.name),
        [params.answerer.seed],
    )
    metrics = {
        "answer_model": answerer.name,
        "baseline": ExtractiveReader.name,
        "split": "test",  # the detector's and the answerer's held-out questions
        "questions": len(items),
        "strata": {s: sum(v == s for v in strata.values()) for s in sorted(set(strata.values()))},
        "translated": any_translated,
        "per_language": per_language,
    }
    note = (
        "Questions and answers translated by kg.translate."
        if any_translated
        else f"Translation did not run ({translate['note']}): questions are English in every "
        "language; only path labels change."
    )
    markdown = table_markdown(per_language, answerer.name, note)
    tracking.configure(ctx.runtime.mlflow, ctx.root)
    lineage = tracking.lineage_tags(
        [
            "data/processed/kg/multihal.parquet",
            "data/processed/kg/detector_examples.parquet",
            f"{MODEL_DIR}/model",
            ANSWERER_DIR,
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
        mlflow.log_dict(evidence.claims_value(claims), "eval/claims.json")
        for language, entry in per_language.items():
            for mode in MODES:
                for key in ("exact", "hallucination"):
                    value = entry["all"][mode][key]
                    if value is not None:
                        mlflow.log_metric(f"{language}_{mode}_{key}", value["mean"])
    for row in rows:
        row["golds"] = list(row["golds"])
    return {
        "answers": pa.Table.from_pylist(rows),
        "metrics": metrics,
        "table": markdown,
        "claims": evidence.claims_value(claims),
    }


STAGE = Stage(
    name="kg.eval",
    run=run,
    params_key="kg",
    params=(
        "kg.eval",
        "kg.slice.languages",
        "kg.detector.experiment",
        "kg.detector.max_length",
        "kg.answerer.max_new_tokens",
        "kg.answerer.seed",
    ),
    inputs={
        "multihal": "data/processed/kg/multihal.parquet",
        "examples": "data/processed/kg/detector_examples.parquet",
        "detector": f"{MODEL_DIR}/model",
        "answerer": ANSWERER_DIR,
        "strata": "data/processed/kg/answerer_strata.parquet",
        "translations": "data/processed/kg/translations.parquet",
        "translate_metrics": "data/processed/kg/translate_metrics.json",
    },
    outputs={
        "answers": "data/processed/kg/eval_answers.parquet",
        "metrics": Output.metrics("data/processed/kg/eval_metrics.json"),
        "table": Output.in_git("data/processed/kg/eval_table.md"),
        "claims": Output.claims_json("data/processed/kg/eval_claims.json"),
    },
    headline="data/processed/kg/eval_metrics.json:questions",
)

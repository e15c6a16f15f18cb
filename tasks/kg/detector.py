"""kg.detector: train the KG-grounded hallucination detector and register it.

A cross-encoder (backbone from params: the packaged MiniLM or this project's mmBERT from
the registry) fine-tuned with Ray Train on the train questions of kg.examples, then
scored on the held-out questions: AUROC and F1 overall, per label language and per hop
count. Logged to MLflow (params, loss curve, metrics, model card) and registered as
`paperline-kg-halludetect` with aliases `candidate` and `backbone-<name>`.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tasks.core import tracking, training
from tasks.core.io import Folder, read_json, read_parquet
from tasks.core.progress import get_logger
from tasks.core.stage import Stage, StageContext
from tasks.core.train_loop import STATE_FILE
from tasks.kg import backbones, detector_train
from tasks.kg.params import KgParams

log = get_logger("paperline.kg.detector")
MODEL_DIR = "models/kg_halludetect"


def predict(
    model_dir: Path, rows: list[dict[str, Any]], max_length: int, batch: int = 64
) -> list[float]:
    """P(supported) for each (question, path_text, answer) row."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    scores: list[float] = []
    with torch.no_grad():
        for start in range(0, len(rows), batch):
            part = rows[start : start + batch]
            columns = {k: [r[k] for r in part] for k in ("question", "path_text", "answer")}
            logits = model(**detector_train.encode(tokenizer, columns, max_length)).logits
            scores += torch.softmax(logits, dim=-1)[:, 1].tolist()
    return scores


def scores_by(
    rows: list[dict], probabilities: list[float], key: str | None, threshold: float
) -> dict:
    from sklearn.metrics import f1_score, roc_auc_score

    groups: dict[str, list[int]] = {}
    for index, row in enumerate(rows):
        groups.setdefault("all" if key is None else str(row[key]), []).append(index)
    result = {}
    for name, members in sorted(groups.items()):
        labels = [rows[i]["label"] for i in members]
        probs = [probabilities[i] for i in members]
        entry = {
            "examples": len(members),
            "f1": round(float(f1_score(labels, [p >= threshold for p in probs])), 4),
        }
        if len(set(labels)) == 2:
            entry["auroc"] = round(float(roc_auc_score(labels, probs)), 4)
        result[name] = entry
    return result


def curve_csv(curve: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(
        buffer, fieldnames=["step", "loss"], extrasaction="ignore", lineterminator="\n"
    )
    writer.writeheader()
    writer.writerows({"step": p["step"], "loss": round(p["loss"], 5)} for p in curve)
    return buffer.getvalue()


def detector_card(params: KgParams, metrics: dict, summary: dict) -> tracking.ModelCard:
    overall = metrics["test"]["all"]
    return tracking.ModelCard(
        name=params.detector.registered_model,
        summary=(
            f"KG-grounded hallucination detector (MultiHal): a {params.detector.backbone} "
            "cross-encoder scoring (question, Wikidata path as text, candidate answer) → "
            "P(the path supports the answer)."
        ),
        training_data=(
            f"kg.examples over the MultiHal paths mined from the CoDEx-S Wikidata slice: "
            f"{summary['train']['examples']} training examples from "
            f"{summary['train']['questions']} questions; positives are gold answers, "
            "negatives CoDEx's verified-false triples and same-type answer swaps; "
            f"paths in {', '.join(params.slice.languages)}."
        ),
        intended_use="Flag answers a knowledge-graph path does not support (KG-RAG evaluation).",
        limitations=(
            "Trained on CoDEx-S items, whose labels are QIDs offline: it learns to compare the "
            "answer with the path's entities, not world knowledge. Questions are English."
        ),
        metrics={"test_auroc": overall.get("auroc", float("nan")), "test_f1": overall["f1"]},
    )


def run(params: KgParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    import ray.data
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    settings = params.detector
    rows = read_parquet(inputs["examples"]).to_pylist()
    train = [r for r in rows if r["split"] == "train"]
    test = [r for r in rows if r["split"] == "test"]
    backbone = backbones.backbone_folder(settings, ctx.runtime, ctx.scratch("kg"), ctx.root)
    hyper = ("batch_size", "learning_rate", "weight_decay", "warmup_fraction", "log_every")
    config = {
        **settings.model_dump(include={*hyper, "max_length", "seed"}),
        "backbone": str(backbone),
        "total_steps": detector_train.total_steps(len(train), settings),
    }
    log.info(
        "kg.detector: %s backbone, %d train / %d test examples, %d steps",
        settings.backbone,
        len(train),
        len(test),
        config["total_steps"],
    )
    columns = ["question", "path_text", "answer", "label"]
    train_data = ray.data.from_items([{k: r[k] for k in columns} for r in train]).materialize()
    trained = training.train(
        training.TrainingJob(
            name="kg.detector",
            train_loop=detector_train.train_loop,
            config=config,
            sources=[inputs["examples"], backbone],
            scaling=settings,
            max_failures=settings.max_failures,
            experiment=settings.experiment,
            run_name=f"detector-{settings.backbone}",
            lineage=["data/processed/kg/detector_examples.parquet"],
            datasets={"train": train_data},
        ),
        ctx,
    )
    checkpoint, state = trained.checkpoint, trained.state
    probabilities = predict(checkpoint, test, settings.max_length)
    metrics = {
        "backbone": settings.backbone,
        "steps": state["step"],
        "resumed_from": state["resumed_from"],
        "test": scores_by(test, probabilities, None, settings.threshold),
        "test_per_language": scores_by(test, probabilities, "language", settings.threshold),
        "test_per_hops": scores_by(test, probabilities, "hops", settings.threshold),
    }
    card = detector_card(params, metrics, read_json(inputs["examples_metrics"]))
    training.publish(
        trained,
        ctx,
        card=card,
        log_model=lambda registry_card: (
            tracking.log_transformers_model(
                AutoModelForSequenceClassification.from_pretrained(checkpoint),
                AutoTokenizer.from_pretrained(checkpoint),
                "model",
                registry_card,
                task="text-classification",
            ).model_uri
        ),
        registered_model=settings.registered_model,
        alias=["candidate", f"backbone-{settings.backbone}"],
        metrics=metrics,
        files={"curves/loss.csv": curve_csv(state["curve"])},
    )
    log.info(
        "kg.detector: test AUROC %s, F1 %s",
        metrics["test"]["all"].get("auroc"),
        metrics["test"]["all"]["f1"],
    )
    folder = Folder(
        {
            p.name: p
            for p in checkpoint.iterdir()
            if p.is_file() and p.suffix != ".pt" and p.name != STATE_FILE
        }
    )
    folder["model_card.md"] = card.to_markdown()
    return {"model": folder, "metrics": metrics, "curve": curve_csv(state["curve"])}


STAGE = Stage(
    name="kg.detector",
    run=run,
    params_key="kg",
    params=("kg.detector", "kg.slice.languages"),
    inputs={
        "examples": "data/processed/kg/detector_examples.parquet",
        "examples_metrics": "data/processed/kg/detector_examples_metrics.json",
    },
    outputs={
        "model": f"{MODEL_DIR}/model",
        "metrics": f"{MODEL_DIR}/metrics.json",
        "curve": f"{MODEL_DIR}/loss.csv",
    },
    data_deps=("models/mmbert/decay",),  # the registry's `candidate` when backbone is mmbert
    uses_ray=True,
    headline=f"{MODEL_DIR}/metrics.json:test.all.f1",
)

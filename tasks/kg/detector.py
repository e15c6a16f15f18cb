"""kg.detector: train the KG-grounded hallucination detector and register it.

A cross-encoder (backbone from params: the packaged MiniLM or this project's mmBERT from
the registry) fine-tuned with Ray Train on the train questions of kg.examples. The dev
questions choose the model (the checkpoint with the best dev AUROC, i.e. the number of
epochs) and the threshold (the best dev F1 for flagging hallucinated answers); the test
questions are scored once: AUROC and F1 overall, per label language and per hop count,
against a flag-every-answer baseline and a similarity-only baseline (the backbone's
cosine of answer and path), with intervals over questions in claims.json. Logged to MLflow
(params, loss and dev curves, metrics, claims, model card) and registered as
`paperline-kg-halludetect` with aliases `candidate` and `backbone-<name>`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tasks.core import consumer, evidence, tracking, training
from tasks.core.errors import InputError
from tasks.core.io import Folder, read_json, read_parquet
from tasks.core.progress import get_logger
from tasks.core.stage import Output, Stage, StageContext
from tasks.core.train_loop import STATE_FILE
from tasks.kg import backbones, detector_evidence, detector_train
from tasks.kg.detector_evidence import Rule
from tasks.kg.params import KgParams
from tasks.kg.serving import HalluDetectModel
from tasks.kg.splits import SPLITS, shared_questions

log = get_logger("paperline.kg.detector")
MODEL_DIR = "models/kg_halludetect"


def predict(
    model_dir: Path, rows: list[dict[str, Any]], max_length: int, batch: int = 64
) -> list[float]:
    """P(supported) for each (question, path_text, answer) row."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir)
    columns = {k: [r[k] for r in rows] for k in detector_train.TEXT_COLUMNS}
    return detector_train.supported_probabilities(model, tokenizer, columns, max_length, batch)


def consumer_example(rows: list[dict[str, Any]]) -> Any:
    """Two real rows as a consumer sends them: question, answer, the path's text."""
    import pandas as pd

    return pd.DataFrame(
        [
            {"question": r["question"], "answer": r["answer"], "path": r["path_text"]}
            for r in rows[:2]
        ]
    )


def scores_by(
    rows: list[dict], probabilities: list[float], key: str | None, threshold: float
) -> dict:
    """AUROC and F1 (flagging hallucinated answers: 1 − P(supported) ≥ threshold) per group."""
    from sklearn.metrics import roc_auc_score

    groups: dict[str, list[int]] = {}
    for index, row in enumerate(rows):
        groups.setdefault("all" if key is None else str(row[key]), []).append(index)
    result = {}
    for name, members in sorted(groups.items()):
        labels = [rows[i]["label"] for i in members]
        flags = np.array([1 - probabilities[i] >= threshold for i in members])
        truth = detector_evidence.hallucinated([rows[i] for i in members])
        entry = {"examples": len(members), "f1": round(detector_evidence.f1(flags, truth), 4)}
        if len(set(labels)) == 2:
            entry["auroc"] = round(
                float(roc_auc_score(labels, [probabilities[i] for i in members])), 4
            )
        result[name] = entry
    return result


def split_rows(rows: list[dict[str, Any]], path: Path) -> dict[str, list[dict[str, Any]]]:
    """The examples by split; each split must hold both labels, and no question two splits."""
    if shared := shared_questions(rows):
        raise InputError(
            f"{path}: {len(shared)} question(s) in two splits (e.g. {sorted(shared)[0]!r}); "
            "rerun kg.examples, which splits by question"
        )
    splits = {name: [r for r in rows if r["split"] == name] for name in SPLITS}
    for name, members in splits.items():
        if {r["label"] for r in members} != {0, 1}:
            raise InputError(
                f"{path}: the {name} split has {len(members)} examples without both labels; "
                "raise kg.qa's question counts or kg.examples' dev/test fractions"
            )
    return splits


def best_evaluation(evaluations: list[dict[str, Any]]) -> dict[str, Any]:
    """The dev evaluation with the highest AUROC; the earliest (fewest epochs) on ties."""
    return max(evaluations, key=lambda e: (e["auroc"], -e["step"]))


def chosen_checkpoint(trained: training.TrainedModel, evaluation: dict[str, Any]) -> Path:
    folder = trained.checkpoint.parent / evaluation["checkpoint"]
    if not (folder / STATE_FILE).exists():
        raise RuntimeError(f"kg.detector: the dev-chosen checkpoint {folder} is missing")
    return folder


def dev_curve_csv(evaluations: list[dict[str, Any]]) -> str:
    lines = ["step,epochs,dev_auroc"]
    lines += [f"{e['step']},{e['epochs']},{e['auroc']}" for e in evaluations]
    return "\n".join(lines) + "\n"


def detector_card(params: KgParams, metrics: dict, summary: dict) -> tracking.ModelCard:
    overall = metrics["test"]["all"]
    dev = metrics["dev"]
    return tracking.ModelCard(
        name=params.detector.registered_model,
        summary=(
            f"KG-grounded hallucination detector (MultiHal): a {params.detector.backbone} "
            "cross-encoder scoring (question, Wikidata path as text, candidate answer) → "
            "P(the path supports the answer); flags an answer as hallucinated when "
            f"1 − P ≥ {dev['threshold']:.4f} (the best dev F1)."
        ),
        training_data=(
            f"kg.examples over the MultiHal paths mined from the CoDEx-S Wikidata slice: "
            f"{summary['train']['examples']} training examples from "
            f"{summary['train']['questions']} questions; positives are gold answers, "
            "negatives CoDEx's verified-false triples and same-type answer swaps; "
            f"paths in {', '.join(params.slice.languages)}. The checkpoint after "
            f"{dev['chosen_epochs']:g} epoch(s) had the best AUROC on "
            f"{summary['dev']['questions']} dev questions; test questions are disjoint."
        ),
        intended_use="Flag answers a knowledge-graph path does not support (KG-RAG evaluation).",
        limitations=(
            "Trained on CoDEx-S items, whose labels are QIDs offline: it learns to compare the "
            "answer with the path's entities, not world knowledge. Questions are English."
        ),
        metrics={
            "test_auroc": overall.get("auroc", float("nan")),
            "test_f1": overall["f1"],
            "dev_auroc": dev["auroc"],
        },
    )


def training_config(settings: Any, backbone: Path, train_examples: int) -> dict[str, Any]:
    hyper = ("batch_size", "learning_rate", "weight_decay", "warmup_fraction", "log_every")
    return {
        **settings.model_dump(include={*hyper, "max_length", "seed"}),
        "backbone": str(backbone),
        "steps_per_epoch": detector_train.steps_per_epoch(train_examples, settings.batch_size),
        "total_steps": detector_train.total_steps(train_examples, settings),
        "evaluation_steps": detector_train.evaluation_steps(train_examples, settings),
    }


def text_columns(rows: list[dict[str, Any]]) -> dict[str, list]:
    return {k: [r[k] for r in rows] for k in (*detector_train.TEXT_COLUMNS, "label")}


def held_out_rules(
    dev: list[dict],
    test: list[dict],
    dev_supported: list[float],
    test_supported: list[float],
    backbone: Path,
    backbone_name: str,
) -> tuple[Rule, list[Rule]]:
    """The detector and its baselines, each thresholded on dev and applied to test."""
    truth = detector_evidence.hallucinated(dev)
    detector = detector_evidence.rule(
        "detector",
        f"{backbone_name} cross-encoder detector (question + KG path + answer)",
        truth,
        1 - np.asarray(dev_supported),
        1 - np.asarray(test_supported),
    )
    flag_all = detector_evidence.rule(
        "flag_all", "flag-every-answer baseline", truth, np.ones(len(dev)), np.ones(len(test))
    )
    similarity = detector_evidence.similarity_scores(backbone, dev + test)
    similar = detector_evidence.rule(
        "similarity",
        f"similarity-only baseline ({backbone_name} cosine of answer and path, no training)",
        truth,
        -similarity[: len(dev)],
        -similarity[len(dev) :],
    )
    in_path = detector_evidence.rule(
        "answer_in_path",
        "answer-in-path rule (the answer's text absent from the KG path, no training)",
        truth,
        detector_evidence.answer_absent_scores(dev),
        detector_evidence.answer_absent_scores(test),
    )
    return detector, [flag_all, similar, in_path]


def baseline_metrics(baselines: list[Rule], test: list[dict]) -> dict[str, dict]:
    truth = detector_evidence.hallucinated(test)
    labels = np.array([r["label"] for r in test])
    return {
        rule.key: {
            "name": rule.name,
            "threshold": round(rule.threshold, 4),
            "test_f1": round(detector_evidence.f1(rule.flags(), truth), 4),
            "test_auroc": round(evidence.auroc(labels, -rule.test_scores), 4),
        }
        for rule in baselines
    }


def questions_per_split(splits: dict[str, list[dict]]) -> dict[str, int]:
    return {name: len(set(detector_evidence.question_units(rows))) for name, rows in splits.items()}


def run(params: KgParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    import ray.data

    settings = params.detector
    splits = split_rows(read_parquet(inputs["examples"]).to_pylist(), inputs["examples"])
    train, dev, test = (splits[name] for name in SPLITS)
    backbone = backbones.backbone_folder(settings, ctx.runtime, ctx.scratch("kg"), ctx.root)
    config = training_config(settings, backbone, len(train))
    log.info(
        "kg.detector: %s backbone, %d train / %d dev / %d test examples, %d steps, dev at %s",
        settings.backbone,
        len(train),
        len(dev),
        len(test),
        config["total_steps"],
        config["evaluation_steps"],
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
            data={"dev": text_columns(dev)},
            datasets={"train": train_data},
            keep_checkpoints=len(config["evaluation_steps"]),  # the dev-chosen one among them
        ),
        ctx,
    )
    state = trained.state
    chosen = best_evaluation(state["dev"])
    checkpoint = chosen_checkpoint(trained, chosen)
    test_supported = predict(checkpoint, test, settings.max_length)  # test, read once
    detector, baselines = held_out_rules(
        dev, test, chosen["scores"], test_supported, backbone, settings.backbone
    )
    threshold = detector.threshold
    evaluations = [{k: v for k, v in e.items() if k != "scores"} for e in state["dev"]]
    metrics = {
        "backbone": settings.backbone,
        "steps": state["step"],
        "resumed_from": state["resumed_from"],
        "questions": questions_per_split(splits),
        "dev": {
            "evaluations": evaluations,
            "chosen_step": chosen["step"],
            "chosen_epochs": chosen["epochs"],
            "auroc": chosen["auroc"],
            "threshold": round(threshold, 4),
            "f1": scores_by(dev, chosen["scores"], None, threshold)["all"]["f1"],
        },
        "test": scores_by(test, test_supported, None, threshold),
        "test_per_language": scores_by(test, test_supported, "language", threshold),
        "test_per_hops": scores_by(test, test_supported, "hops", threshold),
        "baselines": baseline_metrics(baselines, test),
    }
    train_questions = metrics["questions"]["train"]
    claims = detector_evidence.detector_claims(
        detector,
        baselines,
        np.asarray(test_supported),
        test,
        detector_evidence.simplifications(settings.backbone, train_questions, settings.epochs),
        [settings.seed],
    )
    claims_json = evidence.claims_value(claims)
    card = detector_card(params, metrics, read_json(inputs["examples_metrics"]))
    training.publish(
        trained,
        ctx,
        card=card,
        log_model=lambda registry_card: (
            consumer.log_pyfunc_model(
                HalluDetectModel(threshold, settings.max_length),
                "model",
                registry_card,
                consumer_example(test),
                artifacts={"model": checkpoint},
            ).model_uri
        ),
        registered_model=settings.registered_model,
        alias=["candidate", f"backbone-{settings.backbone}"],
        metrics=metrics,
        files={
            "curves/loss.csv": training.curve_csv(state["curve"]),
            "curves/dev_auroc.csv": dev_curve_csv(evaluations),
            "claims.json": json.dumps(claims_json, indent=2),
        },
    )
    for claim in claims:
        log.info(
            "kg.detector: %s = %.4f [%.4f, %.4f] over %d %s: %s",
            claim.id,
            claim.estimate,
            claim.ci_low,
            claim.ci_high,
            claim.n,
            claim.unit,
            claim.verdict,
        )
    folder = Folder(
        {
            p.name: p
            for p in checkpoint.iterdir()
            if p.is_file() and p.suffix != ".pt" and p.name != STATE_FILE
        }
    )
    folder["model_card.md"] = card.to_markdown()
    return {
        "model": folder,
        "metrics": metrics,
        "curve": training.curve_csv(state["curve"]),
        "claims": claims_json,
    }


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
        "metrics": Output.metrics(f"{MODEL_DIR}/metrics.json"),
        "curve": Output.plots(
            f"{MODEL_DIR}/loss.csv",
            x="step",
            y="loss",
            title="KG hallucination detector training loss",
        ),
        "claims": Output.claims_json("models/kg_halludetect/claims.json"),
    },
    data_deps=("models/mmbert/decay",),  # the registry's `candidate` when backbone is mmbert
    uses_ray=True,
    headline=f"{MODEL_DIR}/metrics.json:test.all.f1",
)

"""scam.guard: train the URL guard (a char-CNN over hostnames) and register it.

Blocklisted hosts against allowlisted and benign ones (tasks/scam/guard_data.py), split by
registered domain; trained with Ray Train (tasks/scam/guard_train.py). The decision
threshold comes from params, so nothing is chosen by looking at the test split: precision,
recall and F1 at that threshold and AUROC, on validation and test. Logged to MLflow (params,
loss per epoch, metrics, model card) and registered as `paperline-url-guard@candidate`.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from tasks.core import consumer, tracking, training
from tasks.core.errors import InputError
from tasks.core.io import Folder
from tasks.core.progress import get_logger
from tasks.core.stage import Output, Stage, StageContext
from tasks.scam import guard_train
from tasks.scam.blocklist import Blocklist
from tasks.scam.guard_data import (
    SPLITS,
    TRAIN_DOMAINS,
    Example,
    build_examples,
    encode_hosts,
    read_benign_hosts,
    split_summary,
)
from tasks.scam.guard_model import CharCNN, GuardConfig, load_model, model_files, score_hosts
from tasks.scam.params import ScamParams
from tasks.scam.serving import UrlGuardModel

log = get_logger("paperline.scam.guard")
MODEL_DIR = "models/url_guard"
BLOCKLIST = "data/processed/scam/blocklist.parquet"
BENIGN = "data/seed/scam/benign_hosts.txt"


CURVE_FIELDS = ("epoch", "step", "loss")


def split_scores(model: CharCNN, examples: list[Example], threshold: float) -> dict[str, Any]:
    """Precision, recall and F1 at `threshold`, and AUROC (None when one class is absent)."""
    from sklearn.metrics import f1_score, precision_score, recall_score, roc_auc_score

    labels = [e.label for e in examples]
    probabilities = score_hosts(model, [e.host for e in examples])
    predicted = [p >= threshold for p in probabilities]
    both = len(set(labels)) == 2
    return {
        "hosts": len(examples),
        "positive": sum(labels),
        "flagged": sum(predicted),
        "precision": round(float(precision_score(labels, predicted, zero_division=0)), 4),
        "recall": round(float(recall_score(labels, predicted, zero_division=0)), 4),
        "f1": round(float(f1_score(labels, predicted, zero_division=0)), 4),
        "auroc": round(float(roc_auc_score(labels, probabilities)), 4) if both else None,
    }


def guard_card(params: ScamParams, metrics: dict[str, Any]) -> tracking.ModelCard:
    settings, splits = params.guard, metrics["examples"]
    test = metrics["test"]
    figures = {
        f"{split}_{key}": metrics[split][key]
        for split in ("validation", "test")
        for key in ("precision", "recall", "f1", "auroc")
    }
    return tracking.ModelCard(
        name=settings.registered_model,
        summary=(
            "URL guard (Scam2Prompt): a character-level CNN over a normalized hostname → "
            "P(malicious). Input: `tasks.scam.guard_data.encode_hosts` ids "
            f"({settings.max_length} characters, the host's end); output: one logit."
        ),
        training_data=(
            f"Positives: the {metrics['positives']} blocklisted hosts (`block` entries of "
            "scam.blocklist: the shipped sample of MetaMask's eth-phishing-detect list). "
            f"Negatives: {metrics['negatives']} hosts, allowlisted or benign (from the installed "
            f"packages' metadata and the Python standard library, {BENIGN}). Split by "
            f"registered domain: {splits['train']['hosts']} train / "
            f"{splits['validation']['hosts']} validation / {splits['test']['hosts']} test hosts."
        ),
        intended_use=(
            f"An advisory detector in the scam audit's oracle (`url_guard`, P ≥ "
            f"{settings.threshold:g}), reported apart from the blocklists: it points at hosts "
            "that look like listed phishing domains. Not a replacement for a blocklist."
        ),
        limitations=(
            f"Trained on {metrics['positives']} positives from a sample list (mostly 2017-18 "
            "crypto-wallet and token-sale phishing) against software-documentation hosts, so it "
            "partly learns what a docs site looks like. It sees the host's characters only (no "
            "path, page, age or reputation): expect false positives on unfamiliar brands and "
            f"misses on ordinary-looking scam hosts. Test: {test['hosts']} hosts, "
            f"{test['positive']} positive; the threshold is fixed, not calibrated."
        ),
        metrics={k: v for k, v in figures.items() if v is not None},
    )


def log_model(model: CharCNN, card: tracking.ModelCard) -> str:
    """Log the network as the URL-string pyfunc (serving.UrlGuardModel) in the active run,
    its folder as the artifact; its model URI."""
    import pandas as pd

    example = pd.DataFrame({"url": ["https://docs.python.org/3/", "golemairdrop.com/claim"]})
    with tempfile.TemporaryDirectory() as folder:
        for name, content in model_files(model).items():
            data = content if isinstance(content, bytes) else json.dumps(content).encode()
            (Path(folder) / name).write_bytes(data)
        info = consumer.log_pyfunc_model(
            UrlGuardModel(),
            "model",
            card,
            example,
            artifacts={"model": folder},
            packages=("torch", "pandas", "idna", "tldextract"),
        )
    return info.model_uri


def run(params: ScamParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    settings = params.guard
    entries = Blocklist.from_table(inputs["blocklist"]).entries
    examples = build_examples(entries, read_benign_hosts(inputs["benign"]), settings)
    by_split = {split: [e for e in examples if e.split == split] for split in SPLITS}
    train = by_split["train"]
    positives = sum(e.label for e in train)
    if not 0 < positives < len(train):
        raise InputError(
            f"scam.guard: {positives} of the {len(train)} training hosts are blocklisted; "
            "it needs both kinds (check the lists and scam.guard's shares)"
        )
    network = GuardConfig(
        max_length=settings.max_length,
        embedding_dim=settings.embedding_dim,
        channels=settings.channels,
        kernel_widths=tuple(settings.kernel_widths),
        dropout=settings.dropout,
        threshold=settings.threshold,
    )
    config = {
        **settings.model_dump(
            include={"epochs", "checkpoint_every", "batch_size", "learning_rate", "seed"}
        ),
        "model": asdict(network),
        "pos_weight": (len(train) - positives) / positives,  # balances the classes' losses
    }
    log.info(
        "scam.guard: %d train hosts (%d blocklisted), %d epochs",
        len(train),
        positives,
        settings.epochs,
    )
    trained = training.train(
        training.TrainingJob(
            name="scam.guard",
            train_loop=guard_train.train_loop,
            config=config,
            scaling=settings.scaling,
            max_failures=settings.max_failures,
            experiment=settings.experiment,
            run_name="url-guard",
            params={"model": config["model"], "train_hosts": len(train)},
            data={
                "ids": encode_hosts([e.host for e in train], settings.max_length),
                "labels": np.array([e.label for e in train], dtype=np.float32),
            },
        ),
        ctx,
    )
    model, state = load_model(trained.checkpoint), trained.state
    metrics = {
        "threshold": settings.threshold,
        "epochs": state["epoch"],
        "steps": state["step"],
        "resumed_from": state["resumed_from"],
        "examples": split_summary(examples),
        "positives": sum(e.label for e in examples),
        "negatives": sum(1 - e.label for e in examples),
        **{
            split: split_scores(model, by_split[split], settings.threshold)
            for split in ("validation", "test")
        },
    }
    card = guard_card(params, metrics)
    training.publish(
        trained,
        ctx,
        card=card,
        log_model=lambda registry_card: log_model(model, registry_card),
        registered_model=settings.registered_model,
        metrics=metrics,
        files={"curves/loss.csv": training.curve_csv(state["curve"], CURVE_FIELDS)},
    )
    test = metrics["test"]
    log.info(
        "scam.guard: test precision %s, recall %s, AUROC %s at threshold %g",
        test["precision"],
        test["recall"],
        test["auroc"],
        settings.threshold,
    )
    # the registered domains it learned from: the audit scores only hosts outside them
    seen = "".join(f"{domain}\n" for domain in sorted({e.domain for e in train}))
    folder = Folder(
        {**model_files(model), "model_card.md": card.to_markdown(), TRAIN_DOMAINS: seen}
    )
    return {
        "model": folder,
        "metrics": metrics,
        "curve": training.curve_csv(state["curve"], CURVE_FIELDS),
    }


STAGE = Stage(
    name="scam.guard",
    run=run,
    params_key="scam",
    params=("scam.guard",),
    inputs={"blocklist": BLOCKLIST, "benign": BENIGN},
    outputs={
        "model": f"{MODEL_DIR}/model",
        "metrics": Output.metrics(f"{MODEL_DIR}/metrics.json"),
        "curve": Output.plots(
            f"{MODEL_DIR}/loss.csv", x="epoch", y="loss", title="URL guard training loss"
        ),
    },
    uses_ray=True,
    headline=f"{MODEL_DIR}/metrics.json:test.f1",
)

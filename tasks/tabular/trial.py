"""The Ray Train worker loop of one zoo trial: one family and one configuration, fitted on
each data set in turn (AdamW, minibatches, early stopping on the dev MSE).

The config holds, per data set, the model spec (models.py) and the arrays (a seeded
subsample of train, all of dev); the trial reports once, at the end, with a checkpoint of
each data set's best-on-dev weights (`<dataset>.pt`) and a state with the dev MSE per
epoch. The test split is never seen here: the stage predicts it with the chosen trials
only. A trial is seconds long, so a worker Ray restarts trains it again from the start.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import numpy as np

from tasks.core.ray_train import start_worker
from tasks.core.train_loop import MetricsLog, report_with_checkpoint


def fit_one(
    spec: dict[str, Any], arrays: dict[str, np.ndarray], config: dict[str, Any], log: Any, key: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Train one model; (its best-on-dev state dict, its summary with the dev curve)."""
    import torch

    from tasks.tabular.models import build_model, predict, training_loss

    generator = torch.Generator().manual_seed(config["seed"])
    torch.manual_seed(config["seed"])
    x = torch.as_tensor(arrays["x_train"], dtype=torch.float32)
    y = torch.as_tensor(arrays["y_train"], dtype=torch.float32)
    model = build_model(spec)
    if spec["family"] == "retrieval":
        bank = torch.randperm(len(x), generator=generator)[: spec["bank_rows"]]
        model.bank_x.copy_(x[bank])
        model.bank_y.copy_(y[bank])
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=spec["learning_rate"], weight_decay=spec["weight_decay"]
    )
    best, best_state, since, curve = math.inf, copy.deepcopy(model.state_dict()), 0, []
    batch = config["batch_size"]
    for epoch in range(1, config["epochs"] + 1):
        model.train()
        order = torch.randperm(len(x), generator=generator)
        losses = []
        for start in range(0, len(x), batch):
            rows = order[start : start + batch]
            sampled = None
            if spec["family"] == "retrieval":
                pick = torch.randperm(len(x), generator=generator)[: spec["candidates"]]
                sampled = (x[pick], y[pick], rows[:, None] == pick[None, :])
            loss = training_loss(model, spec, x[rows], y[rows], sampled)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(float(loss))
        dev = float(np.mean((predict(model, arrays["x_dev"]) - arrays["y_dev"]) ** 2))
        curve.append({"epoch": epoch, "train_loss": float(np.mean(losses)), "dev_mse": dev})
        if log is not None:
            log.add(epoch, {f"{key}_train_loss": curve[-1]["train_loss"], f"{key}_dev_mse": dev})
        if dev < best:
            best, best_state, since = dev, copy.deepcopy(model.state_dict()), 0
        else:
            since += 1
            if since >= config["patience"]:
                break
    if log is not None:
        log.flush()
    chosen = min(curve, key=lambda point: point["dev_mse"])
    summary = {"dev_mse": best, "best_epoch": chosen["epoch"], "epochs": len(curve), "curve": curve}
    return best_state, summary


def train_loop(config: dict[str, Any]) -> None:
    import torch

    rank, _ = start_worker(config)
    log = MetricsLog(config) if rank == 0 and config.get("run_id") else None
    weights, summaries, curve = {}, {}, []
    for dataset in config["datasets"]:
        weights[dataset], summaries[dataset] = fit_one(
            config["specs"][dataset], config["arrays"][dataset], config, log, dataset
        )
        curve += [{"dataset": dataset, **p} for p in summaries[dataset]["curve"]]
    state = {
        "step": sum(s["epochs"] for s in summaries.values()),
        "epoch": max(s["epochs"] for s in summaries.values()),
        "curve": curve,
        "resumed_from": [],
        "datasets": {d: {k: v for k, v in s.items() if k != "curve"} for d, s in summaries.items()},
        "specs": config["specs"],
    }

    def save(folder: Path) -> None:
        for dataset, state_dict in weights.items():
            torch.save(state_dict, folder / f"{dataset}.pt")

    metrics = {f"{d}_dev_mse": s["dev_mse"] for d, s in summaries.items()}
    report_with_checkpoint(metrics, state, save, name="final")

"""One zoo trial (a Tune trial, tasks/core/sweep.py): one family and one configuration,
fitted on each data set in turn, or on those its `datasets` names (AdamW, minibatches,
early stopping on the dev MSE).

Per data set the trial gets the model spec (models.py) and the arrays (a seeded subsample
of train, all of dev); it saves each data set's best-on-dev weights (`<dataset>.pt`) and
returns a state with the dev MSE per epoch, its curve also logged to the trial's MLflow
run. The test split is never seen here: the stage predicts it with the chosen trials only.
A trial is seconds long: one that dies is trained again from the start.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import numpy as np

from tasks.core.loop import LoopPlan, Window, fresh_state, run_loop


class EarlyStopping:
    """The loop's reporter for one fit: each epoch's dev MSE (logged to the trial's run),
    the best-on-dev weights kept, and a stop after `patience` epochs without a better one."""

    def __init__(
        self, model: Any, arrays: dict[str, np.ndarray], patience: int, log: Any, key: str
    ):
        self.model, self.arrays, self.patience, self.log, self.key = (
            model,
            arrays,
            patience,
            log,
            key,
        )
        self.best, self.best_state, self.since = math.inf, copy.deepcopy(model.state_dict()), 0

    def point(self, state: dict[str, Any], window: Window) -> dict[str, Any]:
        from tasks.tabular.models import predict

        dev = float(
            np.mean((predict(self.model, self.arrays["x_dev"]) - self.arrays["y_dev"]) ** 2)
        )
        return {"epoch": state["epoch"], "train_loss": window.loss, "dev_mse": dev}

    def report(self, state: dict[str, Any], point: dict[str, Any], checkpoint: bool) -> bool:
        if self.log is not None:
            self.log.add(
                point["epoch"],
                {
                    f"{self.key}_train_loss": point["train_loss"],
                    f"{self.key}_dev_mse": point["dev_mse"],
                },
            )
        if point["dev_mse"] < self.best:
            self.best, self.best_state, self.since = (
                point["dev_mse"],
                copy.deepcopy(self.model.state_dict()),
                0,
            )
            return False
        self.since += 1
        return self.since >= self.patience


def fit_one(
    spec: dict[str, Any], arrays: dict[str, np.ndarray], config: dict[str, Any], log: Any, key: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Train one model; (its best-on-dev state dict, its summary with the dev curve)."""
    import torch

    from tasks.tabular.models import build_model, training_loss

    generator = torch.Generator().manual_seed(config["seed"])
    torch.manual_seed(config["seed"])
    x = torch.tensor(arrays["x_train"], dtype=torch.float32)
    y = torch.tensor(arrays["y_train"], dtype=torch.float32)
    model = build_model(spec)
    if spec["family"] == "retrieval":
        bank = torch.randperm(len(x), generator=generator)[: spec["bank_rows"]]
        model.bank_x.copy_(x[bank])
        model.bank_y.copy_(y[bank])
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=spec["learning_rate"], weight_decay=spec["weight_decay"]
    )
    batch = config["batch_size"]

    def epoch_batches(epoch: int) -> Any:
        order = torch.randperm(len(x), generator=generator)
        return [order[start : start + batch] for start in range(0, len(x), batch)]

    def loss_of(rows: Any) -> Any:
        sampled = None
        if spec["family"] == "retrieval":
            pick = torch.randperm(len(x), generator=generator)[: spec["candidates"]]
            sampled = (x[pick], y[pick], rows[:, None] == pick[None, :])
        return training_loss(model, spec, x[rows], y[rows], sampled)

    stopping = EarlyStopping(model, arrays, config["patience"], log, key)
    plan = LoopPlan(epochs=config["epochs"])
    curve = run_loop(
        model, optimizer, loss_of, plan, fresh_state(), stopping, epoch_batches=epoch_batches
    )["curve"]
    if log is not None:
        log.flush()
    chosen = min(curve, key=lambda point: point["dev_mse"])
    summary = {
        "dev_mse": stopping.best,
        "best_epoch": chosen["epoch"],
        "epochs": len(curve),
        "curve": curve,
    }
    return stopping.best_state, summary


def fit_trial(
    trial: dict[str, Any],
    folder: Path,
    log: Any,
    *,
    specs: dict[str, dict[str, dict]],
    arrays: dict[str, dict[str, np.ndarray]],
) -> dict[str, Any]:
    """One configuration on every data set (tasks/core/sweep.py's `fit`): each data set's
    best-on-dev weights as `<dataset>.pt` under `folder`; the state with the dev curves."""
    import torch

    summaries, curve = {}, []
    name = f"{trial['family']}-{trial['number']}"
    for dataset in trial.get("datasets") or arrays:
        own = arrays[dataset]
        weights, summaries[dataset] = fit_one(specs[dataset][name], own, trial, log, dataset)
        torch.save(weights, folder / f"{dataset}.pt")
        curve += [{"dataset": dataset, **p} for p in summaries[dataset]["curve"]]
    return {
        "step": sum(s["epochs"] for s in summaries.values()),
        "epoch": max(s["epochs"] for s in summaries.values()),
        "curve": curve,
        "resumed_from": [],
        "datasets": {d: {k: v for k, v in s.items() if k != "curve"} for d, s in summaries.items()},
        "specs": {d: specs[d][name] for d in summaries},
    }

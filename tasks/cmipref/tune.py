"""`paperline tune cmipref`: a grid over the reward model's learning rate × modality dropout.

Each trial of the core sweep (tasks/core/sweep.py) fits the TorchTrainer the pipeline uses
(Ray Train V2 inside Tune, metrics forwarded by TuneReportCallback) for `sweep.steps`
pretraining steps on the pseudo labels, logs to its own MLflow run (a child of one sweep run
in `<experiment>-tune`) and is scored by its dev-pair accuracy against the truth: the choice
to copy into `cmipref.train`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tasks.cmipref import rm_train
from tasks.cmipref.train import (
    ARRAYS,
    LABELS,
    PAIRS,
    STAGE,
    TRUTH,
    loop_config,
    training_data,
)
from tasks.core import tracking, training
from tasks.core.errors import InputError
from tasks.core.params import Params
from tasks.core.paths import state_dir
from tasks.core.ray_runtime import init_ray
from tasks.core.stage import StageContext
from tasks.core.sweep import log_summary, mark_finished, run_trials

METRIC = "dev_accuracy_overall"


def sweep(params: Params, root: Path) -> list[dict[str, Any]]:
    """Run the grid; one row per trial, best first."""
    from ray.tune.integration.ray_train import TuneReportCallback

    settings, grid = params.cmipref.train, params.cmipref.train.sweep
    inputs = {role: root / path for role, path in STAGE.inputs.items()}
    if missing := [str(path) for path in inputs.values() if not path.exists()]:
        raise InputError(f"tune cmipref: {missing[0]} missing; run `dvc repro cmipref-label`")
    init_ray(params.runtime.ray)
    data = training_data(params.cmipref, inputs)
    base = {
        **loop_config(settings, data),
        "pretrain_steps": grid.steps,
        "finetune_steps": 0,
        "checkpoint_every": max(1, grid.steps // 3),
    }
    arrays = {k: base.pop(k) for k in ARRAYS}
    ctx = StageContext.at(root, params.runtime)
    experiment, lineage = f"{settings.experiment}-tune", [LABELS, PAIRS, TRUTH]
    parent = tracking.create_run(
        experiment,
        params.runtime.mlflow,
        run_name="rm-grid",
        tags=tracking.lineage_tags(lineage, root),
        root=root,
    )

    def fit(trial: dict[str, Any], folder: Path, log: Any) -> dict[str, Any]:
        """One trial: the pipeline's TorchTrainer on the trial's settings."""
        settings_now = {k: trial[k] for k in ("learning_rate", "modality_dropout")}
        job = training.TrainingJob(
            name="tune cmipref",
            train_loop=rm_train.train_loop,
            config={**base, **settings_now},
            data=arrays,
            sources=[],  # the sweep's inputs are fixed for its whole run
            scaling=settings.scaling,
            max_failures=0,
            run_id=trial["run_id"],
            storage=folder / "train",
            callbacks=[TuneReportCallback()],
        )
        return training.train(job, ctx).state

    trials = [
        {"learning_rate": lr, "modality_dropout": dropout}
        for lr in grid.learning_rate
        for dropout in grid.modality_dropout
    ]
    results = run_trials(
        fit,
        trials,
        ctx,
        name="rm-grid",
        names=[f"lr{t['learning_rate']:g}-dropout{t['modality_dropout']:g}" for t in trials],
        storage=state_dir(root) / "ray" / "tune" / "cmipref",
        experiment=experiment,
        parent_run=parent,
        lineage=lineage,
        resources={"cpu": 0},  # the trainer's workers hold the CPUs
        metric=METRIC,
        mode="max",
    )
    mark_finished(results)  # the next sweep trains afresh
    rows = [
        {
            **result.trial,
            "steps": int(np.nan_to_num(result.reported("step"))),
            "loss": result.reported("loss"),
            METRIC: result.reported(METRIC),
        }
        for result in results
    ]
    rows.sort(key=lambda row: -row[METRIC])
    log_summary(parent, rows, ["learning_rate", "modality_dropout"], METRIC)
    return rows

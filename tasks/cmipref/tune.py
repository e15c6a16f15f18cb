"""`paperline tune cmipref`: a grid over the reward model's learning rate × modality dropout.

Each Tune trial drives the TorchTrainer the pipeline uses (Ray Train V2 inside Tune,
metrics forwarded by TuneReportCallback) for `sweep.steps` pretraining steps on the pseudo
labels, logs to its own MLflow run (a child of one sweep run in `<experiment>-tune`) and is
scored by its dev-pair accuracy against the truth: the choice to copy into
`cmipref.train`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
from tasks.core import ray_runtime, tracking, training
from tasks.core.errors import InputError
from tasks.core.params import Params
from tasks.core.paths import state_dir
from tasks.core.ray_runtime import init_ray
from tasks.core.stage import StageContext

METRIC = "dev_accuracy_overall"


def sweep(params: Params, root: Path) -> list[dict[str, Any]]:
    """Run the grid; one row per trial, best first."""
    import mlflow
    from ray import tune
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
    tracking.configure(params.runtime.mlflow, root)
    experiment = tracking.ensure_experiment(
        f"{settings.experiment}-tune", params.runtime.mlflow, root
    )
    client = mlflow.MlflowClient()
    lineage = tracking.lineage_tags([LABELS, PAIRS, TRUTH], root)
    parent = client.create_run(experiment, run_name="rm-grid", tags=lineage).info.run_id
    storage = state_dir(root) / "ray" / "tune" / "cmipref"

    ctx = StageContext.at(root, params.runtime)
    arrays = {k: base.pop(k) for k in ARRAYS}

    def driver(trial: dict[str, Any]) -> None:
        lr, dropout = trial["learning_rate"], trial["modality_dropout"]
        trained = training.train(
            training.TrainingJob(
                name="tune cmipref",
                train_loop=rm_train.train_loop,
                config={**base, "learning_rate": lr, "modality_dropout": dropout},
                data=arrays,
                sources=[],  # the sweep's inputs are fixed for its whole run
                scaling=settings.scaling,
                max_failures=0,
                experiment=f"{settings.experiment}-tune",
                run_name=f"lr={lr:g} dropout={dropout:g}",
                lineage=[LABELS, PAIRS, TRUTH],
                tags={"mlflow.parentRunId": parent},
                storage=storage / f"lr{lr:g}-drop{dropout:g}",
                callbacks=[TuneReportCallback()],
            ),
            ctx,
        )
        mlflow.MlflowClient().set_terminated(trained.run_id)
        trained.finished_marker.touch()  # the next sweep trains afresh

    tuner = ray_runtime.tuner(
        tune.with_resources(driver, {"cpu": 0, "memory": 1}),  # the trainer's workers hold CPUs
        name="rm-grid",
        storage=storage,
        param_space={
            "learning_rate": tune.grid_search(grid.learning_rate),
            "modality_dropout": tune.grid_search(grid.modality_dropout),
        },
        tune_config=tune.TuneConfig(metric=METRIC, mode="max", max_concurrent_trials=1),
    )
    rows = []
    for result in tuner.fit():
        history = result.metrics_dataframe
        rows.append(
            {
                "learning_rate": result.config["learning_rate"],
                "modality_dropout": result.config["modality_dropout"],
                "steps": int(history["step"].max()) if history is not None else 0,
                "loss": float(history["loss"].iloc[-1]) if history is not None else float("nan"),
                METRIC: float(history[METRIC].iloc[-1]) if history is not None else float("nan"),
                "error": str(result.error) if result.error else "",
            }
        )
    rows.sort(key=lambda row: -row[METRIC])
    best = rows[0]
    client.log_param(parent, "best_learning_rate", best["learning_rate"])
    client.log_param(parent, "best_modality_dropout", best["modality_dropout"])
    client.log_metric(parent, f"best_{METRIC}", best[METRIC])
    client.log_table(parent, {k: [r[k] for r in rows] for k in rows[0]}, "trials.json")
    client.set_terminated(parent)
    return rows

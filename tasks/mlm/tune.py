"""`paperline tune mlm`: an ASHA sweep (learning rate × warmup) over the pretrain phase.

Each trial of the core sweep (tasks/core/sweep.py) fits the same TorchTrainer the pipeline
uses (Ray Train V2 inside Tune, metrics forwarded by TuneReportCallback) and logs to its own
MLflow run, a child of one sweep run in the `<experiment>-tune` experiment. ASHA
stops trials whose loss trails at each rung (`grace_period` · `reduction_factor`^k steps).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tasks.core import tracking, training
from tasks.core.errors import InputError
from tasks.core.params import Params
from tasks.core.paths import state_dir
from tasks.core.progress import get_logger
from tasks.core.ray_runtime import init_ray
from tasks.core.stage import StageContext
from tasks.core.sweep import log_summary, mark_finished, run_trials
from tasks.mlm import trainer
from tasks.mlm.params import MlmParams
from tasks.mlm.train_loop import train_loop

log = get_logger("paperline.mlm.tune")
SHARDS = "data/processed/corpus/shards/pretrain"
TOKENIZER = "models/tokenizer"


def trial_params(params: MlmParams, learning_rate: float, warmup_steps: int) -> MlmParams:
    pretrain = params.phases["pretrain"].model_copy(
        update={
            "learning_rate": learning_rate,
            "warmup_steps": warmup_steps,
            "max_steps": params.tune.max_steps,
            "epochs": 1e6,  # max_steps decides
        }
    )
    return params.model_copy(update={"phases": {**params.phases, "pretrain": pretrain}})


def sweep(params: Params, root: Path) -> list[dict[str, Any]]:
    """Run the sweep; returns one row per trial (best first) and logs the sweep to MLflow."""
    from ray.tune.integration.ray_train import TuneReportCallback
    from ray.tune.schedulers import ASHAScheduler

    mlm, space = params.mlm, params.mlm.tune
    shards, tokenizer = root / SHARDS, root / TOKENIZER
    if not (shards / "manifest.json").exists() or not tokenizer.exists():
        raise InputError(f"{SHARDS}: missing; run `dvc repro corpus-pack` first")
    init_ray(params.runtime.ray)
    ctx = StageContext.at(root, params.runtime)
    experiment, lineage = f"{mlm.experiment}-tune", [SHARDS, TOKENIZER]
    parent = tracking.create_run(
        experiment,
        params.runtime.mlflow,
        run_name="pretrain-asha",
        tags=tracking.lineage_tags(lineage, root),
        root=root,
    )
    plan = trainer.plan_phase("pretrain", trial_params(mlm, 1.0, 0), shards)
    # one in-memory copy for every trial: no read tasks competing with the trials for CPUs
    dataset = trainer.read_shards(shards)

    def fit(trial: dict[str, Any], folder: Path, log: Any) -> dict[str, Any]:
        """One trial: the pipeline's TorchTrainer on the trial's settings, its workers
        reporting to Tune (ASHA may stop it) and to the trial's run."""
        chosen = trial_params(mlm, trial["learning_rate"], trial["warmup_steps"])
        config = trainer.loop_config(
            plan,
            chosen,
            tokenizer=tokenizer,
            init_from=None,
            step_offset=0,
            tracking_uri=None,
            run_id=None,
        )
        job = training.TrainingJob(
            name="tune mlm",
            train_loop=train_loop,
            config=config,
            sources=[],  # the sweep's shards are fixed for its whole run
            scaling=mlm.training.scaling,
            max_failures=0,
            run_id=trial["run_id"],
            datasets={"train": dataset},
            storage=folder / "train",
            callbacks=[TuneReportCallback()],
        )
        return training.train(job, ctx).state

    trials = [
        {"learning_rate": lr, "warmup_steps": warmup}
        for lr in space.learning_rates
        for warmup in space.warmup_steps
    ]
    results = run_trials(
        fit,
        trials,
        ctx,
        name="pretrain-asha",
        names=[f"lr{t['learning_rate']:g}-warmup{t['warmup_steps']}" for t in trials],
        storage=state_dir(root) / "ray" / "tune" / "mlm",
        experiment=experiment,
        parent_run=parent,
        lineage=lineage,
        resources={"cpu": 0},  # the trainer's workers hold the CPUs
        max_concurrent=space.max_concurrent_trials,
        metric="loss",
        mode="min",
        scheduler=ASHAScheduler(
            time_attr="step",
            max_t=space.max_steps,
            grace_period=space.grace_period,
            reduction_factor=space.reduction_factor,
        ),
    )
    mark_finished(results)  # the next sweep trains afresh
    rows = [
        {
            **result.trial,
            "steps": int(np.nan_to_num(result.reported("step"))),
            "loss": result.reported("loss"),
            "stopped_early": result.trained is None,
        }
        for result in results
    ]
    rows.sort(key=lambda row: row["loss"])
    log_summary(parent, rows, ["learning_rate", "warmup_steps"], "loss")
    return rows

"""`paperline tune mlm`: an ASHA sweep (learning rate × warmup) over the pretrain phase.

Each Tune trial is a driver function that fits the same TorchTrainer the pipeline uses (Ray
Train V2 inside Tune: `Tuner(driver)`, metrics forwarded by TuneReportCallback) and logs to
its own MLflow run, a child of one sweep run in the `<experiment>-tune` experiment. ASHA
stops trials whose loss trails at each rung (`grace_period` · `reduction_factor`^k steps).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tasks.core import ray_runtime, tracking, training
from tasks.core.errors import InputError
from tasks.core.params import Params
from tasks.core.paths import state_dir
from tasks.core.progress import get_logger
from tasks.core.ray_runtime import init_ray
from tasks.core.stage import StageContext
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
    import mlflow
    from ray import tune
    from ray.tune.integration.ray_train import TuneReportCallback
    from ray.tune.schedulers import ASHAScheduler

    mlm, space = params.mlm, params.mlm.tune
    shards, tokenizer = root / SHARDS, root / TOKENIZER
    if not (shards / "manifest.json").exists() or not tokenizer.exists():
        raise InputError(f"{SHARDS}: missing; run `dvc repro corpus-pack` first")
    init_ray(params.runtime.ray)
    tracking.configure(params.runtime.mlflow, root)
    experiment = tracking.ensure_experiment(f"{mlm.experiment}-tune", params.runtime.mlflow, root)
    client = mlflow.MlflowClient()
    lineage = tracking.lineage_tags([SHARDS, TOKENIZER], root)
    parent = client.create_run(experiment, run_name="pretrain-asha", tags=lineage).info.run_id
    plan = trainer.plan_phase("pretrain", trial_params(mlm, 1.0, 0), shards)
    # one in-memory copy for every trial: no read tasks competing with the trials for CPUs
    dataset = trainer.read_shards(shards)
    storage = state_dir(root) / "ray" / "tune" / "mlm"

    ctx = StageContext.at(root, params.runtime)

    def driver(trial: dict[str, Any]) -> None:
        lr, warmup = trial["learning_rate"], trial["warmup_steps"]
        chosen = trial_params(mlm, lr, warmup)
        config = trainer.loop_config(
            plan,
            chosen,
            tokenizer=tokenizer,
            init_from=None,
            step_offset=0,
            tracking_uri=None,
            run_id=None,
        )
        trained = training.train(
            training.TrainingJob(
                name="tune mlm",
                train_loop=train_loop,
                config=config,
                sources=[],  # the sweep's shards are fixed for its whole run
                scaling=mlm.training.scaling,
                max_failures=0,
                experiment=f"{mlm.experiment}-tune",
                run_name=f"lr={lr:g} warmup={warmup}",
                lineage=[SHARDS, TOKENIZER],
                tags={"mlflow.parentRunId": parent},
                datasets={"train": dataset},
                storage=storage / f"lr{lr:g}-w{warmup}",
                callbacks=[TuneReportCallback()],
            ),
            ctx,
        )
        mlflow.MlflowClient().set_terminated(trained.run_id)
        trained.finished_marker.touch()  # the next sweep trains afresh

    tuner = ray_runtime.tuner(
        # A trial only drives its TorchTrainer, whose workers hold the CPUs; Tune refuses an
        # empty request, so the driver asks for one byte of memory and no CPU.
        tune.with_resources(driver, {"cpu": 0, "memory": 1}),
        name="pretrain-asha",
        storage=storage,
        param_space={
            "learning_rate": tune.grid_search(space.learning_rates),
            "warmup_steps": tune.grid_search(space.warmup_steps),
        },
        tune_config=tune.TuneConfig(
            metric="loss",
            mode="min",
            max_concurrent_trials=space.max_concurrent_trials,
            scheduler=ASHAScheduler(
                time_attr="step",
                max_t=space.max_steps,
                grace_period=space.grace_period,
                reduction_factor=space.reduction_factor,
            ),
        ),
    )
    results = tuner.fit()
    rows = []
    for result in results:
        history = result.metrics_dataframe
        rows.append(
            {
                "learning_rate": result.config["learning_rate"],
                "warmup_steps": result.config["warmup_steps"],
                "steps": int(history["step"].max()) if history is not None else 0,
                "loss": float(history["loss"].iloc[-1]) if history is not None else float("nan"),
                "error": str(result.error) if result.error else "",
            }
        )
    rows.sort(key=lambda row: row["loss"])
    client = mlflow.MlflowClient()
    best = rows[0]
    client.log_param(parent, "best_learning_rate", best["learning_rate"])
    client.log_param(parent, "best_warmup_steps", best["warmup_steps"])
    client.log_metric(parent, "best_loss", best["loss"])
    client.log_table(parent, {k: [r[k] for r in rows] for k in rows[0]}, "trials.json")
    client.set_terminated(parent)
    return rows

"""Ray Tune over the training harness: each trial is one `training.train` fit (a Ray Train
TorchTrainer under Tune, Train V2's "Tuner(driver)" pattern) with its own MLflow run, a
child of the sweep's parent run.

`run_trials(make_job, trials, ctx, ...)`: Tune runs `make_job(trial)` for every trial dict
(the driver needs no CPU: the trainer's workers hold them) and reports where its fit left
its checkpoint; the stage then chooses among the trials (on dev) and publishes what it
keeps with `training.publish`. A trial whose scratch holds a finished fit of the same work
(config and input bytes) reuses it, so a stage that failed after its sweep re-runs
quickly; `mark_finished` (after the stage's commit) makes the next sweep train afresh.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks.core import ray_runtime, training
from tasks.core.io import read_json
from tasks.core.scratch import FINISHED_FILE
from tasks.core.train_loop import STATE_FILE


@dataclass(frozen=True)
class TrialResult:
    trial: dict[str, Any]  # the trial's dict as given
    trained: training.TrainedModel


def _driver(trial: Mapping[str, Any], make_job: Callable, ctx: Any) -> None:
    import mlflow
    from ray import tune

    trained = training.train(make_job(dict(trial["trial"])), ctx)
    if trained.run_id:
        mlflow.MlflowClient().set_terminated(trained.run_id)
    tune.report(
        {
            "checkpoint": str(trained.checkpoint),
            "storage": str(trained.storage),
            "run_id": trained.run_id or "",
            "lineage": dict(trained.lineage),
        }
    )


def run_trials(
    make_job: Callable[[dict[str, Any]], training.TrainingJob],
    trials: Sequence[Mapping[str, Any]],
    ctx: Any,
    *,
    name: str,
    storage: Path,
    max_concurrent: int = 1,
) -> list[TrialResult]:
    """Fit every trial (at most `max_concurrent` at once: with a SQLite store keep 1, one
    writer); the results in the order of `trials`. A trial that failed raises, naming it.
    `make_job` must be picklable (a module-level function or a functools.partial of one)."""
    import shutil

    from ray import tune

    shutil.rmtree(storage / name, ignore_errors=True)  # trials resume from their own scratch
    indexed = [{"index": i, **dict(t)} for i, t in enumerate(trials)]
    driver = tune.with_parameters(_driver, make_job=make_job, ctx=ctx)
    tuner = ray_runtime.tuner(
        tune.with_resources(driver, {"cpu": 0, "memory": 1}),
        name=name,
        storage=storage,
        param_space={"trial": tune.grid_search(indexed)},
        tune_config=tune.TuneConfig(max_concurrent_trials=max_concurrent),
    )
    found: dict[int, TrialResult] = {}
    for result in tuner.fit():
        trial = result.config["trial"]
        if result.error or "checkpoint" not in (result.metrics or {}):
            raise RuntimeError(f"{name}: trial {trial} failed: {result.error}")
        metrics = result.metrics
        checkpoint = Path(metrics["checkpoint"])
        found[trial["index"]] = TrialResult(
            {k: v for k, v in trial.items() if k != "index"},
            training.TrainedModel(
                checkpoint=checkpoint,
                state=read_json(checkpoint / STATE_FILE),
                run_id=metrics["run_id"] or None,
                storage=Path(metrics["storage"]),
                lineage=dict(metrics["lineage"]),
            ),
        )
    return [found[i] for i in range(len(indexed))]


def mark_finished(results: Sequence[TrialResult]) -> None:
    """Mark each trial's scratch finished (the next sweep starts afresh); registered
    trials already carry their model version there."""
    for result in results:
        marker = result.trained.storage / FINISHED_FILE
        if not marker.exists():
            marker.write_text("done", encoding="utf-8")

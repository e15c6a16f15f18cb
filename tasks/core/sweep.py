"""Ray Tune sweeps of small models: one Tune function trial per configuration, each its own
MLflow run (a child of the sweep's run), results shaped like the harness's so a stage
publishes the trials it keeps with `training.publish` (card, registration after commit).

Why not a TorchTrainer per trial (`training.train` under Tune, as `paperline tune cmipref`
does): each fit starts a Ray Train controller and worker group, seconds of overhead for a
model that trains in one or two CPU-seconds. Here a trial is a function (`fit`) Tune runs
in a reused actor. The driver creates each trial's MLflow run (lineage tags, parent, params)
and ends it, so runs are written from one process at a time (SQLite), and the trial logs
its curve to it (`train_loop.MetricsLog`).

`fit(trial, folder, log) -> state`: train one configuration, save what the stage needs under
`folder` (weights), return a JSON-able state. Each trial keeps a scratch folder: a trial
whose fingerprint (its dict and the input bytes) is unchanged and which already finished is
reused, so a stage that failed after its sweep re-runs quickly; `mark_finished` (after the
stage's commit) makes the next sweep start afresh.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks.core import ray_runtime, tracking
from tasks.core.io import read_json, write_file
from tasks.core.scratch import FINISHED_FILE, fingerprint, prepare_scratch
from tasks.core.train_loop import STATE_FILE
from tasks.core.training import RUN_FILE, TRAINED_FILE, TrainedModel

CHECKPOINT = "checkpoint"


@dataclass(frozen=True)
class TrialResult:
    trial: dict[str, Any]  # the trial's dict as given
    trained: TrainedModel  # its folder (weights), state and MLflow run: what publish takes


def _trial(config: Mapping[str, Any], fit: Callable, tracking_uri: str, threads: int) -> None:
    """One Tune trial: fit into the trial's scratch folder, then mark it trained."""
    import torch
    from ray import tune

    from tasks.core.train_loop import MetricsLog

    torch.set_num_threads(threads)
    spec = config["trial"]
    folder = Path(spec["folder"])
    checkpoint = folder / CHECKPOINT
    shutil.rmtree(checkpoint, ignore_errors=True)
    checkpoint.mkdir(parents=True)
    log = MetricsLog({"tracking_uri": tracking_uri, "run_id": spec["run_id"]})
    state = fit(dict(spec["trial"]), checkpoint, log)
    log.flush()
    write_file(checkpoint / STATE_FILE, state)
    write_file(folder / TRAINED_FILE, {"checkpoint": str(checkpoint)})
    tune.report({"trained": 1})


def run_trials(
    fit: Callable[[dict[str, Any], Path, Any], dict[str, Any]],
    trials: Sequence[Mapping[str, Any]],
    ctx: Any,
    *,
    name: str,
    names: Sequence[str],
    storage: Path,
    experiment: str,
    parent_run: str,
    lineage: Sequence[str] = (),
    sources: Sequence[Path] = (),
    threads: int = 1,
    cpus_per_trial: float = 1,
    max_concurrent: int = 1,
) -> list[TrialResult]:
    """Fit every trial not already trained (at most `max_concurrent` at once; keep 1 with a
    SQLite store); the results in the order of `trials`, `names[i]` naming trial i's run
    and folder. A failed trial raises, naming it. `fit` must be picklable (module-level)."""
    import mlflow
    from ray import tune

    uri = tracking.configure(ctx.runtime.mlflow, ctx.root)
    experiment_id = tracking.ensure_experiment(experiment, ctx.runtime.mlflow, ctx.root)
    client = mlflow.MlflowClient()
    tags = tracking.lineage_tags(lineage, ctx.root)
    pending, runs = [], {}
    for trial, trial_name in zip(trials, names, strict=True):
        folder = storage / trial_name
        resuming = prepare_scratch(folder, fingerprint(dict(trial), list(sources)))
        if resuming and (folder / RUN_FILE).exists():
            runs[trial_name] = read_json(folder / RUN_FILE)["run_id"]
        else:
            run = client.create_run(
                experiment_id,
                run_name=trial_name,
                tags={**tags, "mlflow.parentRunId": parent_run, "sweep": name},
            )
            runs[trial_name] = run.info.run_id
            for key, value in trial.items():
                client.log_param(runs[trial_name], key, value)
            write_file(folder / RUN_FILE, {"run_id": runs[trial_name]})
        if not (resuming and (folder / TRAINED_FILE).exists()):
            pending.append(
                {"trial": dict(trial), "folder": str(folder), "run_id": runs[trial_name]}
            )
    if pending:
        shutil.rmtree(storage / f"tune-{name}", ignore_errors=True)  # trials keep their own
        trainable = tune.with_parameters(_trial, fit=fit, tracking_uri=uri, threads=threads)
        tuner = ray_runtime.tuner(
            tune.with_resources(trainable, {"cpu": cpus_per_trial}),
            name=f"tune-{name}",
            storage=storage,
            param_space={"trial": tune.grid_search(pending)},
            tune_config=tune.TuneConfig(max_concurrent_trials=max_concurrent, reuse_actors=True),
        )
        for result in tuner.fit():
            if result.error:
                run_id = result.config["trial"]["run_id"]
                client.set_terminated(run_id, "FAILED")
                raise RuntimeError(
                    f"{name}: trial {result.config['trial']['trial']} failed: {result.error}"
                )
    found = []
    for trial, trial_name in zip(trials, names, strict=True):
        folder = storage / trial_name
        checkpoint = Path(read_json(folder / TRAINED_FILE)["checkpoint"])
        client.set_terminated(runs[trial_name])
        trained = TrainedModel(
            checkpoint=checkpoint,
            state=read_json(checkpoint / STATE_FILE),
            run_id=runs[trial_name],
            storage=folder,
            lineage=tags,
        )
        found.append(TrialResult(dict(trial), trained))
    return found


def mark_finished(results: Sequence[TrialResult]) -> None:
    """Mark each trial's scratch finished (the next sweep starts afresh); registered
    trials already carry their model version there."""
    for result in results:
        marker = result.trained.storage / FINISHED_FILE
        if not marker.exists():
            marker.write_text("done", encoding="utf-8")

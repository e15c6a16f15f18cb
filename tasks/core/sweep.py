"""The one way paperline sweeps: Ray Tune over a list of trials, each its own MLflow run (a
child of the sweep's run), results shaped like the harness's so a stage publishes the trials
it keeps with `training.publish` (card, registration after commit).

A trial is a function `fit(trial, folder, log) -> state` that Tune runs in a reused actor:
it trains one configuration, saves what the stage needs under `folder` (weights), adds its
curve to `log` and returns a JSON-able state. Small models train in the trial itself (a
TorchTrainer per trial would start a controller and worker group, seconds of overhead for a
model that trains in one or two CPU-seconds; tabular, deltastack); bigger ones fit the
pipeline's TorchTrainer from inside the trial (`training.train` with `run_id` and
`TuneReportCallback`, `resources={"cpu": 0}`; `paperline tune mlm|cmipref`), so a scheduler
such as ASHA sees their workers' reports. The driver creates and ends every run and writes
what the trials logged, so the SQLite store has one writer however many trials run at once.

Each trial keeps a scratch folder: a trial whose fingerprint (its dict and the input bytes)
is unchanged and which already finished is reused, so a stage that failed after its sweep
re-runs quickly, and an unfinished one finds what it saved there; `mark_finished` (after
the stage's commit) makes the next sweep start afresh.
"""

from __future__ import annotations

import json
import shutil
import time
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
METRICS_FILE = "metrics.jsonl"  # a trial's curve, until the driver logs it


@dataclass(frozen=True)
class TrialResult:
    trial: dict[str, Any]  # the trial's dict as given
    folder: Path  # its scratch folder
    trained: (
        TrainedModel | None
    )  # its weights, state and MLflow run (None: the scheduler stopped it)
    history: list[dict[str, Any]]  # what it reported to Tune this sweep (empty when reused)

    def reported(self, key: str) -> float:
        """The trial's last reported `key` (from its state's curve when it was reused);
        NaN when it reported none."""
        rows = self.history or (self.trained.state.get("curve", []) if self.trained else [])
        values = [row[key] for row in rows if key in row and row[key] == row[key]]
        return float(values[-1]) if values else float("nan")


def _numbers(point: Mapping[str, Any]) -> dict[str, float]:
    return {
        k: v for k, v in point.items() if isinstance(v, int | float) and not isinstance(v, bool)
    }


class TrialLog:
    """The `log` a trial's fit adds its curve to (`add(step, values)`, `flush()`, like
    `train_loop.MetricsLog`): kept in the trial's folder and written to its MLflow run by
    the sweep's driver afterwards, so concurrent trials never write the SQLite store."""

    def __init__(self, path: Path) -> None:
        self.path, self.pending = path, []

    def add(self, step: int, values: Mapping[str, float]) -> None:
        stamp = int(time.time() * 1000)
        self.pending += [[key, float(value), stamp, step] for key, value in values.items()]

    def flush(self) -> None:
        if self.pending:
            with self.path.open("a", encoding="utf-8") as out:
                out.writelines(json.dumps(row) + "\n" for row in self.pending)
        self.pending = []


def _log_trial_metrics(folder: Path, run_id: str) -> None:
    """Send what a trial's `TrialLog` kept to its run, then drop the file."""
    import mlflow
    from mlflow.entities import Metric

    path = folder / METRICS_FILE
    if not path.exists():
        return
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    metrics = [Metric(key, value, stamp, step) for key, value, stamp, step in rows]
    client = mlflow.MlflowClient()
    for start in range(0, len(metrics), 1000):  # MLflow takes 1000 metrics per batch
        client.log_batch(run_id, metrics=metrics[start : start + 1000], synchronous=True)
    path.unlink()


def _trial(config: Mapping[str, Any], fit: Callable, threads: int) -> None:
    """One Tune trial: fit into the trial's scratch folder, then mark it trained. The
    folder is kept between attempts of the same trial (its fingerprint is unchanged), so a
    fit may resume from progress it saved there."""
    import torch
    from ray import tune

    torch.set_num_threads(threads)
    spec = config["trial"]
    folder = Path(spec["folder"])
    checkpoint = folder / CHECKPOINT
    checkpoint.mkdir(parents=True, exist_ok=True)
    log = TrialLog(folder / METRICS_FILE)
    state = fit({**spec["trial"], "run_id": spec["run_id"]}, checkpoint, log)
    log.flush()
    write_file(checkpoint / STATE_FILE, state)
    write_file(folder / TRAINED_FILE, {"checkpoint": str(checkpoint)})
    last = _numbers(state["curve"][-1]) if state.get("curve") else {}
    tune.report({**last, "trained": 1})  # the sweep's metric, when it has one, is in it


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
    resources: Mapping[str, float] | None = None,
    max_concurrent: int = 1,
    metric: str | None = None,
    mode: str | None = None,
    scheduler: Any = None,
) -> list[TrialResult]:
    """Fit every trial not already trained (at most `max_concurrent` at once); the results
    in the order of `trials`, `names[i]` naming trial i's run and folder. `fit(trial,
    folder, log)` gets the trial's dict with its `run_id` added. A trial that fits a
    TorchTrainer (training.train with `TuneReportCallback`) holds no CPU itself: give it
    `resources={"cpu": 0}`; its workers report the `metric` a `scheduler` (ASHA) stops
    trials on. A failed trial raises, naming it. `fit` must be picklable (module-level, or
    a closure cloudpickle takes)."""
    from ray import tune

    tracking.configure(ctx.runtime.mlflow, ctx.root)
    tags = tracking.lineage_tags(lineage, ctx.root)
    pending, runs = [], {}
    for trial, trial_name in zip(trials, names, strict=True):
        folder = storage / trial_name
        resuming = prepare_scratch(folder, fingerprint(dict(trial), list(sources)))
        if resuming and (folder / RUN_FILE).exists():
            runs[trial_name] = read_json(folder / RUN_FILE)["run_id"]
        else:
            runs[trial_name] = tracking.create_run(
                experiment,
                ctx.runtime.mlflow,
                run_name=trial_name,
                tags={**tags, "sweep": name},
                parent=parent_run,
                logged=dict(trial),
                root=ctx.root,
            )
            write_file(folder / RUN_FILE, {"run_id": runs[trial_name]})
        if not (resuming and (folder / TRAINED_FILE).exists()):
            pending.append(
                {"trial": dict(trial), "folder": str(folder), "run_id": runs[trial_name]}
            )
    histories: dict[str, list[dict[str, Any]]] = {}
    if pending:
        shutil.rmtree(storage / f"tune-{name}", ignore_errors=True)  # trials keep their own
        request = dict(resources or {"cpu": 1})
        if not any(request.values()):  # Tune refuses an empty request
            request["memory"] = 1
        trainable = tune.with_parameters(_trial, fit=fit, threads=threads)
        tuner = ray_runtime.tuner(
            tune.with_resources(trainable, request),
            name=f"tune-{name}",
            storage=storage,
            param_space={"trial": tune.grid_search(pending)},
            tune_config=tune.TuneConfig(
                metric=metric,
                mode=mode,
                scheduler=scheduler,
                max_concurrent_trials=max_concurrent,
                reuse_actors=scheduler is None,
            ),
        )
        for result in tuner.fit():
            spec = result.config["trial"]
            if result.error:
                _log_trial_metrics(Path(spec["folder"]), spec["run_id"])
                tracking.end_run(spec["run_id"], failed=True)
                raise RuntimeError(f"{name}: trial {spec['trial']} failed: {result.error}")
            frame = result.metrics_dataframe
            histories[spec["folder"]] = [] if frame is None else frame.to_dict("records")
    found = []
    for trial, trial_name in zip(trials, names, strict=True):
        folder = storage / trial_name
        _log_trial_metrics(folder, runs[trial_name])
        tracking.end_run(runs[trial_name])
        trained = None
        if (folder / TRAINED_FILE).exists():
            checkpoint = Path(read_json(folder / TRAINED_FILE)["checkpoint"])
            trained = TrainedModel(
                checkpoint=checkpoint,
                state=read_json(checkpoint / STATE_FILE),
                run_id=runs[trial_name],
                storage=folder,
                lineage=tags,
            )
        found.append(TrialResult(dict(trial), folder, trained, histories.get(str(folder), [])))
    return found


def mark_finished(results: Sequence[TrialResult]) -> None:
    """Mark each trial's scratch finished (the next sweep starts afresh); registered
    trials already carry their model version there."""
    for result in results:
        marker = result.folder / FINISHED_FILE
        if not marker.exists():
            marker.write_text("done", encoding="utf-8")


def log_summary(
    parent_run: str, rows: Sequence[Mapping[str, Any]], chosen: Sequence[str], metric: str
) -> None:
    """End a sweep's parent run with its table (`trials.json`, one row per trial, best
    first) and the best trial's `chosen` settings and `metric`."""
    import mlflow

    client, best = mlflow.MlflowClient(), rows[0]
    for key in chosen:
        client.log_param(parent_run, f"best_{key}", best[key])
    client.log_metric(parent_run, f"best_{metric}", best[metric])
    client.log_table(parent_run, {k: [r[k] for r in rows] for k in best}, "trials.json")
    tracking.end_run(parent_run)

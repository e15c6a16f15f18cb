"""The training harness every training stage uses, so a stage states only its model, data,
loss and schedule (its per-worker `train_loop`, built with tasks.core.train_loop) and what
it reports.

`train(job, ctx)`: a scratch folder that a killed run resumes from while its fingerprint
(config + input bytes) is unchanged, one resumable MLflow run tagged with the lineage (git
commit, dvc.lock hashes of the inputs), Ray Train's TorchTrainer from the job's scaling
under the crash-safety budget; returns the last checkpoint and its training state.
`publish(trained, ctx, ...)`: params, metrics, curves and the model into that run, and the
model registered with its card and alias once the stage's outputs are committed.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tasks.core import consumer, tracking
from tasks.core.io import read_json, write_file
from tasks.core.progress import get_logger
from tasks.core.ray_train import fit_torch
from tasks.core.scratch import FINISHED_FILE, VOLATILE_KEYS, fingerprint, prepare_scratch
from tasks.core.train_loop import STATE_FILE

log = get_logger("paperline.training")
TRAINED_FILE = "trained.json"  # the finished fit's checkpoint: a re-run before commit reuses it
RUN_FILE = "mlflow_run.json"  # the MLflow run the work logs to, kept while it is unfinished


@dataclass(frozen=True)
class TrainingJob:
    """One Ray Train fit as a stage declares it."""

    name: str  # "kg.detector": names failures and the scratch folder (.paperline/ray/kg/detector)
    train_loop: Callable[[dict[str, Any]], None]  # per worker: model, data, loss, schedule
    config: Mapping[str, Any]  # hyperparameters every worker gets; fingerprinted and logged
    scaling: Any  # ScalingParams, or params with num_workers, cpus_per_worker, use_gpu
    max_failures: int
    # inputs whose bytes decide whether a killed run may resume; None: the stage's inputs
    sources: Sequence[Path] | None = None
    experiment: str | None = None  # None: no MLflow run of its own (a part of a stage's model)
    run_id: str | None = None  # log to this run instead (a sweep trial's, tasks/core/sweep.py)
    run_name: str = ""
    # repo-relative inputs whose dvc.lock hashes tag the run; None: the stage's inputs
    lineage: Sequence[str] | None = None
    tags: Mapping[str, str] = field(default_factory=dict)  # more run tags (mlflow.* included)
    parent_run: Callable[[], str] | None = None  # a new run's parent run id, asked when needed
    params: Mapping[str, Any] = field(default_factory=dict)  # run params beyond the config
    data: Mapping[str, Any] = field(default_factory=dict)  # arrays for the workers, not logged
    datasets: Mapping[str, Any] = field(default_factory=dict)  # Ray datasets, sharded
    storage: Path | None = None  # default: ctx.scratch("ray", <area>, <stage>)
    keep_checkpoints: int = 1
    callbacks: Sequence[Any] = ()


@dataclass(frozen=True)
class TrainedModel:
    checkpoint: Path  # the last checkpoint's folder
    state: dict[str, Any]  # its training state (step, epoch, curve, resumed_from, …)
    run_id: str | None
    storage: Path
    lineage: dict[str, str]

    @property
    def finished_marker(self) -> Path:
        return self.storage / FINISHED_FILE


def curve_csv(curve: Sequence[Mapping[str, Any]], fields: Sequence[str] = ("step", "loss")) -> str:
    """A training state's curve as CSV (the `dvc plots` file a stage writes): `fields` as
    columns, floats to 5 decimals, other keys left out."""
    buffer = io.StringIO()
    writer = csv.DictWriter(
        buffer, fieldnames=list(fields), extrasaction="ignore", lineterminator="\n"
    )
    writer.writeheader()
    writer.writerows(
        {k: round(v, 5) if isinstance(v, float) else v for k, v in point.items()} for point in curve
    )
    return buffer.getvalue()


def torch_threads(scaling: Any) -> int:
    """Intra-op threads per worker: the scaling's own figure, else its CPUs."""
    return getattr(scaling, "torch_threads", None) or max(1, int(scaling.cpus_per_worker))


def logged_params(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config's scalars, less run-specific keys: what the run logs as params."""
    scalars = (str, int, float, bool)
    return {k: v for k, v in config.items() if k not in VOLATILE_KEYS and isinstance(v, scalars)}


def open_run(
    job: TrainingJob,
    ctx: Any,
    storage: Path,
    resuming: bool,
    lineage: Mapping[str, str],
    params: Mapping[str, Any],
) -> str:
    """The job's MLflow run: the one its unfinished work logged to, else a new run with the
    lineage and `job.tags` (a parent from `job.parent_run()` if given) and its params."""
    runs_file = storage / RUN_FILE
    if resuming and runs_file.exists():
        return read_json(runs_file)["run_id"]
    run_id = tracking.create_run(
        job.experiment,
        ctx.runtime.mlflow,
        run_name=job.run_name or job.name,
        tags={**lineage, **job.tags},
        parent=job.parent_run() if job.parent_run is not None else None,
        logged={**params, **job.params},
        root=ctx.root,
    )
    write_file(runs_file, {"run_id": run_id})
    return run_id


def train(job: TrainingJob, ctx: Any) -> TrainedModel:
    """Fit `job` (resuming an unfinished run of the same work); its last checkpoint."""
    storage = job.storage or ctx.scratch("ray", *job.name.split("."))
    config = {"torch_threads": torch_threads(job.scaling), **job.config}
    declared = list(ctx.inputs.values())
    sources = job.sources if job.sources is not None else [ctx.root / p for p in declared]
    resuming = prepare_scratch(storage, fingerprint(config, list(sources)))
    lineage, run_id = {}, None
    if job.experiment:
        own_tags = {k: v for k, v in job.tags.items() if not k.startswith("mlflow.")}
        paths = job.lineage if job.lineage is not None else declared
        lineage = {**tracking.lineage_tags(paths, ctx.root), **own_tags}
        config["tracking_uri"] = tracking.configure(ctx.runtime.mlflow, ctx.root)
        run_id = open_run(job, ctx, storage, resuming, lineage, logged_params(config))
    elif job.run_id:
        config["tracking_uri"] = tracking.configure(ctx.runtime.mlflow, ctx.root)
        run_id = job.run_id
    config["run_id"] = run_id
    done = storage / TRAINED_FILE
    if resuming and done.exists():  # trained, but the stage stopped before its commit
        log.info("%s: already trained, reused", job.name)
        checkpoint = Path(read_json(done)["checkpoint"])
    else:
        if resuming:
            log.info("%s: resuming from its last checkpoint", job.name)
        try:
            checkpoint = fit_torch(
                job.train_loop,
                {**config, **job.data},
                storage,
                job.scaling,
                what=job.name,
                max_failures=job.max_failures,
                datasets=job.datasets,
                keep_checkpoints=job.keep_checkpoints,
                callbacks=job.callbacks,
            )
        except Exception:
            if run_id:  # a re-run resumes it (and marks it running again)
                tracking.end_run(run_id, failed=True)
            raise
        write_file(done, {"checkpoint": str(checkpoint)})
    return TrainedModel(
        checkpoint=checkpoint,
        state=read_json(checkpoint / STATE_FILE),
        run_id=run_id,
        storage=storage,
        lineage=lineage,
    )


def publish(
    trained: TrainedModel,
    ctx: Any,
    *,
    card: tracking.ModelCard,
    log_model: Callable[[tracking.ModelCard], str],
    registered_model: str,
    alias: str | Sequence[str] = "candidate",
    tags: Mapping[str, str] | None = None,
    metrics: Mapping[str, Any] | None = None,
    files: Mapping[str, str] | None = None,
    artifacts: Mapping[str, Path] | None = None,
) -> tracking.ModelCard:
    """Log into the job's run: `tags`, `metrics` as
    metrics.json with its top-level floats and the card's metrics as MLflow metrics, text
    files (artifact path → text, e.g. curves), artifact folders and the model
    (`log_model(card) -> model URI`); register the model once the outputs are committed,
    refused (UserError) when it was logged without a signature or an input example
    (tasks.core.consumer). Returns the card with its lineage."""
    import mlflow

    registry_card = replace(card, lineage=trained.lineage)
    with mlflow.start_run(run_id=trained.run_id, nested=mlflow.active_run() is not None):
        mlflow.set_tags(dict(tags or {}))
        if metrics is not None:
            mlflow.log_dict(dict(metrics), "metrics.json")
            mlflow.log_metrics({k: v for k, v in metrics.items() if type(v) is float})
        mlflow.log_metrics(dict(card.metrics))
        for name, text in (files or {}).items():
            mlflow.log_text(text, name)
        for name, folder in (artifacts or {}).items():
            mlflow.log_artifacts(str(folder), name)
        model_uri = log_model(registry_card)
    consumer.require_contract(model_uri)  # nothing unusable by a consumer gets registered
    tracking.register_after_commit(
        ctx, model_uri, registered_model, registry_card, alias, trained.finished_marker
    )
    return registry_card

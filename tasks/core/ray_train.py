"""One way to run a Ray Train job: a TorchTrainer that resumes from its storage folder.

Every training stage hands its worker loop, the loop's config and its scaling params here;
a re-run that finds a run under `storage` continues from its last checkpoint.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from tasks.core.errors import WorkerFailure
from tasks.core.ray_runtime import worker_failure
from tasks.core.strict_model import StrictModel


class ScalingParams(StrictModel):
    """Ray Train's ScalingConfig: how many workers and what each one holds.

    Leave at least one CPU of the cluster unclaimed by workers when training reads a Ray
    dataset (mlm's shards): its read tasks need a CPU and wait while the workers hold all.
    """

    num_workers: int = Field(default=1, ge=1)
    use_gpu: bool = False
    cpus_per_worker: float = Field(default=1, gt=0)
    torch_threads: int | None = Field(
        default=None, ge=1, description="intra-op threads per worker; null = cpus_per_worker"
    )
    gpus_per_worker: float | None = Field(default=None, gt=0)


def start_worker(config: Mapping[str, Any]) -> tuple[int, int]:
    """Inside a worker loop: seed torch, set its threads; (world rank, world size)."""
    import ray.train
    import torch

    context = ray.train.get_context()
    torch.manual_seed(config["seed"])
    torch.set_num_threads(config["torch_threads"])
    return context.get_world_rank(), context.get_world_size()


def fit_torch(
    train_loop: Callable[[dict[str, Any]], None],
    config: dict[str, Any],
    storage: Path,
    scaling: Any,
    *,
    what: str,
    max_failures: int,
    datasets: Mapping[str, Any] | None = None,
    keep_checkpoints: int = 1,
    callbacks: Sequence[Any] = (),
) -> Path:
    """Fit under `storage`; the last checkpoint's folder. `scaling`: a ScalingParams, or
    any params with its num_workers, cpus_per_worker, use_gpu (gpus_per_worker optional)."""
    import ray
    import ray.train
    from ray.train.torch import TorchTrainer

    resources = {"CPU": scaling.cpus_per_worker}
    if scaling.use_gpu:
        resources["GPU"] = getattr(scaling, "gpus_per_worker", None) or 1
    trainer = TorchTrainer(
        train_loop,
        train_loop_config=config,
        scaling_config=ray.train.ScalingConfig(
            num_workers=scaling.num_workers,
            use_gpu=scaling.use_gpu,
            resources_per_worker=resources,
        ),
        run_config=ray.train.RunConfig(
            name=storage.name,
            storage_path=str(storage.parent),
            failure_config=ray.train.FailureConfig(max_failures=max_failures),
            checkpoint_config=ray.train.CheckpointConfig(num_to_keep=keep_checkpoints),
            callbacks=list(callbacks),
            logging_config=ray.LoggingConfig(log_level="WARNING"),  # not every report
        ),
        datasets=dict(datasets or {}),
    )
    started = time.time()
    try:
        result = trainer.fit()
    except ray.train.TrainingFailedError as error:
        raise training_failure(error, what, max_failures, started) from None
    except ray.exceptions.RayError as error:  # the controller itself was lost (e.g. its node)
        raise worker_failure(error, what, started, attempts=max_failures + 1) from None
    if result.checkpoint is None:
        raise RuntimeError(f"{what}: training ended without a checkpoint")
    return Path(result.checkpoint.path)


def training_failure(error: Exception, what: str, restarts: int, since: float) -> WorkerFailure:
    """One line for a training run that still failed after `restarts` worker-group restarts:
    the first failed worker's signal or exception and its log."""
    failures = getattr(error, "worker_failures", None) or {}
    if failures:
        rank, cause = min(failures.items())
        what = f"{what} (rank {rank})"
    else:  # the controller lost a worker it was polling
        cause = getattr(error, "controller_failure", None) or error
    return worker_failure(cause, what, since, attempts=restarts + 1)

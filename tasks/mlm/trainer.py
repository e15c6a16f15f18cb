"""Build and fit one phase's TorchTrainer; its scratch folder makes a killed run resumable.

Ray Train V2 restores a run from `storage_path/name` when it finds the run's snapshot
there, so each phase trains under `.paperline/ray/mlm/<phase>/`, a scratch folder kept
while the run is unfinished and its fingerprint unchanged (see `tasks.core.scratch`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks.core.errors import InputError
from tasks.core.io import read_json
from tasks.core.ray_runtime import parquet_dataset_in_memory, read_parquet_dataset
from tasks.core.ray_train import fit_torch
from tasks.mlm.params import MlmParams, training_phase


@dataclass(frozen=True)
class PhasePlan:
    """What a phase trains on and for how long (known before any worker starts)."""

    phase: str
    shard_dir: Path
    sequences: int
    mask_ratio: float
    steps_per_epoch: int
    total_steps: int
    world_size: int


def plan_phase(phase: str, params: MlmParams, shard_dir: Path) -> PhasePlan:
    manifest = read_json(shard_dir / "manifest.json")
    training = params.training
    world = training.scaling.num_workers
    per_epoch = manifest["sequences"] // world // training.batch_size
    if per_epoch == 0:
        raise InputError(
            f"{shard_dir}: {manifest['sequences']} sequences cannot fill one step of "
            f"{world} worker(s) × {training.batch_size}; lower mlm.training.batch_size"
        )
    phase_params = params.phases[training_phase(phase)]
    total = math.ceil(phase_params.epochs * per_epoch)
    if phase_params.max_steps:
        total = min(total, phase_params.max_steps)
    return PhasePlan(
        phase, shard_dir, manifest["sequences"], manifest["mask_ratio"], per_epoch, total, world
    )


def loop_config(
    plan: PhasePlan,
    params: MlmParams,
    *,
    tokenizer: Path,
    init_from: Path | None,
    step_offset: int,
    tracking_uri: str | None,
    run_id: str | None,
    pid_dir: Path | None = None,
) -> dict[str, Any]:
    """The plain-JSON config every worker's `train_loop` receives."""
    training = params.training
    scaling = training.scaling
    phase = params.phases[training_phase(plan.phase)]
    return {
        "phase": plan.phase,
        "preset": params.preset,
        "tokenizer": str(tokenizer),
        "init_from": str(init_from) if init_from else None,
        "mask_ratio": plan.mask_ratio,
        "learning_rate": phase.learning_rate,
        "warmup_steps": phase.warmup_steps,
        "schedule": phase.schedule,
        "min_lr_ratio": phase.min_lr_ratio,
        "betas": list(training.betas),
        "weight_decay": training.weight_decay,
        "grad_clip": training.grad_clip,
        "batch_size": training.batch_size,
        "steps_per_epoch": plan.steps_per_epoch,
        "total_steps": plan.total_steps,
        "checkpoint_every": training.checkpoint_every,
        "log_every": training.log_every,
        "seed": training.seed,
        "torch_threads": scaling.torch_threads or math.ceil(scaling.cpus_per_worker),
        "step_offset": step_offset,
        "tracking_uri": tracking_uri,
        "run_id": run_id,
        "pid_dir": str(pid_dir) if pid_dir else None,
    }


def phase_dataset(plan: PhasePlan, params: MlmParams) -> Any:
    """The phase's shards as a Ray dataset: held in memory (read once, not per epoch) with
    cache_dataset, else streamed from the files each epoch."""
    return read_shards(plan.shard_dir, in_memory=params.training.cache_dataset)


def read_shards(folder: Path, in_memory: bool = True) -> Any:
    import ray.data

    data_context = ray.data.DataContext.get_current()
    data_context.execution_options.preserve_order = True  # batches in file order: resumable
    data_context.enable_progress_bars = False  # the training loop logs its own progress
    if in_memory:
        return parquet_dataset_in_memory(folder, ["input_ids"])
    return read_parquet_dataset(folder, ["input_ids"])


def fit(
    config: dict[str, Any],
    plan: PhasePlan,
    params: MlmParams,
    storage: Path,
    callbacks: Sequence[Any] = (),
    dataset: Any = None,
) -> Path:
    """Fit the phase's TorchTrainer under `storage`; returns the final checkpoint's folder.

    `dataset` defaults to streaming the phase's shards through Ray Data.
    """
    from tasks.mlm.train_loop import train_loop

    if dataset is None:
        dataset = phase_dataset(plan, params)
    training = params.training
    return fit_torch(
        train_loop,
        config,
        storage,
        training.scaling,
        what=f"mlm.{plan.phase}",
        max_failures=training.max_failures,
        datasets={"train": dataset},
        keep_checkpoints=training.keep_checkpoints,
        callbacks=callbacks,
    )

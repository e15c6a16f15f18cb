"""What every Ray Train worker loop shares: checkpoints a resumed run continues from,
AdamW with warmup, and rank 0's metrics sent to the run's MLflow run.

A checkpoint folder holds the model (however the stage saves it: `save_pretrained`, a
module folder, safetensors), `optimizer.pt` (and `scheduler.pt`) and `state.json` (step,
epoch, loss curve, the steps it resumed from). `report_with_checkpoint` writes one from
rank 0 and reports it; `resume_state` loads it back in a resumed worker.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

STATE_FILE = "state.json"  # progress: step, tokens, loss curve, resumes
OPTIMIZER_FILE, SCHEDULER_FILE = "optimizer.pt", "scheduler.pt"


def unwrapped(model: Any) -> Any:
    """The module inside Ray Train's DistributedDataParallel wrapper (or the model)."""
    return getattr(model, "module", model)


def resume_state(
    load_model: Callable[[Path], None], optimizer: Any = None, scheduler: Any = None
) -> dict | None:
    """In a worker whose run Ray resumes: `load_model(folder)` restores the weights, then the
    optimizer and scheduler states are loaded; the progress state, with this step added to
    `resumed_from`. None when the run starts fresh."""
    import ray.train
    import torch

    checkpoint = ray.train.get_checkpoint()
    if checkpoint is None:
        return None
    with checkpoint.as_directory() as folder:
        folder = Path(folder)
        load_model(folder)
        for part, name in ((optimizer, OPTIMIZER_FILE), (scheduler, SCHEDULER_FILE)):
            if part is not None:
                part.load_state_dict(torch.load(folder / name, weights_only=True))
        state = json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))
    state["resumed_from"].append(state["step"])
    return state


def report_with_checkpoint(
    metrics: dict[str, Any],
    state: dict[str, Any],
    save_model: Callable[[Path], None],
    optimizer: Any = None,
    scheduler: Any = None,
    name: str | None = None,
) -> None:
    """Report `metrics` with a checkpoint: rank 0 writes the model (`save_model(folder)`),
    the optimizer and scheduler states and `state`; every rank reports (a collective call).
    `name` names the checkpoint's folder."""
    import ray.train
    import torch

    with tempfile.TemporaryDirectory() as folder:
        checkpoint = None
        if ray.train.get_context().get_world_rank() == 0:
            path = Path(folder)
            save_model(path)
            for part, file in ((optimizer, OPTIMIZER_FILE), (scheduler, SCHEDULER_FILE)):
                if part is not None:
                    torch.save(part.state_dict(), path / file)
            (path / STATE_FILE).write_text(json.dumps(state), encoding="utf-8")
            checkpoint = ray.train.Checkpoint.from_directory(folder)
        named = {"checkpoint_dir_name": name} if name else {}
        ray.train.report(metrics, checkpoint=checkpoint, **named)


def load_pretrained_weights(model: Any) -> Callable[[Path], None]:
    """`resume_state`'s loader for a transformers model saved with `save_pretrained`."""

    def load(folder: Path) -> None:
        from safetensors.torch import load_file

        weights = load_file(folder / "model.safetensors")
        unwrapped(model).load_state_dict(weights, strict=False)  # tied decoder weight

    return load


def linear_warmup_training(model: Any, config: dict[str, Any]) -> tuple[Any, Any, dict]:
    """AdamW with linear warmup then decay over `config["steps"]`, and the progress state;
    both restored from Ray's checkpoint when the run resumes (for fine-tunes that report
    with `report_checkpoint`)."""
    import torch
    from transformers.optimization import get_linear_schedule_with_warmup

    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config["learning_rate"], weight_decay=config["weight_decay"]
    )
    scheduler = get_linear_schedule_with_warmup(optimizer, config["warmup_steps"], config["steps"])
    fresh: dict[str, Any] = {"step": 0, "epoch": 0, "curve": [], "resumed_from": []}
    state = resume_state(load_pretrained_weights(model), optimizer, scheduler) or fresh
    return optimizer, scheduler, state


class MetricsLog:
    """Rank 0's per-step metrics, sent to the phase's MLflow run at every report."""

    def __init__(self, config: dict[str, Any]) -> None:
        from mlflow import MlflowClient

        self.client = MlflowClient(tracking_uri=config["tracking_uri"])
        self.run_id = config["run_id"]
        self.pending: list[Any] = []

    def add(self, step: int, values: dict[str, float]) -> None:
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        self.pending += [Metric(k, float(v), stamp, step) for k, v in values.items()]

    def flush(self) -> None:
        if self.pending and self.run_id:
            self.client.log_batch(self.run_id, metrics=self.pending, synchronous=True)
        self.pending = []


def report_checkpoint(
    metrics: dict, model: Any, optimizer: Any, scheduler: Any, state: dict
) -> None:
    """Report with a checkpoint of a transformers model, its folder named by the step."""
    report_with_checkpoint(
        metrics,
        state,
        lambda folder: unwrapped(model).save_pretrained(folder),
        optimizer,
        scheduler,
        name=f"step-{metrics['step']:07d}",
    )

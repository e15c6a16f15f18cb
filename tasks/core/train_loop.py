"""What every Ray Train worker loop shares: AdamW with warmup, checkpoints a resumed run
continues from, and rank 0's metrics sent to the run's MLflow run.

A checkpoint folder holds the model (`save_pretrained`), the optimizer and scheduler states
and `state.json` (step, epoch, loss curve, the steps it resumed from).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

STATE_FILE = "state.json"  # progress: step, tokens, loss curve, resumes


def save_checkpoint(folder: Path, model: Any, optimizer: Any, scheduler: Any, state: dict) -> None:
    import torch

    getattr(model, "module", model).save_pretrained(folder)
    torch.save(optimizer.state_dict(), folder / "optimizer.pt")
    torch.save(scheduler.state_dict(), folder / "scheduler.pt")
    (folder / STATE_FILE).write_text(json.dumps(state), encoding="utf-8")


def restore_checkpoint(checkpoint: Any, model: Any, optimizer: Any, scheduler: Any) -> dict:
    import torch
    from safetensors.torch import load_file

    with checkpoint.as_directory() as folder:
        folder = Path(folder)
        getattr(model, "module", model).load_state_dict(
            load_file(folder / "model.safetensors"),
            strict=False,  # tied decoder weight
        )
        optimizer.load_state_dict(torch.load(folder / "optimizer.pt", weights_only=True))
        scheduler.load_state_dict(torch.load(folder / "scheduler.pt", weights_only=True))
        return json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))


def linear_warmup_training(model: Any, config: dict[str, Any]) -> tuple[Any, Any, dict]:
    """AdamW with linear warmup then decay over `config["steps"]`, and the progress state;
    both restored from Ray's checkpoint when the run resumes (for fine-tunes that report
    with `report_checkpoint`)."""
    import ray.train
    import torch
    from transformers.optimization import get_linear_schedule_with_warmup

    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config["learning_rate"], weight_decay=config["weight_decay"]
    )
    scheduler = get_linear_schedule_with_warmup(optimizer, config["warmup_steps"], config["steps"])
    state: dict[str, Any] = {"step": 0, "epoch": 0, "curve": [], "resumed_from": []}
    if checkpoint := ray.train.get_checkpoint():
        state = restore_checkpoint(checkpoint, model, optimizer, scheduler)
        state["resumed_from"].append(state["step"])
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
    """Report with a checkpoint: rank 0 writes it, every rank reports (a collective call)."""
    import ray.train

    with tempfile.TemporaryDirectory() as folder:
        checkpoint = None
        if ray.train.get_context().get_world_rank() == 0:
            save_checkpoint(Path(folder), model, optimizer, scheduler, state)
            checkpoint = ray.train.Checkpoint.from_directory(folder)
        step = metrics["step"]
        ray.train.report(metrics, checkpoint=checkpoint, checkpoint_dir_name=f"step-{step:07d}")

"""What every Ray Train worker loop shares: checkpoints a resumed run continues from,
AdamW with warmup, and rank 0's metrics sent to the run's MLflow run.

A checkpoint folder holds the model (however the stage saves it: `save_pretrained`, a
module folder, safetensors), `optimizer.pt` (and `scheduler.pt`) and `state.json` (step,
epoch, loss curve, the steps it resumed from). `report_with_checkpoint` writes one from
rank 0 and reports it; `resume_state` loads it back in a resumed worker. `RayReporter` is
the core loop's (tasks/core/loop.py) reporter inside a worker.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tasks.core.loop import Window, fresh_state

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
    both restored from Ray's checkpoint when the run resumes."""
    import torch
    from transformers.optimization import get_linear_schedule_with_warmup

    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config["learning_rate"], weight_decay=config["weight_decay"]
    )
    scheduler = get_linear_schedule_with_warmup(optimizer, config["warmup_steps"], config["steps"])
    state = resume_state(load_pretrained_weights(model), optimizer, scheduler) or fresh_state()
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


def save_pretrained(model: Any) -> Callable[[Path], None]:
    """`RayReporter`'s saver for a transformers model."""
    return lambda folder: unwrapped(model).save_pretrained(folder)


class RayReporter:
    """The loop's reporter inside a Ray Train worker. `point(state, window)` makes the
    stage's curve point; rank 0 sends its numbers to the run's MLflow run (before Ray sees
    the report: Tune may stop the trial there), and every rank reports the point to Ray
    Train, with a checkpoint named by the step (the model by `save_model`, the optimizer,
    scheduler and state) when the loop asks for one. `before_checkpoint(state)` runs on
    rank 0 first (a dev evaluation) and returns more numbers to log."""

    def __init__(
        self,
        config: dict[str, Any],
        point: Callable[[dict[str, Any], Window], dict[str, Any]],
        save_model: Callable[[Path], None],
        optimizer: Any,
        scheduler: Any = None,
        before_checkpoint: Callable[[dict[str, Any]], dict[str, float]] | None = None,
    ) -> None:
        import ray.train

        self.rank = ray.train.get_context().get_world_rank()
        self.metrics_log = MetricsLog(config) if self.rank == 0 and config.get("run_id") else None
        self.make_point, self.save_model = point, save_model
        self.optimizer, self.scheduler = optimizer, scheduler
        self.before_checkpoint = before_checkpoint

    def point(self, state: dict[str, Any], window: Window) -> dict[str, Any]:
        return self.make_point(state, window)

    def report(self, state: dict[str, Any], point: dict[str, Any], checkpoint: bool) -> bool:
        import ray.train

        extra = {}
        if checkpoint and self.before_checkpoint and self.rank == 0:
            extra = self.before_checkpoint(state)
        if self.metrics_log:
            numbers = {k: v for k, v in {**point, **extra}.items() if _is_number(v)}
            self.metrics_log.add(point["step"], {k: v for k, v in numbers.items() if k != "step"})
            self.metrics_log.flush()
        if checkpoint:
            name = f"step-{state['step']:07d}"
            report_with_checkpoint(
                point, state, self.save_model, self.optimizer, self.scheduler, name=name
            )
        else:
            ray.train.report(point)
        return False


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)

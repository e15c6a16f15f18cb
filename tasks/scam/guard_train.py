"""Ray Train job for the URL guard: the char-CNN on encoded hosts, BCE with `pos_weight`.

The training hosts travel in the loop's config (a few thousand rows of `max_length` ids);
each worker takes an equal strided share. Rank 0 logs the loss per epoch to the MLflow run
and writes a checkpoint (weights, optimizer, progress) every `checkpoint_every` epochs and
after the last; after a failure Ray restarts the workers (`max_failures`) from the last one.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tasks.core.module_folder import WEIGHTS_FILE, save_module
from tasks.core.ray_train import start_worker
from tasks.core.train_loop import MetricsLog, report_with_checkpoint, resume_state


def train_loop(config: dict[str, Any]) -> None:
    import ray.train
    import ray.train.torch
    import torch
    from safetensors.torch import load_file

    from tasks.scam.guard_model import CharCNN, GuardConfig

    rank, world = start_worker(config)
    network = CharCNN(GuardConfig(**config["model"]))
    model = ray.train.torch.prepare_model(network)  # on its device before any state is loaded
    device = ray.train.torch.get_device()
    optimizer = torch.optim.Adam(model.parameters(), lr=config["learning_rate"])

    def load(folder: Path) -> None:
        network.load_state_dict(load_file(folder / WEIGHTS_FILE, device=str(device)))

    fresh: dict[str, Any] = {"epoch": 0, "step": 0, "curve": [], "resumed_from": []}
    state = resume_state(load, optimizer) or fresh
    ids = torch.tensor(config["ids"], dtype=torch.long)  # a copy: Ray's arrays are read-only
    labels = torch.tensor(config["labels"], dtype=torch.float32)
    per_worker = len(ids) // world  # equal shares: DDP workers must take the same steps
    batch = max(1, config["batch_size"] // world)
    loss_fn = torch.nn.BCEWithLogitsLoss(
        pos_weight=torch.tensor([config["pos_weight"]], device=device)
    )
    metrics_log = MetricsLog(config) if rank == 0 and config["run_id"] else None
    while state["epoch"] < config["epochs"]:
        order = torch.randperm(
            len(ids), generator=torch.Generator().manual_seed(config["seed"] + state["epoch"])
        )[rank::world][:per_worker]
        model.train()
        losses, started = [], time.perf_counter()
        for start in range(0, per_worker, batch):
            rows = order[start : start + batch]
            loss = loss_fn(model(ids[rows].to(device)), labels[rows].to(device))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
            state["step"] += 1
        state["epoch"] += 1
        seconds = time.perf_counter() - started
        point = {
            "epoch": state["epoch"],
            "step": state["step"],
            "loss": sum(losses) / len(losses),
            "hosts_per_second": per_worker * world / seconds,
        }
        state["curve"].append(point)
        if metrics_log:
            metrics_log.add(state["step"], {k: v for k, v in point.items() if k != "step"})
            metrics_log.flush()
        if state["epoch"] % config["checkpoint_every"] == 0 or state["epoch"] == config["epochs"]:
            progress = {"epoch": state["epoch"], "loss": point["loss"]}
            report_with_checkpoint(progress, state, lambda f: save_module(network, f), optimizer)

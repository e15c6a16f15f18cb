"""Ray Train job for the URL guard: the char-CNN on encoded hosts, BCE with `pos_weight`.

The training hosts travel in the loop's config (a few thousand rows of `max_length` ids);
each worker takes an equal strided share. Rank 0 logs the loss per epoch to the MLflow run
and writes a checkpoint (weights, optimizer, progress) every `checkpoint_every` epochs and
after the last; after a failure Ray restarts the workers (`max_failures`) from the last one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tasks.core.loop import LoopPlan, Window, fresh_state, run_loop
from tasks.core.module_folder import WEIGHTS_FILE, save_module
from tasks.core.ray_train import start_worker
from tasks.core.train_loop import RayReporter, resume_state


def train_loop(config: dict[str, Any]) -> None:
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

    state = resume_state(load, optimizer) or fresh_state()
    ids = torch.tensor(config["ids"], dtype=torch.long)  # a copy: Ray's arrays are read-only
    labels = torch.tensor(config["labels"], dtype=torch.float32)
    per_worker = len(ids) // world  # equal shares: DDP workers must take the same steps
    batch = max(1, config["batch_size"] // world)
    loss_fn = torch.nn.BCEWithLogitsLoss(
        pos_weight=torch.tensor([config["pos_weight"]], device=device)
    )

    def epoch_batches(epoch: int) -> Any:
        generator = torch.Generator().manual_seed(config["seed"] + epoch)
        order = torch.randperm(len(ids), generator=generator)[rank::world][:per_worker]
        return (order[start : start + batch] for start in range(0, per_worker, batch))

    def loss_of(rows: Any) -> Any:
        return loss_fn(model(ids[rows].to(device)), labels[rows].to(device))

    def point(state: dict[str, Any], window: Window) -> dict[str, Any]:
        return {
            "epoch": state["epoch"],
            "step": state["step"],
            "loss": window.loss,
            "hosts_per_second": per_worker * world / window.seconds,
        }

    plan = LoopPlan(epochs=config["epochs"], checkpoint_every=config["checkpoint_every"])
    reporter = RayReporter(config, point, lambda f: save_module(network, f), optimizer)
    run_loop(model, optimizer, loss_of, plan, state, reporter, epoch_batches=epoch_batches)

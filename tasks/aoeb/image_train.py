"""Ray Train job for the image tower: locked-text tuning (LiT) into the embedder's space.

The fine-tuned text encoder stays frozen: the driver embeds the training captions once and
the tower learns to put each picture next to its caption, InfoNCE over in-batch negatives
(symmetric, fixed temperature). The pictures (PNG bytes) and caption vectors travel in the
loop's config (a few hundred small images). Rank 0 checkpoints every `checkpoint_every`
epochs and after the last; a killed run resumes from the last checkpoint.
"""

from __future__ import annotations

from typing import Any

from tasks.core.loop import LoopPlan, Window, fresh_state, run_loop
from tasks.core.ray_train import start_worker
from tasks.core.train_loop import RayReporter, resume_state


def train_loop(config: dict[str, Any]) -> None:
    import ray.train.torch
    import torch

    from tasks.aoeb.contrastive_train import symmetric_info_nce
    from tasks.aoeb.image_tower import ImageTower, TowerConfig, load, pixels, save

    rank, world = start_worker(config)
    tower = ImageTower(TowerConfig(embed_dim=config["embed_dim"], image_size=config["image_size"]))
    model = ray.train.torch.prepare_model(tower)
    device = ray.train.torch.get_device()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["learning_rate"])
    restored = resume_state(lambda f: tower.load_state_dict(load(f).state_dict()), optimizer)
    images = pixels([bytes(b) for b in config["images"]], config["image_size"])
    # a copy: Ray's arrays are read-only
    captions = torch.tensor(config["captions"], dtype=torch.float32)
    per_worker = len(images) // world
    batch = max(2, config["batch_size"] // world)

    def epoch_batches(epoch: int) -> Any:
        generator = torch.Generator().manual_seed(config["seed"] + epoch)
        order = torch.randperm(len(images), generator=generator)[rank::world][:per_worker]
        return (order[start : start + batch] for start in range(0, per_worker - batch + 1, batch))

    def loss_of(rows: Any) -> Any:
        logits = model(images[rows].to(device)) @ captions[rows].to(device).T
        return symmetric_info_nce(logits / config["temperature"])

    def point(state: dict[str, Any], window: Window) -> dict[str, Any]:
        return {"epoch": state["epoch"], "step": state["step"], "loss": window.loss}

    plan = LoopPlan(epochs=config["epochs"], checkpoint_every=config["checkpoint_every"])
    reporter = RayReporter(config, point, lambda f: save(tower, f), optimizer)
    run_loop(
        model,
        optimizer,
        loss_of,
        plan,
        restored or fresh_state(),
        reporter,
        epoch_batches=epoch_batches,
    )

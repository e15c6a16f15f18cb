"""Ray Train job for the image tower: locked-text tuning (LiT) into the embedder's space.

The fine-tuned text encoder stays frozen: the driver embeds the training captions once and
the tower learns to put each picture next to its caption, InfoNCE over in-batch negatives
(symmetric, fixed temperature). The pictures (PNG bytes) and caption vectors travel in the
loop's config (a few hundred small images). Rank 0 checkpoints every `checkpoint_every`
epochs and after the last; a killed run resumes from the last checkpoint.
"""

from __future__ import annotations

from typing import Any

from tasks.core.ray_train import start_worker
from tasks.core.train_loop import report_with_checkpoint, resume_state


def train_loop(config: dict[str, Any]) -> None:
    import ray.train
    import ray.train.torch
    import torch

    from tasks.aoeb.contrastive_train import symmetric_info_nce
    from tasks.aoeb.image_tower import ImageTower, TowerConfig, load, pixels, save

    rank, world = start_worker(config)
    tower = ImageTower(TowerConfig(embed_dim=config["embed_dim"], image_size=config["image_size"]))
    model = ray.train.torch.prepare_model(tower)
    device = ray.train.torch.get_device()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["learning_rate"])
    fresh: dict[str, Any] = {"epoch": 0, "step": 0, "curve": [], "resumed_from": []}
    restored = resume_state(lambda f: tower.load_state_dict(load(f).state_dict()), optimizer)
    state = restored or fresh
    images = pixels([bytes(b) for b in config["images"]], config["image_size"])
    captions = torch.tensor(
        config["captions"], dtype=torch.float32
    )  # a copy: Ray's arrays are read-only
    per_worker = len(images) // world
    batch = max(2, config["batch_size"] // world)
    while state["epoch"] < config["epochs"]:
        generator = torch.Generator().manual_seed(config["seed"] + state["epoch"])
        order = torch.randperm(len(images), generator=generator)[rank::world][:per_worker]
        model.train()
        losses = []
        for start in range(0, per_worker - batch + 1, batch):
            rows = order[start : start + batch]
            logits = model(images[rows].to(device)) @ captions[rows].to(device).T
            loss = symmetric_info_nce(logits / config["temperature"])
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
            state["step"] += 1
        state["epoch"] += 1
        state["curve"].append(
            {
                "epoch": state["epoch"],
                "step": state["step"],
                "loss": sum(losses) / max(1, len(losses)),
            }
        )
        last = state["epoch"] == config["epochs"]
        if state["epoch"] % config["checkpoint_every"] and not last:
            continue
        progress = {"epoch": state["epoch"], "loss": state["curve"][-1]["loss"]}
        report_with_checkpoint(progress, state, lambda f: save(tower, f), optimizer)

"""Training the CMI reward model: pretrain on pseudo labels, then fine-tune on truth labels.

The Ray Train job (`fit`): data-parallel workers, rank 0 checkpoints and logs to MLflow, a
killed run resumes from its last checkpoint; `paperline tune cmipref` fits the same job per
Tune trial. Each step draws `batch_size` pairs of the
current phase, drops present prompt modalities with probability `modality_dropout` (the
same for both clips of a pair) and minimises the Bradley–Terry loss of both heads and of
their mean. Phase 1 (`pretrain_steps`) reads the pseudo-labelled pairs, phase 2
(`finetune_steps`) the truth-labelled ones at `finetune_learning_rate`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tasks.core.loop import LoopPlan, Window, fresh_state, run_loop
from tasks.core.ray_train import start_worker
from tasks.core.train_loop import RayReporter, resume_state, unwrapped


class Tensors:
    """The feature bank as torch tensors, and batches drawn from it by index."""

    def __init__(self, config: dict[str, Any], device: Any) -> None:
        import torch

        self.device = device
        # copies: the arrays of a Ray Train config are read-only
        self.mels = torch.tensor(np.asarray(config["mels"]), dtype=torch.float32)
        self.texts = torch.tensor(np.asarray(config["texts"]), dtype=torch.float32)

    def prompt(self, split: dict[str, Any], rows: Any, present: Any) -> tuple:
        take = {k: np.asarray(split[k])[rows] for k in ("text", "lyrics", "reference")}
        device = self.device
        return (
            self.texts[take["text"]].to(device),
            self.texts[take["lyrics"]].to(device),
            self.mels[take["reference"]].to(device),
            present.to(device),
        )

    def clips(self, split: dict[str, Any], side: str, rows: Any) -> Any:
        return self.mels[np.asarray(split[side])[rows]].to(self.device)


def pair_rewards(model: Any, tensors: Tensors, split: dict[str, Any], rows: Any, present: Any):
    prompt = tensors.prompt(split, rows, present)
    return (
        model(tensors.clips(split, "a", rows), *prompt),
        model(tensors.clips(split, "b", rows), *prompt),
    )


def preference_accuracy(model: Any, tensors: Tensors, split: dict[str, Any]) -> dict[str, float]:
    """Share of decisive targets (not 0.5) whose side the rewards pick: per head and overall."""
    import torch

    rows = np.arange(len(np.asarray(split["a"])))
    if not len(rows):
        return {}
    model.eval()
    with torch.no_grad():
        a, b = pair_rewards(model, tensors, split, rows, torch.tensor(split["present"]))
    model.train()
    margins = torch.cat([a - b, (a - b).mean(dim=-1, keepdim=True)], dim=-1).numpy()
    targets = np.asarray(split["targets"])
    result = {}
    for column, name in enumerate(("alignment", "musicality", "overall")):
        decisive = targets[:, column] != 0.5
        if decisive.any():
            hits = (margins[decisive, column] > 0) == (targets[decisive, column] > 0.5)
            result[f"accuracy_{name}"] = float(hits.mean())
    return result


def new_model(config: dict[str, Any]) -> tuple[Any, Any]:
    import torch

    from tasks.cmipref.reward_model import CmiRewardModel, RewardModelConfig

    model = CmiRewardModel(RewardModelConfig(**config["model"]))
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config["learning_rate"], weight_decay=config["weight_decay"]
    )
    return model, optimizer


def train_loop(config: dict[str, Any]) -> None:
    import ray.train.torch
    import torch

    from tasks.cmipref.reward_model import bradley_terry_loss, load, save

    rank, _ = start_worker(config)
    model, optimizer = new_model(config)
    restored = resume_state(lambda f: model.load_state_dict(load(f).state_dict()), optimizer)
    state = restored or fresh_state()
    model = ray.train.torch.prepare_model(model)
    tensors = Tensors(config, ray.train.torch.get_device())
    pretrain = config["pretrain_steps"]

    def phase(step: int) -> str:
        return "pretrain" if step < pretrain else "finetune"

    def next_batch(state: dict[str, Any]) -> tuple[dict[str, Any], Any, Any]:
        """This step's pairs of its phase, at the phase's learning rate, with modalities
        dropped (seeded by seed, step and rank, so a resumed run draws the same)."""
        name = phase(state["step"])
        split = config[name]
        rate = config["learning_rate"] if name == "pretrain" else config["finetune_learning_rate"]
        for group in optimizer.param_groups:
            group["lr"] = rate
        rng = np.random.default_rng([config["seed"], state["step"], rank])
        rows = rng.choice(
            len(split["a"]), size=min(config["batch_size"], len(split["a"])), replace=False
        )
        present = np.asarray(split["present"])[rows].copy()
        keep = rng.random(present.shape) >= config["modality_dropout"]
        return split, rows, torch.as_tensor(present * keep, dtype=torch.float32)

    def loss_of(batch: tuple[dict[str, Any], Any, Any]) -> tuple[Any, dict[str, int]]:
        split, rows, present = batch
        reward_a, reward_b = pair_rewards(model, tensors, split, rows, present)
        targets = torch.as_tensor(np.asarray(split["targets"])[rows], dtype=torch.float32)
        return bradley_terry_loss(reward_a, reward_b, targets.to(reward_a.device)), {
            "pairs": len(rows)
        }

    def point(state: dict[str, Any], window: Window) -> dict[str, Any]:
        dev = preference_accuracy(unwrapped(model), tensors, config["dev"])
        return {
            "step": state["step"],
            "loss": window.loss,
            "phase": 0.0 if phase(state["step"] - 1) == "pretrain" else 1.0,
            "pairs_per_second": window.sums["pairs"] / window.seconds,
            **{f"dev_{k}": v for k, v in dev.items()},
        }

    every = config["checkpoint_every"]
    plan = LoopPlan(
        steps=pretrain + config["finetune_steps"],
        log_every=every,
        checkpoint_every=every,
        checkpoint_at=frozenset({pretrain}),
        grad_clip=1.0,
    )
    reporter = RayReporter(config, point, lambda f: save(unwrapped(model), f), optimizer)
    run_loop(model, optimizer, loss_of, plan, state, reporter, next_batch=next_batch)

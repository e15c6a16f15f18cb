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

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from tasks.core.ray_train import start_worker
from tasks.core.train_loop import (
    MetricsLog,
    report_with_checkpoint,
    resume_state,
    unwrapped,
)


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


def run_steps(
    model: Any,
    optimizer: Any,
    config: dict[str, Any],
    state: dict[str, Any],
    tensors: Tensors,
    report: Callable[[dict[str, float]], None],
    rank: int = 0,
) -> None:
    import torch

    from tasks.cmipref.reward_model import bradley_terry_loss

    pretrain, total = config["pretrain_steps"], config["pretrain_steps"] + config["finetune_steps"]
    window, started = [], time.perf_counter()
    while state["step"] < total:
        phase = "pretrain" if state["step"] < pretrain else "finetune"
        split = config[phase]
        rate = config["learning_rate"] if phase == "pretrain" else config["finetune_learning_rate"]
        for group in optimizer.param_groups:
            group["lr"] = rate
        rng = np.random.default_rng([config["seed"], state["step"], rank])
        rows = rng.choice(
            len(split["a"]), size=min(config["batch_size"], len(split["a"])), replace=False
        )
        present = np.asarray(split["present"])[rows].copy()
        keep = rng.random(present.shape) >= config["modality_dropout"]
        present = torch.as_tensor(present * keep, dtype=torch.float32)
        reward_a, reward_b = pair_rewards(model, tensors, split, rows, present)
        targets = torch.as_tensor(np.asarray(split["targets"])[rows], dtype=torch.float32)
        loss = bradley_terry_loss(reward_a, reward_b, targets.to(reward_a.device))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        state["step"] += 1
        window.append(loss.item())
        step = state["step"]
        if step % config["checkpoint_every"] and step not in (pretrain, total):
            continue
        dev = preference_accuracy(getattr(model, "module", model), tensors, config["dev"])
        values = {
            "loss": float(np.mean(window)),
            "phase": 0.0 if phase == "pretrain" else 1.0,
            "pairs_per_second": len(window) * len(rows) / (time.perf_counter() - started),
            **{f"dev_{k}": v for k, v in dev.items()},
        }
        state["curve"].append({"step": step, **values})
        report(values)
        window, started = [], time.perf_counter()


def new_model(config: dict[str, Any]) -> tuple[Any, Any]:
    import torch

    from tasks.cmipref.reward_model import CmiRewardModel, RewardModelConfig

    model = CmiRewardModel(RewardModelConfig(**config["model"]))
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config["learning_rate"], weight_decay=config["weight_decay"]
    )
    return model, optimizer


def train_loop(config: dict[str, Any]) -> None:
    import ray.train
    import ray.train.torch

    from tasks.cmipref.reward_model import load, save

    rank, _ = start_worker(config)
    model, optimizer = new_model(config)
    fresh: dict[str, Any] = {"step": 0, "curve": [], "resumed_from": []}
    restored = resume_state(lambda f: model.load_state_dict(load(f).state_dict()), optimizer)
    state = restored or fresh
    model = ray.train.torch.prepare_model(model)
    metrics_log = MetricsLog(config) if rank == 0 and config.get("run_id") else None

    def report(values: dict[str, float]) -> None:
        if metrics_log:
            metrics_log.add(state["step"], values)
            metrics_log.flush()
        progress = {"step": state["step"], **values}
        report_with_checkpoint(progress, state, lambda f: save(unwrapped(model), f), optimizer)

    model.train()
    tensors = Tensors(config, ray.train.torch.get_device())
    run_steps(model, optimizer, config, state, tensors, report, rank)

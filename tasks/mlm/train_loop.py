"""The Ray Train worker loop for one phase: resumable MLM training, logged from rank 0.

Every `checkpoint_every` steps rank 0 writes a checkpoint (HF model folder, optimizer,
scheduler, progress); after a worker failure or a killed run, Ray hands it back through
`ray.train.get_checkpoint()` and the loop continues from that step, skipping the batches of
the epoch it had already seen, and masking them exactly as before (see `masking`).
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

from tasks.core.loop import LoopPlan, Window, fresh_state, run_loop
from tasks.core.train_loop import (
    RayReporter,
    load_pretrained_weights,
    resume_state,
    save_pretrained,
)


def phase_schedule(optimizer: Any, total_steps: int, config: dict[str, Any]) -> Any:
    """Warmup-stable (pretrain, mid) or 1−sqrt decay (decay) over this phase's steps."""
    from transformers.optimization import get_wsd_schedule

    if config["schedule"] == "one_minus_sqrt":
        return get_wsd_schedule(
            optimizer,
            num_warmup_steps=0,
            num_stable_steps=0,
            num_decay_steps=total_steps,
            decay_type="1-sqrt",
            min_lr_ratio=config["min_lr_ratio"],
        )
    warmup = min(config["warmup_steps"], total_steps)
    return get_wsd_schedule(
        optimizer,
        num_warmup_steps=warmup,
        num_stable_steps=total_steps - warmup,
        num_decay_steps=0,
        min_lr_ratio=config["min_lr_ratio"],
    )


def stack_ids() -> Any:
    """Ray Data collate function: the packed `input_ids` as one (batch, length) long tensor."""
    import numpy as np
    import torch
    from ray.data.collate_fn import NumpyBatchCollateFn

    class StackIds(NumpyBatchCollateFn):
        def __call__(self, batch: dict[str, Any]) -> Any:
            return torch.from_numpy(np.stack(batch["input_ids"]).astype(np.int64))

    return StackIds()


def initial_model(config: dict[str, Any], tokenizer: Any) -> Any:
    from tasks.mlm.model import build_model, load_model

    if config["init_from"]:
        return load_model(config["init_from"])
    return build_model(config["preset"], tokenizer)


def train_loop(config: dict[str, Any]) -> None:
    """`train_loop_per_worker` of the phase's TorchTrainer (config: see trainer.loop_config)."""
    import ray.train
    import ray.train.torch
    import torch

    from tasks.mlm.masking import Masker
    from tasks.mlm.model import load_tokenizer

    context = ray.train.get_context()
    rank, world = context.get_world_rank(), context.get_world_size()
    if config.get("pid_dir"):  # lets an operator (or the kill/resume test) find the workers
        Path(config["pid_dir"], f"rank-{rank}.pid").write_text(str(os.getpid()))
    torch.set_num_threads(config["torch_threads"])
    torch.manual_seed(config["seed"])
    tokenizer = load_tokenizer(config["tokenizer"])
    model = ray.train.torch.prepare_model(initial_model(config, tokenizer))
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=config["learning_rate"],
        betas=tuple(config["betas"]),
        weight_decay=config["weight_decay"],
    )
    total = config["total_steps"]
    scheduler = phase_schedule(optimizer, total, config)
    state = resume_state(load_pretrained_weights(model), optimizer, scheduler)
    state = state or fresh_state(tokens=0)
    masker = Masker(tokenizer, config["mask_ratio"], config["seed"])
    device = ray.train.torch.get_device()
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")
    shard = ray.train.get_dataset_shard("train")
    offset = config["step_offset"]  # steps of the phases before: the x axis of the curves
    collate = stack_ids()

    def epoch_batches(epoch: int) -> Any:
        batches = shard.iter_torch_batches(
            batch_size=config["batch_size"], drop_last=True, collate_fn=collate
        )
        return itertools.islice(batches, config["steps_per_epoch"])

    def loss_of(ids: Any) -> tuple[Any, dict[str, int]]:
        batch = {k: v.to(device) for k, v in masker(ids, state["step"], rank).items()}
        with autocast:
            loss = model(**batch).loss
        return loss, {"tokens": int(batch["attention_mask"].sum()) * world}

    def point(state: dict[str, Any], window: Window) -> dict[str, Any]:
        state["tokens"] += window.sums["tokens"]
        return {
            "step": offset + state["step"],
            "phase_step": state["step"],
            "loss": window.loss,
            "learning_rate": window.learning_rate,
            "tokens_per_second": window.sums["tokens"] / window.seconds,
            "tokens_seen": state["tokens"],
        }

    plan = LoopPlan(
        steps=total,
        log_every=config["log_every"],
        checkpoint_every=config["checkpoint_every"],
        grad_clip=config["grad_clip"],
    )
    reporter = RayReporter(config, point, save_pretrained(model), optimizer, scheduler)
    run_loop(
        model,
        optimizer,
        loss_of,
        plan,
        state,
        reporter,
        epoch_batches=epoch_batches,
        scheduler=scheduler,
    )

"""The Ray Train worker loop for one phase: resumable MLM training, logged from rank 0.

Every `checkpoint_every` steps rank 0 writes a checkpoint (HF model folder, optimizer,
scheduler, progress); after a worker failure or a killed run, Ray hands it back through
`ray.train.get_checkpoint()` and the loop continues from that step, skipping the batches of
the epoch it had already seen, and masking them exactly as before (see `masking`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from tasks.core.train_loop import (
    MetricsLog,
    load_pretrained_weights,
    report_checkpoint,
    resume_state,
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
    total, per_epoch = config["total_steps"], config["steps_per_epoch"]
    scheduler = phase_schedule(optimizer, total, config)
    fresh: dict[str, Any] = {"step": 0, "tokens": 0, "curve": [], "resumed_from": []}
    state = resume_state(load_pretrained_weights(model), optimizer, scheduler) or fresh
    masker = Masker(tokenizer, config["mask_ratio"], config["seed"])
    metrics_log = MetricsLog(config) if rank == 0 and config["run_id"] else None
    device = ray.train.torch.get_device()
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")
    shard = ray.train.get_dataset_shard("train")
    offset = config["step_offset"]  # steps of the phases before: the x axis of the curves
    window: list[float] = []
    window_tokens, window_start = 0, time.perf_counter()
    model.train()
    collate = stack_ids()
    while state["step"] < total:
        skip = state["step"] % per_epoch
        batches = shard.iter_torch_batches(
            batch_size=config["batch_size"], drop_last=True, collate_fn=collate
        )
        for index, ids in enumerate(batches):
            if index < skip:
                continue
            if index >= per_epoch or state["step"] >= total:
                break
            batch = {k: v.to(device) for k, v in masker(ids, state["step"], rank).items()}
            with autocast:
                loss = model(**batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config["grad_clip"])
            optimizer.step()
            learning_rate = scheduler.get_last_lr()[0]  # the rate this step used
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            state["step"] += 1
            tokens = int(batch["attention_mask"].sum()) * world
            state["tokens"] += tokens
            window.append(loss.item())
            window_tokens += tokens
            step = state["step"]
            checkpoint_now = step % config["checkpoint_every"] == 0 or step == total
            if step % config["log_every"] and not checkpoint_now:
                continue
            elapsed = time.perf_counter() - window_start
            window_start = time.perf_counter()  # reporting below counts in the next window
            values = {
                "loss": sum(window) / len(window),
                "learning_rate": learning_rate,
                "tokens_per_second": window_tokens / max(elapsed, 1e-9),
                "tokens_seen": state["tokens"],
            }
            state["curve"].append({"step": offset + step, "phase_step": step, **values})
            window, window_tokens = [], 0
            if metrics_log:  # before reporting: Tune may stop the trial at this report
                metrics_log.add(offset + step, values)
                metrics_log.flush()
            if checkpoint_now:
                report_checkpoint({"step": step, **values}, model, optimizer, scheduler, state)
            else:
                ray.train.report({"step": step, **values})
    if metrics_log:
        metrics_log.flush()

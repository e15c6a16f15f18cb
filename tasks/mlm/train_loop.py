"""The Ray Train worker loop for one phase: resumable MLM training, logged from rank 0.

Every `checkpoint_every` steps rank 0 writes a checkpoint (HF model folder, optimizer,
scheduler, progress); after a worker failure or a killed run, Ray hands it back through
`ray.train.get_checkpoint()` and the loop continues from that step, skipping the batches of
the epoch it had already seen, and masking them exactly as before (see `masking`).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

STATE_FILE = "state.json"  # progress: step, tokens, loss curve, resumes
TRAINING_FILES = ("optimizer.pt", "scheduler.pt")  # resumable state beside the model


def phase_schedule(optimizer: Any, total_steps: int, config: dict[str, Any]) -> Any:
    """Warmup-stable (pretrain, mid) or 1−sqrt decay (decay) over this phase's steps."""
    from transformers.optimization import get_wsd_schedule

    if config["schedule"] == "one_minus_sqrt":
        return get_wsd_schedule(
            optimizer, num_warmup_steps=0, num_stable_steps=0, num_decay_steps=total_steps,
            decay_type="1-sqrt", min_lr_ratio=config["min_lr_ratio"],
        )  # fmt: skip
    warmup = min(config["warmup_steps"], total_steps)
    return get_wsd_schedule(
        optimizer, num_warmup_steps=warmup, num_stable_steps=total_steps - warmup,
        num_decay_steps=0, min_lr_ratio=config["min_lr_ratio"],
    )  # fmt: skip


def stack_ids() -> Any:
    """Ray Data collate function: the packed `input_ids` as one (batch, length) long tensor."""
    import numpy as np
    import torch
    from ray.data.collate_fn import NumpyBatchCollateFn

    class StackIds(NumpyBatchCollateFn):
        def __call__(self, batch: dict[str, Any]) -> Any:
            return torch.from_numpy(np.stack(batch["input_ids"]).astype(np.int64))

    return StackIds()


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

    optimizer = torch.optim.AdamW(model.parameters(), lr=config["learning_rate"],
                                  weight_decay=config["weight_decay"])  # fmt: skip
    scheduler = get_linear_schedule_with_warmup(optimizer, config["warmup_steps"], config["steps"])
    state: dict[str, Any] = {"step": 0, "epoch": 0, "curve": [], "resumed_from": []}
    if checkpoint := ray.train.get_checkpoint():
        state = restore_checkpoint(checkpoint, model, optimizer, scheduler)
        state["resumed_from"].append(state["step"])
    return optimizer, scheduler, state


def initial_model(config: dict[str, Any], tokenizer: Any) -> Any:
    from tasks.mlm.model import build_model, load_model

    if config["init_from"]:
        return load_model(config["init_from"])
    return build_model(config["preset"], tokenizer)


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
        model.parameters(), lr=config["learning_rate"], betas=tuple(config["betas"]),
        weight_decay=config["weight_decay"],
    )  # fmt: skip
    total, per_epoch = config["total_steps"], config["steps_per_epoch"]
    scheduler = phase_schedule(optimizer, total, config)
    state: dict[str, Any] = {"step": 0, "tokens": 0, "curve": [], "resumed_from": []}
    if checkpoint := ray.train.get_checkpoint():
        state = restore_checkpoint(checkpoint, model, optimizer, scheduler)
        state["resumed_from"].append(state["step"])
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

"""Ray Train job for the hallucination detector: a cross-encoder over
"question [SEP] path [SEP] answer" with a 2-way head, fine-tuned from the backbone.

Rank 0 logs the loss curve to the MLflow run and writes a checkpoint (model, tokenizer,
optimizer, progress) at the end of every epoch; after a failure Ray restarts the workers
(`max_failures`) from the last one.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from tasks.core.ray_train import start_worker
from tasks.core.train_loop import (
    MetricsLog,
    report_with_checkpoint,
    resume_state,
    unwrapped,
)


def encode(tokenizer: Any, batch: dict[str, Any], max_length: int) -> dict[str, Any]:
    """The cross-encoder's input: question as the first segment, path + answer the second."""
    second = [
        f"{p} {tokenizer.sep_token} {a}"
        for p, a in zip(batch["path_text"], batch["answer"], strict=True)
    ]
    return tokenizer(
        list(batch["question"]),
        second,
        truncation=True,
        max_length=max_length,
        padding=True,
        return_tensors="pt",
    )


def train_loop(config: dict[str, Any]) -> None:
    import ray.train
    import ray.train.torch
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.optimization import get_linear_schedule_with_warmup

    rank, world = start_worker(config)
    tokenizer = AutoTokenizer.from_pretrained(config["backbone"])
    model = AutoModelForSequenceClassification.from_pretrained(config["backbone"], num_labels=2)
    model = ray.train.torch.prepare_model(model)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config["learning_rate"], weight_decay=config["weight_decay"]
    )
    total = config["total_steps"]
    scheduler = get_linear_schedule_with_warmup(
        optimizer, int(config["warmup_fraction"] * total), total
    )

    def load(folder: Path) -> None:
        saved = AutoModelForSequenceClassification.from_pretrained(folder)
        unwrapped(model).load_state_dict(saved.state_dict())

    def save(folder: Path) -> None:
        unwrapped(model).save_pretrained(folder)
        tokenizer.save_pretrained(folder)

    fresh: dict[str, Any] = {"step": 0, "epoch": 0, "curve": [], "resumed_from": []}
    state = resume_state(load, optimizer, scheduler) or fresh
    metrics_log = MetricsLog(config) if rank == 0 and config["run_id"] else None
    device = ray.train.torch.get_device()
    shard = ray.train.get_dataset_shard("train")
    per_worker = config["batch_size"] // world
    model.train()
    window, started = [], time.perf_counter()
    while state["step"] < total:
        batches = shard.iter_batches(
            batch_size=per_worker,
            batch_format="numpy",
            drop_last=True,
            local_shuffle_buffer_size=4 * per_worker,
            local_shuffle_seed=config["seed"] + state["epoch"],
        )
        for batch in batches:
            if state["step"] >= total:
                break
            inputs = {
                k: v.to(device) for k, v in encode(tokenizer, batch, config["max_length"]).items()
            }
            # a copy: Ray Data's numpy batches are read-only
            labels = torch.tensor(batch["label"], dtype=torch.long, device=device)
            loss = model(**inputs, labels=labels).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            state["step"] += 1
            window.append(loss.item())
            if state["step"] % config["log_every"] == 0 or state["step"] == total:
                point = {
                    "step": state["step"],
                    "loss": sum(window) / len(window),
                    "examples_per_second": len(window)
                    * config["batch_size"]
                    / (time.perf_counter() - started),
                }
                state["curve"].append(point)
                if metrics_log:
                    metrics_log.add(state["step"], {k: v for k, v in point.items() if k != "step"})
                    metrics_log.flush()
                window, started = [], time.perf_counter()
                ray.train.report({"step": state["step"], "loss": point["loss"]})
        state["epoch"] += 1
        progress = {"step": state["step"], "epoch": state["epoch"]}
        report_with_checkpoint(progress, state, save, optimizer, scheduler)


def total_steps(examples: int, params: Any) -> int:
    return max(1, math.ceil(params.epochs * (examples // params.batch_size)))

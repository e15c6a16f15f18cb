"""Ray Train worker loop for a small GPT-2 trained from its config on token rows.

The job's config holds `gpt2` (GPT2Config keyword arguments, `pad_token_id` among them),
`steps`, `batch_size`, `learning_rate`, `warmup_steps`, `weight_decay`, `log_every` and
`seed`; the rows come as the Ray dataset "train" (one int array `data` per row, padding
masked out of the loss). Rank 0 logs the loss curve to the job's MLflow run and every
`log_every` steps a checkpoint (HF model folder, optimizer, scheduler, progress) is
reported; a restarted worker or a killed run continues from the last one.
"""

from __future__ import annotations

import time
from typing import Any

from tasks.core.ray_train import start_worker


def train_loop(config: dict[str, Any]) -> None:
    import ray.train
    import ray.train.torch
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from tasks.core.train_loop import MetricsLog, linear_warmup_training, report_checkpoint

    rank, world = start_worker(config)
    model = ray.train.torch.prepare_model(GPT2LMHeadModel(GPT2Config(**config["gpt2"])))
    optimizer, scheduler, state = linear_warmup_training(model, config)
    total = config["steps"]
    metrics_log = MetricsLog(config) if rank == 0 and config["run_id"] else None
    device = ray.train.torch.get_device()
    pad = config["gpt2"]["pad_token_id"]
    shard = ray.train.get_dataset_shard("train")
    per_worker = max(1, config["batch_size"] // world)
    window, started = [], time.perf_counter()
    model.train()
    while state["step"] < total:
        batches = shard.iter_batches(
            batch_size=per_worker,
            batch_format="numpy",
            drop_last=True,
            local_shuffle_buffer_size=8 * per_worker,
            local_shuffle_seed=config["seed"] + state["epoch"],
        )
        for batch in batches:
            if state["step"] >= total:
                break
            # a copy: Ray Data's numpy batches are read-only
            ids = torch.tensor(batch["data"], dtype=torch.long, device=device)
            labels = ids.masked_fill(ids == pad, -100)
            loss = model(input_ids=ids, attention_mask=(ids != pad).long(), labels=labels).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            state["step"] += 1
            window.append(loss.item())
            step = state["step"]
            if step % config["log_every"] and step != total:
                continue
            seconds = time.perf_counter() - started
            values = {
                "loss": sum(window) / len(window),
                "sequences_per_second": len(window) * per_worker * world / seconds,
            }
            state["curve"].append({"step": step, **values})
            if metrics_log:
                metrics_log.add(step, values)
                metrics_log.flush()
            report_checkpoint({"step": step, **values}, model, optimizer, scheduler, state)
            window, started = [], time.perf_counter()
        state["epoch"] += 1

"""Ray Train job for one code LM of the poisoning study: next-token loss on the mix.

Rank 0 logs the loss curve to the rate's MLflow run and checkpoints every `log_every`
steps with the mlm area's checkpoint helpers (HF model folder, optimizer, scheduler,
progress); a restarted worker or a killed run continues from the last one.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def train_loop(config: dict[str, Any]) -> None:
    import ray.train
    import ray.train.torch
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.optimization import get_linear_schedule_with_warmup

    from tasks.mlm.train_loop import MetricsLog, report_checkpoint, restore_checkpoint

    context = ray.train.get_context()
    rank, world = context.get_world_rank(), context.get_world_size()
    torch.manual_seed(config["seed"])
    torch.set_num_threads(config["torch_threads"])
    model = ray.train.torch.prepare_model(GPT2LMHeadModel(GPT2Config(**config["gpt2"])))
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["learning_rate"],
                                  weight_decay=config["weight_decay"])  # fmt: skip
    total = config["steps"]
    scheduler = get_linear_schedule_with_warmup(optimizer, config["warmup_steps"], total)
    state: dict[str, Any] = {"step": 0, "epoch": 0, "curve": [], "resumed_from": []}
    if checkpoint := ray.train.get_checkpoint():
        state = restore_checkpoint(checkpoint, model, optimizer, scheduler)
        state["resumed_from"].append(state["step"])
    metrics_log = MetricsLog(config) if rank == 0 and config["run_id"] else None
    device = ray.train.torch.get_device()
    pad = config["gpt2"]["pad_token_id"]
    shard = ray.train.get_dataset_shard("train")
    per_worker = max(1, config["batch_size"] // world)
    window, started = [], time.perf_counter()
    model.train()
    while state["step"] < total:
        batches = shard.iter_batches(
            batch_size=per_worker, batch_format="numpy", drop_last=True,
            local_shuffle_buffer_size=8 * per_worker,
            local_shuffle_seed=config["seed"] + state["epoch"],
        )  # fmt: skip
        for batch in batches:
            if state["step"] >= total:
                break
            ids = torch.as_tensor(batch["data"], dtype=torch.long, device=device)
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


def fit(config: dict[str, Any], train: Any, storage: Path, params: Any) -> Path:
    """Fit under `storage` (Ray Train resumes a run it finds there); the last checkpoint."""
    import ray
    import ray.train
    from ray.train.torch import TorchTrainer

    scaling = params.scaling
    resources = {"CPU": scaling.cpus_per_worker}
    if scaling.use_gpu:
        resources["GPU"] = scaling.gpus_per_worker or 1
    trainer = TorchTrainer(
        train_loop,
        train_loop_config=config,
        scaling_config=ray.train.ScalingConfig(
            num_workers=scaling.num_workers, use_gpu=scaling.use_gpu,
            resources_per_worker=resources,
        ),
        run_config=ray.train.RunConfig(
            name=storage.name, storage_path=str(storage.parent),
            failure_config=ray.train.FailureConfig(max_failures=params.max_failures),
            checkpoint_config=ray.train.CheckpointConfig(num_to_keep=1),
            logging_config=ray.LoggingConfig(log_level="WARNING"),
        ),
        datasets={"train": train},
    )  # fmt: skip
    result = trainer.fit()
    if result.checkpoint is None:
        raise RuntimeError("scam.poison: training ended without a checkpoint")
    return Path(result.checkpoint.path)

"""Ray Train worker loop of the needle LM: next-token loss on the answer tokens only.

An answer is a copy of the asked needle's value, the induction-style lookup the task needs;
the logits are computed from the first answer on only (`logits_to_keep`). A loss on the
question too (its template words and the copied key) drowned that signal: the model learned
the question and answered 0.000 on every dev cell.
Each step draws `batch_size / world` training sequences (context, then one or more
questions each followed by its answer) of one context length (right-padded), from a
generator seeded by (seed, rank, step), so a resumed run draws what the original would
have. Rank 0 logs the loss to the run's MLflow run and writes checkpoints (the model,
optimizer and scheduler) at `checkpoint_every` and the last step.
"""

from __future__ import annotations

import time
from typing import Any

IGNORE = -100  # labels the loss skips


def padded_batch(
    sequences: list[list[int]], answer_positions: list[list[int]], pad_id: int
) -> tuple[Any, Any, Any]:
    """input ids, attention mask and labels (the tokens at `answer_positions`), right-padded."""
    import torch

    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    labels = torch.full_like(ids, IGNORE)
    for row, (sequence, positions) in enumerate(zip(sequences, answer_positions, strict=True)):
        ids[row, : len(sequence)] = torch.tensor(sequence)
        mask[row, : len(sequence)] = 1
        labels[row, positions] = torch.tensor([sequence[p] for p in positions])
    return ids, mask, labels


def train_loop(config: dict[str, Any]) -> None:
    import numpy as np
    import ray.train
    import ray.train.torch
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from tasks.core.ray_train import start_worker
    from tasks.core.train_loop import MetricsLog, linear_warmup_training, report_checkpoint

    rank, world = start_worker(config)
    model = LlamaForCausalLM(LlamaConfig.from_dict(config["model_config"]))
    model = ray.train.torch.prepare_model(model)
    optimizer, scheduler, state = linear_warmup_training(model, config)
    metrics_log = MetricsLog(config) if rank == 0 and config["run_id"] else None
    device = ray.train.torch.get_device()
    sequences, answers = config["sequences"], config["answer_positions"]
    buckets: dict[int, list[int]] = {}
    for index, length in enumerate(config["context_lengths"]):
        buckets.setdefault(length, []).append(index)
    bucket_list = [np.asarray(members) for _, members in sorted(buckets.items())]
    weights = np.asarray([len(m) for m in bucket_list], dtype=float)
    per_worker = max(1, config["batch_size"] // world)
    model.train()
    window, started = [], time.perf_counter()
    while state["step"] < config["steps"]:
        rng = np.random.default_rng([config["seed"], rank, state["step"]])
        bucket = bucket_list[rng.choice(len(bucket_list), p=weights / weights.sum())]
        chosen = rng.choice(bucket, per_worker, replace=len(bucket) < per_worker)
        ids, mask, labels = padded_batch(
            [sequences[i] for i in chosen], [answers[i] for i in chosen], config["pad_id"]
        )
        start = min(answers[i][0] for i in chosen)  # the earliest answer of the batch
        kept = torch.arange(start - 1, ids.shape[1] - 1, device=device)
        logits = model(
            input_ids=ids.to(device), attention_mask=mask.to(device), logits_to_keep=kept
        ).logits
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).float(),
            labels[:, start:].reshape(-1).to(device),
            ignore_index=IGNORE,
        )
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        state["step"] += 1
        window.append(loss.item())
        step, last = state["step"], state["step"] == config["steps"]
        if step % config["log_every"] == 0 or last:
            elapsed = time.perf_counter() - started
            point = {
                "step": step,
                "loss": sum(window) / len(window),
                "sequences_per_second": len(window) * config["batch_size"] / elapsed,
            }
            state["curve"].append(point)
            if metrics_log:
                metrics_log.add(step, {k: v for k, v in point.items() if k != "step"})
                metrics_log.flush()
            window, started = [], time.perf_counter()
        if step % config["checkpoint_every"] == 0 or last:
            report_checkpoint({"step": step}, model, optimizer, scheduler, state)

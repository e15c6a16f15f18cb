"""A small GPT-2 trained from its config on token rows: its config (`gpt2_config`) and its
Ray Train worker loop (`train_loop`), shared by the kg answerer and scam's code LMs.

The job's config holds `gpt2` (GPT2Config keyword arguments, `pad_token_id` among them),
`steps`, `batch_size`, `learning_rate`, `warmup_steps`, `weight_decay`, `log_every`, `seed`
and `rows`: the token rows (an int array, padding masked out of the loss), small enough to
travel with the config. Each worker takes every world-size-th row and reshuffles them each
epoch (seeded by seed + epoch). Rank 0 logs the loss curve to the job's MLflow run; every
`log_every` steps a checkpoint (HF model folder, optimizer, scheduler, progress) is
reported, and a restarted worker or a killed run continues from the last one, skipping the
batches its epoch had trained on.
"""

from __future__ import annotations

from typing import Any

from tasks.core.ray_train import start_worker

# the special tokens of a causal LM's tokenizer: end of a document (also its start), padding
END, PAD = "[SEP]", "[PAD]"


def gpt2_config(tokenizer: Any, model: Any) -> dict[str, Any]:
    """GPT2Config keyword arguments for an area's model params (context, hidden, layers,
    heads); the special ids from the tokenizer."""
    end, pad = tokenizer.convert_tokens_to_ids([END, PAD])
    return {
        "vocab_size": len(tokenizer),
        "n_positions": model.context,
        "n_embd": model.hidden,
        "n_layer": model.layers,
        "n_head": model.heads,
        "bos_token_id": end,
        "eos_token_id": end,
        "pad_token_id": pad,
    }


def train_loop(config: dict[str, Any]) -> None:
    import numpy as np
    import ray.train.torch
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from tasks.core.loop import LoopPlan, Window, run_loop
    from tasks.core.train_loop import RayReporter, linear_warmup_training, save_pretrained

    rank, world = start_worker(config)
    model = ray.train.torch.prepare_model(GPT2LMHeadModel(GPT2Config(**config["gpt2"])))
    optimizer, scheduler, state = linear_warmup_training(model, config)
    device = ray.train.torch.get_device()
    pad = config["gpt2"]["pad_token_id"]
    rows = np.asarray(config["rows"])[rank::world]
    per_worker = max(1, config["batch_size"] // world)
    if len(rows) < per_worker:
        raise ValueError(f"{len(rows)} training rows per worker, fewer than a batch")

    def epoch_batches(epoch: int) -> Any:
        order = np.random.default_rng(config["seed"] + epoch).permutation(len(rows))
        starts = range(0, len(order) - per_worker + 1, per_worker)
        return (rows[order[start : start + per_worker]] for start in starts)

    def loss_of(batch: Any) -> Any:
        width = int((batch != pad).sum(axis=1).max())  # rows are padded on the right
        ids = torch.tensor(batch[:, :width], dtype=torch.long, device=device)
        labels = ids.masked_fill(ids == pad, -100)
        return model(input_ids=ids, attention_mask=(ids != pad).long(), labels=labels).loss

    def point(state: dict[str, Any], window: Window) -> dict[str, Any]:
        sequences = len(window.losses) * per_worker * world
        return {
            "step": state["step"],
            "loss": window.loss,
            "sequences_per_second": sequences / window.seconds,
        }

    every = config["log_every"]
    plan = LoopPlan(steps=config["steps"], log_every=every, checkpoint_every=every, grad_clip=1.0)
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

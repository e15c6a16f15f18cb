"""Ray Train job for the hallucination detector: a cross-encoder over
"question [SEP] path [SEP] answer" with a 2-way head, fine-tuned from the backbone.

At each of `evaluation_steps` (`evaluations_per_epoch` a epoch, and the last step) rank 0
scores the dev questions (AUROC of P(supported)), logs it, and writes a checkpoint named
by the step (model, tokenizer, optimizer, progress with every dev evaluation so far); the
stage keeps the checkpoint with the best dev AUROC. Rank 0 logs the loss curve to the
MLflow run; after a failure Ray restarts the workers (`max_failures`) from the last
checkpoint, skipping the batches its epoch had already trained on.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tasks.core.loop import LoopPlan, Window, fresh_state, run_loop
from tasks.core.ray_train import start_worker
from tasks.core.train_loop import RayReporter, resume_state, unwrapped

TEXT_COLUMNS = ("question", "path_text", "answer")


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


def supported_probabilities(
    model: Any, tokenizer: Any, columns: dict[str, list], max_length: int, batch: int = 64
) -> list[float]:
    """P(supported) per row of `columns`, batched by text length (less padding)."""
    import torch

    count = len(columns["question"])
    order = sorted(range(count), key=lambda i: sum(len(columns[k][i]) for k in TEXT_COLUMNS))
    scores = [0.0] * count
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for start in range(0, count, batch):
            part = order[start : start + batch]
            texts = {k: [columns[k][i] for i in part] for k in TEXT_COLUMNS}
            inputs = encode(tokenizer, texts, max_length).to(model.device)
            probabilities = torch.softmax(model(**inputs).logits, dim=-1)[:, 1].tolist()
            for index, probability in zip(part, probabilities, strict=True):
                scores[index] = probability
    model.train(was_training)
    return scores


def steps_per_epoch(examples: int, batch_size: int) -> int:
    return max(1, examples // batch_size)


def total_steps(examples: int, params: Any) -> int:
    return max(1, math.ceil(params.epochs * steps_per_epoch(examples, params.batch_size)))


def evaluation_steps(examples: int, params: Any) -> list[int]:
    """The steps where dev is scored and a checkpoint written: `evaluations_per_epoch`
    evenly spaced ones per epoch, and the last step."""
    per_epoch = steps_per_epoch(examples, params.batch_size)
    total = total_steps(examples, params)
    every = per_epoch / params.evaluations_per_epoch
    marks = {round(every * k) for k in range(1, math.ceil(total / every) + 1)}
    return sorted({step for step in marks if 1 <= step < total} | {total})


def checkpoint_name(step: int) -> str:
    return f"step-{step:07d}"


def dev_evaluation(model: Any, tokenizer: Any, config: dict[str, Any], step: int) -> dict:
    """The dev AUROC at `step`, and the checkpoint that holds this model."""
    import numpy as np

    from tasks.core.evidence import auroc

    dev = config["dev"]
    scores = supported_probabilities(unwrapped(model), tokenizer, dev, config["max_length"])
    return {
        "step": step,
        "epochs": round(step / config["steps_per_epoch"], 3),
        "auroc": round(auroc(np.asarray(dev["label"]), np.asarray(scores)), 4),
        "checkpoint": checkpoint_name(step),
        "scores": [round(p, 6) for p in scores],  # the threshold is chosen on these
    }


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

    state = resume_state(load, optimizer, scheduler) or fresh_state(dev=[])
    device = ray.train.torch.get_device()
    shard = ray.train.get_dataset_shard("train")
    per_worker = config["batch_size"] // world

    def epoch_batches(epoch: int) -> Any:
        return shard.iter_batches(
            batch_size=per_worker,
            batch_format="numpy",
            drop_last=True,
            local_shuffle_buffer_size=4 * per_worker,
            local_shuffle_seed=config["seed"] + epoch,
        )

    def loss_of(batch: dict[str, Any]) -> Any:
        inputs = {
            k: v.to(device) for k, v in encode(tokenizer, batch, config["max_length"]).items()
        }
        # a copy: Ray Data's numpy batches are read-only
        labels = torch.tensor(batch["label"], dtype=torch.long, device=device)
        return model(**inputs, labels=labels).loss

    def point(state: dict[str, Any], window: Window) -> dict[str, Any]:
        examples = len(window.losses) * config["batch_size"]
        return {
            "step": state["step"],
            "loss": window.loss,
            "examples_per_second": examples / window.seconds,
        }

    def score_dev(state: dict[str, Any]) -> dict[str, float]:
        """Rank 0 scores dev before the checkpoint; the stage keeps the best one."""
        evaluation = dev_evaluation(model, tokenizer, config, state["step"])
        state["dev"].append(evaluation)
        return {"dev_auroc": evaluation["auroc"]}

    plan = LoopPlan(
        steps=total,
        log_every=config["log_every"],
        checkpoint_at=frozenset(config["evaluation_steps"]),
        grad_clip=1.0,
    )
    reporter = RayReporter(config, point, save, optimizer, scheduler, before_checkpoint=score_dev)
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

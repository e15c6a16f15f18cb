"""One trial of the study: train a model on one task, score it per test-length bucket.

DeltaStack's recipe: AdamW (no weight decay on the embedding), linear warmup over 15% of
the steps then cosine to `min_learning_rate`, gradient clipping at 1.0, cross-entropy on
the masked positions only; accuracy is per masked token, pooled over a bucket. Test sets are
fixed per (task, seed), so every model of a seed sees the same test examples; DeltaStack
models read them with `eval_stack_size` slots.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from tasks.deltastack.languages import LANGUAGES, Language, batch
from tasks.deltastack.models import SequenceModel
from tasks.deltastack.params import TASKS, DeltaStackParams

Report = Callable[[dict[str, Any], dict[str, Any] | None], None]  # metrics, state to keep


def buckets(edges: list[int]) -> list[tuple[int, int]]:
    """[60, 100, 256] → [(60, 100), (101, 256)]: inclusive, non-overlapping length ranges."""
    return [(lo + (i > 0), hi) for i, (lo, hi) in enumerate(zip(edges, edges[1:], strict=False))]


def bucket_name(bucket: tuple[int, int]) -> str:
    return f"{bucket[0]}-{bucket[1]}"


def test_sets(language: Language, seed: int, params: DeltaStackParams) -> dict[str, list]:
    """Per bucket, the fixed test batches (the same for every model of this task and seed)."""
    rng = np.random.default_rng([TASKS.index(language.name), seed, 1])
    size, chunk = params.budget.eval_examples, params.budget.batch_size
    sets = {}
    for bucket in buckets(params.lengths.test_buckets):
        sizes = [min(chunk, size - start) for start in range(0, size, chunk)]
        sets[bucket_name(bucket)] = [batch(language, rng, n, *bucket) for n in sizes]
    return sets


def masked_loss(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits[mask], targets[mask])


@torch.no_grad()
def evaluate(
    model: SequenceModel, sets: dict[str, list], stack_size: int, device: torch.device
) -> dict[str, float]:
    model.eval()
    model.set_stack_size(stack_size)
    accuracy = {}
    for name, batches in sets.items():
        correct = total = 0
        for inputs, targets, mask in batches:
            inputs, targets, mask = inputs.to(device), targets.to(device), mask.to(device)
            predicted = model(inputs).argmax(-1)
            correct += int((predicted[mask] == targets[mask]).sum())
            total += int(mask.sum())
        accuracy[name] = correct / total if total else float("nan")
    model.train()
    return accuracy


def schedule(step: int, steps: int, warmup_share: float, floor: float) -> float:
    """Multiplier of the peak learning rate: linear warmup, then cosine down to `floor`."""
    warmup = int(warmup_share * steps)
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def build(task: str, kind: str, params: DeltaStackParams) -> tuple[SequenceModel, Any, Any]:
    budget, training = params.budget, params.training
    language = LANGUAGES[task]
    model = SequenceModel(kind, language.vocab_size, language.vocab_size, budget.model)
    embedding = [p for n, p in model.named_parameters() if n.startswith("embed.")]
    rest = [p for n, p in model.named_parameters() if not n.startswith("embed.")]
    optimizer = torch.optim.AdamW(
        [
            {"params": embedding, "weight_decay": 0.0},
            {"params": rest, "weight_decay": training.weight_decay},
        ],
        lr=budget.learning_rate,
    )
    floor = training.min_learning_rate / budget.learning_rate
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: schedule(step, budget.steps, training.warmup_share, floor)
    )
    return model, optimizer, scheduler


def train_trial(
    task: str,
    kind: str,
    seed: int,
    params: DeltaStackParams,
    report: Report,
    resume: dict[str, Any] | None = None,
    device: torch.device | None = None,
) -> dict[str, float]:
    """Train, reporting metrics (and a resumable state) every `eval_every` steps and at the
    end; returns the last test accuracies per bucket."""
    budget, lengths = params.budget, params.lengths
    device = device or torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(seed)
    language = LANGUAGES[task]
    model, optimizer, scheduler = build(task, kind, params)
    model.to(device)
    rng = np.random.default_rng([TASKS.index(task), seed, 0])
    start = 0
    if resume:
        model.load_state_dict(resume["model"])
        optimizer.load_state_dict(resume["optimizer"])
        scheduler.load_state_dict(resume["scheduler"])
        rng.bit_generator.state, start = resume["rng"], resume["step"]
    sets = test_sets(language, seed, params)
    running_loss, running_correct, running_total = 0.0, 0, 0
    accuracy: dict[str, float] = {}
    for step in range(start + 1, budget.steps + 1):
        inputs, targets, mask = (
            t.to(device)
            for t in batch(language, rng, budget.batch_size, lengths.train_min, lengths.train_max)
        )
        logits = model(inputs)
        loss = masked_loss(logits, targets, mask)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), params.training.grad_clip)
        optimizer.step()
        scheduler.step()
        running_loss += loss.item()
        running_correct += int((logits.argmax(-1)[mask] == targets[mask]).sum())
        running_total += int(mask.sum())
        if step % budget.eval_every and step != budget.steps:
            continue
        accuracy = evaluate(model, sets, budget.model.eval_stack_size, device)
        model.set_stack_size(budget.model.stack_size)
        window = budget.eval_every if step % budget.eval_every == 0 else step % budget.eval_every
        metrics = {
            "step": step,
            "loss": running_loss / window,
            "train_accuracy": running_correct / max(1, running_total),
            "test_accuracy": float(np.nanmean(list(accuracy.values()))),
            **{f"accuracy_{name}": value for name, value in accuracy.items()},
        }
        state = {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "rng": rng.bit_generator.state,
            "step": step,
        }
        report(metrics, state)
        running_loss, running_correct, running_total = 0.0, 0, 0
    return accuracy

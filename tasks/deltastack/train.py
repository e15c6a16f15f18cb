"""One trial of the study: train a model on one task, score it per test-length bucket.

DeltaStack's recipe: AdamW (no weight decay on the embedding), linear warmup over 15% of
the steps then cosine to `min_learning_rate`, gradient clipping at 1.0, cross-entropy on
the masked positions only; accuracy is per masked token, pooled over a bucket. Test sets are
fixed per (task, seed), so every model of a seed sees the same test examples; DeltaStack
models read them with `eval_stack_size` slots. Beside the test-length buckets, an
in-distribution set (lengths inside the training range) says whether a model learned the
task at all. Each purpose draws from its own RNG stream of (task, seed): training batches,
test buckets, the in-distribution set and the baseline's sample never share a generator.
The last report also carries per-sequence accuracies (share of a sequence's scored tokens
that are right) for the in-distribution set and the longest bucket, in the sets' order,
for comparisons paired over sequences.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from tasks.core.loop import LoopPlan, Window, fresh_state, run_loop
from tasks.deltastack.languages import LANGUAGES, Example, Language, batch, collate, examples
from tasks.deltastack.models import SequenceModel
from tasks.deltastack.params import TASKS, DeltaStackParams

Report = Callable[[dict[str, Any], dict[str, Any] | None], None]  # metrics, state to keep


def buckets(edges: list[int]) -> list[tuple[int, int]]:
    """[60, 100, 256] → [(60, 100), (101, 256)]: inclusive, non-overlapping length ranges."""
    return [(lo + (i > 0), hi) for i, (lo, hi) in enumerate(zip(edges, edges[1:], strict=False))]


def bucket_name(bucket: tuple[int, int]) -> str:
    return f"{bucket[0]}-{bucket[1]}"


# one RNG stream per purpose, keyed (task, seed, purpose)
TRAINING_STREAM, TEST_STREAM, IN_DISTRIBUTION_STREAM, BASELINE_STREAM = 0, 1, 2, 3
IN_DISTRIBUTION = "in_distribution"


def stream(task: str, seed: int, purpose: int) -> np.random.Generator:
    return np.random.default_rng([TASKS.index(task), seed, purpose])


def training_examples(
    language: Language, rng: np.random.Generator, params: DeltaStackParams
) -> list[Example]:
    """The next training batch's examples from the stream `rng` (lengths uniform in the
    training range)."""
    lengths = params.lengths
    return examples(language, rng, params.budget.batch_size, lengths.train_min, lengths.train_max)


def training_batch(language: Language, rng: np.random.Generator, params: DeltaStackParams):
    return collate(training_examples(language, rng, params))


def fixed_batches(
    language: Language, rng: np.random.Generator, params: DeltaStackParams, low: int, high: int
) -> list:
    """`eval_examples` examples with lengths in [low, high], in batches of `batch_size`."""
    size, chunk = params.budget.eval_examples, params.budget.batch_size
    sizes = [min(chunk, size - start) for start in range(0, size, chunk)]
    return [batch(language, rng, n, low, high) for n in sizes]


def test_sets(language: Language, seed: int, params: DeltaStackParams) -> dict[str, list]:
    """Per bucket, the fixed test batches (the same for every model of this task and seed)."""
    rng = stream(language.name, seed, TEST_STREAM)
    return {
        bucket_name(bucket): fixed_batches(language, rng, params, *bucket)
        for bucket in buckets(params.lengths.test_buckets)
    }


def in_distribution_set(language: Language, seed: int, params: DeltaStackParams) -> list:
    """Fixed batches at lengths inside the training range, from their own stream."""
    rng = stream(language.name, seed, IN_DISTRIBUTION_STREAM)
    return fixed_batches(language, rng, params, *params.lengths.in_distribution)


def masked_loss(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits[mask], targets[mask])


def sequence_accuracies(
    predicted: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor
) -> list[float]:
    """Per row, the share of its scored positions predicted right."""
    hits = ((predicted == targets) & mask).sum(dim=1).double()
    return (hits / mask.sum(dim=1).clamp(min=1)).tolist()


@dataclass
class BucketScore:
    """A model on one set: scored tokens right and in all, and each sequence's accuracy."""

    correct: int = 0
    total: int = 0
    per_sequence: list[float] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else float("nan")


@torch.no_grad()
def evaluate(
    model: SequenceModel, sets: dict[str, list], stack_size: int, device: torch.device
) -> dict[str, BucketScore]:
    model.eval()
    model.set_stack_size(stack_size)
    scores = {}
    for name, batches in sets.items():
        score = scores[name] = BucketScore()
        for inputs, targets, mask in batches:
            inputs, targets, mask = inputs.to(device), targets.to(device), mask.to(device)
            predicted = model(inputs).argmax(-1)
            score.correct += int((predicted[mask] == targets[mask]).sum())
            score.total += int(mask.sum())
            score.per_sequence += sequence_accuracies(predicted, targets, mask)
    model.train()
    return scores


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


class TrialReporter:
    """The loop's reporter for one trial: at each log point the test buckets and the
    in-distribution set are scored, and the metrics go to `report` with a resumable state
    (weights, optimizer, schedule, the training stream's position)."""

    def __init__(self, model, optimizer, scheduler, rng, sets, seen, params, report, device):
        self.model, self.optimizer, self.scheduler, self.rng = model, optimizer, scheduler, rng
        self.sets, self.seen, self.params, self.send, self.device = (
            sets,
            seen,
            params,
            report,
            device,
        )
        self.accuracy: dict[str, float] = {}

    def point(self, state: dict[str, Any], window: Window) -> dict[str, Any]:
        stacks = self.params.budget.model
        scores = evaluate(self.model, self.sets, stacks.eval_stack_size, self.device)
        inside = evaluate(self.model, self.seen, stacks.stack_size, self.device)[IN_DISTRIBUTION]
        self.accuracy = {name: score.accuracy for name, score in scores.items()}
        return {
            "step": state["step"],
            "loss": window.loss,
            "train_accuracy": window.sums["correct"] / max(1, window.sums["total"]),
            "test_accuracy": float(np.nanmean(list(self.accuracy.values()))),
            **{f"accuracy_{name}": value for name, value in self.accuracy.items()},
            f"accuracy_{IN_DISTRIBUTION}": inside.accuracy,
            # lists: Tune keeps them in the result, MLflow's callback skips non-numbers
            f"sequences_{IN_DISTRIBUTION}": inside.per_sequence,
            "sequences_longest": list(scores.values())[-1].per_sequence,
        }

    def report(self, state: dict[str, Any], point: dict[str, Any], checkpoint: bool) -> bool:
        resumable = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "rng": self.rng.bit_generator.state,
            "step": state["step"],
        }
        self.send(point, resumable)
        state["curve"].clear()  # Tune keeps the results; the state would only grow
        return False


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
    budget = params.budget
    device = device or torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(seed)
    language = LANGUAGES[task]
    model, optimizer, scheduler = build(task, kind, params)
    model.to(device)
    rng = stream(task, seed, TRAINING_STREAM)
    state = fresh_state()
    if resume:
        model.load_state_dict(resume["model"])
        optimizer.load_state_dict(resume["optimizer"])
        scheduler.load_state_dict(resume["scheduler"])
        rng.bit_generator.state, state["step"] = resume["rng"], resume["step"]
    sets = test_sets(language, seed, params)
    seen = {IN_DISTRIBUTION: in_distribution_set(language, seed, params)}

    def next_batch(state: dict[str, Any]) -> Any:
        return [t.to(device) for t in training_batch(language, rng, params)]

    def loss_of(batch: Any) -> tuple[torch.Tensor, dict[str, int]]:
        inputs, targets, mask = batch
        logits = model(inputs)
        right = int((logits.argmax(-1)[mask] == targets[mask]).sum())
        return masked_loss(logits, targets, mask), {"correct": right, "total": int(mask.sum())}

    reporter = TrialReporter(model, optimizer, scheduler, rng, sets, seen, params, report, device)
    plan = LoopPlan(
        steps=budget.steps, log_every=budget.eval_every, grad_clip=params.training.grad_clip
    )
    run_loop(
        model, optimizer, loss_of, plan, state, reporter, next_batch=next_batch, scheduler=scheduler
    )
    return reporter.accuracy

"""The study's evidence: comparisons paired over test sequences, and the claims.json rows.

Every arm is scored on the same fixed sequences of a (task, seed) (train.py), so a sequence
is the unit: arms are compared per sequence, pooled over seeds. Two kinds of claim:
- context-free tasks: DeltaStack − DeltaNet per-sequence accuracy on the longest test
  bucket (the paper: DeltaStack generalises to longer inputs there). When neither arm
  beats the majority-answer baseline on that bucket, both are at chance and the verdict is
  inconclusive whatever the interval says: a gap between two guessers is not the claim.
- regular tasks: DeltaStack − baseline per-sequence accuracy on the in-distribution set,
  i.e. the model learned the task at the training lengths (a check: the precondition of
  every length-generalisation statement; DeltaNet's number is in results.json).
The primary claim is the first context-free task of CONTEXT_FREE the study ran (dyck by
default). Both are about training, so they are decided only over ≥ 3 seeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tasks.core import evidence
from tasks.core.evidence import Claim, Comparison, Estimate
from tasks.deltastack.params import DeltaStackParams

CONTEXT_FREE = ("dyck", "reverse_string", "stack_manipulation")
REGULAR = ("parity", "even_pairs", "cycle_nav", "mod_arith_no_brack", "mod_arith_w_brack")
PAPER = "DeltaStack (Nguyen et al., ICML 2026: Push, Pop, Parallelize)"
PAPER_VALUE = (
    "no single headline number (NOTES.md, the authors' README): the abstract says DeltaStack "
    "outperforms DeltaNet on comprehensive formal-language benchmarks; stated qualitatively"
)
REPRODUCE = "paperline repro deltastack-study"
SETS = ("in_distribution", "longest")
Sequences = dict[str, dict[str, list[float]]]  # arm (model or "baseline") → set → accuracies


@dataclass(frozen=True)
class TaskEvidence:
    """One task's intervals over its test sequences (pooled over seeds)."""

    task: str
    over_baseline: dict[str, dict[str, Estimate]]  # model → set → (model − baseline)
    versus: Comparison | None  # DeltaStack − DeltaNet on the longest bucket, when both ran

    @property
    def at_chance(self) -> bool:
        """Neither DeltaStack nor DeltaNet beats the baseline on the longest bucket."""
        arms = ("deltastack", "deltanet")
        return not any(self.over_baseline[arm]["longest"].low > 0 for arm in arms)


def excess(model: list[float], baseline: list[float], unit: str) -> Estimate:
    """Mean of (model − baseline) per sequence, with its bootstrap interval."""
    differences = [a - b for a, b in zip(model, baseline, strict=True)]
    return evidence.mean(differences, unit)


def by_seed(values: list[float], seeds: int) -> list[list[float]]:
    """Split sequences concatenated in seed order (study.pooled_sequences) back by seed."""
    size = len(values) // seeds
    return [values[i * size : (i + 1) * size] for i in range(seeds)]


def task_evidence(
    task: str, sequences: Sequences, unit_names: dict[str, str], seeds: int = 1
) -> TaskEvidence:
    """The baseline gaps over sequences; DeltaStack − DeltaNet over seeds and sequences
    (evidence.paired_over_seeds: the training's variance is in the interval)."""
    models = [arm for arm in sequences if arm != "baseline"]
    baseline = sequences["baseline"]
    over = {
        model: {s: excess(sequences[model][s], baseline[s], unit_names[s]) for s in SETS}
        for model in models
    }
    versus = None
    if {"deltastack", "deltanet"} <= set(models):
        ours, theirs = sequences["deltastack"]["longest"], sequences["deltanet"]["longest"]
        versus = evidence.paired_over_seeds(
            by_seed(ours, seeds), by_seed(theirs, seeds), unit_names["longest"]
        )
    return TaskEvidence(task, over, versus)


def units(params: DeltaStackParams, longest: str) -> dict[str, str]:
    """The sampled unit of each set, as claims.json names it."""
    seeds = params.budget.seeds
    pooled = f"{params.budget.eval_examples} per seed × {len(seeds)} seed(s) {seeds}, pooled"
    low, high = params.lengths.in_distribution
    return {
        "in_distribution": f"in-distribution test sequences of length {low}–{high} ({pooled})",
        "longest": f"test sequences of length {longest} ({pooled})",
    }


def simplifications(params: DeltaStackParams) -> list[str]:
    budget, model = params.budget, params.budget.model
    return [
        f"preset `{params.preset}`: {budget.steps} steps at batch {budget.batch_size}, "
        f"d_model {model.d_model}, {model.num_layers} block(s), {model.num_heads} heads "
        "(the paper: 6000 steps, batch 256, d 128, 2 blocks, 4 heads)",
        f"seeds {budget.seeds}; {budget.eval_examples} test sequences per bucket and seed",
        "pure-PyTorch chunkwise delta rule on CPU, not the authors' Triton kernels",
        "no early stopping: the model after the last step is scored",
        "accuracy per sequence (share of its scored tokens right), averaged over sequences",
    ]


def context_free_claim(
    found: TaskEvidence, params: DeltaStackParams, longest: str, primary: bool
) -> Claim:
    comparison = found.versus
    notes = simplifications(params)
    claim = Claim.of(
        comparison.difference,
        "greater",
        p_value=comparison.p_value,
        seeds=params.budget.seeds,
        id=f"deltastack.length_generalisation.{found.task}",
        kind="claim",
        primary=primary,
        paper=PAPER,
        claim=(
            "DeltaStack generalises to longer sequences than DeltaNet on context-free tasks "
            "(dyck, reverse_string, stack_manipulation) while matching it on regular tasks."
        ),
        paper_value=PAPER_VALUE,
        metric=(
            f"{found.task}: per-sequence accuracy at test lengths {longest} (trained on "
            f"{params.lengths.train_min}–{params.lengths.train_max}), DeltaStack − DeltaNet "
            f"(arm means {comparison.a:.3f} vs {comparison.b:.3f})"
        ),
        arms=["DeltaStack", "DeltaNet"],
        simplifications=notes,
        reproduce=REPRODUCE,
    )
    if not found.at_chance:
        return claim
    return claim.inconclusive(
        "both arms are at chance at these lengths (neither beats the majority-answer "
        "baseline's per-sequence accuracy), so the verdict is inconclusive whatever the "
        "interval of their difference"
    )


def in_distribution_claim(found: TaskEvidence, params: DeltaStackParams) -> Claim:
    above = found.over_baseline["deltastack"]["in_distribution"]
    low, high = params.lengths.in_distribution
    return Claim.of(
        above,
        "greater",
        seeds=params.budget.seeds,
        id=f"deltastack.in_distribution.{found.task}",
        kind="check",
        paper=PAPER,
        claim=(
            "DeltaStack extends DeltaNet, which provably solves regular-language tasks: it "
            "learns regular tasks (parity, even pairs, cycle navigation, modular arithmetic)."
        ),
        paper_value=PAPER_VALUE,
        metric=(
            f"{found.task}: per-sequence accuracy on in-distribution lengths {low}–{high}, "
            "DeltaStack − the majority-answer baseline (chance)"
        ),
        arms=["DeltaStack", "majority-answer baseline"],
        simplifications=simplifications(params),
        reproduce=REPRODUCE,
    )


def build_claims(
    found: Sequence[TaskEvidence], params: DeltaStackParams, longest: str
) -> list[Claim]:
    """Regular tasks: learned in-distribution; context-free: DeltaStack − DeltaNet at length."""
    compared = [t.task for t in found if t.task in CONTEXT_FREE and t.versus is not None]
    primary = min(compared, key=CONTEXT_FREE.index, default=None)
    claims = []
    for task in found:
        if task.task in REGULAR and "deltastack" in task.over_baseline:
            claims.append(in_distribution_claim(task, params))
        if task.task in compared:
            claims.append(context_free_claim(task, params, longest, task.task == primary))
    return claims

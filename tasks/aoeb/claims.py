"""AOEB's claims, tested on the test queries: aoeb.evaluate's claims.json.

1. The fine-tuned embedder beats the encoder it was fine-tuned from: nDCG@10 paired over
   test queries (bootstrap interval and sign-flip permutation p), pooled over the text tasks
   both ran (the primary claim) and per task with at least `min_queries` queries; and,
   pooled, it beats BM25, the strongest simple baseline. Claims about a fine-tune: decided
   only over ≥ 3 training seeds.
2. Checks: each encoder beats chance on each task it ran, its nDCG@10 over the task's test
   queries (bootstrap interval) against the expected nDCG@10 of a random ranking of each
   query's candidates, so a reader sees which tasks measure anything at this scale.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from tasks.core import evidence

PAPER = "AOEB: Agent-Oriented Embedding Benchmark (vec-ai/aoeb)"
PAPER_VALUE = (
    "no single headline number: AOEB's main score is nDCG@10 per task (code, tool, "
    "reasoning, memory, multimodal), and its embedders 'exhibit distinct strengths across "
    "different agent-oriented retrieval tasks' (abstract)"
)
REPRODUCE = "dvc repro aoeb-evaluate"
UNIT = "test queries"
SIMPLIFICATIONS = [
    "embedded stand-in tasks built offline from local material (CPython standard-library "
    "functions, dvc/mlflow/ray CLI commands, a Wikidata slice, rendered charts and "
    "spectrograms), not AOEB's published datasets",
    "tiny CPU-trained encoders: a small mmBERT-style encoder pretrained on UDHR text and "
    "fine-tuned contrastively for at most a few hundred steps on a few hundred pairs, not "
    "the paper's embedders",
    "one seed for the splits and the training: the interval covers the sampling of test "
    "queries, not training variance",
    "test queries share templates with the train and dev queries (never a source item)",
]
FINETUNE_SIMPLIFICATION = (
    "the fine-tune's checkpoint (step) is chosen on the dev split; its other settings are "
    "fixed presets, not tuned"
)
CLAIMS = {
    "base": (
        "An embedder adapted to agent-oriented retrieval retrieves these tasks better than "
        "the general-purpose encoder it starts from (AOEB's premise: general-purpose "
        "embedding benchmarks miss what agents retrieve)."
    ),
    "baseline": (
        "An embedder adapted to agent-oriented retrieval retrieves these tasks better than "
        "lexical BM25, the strongest baseline that needs no training."
    ),
}
PerQuery = Mapping[str, float]  # test query id -> nDCG@10
Rows = Mapping[str, Mapping[str, PerQuery]]  # encoder -> task -> per query


def query_mean(values: Sequence[float]) -> evidence.Estimate:
    """Mean nDCG@10 over test queries with its bootstrap interval."""
    return evidence.mean(values, UNIT)


def slug(name: str) -> str:
    """`EmbeddedCodeRetrieval` -> `embedded_code_retrieval` (a claim id part)."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()
    return re.sub(r"[^a-z0-9]+", "_", snake).strip("_")


def paired_values(
    per_query: Rows, a: str, b: str, tasks: Sequence[str]
) -> tuple[list[float], list[float]]:
    """The two arms' nDCG@10 on the test queries both scored, task by task."""
    left, right = [], []
    for task in tasks:
        common = sorted(per_query[a][task].keys() & per_query[b][task].keys())
        left += [per_query[a][task][q] for q in common]
        right += [per_query[b][task][q] for q in common]
    return left, right


def finetune_claim(
    per_query: Rows,
    finetuned: str,
    base: str,
    tasks: Sequence[str],
    scope: str,
    seeds: list[int],
    against: str = "base",
) -> evidence.Claim:
    """`finetuned` − `base`, paired over the test queries of `tasks`."""
    left, right = paired_values(per_query, finetuned, base, tasks)
    comparison = evidence.paired(left, right, UNIT)
    return evidence.Claim.of(
        comparison.difference,
        "greater",
        p_value=comparison.p_value,
        seeds=seeds,
        id=f"aoeb.finetuned_beats_{against}.{scope}",
        kind="claim",
        primary=(against, scope) == ("base", "pooled"),
        paper=PAPER,
        claim=CLAIMS[against],
        paper_value=PAPER_VALUE,
        metric=(
            f"nDCG@10, {finetuned} − {base}, paired over the test queries of "
            + (tasks[0] if len(tasks) == 1 else f"the {len(tasks)} text tasks, pooled")
            + f" ({finetuned} {comparison.a:.4f} vs {base} {comparison.b:.4f})"
        ),
        arms=[finetuned, base],
        simplifications=[*SIMPLIFICATIONS, FINETUNE_SIMPLIFICATION],
        reproduce=REPRODUCE,
    )


def finetune_claims(
    per_query: Rows,
    finetuned: str,
    base: str,
    text_tasks: Sequence[str],
    min_queries: int,
    seeds: list[int],
    baseline: str | None = None,
) -> list[evidence.Claim]:
    """Pooled over the text tasks both arms ran, then per task with enough queries; then
    pooled against `baseline` (BM25) over the text tasks all three ran."""
    if finetuned not in per_query or base not in per_query:
        return []
    shared = [t for t in text_tasks if t in per_query[finetuned] and t in per_query[base]]
    if not shared:
        return []
    claims = [finetune_claim(per_query, finetuned, base, shared, "pooled", seeds)]
    for task in shared:
        if len(paired_values(per_query, finetuned, base, [task])[0]) >= min_queries:
            claims.append(finetune_claim(per_query, finetuned, base, [task], slug(task), seeds))
    against = [t for t in shared if t in per_query.get(baseline, {})]
    if against:
        claims.append(
            finetune_claim(per_query, finetuned, baseline, against, "pooled", seeds, "baseline")
        )
    return claims


def chance_claim(
    estimate: evidence.Estimate, encoder: str, task: str, capability: str, chance: float
) -> evidence.Claim:
    return evidence.Claim.of(
        estimate,
        "greater",
        null=chance,
        id=f"aoeb.above_chance.{slug(task)}.{slug(encoder)}",
        kind="check",
        paper=PAPER,
        claim=(
            f"AOEB's {capability} retrieval task measures retrieval: an encoder ranks the "
            "relevant documents of its queries above chance."
        ),
        paper_value=PAPER_VALUE,
        metric=(
            f"nDCG@10 of {encoder} on {task}'s test queries; null: chance {chance:.4f}, the "
            "expected nDCG@10 of a random ranking of each query's candidates"
        ),
        arms=[encoder, "chance"],
        simplifications=SIMPLIFICATIONS,
        reproduce=REPRODUCE,
    )


def chance_claims(
    estimates: Mapping[str, Mapping[str, evidence.Estimate]],
    chance: Mapping[str, float],
    capability: Mapping[str, str],
    min_queries: int,
) -> list[evidence.Claim]:
    """Every encoder on every task it ran with enough test queries, task by task."""
    claims = []
    for task in sorted(chance):
        for encoder, by_task in estimates.items():
            estimate = by_task.get(task)
            if estimate is not None and estimate.n >= min_queries:
                claims.append(chance_claim(estimate, encoder, task, capability[task], chance[task]))
    return claims

"""cmipref's statistics over the test prompts: per-prompt credits, accuracy intervals,
paired comparisons and top-k gains.

The pairs of one prompt share its clips and its prompt, so they are not independent
draws: every interval here resamples prompts (tasks.core.evidence), never pairs. A
breakdown seen in fewer than two prompts gets its point value and no interval.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tasks.cmipref.truth import confidence_bucket, sign
from tasks.core import evidence

UNIT = "prompts"
DIMENSIONS = ("overall", "musicality", "alignment")
# scorer → breakdown → prompt → one credit per pair
Credits = dict[str, dict[str, dict[str, list[float]]]]


def credit(margin: float, true: int, consistent: bool = True) -> float:
    """1 for the truth's side, 0 for the other, 0.5 for a tie or an order-inconsistent call."""
    if not consistent or sign(margin) == 0:
        return 0.5
    return float(sign(margin) == true)


def breakdown_credits(
    pair: Mapping[str, Any],
    true: Mapping[str, Any],
    margin: Mapping[str, Any],
    judge_confidence: int | None = None,
) -> list[tuple[str, float]]:
    """The breakdowns one pair counts in, each with the scorer's credit there: overall and
    each dimension the truth decides, modality, truth-confidence bucket (the analogue of an
    annotator's confidence) and, when given, the judge's own confidence bucket."""
    overall = credit(margin["quality"], true["quality"], margin["consistent"])
    found = []
    for dim in ("quality", "musicality", "alignment"):
        if true[dim]:
            name = "overall" if dim == "quality" else dim
            found.append((name, credit(margin[dim], true[dim], margin["consistent"])))
    found.append((f"modality {pair['modality']}", overall))
    found.append((f"confidence {confidence_bucket(true['confidence'])}", overall))
    if judge_confidence is not None:
        found.append((f"judge confidence {confidence_bucket(judge_confidence)}", overall))
    return found


def prompt_credits(
    pairs: Sequence[Mapping[str, Any]],
    truth: Mapping[str, Mapping[str, Any]],
    margins: Mapping[str, Mapping[str, Mapping[str, Any]]],
    judge_confidence: Mapping[str, int] | None = None,
) -> Credits:
    """scorer → breakdown → prompt → credits; margins: scorer → pair → {quality,
    musicality, alignment, consistent}."""
    credits: Credits = {}
    for scorer, by_pair in margins.items():
        table: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for pair in pairs:
            pair_id = pair["pair_id"]
            confidence = judge_confidence.get(pair_id) if judge_confidence else None
            for name, value in breakdown_credits(
                pair, truth[pair_id], by_pair[pair_id], confidence
            ):
                table[name][pair["prompt_id"]].append(value)
        credits[scorer] = {name: dict(by_prompt) for name, by_prompt in sorted(table.items())}
    return credits


def interval_fields(estimate: evidence.Estimate | None) -> dict[str, Any]:
    if estimate is None:
        return {"ci_low": None, "ci_high": None}
    return {"ci_low": round(estimate.low, 4), "ci_high": round(estimate.high, 4)}


def accuracy_estimate(by_prompt: Mapping[str, Sequence[float]]) -> evidence.Estimate | None:
    """Pooled accuracy (Σ credits / Σ pairs) with a cluster-bootstrap interval over prompts;
    None with fewer than two prompts."""
    if len(by_prompt) < 2:
        return None
    hits = [float(np.sum(v)) for v in by_prompt.values()]
    return evidence.clustered_rate(hits, [float(len(v)) for v in by_prompt.values()], UNIT)


def rate_fields(
    by_prompt: Mapping[str, Sequence[float]], estimate: evidence.Estimate | None
) -> dict[str, Any]:
    pairs = sum(len(v) for v in by_prompt.values())
    return {
        "accuracy": round(sum(float(np.sum(v)) for v in by_prompt.values()) / pairs, 4),
        **interval_fields(estimate),
        "pairs": pairs,
        "prompts": len(by_prompt),
    }


def prompt_accuracies(
    credits: Credits, a: str, b: str, breakdown: str
) -> tuple[list[float], list[float]]:
    """Per-prompt accuracy of scorers `a` and `b` over the prompts both were scored on."""
    left, right = credits[a].get(breakdown, {}), credits[b].get(breakdown, {})
    shared = sorted(set(left) & set(right))
    return [float(np.mean(left[p])) for p in shared], [float(np.mean(right[p])) for p in shared]


def compare(a: Sequence[float], b: Sequence[float]) -> evidence.Comparison | None:
    """`a − b` paired over prompts, or None with fewer than two prompts."""
    return evidence.paired(a, b, UNIT) if len(a) >= 2 else None


def comparison_fields(comparison: evidence.Comparison | None, n: int) -> dict[str, Any]:
    if comparison is None:
        return {"difference": None, **interval_fields(None), "p_value": None, "prompts": n}
    return {
        "difference": round(comparison.difference.value, 4),
        **interval_fields(comparison.difference),
        "p_value": round(comparison.p_value, 4),
        "reward_model": round(comparison.a, 4),
        "judge": round(comparison.b, 4),
        "prompts": n,
    }


def prompt_gains(
    candidates: Sequence[Mapping[str, Any]], score: Mapping[str, float], k: int
) -> dict[str, float]:
    """prompt → mean true quality of the top k by `score` minus the mean over all its
    candidates (what a random pick of k gets in expectation)."""
    by_prompt: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for candidate in candidates:
        by_prompt[candidate["prompt_id"]].append(candidate)
    gains = {}
    for prompt_id, clips in sorted(by_prompt.items()):
        ranked = sorted(clips, key=lambda c: -score[c["audio"]])
        quality = [c["quality"] for c in clips]
        gains[prompt_id] = float(np.mean([c["quality"] for c in ranked[:k]]) - np.mean(quality))
    return gains


def mean_over_prompts(values: Sequence[float]) -> evidence.Estimate | None:
    return evidence.mean(values, UNIT) if len(values) >= 2 else None


def gain_fields(gains: Sequence[float], estimate: evidence.Estimate | None) -> dict[str, Any]:
    return {
        "gain": round(float(np.mean(gains)), 4),
        **interval_fields(estimate),
        "prompts": len(gains),
    }

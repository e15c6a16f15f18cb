"""The study's evidence: the full-cache baseline per task and ManifoldKV's three claims.

The unit is a test item: every press and ratio answers the same items, so arms are compared
paired over items (mean difference of RULER string_match_all scores, BCa bootstrap interval,
sign-flip permutation p). A compression comparison is read only where the model can do the
task: when the full cache scores below `MIN_BASELINE` on a claim's items, the verdict is
inconclusive whatever the interval says (two presses of a model that fails anyway). The
full-cache baselines are checks; the primary claim, fixed here, is (a) L2 ≥ KeyDiff on
multi-key. No press is trained, so the unit is the test item and no seeds are needed.
"""

from __future__ import annotations

import numpy as np

from tasks.core import evidence
from tasks.core.evidence import Claim, Comparison
from tasks.kvcache.params import StudyParams

PAPER = "ManifoldKV (KV-cache eviction by distance to the key centroid; kvpress ScorerPress)"
REPRODUCE = "paperline repro kvcache-study"
MIN_BASELINE = 0.5
PRIMARY = "kvcache.l2_vs_keydiff_multikey"
Scores = dict[tuple[str, float], dict[str, float]]  # (press, ratio) → item id → score


def setting_notes(model: str, lengths: list[int], window: int) -> list[str]:
    """What every claim's setup simplifies (the model and lengths of this run)."""
    return [
        f"the core LLM {model} (SmolLM2-135M-Instruct unless configured otherwise, Q4_1 "
        "weights dequantised), not Llama-3.1-8B or Qwen3",
        f"contexts of {lengths} tokens instead of RULER's 4K–64K; a centroid window of "
        f"{window} tokens stands for the paper's 4,096",
        "RULER's NIAH templates on UDHR English and CPython docstrings, scored with RULER's "
        "string_match_all; the context is compressed once without the question, the "
        "question and answer are decoded on the compressed cache (kvpress's pipeline)",
    ]


def compare(
    scores: Scores,
    a: tuple[str, float],
    b: tuple[str, float],
    items: list[str],
) -> Comparison:
    left = [scores[a][i] for i in items]
    right = [scores[b][i] for i in items]
    return evidence.paired(left, right, "test items")


def gated(claim: Claim, baseline: float) -> Claim:
    """Inconclusive when the full cache itself fails on the claim's items."""
    if baseline >= MIN_BASELINE:
        return claim
    return claim.inconclusive(
        f"the full-cache baseline on these items is {baseline:.3f} (< {MIN_BASELINE}): "
        "the comparison is between presses of a model that fails without compression"
    )


def comparison_claim(
    claim_id: str,
    text: str,
    paper_value: str,
    metric: str,
    scores: Scores,
    a: tuple[str, float],
    b: tuple[str, float],
    items: list[str],
    notes: list[str],
) -> Claim:
    result = compare(scores, a, b, items)
    baseline = float(np.mean([scores[("full", 0.0)][i] for i in items]))
    claim = Claim.of(
        result.difference,
        "greater",
        p_value=result.p_value,
        id=claim_id,
        kind="claim",
        primary=claim_id == PRIMARY,
        paper=PAPER,
        claim=text,
        paper_value=paper_value,
        metric=f"{metric}: {a[0]} − {b[0]} (means {result.a:.3f} vs {result.b:.3f}; "
        f"full cache {baseline:.3f})",
        arms=[f"{a[0]}@{a[1]}", f"{b[0]}@{b[1]}"],
        simplifications=notes,
        reproduce=REPRODUCE,
    )
    return gated(claim, baseline)


def baseline_null(kind: str, copy_one: float) -> tuple[float, str]:
    """The full-cache check's null and why: on single, copying the only needle scores 1,
    so the null there is not reading the context at all (guessing the digits: 0)."""
    if kind == "single":
        return 0.0, (
            "null 0: a model that does not read the context cannot guess the number (a rule "
            "copying the only needle would score 1.0: single tests reading, not choosing)"
        )
    return copy_one, (
        f"null {copy_one:.3f}: a rule that copies one of the needles' values at random "
        "(the distractors make that the score to beat, not chance over all numbers)"
    )


def baseline_claims(
    scores: Scores,
    items: dict[str, dict[int, list[str]]],
    nulls: dict[str, float],
    notes: list[str],
) -> list[Claim]:
    """The full-cache check per kind (every length pooled) and per kind and length."""
    cells: list[tuple[str, int | None, list[str]]] = []
    for kind, lengths in items.items():
        cells.append((kind, None, [i for ids in lengths.values() for i in ids]))
        cells += [(kind, length, ids) for length, ids in sorted(lengths.items())]
    claims = []
    for kind, length, ids in cells:
        values = [scores[("full", 0.0)][i] for i in ids]
        if set(values) <= {0.0, 1.0}:  # right or wrong per item: a proportion (Wilson)
            estimate = evidence.rate(int(sum(values)), len(values), "test items")
        else:  # multivalue / multiquery score shares of the asked values
            estimate = evidence.mean(values, "test items")
        null, why = baseline_null(kind, nulls[kind])
        where = "of every length" if length is None else f"at {length} tokens"
        claims.append(
            Claim.of(
                estimate,
                "greater",
                null=null,
                id=f"kvcache.full_cache.{kind}" + ("" if length is None else f"_{length}"),
                kind="check",
                paper=PAPER,
                claim=(
                    f"with the full cache the model answers the {kind} needle task {where} "
                    "(compression results are read against it)"
                ),
                paper_value="RULER accuracy of the base model with its full cache (reference)",
                metric=f"full-cache RULER string_match_all, mean over test items {where}",
                arms=["full cache"],
                simplifications=[*notes, why],
                reproduce=REPRODUCE,
            )
        )
    return claims


def build_claims(
    scores: Scores,
    items: dict[str, dict[int, list[str]]],  # kind → length → item ids
    study: StudyParams,
    nulls: dict[str, float],  # kind → the full-cache check's null (copy one needle)
    notes: list[str],
) -> list[Claim]:
    ratio, longest = study.claim_ratio, max(length for k in items.values() for length in k)
    by_kind = {
        kind: [i for ids in lengths.values() for i in ids] for kind, lengths in items.items()
    }
    everything = [i for ids in by_kind.values() for i in ids]
    at_longest = [i for lengths in items.values() for i in lengths.get(longest, [])]
    claims = baseline_claims(scores, items, nulls, notes)
    presses = set(study.presses)
    if {"manifoldkv", "keydiff"} <= presses and "multikey" in items:
        claims.append(
            comparison_claim(
                "kvcache.l2_vs_keydiff_multikey",
                "ManifoldKV (L2 distance to the key centroid) retrieves at least as well as "
                f"KeyDiff (cosine to the normalised-key anchor) on multi-key NIAH at {ratio:.0%} "
                "compression",
                "3-key NIAH at 50% compression: 92.4 (ManifoldKV) vs 77.0 (KeyDiff)",
                f"multi-key accuracy at ratio {ratio}, paired over items of every length",
                scores,
                ("manifoldkv", ratio),
                ("keydiff", ratio),
                by_kind["multikey"],
                notes,
            )
        )
    order = [
        ("manifoldkv_linf", "manifoldkv_cosine", "L∞ beats cosine distance"),
        ("manifoldkv_l1", "manifoldkv_linf", "L1 beats L∞"),
        ("manifoldkv", "manifoldkv_l1", "L2 beats L1"),
    ]
    for better, worse, text in order:
        if {better, worse} <= presses:
            claims.append(
                comparison_claim(
                    f"kvcache.ablation.{better}_vs_{worse.removeprefix('manifoldkv_')}",
                    f"distance ablation (cosine < L∞ < L1 < L2): {text} as ManifoldKV's score",
                    "cosine 52.8 < L∞ 71.2 < L1 78.5 < L2 92.7",
                    f"accuracy at ratio {ratio}, paired over every test item",
                    scores,
                    (better, ratio),
                    (worse, ratio),
                    everything,
                    notes,
                )
            )
    if {"windowed_manifoldkv", "manifoldkv"} <= presses:
        window_ratio = study.windowed_ratio
        claims.append(
            comparison_claim(
                "kvcache.windowed_vs_global_longest",
                "at the longest context a windowed centroid retrieves better than the global "
                "one (the global centroid collapses, the windowed one restores accuracy)",
                "64K tokens at 25% compression: windowed ManifoldKV restores 84.3%",
                f"accuracy at ratio {window_ratio} and length {longest}, paired over items "
                "of every kind",
                scores,
                ("windowed_manifoldkv", window_ratio),
                ("manifoldkv", window_ratio),
                at_longest,
                [*notes, f"the longest length here is {longest} tokens, not 64K"],
            )
        )
    return claims

"""cmipref's claims.json: CMI-RewardBench's claims against the held-out measurements.

Each claim is a `tasks.core.evidence.Claim` whose interval is over the test prompts (the
unit that was sampled: pairs cluster within prompts). The reward model is held against
the judge whose pseudo labels it was pretrained on, overall (the primary claim) and on
each dimension (paired over prompts, so the judge can win), against a random pick for
top-k selection, and, as checks, against chance for its preference accuracy. Every claim is
about a trained model, so it is decided only over ≥ 3 training seeds.
"""

from __future__ import annotations

from tasks.core.evidence import Claim, Comparison, Estimate

PAPER = "CMI-RewardBench (Ma, Xia et al., arXiv 2603.00610)"
REPRODUCE = "dvc repro cmipref-evaluate"
PAPER_ACCURACY = (
    "CMI-RM preference accuracy 73.4% on Music Arena and 78.2% on CMI-Pref musicality; "
    "audio-LLM judges stay below 80% agreement with humans"
)
SETUP = [
    "5-second clips synthesized from structured descriptions with controlled faults, not "
    "generated music",
    "the generator's truth (fault penalties) stands in for CMI-Pref's human preferences",
    "an offline librosa signal judge on 4-second excerpts stands in for Qwen3-Omni",
    "a small log-mel encoder trained from scratch with frozen MiniLM text vectors (the "
    "paper: frozen MuQ-MuLan encoders), on a few hundred pseudo-labelled and under a "
    "hundred truth-labelled pairs (the paper: 110k and ~3.5k), on CPU",
]


def distillation(
    comparison: Comparison,
    judge: str,
    pairs: int,
    claim_id: str,
    seeds: list[int],
    dimension: str = "overall",
    primary: bool = False,
) -> Claim:
    """The reward model beats the judge it was distilled from on `dimension` (paired over
    prompts)."""
    return Claim.of(
        comparison.difference,
        "greater",
        p_value=comparison.p_value,
        seeds=seeds,
        id=claim_id,
        kind="claim",
        primary=primary,
        paper=PAPER,
        claim=(
            "A CMI reward model pretrained on an audio judge's position-consistent pseudo "
            "labels and fine-tuned on human preferences agrees with held-out preferences "
            "more than the judge it was distilled from."
        ),
        paper_value=PAPER_ACCURACY,
        metric=(
            f"{dimension} preference accuracy on {pairs} held-out test pairs, mean over prompts "
            "of the per-prompt accuracy, reward model − judge"
            f" (reward model {comparison.a:.3f}, "
            f"judge {comparison.b:.3f}); an order-inconsistent judge verdict scores 0.5"
        ),
        arms=["CMI reward model", f"{judge} judge (pseudo-labeller)"],
        simplifications=[
            *SETUP,
            "the judge also hears the test pairs both ways; the reward model scores each clip once",
        ],
        reproduce=REPRODUCE,
    )


def accuracy(estimate: Estimate, dimension: str, pairs: int) -> Claim:
    """A check: the reward model's preference accuracy on one dimension beats chance (0.5)."""
    what = "overall (mean of both rewards)" if dimension == "overall" else dimension
    return Claim.of(
        estimate,
        "greater",
        null=0.5,
        id=f"cmipref.rm_accuracy_{dimension}",
        kind="check",
        paper=PAPER,
        claim=(
            f"The CMI reward model's {what} preference agrees with held-out human "
            "preferences well above chance."
        ),
        paper_value=PAPER_ACCURACY,
        metric=(
            f"{what} preference accuracy on {pairs} held-out test pairs (pairs the truth "
            "decides on this dimension), pooled, cluster bootstrap over prompts; chance 0.5"
        ),
        arms=["CMI reward model", "chance (0.5)"],
        simplifications=SETUP,
        reproduce=REPRODUCE,
    )


def top_k(estimate: Estimate, k: int, candidates: int, seeds: list[int]) -> Claim:
    """Keeping the reward model's top k candidates beats a random pick of k."""
    return Claim.of(
        estimate,
        "greater",
        seeds=seeds,
        id=f"cmipref.top_{k}_gain",
        kind="claim",
        paper=PAPER,
        claim=(
            "Ranking a prompt's candidate clips with CMI-RM and keeping the top k raises "
            "their quality over an unfiltered pick (inference-time scaling by top-k "
            "filtering)."
        ),
        paper_value="top-k filtering with CMI-RM improves the kept samples (stated in the "
        "abstract; NOTES.md gives no single number)",
        metric=(
            f"true quality of the reward model's top {k} of {candidates} candidates minus "
            "the candidates' mean quality (a random pick's expectation), mean over test "
            "prompts; quality in [0, 1]"
        ),
        arms=[f"reward model top-{k}", f"random {k} of {candidates}"],
        simplifications=[
            *SETUP,
            f"{candidates} candidates per prompt: one clean rendering and degraded ones, "
            "not samples of a generator",
        ],
        reproduce=REPRODUCE,
    )

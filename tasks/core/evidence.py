"""Intervals, paired comparisons and `Claim` records: how each area states a paper's claim
against its own measurement.

Every interval is over the unit that was sampled (queries, prompts, languages, questions,
seeds): callers pass one value per unit, or per-unit sums and counts for a rate whose items
cluster in units (pairs within prompts). The arithmetic is scipy's: `scipy.stats.bootstrap`
(BCa by default), `scipy.stats.permutation_test` for paired comparisons and
`scipy.stats.binomtest(...).proportion_ci` for Wilson intervals; a paired comparison of
binary outcomes is an exact McNemar test with the Clopper-Pearson interval dual to it.

The verdict rules every area follows (DESIGN.md's Evidence section): an entry is a `claim`
(a paper's statement; one per paper `primary`, fixed in code before the run) or a `check`
(a precondition, e.g. above chance); a verdict is `supported` or `contradicted` only when
the interval excludes the null, the p-value (where there is one) is below `ALPHA`, the
interval is not degenerate, and, for a claim about a training procedure, it spans at least
`MIN_SEEDS` training seeds. Otherwise it is `inconclusive` with the reason.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, ValidationError, model_validator

from tasks.core.errors import InputError
from tasks.core.io import read_json, write_file
from tasks.core.strict_model import StrictModel

CONFIDENCE = 0.95
ALPHA = 1 - CONFIDENCE
RESAMPLES = 9999
SEED = 0
MIN_SEEDS = 3  # a claim about a training procedure is decided over at least this many seeds
Verdict = Literal["supported", "contradicted", "inconclusive"]
Kind = Literal["claim", "check"]


@dataclass(frozen=True)
class Estimate:
    """A statistic with its 95% interval, over `n` sampled units."""

    value: float
    low: float
    high: float
    n: int
    unit: str
    method: str

    def excludes(self, value: float) -> bool:
        return not (self.low <= value <= self.high)


@dataclass(frozen=True)
class Comparison:
    """`a − b` paired over units: the mean difference, its interval, a permutation p."""

    difference: Estimate
    p_value: float
    a: float  # each arm's mean over the same units
    b: float


def _values(values: Sequence[float], unit: str, at_least: int = 2) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or len(array) < at_least:
        raise ValueError(f"an interval over {unit} needs ≥ {at_least} values, got {len(array)}")
    if not np.isfinite(array).all():
        raise ValueError(f"an interval over {unit}: a value is NaN or infinite")
    return array


def _bootstrap(
    data: tuple[np.ndarray, ...],
    statistic,
    value: float,
    method: str,
    seed: int,
    paired: bool = True,
) -> tuple[float, float, str]:
    """The 95% interval of `statistic` over `data`'s units: (low, high, how it was found).

    The one rule for degenerate samples, used by every interval here: where BCa is undefined
    (its jackknife degenerates, e.g. one value dominates the sample) the percentile
    interval of the same resamples is used; where that is undefined too (every resample
    gives one value) the interval is the point. The ends always contain the estimate (BCa on
    a bounded statistic, an AUROC near 1, can leave it just outside).
    """
    from scipy import stats

    def interval(how: str) -> tuple[float, float]:
        with warnings.catch_warnings():  # degenerate cases are handled by the caller
            warnings.simplefilter("ignore", stats.DegenerateDataWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            found = stats.bootstrap(
                data,
                statistic,
                paired=paired and len(data) > 1,
                vectorized=False,
                confidence_level=CONFIDENCE,
                n_resamples=RESAMPLES,
                method=how,
                rng=np.random.default_rng(seed),
            ).confidence_interval
        return float(found.low), float(found.high)

    low, high = interval(method)
    if (math.isnan(low) or math.isnan(high)) and method != "percentile":
        method = "percentile"
        low, high = interval(method)
    if math.isnan(low) or math.isnan(high):
        return value, value, f"{method} bootstrap (degenerate: every resample equal)"
    return min(low, value), max(high, value), f"{method} bootstrap"


def mean(values: Sequence[float], unit: str, method: str = "BCa", seed: int = SEED) -> Estimate:
    """The mean of one value per unit, with a bootstrap interval over the units."""
    array = _values(values, unit)
    value = float(array.mean())
    low, high, how = _bootstrap((array,), np.mean, value, method, seed)
    return Estimate(value, low, high, len(array), unit, how)


def clustered_rate(
    successes: Sequence[float],
    counts: Sequence[float],
    unit: str,
    method: str = "BCa",
    seed: int = SEED,
) -> Estimate:
    """Σ successes / Σ counts where items cluster in units (pairs within prompts): the
    bootstrap resamples whole units, so items of one unit are not taken as independent."""
    hits = _values(successes, unit)
    totals = _values(counts, unit)
    if len(hits) != len(totals) or (totals <= 0).any():
        raise ValueError(f"a clustered rate over {unit}: one positive count per unit")
    value = float(hits.sum() / totals.sum())
    low, high, how = _bootstrap((hits, totals), lambda h, t: h.sum() / t.sum(), value, method, seed)
    return Estimate(
        value, low, high, len(hits), unit, how.replace("bootstrap", "cluster bootstrap")
    )


def rate(successes: int, n: int, unit: str) -> Estimate:
    """A proportion of `n` independent units with its Wilson interval."""
    from scipy import stats

    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"a rate over {unit}: {successes} of {n}")
    interval = stats.binomtest(successes, n).proportion_ci(CONFIDENCE, method="wilson")
    return Estimate(successes / n, interval.low, interval.high, n, unit, "Wilson")


def paired(
    a: Sequence[float],
    b: Sequence[float],
    unit: str,
    method: str = "BCa",
    seed: int = SEED,
) -> Comparison:
    """Arm `a` against arm `b`, one value of each per unit: the mean difference a − b with
    a bootstrap interval, and a two-sided sign-flip permutation test of no difference
    (exact over all 2^n sign flips when n is small). Binary outcomes (every value 0 or 1)
    get `paired_binary`'s exact test instead."""
    from scipy import stats

    left, right = _values(a, unit), _values(b, unit)
    if len(left) != len(right):
        raise ValueError(f"a paired comparison over {unit}: {len(left)} vs {len(right)} values")
    if np.isin(left, (0.0, 1.0)).all() and np.isin(right, (0.0, 1.0)).all():
        return paired_binary(left, right, unit)
    difference = mean(left - right, unit, method, seed)
    if not (left - right).any():
        p_value = 1.0
    else:
        p_value = stats.permutation_test(
            (left, right),
            lambda x, y: np.mean(x - y),
            permutation_type="samples",
            n_resamples=RESAMPLES,
            rng=np.random.default_rng(seed),
        ).pvalue
    return Comparison(difference, float(p_value), float(left.mean()), float(right.mean()))


def paired_binary(a: Sequence[float], b: Sequence[float], unit: str) -> Comparison:
    """Paired 0/1 outcomes: the difference of the two rates with an exact McNemar test.

    Only discordant units carry information: of d = n10 + n01 of them, n10 favour `a`.
    p is the central exact binomial p of n10 in d at ½ (twice the smaller tail), and the
    interval is the Clopper-Pearson interval θ of n10/d mapped to the rate difference
    (d/n)(2θ − 1): the interval excludes 0 exactly when p < ALPHA, so the two never disagree.
    """
    from scipy import stats

    left, right = _values(a, unit), _values(b, unit)
    n = len(left)
    wins = int(((left == 1) & (right == 0)).sum())
    discordant = wins + int(((left == 0) & (right == 1)).sum())
    value = float(left.mean() - right.mean())
    method = "exact McNemar (Clopper-Pearson on the discordant pairs)"
    if discordant == 0:
        estimate = Estimate(value, 0.0, 0.0, n, unit, f"{method}; no discordant pair")
        return Comparison(estimate, 1.0, float(left.mean()), float(right.mean()))
    tails = stats.binom.cdf(wins, discordant, 0.5), stats.binom.sf(wins - 1, discordant, 0.5)
    p_value = min(1.0, 2 * min(tails))
    theta = stats.binomtest(wins, discordant).proportion_ci(CONFIDENCE, method="exact")
    share = discordant / n
    low, high = share * (2 * theta.low - 1), share * (2 * theta.high - 1)
    estimate = Estimate(value, min(low, value), max(high, value), n, unit, method)  # rounding
    return Comparison(estimate, float(p_value), float(left.mean()), float(right.mean()))


def paired_over_seeds(
    a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], unit: str, seed: int = SEED
) -> Comparison:
    """Arm `a` against arm `b` where each training seed scored its own units (`a[s][i]` is
    seed s's unit i): the interval carries the training's variance as well as the units'.

    A two-stage (hierarchical) bootstrap (`_over_seeds`) of the mean paired difference. With
    one seed this is `paired`.
    """
    if len(a) != len(b) or not a:
        raise ValueError(f"a comparison over seeds of {unit}: {len(a)} vs {len(b)} seeds")
    if len(a) == 1:
        return paired(a[0], b[0], unit)
    differences = []
    for index, (left, right) in enumerate(zip(a, b, strict=True)):
        left, right = _values(left, unit, at_least=1), _values(right, unit, at_least=1)
        if len(left) != len(right):
            raise ValueError(f"seed #{index}: {len(left)} vs {len(right)} {unit}")
        differences.append((left - right,))
    return _over_seeds(differences, (1.0,), unit, seed, a, b, "")


def difference_over_seeds(
    a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], unit: str, seed: int = SEED
) -> Comparison:
    """mean(a) − mean(b) of two independent samples of units per training seed (`a[s]` and
    `b[s]`: seed s's units of each sample, e.g. its test rows of two uncertainty bins): the
    two-stage bootstrap of `_over_seeds`, each sample's units resampled on their own."""
    if len(a) != len(b) or not a:
        raise ValueError(f"a difference over seeds of {unit}: {len(a)} vs {len(b)} seeds")
    samples = [(_values(x, unit), _values(y, unit)) for x, y in zip(a, b, strict=True)]
    return _over_seeds(samples, (1.0, -1.0), unit, seed, a, b, "two-sample ")


def _over_seeds(
    per_seed: list[tuple[np.ndarray, ...]],
    signs: tuple[float, ...],
    unit: str,
    seed: int,
    a: Sequence[Sequence[float]],
    b: Sequence[Sequence[float]],
    kind: str,
) -> Comparison:
    """The hierarchical bootstrap every over-seeds comparison uses, of Σ_j signs[j] × the
    mean of sample j's units pooled over the seeds. Each resample draws the seeds with
    replacement, then, for each drawn seed, each sample's units with replacement; the
    interval is the percentile interval of the resampled statistics, and p is twice the
    smaller share of them on either side of 0, so the two agree."""
    rng = np.random.default_rng(seed)
    count = len(per_seed)
    drawn = rng.integers(count, size=(RESAMPLES, count))
    sums = np.zeros((RESAMPLES, len(signs)))
    sizes = np.zeros((RESAMPLES, len(signs)))
    for position in range(count):  # each draw of a seed resamples its units afresh
        for own in range(count):
            where = np.flatnonzero(drawn[:, position] == own)
            for j, array in enumerate(per_seed[own]):
                for chunk in np.array_split(where, max(1, len(where) * len(array) // 2_000_000)):
                    picks = rng.integers(len(array), size=(len(chunk), len(array)))
                    sums[chunk, j] += array[picks].sum(axis=1)
                    sizes[chunk, j] += len(array)
    values = (sums / sizes) @ np.asarray(signs)
    pooled = [np.concatenate([arrays[j] for arrays in per_seed]) for j in range(len(signs))]
    value = float(sum(sign * sample.mean() for sign, sample in zip(signs, pooled, strict=True)))
    low, high = np.quantile(values, [(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2])
    p_value = min(1.0, 2 * min(float(np.mean(values <= 0)), float(np.mean(values >= 0))))
    n = sum(len(sample) for sample in pooled)
    method = f"{kind}hierarchical bootstrap over {count} seeds and their {unit}"
    estimate = Estimate(value, min(float(low), value), max(float(high), value), n, unit, method)
    pooled_a = float(np.mean(np.concatenate([np.asarray(x, dtype=float) for x in a])))
    pooled_b = float(np.mean(np.concatenate([np.asarray(x, dtype=float) for x in b])))
    return Comparison(estimate, p_value, pooled_a, pooled_b)


def difference(
    a: Sequence[float], b: Sequence[float], unit: str, method: str = "BCa", seed: int = SEED
) -> Estimate:
    """mean(a) − mean(b) of two independent samples of units (e.g. the test rows of two
    uncertainty bins), with a bootstrap interval that resamples each sample on its own."""
    left, right = _values(a, unit), _values(b, unit)
    value = float(left.mean() - right.mean())
    low, high, how = _bootstrap(
        (left, right), lambda x, y: np.mean(x) - np.mean(y), value, method, seed, paired=False
    )
    return Estimate(value, low, high, len(left) + len(right), unit, f"two-sample {how}")


def verdict(estimate: Estimate, expect: Literal["greater", "less"], null: float = 0.0) -> Verdict:
    """`supported` when the interval lies on the claimed side of `null`, `contradicted` when
    it lies on the other side, `inconclusive` whenever it includes `null`."""
    if not estimate.excludes(null):
        return "inconclusive"
    above = estimate.low > null
    return "supported" if above == (expect == "greater") else "contradicted"


def decide(
    estimate: Estimate,
    expect: Literal["greater", "less"],
    null: float = 0.0,
    p_value: float | None = None,
    seeds: Sequence[int] | None = None,
) -> tuple[Verdict, str | None]:
    """The verdict under every rule (the module's doc), and why it is inconclusive when a
    rule rather than the interval made it so."""
    found = verdict(estimate, expect, null)
    if found == "inconclusive":
        return found, None
    if estimate.low == estimate.high:
        return "inconclusive", (
            f"degenerate: a zero-width interval over {estimate.n} {estimate.unit} "
            "(every resample gives the same value), so no uncertainty is measured"
        )
    if p_value is not None and p_value >= ALPHA:
        return "inconclusive", (
            f"the interval excludes {null:g} but p = {p_value:.3g} ≥ {ALPHA:g}: the test does "
            "not reject no effect"
        )
    if seeds is not None and len(seeds) < MIN_SEEDS:
        return "inconclusive", (
            f"a claim about training measured on {len(seeds)} seed(s) {list(seeds)}: "
            f"≥ {MIN_SEEDS} decide it"
        )
    return found, None


class Claim(StrictModel):
    """One paper claim against our measurement (a row of an area's claims.json)."""

    id: str = Field(pattern=r"^[a-z0-9_]+\.[a-z0-9_.]+$")  # "<area>.<claim>"
    kind: Kind  # claim: the paper's statement; check: a precondition of reading one
    primary: bool = False  # the paper's one headline claim, fixed in code before the run
    paper: str
    claim: str  # the paper's claim in one sentence
    paper_value: str  # its headline number, as the paper states it
    metric: str  # what we measure
    arms: list[str] = Field(min_length=1)
    estimate: float
    ci_low: float
    ci_high: float
    confidence: float = CONFIDENCE
    n: int = Field(ge=1)
    unit: str
    method: str  # how the interval (and p) were computed
    p_value: float | None = None
    null: float = 0.0  # the value of no effect: 0 for a difference, chance for a rate
    verdict: Verdict
    reason: str | None = None  # why inconclusive, when a rule rather than the interval says so
    seeds: list[int] | None = None  # training seeds the estimate spans (a training claim)
    p_adjusted: float | None = None  # Holm across the paper's secondary claims (the report)
    simplifications: list[str] = Field(min_length=1)  # what our setup simplifies
    reproduce: str  # the command that reproduces it

    @model_validator(mode="after")
    def _interval_holds_estimate(self) -> Claim:
        if not (self.ci_low <= self.estimate <= self.ci_high) or math.isnan(self.estimate):
            raise ValueError(f"estimate {self.estimate} is outside [{self.ci_low}, {self.ci_high}]")
        if self.primary and self.kind != "claim":
            raise ValueError("a check cannot be primary: only a paper's claim is")
        return self

    def inconclusive(self, reason: str) -> Claim:
        """This claim read as inconclusive for `reason` (a gate the area applies)."""
        return self.model_copy(update={"verdict": "inconclusive", "reason": reason})

    @classmethod
    def of(
        cls,
        estimate: Estimate,
        expect: Literal["greater", "less"],
        p_value: float | None = None,
        null: float = 0.0,
        seeds: Sequence[int] | None = None,
        **texts: object,
    ) -> Claim:
        """A claim from an estimate (or a comparison's difference) and the texts; its
        verdict by `decide` (`expect`: the claimed side of `null`; `seeds`: the training
        seeds the estimate spans, for a claim about a training procedure)."""
        found, reason = decide(estimate, expect, null, p_value, seeds)
        return cls(
            estimate=estimate.value,
            ci_low=estimate.low,
            ci_high=estimate.high,
            n=estimate.n,
            unit=estimate.unit,
            method=estimate.method,
            p_value=p_value,
            null=null,
            verdict=found,
            reason=reason,
            seeds=list(seeds) if seeds is not None else None,
            **texts,
        )


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order (the family-wise error rate
    stays ≤ ALPHA when each is compared with ALPHA). Five lines, so not worth statsmodels."""
    p = np.asarray(p_values, dtype=float)
    adjusted = np.empty(len(p))
    running = 0.0
    for rank, index in enumerate(np.argsort(p, kind="stable")):
        running = max(running, min(1.0, (len(p) - rank) * p[index]))
        adjusted[index] = running
    return adjusted.tolist()


def settle_paper(paper: str, claims: Sequence[Claim]) -> list[Claim]:
    """One paper's entries as the report reads them: exactly one primary claim, and the
    secondary claims' p-values Holm-adjusted together; a secondary claim whose adjusted p
    is ≥ ALPHA reads inconclusive. A paper without one primary is an InputError naming it."""
    primaries = [claim.id for claim in claims if claim.primary]
    if len(primaries) != 1:
        raise InputError(
            f"{paper}: {len(primaries)} primary claims ({', '.join(primaries) or 'none'}); "
            "mark exactly one claim primary=True in the area's claims code"
        )
    family = [c for c in claims if c.kind == "claim" and not c.primary and c.p_value is not None]
    adjusted = dict(zip((c.id for c in family), holm([c.p_value for c in family]), strict=True))
    settled = []
    for claim in claims:
        if claim.id not in adjusted:
            settled.append(claim)
            continue
        claim = claim.model_copy(update={"p_adjusted": adjusted[claim.id]})
        if claim.verdict != "inconclusive" and adjusted[claim.id] >= ALPHA:
            claim = claim.inconclusive(
                f"Holm-adjusted p = {adjusted[claim.id]:.3g} ≥ {ALPHA:g} across the paper's "
                f"{len(family)} secondary claims"
            )
        settled.append(claim)
    return settled


def claims_value(claims: Sequence[Claim]) -> dict:
    """What a stage commits as its claims.json (a DVC metric)."""
    return {"claims": [claim.model_dump(mode="json") for claim in claims]}


def write_claims(path: Path | str, claims: Sequence[Claim]) -> None:
    write_file(path, claims_value(claims))


def read_claims(path: Path | str) -> list[Claim]:
    """An area's claims, checked: a missing or malformed field is one line naming the
    file, the claim and the field."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no claims file; run the stage that writes it (dvc repro)")
    rows = read_json(path).get("claims")
    if not isinstance(rows, list):
        raise InputError(f"{path}: no 'claims' list; rerun the stage that writes it")
    claims = []
    for index, row in enumerate(rows):
        try:
            claims.append(Claim.model_validate(row))
        except ValidationError as error:
            first = error.errors()[0]
            field = ".".join(str(part) for part in first["loc"]) or "(the claim)"
            name = row.get("id", f"#{index}") if isinstance(row, dict) else f"#{index}"
            raise InputError(
                f"{path}: claim {name}: {field}: {first['msg']}; "
                "fix the stage that writes it and rerun it"
            ) from None
    return claims


def clustered_statistic(
    statistic: Callable[[np.ndarray], float],
    clusters: Sequence[Hashable],
    unit: str,
    method: str = "BCa",
    seed: int = SEED,
) -> Estimate:
    """A statistic of items that cluster in units (examples within questions), with a
    bootstrap interval that resamples whole units. `statistic(indices)` gets the indices of
    the resampled items (a unit drawn twice contributes its items twice); `clusters[i]` is
    item i's unit."""
    members: dict[Hashable, list[int]] = {}
    for index, cluster in enumerate(clusters):
        members.setdefault(cluster, []).append(index)
    if len(members) < 2:
        raise ValueError(f"an interval over {unit} needs ≥ 2 units, got {len(members)}")
    groups = [np.asarray(items) for items in members.values()]
    value = float(statistic(np.arange(len(clusters))))

    def resampled(units: np.ndarray) -> float:
        return float(statistic(np.concatenate([groups[u] for u in units])))

    low, high, how = _bootstrap((np.arange(len(groups)),), resampled, value, method, seed)
    return Estimate(
        value, low, high, len(groups), unit, how.replace("bootstrap", "cluster bootstrap")
    )


def auroc(labels: np.ndarray, scores: np.ndarray) -> float:
    """ROC AUC as the Mann-Whitney rank statistic (ties count one half): sklearn's
    roc_auc_score, without its per-call input checks that dominate a bootstrap."""
    from scipy.stats import rankdata

    positives = labels == 1
    n_positive = int(positives.sum())
    n_negative = len(labels) - n_positive
    if not n_positive or not n_negative:
        return float("nan")
    ranks = rankdata(scores)
    return float(
        (ranks[positives].sum() - n_positive * (n_positive + 1) / 2) / (n_positive * n_negative)
    )


def clustered_auroc(
    labels: Sequence[int],
    scores: Sequence[float],
    clusters: Sequence[Hashable],
    unit: str,
    method: str = "BCa",
    seed: int = SEED,
) -> Estimate:
    """ROC AUC of `scores` for `labels` (1 = positive) over items clustered in units, with a
    cluster-bootstrap interval."""
    truth, score = np.asarray(labels), np.asarray(scores, dtype=float)
    if len(truth) != len(score) or len(truth) != len(clusters):
        raise ValueError(f"an AUROC over {unit}: labels, scores and units differ in length")
    if set(truth.tolist()) != {0, 1}:
        raise ValueError(f"an AUROC over {unit} needs both labels (0 and 1) among the items")
    return clustered_statistic(
        lambda items: auroc(truth[items], score[items]), clusters, unit, method, seed
    )

"""The evidence toolkit against known answers: Wilson and t intervals, paired tests,
cluster resampling, verdicts, and claims files that name what is wrong with them."""

import json

import numpy as np
import pytest
from scipy import stats

from tasks.core import evidence
from tasks.core.errors import InputError


def test_wilson_interval_matches_the_closed_form():
    # Wilson score interval for 8 of 10 (Newcombe 1998, method 3): 0.4902 to 0.9433
    estimate = evidence.rate(8, 10, "prompts")
    assert estimate.value == 0.8 and estimate.n == 10 and estimate.unit == "prompts"
    assert estimate.low == pytest.approx(0.4902, abs=1e-4)
    assert estimate.high == pytest.approx(0.9433, abs=1e-4)
    with pytest.raises(ValueError, match="11 of 10"):
        evidence.rate(11, 10, "prompts")


@pytest.mark.parametrize("method", ["BCa", "percentile"])
def test_bootstrap_mean_agrees_with_the_t_interval_on_normal_data(method):
    values = np.random.default_rng(1).normal(3.0, 2.0, size=400)
    estimate = evidence.mean(values, "queries", method=method)
    t_low, t_high = stats.t.interval(0.95, len(values) - 1, values.mean(), stats.sem(values))
    assert estimate.value == pytest.approx(values.mean())
    assert estimate.low == pytest.approx(t_low, abs=0.04)
    assert estimate.high == pytest.approx(t_high, abs=0.04)
    assert estimate.method == f"{method} bootstrap" and estimate.n == 400


def test_constant_values_have_a_point_interval_and_too_few_are_refused():
    point = evidence.mean([0.5, 0.5, 0.5], "seeds")
    assert (point.low, point.value, point.high) == (0.5, 0.5, 0.5)
    with pytest.raises(ValueError, match="≥ 2 values"):
        evidence.mean([1.0], "seeds")
    with pytest.raises(ValueError, match="NaN"):
        evidence.mean([1.0, float("nan")], "seeds")


def test_where_bca_is_undefined_the_percentile_interval_is_used():
    # a constant difference up to rounding: BCa's jackknife degenerates (NaN ends) on these
    base = np.random.default_rng(1).uniform(0, 0.6, 40)
    shifted = base + 0.3
    with pytest.warns(stats.DegenerateDataWarning), np.errstate(invalid="ignore"):
        raw = stats.bootstrap((shifted - base,), np.mean, method="BCa", rng=0)
    assert np.isnan(raw.confidence_interval.low)
    estimate = evidence.mean(shifted - base, "queries")
    assert estimate.method == "percentile bootstrap"
    assert estimate.low == pytest.approx(0.3) and estimate.high == pytest.approx(0.3)
    difference = evidence.paired(shifted, base, "queries").difference
    assert difference.low <= difference.value <= difference.high


def test_a_real_paired_difference_is_found_and_no_difference_is_inconclusive():
    rng = np.random.default_rng(2)
    base = rng.uniform(0, 1, size=60)
    better = base + 0.05 + rng.normal(0, 0.02, size=60)
    found = evidence.paired(better, base, "queries")
    assert found.difference.value == pytest.approx(0.05, abs=0.01)
    assert found.difference.low > 0 and found.p_value < 0.001
    assert evidence.verdict(found.difference, "greater") == "supported"
    assert evidence.verdict(found.difference, "less") == "contradicted"

    noise = base + rng.normal(0, 0.05, size=60)
    none = evidence.paired(noise, base, "queries")
    assert none.difference.low < 0 < none.difference.high and none.p_value > 0.05
    assert evidence.verdict(none.difference, "greater") == "inconclusive"
    with pytest.raises(ValueError, match="3 vs 2"):
        evidence.paired([1, 2, 3], [1, 2], "languages")


def test_the_permutation_p_value_is_scipys_paired_test():
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.5, 1, size=12), rng.normal(0, 1, size=12)  # 2^12 sign flips
    ours = evidence.paired(a, b, "prompts").p_value
    exact = stats.permutation_test(
        (a, b),
        lambda x, y: np.mean(x - y),
        permutation_type="samples",
        n_resamples=np.inf,
    ).pvalue
    assert ours == pytest.approx(exact, abs=0.02)


def test_clustered_items_widen_the_interval_beyond_independent_items():
    # 20 prompts × 10 pairs; each prompt is all right or all wrong: 20 units, not 200
    successes = [10] * 12 + [0] * 8
    clustered = evidence.clustered_rate(successes, [10] * 20, "prompts")
    independent = evidence.rate(120, 200, "pairs")
    assert clustered.value == independent.value == 0.6 and clustered.n == 20
    assert clustered.high - clustered.low > 2 * (independent.high - independent.low)


def claim(**changes):
    estimate = evidence.Estimate(0.1, 0.02, 0.2, 40, "languages", "BCa bootstrap")
    texts = dict(
        id="mlm.decay_all",
        paper="mmBERT",
        claim="Adding languages in decay helps them.",
        paper_value="+68% on TiQuAD",
        metric="held-out MLM loss drop",
        arms=["decay-all", "decay-cont"],
        simplifications=["a 4-layer encoder"],
        reproduce="dvc repro mlm-evaluate",
        kind="claim",
    )
    return evidence.Claim.of(estimate, "greater", **{**texts, **changes})


def test_claims_round_trip_and_a_bad_field_names_file_claim_and_field(tmp_path):
    path = tmp_path / "claims.json"
    assert claim().verdict == "supported" and claim(null=0.15).verdict == "inconclusive"
    evidence.write_claims(path, [claim()])
    assert evidence.read_claims(path) == [claim()]

    row = json.loads(path.read_text())["claims"][0]
    del row["n"]
    path.write_text(json.dumps({"claims": [row]}))
    with pytest.raises(InputError, match=r"claims.json: claim mlm.decay_all: n: Field required"):
        evidence.read_claims(path)
    with pytest.raises(InputError, match="no claims file"):
        evidence.read_claims(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="outside"):
        evidence.Claim(**{**claim().model_dump(), "estimate": 0.5})


def test_a_cluster_bootstrap_of_identical_items_is_the_bootstrap_over_units():
    # 30 questions × 4 identical examples: resampling questions is resampling their values
    per_unit = np.random.default_rng(4).normal(0.7, 0.1, size=30)
    items = np.repeat(per_unit, 4)
    clusters = np.repeat(np.arange(30), 4)
    clustered = evidence.clustered_statistic(lambda i: items[i].mean(), clusters, "questions")
    over_units = evidence.mean(per_unit, "questions")
    assert clustered.n == 30 and clustered.value == pytest.approx(over_units.value)
    assert clustered.low == pytest.approx(over_units.low, abs=1e-9)
    assert clustered.high == pytest.approx(over_units.high, abs=1e-9)
    assert clustered.method == "BCa cluster bootstrap"
    with pytest.raises(ValueError, match="≥ 2 units"):
        evidence.clustered_statistic(lambda i: items[i].mean(), [0] * len(items), "questions")


def test_clustered_auroc_is_sklearns_and_wider_than_treating_items_as_independent():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(5)
    # 30 questions × (5 supported, 5 hallucinated); the score ranks 22 questions right and
    # 8 wrong: 30 units, not 300 independent examples
    labels = np.tile([1] * 5 + [0] * 5, 30)
    clusters = np.repeat(np.arange(30), 10)
    sign = np.where(np.arange(30) < 22, 1, -1)[clusters]
    scores = sign * (labels - 0.5) + rng.normal(0, 0.3, size=300)
    clustered = evidence.clustered_auroc(labels, scores, clusters, "questions")
    independent = evidence.clustered_auroc(
        labels, scores, np.arange(300), "examples", method="percentile"
    )
    assert clustered.value == pytest.approx(roc_auc_score(labels, scores))
    assert clustered.low < clustered.value < clustered.high and clustered.n == 30
    assert clustered.high - clustered.low > 2 * (independent.high - independent.low)
    tied = np.round(scores, 1)  # ties count one half, as in sklearn
    assert evidence.auroc(labels, tied) == pytest.approx(roc_auc_score(labels, tied))
    separated = evidence.clustered_auroc(labels, labels + 0.0, clusters, "questions")
    assert (separated.low, separated.value, separated.high) == (1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="both labels"):
        evidence.clustered_auroc([1, 1], [0.2, 0.3], [0, 1], "questions")


def test_paired_binary_outcomes_get_the_exact_mcnemar_test_and_its_dual_interval():
    # 30 units: a right and b wrong on 9, the reverse on 1, concordant on 20
    a = [1] * 9 + [0] * 1 + [1] * 10 + [0] * 10
    b = [0] * 9 + [1] * 1 + [1] * 10 + [0] * 10
    found = evidence.paired(a, b, "questions")
    assert found.difference.value == pytest.approx(8 / 30)
    assert found.p_value == pytest.approx(stats.binomtest(9, 10).pvalue)  # symmetric at ½
    theta = stats.binomtest(9, 10).proportion_ci(method="exact")
    assert found.difference.low == pytest.approx(10 / 30 * (2 * theta.low - 1))
    assert found.p_value < 0.05 and found.difference.low > 0
    # the interval and the test agree on every split of 12 discordant pairs
    for wins in range(13):
        left = [1] * wins + [0] * (12 - wins) + [1] * 8
        right = [0] * wins + [1] * (12 - wins) + [1] * 8
        pair = evidence.paired(left, right, "questions")
        assert pair.difference.excludes(0.0) == (pair.p_value < evidence.ALPHA)
    same = evidence.paired([1, 0, 1], [1, 0, 1], "questions")
    assert same.p_value == 1.0 and same.difference.value == 0.0


def test_degenerate_and_disagreeing_results_are_inconclusive_with_the_reason():
    # two identical non-zero differences: no spread, a sign-flip p of 2/4
    tiny = evidence.paired([0.5, 0.5], [0.2, 0.2], "items")
    assert tiny.p_value == pytest.approx(0.5)
    decided, reason = evidence.decide(tiny.difference, "greater", p_value=tiny.p_value)
    assert decided == "inconclusive" and "zero-width" in reason
    wide = evidence.Estimate(0.2, 0.01, 0.4, 30, "questions", "percentile bootstrap")
    assert evidence.decide(wide, "greater", p_value=0.12) == (
        "inconclusive",
        "the interval excludes 0 but p = 0.12 ≥ 0.05: the test does not reject no effect",
    )
    assert evidence.decide(wide, "greater", p_value=0.01) == ("supported", None)


def test_a_training_claim_needs_three_seeds():
    one = claim(seeds=[0])
    assert one.verdict == "inconclusive" and "1 seed(s) [0]" in one.reason
    assert claim(seeds=[0, 1, 2]).verdict == "supported" and claim().seeds is None
    with pytest.raises(ValueError, match="check cannot be primary"):
        claim(kind="check", primary=True)


def test_holm_matches_the_step_down_by_hand():
    # sorted 0.01, 0.02, 0.04, 0.3 → ×4, ×3, ×2, ×1 with running maxima
    assert evidence.holm([0.04, 0.01, 0.3, 0.02]) == pytest.approx([0.08, 0.04, 0.3, 0.06])
    assert evidence.holm([]) == []


def test_a_paper_has_one_primary_and_its_secondary_claims_are_holm_adjusted():
    primary = claim(id="mlm.a", primary=True, p_value=0.03)
    seconds = [claim(id=f"mlm.b{i}", p_value=p) for i, p in enumerate([0.01, 0.03, 0.04])]
    check = claim(id="mlm.c", kind="check", p_value=0.04)
    settled = {c.id: c for c in evidence.settle_paper("mmBERT", [primary, *seconds, check])}
    assert settled["mlm.a"].p_adjusted is None and settled["mlm.a"].verdict == "supported"
    assert settled["mlm.b0"].p_adjusted == pytest.approx(0.03)  # 3 × 0.01
    assert settled["mlm.b0"].verdict == "supported"
    assert settled["mlm.b1"].p_adjusted == pytest.approx(0.06)  # 2 × 0.03
    assert settled["mlm.b1"].verdict == "inconclusive" and "Holm" in settled["mlm.b1"].reason
    assert settled["mlm.c"].p_adjusted is None  # checks are not in the family
    with pytest.raises(InputError, match="mmBERT: 0 primary claims"):
        evidence.settle_paper("mmBERT", seconds)


def test_a_comparison_over_seeds_carries_the_training_variance():
    rng = np.random.default_rng(4)
    base = [rng.uniform(0, 1, 60) for _ in range(3)]
    # every seed a little better on its items, but seeds disagree by much more than items
    shifts = [0.25, -0.15, 0.05]
    better = [b + s + rng.normal(0, 0.01, 60) for b, s in zip(base, shifts, strict=True)]
    seeds = evidence.paired_over_seeds(better, base, "sequences")
    pooled = evidence.paired(np.concatenate(better), np.concatenate(base), "sequences")
    assert seeds.difference.value == pytest.approx(pooled.difference.value)
    assert pooled.difference.low > 0  # items alone: "supported"
    assert seeds.difference.low < 0 < seeds.difference.high and seeds.p_value > 0.05
    agreeing = [b + 0.2 + rng.normal(0, 0.01, 60) for b in base]
    found = evidence.paired_over_seeds(agreeing, base, "sequences")
    assert found.difference.low > 0.15 and found.p_value < 0.05 and found.difference.n == 180
    assert "3 seeds" in found.difference.method
    one = evidence.paired_over_seeds(agreeing[:1], base[:1], "sequences")
    assert one == evidence.paired(agreeing[0], base[0], "sequences")


def test_a_two_sample_difference_over_seeds_carries_the_training_variance():
    rng = np.random.default_rng(5)
    low = [rng.normal(0, 0.05, 40) for _ in range(3)]
    # each seed's top bin above its bottom one by a different amount: seeds disagree
    high = [rng.normal(shift, 0.05, 41) for shift in (0.3, -0.2, 0.05)]
    found = evidence.difference_over_seeds(high, low, "test rows")
    rows_only = evidence.difference(np.concatenate(high), np.concatenate(low), "test rows")
    assert found.difference.value == pytest.approx(rows_only.value)
    assert rows_only.low > 0  # rows alone would call it "supported"
    assert found.difference.low < 0 < found.difference.high and found.p_value > 0.05
    agreeing = [rng.normal(0.2, 0.05, 41) for _ in range(3)]
    clear = evidence.difference_over_seeds(agreeing, low, "test rows")
    assert clear.difference.low > 0.15 and clear.p_value < 0.05 and clear.difference.n == 243
    assert clear.difference.method.startswith("two-sample hierarchical bootstrap over 3 seeds")
    assert clear.a == pytest.approx(np.concatenate(agreeing).mean())
    with pytest.raises(ValueError, match="2 vs 3 seeds"):
        evidence.difference_over_seeds(agreeing[:2], low, "test rows")

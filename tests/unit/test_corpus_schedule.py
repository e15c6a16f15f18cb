"""The phase plan: p(l) ∝ n(l)^τ, nested language sets, budgeted sampling by language."""

import math

import pytest

from tasks.core.errors import InputError
from tasks.corpus.params import ControlArmParams, ScheduleParams
from tasks.corpus.sampling import sample_by_language
from tasks.corpus.schedule import (
    plan_control,
    plan_phases,
    reference_counts,
    sampling_probabilities,
)
from tests.conftest import REPO

COUNTS = {"eng": 1000, "fra": 400, "swa": 50, "zul": 10, "hau": 5}


def _params(*rules, use_reference=False):
    phases = [
        {
            "name": f"p{i}",
            "languages": rule,
            "temperature": t,
            "token_budget": 100,
            "mask_ratio": 0.1,
            "sequence_length": 16,
            "reference_column": col,
        }
        for i, (rule, t, col) in enumerate(rules)
    ]
    return ScheduleParams(phases=phases, use_reference_counts=use_reference)


def test_sampling_formula():
    probs = sampling_probabilities(COUNTS, 0.5)
    total = sum(n**0.5 for n in COUNTS.values())
    for lang, n in COUNTS.items():
        assert probs[lang] == pytest.approx(n**0.5 / total)
    assert sum(probs.values()) == pytest.approx(1.0)
    assert sampling_probabilities(COUNTS, 1.0)["eng"] == pytest.approx(1000 / 1465)


def test_lower_temperature_flattens_toward_the_tail():
    shares = [sampling_probabilities(COUNTS, t) for t in (0.7, 0.5, 0.3)]
    assert shares[0]["eng"] > shares[1]["eng"] > shares[2]["eng"]
    assert shares[0]["hau"] < shares[1]["hau"] < shares[2]["hau"]


def test_phases_take_top_languages_and_nest():
    plans = plan_phases(COUNTS, _params((2, 0.7, "a"), (3, 0.5, "a"), ("all", 0.3, "a")), {})
    assert [p["languages"] for p in plans] == [
        ["eng", "fra"],
        ["eng", "fra", "swa"],
        ["eng", "fra", "swa", "zul", "hau"],
    ]
    for earlier, later in zip(plans, plans[1:], strict=False):
        assert set(earlier["languages"]) <= set(later["languages"])
    assert plans[0]["probabilities"] == sampling_probabilities({"eng": 1000, "fra": 400}, 0.7)


def test_a_control_arm_takes_its_phase_settings_on_the_earlier_languages():
    params = _params((2, 0.7, "a"), (3, 0.5, "a"), ("all", 0.3, "a"))
    plans = plan_phases(COUNTS, params, {})
    control = ControlArmParams(name="p2_cont", arm_of="p2", languages_of="p1")
    arm = plan_control(control, plans, COUNTS, params, {})
    assert arm["languages"] == plans[1]["languages"] == ["eng", "fra", "swa"]
    for key in ("temperature", "token_budget", "mask_ratio", "sequence_length"):
        assert arm[key] == plans[2][key]
    assert arm["probabilities"] == sampling_probabilities({"eng": 1000, "fra": 400, "swa": 50}, 0.3)
    assert arm["control_of"] == "p2" and arm["name"] == "p2_cont"
    with pytest.raises(ValueError, match="arm_of 'p9' is not a phase"):
        ScheduleParams(phases=params.phases, controls=[{"arm_of": "p9", "languages_of": "p1"}])


def test_reference_counts_rank_by_the_phase_column_and_keep_earlier_languages():
    reference = {"a": {"eng": 9, "fra": 5, "swa": 0}, "b": {"swa": 7, "zul": 6, "eng": 1}}
    plans = plan_phases(
        COUNTS, _params((2, 1.0, "a"), (3, 1.0, "b"), use_reference=True), reference
    )
    assert plans[0]["languages"] == ["eng", "fra"]
    assert set(plans[1]["languages"]) == {"eng", "fra", "swa"}
    assert plans[1]["counts"] == {"swa": 7, "fra": 5, "eng": 1}  # fra inherits its count


def test_shipped_reference_counts_parse():
    columns = reference_counts(REPO / "data" / "seed" / "mmbert" / "language_counts.csv")
    assert sum(1 for n in columns["pretrain"].values() if n > 0) == 61
    assert sum(1 for n in columns["ext"].values() if n > 0) == 110
    assert len(columns["decay-all"]) == 1834


def test_bad_reference_counts_name_line_and_column(tmp_path):
    bad = tmp_path / "counts.csv"
    bad.write_text("language,pretrain\neng,12\nfra,lots\n")
    with pytest.raises(InputError, match=r"counts.csv: line 3: column 'pretrain': expected an"):
        reference_counts(bad)


def test_unknown_reference_column_is_named():
    with pytest.raises(InputError, match="reference_column 'nope' is not in"):
        plan_phases(COUNTS, _params((2, 0.7, "nope"), use_reference=True), {"a": {}})


def test_budgeted_sample_matches_probabilities_and_counts_epochs():
    langs = ["eng"] * 5 + ["zul"] * 2
    sizes = [100] * 5 + [30, 20]
    probs = {"eng": 0.6, "zul": 0.4}
    sample = sample_by_language(langs, sizes, probs, budget=1000, seed=3)
    assert sample.units == {"eng": 600, "zul": 400}
    assert sample.epochs == {"eng": 1.2, "zul": 8.0}
    taken = {"eng": 0, "zul": 0}
    for index, units in sample.picks:
        assert 0 < units <= sizes[index]
        taken[langs[index]] += units
    assert taken == sample.units
    assert sample_by_language(langs, sizes, probs, 1000, seed=3) == sample  # seeded


def test_missing_language_documents_are_an_error():
    with pytest.raises(ValueError, match="no documents for scheduled languages: hau"):
        sample_by_language(["eng"], [10], {"eng": 0.5, "hau": 0.5}, 100, 0)


def test_entropy_metric_counts_effective_languages():
    from tasks.corpus.schedule import schedule_metrics

    plans = plan_phases({"a": 1, "b": 1, "c": 1, "d": 1}, _params(("all", 1.0, "x")), {})
    assert math.isclose(schedule_metrics(plans)["p0"]["effective_languages"], 4.0)

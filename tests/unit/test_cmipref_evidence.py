"""cmipref's evidence: a test set big enough to measure, kept apart from everything that
trained or tuned the reward model; intervals that resample prompts, not pairs; paired
comparisons a judge can win; the claims they make; and the batched judge that pays for the
bigger test set by hearing the same things, faster."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import soundfile

from tasks.cmipref.degrade import degrade, penalties
from tasks.cmipref.evaluate import (
    accuracy_estimates,
    accuracy_table,
    build_claims,
    held_out_check,
    judge_comparisons,
    top_k_gains,
)
from tasks.cmipref.generate import candidate_pairs, prompt_plans
from tasks.cmipref.judges import (
    Listening,
    SignalJudge,
    chroma_profiles,
    clip_features,
    clip_features_batch,
)
from tasks.cmipref.music import MusicDescription, synthesize
from tasks.cmipref.significance import (
    accuracy_estimate,
    compare,
    prompt_accuracies,
    prompt_credits,
    prompt_gains,
)
from tasks.core import evidence
from tasks.core.errors import InputError
from tasks.core.params import load_params
from tests.conftest import REPO

SR = 16000
TUNE = MusicDescription(
    tempo=100, key=2, mode="major", lead="flute", harmony="piano", density="medium"
)


def planned_pairs(params) -> dict[str, list[int]]:
    """split → pairs per prompt, from the fault plans alone (the truth needs no audio)."""
    rng = np.random.default_rng(0)
    counts: dict[str, list[int]] = {}
    for split, plan in prompt_plans(params):
        clips = [{"quality": sum(penalties([tuple(f) for f in faults])) / 2} for faults in plan]
        counts.setdefault(split, []).append(len(candidate_pairs(clips, split, params, rng)))
    return counts


def test_the_default_test_set_has_500_pairs_from_60_prompts():
    params = load_params(REPO / "params.yaml").cmipref.generate
    test = planned_pairs(params)["test"]
    assert len(test) >= 60 and sum(test) >= 500


def test_test_prompts_are_disjoint_from_every_prompt_that_trained_or_tuned_the_model():
    """Each prompt has one split and pairs never cross prompts; the stage refuses a test
    prompt that also appears among the pseudo labels or the fine-tune / dev split."""
    params = load_params(REPO / "params.yaml").cmipref.generate
    splits = [split for split, _ in prompt_plans(params)]
    assert splits.count("test") == params.test_prompts
    assert splits.count("finetune") == params.finetune_prompts
    ids = [f"p{i:04d}" for i in range(len(splits))]
    pairs = pa.table({"prompt_id": ids, "split": splits})
    test = pairs.filter(pc.equal(pairs["split"], "test"))
    pool = [i for i, s in zip(ids, splits, strict=True) if s == "pool"]
    labels = pa.table({"prompt_id": pool})
    assert held_out_check(test, labels, pairs) == {
        "test_prompts": params.test_prompts,
        "training_prompts": len(pool) + params.finetune_prompts,
        "shared": 0,
    }
    leaked = pa.table({"prompt_id": [*pool, test["prompt_id"][0].as_py()]})
    with pytest.raises(InputError, match="also trained or tuned"):
        held_out_check(test, leaked, pairs)


def scored_pairs(prompts: int, rm_right: float, judge_right: float, seed: int = 0):
    """`prompts` × 8 pairs; each scorer picks the truth's side with its own probability."""
    rng = np.random.default_rng(seed)
    pairs, truth, margins = [], {}, {"reward_model": {}, "judge": {}}
    for p in range(prompts):
        for i in range(8):
            pair_id = f"p{p}-{i}"
            pairs.append({"pair_id": pair_id, "prompt_id": f"p{p}", "modality": "text"})
            truth[pair_id] = {"quality": 1, "musicality": 1, "alignment": -1, "confidence": 4}
            for scorer, right in (("reward_model", rm_right), ("judge", judge_right)):
                side = 1.0 if rng.random() < right else -1.0
                margins[scorer][pair_id] = {
                    "quality": side,
                    "musicality": side,
                    "alignment": -side,
                    "consistent": True,
                }
    return pairs, truth, margins


def test_accuracy_intervals_resample_prompts_and_match_the_toolkit():
    pairs, truth, margins = scored_pairs(30, 0.8, 0.7)
    credits = prompt_credits(pairs, truth, margins, {p["pair_id"]: 2 for p in pairs})
    assert set(credits["judge"]) >= {"overall", "judge confidence <3", "modality text"}
    by_prompt = credits["reward_model"]["overall"]
    assert len(by_prompt) == 30 and all(len(v) == 8 for v in by_prompt.values())
    estimate = accuracy_estimate(by_prompt)
    expected = evidence.clustered_rate([sum(v) for v in by_prompt.values()], [8.0] * 30, "prompts")
    assert estimate == expected and estimate.n == 30 and estimate.unit == "prompts"
    table = accuracy_table(credits, accuracy_estimates(credits))
    row = table["reward_model"]["overall"]
    assert row["pairs"] == 240 and row["prompts"] == 30
    assert row["ci_low"] < row["accuracy"] < row["ci_high"]
    assert accuracy_estimate({"p0": [1.0, 0.0]}) is None  # one prompt: no interval


def test_the_judge_can_win_the_paired_comparison_and_a_tie_is_inconclusive():
    for rm_right, judge_right, verdict in ((0.9, 0.6, "supported"), (0.6, 0.9, "contradicted")):
        pairs, truth, margins = scored_pairs(40, rm_right, judge_right)
        credits = prompt_credits(pairs, truth, margins)
        comparison, n = judge_comparisons(credits, ["judge"])["judge"]["overall"]
        assert n == 40 and evidence.verdict(comparison.difference, "greater") == verdict
    pairs, truth, margins = scored_pairs(40, 0.75, 0.75, seed=3)
    margins["judge"] = margins["reward_model"]  # the same calls: no difference at all
    credits = prompt_credits(pairs, truth, margins)
    same = compare(*prompt_accuracies(credits, "reward_model", "judge", "overall"))
    assert same.difference.value == 0 and evidence.verdict(same.difference, "greater") == (
        "inconclusive"
    )


def test_top_k_gain_is_measured_per_prompt_against_a_random_pick():
    candidates = [
        {"prompt_id": p, "audio": f"{p}{i}", "quality": q}
        for p in ("a", "b")
        for i, q in enumerate([1.0, 0.5, 0.0])
    ]
    best_first = {c["audio"]: c["quality"] for c in candidates}
    assert prompt_gains(candidates, best_first, 1) == {"a": 0.5, "b": 0.5}
    worst_first = {k: -v for k, v in best_first.items()}
    assert prompt_gains(candidates, worst_first, 1) == {"a": -0.5, "b": -0.5}
    gains, estimate = top_k_gains(candidates, best_first, [2])[2]
    assert gains == [0.25, 0.25] and estimate.value == 0.25


def test_claims_carry_interval_unit_and_verdict_for_each_judge_and_k():
    pairs, truth, margins = scored_pairs(30, 0.85, 0.6)
    margins["judge_0"] = margins["judge"]
    margins["judge_1"] = margins["reward_model"]
    credits = prompt_credits(pairs, truth, margins)
    estimates = accuracy_estimates(credits)
    comparisons = judge_comparisons(credits, ["judge", "judge_0", "judge_1"])
    candidates = [
        {"prompt_id": f"p{p}", "audio": f"p{p}c{i}", "quality": q}
        for p in range(30)
        for i, q in enumerate([1.0, 0.6, 0.3, 0.0 + p / 100])
    ]
    gains = top_k_gains(candidates, {c["audio"]: c["quality"] for c in candidates}, [1, 2])
    names = {"judge": "signal + openai", "judge_0": "signal", "judge_1": "openai"}
    found = {
        c.id: c
        for c in build_claims(
            comparisons,
            estimates,
            gains,
            names,
            {"overall": 240, "musicality": 240, "alignment": 240},
            4,
            [0, 1, 2],
        )
    }
    dims = ("", ".musicality", ".alignment")
    assert set(found) == {
        *(f"cmipref.rm_beats_judge{j}{d}" for j in ("", "_0", "_1") for d in dims),
        "cmipref.rm_accuracy_overall",
        "cmipref.rm_accuracy_musicality",
        "cmipref.top_1_gain",
        "cmipref.top_2_gain",
    }
    assert found["cmipref.rm_beats_judge"].verdict == "supported"
    assert [c.id for c in found.values() if c.primary] == ["cmipref.rm_beats_judge"]
    assert found["cmipref.rm_accuracy_overall"].kind == "check"
    assert "musicality preference accuracy" in found["cmipref.rm_beats_judge.musicality"].metric
    assert found["cmipref.rm_beats_judge_1"].verdict == "inconclusive"  # against itself
    assert found["cmipref.rm_accuracy_overall"].null == 0.5
    assert found["cmipref.top_1_gain"].verdict == "supported"
    for claim in found.values():
        assert claim.unit == "prompts" and claim.n == 30 and claim.simplifications
        assert claim.ci_low <= claim.estimate <= claim.ci_high
    assert "signal judge" in found["cmipref.rm_beats_judge_0"].arms[1]


@pytest.fixture(scope="module")
def clips() -> list[np.ndarray]:
    clean = synthesize(TUNE, 4.0, SR, seed=1)
    return [
        clean,
        degrade(clean, SR, [("detune", 1.0)], seed=0),  # another tuning: its own group
        degrade(clean, SR, [("noise", 0.8)], seed=0),
        synthesize(TUNE, 3.0, SR, seed=2),  # another length
    ]


def test_batched_chroma_is_each_clips_own_chroma(clips):
    import librosa

    for clip, profile in zip(clips, chroma_profiles(clips, SR), strict=True):
        alone = librosa.feature.chroma_cqt(y=clip, sr=SR, hop_length=2048).mean(axis=1)
        assert np.allclose(profile, alone, atol=1e-5)


def test_one_shared_stft_gives_what_librosa_computes_from_the_clip(clips):
    import librosa

    audio = clips[2]
    features = clip_features(audio, SR)
    flatness = librosa.feature.spectral_flatness(y=audio + 1e-9).mean()
    assert features.flatness == pytest.approx(np.log10(flatness + 1e-12), abs=1e-5)
    centroid = librosa.feature.spectral_centroid(y=audio, sr=SR).mean()
    assert features.centroid == pytest.approx(centroid, rel=1e-5)
    mfcc = librosa.feature.mfcc(y=audio, sr=SR, n_mfcc=13)[1:].mean(axis=1)
    assert np.allclose(features.mfcc, mfcc, atol=1e-3)
    envelope = librosa.onset.onset_strength(y=audio, sr=SR, hop_length=512)
    tempo = librosa.feature.tempo(onset_envelope=envelope, sr=SR, hop_length=512)
    assert features.tempo == pytest.approx(float(tempo[0]))


def test_a_batch_hears_exactly_what_clips_heard_one_by_one_do(clips, tmp_path):
    batch = clip_features_batch(clips, SR)
    for clip, heard in zip(clips, batch, strict=True):
        alone = clip_features(clip, SR)
        assert (alone.key, alone.mode, alone.tempo) == (heard.key, heard.mode, heard.tempo)
        assert alone.in_tune == pytest.approx(heard.in_tune)
        assert alone.key_clarity == pytest.approx(heard.key_clarity, abs=1e-6)
    paths = []
    for i, clip in enumerate(clips):
        paths.append(tmp_path / f"c{i}.flac")
        soundfile.write(paths[-1], clip, SR)
    judge = SignalJudge(SR, listen_seconds=3.0)
    shown = [(paths[0], paths[1], None), (paths[2], paths[0], paths[3])]
    asked = [
        Listening(f"x{i}", "flute at 100 BPM in D major", None, ref, a, b, swapped)
        for i, (a, b, ref) in enumerate(shown)
        for swapped in (False, True)
    ]
    together = judge.compare_many(asked)
    for verdict, item in zip(together, asked, strict=True):
        alone = judge.compare(item)
        assert verdict.musicality == pytest.approx(alone.musicality, abs=1e-5)
        assert verdict.alignment == pytest.approx(alone.alignment, abs=1e-5)
    whole = [(paths[0], "flute", None), (paths[1], "flute", paths[3])]
    singly = [SignalJudge(SR, 3.0).clip_scores(*w) for w in whole]
    assert judge.clip_scores_many(whole) == [pytest.approx(s, abs=1e-5) for s in singly]

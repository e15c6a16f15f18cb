"""cmipref's parts on tiny inputs: synthesis, faults the judges must hear, prompt parsing,
position-consistent labels, the reward model's null embeddings and loss, the metrics."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
import torch

from tasks.cmipref.audio import decode, flac_bytes
from tasks.cmipref.degrade import degrade, penalties
from tasks.cmipref.evaluate import accuracy_estimates, accuracy_table, metric_key, top_k_gain
from tasks.cmipref.judges import (
    clip_features,
    musicality_score,
    parse_prompt,
    parse_verdict,
    tempo_agreement,
)
from tasks.cmipref.label import combine, confidence, dimension_target, label_rows
from tasks.cmipref.music import MusicDescription, describe, random_description, synthesize
from tasks.cmipref.params import CmiprefParams
from tasks.cmipref.reward_model import (
    CmiRewardModel,
    RewardModelConfig,
    bradley_terry_loss,
    load,
    save,
)
from tasks.cmipref.significance import credit, prompt_credits
from tasks.cmipref.truth import confidence_bucket, pair_truth, truth_confidence
from tasks.core.errors import UserError

SR = 16000
TUNE = MusicDescription(
    tempo=120,
    key=9,
    mode="minor",
    lead="piano",
    harmony="warm pad",
    density="medium",
    mood=("dark",),
)


@pytest.fixture(scope="module")
def clean() -> np.ndarray:
    return synthesize(TUNE, 5.0, SR, seed=1)


def test_synthesis_is_deterministic_and_normalised(clean):
    again = synthesize(TUNE, 5.0, SR, seed=1)
    other = synthesize(TUNE, 5.0, SR, seed=2)
    assert clean.shape == (5 * SR,) and clean.dtype == np.float32
    assert np.array_equal(clean, again) and not np.array_equal(clean, other)
    assert abs(float(np.abs(clean).max()) - 0.8) < 1e-4


def test_flac_round_trip_keeps_the_clip(clean):
    back = decode(flac_bytes(clean, SR), SR)
    assert back.shape == clean.shape and float(np.abs(back - clean).max()) < 1e-3


def test_the_prompt_says_what_the_signal_judge_reads_back():
    rng = np.random.default_rng(3)
    for _ in range(10):
        description = random_description(rng, with_lyrics=False)
        want = parse_prompt(describe(description))
        assert (want.tempo, want.key, want.mode) == (
            description.tempo,
            description.key,
            description.mode,
        )
        assert want.tone in {"bright", "warm"}


def test_clean_clips_sound_in_tempo_and_in_key(clean):
    features = clip_features(clean, SR)
    want = parse_prompt(describe(TUNE))
    assert tempo_agreement(features, want) > 0.5
    assert (features.key, features.mode) == (9, "minor")


@pytest.mark.parametrize(
    ("fault", "feature", "direction"),
    [
        ("noise", "flatness", 1),
        ("clipping", "clipped", 1),
        ("detune", "in_tune", -1),
        ("tempo_jitter", "pulse", -1),
    ],
)
def test_each_musicality_fault_moves_the_feature_that_detects_it(clean, fault, feature, direction):
    before = clip_features(clean, SR)
    after = clip_features(degrade(clean, SR, [(fault, 1.0)], seed=0), SR)
    assert direction * (getattr(after, feature) - getattr(before, feature)) > 0
    assert musicality_score(after) < musicality_score(before)


def test_alignment_faults_break_what_the_prompt_asked(clean):
    want = parse_prompt(describe(TUNE))
    slow = clip_features(degrade(clean, SR, [("wrong_tempo", 1.0)], seed=1), SR)
    assert tempo_agreement(slow, want) < tempo_agreement(clip_features(clean, SR), want)
    shifted = clip_features(degrade(clean, SR, [("wrong_key", 1.0)], seed=2), SR)
    assert shifted.key != TUNE.key


def test_penalties_weigh_musicality_by_severity_and_mismatches_by_half_plus():
    assert penalties([]) == (1.0, 1.0)
    assert penalties([("noise", 0.4)]) == pytest.approx((0.6, 1.0))
    assert penalties([("wrong_key", 0.4), ("clipping", 0.2)]) == pytest.approx((0.8, 0.3))
    assert penalties([("noise", 0.8), ("detune", 0.9)])[0] == 0.0


def margins_table(rows):
    columns = ("pair_id", "judge", "musicality_ab", "musicality_ba", "alignment_ab", "alignment_ba")
    return pa.Table.from_pylist([dict(zip(columns, row, strict=True)) for row in rows])


def test_labels_keep_only_position_consistent_pairs_and_smooth_their_targets():
    combined = combine(
        margins_table(
            [
                ("agree", 0, 2.0, 1.0, 1.0, 2.0),  # A better in both orders, both dimensions
                ("flip", 0, 1.0, -1.0, 1.0, -1.0),  # the side follows the order: inconsistent
                ("split", 0, 1.0, 1.0, -0.5, 0.5),  # musicality agrees, alignment flips
                ("b", 0, -1.0, -1.0, -1.0, -1.0),
            ]
        )
    )
    assert not combined["flip"]["consistent"]
    assert combined["agree"]["unanimous"] and not combined["split"]["unanimous"]
    common = {
        "prompt_id": "p",
        "prompt": "x",
        "lyrics": None,
        "reference_audio": None,
        "audio_a": "a",
        "audio_b": "b",
        "modality": "text",
    }
    pairs = pa.Table.from_pylist(
        [{"pair_id": p, **common} for p in ("agree", "flip", "split", "b")]
    )
    rows = {r["pair_id"]: r for r in label_rows(pairs, combined, smoothing=0.1)}
    assert set(rows) == {"agree", "split", "b"}
    assert rows["agree"]["preference"] == pytest.approx(0.95)
    assert rows["b"]["preference"] == pytest.approx(0.05)
    assert rows["split"]["preference_alignment"] == 0.5
    assert rows["split"]["preference_musicality"] == pytest.approx(0.95)
    assert rows["agree"]["confidence"] > rows["split"]["confidence"]
    assert all(1 <= r["confidence"] <= 5 for r in rows.values())


def test_dimension_target_and_confidence_scale():
    assert dimension_target(1.0, 2.0, 0.2) == pytest.approx(0.9)
    assert dimension_target(1.0, -2.0, 0.2) == 0.5
    assert confidence({"overall": 0.1, "unanimous": False}) == 1
    assert confidence({"overall": 3.0, "unanimous": True}) == 5


def test_verdicts_parse_from_an_llm_reply_or_fail_with_the_pair_named():
    verdict = parse_verdict('Sure: {"musicality": "b", "alignment": "A", "confidence": 5}', "p1")
    assert (verdict.musicality, verdict.alignment) == (-1.0, 1.0)
    with pytest.raises(UserError, match="pair p1"):
        parse_verdict("I like the first one", "p1")


def test_pair_truth_signs_and_confidence_buckets():
    truth = pa.Table.from_pylist(
        [
            {"audio": "a", "musicality": 1.0, "alignment": 0.0, "quality": 0.5},
            {"audio": "b", "musicality": 0.4, "alignment": 1.0, "quality": 0.7},
        ]
    )
    pairs = pa.Table.from_pylist([{"pair_id": "x", "audio_a": "a", "audio_b": "b"}])
    assert pair_truth(pairs, truth)["x"] == {
        "musicality": 1,
        "alignment": -1,
        "quality": -1,
        "confidence": 2,
    }
    assert [truth_confidence(g) for g in (0.05, 0.3, 0.6)] == [1, 3, 5]
    assert [confidence_bucket(c) for c in (1, 3, 5)] == ["<3", "=3", ">3"]


def tiny_model() -> CmiRewardModel:
    torch.manual_seed(0)
    return CmiRewardModel(RewardModelConfig(text_dim=8, n_mels=16, d_model=16, heads=2)).eval()


def model_inputs(batch: int = 3):
    torch.manual_seed(1)
    return (
        torch.randn(batch, 16, 40) * 20 - 40,
        torch.randn(batch, 8),
        torch.randn(batch, 8),
        torch.randn(batch, 16, 40) * 20 - 40,
        torch.ones(batch, 3),
    )


def test_absent_modalities_are_replaced_by_null_embeddings():
    model = tiny_model()
    mel, text, lyrics, reference, present = model_inputs()
    without = present.clone()
    without[:, 1:] = 0  # no lyrics, no reference
    with torch.no_grad():
        base = model(mel, text, lyrics, reference, without)
        other = model(mel, text, torch.randn(3, 8), torch.randn(3, 16, 40), without)
        full = model(mel, text, lyrics, reference, present)
    assert base.shape == (3, 2)
    assert torch.allclose(base, other, atol=1e-6)  # what is absent cannot matter
    assert not torch.allclose(base, full)


def test_model_folder_round_trip(tmp_path):
    model = tiny_model()
    save(model, tmp_path / "rm")
    with torch.no_grad():
        assert torch.equal(model(*model_inputs()), load(tmp_path / "rm")(*model_inputs()))
    with pytest.raises(UserError, match="not a CMI reward model"):
        load(tmp_path / "missing")


def test_bradley_terry_loss_is_bce_of_the_reward_margins():
    a, b = torch.tensor([[2.0, 0.0]]), torch.tensor([[0.0, 1.0]])
    targets = torch.tensor([[1.0, 0.0, 0.5]])
    logits = torch.tensor([2.0, -1.0, 0.5])
    expected = torch.nn.functional.binary_cross_entropy_with_logits(logits, targets[0])
    assert torch.isclose(bradley_terry_loss(a, b, targets), expected)


def test_accuracy_gives_half_credit_to_order_inconsistent_calls_and_top_k_gain():
    assert credit(1.0, 1) == 1.0 and credit(-1.0, 1) == 0.0 and credit(1.0, 1, False) == 0.5
    pairs = [
        {"pair_id": "x", "prompt_id": "p", "modality": "text"},
        {"pair_id": "y", "prompt_id": "p", "modality": "all"},
    ]
    truth = {
        "x": {"quality": 1, "musicality": 1, "alignment": 0, "confidence": 4},
        "y": {"quality": -1, "musicality": 0, "alignment": -1, "confidence": 1},
    }
    x = {"quality": 1, "musicality": 1, "alignment": 0, "consistent": True}
    y = {"quality": 1, "musicality": 0, "alignment": 1, "consistent": False}
    credits = prompt_credits(pairs, truth, {"s": {"x": x, "y": y}})
    table = accuracy_table(credits, accuracy_estimates(credits))["s"]
    assert (table["overall"]["accuracy"], table["overall"]["pairs"]) == (0.75, 2)
    assert table["overall"]["ci_low"] is None  # one prompt: nothing to resample
    assert table["confidence >3"]["accuracy"] == 1.0 and table["modality all"]["accuracy"] == 0.5
    candidates = [
        {"prompt_id": "p", "audio": str(i), "quality": q} for i, q in enumerate([1.0, 0.2, 0.6])
    ]
    gains = top_k_gain(candidates, {"0": 3.0, "1": 2.0, "2": 1.0}, [1, 3])
    assert gains["top_1"]["gain"] == pytest.approx(0.4) and gains["top_3"]["gain"] == 0.0
    assert metric_key("judge confidence <3") == "judge_confidence_lt3"


def test_params_reject_splits_that_leave_no_pool():
    with pytest.raises(ValueError, match="leave prompts for the pool"):
        CmiprefParams.model_validate(
            {"generate": {"prompts": 10, "test_prompts": 5, "finetune_prompts": 5}}
        )


def test_folder_source_reads_metadata_and_names_a_bad_line(tmp_path, clean):
    import soundfile

    from tasks.cmipref.params import GenerateParams
    from tasks.cmipref.sources import folder_clips

    soundfile.write(tmp_path / "a.wav", clean, SR)
    (tmp_path / "metadata.jsonl").write_text(
        json.dumps({"file": "a.wav", "text": "calm piano", "lyrics": "la la"})
        + "\n"
        + json.dumps({"file": "a.wav"})
        + "\n"
    )
    params = GenerateParams(
        source={"kind": "folder", "folder": str(tmp_path)},
        prompts=3,
        test_prompts=1,
        finetune_prompts=1,
    )
    clips = folder_clips(params)
    first = next(clips)
    assert first.prompt == "calm piano" and first.modality == "text+lyrics"
    assert first.audio.shape == (5 * SR,)
    with pytest.raises(UserError, match="metadata.jsonl: line 2: needs 'file' and 'text'"):
        next(clips)


def test_hub_source_decodes_a_datasets_audio_column_without_codecs(tmp_path, clean):
    import pyarrow.parquet as pq

    from tasks.cmipref.params import GenerateParams
    from tasks.cmipref.sources import hub_clips

    data = tmp_path / "musiccaps-like"
    data.mkdir()
    audio = {"bytes": flac_bytes(clean[: 3 * SR], SR), "path": "x.flac"}
    pq.write_table(
        pa.Table.from_pylist([{"audio": audio, "caption": "a slow tune"}] * 2),
        data / "train.parquet",
    )
    params = GenerateParams(
        source={"kind": "hub", "dataset": str(data), "text_column": "caption"},
        prompts=3,
        test_prompts=1,
        finetune_prompts=1,
    )
    clips = list(hub_clips(params))
    assert len(clips) == 2 and clips[0].prompt == "a slow tune"
    assert clips[0].audio.shape == (5 * SR,)  # padded to the clip length


def test_candidates_are_the_same_whatever_the_batching():
    from tasks.cmipref.generate import plan_prompts, render_batch
    from tasks.cmipref.params import GenerateParams

    params = GenerateParams(prompts=4, candidates=3, test_prompts=1, finetune_prompts=1)
    prompts, _ = plan_prompts(params)
    whole = render_batch(prompts, params.sample_rate, params.seconds)
    one_by_one = pa.concat_tables(
        [render_batch(prompts.slice(i, 1), params.sample_rate, params.seconds) for i in range(4)]
    )
    assert whole.equals(one_by_one)
    flac = whole.column("flac").to_pylist()
    assert len(set(flac)) == len(flac)  # no two candidates alike

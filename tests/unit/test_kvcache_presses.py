"""The presses against direct formulas, what a press keeps, and decoding on a pruned cache."""

import contextlib

import numpy as np
import pytest
import torch

from tasks.core.errors import UserError
from tasks.kvcache.generation import greedy_answer
from tasks.kvcache.params import PRESSES, PressParams
from tasks.kvcache.presses import (
    KeyDiffPress,
    KnormPress,
    ManifoldKVPress,
    RandomPress,
    SnapKVPress,
    StreamingLLMPress,
    WindowedManifoldKVPress,
    make_press,
)


class Layer0:
    layer_idx = 0


def score(press, keys, **extra):
    return press.score(Layer0(), None, keys, keys, None, extra).numpy()


@pytest.fixture(scope="module")
def keys():
    return torch.randn(2, 3, 40, 8, generator=torch.Generator().manual_seed(0))


def cosine(a, b):
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def test_distance_scorers_match_their_formulas(keys):
    k = keys.numpy().astype(np.float64)
    offset = k - k.mean(axis=2, keepdims=True)
    expected = {
        "l2": np.sqrt((offset**2).sum(-1)),
        "l1": np.abs(offset).sum(-1),
        "linf": np.abs(offset).max(-1),
        "cosine": 1 - cosine(k, k.mean(axis=2, keepdims=True)),
    }
    for norm, values in expected.items():
        np.testing.assert_allclose(
            score(ManifoldKVPress(0.5, norm=norm), keys), values, rtol=1e-5, atol=1e-6
        )
    np.testing.assert_allclose(
        score(KnormPress(0.5), keys), -np.linalg.norm(k, axis=-1), rtol=1e-5, atol=1e-6
    )
    anchor = (k / np.linalg.norm(k, axis=-1, keepdims=True)).mean(axis=2, keepdims=True)
    np.testing.assert_allclose(
        score(KeyDiffPress(0.5), keys), -cosine(k, anchor), rtol=1e-5, atol=1e-6
    )


def test_windowed_centroid_is_per_window_and_equals_global_for_one_window(keys):
    k = keys.numpy().astype(np.float64)
    windowed = score(WindowedManifoldKVPress(0.5, window_size=16), keys)
    for start in (0, 16, 32):  # the last window holds 8 tokens
        part = k[:, :, start : start + 16]
        distance = np.linalg.norm(part - part.mean(axis=2, keepdims=True), axis=-1)
        np.testing.assert_allclose(
            windowed[:, :, start : start + 16], distance, rtol=1e-5, atol=1e-6
        )
    single = score(WindowedManifoldKVPress(0.5, window_size=40), keys)
    np.testing.assert_allclose(single, score(ManifoldKVPress(0.5), keys), rtol=1e-6)


def test_streamingllm_keeps_the_sinks_and_the_most_recent(keys):
    press = StreamingLLMPress(0.5, n_sink=4)
    kept, _ = press.compress(Layer0(), None, keys, keys, None, {})
    positions = torch.arange(40.0).view(1, 1, 40, 1).expand(2, 3, 40, 8)
    kept_positions, _ = press.compress(Layer0(), None, positions, positions, None, {})
    assert kept.shape[2] == 20
    assert kept_positions[0, 0, :, 0].tolist() == [0, 1, 2, 3, *range(24, 40)]


def test_random_press_is_seeded_per_layer(keys):
    first, again = score(RandomPress(0.5, seed=3), keys), score(RandomPress(0.5, seed=3), keys)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, score(RandomPress(0.5, seed=4), keys))


def test_compress_keeps_the_top_scores_in_their_order(keys):
    press = ManifoldKVPress(0.25)
    kept_keys, kept_values = press.compress(Layer0(), None, keys, keys * 2, None, {})
    scores = score(press, keys)
    n_kept = int(40 * 0.75)
    assert kept_keys.shape == (2, 3, n_kept, 8)
    for b in range(2):
        for h in range(3):
            top = np.sort(np.argsort(-scores[b, h])[:n_kept])
            torch.testing.assert_close(kept_keys[b, h], keys[b, h, top])
            torch.testing.assert_close(kept_values[b, h], 2 * keys[b, h, top])


def test_ratio_outside_the_interval_and_unknown_press_are_one_line_errors():
    for ratio in (-0.1, 1.0, 1.5):
        with pytest.raises(UserError, match=r"outside \[0, 1\)"):
            ManifoldKVPress(ratio)
    with pytest.raises(UserError, match="press 'nope' is not one of"):
        make_press("nope", 0.5, PressParams())
    for name in PRESSES:
        assert make_press(name, 0.25, PressParams()).compression_ratio == 0.25


def tiny_model(attention="sdpa"):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=50,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        attn_implementation=attention,
    )
    return LlamaForCausalLM(config).eval()


def prefill(model, context, press=None):
    from transformers import DynamicCache

    from tasks.core.kv_cache import cache_argument

    cache = DynamicCache(config=model.config)
    with press(model) if press else contextlib.nullcontext(), torch.no_grad():
        model(input_ids=context, **{cache_argument(model): cache}, use_cache=True)
    return cache


def test_a_press_keeps_exactly_the_intended_positions_in_every_layer():
    model = tiny_model()
    context = torch.randint(0, 50, (2, 30), generator=torch.Generator().manual_seed(1))
    full = prefill(model, context)
    pressed = prefill(model, context, ManifoldKVPress(0.5))
    for layer, kept in zip(full.layers, pressed.layers, strict=True):
        assert kept.keys.shape[2] == 15 and kept.values.shape[2] == 15
        distance = (layer.keys - layer.keys.mean(dim=2, keepdim=True)).norm(dim=-1)
        top = distance.topk(15, dim=-1).indices.sort(dim=-1).values
        expanded = top.unsqueeze(-1).expand(-1, -1, -1, layer.keys.shape[-1])
        torch.testing.assert_close(kept.keys, layer.keys.gather(2, expanded))
        torch.testing.assert_close(kept.values, layer.values.gather(2, expanded))


def test_snapkv_recomputed_window_attention_equals_eager_attention_weights():
    """kvpress's two SnapKV paths: queries recomputed from q_proj + RoPE (sdpa) and the
    eager attention's own weights give the same scores, hence the same cache."""
    context = torch.randint(0, 50, (2, 40), generator=torch.Generator().manual_seed(2))
    sdpa = prefill(tiny_model("sdpa"), context, SnapKVPress(0.5, window_size=8))
    eager = prefill(tiny_model("eager"), context, SnapKVPress(0.5, window_size=8))
    for a, b in zip(sdpa.layers, eager.layers, strict=True):
        assert a.keys.shape[2] == 20
        torch.testing.assert_close(a.keys, b.keys, rtol=1e-4, atol=1e-5)


def test_snapkv_score_matches_the_direct_formula():
    model = tiny_model("eager")
    context = torch.randint(0, 50, (1, 24), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        out = model(input_ids=context, output_attentions=True)
    attention = out.attentions[0]  # (1, 4 heads, 24, 24)
    window, kernel = 6, 3
    press = SnapKVPress(0.5, window_size=window, kernel_size=kernel)
    keys = torch.zeros(1, 2, 24, 8)
    got = press.score(Layer0(), None, keys, keys, attention, {}).numpy()[0]
    weights = attention[0, :, -window:, :-window].mean(dim=1).numpy().astype(np.float64)
    padded = np.pad(weights, ((0, 0), (1, 1)))
    pooled = np.stack([padded[:, i : i + kernel].mean(axis=1) for i in range(24 - window)], 1)
    grouped = pooled.reshape(2, 2, -1).mean(axis=1)  # query heads 0,1 → KV 0; 2,3 → KV 1
    np.testing.assert_allclose(got[:, :-window], grouped, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[:, -window:], grouped.max(), rtol=1e-5)  # always kept


def test_decoding_on_a_pruned_cache_equals_masking_those_tokens_out():
    model = tiny_model()
    generator = torch.Generator().manual_seed(4)
    context = torch.randint(0, 50, (3, 32), generator=generator)
    question = torch.randint(0, 50, (3, 5), generator=generator)
    press = StreamingLLMPress(0.5, n_sink=4)
    pruned = greedy_answer(model, context, question, 6, press)
    keep = torch.zeros(3, 32, dtype=torch.bool)
    keep[:, :4] = True
    keep[:, 20:] = True  # the 16 most recent of int(32 · 0.5) kept, after 4 sinks
    masked = greedy_answer(model, context, question, 6, keep=keep)
    assert torch.equal(pruned.tokens, masked.tokens)
    for a, b in zip(pruned.logits, masked.logits, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    unpressed = greedy_answer(model, context, question, 6)
    assert not all(
        torch.allclose(a, b) for a, b in zip(pruned.logits, unpressed.logits, strict=True)
    )
    assert pruned.kv_bytes * 2 == pruned.full_kv_bytes == unpressed.kv_bytes

"""The presses against direct formulas, what a press keeps (block-wise, head-wise), and
decoding on the batched compressed caches against masking and against `generate`."""

import numpy as np
import pytest
import torch

from tasks.core.errors import UserError
from tasks.kvcache.compressed import (
    batched_cache,
    decode,
    keep_masks,
    prefill,
    use_masked_attention,
)
from tasks.kvcache.params import PRESSES, PressParams
from tasks.kvcache.presses import (
    AdaKVPress,
    BlockPress,
    KeyDiffPress,
    KnormPress,
    LayerState,
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


def layer_of(keys, values=None):
    return LayerState(Layer0(), keys, keys if values is None else values, None, {})


def kept_positions(mask):
    """Per (batch, head), the kept positions as lists."""
    return [[row.nonzero().flatten().tolist() for row in heads] for heads in mask]


def test_streamingllm_keeps_the_sinks_and_the_most_recent(keys):
    mask = StreamingLLMPress(0.5, n_sink=4).keep_mask(layer_of(keys))
    assert all(p == [0, 1, 2, 3, *range(24, 40)] for heads in kept_positions(mask) for p in heads)


def test_random_press_is_seeded_per_layer(keys):
    first, again = score(RandomPress(0.5, seed=3), keys), score(RandomPress(0.5, seed=3), keys)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, score(RandomPress(0.5, seed=4), keys))


def test_a_scorer_keeps_its_top_scores_and_at_least_one_position(keys):
    press = ManifoldKVPress(0.25)
    mask = press.keep_mask(layer_of(keys))
    scores = score(press, keys)
    for b in range(2):
        for h in range(3):
            top = sorted(np.argsort(-scores[b, h])[:30].tolist())
            assert mask[b, h].nonzero().flatten().tolist() == top
    nearly_all = ManifoldKVPress(0.99).keep_mask(layer_of(keys[:, :, :20]))
    assert (nearly_all.sum(-1) == 1).all()  # int(20 · 0.01) = 0, kept 1: no empty cache


def test_block_press_with_one_block_is_the_scorer_and_streams_otherwise(keys):
    one_block = BlockPress(KeyDiffPress(0.5), block_size=64).keep_mask(layer_of(keys))
    torch.testing.assert_close(one_block, KeyDiffPress(0.5).keep_mask(layer_of(keys)))
    blocks = BlockPress(KeyDiffPress(0.5), block_size=4).keep_mask(layer_of(keys))
    assert (blocks.sum(-1) == 20).all()
    # streaming by hand: keep 0..19, then each block of 4 competes with the kept 20
    kept = list(range(20))
    for start in range(20, 40, 4):
        current = kept + list(range(start, start + 4))
        scores = score(KeyDiffPress(0.5), keys[:1, :1, current])[0, 0]
        kept = [current[i] for i in np.argsort(-scores, kind="stable")[:20]]
    assert blocks[0, 0].nonzero().flatten().tolist() == sorted(kept)


def test_adakv_shares_one_budget_per_layer_and_secures_each_head(keys):
    inner = ManifoldKVPress(0.5)
    mask = AdaKVPress(inner, alpha_safeguard=0.2).keep_mask(layer_of(keys))
    assert (mask.sum(dim=(1, 2)) == 3 * 20).all()  # n_kept × heads per layer, in all
    assert (mask.sum(-1) >= int(20 * 0.2)).all()
    scaled = keys.clone()
    scaled[:, 0] *= 10  # head 0's distances are 10× the others': it takes the budget
    skewed = AdaKVPress(inner, alpha_safeguard=0.2).keep_mask(layer_of(scaled))
    assert (skewed[:, 0].sum(-1) > 20).all() and (skewed[:, 1:].sum(-1) >= 4).all()


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


def test_snapkv_recomputed_window_attention_equals_eager_attention_weights():
    """kvpress's two SnapKV paths: queries recomputed from q_proj + RoPE (from the recorded
    window) and the eager attention's own weights give the same scores."""
    context = torch.randint(0, 50, (1, 40), generator=torch.Generator().manual_seed(2))
    model = tiny_model("eager")
    press = SnapKVPress(0.5, window_size=8)
    recorded = prefill(model, context, window=8)
    with torch.no_grad():
        attentions = model(input_ids=context, output_attentions=True).attentions
    for layer, weights in zip(recorded.layers, attentions, strict=True):
        recomputed = press.score(
            layer.module, layer.hidden_states, layer.keys, layer.values, None, layer.kwargs
        )
        direct = press.score(layer.module, None, layer.keys, layer.values, weights, {})
        torch.testing.assert_close(recomputed, direct, rtol=1e-4, atol=1e-5)


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


def answers(model, context, question, presses, steps=6, room=None):
    recorded = prefill(model, context, window=8)
    masks = [keep_masks(recorded, p) for p in presses]
    room = question.shape[1] + steps if room is None else room
    batched = batched_cache(recorded, masks, model.config, room)
    return decode(model, batched, question, context.shape[1], steps, set()), batched


def test_the_full_cache_row_decodes_as_generate_does():
    model = tiny_model()
    use_masked_attention(model)
    generator = torch.Generator().manual_seed(4)
    context = torch.randint(0, 50, (1, 32), generator=generator)
    question = torch.randint(0, 50, (1, 5), generator=generator)
    (tokens,), batched = answers(model, context, question, [None])
    expected = model.generate(
        torch.cat([context, question], dim=1), max_new_tokens=6, do_sample=False
    )
    assert tokens == expected[0, 37:].tolist()
    for room in (2, 11):  # out of room after the question: then it concatenates
        (again,), batched = answers(model, context, question, [None], room=room)
        assert again == tokens and batched.cache.layers[0].keys.shape[2] == 32 + 5 + 5
    assert batched.keep is None and batched.kept_entries == [2 * 2 * 32]


def test_a_padded_head_wise_batch_decodes_each_row_as_it_would_alone():
    """AdaKV rows are padded to the layer's longest head and masked: every row must decode
    exactly as when it is batched alone (no padding, plain sdpa)."""
    model = tiny_model()
    use_masked_attention(model)
    generator = torch.Generator().manual_seed(5)
    context = torch.randint(0, 50, (1, 40), generator=generator)
    question = torch.randint(0, 50, (1, 4), generator=generator)
    presses = [ManifoldKVPress(0.5), AdaKVPress(ManifoldKVPress(0.5)), None]
    together, batched = answers(model, context, question, presses)
    assert batched.keep is not None
    for press, tokens in zip(presses, together, strict=True):
        alone, _ = answers(model, context, question, [press])
        assert tokens == alone[0]
    assert batched.kept_entries[0] == batched.kept_entries[1] == 2 * 2 * 20
    evicting = answers(model, context, question, [StreamingLLMPress(0.9, n_sink=1)], 12)[0]
    full = answers(model, context, question, [None], 12)[0]
    assert evicting != full  # the compressed cache changes what the model says

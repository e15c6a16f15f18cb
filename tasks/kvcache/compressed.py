"""One prefill, every press: kvpress's question-agnostic pipeline, batched over presses.

The context is prefilled once with the full cache while a pre-hook records each attention
layer's input (the last `window` tokens) and rotary embeddings; every press then chooses
per layer and KV head which positions stay (`keep_mask`). The kept positions of each arm
are gathered into one batched DynamicCache (row = arm); where an arm keeps different
counts per head (AdaKV), rows are padded to the layer's longest head and the padding is
masked out of attention by `masked_sdpa`. The question and the answer are then decoded
greedily on all rows at once, with their true positions (`position_ids` continue from the
context length while the cache holds fewer entries), until every row has ended.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from tasks.core.kv_cache import cache_argument
from tasks.kvcache.presses import LayerState, Press, attention_modules

ATTENTION = "paperline_kv_keep"  # sdpa, plus a per-head mask of kept cache positions


def masked_sdpa(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """transformers' sdpa attention, except where `module.kv_keep` (batch, kv_heads, S) is
    set: then the first S cached positions count only where it is True, and the positions
    after them (the question and the answer so far) causally."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    keep = getattr(module, "kv_keep", None)
    if keep is None:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    batch, heads, q_len, _ = query.shape
    stored, k_len = keep.shape[-1], key.shape[2]
    new = k_len - stored
    causal = torch.ones(q_len, new, dtype=torch.bool, device=query.device).tril(new - q_len)
    allowed = torch.cat(
        [keep[:, :, None, :].expand(-1, -1, q_len, -1), causal.expand(*keep.shape[:2], -1, -1)],
        dim=-1,
    )
    # grouped-query attention without copying the cache per query head: the query heads of
    # one KV head become extra query rows against that KV head (repeat_interleave of the
    # keys and values took ~40% of decoding a batch of 2K caches on CPU)
    kv_heads = key.shape[1]
    groups = heads // kv_heads
    folded = query.reshape(batch, kv_heads, groups * q_len, query.shape[-1])
    mask = allowed[:, :, None].expand(-1, -1, groups, -1, -1).reshape(batch, kv_heads, -1, k_len)
    output = F.scaled_dot_product_attention(folded, key, value, attn_mask=mask, scale=scaling)
    return output.reshape(batch, heads, q_len, -1).transpose(1, 2).contiguous(), None


def use_masked_attention(model: Any) -> None:
    """Route the model's attention through `masked_sdpa` (a no-op where nothing is masked)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(ATTENTION, masked_sdpa)
    AttentionMaskInterface.register(ATTENTION, sdpa_mask)
    model.set_attn_implementation(ATTENTION)


@dataclass
class Prefilled:
    cache: Any  # the full DynamicCache of the context (batch 1)
    layers: list[LayerState]
    length: int


@torch.no_grad()
def prefill(model: Any, context: torch.Tensor, window: int) -> Prefilled:
    """The context's full cache, and what every press needs of each layer."""
    from transformers import DynamicCache

    recorded: dict[int, tuple[Any, torch.Tensor, tuple]] = {}

    def record(module: Any, args: tuple, kwargs: dict) -> None:
        states = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
        cos, sin = kwargs["position_embeddings"]
        recorded[module.layer_idx] = (
            module,
            states[:, -window:].detach(),
            (cos[:, -window:], sin[:, -window:]),
        )

    cache = DynamicCache(config=model.config)
    hooks = [
        m.register_forward_pre_hook(record, with_kwargs=True) for m in attention_modules(model)
    ]
    try:
        model(input_ids=context, **{cache_argument(model): cache}, use_cache=True, logits_to_keep=1)
    finally:
        for hook in hooks:
            hook.remove()
    layers = [
        LayerState(
            module,
            cache.layers[index].keys,
            cache.layers[index].values,
            states,
            {"position_embeddings": embeddings},
        )
        for index, (module, states, embeddings) in sorted(recorded.items())
    ]
    return Prefilled(cache, layers, context.shape[1])


def keep_masks(prefilled: Prefilled, press: Press | None) -> list[torch.Tensor]:
    """Per layer, the arm's kept positions (kv_heads, T); None = the full cache."""
    if press is None:
        return [torch.ones(layer.keys.shape[1:3], dtype=torch.bool) for layer in prefilled.layers]
    return [press.keep_mask(layer)[0] for layer in prefilled.layers]


@functools.cache
def reserved_layer_class() -> type:
    """A DynamicLayer with room reserved after its states: a decoding step writes its token
    in place (DynamicLayer concatenates the whole cache every step, which dominates decoding
    a batch of long caches on CPU; benchmarks/kv_press.py)."""
    from transformers.cache_utils import DynamicLayer

    class ReservedLayer(DynamicLayer):
        def __init__(self, keys: torch.Tensor, values: torch.Tensor, room: int) -> None:
            super().__init__()
            batch, heads, length, dim = keys.shape
            self.buffers = [t.new_empty(batch, heads, length + room, dim) for t in (keys, values)]
            for buffer, states in zip(self.buffers, (keys, values), strict=True):
                buffer[:, :, :length] = states
            self.length, self.device, self.is_initialized = length, keys.device, True
            self.keys, self.values = (b[:, :, :length] for b in self.buffers)

        def update(self, key_states, value_states, *args, **kwargs):
            end = self.length + key_states.shape[-2]
            if not self.buffers or end > self.buffers[0].shape[-2]:
                self.buffers = []  # out of room: from now on concatenate as DynamicLayer does
                return super().update(key_states, value_states, *args, **kwargs)
            for buffer, states in zip(self.buffers, (key_states, value_states), strict=True):
                buffer[:, :, self.length : end] = states
            self.length = end
            self.keys, self.values = (b[:, :, :end] for b in self.buffers)
            return self.keys, self.values

    return ReservedLayer


@dataclass
class Batched:
    cache: Any  # DynamicCache, one row per arm
    keep: list[torch.Tensor] | None  # per layer (arms, kv_heads, L); None: nothing padded
    kept_entries: list[int]  # per arm: cached (position, head, layer) entries kept


def batched_cache(
    prefilled: Prefilled, masks: list[list[torch.Tensor]], config: Any, room: int = 0
) -> Batched:
    """Each arm's kept positions (in their order) gathered into one cache, row = arm, with
    `room` for the tokens decoding will add."""
    from transformers import DynamicCache

    cache = DynamicCache(config=config)
    keeps, padded = [], False
    for index, layer in enumerate(prefilled.layers):
        mask = torch.stack([arm[index] for arm in masks])  # (arms, kv_heads, T)
        width = int(mask.sum(-1).max())
        padded |= bool((mask.sum(-1) != width).any())
        # kept positions first, in ascending order (a stable sort of "not kept")
        order = torch.sort((~mask).to(torch.int8), dim=-1, stable=True).indices[..., :width]
        index_4d = order.unsqueeze(-1).expand(-1, -1, -1, layer.keys.shape[-1])
        arms = mask.shape[0]
        keys = layer.keys.expand(arms, -1, -1, -1).gather(2, index_4d)
        values = layer.values.expand(arms, -1, -1, -1).gather(2, index_4d)
        cache.layers[index] = reserved_layer_class()(keys, values, room)
        keeps.append(mask.gather(-1, order))
    kept = [int(sum(m.sum() for m in arm)) for arm in masks]
    return Batched(cache, keeps if padded else None, kept)


@torch.no_grad()
def decode(
    model: Any,
    batched: Batched,
    question: torch.Tensor,
    start: int,
    max_new_tokens: int,
    eos_ids: set[int],
) -> list[list[int]]:
    """Greedy tokens per row after the question (1, Q), until every row has ended."""
    rows = len(batched.kept_entries)
    modules = attention_modules(model)
    if batched.keep is not None:
        for module in modules:
            module.kv_keep = batched.keep[module.layer_idx]
    argument = cache_argument(model)
    step, position = question.expand(rows, -1), start
    tokens: list[list[int]] = [[] for _ in range(rows)]
    ended = [False] * rows
    try:
        for _ in range(max_new_tokens):
            count = step.shape[1]
            positions = torch.arange(position, position + count, device=question.device)
            out = model(
                input_ids=step,
                position_ids=positions.unsqueeze(0).expand(rows, -1),
                **{argument: batched.cache},
                use_cache=True,
                logits_to_keep=1,
            )
            step = out.logits[:, -1].argmax(dim=-1, keepdim=True)
            position += count
            for row, token in enumerate(step[:, 0].tolist()):
                if not ended[row]:
                    ended[row] = token in eos_ids
                    if not ended[row]:
                        tokens[row].append(token)
            if all(ended):
                break
    finally:
        for module in modules:
            module.kv_keep = None
    return tokens


def bytes_per_entry(prefilled: Prefilled) -> int:
    """Bytes of one cached (position, head, layer) key + value."""
    keys = prefilled.layers[0].keys
    return 2 * keys.shape[-1] * keys.element_size()

"""Greedy answers with a (pressed) DynamicCache, on any transformers causal LM.

kvpress's pipeline order: the context is prefilled under the press (pruned per layer and
head), then the question and the answer are decoded on the pruned cache with their true
positions (`position_ids` continue from the context length, while the cache holds fewer
entries). `keep` instead masks context positions out of every later step on a full cache:
the reference a pruned cache must equal when the same positions go in every layer and head.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import torch

from tasks.core.kv_cache import cache_argument
from tasks.kvcache.presses import ScorerPress


@dataclass(frozen=True)
class Answer:
    tokens: torch.Tensor  # (batch, new tokens)
    logits: list[torch.Tensor]  # each decoding step's last-position logits, (batch, vocab)
    kv_bytes: int  # the cache after prefill (and pruning)
    full_kv_bytes: int  # the same cache unpruned


def kv_bytes(cache: Any, length: int | None = None) -> int:
    """Bytes of the cache's keys and values (as if each layer held `length` tokens)."""
    total = 0
    for layer in cache.layers:
        keys, values = layer.keys, layer.values
        tokens = length if length is not None else keys.shape[-2]
        per_token = keys[..., :1, :].numel() * keys.element_size()
        per_token += values[..., :1, :].numel() * values.element_size()
        total += per_token * tokens
    return total


@torch.no_grad()
def greedy_answer(
    model: Any,
    context: torch.Tensor,
    question: torch.Tensor,
    max_new_tokens: int,
    press: ScorerPress | None = None,
    keep: torch.Tensor | None = None,
) -> Answer:
    """Prefill `context` (batch, T) under `press`, then decode `question` (batch, Q) and
    `max_new_tokens` greedy tokens. `keep` (batch, T) bool: context positions the later
    steps may attend to (a full cache with the others masked out)."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    argument = cache_argument(model)
    pressed = press(model) if press is not None else contextlib.nullcontext()
    with pressed:
        model(input_ids=context, **{argument: cache}, use_cache=True, logits_to_keep=1)
    length = context.shape[1]
    stored, full = kv_bytes(cache), kv_bytes(cache, length)
    batch, position, step = context.shape[0], length, question
    tokens, logits = [], []
    for _ in range(max_new_tokens):
        count = step.shape[1]
        positions = torch.arange(position, position + count, device=context.device)
        extra = {}
        if keep is not None:
            later = torch.ones(batch, position - length + count, dtype=torch.long)
            extra["attention_mask"] = torch.cat([keep.long(), later.to(keep.device)], dim=1)
        out = model(
            input_ids=step,
            position_ids=positions.unsqueeze(0).expand(batch, -1),
            **{argument: cache},
            use_cache=True,
            logits_to_keep=1,
            **extra,
        )
        last = out.logits[:, -1].float()
        logits.append(last)
        step = last.argmax(dim=-1, keepdim=True)
        tokens.append(step)
        position += count
    return Answer(torch.cat(tokens, dim=1), logits, stored, full)

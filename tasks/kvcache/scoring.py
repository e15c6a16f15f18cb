"""Answer needle items with every press at once and score them (RULER string_match_all).

An item becomes the core LLM's chat prompt, split as kvpress splits it: the context is the
chat template up to the end of the user's context; the question is the rest of the user
turn, the template's assistant opening and RULER's answer prefix. Per item: one prefill,
then one batched decode per group of arms (the full cache; each ratio's presses).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from tasks.core.errors import UserError
from tasks.kvcache.compressed import batched_cache, bytes_per_entry, decode, keep_masks, prefill
from tasks.kvcache.needles import string_match_all
from tasks.kvcache.presses import make_press

FULL = "full"  # no press: the full-cache baseline


@dataclass(frozen=True)
class Encoded:
    row: dict[str, Any]
    context: list[int]
    question: list[int]
    answer_tokens: int


def encode(tokenizer: Any, row: dict[str, Any]) -> Encoded:
    """The item as (context ids, question ids) of the chat prompt, kvpress's split."""
    content = row["context"] + "\n\n" + row["question"]
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False
    )
    cut = text.index(row["context"]) + len(row["context"])
    ids = lambda part: tokenizer(part, add_special_tokens=False)["input_ids"]  # noqa: E731
    answer = max(len(ids(" " + value)) for value in row["answers"]) * len(row["answers"])
    return Encoded(row, ids(text[:cut]), ids(text[cut:] + row["answer_prefix"]), answer)


def check_positions(item: Encoded, limit: int | None, slack: int) -> None:
    """One line when an item needs more positions than the model has."""
    needed = len(item.context) + len(item.question) + item.answer_tokens + slack
    if limit is not None and needed > limit:
        raise UserError(
            f"item {item.row['id']}: {needed} tokens (context {len(item.context)}) exceed the "
            f"model's {limit} positions; choose a shorter length"
        )


def arm_groups(
    presses: list[str], ratios: list[float], per_batch: int
) -> list[list[tuple[str, float]]]:
    """The full cache alone, then each ratio's presses (chunks of `per_batch`)."""
    groups = [[(FULL, 0.0)]]
    for ratio in ratios:
        arms = [(press, ratio) for press in presses]
        groups += [arms[i : i + per_batch] for i in range(0, len(arms), per_batch)]
    return groups


def answer_item(
    model: Any,
    tokenizer: Any,
    item: Encoded,
    groups: list[list[tuple[str, float]]],
    press_settings: Any,
    slack: int,
) -> list[dict[str, Any]]:
    """One result row per arm: the reply, its score and the KV bytes kept."""
    device = next(model.parameters()).device
    context = torch.tensor([item.context], device=device)
    question = torch.tensor([item.question], device=device)
    prefilled = prefill(model, context, press_settings.snapkv_window)
    full_entries = sum(layer.keys.shape[1] for layer in prefilled.layers) * prefilled.length
    per_entry = bytes_per_entry(prefilled)
    configured = model.generation_config.eos_token_id
    eos = {tokenizer.eos_token_id, *(configured if isinstance(configured, list) else [configured])}
    results = []
    for group in groups:
        masks = [
            keep_masks(prefilled, None if p == FULL else make_press(p, r, press_settings))
            for p, r in group
        ]
        steps = item.answer_tokens + slack
        batched = batched_cache(prefilled, masks, model.config, len(item.question) + steps)
        replies = decode(model, batched, question, prefilled.length, steps, eos)
        for (press, ratio), tokens, kept in zip(group, replies, batched.kept_entries, strict=True):
            reply = tokenizer.decode(tokens, skip_special_tokens=True)
            results.append(
                {
                    "id": item.row["id"],
                    "kind": item.row["kind"],
                    "length": item.row["length"],
                    "tokens": len(item.context),
                    "press": press,
                    "ratio": ratio,
                    "score": string_match_all(reply, list(item.row["answers"])),
                    "prediction": reply,
                    "kv_bytes": kept * per_entry,
                    "full_kv_bytes": full_entries * per_entry,
                }
            )
    return results

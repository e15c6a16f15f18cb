"""Score needle items with a press: tokenize, batch items of equal token lengths, decode
greedily on the pressed cache, RULER's string_match_all per item.

With the area's word-level tokenizer every context of a (kind, length) cell has the same
token count, so a cell is a few batched forward passes; with another tokenizer, items
batch where their lengths agree.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import torch

from tasks.core.errors import UserError
from tasks.kvcache.generation import greedy_answer
from tasks.kvcache.needles import string_match_all
from tasks.kvcache.presses import make_press

FULL = "full"  # no press: the full-cache baseline


@dataclass(frozen=True)
class Encoded:
    row: dict[str, Any]
    context: list[int]
    question: list[int]
    answer_tokens: int


def encode(tokenizer: Any, rows: list[dict[str, Any]]) -> list[Encoded]:
    def ids(text: str, special: bool) -> list[int]:
        return tokenizer(text, add_special_tokens=special)["input_ids"]

    return [
        Encoded(
            row,
            ids(row["context"], True),
            ids(" " + row["question"], False),
            len(ids(" " + " ".join(row["answers"]), False)),
        )
        for row in rows
    ]


def check_positions(items: list[Encoded], limit: int | None) -> None:
    """One line when an item needs more positions than the model has."""
    if limit is None:
        return
    for item in items:
        needed = len(item.context) + len(item.question) + item.answer_tokens
        if needed > limit:
            raise UserError(
                f"item {item.row['id']}: {needed} tokens (context {len(item.context)}) exceed the "
                f"model's {limit} positions; choose a shorter --length"
            )


def batches(items: list[Encoded], size: int) -> list[list[Encoded]]:
    groups: dict[tuple[int, int, int], list[Encoded]] = defaultdict(list)
    for item in items:
        groups[(len(item.context), len(item.question), item.answer_tokens)].append(item)
    return [
        members[start : start + size]
        for _, members in sorted(groups.items())
        for start in range(0, len(members), size)
    ]


def score_items(
    model: Any,
    tokenizer: Any,
    items: list[Encoded],
    press: str,
    ratio: float,
    press_settings: Any,
    batch_size: int,
) -> list[dict[str, Any]]:
    """One result row per item: its score, prediction and KV bytes (kept and full)."""
    device = next(model.parameters()).device
    results = []
    for group in batches(items, batch_size):
        context = torch.tensor([i.context for i in group], device=device)
        question = torch.tensor([i.question for i in group], device=device)
        scorer = None if press == FULL else make_press(press, ratio, press_settings)
        answer = greedy_answer(model, context, question, group[0].answer_tokens, scorer)
        for item, tokens in zip(group, answer.tokens.tolist(), strict=True):
            prediction = tokenizer.decode(tokens, skip_special_tokens=True)
            results.append(
                {
                    "id": item.row["id"],
                    "kind": item.row["kind"],
                    "length": item.row["length"],
                    "press": press,
                    "ratio": ratio,
                    "score": string_match_all(prediction, list(item.row["answers"])),
                    "prediction": prediction,
                    "kv_bytes": answer.kv_bytes // len(group),
                    "full_kv_bytes": answer.full_kv_bytes // len(group),
                }
            )
    return results

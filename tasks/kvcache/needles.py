"""RULER-style needle items on real sentences, in the core LLM's tokens, and their checks.

RULER's NIAH templates: the needle "One of the special magic numbers for {key} is:
{value}.", values of `digits` digits, keys pseudo-words that occur nowhere in the haystack.
Kinds (RULER's variants): single (one needle, asked); multikey (`keys` needles with
distinct keys, one asked, the others distractors); multivalue (`values` needles sharing
one key, all asked); multiquery (`queries` needles, all asked at once). A context is
RULER's instruction, then consecutive haystack sentences from a random start with the
needles between sentences at random depths, at most `length` tokens in all (instruction
and needles included). The question and RULER's answer prefix follow the context; an item
is scored by RULER's string_match_all (the share of gold values found in the reply).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

import numpy as np

INSTRUCTION = (
    "Some special magic numbers are hidden within the following text. Make sure to "
    "memorize it. I will quiz you about the numbers afterwards."
)
NEEDLE = "One of the special magic numbers for {key} is: {value}."
KEY_POOL = 256
SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


def key_pool(haystack: str, size: int = KEY_POOL) -> list[str]:
    """`size` three-syllable pseudo-words, the same on every run, none in the haystack."""
    words = set(re.findall(r"\w+", haystack.lower()))
    rng = np.random.default_rng(20250913)
    found: list[str] = []
    while len(found) < size:
        word = "".join(rng.choice(SYLLABLES, 3))
        if word not in words and word not in found:
            found.append(word)
    return found


def question(kind: str, asked: list[str]) -> tuple[str, str]:
    """RULER's question and answer prefix for the asked keys."""
    if kind in ("single", "multikey"):
        key = asked[0]
        return (
            f"What is the special magic number for {key} mentioned in the provided text?",
            f"The special magic number for {key} mentioned in the provided text is",
        )
    keys = " and ".join(asked)
    return (
        f"What are all the special magic numbers for {keys} mentioned in the provided text?",
        f"The special magic numbers for {keys} mentioned in the provided text are",
    )


@dataclass(frozen=True)
class Item:
    id: str
    kind: str
    length: int  # the cell's token budget
    tokens: int  # the context's tokens (instruction, haystack, needles)
    context: str
    question: str
    answer_prefix: str
    answers: list[str]  # gold values, in the order the question asks them
    needle_keys: list[str]  # in context order
    needle_values: list[str]
    depths: list[float]  # each needle's position as a share of the haystack sentences
    asked: list[str]

    def row(self) -> dict:
        return asdict(self)


def plan(kind: str, rng: np.random.Generator, keys: list[str], settings) -> tuple[list, list]:
    """The needles' keys (context order) and the asked keys."""
    if kind == "multivalue":
        key = str(rng.choice(keys))
        return [key] * settings.values, [key]
    count = {"single": 1, "multikey": settings.keys}.get(kind, settings.queries)
    chosen = [str(k) for k in rng.choice(keys, count, replace=False)]
    if kind == "multikey":
        return chosen, [chosen[int(rng.integers(len(chosen)))]]
    return chosen, chosen


def draw_values(rng: np.random.Generator, count: int, digits: int, haystack: str) -> list[str]:
    values: list[str] = []
    while len(values) < count:
        value = str(int(rng.integers(10 ** (digits - 1), 10**digits)))
        if value not in values and value not in haystack:
            values.append(value)
    return values


def make_item(
    item_id: str,
    kind: str,
    length: int,
    sentences: list[str],
    sentence_tokens: list[int],
    count_tokens,
    keys: list[str],
    haystack: str,
    rng: np.random.Generator,
    settings,
) -> Item:
    """One item of at most `length` tokens (`count_tokens(text)`: the tokenizer's count)."""
    needle_keys, asked = plan(kind, rng, keys, settings)
    needle_values = draw_values(rng, len(needle_keys), settings.digits, haystack)
    needles = [
        NEEDLE.format(key=k, value=v) for k, v in zip(needle_keys, needle_values, strict=True)
    ]
    budget = length - count_tokens(INSTRUCTION) - sum(count_tokens(" " + n) for n in needles)
    start = int(rng.integers(len(sentences)))
    chosen: list[str] = []
    used = 0
    for offset in range(len(sentences)):
        at = (start + offset) % len(sentences)
        if used + sentence_tokens[at] > budget:
            if chosen:
                break
            continue  # a sentence longer than the whole budget: start after it
        chosen.append(sentences[at])
        used += sentence_tokens[at]
    gaps = len(chosen) + 1
    slots = np.sort(rng.choice(gaps, len(needles), replace=gaps < len(needles)))
    parts = list(chosen)
    for slot, needle in sorted(zip(slots, needles, strict=True), key=lambda p: -p[0]):
        parts.insert(int(slot), needle)
    context = INSTRUCTION + " " + " ".join(parts)
    answers = [v for k, v in zip(needle_keys, needle_values, strict=True) if k in asked]
    if kind == "multiquery":  # in the order the question asks
        answers = [needle_values[needle_keys.index(k)] for k in asked]
    text, prefix = question(kind, asked)
    return Item(
        id=item_id,
        kind=kind,
        length=length,
        tokens=count_tokens(context),
        context=context,
        question=text,
        answer_prefix=prefix,
        answers=answers,
        needle_keys=needle_keys,
        needle_values=needle_values,
        depths=[round(float(s) / max(1, len(chosen)), 4) for s in slots],
        asked=asked,
    )


def problems(row: dict) -> list[str]:
    """What is wrong with an item (empty when it is sound): over its budget, a needle
    missing or repeated, an asked value not exactly once, a key outside its needles, the
    answers not the asked needles' values."""
    found = []
    context = row["context"]
    if row["tokens"] > row["length"]:
        found.append(f"{row['tokens']} context tokens exceed the budget {row['length']}")
    for key, value in zip(row["needle_keys"], row["needle_values"], strict=True):
        if context.count(NEEDLE.format(key=key, value=value)) != 1:
            found.append(f"the needle for {key} = {value} is not in the context exactly once")
    for value in row["answers"]:
        if (count := context.count(value)) != 1:
            found.append(f"answer {value} occurs {count} times in the context, not once")
    for key in set(row["needle_keys"]):
        if (count := context.count(key)) != row["needle_keys"].count(key):
            found.append(f"key {key} occurs {count} times, not {row['needle_keys'].count(key)}")
    pairs = list(zip(row["needle_keys"], row["needle_values"], strict=True))
    expected = [v for asked in row["asked"] for k, v in pairs if k == asked]
    if row["kind"] != "multiquery":
        expected = [v for k, v in pairs if k in row["asked"]]
    if list(row["answers"]) != expected:
        found.append(f"answers {row['answers']} are not the asked needles' values {expected}")
    return found


def string_match_all(prediction: str, answers: list[str]) -> float:
    """RULER's metric: the share of gold answers that occur in the prediction."""
    text = prediction.lower()
    return sum(answer.lower() in text for answer in answers) / len(answers)


def copy_one_needle(kind: str, settings) -> float:
    """RULER score of a rule that answers with one needle's value, drawn uniformly: the
    null a model must beat to show it read the right needle (1/keys on multikey)."""
    return {
        "single": 1.0,
        "multikey": 1 / settings.keys,
        "multivalue": 1 / settings.values,
        "multiquery": 1 / settings.queries,
    }[kind]

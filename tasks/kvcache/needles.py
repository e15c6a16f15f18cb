"""RULER-style needle tasks built from the haystack stream, and their validation.

A needle is `the magic pair <key> <value> .` (RULER's "One of the special magic numbers for
{key} is: {value}.", shortened so that the value directly follows its key: retrieval is then
one induction-head copy, the simplest form a small model can learn); keys are pseudo-words
that never occur in the haystack, values integers from `value_range`, each one token.
Kinds (RULER's NIAH variants):
- single: one needle, asked;
- multikey: `keys` needles with distinct keys, one asked (the others are distractors);
- multivalue: `values` needles sharing one key, all values asked;
- multiquery: `queries` needles with distinct keys, all asked at once.
A context is a contiguous window of the haystack with the needles inserted at random depths
(moved to the nearest sentence end within a few words), exactly `length` tokens in all. The
question ends with the answer's prefix ("… ? the magic pair <key>"), so greedy decoding
continues with the value(s). Every item is scored by RULER's string_match_all: the
share of its gold values that appear in the generated text.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NEEDLE = "the magic pair {key} {value} ."
NEEDLE_TOKENS = len(NEEDLE.split())
SNAP = 6  # words a needle may move to sit at a sentence end
KEY_POOL = 256
SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


def key_pool(haystack: set[str], size: int = KEY_POOL) -> list[str]:
    """`size` three-syllable pseudo-words, the same on every run, none in the haystack."""
    rng = np.random.default_rng(20250913)
    found: list[str] = []
    while len(found) < size:
        word = "".join(rng.choice(SYLLABLES, 3))
        if word not in haystack and word not in found:
            found.append(word)
    return found


def value_pool(value_range: list[int]) -> list[str]:
    low, high = value_range
    return [str(v) for v in range(low, high + 1)]


def needle_words(key: str, value: str) -> list[str]:
    return NEEDLE.format(key=key, value=value).split()


def question(kind: str, asked: list[str]) -> str:
    if kind in ("single", "multikey"):
        key = asked[0]
        return f"what is the magic pair of {key} ? the magic pair {key}"
    keys = " and ".join(asked)
    every = "all " if kind == "multivalue" else ""
    return f"what are {every}the magic pairs of {keys} ? the magic pairs {keys}"


def template_words() -> list[str]:
    """Every word the needle and question templates write (keys and values aside)."""
    texts = [NEEDLE.format(key="", value="")]
    texts += [question(kind, ["", ""]) for kind in ("single", "multivalue", "multiquery")]
    return sorted({w for text in texts for w in text.split()})


@dataclass(frozen=True)
class Item:
    id: str
    split: str
    kind: str
    length: int
    context: str
    question: str
    answers: list[str]  # gold values, in the order the question asks them
    needle_keys: list[str]  # in context order
    needle_values: list[str]
    needle_positions: list[int]  # word index of each needle's first word
    asked: list[str]

    @property
    def answer(self) -> str:
        return " ".join(self.answers)

    def row(self) -> dict:
        return {**self.__dict__, "answer": self.answer}


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


def insertion_points(window: list[str], count: int, rng: np.random.Generator) -> list[int]:
    """`count` distinct insertion indices into `window`, each snapped to a free sentence
    end ("." before it) when one is within SNAP words."""
    points: set[int] = set()
    while len(points) < count:
        at = int(rng.integers(0, len(window) + 1))
        ends = [i for i in range(max(0, at - SNAP), min(len(window), at + SNAP) + 1)]
        ends = [i for i in ends if i > 0 and window[i - 1] == "." and i not in points]
        if ends:
            at = min(ends, key=lambda i: abs(i - at))
        points.add(at)
    return sorted(points)


def make_item(
    item_id: str,
    split: str,
    kind: str,
    length: int,
    stream: list[str],
    keys: list[str],
    values: list[str],
    rng: np.random.Generator,
    settings,
) -> Item:
    needle_keys, asked = plan(kind, rng, keys, settings)
    filler = length - NEEDLE_TOKENS * len(needle_keys)
    start = int(rng.integers(0, len(stream) - filler))
    window = stream[start : start + filler]
    present = set(window)
    candidates = [v for v in values if v not in present]
    needle_values = [str(v) for v in rng.choice(candidates, len(needle_keys), replace=False)]
    context: list[str] = []
    positions: list[int] = []
    previous = 0
    for at, key, value in zip(
        insertion_points(window, len(needle_keys), rng), needle_keys, needle_values, strict=True
    ):
        context += window[previous:at]
        positions.append(len(context))
        context += needle_words(key, value)
        previous = at
    context += window[previous:]
    answers = [v for k, v in zip(needle_keys, needle_values, strict=True) if k in asked]
    if kind == "multiquery":  # in the order the question asks
        answers = [needle_values[needle_keys.index(k)] for k in asked]
    return Item(
        id=item_id,
        split=split,
        kind=kind,
        length=length,
        context=" ".join(context),
        question=question(kind, asked),
        answers=answers,
        needle_keys=needle_keys,
        needle_values=needle_values,
        needle_positions=positions,
        asked=asked,
    )


def problems(row: dict) -> list[str]:
    """What is wrong with an item (empty when it is sound): its length, each needle at its
    recorded position, every asked value present exactly once and every key exactly as
    often as its needles, the answers the asked needles' values."""
    found = []
    context = row["context"].split(" ")
    if len(context) != row["length"]:
        found.append(f"{len(context)} context tokens, not {row['length']}")
    needles = zip(row["needle_keys"], row["needle_values"], row["needle_positions"], strict=True)
    for key, value, at in needles:
        if context[at : at + NEEDLE_TOKENS] != needle_words(key, value):
            found.append(f"needle for {key} is not at word {at}")
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
    if row["question"].split()[-1] not in row["asked"]:
        found.append("the question does not end with the answer's prefix (a key)")
    return found


def string_match_all(prediction: str, answers: list[str]) -> float:
    """RULER's metric: the share of gold answers that occur in the prediction."""
    text = prediction.lower()
    return sum(answer.lower() in text for answer in answers) / len(answers)

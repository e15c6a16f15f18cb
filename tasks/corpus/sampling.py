"""Budgeted sampling by language: language l gets p(l)·budget units (tokens or characters).

Within a language, documents are taken in a seeded random order; when they run out the
language starts another pass (sampling with replacement), and its epochs are counted. The
last document taken is cut to what is left of the budget, so each language's share of the
result equals p(l) up to rounding.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Sample:
    picks: list[tuple[int, int]]  # (document index, units to take from its start), shuffled
    units: dict[str, int]  # units taken per language
    epochs: dict[str, float]  # units taken / units available, per language


def sample_by_language(
    langs: Sequence[str],
    sizes: Sequence[int],
    probabilities: Mapping[str, float],
    budget: int,
    seed: int,
) -> Sample:
    rng = np.random.default_rng(seed)
    by_lang: dict[str, list[int]] = defaultdict(list)
    for index, lang in enumerate(langs):
        if lang in probabilities and sizes[index] > 0:
            by_lang[lang].append(index)
    missing = sorted(set(probabilities) - set(by_lang))
    if missing:
        raise ValueError(f"no documents for scheduled languages: {', '.join(missing[:10])}")
    picks: list[tuple[int, int]] = []
    units: dict[str, int] = {}
    epochs: dict[str, float] = {}
    for lang in sorted(probabilities):
        docs = by_lang[lang]
        available = sum(sizes[i] for i in docs)
        target = round(probabilities[lang] * budget)
        taken = 0
        while taken < target:
            for i in rng.permutation(docs):
                if taken >= target:
                    break
                take = min(sizes[i], target - taken)
                picks.append((int(i), int(take)))
                taken += take
        units[lang] = taken
        epochs[lang] = round(taken / available, 4)
    shuffled = [picks[i] for i in rng.permutation(len(picks))]
    return Sample(picks=shuffled, units=units, epochs=epochs)

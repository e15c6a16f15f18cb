"""The majority-answer baseline: the chance level a model has to beat on each task.

It predicts one token, the answer token most frequent in a sample of training-length
examples drawn from its own RNG stream (never the test or in-distribution sets), at every
scored position. On parity or reverse_string that is about 0.5; on mod_arith_w_brack, whose
values are not uniform, more. Scored like a model (per-sequence accuracy on the same fixed
sets), it is the arm a model is compared with to say it learned the task; a model that
does no better than this at some length is at chance there.
"""

from __future__ import annotations

from collections import Counter

import torch

from tasks.deltastack.languages import LANGUAGES
from tasks.deltastack.params import DeltaStackParams
from tasks.deltastack.train import (
    BASELINE_STREAM,
    in_distribution_set,
    sequence_accuracies,
    stream,
    test_sets,
    training_batch,
)

SAMPLE_BATCHES = 16  # batches of the training distribution the majority is counted on


def majority_answer(task: str, seed: int, params: DeltaStackParams) -> int:
    """The answer token scored most often in a sample of training-length batches."""
    language, rng = LANGUAGES[task], stream(task, seed, BASELINE_STREAM)
    counts: Counter[int] = Counter()
    for _ in range(SAMPLE_BATCHES):
        _, targets, mask = training_batch(language, rng, params)
        counts.update(targets[mask].tolist())
    return counts.most_common(1)[0][0]


def constant_accuracies(batches: list, answer: int) -> list[float]:
    """Per-sequence accuracy of predicting `answer` at every position of `batches`."""
    scores: list[float] = []
    for _, targets, mask in batches:
        scores += sequence_accuracies(torch.full_like(targets, answer), targets, mask)
    return scores


def baseline_sequences(task: str, seed: int, params: DeltaStackParams) -> dict[str, list[float]]:
    """The baseline's per-sequence accuracies on the in-distribution set and the longest
    bucket of (task, seed): the same sequences, in the same order, as the trials'."""
    language, answer = LANGUAGES[task], majority_answer(task, seed, params)
    longest = list(test_sets(language, seed, params).values())[-1]
    return {
        "in_distribution": constant_accuracies(in_distribution_set(language, seed, params), answer),
        "longest": constant_accuracies(longest, answer),
    }

"""BigScience ROOTS' character repetition ratio of a whole batch of texts, in compiled code
(numba); only the filter imports this module, so only it compiles the code."""

from __future__ import annotations

import numba
import numpy as np

from tasks.corpus.text_stats import CodePoints

# character n-gram keys (a rolling polynomial) and their slots in a hash table
_GRAM_KEY_BASE = np.uint64(0x100000001B3)
_GRAM_SLOT_MIX = np.uint64(0x9E3779B97F4A7C15)


def char_repetition_ratios(points: CodePoints, rows: np.ndarray, n: int) -> np.ndarray:
    """`text_stats.char_repetition_ratio` of the texts `rows`."""
    return _repetition_ratios(points.values, points.starts, rows, n)


# compiled on import (from numba's cache after the first time): the filter's jit_warmup task
# has it ready whichever documents reach the filter, before the other workers start
@numba.njit("float64[:](uint32[:], int64[:], int64[:], int64)", cache=True)
def _repetition_ratios(values, starts, rows, n):
    """Per row: distinct n-grams counted in an open-addressing table keyed by a rolling
    polynomial of the n-gram; a key match is confirmed character by character."""
    ratios = np.empty(rows.size)
    lead = np.uint64(1)  # base ** (n - 1), the weight of the character leaving the window
    for _ in range(n - 1):
        lead *= _GRAM_KEY_BASE
    for k in range(rows.size):
        first = starts[rows[k]]
        grams = starts[rows[k] + 1] - first - n + 1
        if grams <= 0:
            ratios[k] = 0.0
            continue
        bits = 1
        while (1 << bits) < 2 * grams:
            bits += 1
        mask = (1 << bits) - 1
        held = np.full(1 << bits, -1, np.int64)  # the position of the n-gram in each slot
        keys = np.empty(1 << bits, np.uint64)
        counts = np.zeros(1 << bits, np.int64)
        key = np.uint64(0)
        for j in range(n):
            key = key * _GRAM_KEY_BASE + np.uint64(values[first + j])
        distinct = 0
        for i in range(grams):
            if i > 0:
                key -= np.uint64(values[first + i - 1]) * lead
                key = key * _GRAM_KEY_BASE + np.uint64(values[first + i + n - 1])
            slot = np.int64((key * _GRAM_SLOT_MIX) >> np.uint64(64 - bits))
            while True:
                other = held[slot]
                if other < 0:
                    held[slot], keys[slot], counts[slot] = i, key, 1
                    distinct += 1
                    break
                if keys[slot] == key:
                    same = True
                    for c in range(n):
                        if values[first + other + c] != values[first + i + c]:
                            same = False
                            break
                    if same:
                        counts[slot] += 1
                        break
                slot = (slot + 1) & mask
        # only n-grams seen more than once count among the √distinct most frequent
        top = max(1, int(np.sqrt(distinct)))
        repeated = np.sort(counts[counts > 1])[::-1][:top]
        ratios[k] = repeated.sum() / grams
    return ratios

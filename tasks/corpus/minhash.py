"""MinHash signatures and LSH banding (numpy), the per-record half of near-duplicate search.

Shingles are word n-grams (letters in unspaced scripts), hashed to 32 bits with xxhash; the
`num_perm` permutations are h ↦ (a·h + b) mod (2⁶¹ − 1), truncated to 32 bits, as in
datasketch. A signature is cut into `bands` bands of `rows` values; two documents become
candidates when any band hashes alike, which happens with probability 1 − (1 − sʳ)ᵇ for
Jaccard similarity s.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import xxhash
from scipy.integrate import quad

from tasks.corpus import text_stats

MERSENNE_PRIME = np.uint64((1 << 61) - 1)
MAX_HASH = np.uint64((1 << 32) - 1)


@cache
def permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(seed)
    a = rng.randint(1, int(MERSENNE_PRIME), size=num_perm, dtype=np.uint64)
    b = rng.randint(0, int(MERSENNE_PRIME), size=num_perm, dtype=np.uint64)
    return a, b


def shingles(text: str, script: str, size: int) -> set[str]:
    """Lower-cased word `size`-grams of the text (the whole text when it is shorter)."""
    tokens = [w.lower() for w in text_stats.words(text, script)]
    if len(tokens) <= size:
        return {" ".join(tokens)} if tokens else set()
    return {" ".join(tokens[i : i + size]) for i in range(len(tokens) - size + 1)}


def hash_shingles(items: set[str]) -> np.ndarray:
    return np.fromiter(
        (xxhash.xxh32_intdigest(s.encode("utf-8")) for s in items),
        dtype=np.uint64,
        count=len(items),
    )


def signature(hashes: np.ndarray, num_perm: int, seed: int) -> np.ndarray:
    """The MinHash signature (num_perm uint32 values) of a set of 32-bit shingle hashes."""
    if hashes.size == 0:
        return np.full(num_perm, MAX_HASH, dtype=np.uint64).astype(np.uint32)
    a, b = permutations(num_perm, seed)
    with np.errstate(over="ignore"):  # the 64-bit wrap-around is part of the scheme
        permuted = (np.outer(a, hashes) + b[:, None]) % MERSENNE_PRIME
    return (permuted & MAX_HASH).min(axis=1).astype(np.uint32)


def band_hashes(sig: np.ndarray, bands: int, rows: int) -> list[int]:
    """One 63-bit hash per band (fits an Arrow int64)."""
    return [
        xxhash.xxh64_intdigest(sig[i * rows : (i + 1) * rows].tobytes()) >> 1 for i in range(bands)
    ]


def estimated_jaccard(left: np.ndarray, right: np.ndarray) -> float:
    return float(np.mean(left == right))


@cache
def optimal_bands(threshold: float, num_perm: int, fp_weight: float = 0.5) -> tuple[int, int]:
    """(bands, rows) minimizing weighted false positive + negative areas around `threshold`."""

    def collide(s: float, b: int, r: int) -> float:
        return 1 - (1 - s**r) ** b

    best, best_error = (1, num_perm), float("inf")
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            fp = quad(collide, 0.0, threshold, args=(b, r))[0]
            fn = quad(lambda s, b=b, r=r: 1 - collide(s, b, r), threshold, 1.0)[0]
            error = fp * fp_weight + fn * (1 - fp_weight)
            if error < best_error:
                best, best_error = (b, r), error
    return best

"""MinHash signatures and LSH banding, the per-record half of near-duplicate search.

Shingles are word n-grams (letters in unspaced scripts), hashed to 32 bits with xxhash; the
`num_perm` permutations are h ↦ (a·h + b) mod (2⁶¹ − 1), truncated to 32 bits, as in
datasketch, applied to a whole batch of texts at once in compiled code (numba). A signature
is cut into `bands` bands of `rows` values; two documents become candidates when any band
hashes alike, which happens with probability 1 − (1 − sʳ)ᵇ for Jaccard similarity s.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import cache

import numba
import numpy as np
import xxhash
from scipy.integrate import quad

from tasks.corpus import text_stats

MERSENNE_PRIME = np.uint64((1 << 61) - 1)
MAX_HASH = np.uint64((1 << 32) - 1)
_SHIFT = np.uint64(61)


@cache
def permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(seed)
    a = rng.randint(1, int(MERSENNE_PRIME), size=num_perm, dtype=np.uint64)
    b = rng.randint(0, int(MERSENNE_PRIME), size=num_perm, dtype=np.uint64)
    return a, b


def shingles(text: str, script: str, size: int) -> set[str]:
    """Lower-cased word `size`-grams of the text (the whole text when it is shorter)."""
    return {gram.decode("utf-8") for gram in _utf8_grams(text, script, size)}


def _utf8_grams(text: str, script: str, size: int) -> Iterator[bytes]:
    """The shingles in UTF-8, repeats included (a minimum does not mind them)."""
    tokens = list(map(str.encode, map(str.lower, text_stats.words(text, script))))
    if len(tokens) <= size:
        return iter([b" ".join(tokens)] if tokens else [])
    return map(b" ".join, zip(*(tokens[i:] for i in range(size)), strict=False))


def shingle_hashes(
    texts: Sequence[str], scripts: Sequence[str], size: int
) -> tuple[np.ndarray, np.ndarray]:
    """The 32-bit hashes of every text's shingles, concatenated, and where each text's begin
    (one more entry than texts)."""
    hashes: list[int] = []
    starts = [0]
    for text, script in zip(texts, scripts, strict=True):
        hashes += map(xxhash.xxh32_intdigest, _utf8_grams(text, script, size))
        starts.append(len(hashes))
    return np.array(hashes, dtype=np.uint64), np.array(starts, dtype=np.int64)


def signatures(hashes: np.ndarray, starts: np.ndarray, num_perm: int, seed: int) -> np.ndarray:
    """The MinHash signature (num_perm uint32 values) of each text's shingle hashes."""
    a, b = permutations(num_perm, seed)
    return _min_hashes(hashes, starts, a, b)


@numba.njit("uint32[:, :](uint64[:], int64[:], uint64[:], uint64[:])", cache=True)  # on import
def _min_hashes(hashes, starts, a, b):
    """Per text: the minimum over its shingle hashes h of ((a·h + b) mod prime) & MAX_HASH,
    with a·h + b wrapping at 64 bits as in numpy (and datasketch)."""
    out = np.empty((starts.size - 1, a.size), np.uint32)
    low = np.empty(a.size, np.uint64)
    for text in range(starts.size - 1):
        low[:] = MAX_HASH
        for k in range(starts[text], starts[text + 1]):
            h = hashes[k]
            for p in range(a.size):
                x = a[p] * h + b[p]
                x = (x & MERSENNE_PRIME) + (x >> _SHIFT)  # x mod (2⁶¹ − 1) without dividing
                if x >= MERSENNE_PRIME:
                    x -= MERSENNE_PRIME
                value = x & MAX_HASH
                if value < low[p]:
                    low[p] = value
        for p in range(a.size):
            out[text, p] = low[p]
    return out


def band_hashes(sigs: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """Per signature (row of `sigs`), one 63-bit hash per band (fits an Arrow int64)."""
    data = memoryview(np.ascontiguousarray(sigs[:, : bands * rows]).tobytes())
    width = rows * sigs.itemsize
    pieces = map(slice, range(0, len(data), width), range(width, len(data) + 1, width))
    digests = map(xxhash.xxh64_intdigest, map(data.__getitem__, pieces))
    found = np.fromiter(digests, dtype=np.uint64, count=sigs.shape[0] * bands)
    found = (found >> np.uint64(1)).astype(np.int64)
    return found.reshape(sigs.shape[0], bands)


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

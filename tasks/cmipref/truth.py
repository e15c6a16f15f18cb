"""The generator's truth about a pair: which clip is better, per dimension, and how clearly.

Truth confidence is the CMI-Pref analogue of an expert's 1–5 rating: the gap in true
quality, one point per 0.125 (a gap under 0.125 rates 1, one of 0.5 or more rates 5).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

DIMENSIONS = ("musicality", "alignment", "quality")


def sign(value: float, tolerance: float = 1e-9) -> int:
    return 0 if abs(value) <= tolerance else (1 if value > 0 else -1)


def truth_confidence(gap: float) -> int:
    return 1 + min(4, int(abs(gap) / 0.125))


def pair_truth(pairs: pa.Table, truth: pa.Table) -> dict[str, dict[str, Any]]:
    """pair_id → {musicality, alignment, quality: +1 (A better) / -1 / 0, confidence}."""
    clips = {row["audio"]: row for row in truth.to_pylist()}
    result = {}
    for pair in pairs.select(["pair_id", "audio_a", "audio_b"]).to_pylist():
        a, b = clips[pair["audio_a"]], clips[pair["audio_b"]]
        result[pair["pair_id"]] = {
            **{d: sign(a[d] - b[d]) for d in DIMENSIONS},
            "confidence": truth_confidence(a["quality"] - b["quality"]),
        }
    return result


def confidence_bucket(confidence: int) -> str:
    """The paper's breakdown: below, at, and above the middle of the 5-point scale."""
    return "<3" if confidence < 3 else "=3" if confidence == 3 else ">3"

"""What the reward model reads: one log-mel per clip and one frozen text vector per string.

A `FeatureBank` holds the arrays once (clips and texts are shared by many pairs); pairs
and candidates refer to rows by index. Row 0 of `texts` is a zero vector standing for "no
lyrics" (the model swaps in its null embedding there anyway).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tasks.cmipref.audio import crop, log_mel, read_clip
from tasks.cmipref.generate import audio_file
from tasks.cmipref.reward_model import LYRICS, REFERENCE, TEXT


@dataclass
class FeatureBank:
    mels: np.ndarray  # (clips, n_mels, frames) float32
    texts: np.ndarray  # (1 + strings, dim) float32
    clip_row: dict[str, int]
    text_row: dict[str, int]

    def pair_indices(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, np.ndarray]:
        """Index arrays for pairs (audio_a, audio_b) with their prompt slots."""
        return {
            "a": np.array([self.clip_row[r["audio_a"]] for r in rows], np.int64),
            "b": np.array([self.clip_row[r["audio_b"]] for r in rows], np.int64),
            **self.prompt_indices(rows),
        }

    def prompt_indices(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, np.ndarray]:
        present = np.zeros((len(rows), 3), np.float32)
        reference = np.zeros(len(rows), np.int64)
        lyrics = np.zeros(len(rows), np.int64)
        for i, row in enumerate(rows):
            present[i, TEXT] = 1.0
            if row["lyrics"]:
                present[i, LYRICS], lyrics[i] = 1.0, self.text_row[row["lyrics"]]
            if row["reference_audio"]:
                present[i, REFERENCE] = 1.0
                reference[i] = self.clip_row[row["reference_audio"]]
        text = np.array([self.text_row[r["prompt"]] for r in rows], np.int64)
        return {"text": text, "lyrics": lyrics, "reference": reference, "present": present}


def clips_of(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> list[str]:
    return sorted({row[c] for row in rows for c in columns if row.get(c)})


def build_bank(
    clips: Sequence[str],
    texts: Sequence[str],
    audio_root: Path,
    sample_rate: int,
    seconds: float,
    n_mels: int,
    encoder: Any,
) -> FeatureBank:
    """Log-mels of `clips` (repo-relative paths, cut to `seconds`) and vectors of `texts`."""
    from tqdm import tqdm

    samples = int(seconds * sample_rate)
    mels = [
        log_mel(
            crop(read_clip(audio_file(audio_root, c), sample_rate), samples), sample_rate, n_mels
        )
        for c in tqdm(clips, desc="log-mel", unit="clip", mininterval=5)
    ]
    strings = sorted(set(texts))
    vectors = np.asarray(encoder.encode_documents(strings), np.float32)
    vectors = np.concatenate([np.zeros((1, vectors.shape[1]), np.float32), vectors])
    return FeatureBank(
        mels=np.stack(mels).astype(np.float32),
        texts=vectors,
        clip_row={c: i for i, c in enumerate(clips)},
        text_row={s: i + 1 for i, s in enumerate(strings)},
    )

"""Audio in and out: FLAC bytes, clips read back at one sample rate, log-mel features."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from tasks.core.errors import InputError


def flac_bytes(audio: np.ndarray, sample_rate: int) -> bytes:
    import soundfile

    buffer = io.BytesIO()
    soundfile.write(buffer, audio, sample_rate, format="FLAC", subtype="PCM_16")
    return buffer.getvalue()


def decode(data: bytes | Path, sample_rate: int, where: str = "") -> np.ndarray:
    """Mono float32 at `sample_rate`, from a file or encoded bytes (WAV, FLAC, OGG, MP3)."""
    import soundfile

    try:
        audio, rate = soundfile.read(
            io.BytesIO(data) if isinstance(data, bytes) else data, dtype="float32", always_2d=True
        )
    except (OSError, RuntimeError, soundfile.LibsndfileError) as exc:
        raise InputError(f"{where or data}: not readable audio ({exc})") from None
    mono = audio.mean(axis=1)
    if rate != sample_rate:
        import librosa

        mono = librosa.resample(mono, orig_sr=rate, target_sr=sample_rate)
    return mono.astype(np.float32)


def read_clip(path: Path, sample_rate: int) -> np.ndarray:
    if not path.exists():
        raise InputError(f"{path}: audio file missing; re-run `dvc repro cmipref-generate`")
    return decode(path, sample_rate)


def crop(audio: np.ndarray, samples: int, rng: np.random.Generator | None = None) -> np.ndarray:
    """`samples` long: a random window (or the start, without `rng`), zero-padded if short."""
    if len(audio) <= samples:
        return np.pad(audio, (0, samples - len(audio)))
    start = int(rng.integers(0, len(audio) - samples + 1)) if rng is not None else 0
    return audio[start : start + samples]


def log_mel(audio: np.ndarray, sample_rate: int, n_mels: int) -> np.ndarray:
    """(n_mels, frames) float32 log-mel power in dB, hop 512, floored at -80 dB below peak."""
    import librosa

    mel = librosa.feature.melspectrogram(y=audio, sr=sample_rate, n_mels=n_mels, hop_length=512)
    return librosa.power_to_db(mel, ref=1.0, top_db=80.0).astype(np.float32)

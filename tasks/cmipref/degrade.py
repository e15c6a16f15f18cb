"""Controlled degradations of a clip, each acting on the signal so it applies to real audio too.

Musicality faults (the clip sounds worse whatever was asked): detune (a copy a fraction of a
semitone off mixed in), tempo jitter (the beat speeds up and slows down), clipping, noise.
Alignment faults (the clip is fine but not what was asked): wrong key (shifted by whole
semitones), wrong tempo (stretched by a third or more), wrong timbre (a bright clip muffled,
a warm one made harsh). `severity` in (0, 1] scales every fault; the truth a degraded clip
carries (`penalties`) is what the generator knows and the judges must infer.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

MUSICALITY_FAULTS = ("detune", "tempo_jitter", "clipping", "noise")
ALIGNMENT_FAULTS = ("wrong_key", "wrong_tempo", "wrong_timbre")
FAULTS = MUSICALITY_FAULTS + ALIGNMENT_FAULTS


def _fit_length(audio: np.ndarray, length: int) -> np.ndarray:
    """Trim, or loop the clip to `length` samples (a stretched clip changes length)."""
    if len(audio) >= length:
        return audio[:length]
    return np.resize(audio, length)


def _peak(audio: np.ndarray, peak: float = 0.8) -> np.ndarray:
    return (peak * audio / max(1e-9, float(np.abs(audio).max()))).astype(np.float32)


def detune(audio: np.ndarray, sr: int, severity: float, rng: np.random.Generator) -> np.ndarray:
    import librosa

    shifted = librosa.effects.pitch_shift(audio, sr=sr, n_steps=0.2 + 0.4 * severity)
    return _peak(audio + shifted)


def tempo_jitter(audio: np.ndarray, sr: int, severity: float, rng: np.random.Generator):
    import librosa

    pieces, segment = [], int(0.4 * sr)
    for start in range(0, len(audio), segment):
        rate = 1.0 + rng.choice([-1, 1]) * (0.1 + 0.3 * severity) * rng.uniform(0.5, 1.0)
        piece = audio[start : start + segment]
        if len(piece) > 2048:  # the stretcher's window
            piece = librosa.effects.time_stretch(piece, rate=rate)
        pieces.append(piece)
    return _peak(_fit_length(np.concatenate(pieces), len(audio)))


def clipping(audio: np.ndarray, sr: int, severity: float, rng: np.random.Generator) -> np.ndarray:
    level = 0.8 * (0.5 - 0.42 * severity)  # the share of the peak that survives
    return _peak(np.clip(audio, -level, level))


def noise(audio: np.ndarray, sr: int, severity: float, rng: np.random.Generator) -> np.ndarray:
    snr_db = 24.0 - 24.0 * severity
    power = float(np.mean(audio**2)) / 10 ** (snr_db / 10)
    return _peak(audio + rng.standard_normal(len(audio)) * np.sqrt(power))


def wrong_key(audio: np.ndarray, sr: int, severity: float, rng: np.random.Generator):
    import librosa

    steps = int(rng.choice([2, 3, 4])) * int(rng.choice([-1, 1]))
    return _peak(librosa.effects.pitch_shift(audio, sr=sr, n_steps=steps))


def wrong_tempo(audio: np.ndarray, sr: int, severity: float, rng: np.random.Generator):
    import librosa

    rate = 1.35 + 0.25 * severity if rng.random() < 0.5 else 0.75 - 0.1 * severity
    return _peak(_fit_length(librosa.effects.time_stretch(audio, rate=rate), len(audio)))


def wrong_timbre(audio: np.ndarray, sr: int, severity: float, rng: np.random.Generator):
    """Move the spectral centroid across the bright/warm line: muffle a bright clip (low-pass)
    or make a warm one harsh (its high-passed copy saturated and mixed in)."""
    from scipy.signal import butter, sosfilt

    centroid = _centroid(audio, sr)
    if centroid > 1200:
        sos = butter(4, 500 - 200 * severity, "lowpass", fs=sr, output="sos")
        return _peak(sosfilt(sos, audio))
    sos = butter(2, 2500, "highpass", fs=sr, output="sos")
    harsh = np.tanh(8 * sosfilt(sos, audio) / max(1e-9, float(np.abs(audio).max())))
    return _peak(audio * 0.4 + harsh * (0.6 + 0.4 * severity) * 0.8)


def _centroid(audio: np.ndarray, sr: int) -> float:
    spectrum = np.abs(np.fft.rfft(audio))
    freqs = np.fft.rfftfreq(len(audio), 1 / sr)
    return float((spectrum * freqs).sum() / max(1e-9, spectrum.sum()))


APPLY: dict[str, Callable[..., np.ndarray]] = {
    "detune": detune,
    "tempo_jitter": tempo_jitter,
    "clipping": clipping,
    "noise": noise,
    "wrong_key": wrong_key,
    "wrong_tempo": wrong_tempo,
    "wrong_timbre": wrong_timbre,
}


def degrade(audio: np.ndarray, sr: int, faults: list[tuple[str, float]], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    for name, severity in faults:
        audio = APPLY[name](audio, sr, severity, rng)
    return audio.astype(np.float32)


def penalties(faults: list[tuple[str, float]]) -> tuple[float, float]:
    """(musicality, alignment) truth in [0, 1]: one minus the faults' weight, floored at 0.
    A musicality fault weighs its severity; an alignment fault is a mismatch: it weighs 0.5
    plus half its severity."""
    musicality = sum(s for name, s in faults if name in MUSICALITY_FAULTS)
    alignment = sum(0.5 + 0.5 * s for name, s in faults if name in ALIGNMENT_FAULTS)
    return max(0.0, 1.0 - musicality), max(0.0, 1.0 - alignment)

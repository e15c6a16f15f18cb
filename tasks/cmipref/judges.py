"""Judges of a music pair: which clip sounds better (musicality), which follows the prompt.

A judge hears one pair in one order and returns margins for the clip presented first
(positive: the first is better). `cmipref.label` asks in both orders and keeps only
position-consistent verdicts. Backends (params `cmipref.label.judge.backend`):
- `signal` (offline): librosa features of an excerpt of each clip (`listen_seconds`,
  placed at random per presentation, as an audio LLM's context crops a clip). Musicality
  rewards partials on one tuning grid, a steady pulse and a clear key, and penalises noise
  (spectral flatness) and flat tops (clipping). Alignment checks the tempo, key and tone
  the prompt names (parsed from its text) and, with a reference clip, timbre similarity
  to it. Weights are set by hand. A batch of listenings (`compare_many`) is heard
  together: the features are those of each excerpt alone, but the constant-Q filters are
  built once per tuning rather than once per clip, and one STFT serves four features.
- `openai`: an audio-capable LLM behind an OpenAI-compatible endpoint (e.g. Qwen3-Omni on
  vLLM), both clips sent as `input_audio` parts, a JSON verdict asked back.
"""

from __future__ import annotations

import base64
import json
import re
import zlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Protocol

import numpy as np

from tasks.cmipref.audio import crop, read_clip
from tasks.cmipref.music import PITCH_CLASSES
from tasks.cmipref.params import JudgeParams
from tasks.core.errors import UserError

# Krumhansl–Kessler key profiles (probe-tone ratings), tonic first.
MAJOR_PROFILE = np.array([6.35, 2.23, 3.48, 2.33, 4.38, 4.09, 2.52, 5.19, 2.39, 3.66, 2.29, 2.88])
MINOR_PROFILE = np.array([6.33, 2.68, 3.52, 5.38, 2.60, 3.53, 2.54, 4.75, 3.98, 2.69, 3.34, 3.17])
BRIGHT_CENTROID_HZ = 1200.0  # above: a "bright" clip, below: a "warm" one


@dataclass(frozen=True)
class Listening:
    """One question to a judge: a prompt and two clips in the order they are presented."""

    pair_id: str
    prompt: str
    lyrics: str | None
    reference: Path | None
    first: Path
    second: Path
    swapped: bool  # presented B then A


@dataclass(frozen=True)
class Verdict:
    musicality: float  # > 0: the first clip sounds better; the size is the judge's margin
    alignment: float  # > 0: the first clip follows the prompt better


class Judge(Protocol):
    name: str

    def compare(self, item: Listening) -> Verdict: ...

    def compare_many(self, items: Sequence[Listening]) -> list[Verdict]: ...


@dataclass(frozen=True)
class Expectation:
    """What the prompt's text asks for, as far as it says."""

    tempo: float | None = None
    key: int | None = None
    mode: str | None = None
    tone: str | None = None  # "bright" | "warm"


def parse_prompt(text: str) -> Expectation:
    tempo = re.search(r"(\d+(?:\.\d+)?)\s*bpm", text, re.IGNORECASE)
    key = re.search(r"\b([A-G][#b]?)\s+(major|minor)\b", text)
    tone = re.search(r"\b(bright|warm)\b", text, re.IGNORECASE)
    pitch = None
    if key:
        name = key.group(1).replace("Db", "C#").replace("Eb", "D#").replace("Gb", "F#")
        name = name.replace("Ab", "G#").replace("Bb", "A#")
        pitch = PITCH_CLASSES.index(name) if name in PITCH_CLASSES else None
    return Expectation(
        tempo=float(tempo.group(1)) if tempo else None,
        key=pitch,
        mode=key.group(2) if key else None,
        tone=tone.group(1).lower() if tone else None,
    )


@dataclass(frozen=True)
class ClipFeatures:
    tempo: float
    pulse: float  # onset-envelope autocorrelation peak, 40–300 BPM: how steady the beat is
    key: int
    mode: str
    key_clarity: float  # the best key profile's correlation with the chroma
    in_tune: float  # share of spectral-peak energy within 12 cents of the clip's own tuning
    flatness: float  # mean log10 spectral flatness
    clipped: float  # share of samples at the clip's peak
    centroid: float  # Hz
    mfcc: np.ndarray  # mean MFCC 1–12 (timbre)


def pulse_clarity(envelope: np.ndarray, frames_per_second: float) -> float:
    import librosa

    centered = envelope - envelope.mean()
    autocorrelation = librosa.autocorrelate(centered)
    autocorrelation = autocorrelation / (autocorrelation[0] + 1e-9)
    low, high = int(frames_per_second * 60 / 300), int(frames_per_second * 60 / 40)
    return float(autocorrelation[low:high].max()) if high > low else 0.0


def tuning_consistency(audio: np.ndarray, sample_rate: int) -> float:
    """A detuned copy puts partials between the notes: the share of strong spectral peaks
    within 12 cents of the clip's own tuning (its circular mean deviation from A440)."""
    import librosa

    spectrum = np.abs(librosa.stft(audio, n_fft=4096, hop_length=1024))
    pitches, magnitudes = librosa.piptrack(S=spectrum, sr=sample_rate, fmin=80, fmax=2000)
    if not (magnitudes > 0).any():
        return 0.0
    strong = magnitudes > np.percentile(magnitudes[magnitudes > 0], 50)
    weights = magnitudes[strong]
    deviation = (1200 * np.log2(pitches[strong] / 440.0) + 50) % 100 - 50
    tuning = np.angle(np.sum(weights * np.exp(2j * np.pi * deviation / 100))) / (2 * np.pi) * 100
    deviation = (deviation - tuning + 50) % 100 - 50
    return float(np.sum(weights * (np.abs(deviation) < 12)) / np.sum(weights))


def chroma_profiles(clips: Sequence[np.ndarray], sample_rate: int) -> list[np.ndarray]:
    """Each clip's mean constant-Q chroma, as `librosa.feature.chroma_cqt` gives it for the
    clip alone (tuning estimated per clip). Clips of one tuning and length go through one
    multichannel call: building the constant-Q filters is most of the cost, so they are
    built once per group rather than once per clip."""
    import librosa

    groups: dict[tuple[float, int], list[int]] = defaultdict(list)
    for index, clip in enumerate(clips):
        tuning = float(librosa.estimate_tuning(y=clip, sr=sample_rate, bins_per_octave=36))
        groups[(tuning, len(clip))].append(index)
    profiles: list[np.ndarray] = [np.empty(0)] * len(clips)
    for (tuning, _), members in groups.items():
        stacked = np.stack([clips[i] for i in members])
        chroma = librosa.feature.chroma_cqt(
            y=stacked, sr=sample_rate, hop_length=2048, tuning=tuning
        )
        for row, index in enumerate(members):
            profiles[index] = chroma[row].mean(axis=1)
    return profiles


def clip_features(audio: np.ndarray, sample_rate: int) -> ClipFeatures:
    return clip_features_batch([audio], sample_rate)[0]


def clip_features_batch(clips: Sequence[np.ndarray], sample_rate: int) -> list[ClipFeatures]:
    """`clip_features` of many clips at once (the chroma shares its filters)."""
    chromas = chroma_profiles(clips, sample_rate)
    return [features_with(c, chroma, sample_rate) for c, chroma in zip(clips, chromas, strict=True)]


@cache
def mel_filters(sample_rate: int) -> np.ndarray:
    """librosa's default mel bank (128 bands, n_fft 2048): what `melspectrogram` applies."""
    import librosa

    return librosa.filters.mel(sr=sample_rate, n_fft=2048)


def features_with(audio: np.ndarray, chroma: np.ndarray, sample_rate: int) -> ClipFeatures:
    """One STFT (n_fft 2048, hop 512) serves the onsets, flatness, centroid and MFCCs, as
    each of librosa's functions would compute it from `audio` on its own."""
    import librosa

    magnitude = np.abs(librosa.stft(audio, n_fft=2048, hop_length=512))
    log_mel = librosa.power_to_db(mel_filters(sample_rate) @ magnitude**2)
    envelope = librosa.onset.onset_strength(S=log_mel, sr=sample_rate, hop_length=512)
    tempo = librosa.feature.tempo(onset_envelope=envelope, sr=sample_rate, hop_length=512)
    scores = [
        (np.corrcoef(np.roll(profile, tonic), chroma)[0, 1], tonic, mode)
        for mode, profile in (("major", MAJOR_PROFILE), ("minor", MINOR_PROFILE))
        for tonic in range(12)
    ]
    clarity, key, mode = max(scores, key=lambda s: s[0])
    flatness = librosa.feature.spectral_flatness(S=magnitude)
    peak = float(np.abs(audio).max()) or 1.0
    centroid = librosa.feature.spectral_centroid(S=magnitude, sr=sample_rate)
    mfcc = librosa.feature.mfcc(S=log_mel, n_mfcc=13)[1:].mean(axis=1)
    return ClipFeatures(
        tempo=float(np.atleast_1d(tempo)[0]),
        pulse=pulse_clarity(envelope, sample_rate / 512),
        key=int(key),
        mode=str(mode),
        key_clarity=float(np.nan_to_num(clarity)),
        in_tune=tuning_consistency(audio, sample_rate),
        flatness=float(np.log10(flatness.mean() + 1e-12)),
        clipped=float(np.mean(np.abs(audio) >= 0.98 * peak)),
        centroid=float(centroid.mean()),
        mfcc=mfcc,
    )


def musicality_score(f: ClipFeatures) -> float:
    """Higher sounds better: in tune, a steady beat, a clear key, no hiss, no flat tops."""
    hiss = max(0.0, f.flatness + 3.0)  # log10 flatness: about -2.6 for clean tonal music
    return 2.0 * f.in_tune + 1.5 * f.pulse + 0.5 * f.key_clarity - 0.8 * hiss - 8.0 * f.clipped


def key_agreement(f: ClipFeatures, want: Expectation) -> float:
    """1 for the asked key, 0.5 for its relative major/minor (the same notes), else 0."""
    if want.key is None:
        return 1.0
    if f.key == want.key and (want.mode is None or f.mode == want.mode):
        return 1.0
    relative = (want.key + (3 if want.mode == "minor" else 9)) % 12
    return 0.5 if f.key == relative and f.mode != want.mode else 0.0


def tempo_agreement(f: ClipFeatures, want: Expectation) -> float:
    """1 at the asked tempo, falling off with the log ratio; half/double time forgiven."""
    if want.tempo is None or f.tempo <= 0:
        return 1.0
    ratio = np.log2(f.tempo / want.tempo)
    ratio -= np.round(ratio)  # a beat tracker may lock onto half or double time
    return float(np.exp(-abs(ratio) / 0.12))


def timbre_agreement(f: ClipFeatures, want: Expectation, reference: ClipFeatures | None) -> float:
    if reference is not None:
        a, b = f.mfcc, reference.mfcc
        return float(max(0.0, a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-9)))
    if want.tone is None:
        return 1.0
    bright = f.centroid > BRIGHT_CENTROID_HZ
    return 1.0 if bright == (want.tone == "bright") else 0.0


def alignment_score(f: ClipFeatures, want: Expectation, reference: ClipFeatures | None) -> float:
    return tempo_agreement(f, want) + key_agreement(f, want) + timbre_agreement(f, want, reference)


class SignalJudge:
    name = "signal"

    def __init__(self, sample_rate: int, listen_seconds: float) -> None:
        self.sample_rate = sample_rate
        self.samples = int(listen_seconds * sample_rate)
        self.whole_clips: dict[Path, ClipFeatures] = {}  # a prompt's reference serves all its clips

    def excerpt(self, path: Path, seed: int) -> np.ndarray:
        """The part of a clip heard in one presentation, placed at random by `seed`."""
        return crop(read_clip(path, self.sample_rate), self.samples, np.random.default_rng(seed))

    def clip_scores(self, path: Path, prompt: str, reference: Path | None) -> tuple[float, float]:
        """(musicality, alignment) of one whole clip: what top-k selection ranks by."""
        features = self.hear_whole(path)
        ref = self.hear_whole(reference) if reference else None
        return musicality_score(features), alignment_score(features, parse_prompt(prompt), ref)

    def clip_scores_many(
        self, clips: Sequence[tuple[Path, str, Path | None]]
    ) -> list[tuple[float, float]]:
        """`clip_scores` of (clip, prompt, reference) triples, every new clip heard in one batch."""
        paths = {p for clip, _, reference in clips for p in (clip, reference) if p}
        new = sorted(paths - set(self.whole_clips))
        audio = [read_clip(path, self.sample_rate) for path in new]
        self.whole_clips.update(zip(new, clip_features_batch(audio, self.sample_rate), strict=True))
        return [self.clip_scores(*clip) for clip in clips]

    def hear_whole(self, path: Path) -> ClipFeatures:
        if path not in self.whole_clips:
            audio = read_clip(path, self.sample_rate)
            self.whole_clips[path] = clip_features(audio, self.sample_rate)
        return self.whole_clips[path]

    def compare(self, item: Listening) -> Verdict:
        return self.compare_many([item])[0]

    def compare_many(self, items: Sequence[Listening]) -> list[Verdict]:
        """Each item's verdict; the excerpts of all items are heard in one batch."""
        plans = [presentation(item) for item in items]
        excerpts = [self.excerpt(path, seed) for plan in plans for path, seed in plan]
        heard = iter(clip_features_batch(excerpts, self.sample_rate))
        verdicts = []
        for item, plan in zip(items, plans, strict=True):
            first, second, *reference = [next(heard) for _ in plan]
            want = parse_prompt(item.prompt)
            aligned = [
                alignment_score(clip, want, next(iter(reference), None)) for clip in (first, second)
            ]
            verdicts.append(
                Verdict(
                    musicality=musicality_score(first) - musicality_score(second),
                    alignment=aligned[0] - aligned[1],
                )
            )
        return verdicts


def presentation(item: Listening) -> list[tuple[Path, int]]:
    """What one listening plays, with each excerpt's seed: first, second, then the
    reference if the prompt has one."""
    seed = zlib.crc32(item.pair_id.encode()) * 4 + 2 * int(item.swapped)
    played = [(item.first, seed), (item.second, seed + 1)]
    return played + ([(item.reference, seed + 2)] if item.reference else [])


VERDICT_INSTRUCTIONS = (
    "You are a music critic. You hear clip A, then clip B{reference}. The request was: "
    '"{prompt}"{lyrics}. Answer with JSON only: {{"musicality": "A" or "B" (which '
    'sounds better as music: in tune, steady, clean), "alignment": "A" or "B" (which '
    'follows the request better), "confidence": 1 to 5}}.'
)


class AudioLLMJudge:
    """An audio LLM behind an OpenAI-compatible API; clips go as base64 WAV `input_audio`."""

    def __init__(self, params: JudgeParams, sample_rate: int) -> None:
        from tasks.core.llm import ChatModel

        self.chat = ChatModel(
            params.base_url,
            params.model,
            params.api_key_env,
            params.temperature,
            params_key="cmipref.label.judge.backend",
            offline_choice="signal",
        )
        self.name = self.chat.name
        self.sample_rate = sample_rate

    def _audio_part(self, path: Path) -> dict:
        import io

        import soundfile

        buffer = io.BytesIO()
        soundfile.write(buffer, read_clip(path, self.sample_rate), self.sample_rate, format="WAV")
        data = base64.b64encode(buffer.getvalue()).decode()
        return {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}}

    def compare(self, item: Listening) -> Verdict:
        text = VERDICT_INSTRUCTIONS.format(
            prompt=item.prompt,
            lyrics=f' with lyrics "{item.lyrics}"' if item.lyrics else "",
            reference=", then a style reference clip" if item.reference else "",
        )
        parts = [
            {"type": "text", "text": text},
            self._audio_part(item.first),
            self._audio_part(item.second),
        ]
        if item.reference:
            parts.append(self._audio_part(item.reference))
        reply = self.chat.ask_content(parts)
        return parse_verdict(reply, item.pair_id)

    def compare_many(self, items: Sequence[Listening]) -> list[Verdict]:
        return [self.compare(item) for item in items]


def parse_verdict(reply: str, pair_id: str) -> Verdict:
    """`{"musicality": "A", "alignment": "B", "confidence": 4}` → margins of ±confidence/5."""
    match = re.search(r"\{.*\}", reply, re.DOTALL)
    try:
        answer = json.loads(match.group(0) if match else reply)
        weight = min(5, max(1, int(answer.get("confidence", 3)))) / 5
        sign = {"A": 1.0, "B": -1.0}
        musicality, alignment = (
            sign[str(answer[k]).strip().upper()] * weight for k in ("musicality", "alignment")
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        raise UserError(
            f"judge reply for pair {pair_id} is not a verdict: {reply[:160]!r}"
        ) from None
    return Verdict(musicality=musicality, alignment=alignment)


def make_judge(params: JudgeParams, sample_rate: int) -> Judge:
    if params.backend == "openai":
        return AudioLLMJudge(params, sample_rate)
    return SignalJudge(sample_rate, params.listen_seconds)

"""Clean clips and their prompts: synthesized, from a folder, or from a Hugging Face dataset.

A folder holds audio files and `metadata.jsonl`, one object per clip:
`{"file": "a.wav", "text": "…", "lyrics": "…" (optional), "reference": "b.wav" (optional)}`.
A hub dataset gives an audio column and a text column (and optionally lyrics); its audio is
read undecoded and decoded here with soundfile, so no codec backend is needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tasks.cmipref.audio import crop, decode
from tasks.cmipref.music import MusicDescription, describe, random_description, synthesize
from tasks.cmipref.params import GenerateParams, Modality, SourceParams
from tasks.core.errors import InputError
from tasks.core.io import read_jsonl


@dataclass(frozen=True)
class SourceClip:
    """One prompt's clean clip (and optional lyric and style reference)."""

    prompt: str
    audio: np.ndarray
    lyrics: str | None = None
    reference: np.ndarray | None = None
    description: MusicDescription | None = None  # synthesized clips: how to render more

    @property
    def modality(self) -> Modality:
        if self.lyrics and self.reference is not None:
            return "all"
        if self.lyrics:
            return "text+lyrics"
        return "text+ref" if self.reference is not None else "text"


def clip_seed(params: GenerateParams, index: int) -> int:
    """Prompt `index`'s seed: its clean clip and, in cmipref.generate, its candidates."""
    return params.seed * 1_000_003 + index


def synth_clips(params: GenerateParams) -> Iterator[SourceClip]:
    """`params.prompts` clips from random descriptions; modalities cycle over the prompts."""
    rng = np.random.default_rng(params.seed)
    for index in range(params.prompts):
        modality = params.modalities[index % len(params.modalities)]
        description = random_description(rng, with_lyrics=modality in ("text+lyrics", "all"))
        seed = clip_seed(params, index)
        reference = None
        if modality in ("text+ref", "all"):  # same style, another melody
            reference = synthesize(description, params.seconds, params.sample_rate, seed + 500_000)
        yield SourceClip(
            prompt=describe(description),
            lyrics=description.lyrics,
            reference=reference,
            audio=synthesize(description, params.seconds, params.sample_rate, seed),
            description=description,
        )


def folder_clips(params: GenerateParams) -> Iterator[SourceClip]:
    folder = Path(params.source.folder or "")
    metadata = folder / "metadata.jsonl"
    if not metadata.exists():
        raise InputError(f"{metadata}: missing; list the clips as {{file, text, lyrics?}} lines")
    samples = int(params.seconds * params.sample_rate)
    for number, row in enumerate(read_jsonl(metadata), start=1):
        if "file" not in row or not row.get("text"):
            raise InputError(f"{metadata}: line {number}: needs 'file' and 'text'")
        reference = None
        if row.get("reference"):
            reference = crop(decode(folder / row["reference"], params.sample_rate), samples)
        yield SourceClip(
            prompt=row["text"],
            lyrics=row.get("lyrics") or None,
            reference=reference,
            audio=crop(decode(folder / row["file"], params.sample_rate), samples),
        )


def hub_clips(params: GenerateParams) -> Iterator[SourceClip]:
    import datasets

    source: SourceParams = params.source
    table = datasets.load_dataset(source.dataset, split=source.split, revision=source.revision)
    for column in (source.audio_column, source.text_column):
        if column not in table.column_names:
            raise InputError(f"{source.dataset}: no column '{column}' ({table.column_names})")
    table = table.cast_column(source.audio_column, datasets.Audio(decode=False))
    samples = int(params.seconds * params.sample_rate)
    for index, row in enumerate(table):
        audio = row[source.audio_column]
        data = audio.get("bytes") or Path(audio["path"])
        lyrics = row.get(source.lyrics_column) if source.lyrics_column else None
        yield SourceClip(
            prompt=str(row[source.text_column]),
            lyrics=lyrics or None,
            audio=crop(decode(data, params.sample_rate, f"{source.dataset} row {index}"), samples),
        )


def source_clips(params: GenerateParams) -> Iterator[SourceClip]:
    """The first `params.prompts` clips of the configured source."""
    read = {"synth": synth_clips, "folder": folder_clips, "hub": hub_clips}[params.source.kind]
    for index, clip in enumerate(read(params)):
        if index >= params.prompts:
            return
        yield clip

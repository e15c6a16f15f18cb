"""Document filters, one class each, in the spirit of Gopher / FineWeb / BigScience ROOTS.

Filters work on a whole batch at once (the datatrove / NeMo pattern): `Batch` computes each
scoring column (words, letters, repetition, …) once for every document, in numpy or compiled
code, and a filter compares its column with its threshold. For the documents it is given, a
filter returns None to keep one or a short detail saying why it is dropped; the chain hands
each filter only the documents no earlier filter dropped, and the reason recorded for a
dropped document is its filter's `name`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from tasks.corpus import repetition, text_stats
from tasks.corpus.language_id import is_iso639_3
from tasks.corpus.params import FilterParams


class Batch:
    """Normalized documents with their declared language and script, and their scores."""

    def __init__(self, texts: Sequence[str], langs: Sequence[str], scripts: Sequence[str]):
        self.texts, self.langs, self.scripts = list(texts), list(langs), list(scripts)
        self.points = text_stats.CodePoints.of(self.texts)

    def __len__(self) -> int:
        return len(self.texts)

    @cached_property
    def unspaced(self) -> np.ndarray:
        return np.array([s in text_stats.UNSPACED_SCRIPTS for s in self.scripts], dtype=bool)

    @cached_property
    def letters(self) -> np.ndarray:
        return text_stats.letter_counts(self.points)

    @cached_property
    def _spaced_words(self) -> tuple[np.ndarray, np.ndarray]:
        return text_stats.word_counts(self.points)

    @cached_property
    def n_words(self) -> np.ndarray:
        """`len(text_stats.words(text, script))` of each document."""
        return np.where(self.unspaced, self.letters, self._spaced_words[0])

    @property
    def word_characters(self) -> np.ndarray:
        """Characters in the words of each document in a spaced script."""
        return self._spaced_words[1]

    @cached_property
    def script_fraction(self) -> np.ndarray:
        """`text_stats.script_fraction` of each document."""
        in_script = text_stats.script_letter_counts(self.points, self.scripts)
        return np.divide(in_script, self.letters, out=np.zeros(len(self)), where=self.letters > 0)

    @cached_property
    def symbols(self) -> np.ndarray:
        return np.array([text_stats.symbol_count(text) for text in self.texts], dtype=np.int64)


def _details(rejected: np.ndarray, detail: Callable[[int], str]) -> list[str | None]:
    return [detail(i) if bad else None for i, bad in enumerate(rejected)]


class Filter(ABC):
    name: str

    @abstractmethod
    def reject(self, docs: Batch, rows: np.ndarray) -> list[str | None]:
        """For each of `rows` (indices into `docs`): None to keep it, else why it is dropped."""


@dataclass(frozen=True)
class KnownLanguage(Filter):
    name = "unknown_language"

    def reject(self, docs: Batch, rows: np.ndarray) -> list[str | None]:
        langs = [docs.langs[row] for row in rows]
        return [
            None if is_iso639_3(lang) else f"{lang!r} is not an ISO 639-3 code" for lang in langs
        ]


@dataclass(frozen=True)
class ScriptMatch(Filter):
    min_fraction: float
    name = "script_mismatch"

    def reject(self, docs: Batch, rows: np.ndarray) -> list[str | None]:
        share = docs.script_fraction[rows].tolist()
        return [self._detail(docs.scripts[r], s) for r, s in zip(rows.tolist(), share, strict=True)]

    def _detail(self, script: str, share: float) -> str | None:
        if not text_stats.known_script(script):
            return f"{script!r} is not an ISO 15924 script"
        return None if share >= self.min_fraction else f"{share:.2f} of letters in {script}"


@dataclass(frozen=True)
class WordCount(Filter):
    minimum: int
    maximum: int
    name = "word_count"

    def reject(self, docs: Batch, rows: np.ndarray) -> list[str | None]:
        n = docs.n_words[rows]
        return _details((n < self.minimum) | (n > self.maximum), lambda i: f"{n[i]} words")


@dataclass(frozen=True)
class MeanWordLength(Filter):
    minimum: float
    maximum: float
    name = "mean_word_length"

    def reject(self, docs: Batch, rows: np.ndarray) -> list[str | None]:
        """Spaced scripts only (a word is a letter in the others)."""
        n = docs.n_words[rows]
        measured = ~docs.unspaced[rows] & (n > 0)
        mean = np.divide(docs.word_characters[rows], n, out=np.zeros(rows.size), where=measured)
        outside = measured & ((mean < self.minimum) | (mean > self.maximum))
        return _details(outside, lambda i: f"mean {mean[i]:.1f} characters")


@dataclass(frozen=True)
class SymbolWordRatio(Filter):
    maximum: float
    name = "symbol_word_ratio"

    def reject(self, docs: Batch, rows: np.ndarray) -> list[str | None]:
        ratio = docs.symbols[rows] / np.maximum(docs.n_words[rows], 1)
        return _details(ratio > self.maximum, lambda i: f"{ratio[i]:.2f} symbols per word")


@dataclass(frozen=True)
class DuplicateLines(Filter):
    maximum: float
    name = "duplicate_lines"

    def reject(self, docs: Batch, rows: np.ndarray) -> list[str | None]:
        share = [text_stats.duplicate_line_fraction(docs.texts[row]) for row in rows]
        return [None if s <= self.maximum else f"{s:.2f} of lines repeated" for s in share]


@dataclass(frozen=True)
class CharRepetition(Filter):
    maximum: float
    ngram: int
    name = "char_repetition"

    def reject(self, docs: Batch, rows: np.ndarray) -> list[str | None]:
        ratio = repetition.char_repetition_ratios(docs.points, rows, self.ngram)
        return _details(
            ratio > self.maximum, lambda i: f"{ratio[i]:.2f} in repeated {self.ngram}-grams"
        )


def build_filters(params: FilterParams) -> list[Filter]:
    """The filter chain in order, cheapest first."""
    return [
        KnownLanguage(),
        WordCount(params.min_words, params.max_words),
        MeanWordLength(params.min_mean_word_length, params.max_mean_word_length),
        SymbolWordRatio(params.max_symbol_word_ratio),
        DuplicateLines(params.max_duplicate_line_fraction),
        ScriptMatch(params.min_script_fraction),
        CharRepetition(params.max_char_repetition, params.char_repetition_ngram),
    ]


def first_rejections(filters: Sequence[Filter], docs: Batch) -> list[tuple[str, str] | None]:
    """Per document: (name, detail) of the first filter that drops it, or None (kept)."""
    verdicts: list[tuple[str, str] | None] = [None] * len(docs)
    rows = np.arange(len(docs))
    for check in filters:
        if rows.size == 0:
            break
        details = check.reject(docs, rows)
        for row, detail in zip(rows.tolist(), details, strict=True):
            if detail is not None:
                verdicts[row] = (check.name, detail)
        rows = rows[np.array([d is None for d in details], dtype=bool)]
    return verdicts

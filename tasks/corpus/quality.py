"""Document filters, one class each, in the spirit of Gopher / FineWeb / BigScience ROOTS.

Each filter looks at one document (already normalized, with its words counted) and returns
None to keep it or a short detail saying why it is dropped. The reason recorded for a
dropped document is the filter's `name`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from tasks.corpus import text_stats
from tasks.corpus.language_id import is_iso639_3
from tasks.corpus.params import FilterParams


@dataclass(frozen=True)
class Doc:
    text: str
    lang: str
    script: str
    words: list[str]


class Filter(ABC):
    name: str

    @abstractmethod
    def reject(self, doc: Doc) -> str | None:
        """None to keep `doc`, else a short detail of why it is dropped."""


@dataclass(frozen=True)
class KnownLanguage(Filter):
    name = "unknown_language"

    def reject(self, doc: Doc) -> str | None:
        return None if is_iso639_3(doc.lang) else f"{doc.lang!r} is not an ISO 639-3 code"


@dataclass(frozen=True)
class ScriptMatch(Filter):
    min_fraction: float
    name = "script_mismatch"

    def reject(self, doc: Doc) -> str | None:
        if not text_stats.known_script(doc.script):
            return f"{doc.script!r} is not an ISO 15924 script"
        share = text_stats.script_fraction(doc.text, doc.script)
        return None if share >= self.min_fraction else f"{share:.2f} of letters in {doc.script}"


@dataclass(frozen=True)
class WordCount(Filter):
    minimum: int
    maximum: int
    name = "word_count"

    def reject(self, doc: Doc) -> str | None:
        n = len(doc.words)
        return None if self.minimum <= n <= self.maximum else f"{n} words"


@dataclass(frozen=True)
class MeanWordLength(Filter):
    minimum: float
    maximum: float
    name = "mean_word_length"

    def reject(self, doc: Doc) -> str | None:
        if doc.script in text_stats.UNSPACED_SCRIPTS or not doc.words:
            return None
        mean = sum(len(w) for w in doc.words) / len(doc.words)
        return None if self.minimum <= mean <= self.maximum else f"mean {mean:.1f} characters"


@dataclass(frozen=True)
class SymbolWordRatio(Filter):
    maximum: float
    name = "symbol_word_ratio"

    def reject(self, doc: Doc) -> str | None:
        ratio = text_stats.symbol_word_ratio(doc.text, len(doc.words))
        return None if ratio <= self.maximum else f"{ratio:.2f} symbols per word"


@dataclass(frozen=True)
class DuplicateLines(Filter):
    maximum: float
    name = "duplicate_lines"

    def reject(self, doc: Doc) -> str | None:
        share = text_stats.duplicate_line_fraction(doc.text)
        return None if share <= self.maximum else f"{share:.2f} of lines repeated"


@dataclass(frozen=True)
class CharRepetition(Filter):
    maximum: float
    ngram: int
    name = "char_repetition"

    def reject(self, doc: Doc) -> str | None:
        ratio = text_stats.char_repetition_ratio(doc.text, self.ngram)
        return None if ratio <= self.maximum else f"{ratio:.2f} in repeated {self.ngram}-grams"


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

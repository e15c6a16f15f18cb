"""Script-aware text measurements shared by the filters, the schedule and the tokenizer report.

The per-text functions are the definitions; the filters score a whole batch at once from its
code points (`CodePoints`), with per-character tables built from the same `regex` patterns
(so the counts are the same); `repetition` counts character n-grams in compiled code.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
import regex

# Scripts written without spaces between words: a "word" there is one letter.
UNSPACED_SCRIPTS = frozenset(
    {"Hani", "Hans", "Hant", "Hira", "Kana", "Jpan", "Thai", "Laoo", "Khmr", "Mymr", "Tibt", "Yiii"}
)
# ISO 15924 codes that name a mix of Unicode scripts.
_SCRIPT_MIXES = {
    "Hans": ("Hani",),
    "Hant": ("Hani",),
    "Jpan": ("Hani", "Hira", "Kana"),
    "Kore": ("Hang", "Hani"),
}

_LETTER = regex.compile(r"\p{L}")
# a word starts with a letter, mark or number and goes on through those and joiners
_WORD = regex.compile(r"[\p{L}\p{M}\p{N}][\p{L}\p{M}\p{N}'’\-]*")
_WORD_START = r"[\p{L}\p{M}\p{N}]"
_WORD_JOINER = r"['’\-]"
_SPACES = regex.compile(r"[^\S\n]+")
_CONTROL = regex.compile(r"[\p{Cc}--[\n\t]]", flags=regex.V1)
_SYMBOLS = ("#", "…", "...")


def normalize(text: str) -> str:
    """NFC, control characters removed, runs of blanks folded, lines stripped, no empty lines."""
    text = _CONTROL.sub("", unicodedata.normalize("NFC", text).replace("\r\n", "\n"))
    lines = map(str.strip, _SPACES.sub(" ", text).split("\n"))  # blanks never include \n
    return "\n".join(line for line in lines if line)


@cache
def _script_pattern(script: str) -> regex.Pattern | None:
    """Letters of `script`, matched in one pass (V1 set intersection)."""
    parts = "".join(rf"\p{{Script_Extensions={p}}}" for p in _SCRIPT_MIXES.get(script, (script,)))
    try:
        return regex.compile(rf"[\p{{L}}&&[{parts}]]", flags=regex.V1)
    except regex.error:
        return None


def known_script(script: str) -> bool:
    return _script_pattern(script) is not None


def script_fraction(text: str, script: str) -> float:
    """Share of the letters of `text` that belong to `script` (ISO 15924)."""
    letters = _LETTER.findall(text)
    pattern = _script_pattern(script)
    if not letters or pattern is None:
        return 0.0
    return len(pattern.findall(text)) / len(letters)


def words(text: str, script: str) -> list[str]:
    """Whitespace-and-punctuation words; each letter counts as a word in unspaced scripts."""
    if script in UNSPACED_SCRIPTS:
        return _LETTER.findall(text)
    return _WORD.findall(text)


def symbol_count(text: str) -> int:
    """Gopher's symbols: hash marks and ellipses."""
    return sum(text.count(s) for s in _SYMBOLS)


def duplicate_line_fraction(text: str) -> float:
    """Gopher: share of lines that repeat an earlier line."""
    lines = [line for line in text.split("\n") if line.strip()]
    if len(lines) < 2:
        return 0.0
    return 1 - len(set(lines)) / len(lines)


def char_repetition_ratio(text: str, n: int = 10) -> float:
    """BigScience ROOTS: share of character n-grams taken by the √(distinct) most frequent ones."""
    grams = Counter(text[i : i + n] for i in range(len(text) - n + 1))
    if not grams:
        return 0.0
    top = max(1, int(len(grams) ** 0.5))
    counts = sorted(grams.values(), reverse=True)
    repeated = sum(count for count in counts[:top] if count > 1)
    return repeated / sum(counts)


# --- whole batches ---------------------------------------------------------------------------

_CODE_POINTS = 0x110000


@dataclass(frozen=True)
class CodePoints:
    """A batch of texts as one array of code points: text i is values[starts[i]:starts[i + 1]]."""

    values: np.ndarray  # uint32
    starts: np.ndarray  # int64, one more entry than there are texts

    @classmethod
    def of(cls, texts: Sequence[str]) -> CodePoints:
        lengths = np.fromiter(map(len, texts), np.int64, len(texts))
        joined = bytearray("".join(texts).encode("utf-32-le", "surrogatepass"))
        return cls(np.frombuffer(joined, np.uint32), _offsets(lengths))  # writable: numba

    def __len__(self) -> int:
        return self.starts.size - 1

    def take(self, rows: np.ndarray) -> CodePoints:
        lengths = np.diff(self.starts)[rows]
        starts = _offsets(lengths)
        index = np.arange(starts[-1]) + np.repeat(self.starts[:-1][rows] - starts[:-1], lengths)
        return CodePoints(self.values[index], starts)

    def count(self, flags: np.ndarray) -> np.ndarray:
        """Per text: how many of its code points have `flags` (one per code point) set."""
        total = _offsets(flags)
        return total[self.starts[1:]] - total[self.starts[:-1]]

    def text(self, row: int) -> str:
        chars = self.values[self.starts[row] : self.starts[row + 1]]
        return chars.tobytes().decode("utf-32-le", "surrogatepass")


def _offsets(sizes: np.ndarray) -> np.ndarray:
    return np.concatenate([np.zeros(1, np.int64), np.cumsum(sizes, dtype=np.int64)])


def _table(pattern: regex.Pattern, candidates: str) -> np.ndarray:
    """Per code point: whether `pattern`, a one-character class, matches it."""
    table = np.zeros(_CODE_POINTS, dtype=bool)
    found = "".join(pattern.findall(candidates)).encode("utf-32-le", "surrogatepass")
    table[np.frombuffer(found, np.uint32)] = True
    return table


@cache
def _every_character() -> str:
    return "".join(map(chr, range(_CODE_POINTS)))


@cache
def _letters() -> str:
    return "".join(_LETTER.findall(_every_character()))


@cache
def _letter_table() -> np.ndarray:
    return _table(_LETTER, _letters())


@cache
def _word_tables() -> tuple[np.ndarray, np.ndarray]:
    """(may start a word, may only continue one) per code point, as `_WORD` reads them."""
    every = _every_character()
    return _table(regex.compile(_WORD_START), every), _table(regex.compile(_WORD_JOINER), every)


@cache
def _script_table(script: str) -> np.ndarray | None:
    pattern = _script_pattern(script)
    return None if pattern is None else _table(pattern, _letters())


def letter_counts(points: CodePoints) -> np.ndarray:
    return points.count(_letter_table()[points.values])


def script_letter_counts(points: CodePoints, scripts: Sequence[str]) -> np.ndarray:
    """Per text: its letters that belong to its script (0 where the script is unknown)."""
    counts = np.zeros(len(points), np.int64)
    by_script = np.asarray(scripts, dtype=object)
    for script in set(scripts):
        table = _script_table(script)
        if table is not None:
            rows = np.flatnonzero(by_script == script)
            subset = points.take(rows)
            counts[rows] = subset.count(table[subset.values])
    return counts


def word_counts(points: CodePoints) -> tuple[np.ndarray, np.ndarray]:
    """Per text: (words, characters in them) as `words` finds them in a spaced script.

    A word is a run of word characters and joiners (not crossing texts) from its first
    word character on; a run of joiners alone is no word.
    """
    can_start, joiner = _word_tables()
    starter = can_start[points.values]
    inside = starter | joiner[points.values]
    size = inside.size
    first_of_text = np.zeros(size, dtype=bool)
    first_of_text[points.starts[:-1][points.starts[:-1] < size]] = True
    continues = np.zeros(size, dtype=bool)  # in the same run as the character before
    continues[1:] = inside[1:] & inside[:-1] & ~first_of_text[1:]
    run_start = inside & ~continues
    run_last = np.flatnonzero(inside & ~np.append(continues[1:], False))
    run_of = np.cumsum(run_start) - 1
    starters = np.flatnonzero(starter)
    runs = run_of[starters]
    first = np.ones(runs.size, dtype=bool)
    first[1:] = runs[1:] != runs[:-1]
    begin, run = starters[first], runs[first]
    text = np.searchsorted(points.starts, begin, side="right") - 1
    n_words = np.bincount(text, minlength=len(points)).astype(np.int64)
    chars = np.bincount(text, weights=run_last[run] + 1 - begin, minlength=len(points))
    return n_words, chars.astype(np.int64)

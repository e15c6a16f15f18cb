"""Script-aware text measurements shared by the filters, the schedule and the tokenizer report."""

from __future__ import annotations

import unicodedata
from collections import Counter
from functools import cache

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
_WORD = regex.compile(r"[\p{L}\p{M}\p{N}][\p{L}\p{M}\p{N}'’\-]*")
_SPACES = regex.compile(r"[^\S\n]+")
_CONTROL = regex.compile(r"[\p{Cc}--[\n\t]]", flags=regex.V1)
_SYMBOLS = ("#", "…", "...")


def normalize(text: str) -> str:
    """NFC, control characters removed, runs of blanks folded, lines stripped, no empty lines."""
    text = _CONTROL.sub("", unicodedata.normalize("NFC", text).replace("\r\n", "\n"))
    lines = (_SPACES.sub(" ", line).strip() for line in text.split("\n"))
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


def symbol_word_ratio(text: str, n_words: int) -> float:
    """Gopher: (hash marks + ellipses) per word."""
    return sum(text.count(s) for s in _SYMBOLS) / max(n_words, 1)


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

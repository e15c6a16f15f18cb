"""Each filter at its threshold, and bad records dropped with a reason (never a crash)."""

import numpy as np
import pyarrow as pa
import pytest

from tasks.corpus import repetition, text_stats
from tasks.corpus.filter import check_document, filter_documents, filter_metrics
from tasks.corpus.params import FilterParams
from tasks.corpus.quality import (
    Batch,
    CharRepetition,
    DuplicateLines,
    KnownLanguage,
    MeanWordLength,
    ScriptMatch,
    SymbolWordRatio,
    WordCount,
    first_rejections,
)
from tasks.corpus.udhr import read_udhr
from tests.conftest import REPO

GOOD = "All human beings are born free and equal in dignity and rights."


def _reject(check, text, lang="eng", script="Latn"):
    return check.reject(Batch([text], [lang], [script]), np.arange(1))[0]


def _row(text, lang="eng", script="Latn", doc_id="d"):
    return {
        "id": doc_id,
        "text": text,
        "lang": lang,
        "script": script,
        "bcp47": lang,
        "source": "test",
        "n_chars": len(text) if isinstance(text, str) else 0,
    }


def test_normalize_nfc_and_whitespace():
    assert text_stats.normalize("  Cafe\u0301 \t  au\u00a0lait \r\n\n\x07 second  ") == (
        "Café au lait\nsecond"
    )


def test_words_count_letters_in_unspaced_scripts():
    assert len(text_stats.words("人人生而自由", "Hani")) == 6
    assert text_stats.words("l'homme est libre", "Latn") == ["l'homme", "est", "libre"]


@pytest.mark.parametrize(
    ("check", "passing", "failing"),
    [
        (WordCount(3, 5), "one two three", "one two"),
        (WordCount(3, 5), "a b c d e", "a b c d e f"),
        (MeanWordLength(2.0, 5.0), "ab cd ef", "a b c"),
        (MeanWordLength(2.0, 5.0), "abcde abcde", "abcdef abcdef"),
        (SymbolWordRatio(0.25), "one two three #four", "one # two #"),
        (DuplicateLines(0.34), "a\nb\nc\na", "a\nb\na\na"),
        (ScriptMatch(0.6), "mostly latin text мир", "мир мир мир latin"),
        (CharRepetition(0.3, 3), "abcdefghij klmnopqrst", "abcabcabcabcabcabcabc"),
    ],
)
def test_each_filter_keeps_below_and_drops_above_its_threshold(check, passing, failing):
    assert _reject(check, passing) is None
    assert _reject(check, failing) is not None


def test_script_check_understands_script_mixes():
    assert (
        _reject(ScriptMatch(0.9), "人人生而自由，在尊严和权利上一律平等。", "cmn", "Hans") is None
    )
    assert (
        _reject(ScriptMatch(0.9), "すべての人間は、生まれながらにして自由", "jpn", "Jpan") is None
    )
    assert "not an ISO 15924" in _reject(ScriptMatch(0.5), GOOD, script="Xyzw")


def test_batch_scores_equal_the_per_text_definitions():
    """The batch columns (character tables, compiled n-gram counts) against `text_stats`'
    regex and Counter definitions, on a sample of every UDHR script and on edge cases."""
    rows = list(read_udhr(REPO / "data" / "seed" / "udhr"))[::11]
    texts = [text_stats.normalize(r["text"]) for r in rows] + [
        "",
        "a",
        "--' -x- ''",
        "l'homme est-il libre ’’ab’ 9-9 \u0301a",
        "ab" * 40,
        "人人生而自由",
    ]
    scripts = [r["script"] for r in rows] + ["Latn"] * 5 + ["Hans"]
    docs = Batch(texts, ["und"] * len(texts), scripts)
    everything = np.arange(len(texts))
    for n in (3, 10):
        ratios = repetition.char_repetition_ratios(docs.points, everything, n)
        assert ratios.tolist() == [text_stats.char_repetition_ratio(t, n) for t in texts]
    assert docs.n_words.tolist() == [
        len(text_stats.words(t, s)) for t, s in zip(texts, scripts, strict=True)
    ]
    spaced = ~docs.unspaced
    assert docs.word_characters[spaced].tolist() == [
        sum(map(len, text_stats.words(t, s)))
        for t, s, keep in zip(texts, scripts, spaced, strict=True)
        if keep
    ]
    assert docs.script_fraction.tolist() == [
        text_stats.script_fraction(t, s) for t, s in zip(texts, scripts, strict=True)
    ]


def test_first_filter_to_reject_names_the_reason():
    docs = Batch(["one two", "one two three four", "x"], ["eng", "q!q", "q!q"], ["Latn"] * 3)
    chain = [KnownLanguage(), WordCount(3, 10)]
    found = first_rejections(chain, docs)
    assert found == [
        ("word_count", "2 words"),
        ("unknown_language", "'q!q' is not an ISO 639-3 code"),
        ("unknown_language", "'q!q' is not an ISO 639-3 code"),
    ]


@pytest.mark.parametrize(
    ("text", "lang", "reason"),
    [
        ("", "eng", "empty"),
        ("   \n\t  ", "eng", "empty"),
        (b"caf\xe9 au lait with broken bytes", "eng", "invalid_utf8"),
        ("lone surrogate \udcff here and more words", "eng", "invalid_utf8"),
        (GOOD, "xx9", "unknown_language"),
        ("word " * 2_100_000, "eng", "too_long"),
    ],
)
def test_bad_records_get_a_reason(text, lang, reason):
    verdict = check_document(_row(text, lang), FilterParams(max_chars=10_000_000))
    assert verdict["reason"] == reason


def test_good_document_is_kept_normalized():
    verdict = check_document(_row("  " + GOOD + "  \n\n"), FilterParams())
    assert verdict["reason"] is None
    assert verdict["text"] == GOOD and verdict["n_chars"] == len(GOOD) and verdict["n_words"] == 12


def test_language_id_fills_undetermined_only_when_confident():
    german = (
        "Alle Menschen sind frei und gleich an Würde und Rechten geboren. Sie sind mit Vernunft"
    )
    fill = FilterParams(language_id={"mode": "fill_undetermined", "min_confidence": 0.9})
    assert check_document(_row(german, "und"), fill)["lang"] == "deu"
    assert check_document(_row(german, "und"), fill)["lang_source"] == "language_id"
    assert check_document(_row(german, "nld"), fill)["lang"] == "nld"  # declared, trusted
    override = FilterParams(language_id={"mode": "override", "min_confidence": 0.9})
    assert check_document(_row(german, "nld"), override)["lang"] == "deu"
    never = FilterParams(language_id={"mode": "override", "min_confidence": 1.0})
    assert check_document(_row("ok ok ok", "nld"), never)["lang"] == "nld"


def test_filter_on_ray_counts_every_drop(ray_session):
    rows = [
        _row(GOOD, doc_id="keep-1"),
        _row(GOOD + " Again.", doc_id="keep-2"),
        _row("", doc_id="empty"),
        _row(GOOD, lang="q!q", doc_id="badlang"),
        _row("x " * 600_000, doc_id="huge"),
    ]
    docs = pa.Table.from_pylist(rows)
    kept, dropped = filter_documents(docs, FilterParams(max_chars=1_000_000, batch_size=2))
    assert kept.column("id").to_pylist() == ["keep-1", "keep-2"]
    reasons = dict(
        zip(dropped.column("id").to_pylist(), dropped.column("reason").to_pylist(), strict=True)
    )
    assert reasons == {"badlang": "unknown_language", "empty": "empty", "huge": "too_long"}
    metrics = filter_metrics(docs.num_rows, kept, dropped)
    assert metrics["dropped_by_reason"] == {"empty": 1, "too_long": 1, "unknown_language": 1}
    assert metrics["kept"] + metrics["dropped"] == 5


def test_filter_accepts_binary_text_column(ray_session):
    docs = pa.table(
        {
            "id": ["ok", "bad"],
            "text": pa.array([GOOD.encode(), b"\xff\xfe broken"], pa.binary()),
            "lang": ["eng", "eng"],
            "script": ["Latn", "Latn"],
            "bcp47": ["en", "en"],
            "source": ["t", "t"],
            "n_chars": [1, 1],
        }
    )
    kept, dropped = filter_documents(docs, FilterParams())
    assert kept.column("id").to_pylist() == ["ok"]
    assert dropped.column("reason").to_pylist() == ["invalid_utf8"]

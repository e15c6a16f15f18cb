"""Offline language identification (py3langid's bundled model) and ISO 639-3 validation."""

from __future__ import annotations

from functools import cache

import pycountry

UNDETERMINED = "und"
# ISO 639-3 special codes that are valid declarations without naming one language.
_SPECIAL = frozenset({"und", "mis", "mul", "zxx"})


@cache
def _iso639_3() -> frozenset[str]:
    return frozenset(lang.alpha_3 for lang in pycountry.languages) | _SPECIAL


def is_iso639_3(code: str) -> bool:
    return code in _iso639_3()


@cache
def _to_iso639_3() -> dict[str, str]:
    return {lang.alpha_2: lang.alpha_3 for lang in pycountry.languages if hasattr(lang, "alpha_2")}


@cache
def _identifier():
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def identify(text: str) -> tuple[str, float]:
    """(ISO 639-3 code, probability) of the most likely of py3langid's 97 languages."""
    code, probability = _identifier().classify(text)
    return _to_iso639_3().get(code, code), float(probability)

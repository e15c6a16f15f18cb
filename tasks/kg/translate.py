"""kg.translate: MultiHal's translation of `input`, `output` and `trip_labels` from English
into the configured languages (kg.slice.languages other than the source).

One row per multihal row and target language: the translated texts and `translated:
true`, or, when no translator is configured (the offline default: no NLLB-200 checkpoint
ships with the project), `translated: false` with empty texts, never a copy of the
English. The metrics file says which, and why (`note`); kg.eval and the report read it.
Each distinct English text is translated once per language.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from tasks.core.errors import UserError
from tasks.core.io import read_parquet
from tasks.core.progress import get_logger
from tasks.core.stage import Output, Stage, StageContext
from tasks.kg.params import KgParams, TranslateParams
from tasks.kg.translators import Translator, make_translator

log = get_logger("paperline.kg.translate")
FIELDS = ("input", "output", "trip_labels")
SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("qa_id", pa.string()),
        ("language", pa.string()),
        ("target_code", pa.string()),
        ("translated", pa.bool_()),
        ("translated_by", pa.string()),
        *((name, pa.string()) for name in FIELDS),
    ]
)


def english(row: dict[str, Any], field: str, source: str) -> str:
    return row["trip_labels"][source] if field == "trip_labels" else row[field]


def target_languages(params: TranslateParams, languages: Sequence[str]) -> dict[str, str]:
    """Each target language (the configured ones but the source) → its NLLB-200 code."""
    missing = [lang for lang in languages if lang not in params.codes]
    if missing:
        raise UserError(
            f"kg.translate.codes: no NLLB-200 code for {', '.join(missing)}; add them "
            "(e.g. de: deu_Latn)"
        )
    return {lang: params.codes[lang] for lang in languages if lang != params.source_language}


def translate_rows(
    rows: list[dict[str, Any]],
    targets: Mapping[str, str],
    translator: Translator | None,
    source: str,
) -> list[dict[str, Any]]:
    texts = sorted({english(row, field, source) for row in rows for field in FIELDS})
    result = []
    for language, code in targets.items():
        done = (
            dict(zip(texts, translator.translate(texts, code), strict=True)) if translator else {}
        )
        for row in rows:
            result.append(
                {
                    "id": row["id"],
                    "qa_id": row["qa_id"],
                    "language": language,
                    "target_code": code,
                    "translated": translator is not None,
                    "translated_by": translator.name if translator else None,
                    **{
                        field: done[english(row, field, source)] if translator else None
                        for field in FIELDS
                    },
                }
            )
    return result


def translate_table(
    rows: list[dict[str, Any]], settings: TranslateParams, languages: Sequence[str]
) -> tuple[pa.Table, dict[str, Any]]:
    rows = rows[: settings.max_rows] if settings.max_rows else rows
    if rows and settings.source_language not in rows[0]["trip_labels"]:
        raise UserError(
            f"kg.translate.source_language {settings.source_language!r} is not among the path "
            "label languages (kg.slice.languages); add it there"
        )
    targets = target_languages(settings, languages)
    translator, note = make_translator(settings)
    started = time.perf_counter()
    translated = translate_rows(rows, targets, translator, settings.source_language)
    log.info("kg.translate: %d rows in %.1f s", len(rows), time.perf_counter() - started)
    metrics = {
        "translated": translator is not None,
        "translated_by": translator.name if translator else None,
        "note": note or f"translated by {translator.name}",
        "source_language": settings.source_language,
        "targets": dict(targets),
        "rows": len(rows),
        "texts": len({english(r, f, settings.source_language) for r in rows for f in FIELDS}),
    }
    return pa.Table.from_pylist(translated, schema=SCHEMA), metrics


def run(params: KgParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    rows = read_parquet(inputs["multihal"]).to_pylist()
    table, metrics = translate_table(rows, params.translate, params.slice.languages)
    log.info("kg.translate: %s", metrics["note"])
    return {"translations": table, "metrics": metrics}


STAGE = Stage(
    name="kg.translate",
    run=run,
    params_key="kg",
    params=("kg.translate", "kg.slice.languages"),
    inputs={"multihal": "data/processed/kg/multihal.parquet"},
    outputs={
        "translations": "data/processed/kg/translations.parquet",
        "metrics": Output.metrics("data/processed/kg/translate_metrics.json"),
    },
    headline="data/processed/kg/translate_metrics.json:translated",
)

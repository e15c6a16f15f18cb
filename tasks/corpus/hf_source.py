"""Production corpus source: stream any Hugging Face `datasets` dataset.

FineWeb2, for example, has one config per language (`arb_Arab`) and fields `text`, `id`,
`language`, `language_script`; the config name fills the language when fields are absent.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from tasks.core.errors import InputError
from tasks.core.progress import get_logger, track
from tasks.corpus.documents import document
from tasks.corpus.params import HuggingFaceSourceParams

log = get_logger("paperline.corpus.hf")


def _lang_script_from_config(config: str | None) -> tuple[str, str]:
    lang, _, script = (config or "").partition("_")
    return (lang or "und"), (script or "Zyyy")


def _field(row: dict[str, Any], name: str | None, default: str) -> str:
    value = row.get(name) if name else None
    return default if value in (None, "") else str(value)


def stream_documents(params: HuggingFaceSourceParams) -> Iterator[dict[str, Any]]:
    """Up to `max_docs_per_config` documents from each configured config, as corpus records."""
    import datasets

    for config in params.configs:
        try:
            rows = datasets.load_dataset(
                params.path,
                name=config,
                data_files=params.data_files,
                split=params.split,
                streaming=params.streaming,
            )
        except (FileNotFoundError, ValueError, datasets.exceptions.DatasetNotFoundError) as exc:
            raise InputError(
                f"params.yaml: corpus.ingest.huggingface: cannot open {params.path!r} "
                f"config {config!r} ({exc})"
            ) from None
        default_lang, default_script = _lang_script_from_config(config)
        limited = itertools.islice(rows, params.max_docs_per_config)
        label = f"{params.path}[{config or 'default'}]"
        for number, row in enumerate(track(limited, label, unit="docs", logger=log)):
            if params.text_field not in row:
                raise InputError(
                    f"{label}: row {number}: no field {params.text_field!r}; set "
                    f"corpus.ingest.huggingface.text_field (fields: {', '.join(row)})"
                )
            lang = _field(row, params.lang_field, default_lang)
            script = _field(row, params.script_field, default_script)
            doc_id = _field(row, params.id_field, str(number))
            yield document(
                doc_id=f"{params.path}/{config or 'default'}/{doc_id}",
                text=str(row[params.text_field]),
                lang=lang,
                script=script,
                bcp47=f"{lang}-{script}",
                source=params.path,
            )

"""params.yaml `corpus:` section."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tasks.core.strict_model import StrictModel


class HuggingFaceSourceParams(StrictModel):
    """Stream any `datasets` dataset, e.g. FineWeb2 with one config per language."""

    path: str = "HuggingFaceFW/fineweb-2"
    configs: list[str | None] = Field(default_factory=lambda: ["arb_Arab", "deu_Latn", "zho_Hans"])
    data_files: str | list[str] | None = None
    split: str = "train"
    streaming: bool = True
    text_field: str = "text"
    id_field: str | None = "id"
    lang_field: str | None = "language"
    script_field: str | None = "language_script"
    max_docs_per_config: int = Field(default=1000, ge=1)


class IngestParams(StrictModel):
    source: Literal["udhr", "huggingface"] = "udhr"
    min_chars: int = Field(default=1, ge=0)
    huggingface: HuggingFaceSourceParams = HuggingFaceSourceParams()


class CorpusParams(StrictModel):
    ingest: IngestParams = IngestParams()

"""corpus.ingest: raw multilingual documents → data/interim/corpus/docs.parquet."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tasks.core.stage import Output, Stage, StageContext
from tasks.corpus import hf_source, udhr
from tasks.corpus.documents import corpus_summary, documents_table
from tasks.corpus.params import IngestParams


def run(params: IngestParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    if params.source == "udhr":
        docs = udhr.read_udhr(inputs["udhr"])
    else:
        docs = hf_source.stream_documents(params.huggingface)
    table = documents_table(d for d in docs if d["n_chars"] >= params.min_chars)
    return {"docs": table, "metrics": corpus_summary(table)}


STAGE = Stage(
    name="corpus.ingest",
    run=run,
    params_key="corpus.ingest",
    inputs={"udhr": "data/seed/udhr"},
    outputs={
        "docs": "data/interim/corpus/docs.parquet",
        "metrics": Output.metrics("data/interim/corpus/ingest_metrics.json"),
    },
    headline="data/interim/corpus/ingest_metrics.json:documents",
)

"""corpus.filter: normalize, check language and script, drop low-quality documents (Ray tasks).

Every document either comes out in `filtered.parquet` (normalized text, word count, where
its language label came from) or in `dropped.parquet` with the filter that dropped it. Bad
records (undecodable text, unknown language codes, oversized documents) are dropped with a
reason, never a crash.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tasks.core.io import read_parquet
from tasks.core.progress import get_logger
from tasks.core.ray_runtime import collect, map_table
from tasks.core.stage import Output, Stage, StageContext
from tasks.corpus import text_stats
from tasks.corpus.documents import DOC_SCHEMA, is_sorted
from tasks.corpus.language_id import UNDETERMINED, identify
from tasks.corpus.params import FilterParams
from tasks.corpus.quality import Batch, build_filters, first_rejections

log = get_logger("paperline.corpus.filter")

FILTERED_SCHEMA = DOC_SCHEMA.append(pa.field("n_words", pa.int64(), nullable=False)).append(
    pa.field("lang_source", pa.string(), nullable=False)
)
VERDICT_SCHEMA = FILTERED_SCHEMA.append(pa.field("reason", pa.string())).append(
    pa.field("detail", pa.string())
)
DROPPED_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("lang", pa.string()),
        ("script", pa.string()),
        ("source", pa.string()),
        ("n_chars", pa.int64()),
        ("reason", pa.string()),
        ("detail", pa.string()),
        ("text_head", pa.string()),
    ]
)
_HEAD = 200


def _decode(text: Any) -> str | None:
    """The text as valid Unicode, or None when it is not valid UTF-8."""
    try:
        if isinstance(text, bytes | bytearray | memoryview):
            return bytes(text).decode("utf-8")
        if text is None:
            return ""
        text.encode("utf-8")  # lone surrogates (from surrogateescape) cannot be encoded
        return text
    except (UnicodeDecodeError, UnicodeEncodeError):
        return None


def _label_language(text: str, lang: str, params: FilterParams) -> tuple[str, str]:
    mode = params.language_id.mode
    if mode == "off" or (mode == "fill_undetermined" and lang != UNDETERMINED):
        return lang, "declared"
    guess, confidence = identify(text)
    if confidence >= params.language_id.min_confidence and guess != lang:
        return guess, "language_id"
    return lang, "declared"


def _prepared(raw: Any, params: FilterParams) -> tuple[str | None, str | None, str | None]:
    """(normalized text, reason, detail) of one raw text: no text when it is too long or
    unreadable; no reason when it goes on to the filters."""
    if raw is not None and len(raw) > params.max_chars:
        return None, "too_long", f"{len(raw)} > {params.max_chars}"
    text = _decode(raw)
    if text is None:
        return None, "invalid_utf8", "text is not valid UTF-8"
    text = text_stats.normalize(text)
    if not text:
        return "", "empty", "no text after normalization"
    return text, None, None


def check_documents(docs: Mapping[str, list], params: FilterParams) -> dict[str, list]:
    """Verdict columns (VERDICT_SCHEMA) of a batch of documents given as columns.

    Size, decoding and normalization go text by text; the quality filters score the whole
    batch at once (`quality.Batch`), built once per batch.
    """
    n = len(docs["id"])
    lang = [code or UNDETERMINED for code in docs["lang"]]
    script = [code or "Zyyy" for code in docs["script"]]
    bcp47 = docs.get("bcp47") or [None] * n
    n_chars = docs.get("n_chars") or [0] * n
    verdicts: dict[str, list] = {
        "id": docs["id"],
        "lang": lang,
        "script": script,
        "bcp47": [
            tag or code or UNDETERMINED for tag, code in zip(bcp47, docs["lang"], strict=True)
        ],
        "source": docs["source"],
        "n_chars": [int(c or 0) for c in n_chars],
        "n_words": [0] * n,
        "lang_source": ["declared"] * n,
        "reason": [None] * n,
        "detail": [None] * n,
        "text": [""] * n,
    }
    alive = []
    for row, raw in enumerate(docs["text"]):
        text, reason, detail = _prepared(raw, params)
        verdicts["reason"][row], verdicts["detail"][row] = reason, detail
        if text is not None:
            verdicts["text"][row], verdicts["n_chars"][row] = text, len(text)
        if reason is None:
            lang[row], verdicts["lang_source"][row] = _label_language(text, lang[row], params)
            alive.append(row)
    batch = Batch(
        [verdicts["text"][r] for r in alive], [lang[r] for r in alive], [script[r] for r in alive]
    )
    rejections = first_rejections(build_filters(params), batch)
    for row, n_words, rejection in zip(alive, batch.n_words.tolist(), rejections, strict=True):
        verdicts["n_words"][row] = n_words
        if rejection is not None:
            verdicts["reason"][row], verdicts["detail"][row] = rejection
    return verdicts


def check_document(row: Mapping[str, Any], params: FilterParams) -> dict[str, Any]:
    """One document's verdict: the kept record's fields plus `reason`/`detail` (None = kept)."""
    verdicts = check_documents({key: [value] for key, value in row.items()}, params)
    return {key: column[0] for key, column in verdicts.items()}


def filter_batch(batch: pa.Table, params: FilterParams) -> pa.Table:
    """One Ray task (map_table): every row with its verdict columns."""
    verdicts = check_documents(batch.to_pydict(), params)
    return pa.Table.from_pydict(verdicts, schema=VERDICT_SCHEMA)


def _split(verdicts: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(kept, dropped), both sorted by id; done in Arrow, not Python rows, on the driver."""
    is_dropped = pc.is_valid(verdicts.column("reason"))
    kept = verdicts.filter(pc.invert(is_dropped)).select(FILTERED_SCHEMA.names)
    dropped = verdicts.filter(is_dropped)
    head = pc.utf8_slice_codeunits(dropped.column("text"), 0, _HEAD)
    dropped = dropped.append_column("text_head", head).select(DROPPED_SCHEMA.names)
    dropped = dropped.cast(DROPPED_SCHEMA)
    # blocks come back in input order: sorted input needs no sort (a take of every text)
    return tuple(t if is_sorted(t.column("id")) else t.sort_by("id") for t in (kept, dropped))


def filter_documents(docs: pa.Table, params: FilterParams) -> tuple[pa.Table, pa.Table]:
    """(kept, dropped) for a documents table, computed in Ray tasks."""
    verdicts = map_table(
        docs,
        filter_batch,
        batch_size=params.batch_size,
        num_workers=params.num_workers,
        jit_warmup=True,  # the repetition filter's compiled code
        params=params,
    )
    return _split(collect(verdicts))


def filter_metrics(docs_in: int, kept: pa.Table, dropped: pa.Table) -> dict[str, Any]:
    reasons = Counter(dropped.column("reason").to_pylist())
    sources = Counter(kept.column("lang_source").to_pylist())
    return {
        "documents_in": docs_in,
        "kept": kept.num_rows,
        "dropped": dropped.num_rows,
        "dropped_by_reason": dict(sorted(reasons.items())),
        "language_labels": dict(sorted(sources.items())),
        "languages_kept": len(set(kept.column("lang").to_pylist())),
        "characters_kept": sum(kept.column("n_chars").to_pylist()),
    }


def run(params: FilterParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    docs = read_parquet(inputs["docs"])
    kept, dropped = filter_documents(docs, params)
    metrics = filter_metrics(docs.num_rows, kept, dropped)
    log.info(
        "kept %d of %d documents; dropped %s",
        kept.num_rows,
        docs.num_rows,
        metrics["dropped_by_reason"],
    )
    return {"filtered": kept, "dropped": dropped, "metrics": metrics}


STAGE = Stage(
    name="corpus.filter",
    run=run,
    params_key="corpus.filter",
    inputs={"docs": "data/interim/corpus/docs.parquet"},
    outputs={
        "filtered": "data/interim/corpus/filtered.parquet",
        "dropped": "data/interim/corpus/dropped.parquet",
        "metrics": Output.metrics("data/interim/corpus/filter_metrics.json"),
    },
    uses_ray=True,
    headline="data/interim/corpus/filter_metrics.json:kept",
)

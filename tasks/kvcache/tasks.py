"""kvcache.tasks: RULER-style needle items on real haystack text, in the core LLM's tokens.

The haystack is the seed's English text (UDHR, CPython docstrings; tasks/core/seed_text.py)
as sentences; lengths are counted with the tokenizer of the core LLM's checkpoint
(llm-import's `models/llm/checkpoint`). `test_items` items per kind and length, each cell
from its own RNG stream of (seed, kind, length), so adding a length leaves the other cells
unchanged. Every item is validated before anything is written (each needle once, each
asked value exactly once, the budget kept); one failure stops the stage with the item's id.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tasks.core.errors import UserError
from tasks.core.progress import get_logger
from tasks.core.seed_text import CODE_ARCHIVE, UDHR_ENGLISH, seed_paragraphs, sentences
from tasks.core.stage import Output, Stage, StageContext
from tasks.kvcache.needles import Item, key_pool, make_item, problems
from tasks.kvcache.params import KINDS, KvCacheParams, TaskParams

log = get_logger("paperline.kvcache.tasks")
OUT = "data/processed/kvcache"
TOKENIZER = "models/llm/checkpoint"


class Haystack:
    """The haystack's sentences with their token counts (as they are joined: after a space)."""

    def __init__(self, udhr: Path, code: Path, tokenizer: Any) -> None:
        self.sentences = sentences(seed_paragraphs(udhr, code))
        self.text = " ".join(self.sentences)
        self.tokenizer = tokenizer
        encoded = tokenizer([" " + s for s in self.sentences], add_special_tokens=False)
        self.sentence_tokens = [len(ids) for ids in encoded["input_ids"]]
        self.keys = key_pool(self.text)
        self.total_tokens = sum(self.sentence_tokens)

    @cache  # noqa: B019 (one Haystack per stage run)
    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])


def cell_items(
    settings: TaskParams, haystack: Haystack, kind: str, length: int, count: int
) -> list[Item]:
    """`count` items of one (kind, length) cell, from that cell's own RNG stream."""
    if length > haystack.total_tokens:
        raise UserError(
            f"length {length}: the haystack has only {haystack.total_tokens} tokens; choose a "
            "shorter length"
        )
    rng = np.random.default_rng([settings.seed, KINDS.index(kind), length])
    return [
        make_item(
            f"test-{kind}-{length}-{i}",
            kind,
            length,
            haystack.sentences,
            haystack.sentence_tokens,
            haystack.count_tokens,
            haystack.keys,
            haystack.text,
            rng,
            settings,
        )
        for i in range(count)
    ]


def validated_table(items: list[Item]) -> pa.Table:
    rows = [item.row() for item in items]
    for row in rows:
        if found := problems(row):
            raise RuntimeError(f"kvcache.tasks: item {row['id']}: {'; '.join(found)}")
    return pa.Table.from_pylist(rows)


def load_haystack(inputs: Mapping[str, Path]) -> Haystack:
    from transformers import AutoTokenizer

    return Haystack(
        inputs["udhr"], inputs["code"], AutoTokenizer.from_pretrained(inputs["tokenizer"])
    )


def run(params: KvCacheParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    settings = params.tasks
    haystack = load_haystack(inputs)
    items = [
        item
        for kind in settings.kinds
        for length in settings.lengths
        for item in cell_items(settings, haystack, kind, length, settings.test_items)
    ]
    table = validated_table(items)
    metrics = {
        "haystack_sentences": len(haystack.sentences),
        "haystack_tokens": haystack.total_tokens,
        "items": len(items),
        "validated": len(items),
        "cells": dict(sorted(Counter(f"{i.kind}@{i.length}" for i in items).items())),
        "mean_tokens": {
            f"{k}@{n}": round(
                float(np.mean([i.tokens for i in items if (i.kind, i.length) == (k, n)])), 1
            )
            for k in settings.kinds
            for n in settings.lengths
        },
    }
    log.info(
        "kvcache.tasks: %d items from %d haystack tokens, all validated",
        len(items),
        haystack.total_tokens,
    )
    return {"test": table, "metrics": metrics}


STAGE = Stage(
    name="kvcache.tasks",
    run=run,
    params_key="kvcache",
    params=("kvcache.tasks",),
    inputs={"udhr": UDHR_ENGLISH, "code": CODE_ARCHIVE, "tokenizer": TOKENIZER},
    outputs={"test": f"{OUT}/test.parquet", "metrics": Output.metrics(f"{OUT}/tasks_metrics.json")},
    headline=f"{OUT}/tasks_metrics.json:validated",
)

"""kvcache.tasks: RULER-style needle tasks on real haystack text, as train / dev / test Parquet.

The haystack is the UDHR's English translation and the CPython docstrings of the seed
(tasks/kvcache/haystack.py); the needles and kinds are in tasks/kvcache/needles.py. The
train split mixes kinds and `train_lengths` (the LM learns retrieval there); dev and test
hold `dev_items` / `test_items` items per kind and length in `lengths`. Each split draws
from its own RNG stream of (seed, split, kind, length), so adding a length leaves the other
cells unchanged. Every item is validated before anything is written (each needle at its
recorded word, each asked value exactly once in the context, each key exactly as often as
its needles); one failure stops the stage with the item's id. Also written: the key and
value pools (the tokenizer's needle vocabulary) and counts per split, kind and length.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tasks.core.progress import get_logger
from tasks.core.stage import Stage, StageContext
from tasks.kvcache.haystack import haystack_words
from tasks.kvcache.needles import Item, key_pool, make_item, problems, value_pool
from tasks.kvcache.params import KINDS, KvCacheParams, TaskParams

log = get_logger("paperline.kvcache.tasks")
SPLITS = ("train", "dev", "test")
OUT = "data/processed/kvcache"


def rng_for(settings: TaskParams, split: str, kind: str, length: int) -> np.random.Generator:
    return np.random.default_rng([settings.seed, SPLITS.index(split), KINDS.index(kind), length])


def cell_items(
    settings: TaskParams,
    stream: list[str],
    split: str,
    kind: str,
    length: int,
    count: int,
    keys: list[str] | None = None,
) -> list[Item]:
    """`count` items of one (split, kind, length) cell, from that cell's own RNG stream
    (`keys`: the key pool of `stream`, computed when not given)."""
    keys, values = keys or key_pool(set(stream)), value_pool(settings.value_range)
    rng = rng_for(settings, split, kind, length)
    return [
        make_item(
            f"{split}-{kind}-{length}-{i}", split, kind, length, stream, keys, values, rng, settings
        )
        for i in range(count)
    ]


def generate(settings: TaskParams, stream: list[str]) -> dict[str, list[Item]]:
    """The three splits' items: train cells drawn by kind and length, then dev and test."""
    mix = np.random.default_rng([settings.seed, len(SPLITS)])
    drawn = Counter(
        (
            settings.kinds[int(mix.integers(len(settings.kinds)))],
            int(mix.choice(settings.train_lengths)),
        )
        for _ in range(settings.train_items)
    )
    keys = key_pool(set(stream))
    splits: dict[str, list[Item]] = {"train": []}
    for (kind, length), count in sorted(drawn.items()):
        splits["train"] += cell_items(settings, stream, "train", kind, length, count, keys)
    for split, count in (("dev", settings.dev_items), ("test", settings.test_items)):
        splits[split] = [
            item
            for kind in settings.kinds
            for length in settings.lengths
            for item in cell_items(settings, stream, split, kind, length, count, keys)
        ]
    return splits


def validated_table(items: list[Item]) -> pa.Table:
    rows = [item.row() for item in items]
    for row in rows:
        if found := problems(row):
            raise RuntimeError(f"kvcache.tasks: item {row['id']}: {'; '.join(found)}")
    return pa.Table.from_pylist(rows)


def run(params: KvCacheParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    settings = params.tasks
    stream = haystack_words(inputs["udhr"], inputs["code"])
    if len(stream) < 2 * max(settings.train_lengths + settings.lengths):
        raise RuntimeError(f"kvcache.tasks: the haystack has only {len(stream)} words")
    splits = generate(settings, stream)
    tables = {split: validated_table(items) for split, items in splits.items()}
    counts = {
        split: dict(sorted(Counter(f"{i.kind}@{i.length}" for i in items).items()))
        for split, items in splits.items()
    }
    metrics = {
        "haystack_words": len(stream),
        "items": {split: len(items) for split, items in splits.items()},
        "validated": sum(len(items) for items in splits.values()),
        "cells": counts,
        "keys": key_pool(set(stream)),
        "values": value_pool(settings.value_range),
    }
    log.info(
        "kvcache.tasks: %s items from %d haystack words, all validated",
        metrics["items"],
        len(stream),
    )
    return {**tables, "metrics": metrics}


STAGE = Stage(
    name="kvcache.tasks",
    run=run,
    params_key="kvcache",
    params=("kvcache.tasks",),
    inputs={
        "udhr": "data/seed/udhr/udhr_eng.xml",
        "code": "data/seed/code/cpython-3.11.7-stdlib.parquet",
    },
    outputs={
        "train": f"{OUT}/train.parquet",
        "dev": f"{OUT}/dev.parquet",
        "test": f"{OUT}/test.parquet",
        "metrics": f"{OUT}/tasks_metrics.json",
    },
    headline=f"{OUT}/tasks_metrics.json:validated",
)

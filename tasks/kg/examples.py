"""kg.examples: (question, KG path text, candidate answer) → supported (1) / hallucinated (0).

Positives: each kept MultiHal path with its item's gold answer. Negatives, one per
positive: CoDEx's verified-false answer for the item when it has one (half the time),
else an entity of the same type as the gold answer (answers swapped within a type). Each
path is rendered in `languages_per_path` sampled label languages. The split (train / dev /
test) is by question: a hash of the normalised question text, so every path and answer of
a question, and every QA id that asks the same question (one subject and property with
several objects), land in one split. kg.detector chooses its epochs and threshold on dev
and reads test once; kg.eval answers test questions only.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from tasks.core.io import read_parquet
from tasks.core.stage import Output, Stage, StageContext
from tasks.kg import codex
from tasks.kg.params import KgParams
from tasks.kg.splits import questions_by_split, split_of

SCHEMA = pa.schema(
    [
        ("example_id", pa.string()),
        ("qa_id", pa.string()),
        ("split", pa.string()),
        ("language", pa.string()),
        ("hops", pa.int8()),
        ("question", pa.string()),
        ("path_text", pa.string()),
        ("answer", pa.string()),
        ("label", pa.int8()),
        ("kind", pa.string()),
    ]
)


class TypeSwapper:
    """Another entity of the gold answer's type (its display name: type label or QID)."""

    def __init__(self, codex_dir: Path) -> None:
        self.types = codex.entity_types(codex_dir)
        self.labels = {q: t["label"] for q, t in codex.type_terms(codex_dir).items()}
        facts = codex.read_triples(codex_dir / "train.txt")
        items = sorted({q for s, _, o in facts for q in (s, o)})
        self.by_type: dict[str, list[str]] = defaultdict(list)
        for item in items:
            for kind in self.types.get(item, []):
                self.by_type[kind].append(item)

    def name(self, qid: str) -> str:
        return self.labels.get(qid, qid)

    def swap(self, qid: str, rng: random.Random) -> str | None:
        pool = [q for kind in self.types.get(qid, []) for q in self.by_type[kind] if q != qid]
        return self.name(rng.choice(pool)) if pool else None


def build_examples(
    rows: list[dict[str, Any]], params: KgParams, swapper: TypeSwapper
) -> list[dict]:
    settings = params.examples
    rng = random.Random(settings.seed)
    languages = params.slice.languages
    examples = []
    for row in rows:
        if row["answer_type"] != "entity" or not row["objects"]:
            continue
        split = split_of(row["input"], settings.dev_fraction, settings.test_fraction)
        wrong = [a for a in row["incorrect_answers"] if a != row["output"]]
        if wrong and rng.random() < 0.5:
            negative, kind = rng.choice(wrong), "verified_false"
        else:
            negative, kind = swapper.swap(row["objects"][0], rng), "type_swap"
        for language in rng.sample(languages, min(settings.languages_per_path, len(languages))):
            base = {
                "qa_id": row["qa_id"],
                "split": split,
                "language": language,
                "hops": row["hops"],
                "question": row["input"],
                "path_text": row["trip_labels"][language],
            }
            examples.append(
                {
                    **base,
                    "example_id": f"{row['id']}-{language}-pos",
                    "answer": row["output"],
                    "label": 1,
                    "kind": "gold",
                }
            )
            if negative and negative != row["output"]:
                examples.append(
                    {
                        **base,
                        "example_id": f"{row['id']}-{language}-neg",
                        "answer": negative,
                        "label": 0,
                        "kind": kind,
                    }
                )
    return examples


def examples_summary(examples: list[dict]) -> dict[str, Any]:
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for example in examples:
        counts[example["split"]]["examples"] += 1
        counts[example["split"]][f"label_{example['label']}"] += 1
        counts[example["split"]][f"kind_{example['kind']}"] += 1
    questions = {s: len(keys) for s, keys in questions_by_split(examples).items()}
    return {
        s: {**dict(sorted(c.items())), "questions": questions[s]} for s, c in sorted(counts.items())
    }


def run(params: KgParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    rows = read_parquet(inputs["multihal"]).to_pylist()
    examples = build_examples(rows, params, TypeSwapper(inputs["codex"]))
    return {
        "examples": pa.Table.from_pylist(examples, schema=SCHEMA),
        "metrics": examples_summary(examples),
    }


STAGE = Stage(
    name="kg.examples",
    run=run,
    params_key="kg",
    params=("kg.examples", "kg.slice.languages"),
    inputs={"multihal": "data/processed/kg/multihal.parquet", "codex": "data/seed/codex-s"},
    outputs={
        "examples": "data/processed/kg/detector_examples.parquet",
        "metrics": Output.metrics("data/processed/kg/detector_examples_metrics.json"),
    },
    headline="data/processed/kg/detector_examples_metrics.json:train.examples",
)

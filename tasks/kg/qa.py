"""kg.qa: QA items in MultiHal's columns with their subject and object entities linked.

Embedded default: CoDEx-S questions (QIDs attached) and a SimpleQA sample (linked by the
configured linker); `kg.qa.sources` adds any of MultiHal's sources from the hub or files.
Objects are QIDs for entity answers and normalised values for date / number / rank ones.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from tasks.core.progress import get_logger
from tasks.core.stage import Output, Stage, StageContext
from tasks.kg import endpoint, qa_sources
from tasks.kg.linking import Linker, make_linker
from tasks.kg.params import KgParams

log = get_logger("paperline.kg.qa")
LIST_COLUMNS = ("optional_output", "incorrect_answers", "subjects", "objects")


def link_row(row: dict[str, Any], linker: Linker, max_objects: int) -> dict[str, Any]:
    """Fill subjects / objects where the source did not annotate them."""
    if row["subjects"] and row["objects"]:
        return {**row, "linked_by": "annotation"}
    subjects = linker.link(row["input"])
    if row["answer_type"] == "entity":
        answers = [row["output"], *row["optional_output"][:2]]
        objects = [q for a in answers if a for q in linker.link(a)]
    else:
        value = qa_sources.literal_object(row["answer_type"], row["output"])
        objects = [value] if value else []
    objects = [o for o in dict.fromkeys(objects) if o not in subjects][:max_objects]
    return {**row, "subjects": subjects, "objects": objects, "linked_by": linker.name}


def qa_table(rows: list[dict[str, Any]]) -> pa.Table:
    columns = [*qa_sources.QA_COLUMNS, "subjects", "objects", "linked_by"]
    schema = pa.schema(
        [(c, pa.list_(pa.string()) if c in LIST_COLUMNS else pa.string()) for c in columns]
    )
    return pa.Table.from_pylist([{c: r[c] for c in columns} for r in rows], schema=schema)


def qa_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by_source: dict[str, Counter] = {}
    for row in rows:
        counts = by_source.setdefault(row["source_dataset"], Counter())
        counts["items"] += 1
        counts["linked"] += bool(row["subjects"] and row["objects"])
        counts[f"answer_type_{row['answer_type']}"] += 1
    return {
        "items": len(rows),
        "per_source": {k: dict(sorted(v.items())) for k, v in sorted(by_source.items())},
    }


def run(params: KgParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    rows = qa_sources.codex_questions(params.qa, inputs["codex"], inputs["multihal"])
    if params.qa.simpleqa_rows:
        rows += qa_sources.simpleqa_sample(
            inputs["simpleqa"], params.qa.simpleqa_rows, params.qa.seed
        )
    for source in params.qa.sources:
        rows += list(qa_sources.load_source(source))
    with endpoint.open_client(params.sparql, ctx.runtime, ctx.root) as client:
        linker = make_linker(params.linking, client)
        rows = [link_row(row, linker, params.linking.max_objects) for row in rows]
    summary = qa_summary(rows)
    log.info("kg.qa: %d items, %s", len(rows), summary["per_source"])
    return {"qa": qa_table(rows), "metrics": summary}


STAGE = Stage(
    name="kg.qa",
    run=run,
    params_key="kg",
    params=("kg.qa", "kg.linking", "kg.sparql"),
    inputs={
        "codex": "data/seed/codex-s",
        "multihal": "data/seed/multihal",
        "simpleqa": "data/seed/multihal/simple_qa_test_set.csv",
        "slice": endpoint.SLICE,
    },
    outputs={
        "qa": "data/interim/kg/qa.parquet",
        "metrics": Output.metrics("data/interim/kg/qa_metrics.json"),
    },
    headline="data/interim/kg/qa_metrics.json:items",
)

"""kg.judge: MultiHal's pruning; kept paths → data/processed/kg/multihal.parquet.

Each QA item's paths go through `judges.choose_paths` (top-k twice, ∩, fill) and a 1–5
score; paths scored ≥ `kg.judge.min_score` are kept, with `judged_by` and `judged_score`.
The output is checked against `multihal_schema` before it is written.
"""

from __future__ import annotations

import random
import re
from collections import Counter, defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
from tqdm.auto import tqdm

from tasks.core.errors import InputError
from tasks.core.io import read_parquet
from tasks.core.stage import Output, Stage, StageContext
from tasks.kg import codex
from tasks.kg.judges import Candidate, PathJudge, choose_paths, make_judge
from tasks.kg.params import KgParams

PID_SHOWN = re.compile(r"\bP\d+\b")  # a property rendered as its id: no label there


def multihal_schema(paths: pa.Schema) -> pa.Schema:
    return paths.append(pa.field("judged_by", pa.string())).append(
        pa.field("judged_score", pa.int8())
    )


def validate_multihal(table: pa.Table, paths: pa.Schema, min_score: int, where: str) -> None:
    """MultiHal's columns and types, and each row's path shape and score."""
    expected = multihal_schema(paths)
    if not table.schema.equals(expected):
        missing = set(expected.names) - set(table.schema.names)
        raise InputError(f"{where}: schema differs from MultiHal's (missing {sorted(missing)})")
    for n, row in enumerate(table.select(["id", "path", "hops", "judged_score"]).to_pylist()):
        if len(row["path"]) != 2 * row["hops"] + 1 or not min_score <= row["judged_score"] <= 5:
            raise InputError(f"{where}: row {n} ({row['id']}): bad path length or score")


def judge_rows(rows: list[dict[str, Any]], judge: PathJudge, params: KgParams) -> list[dict]:
    by_item: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_item[row["qa_id"]].append(row)
    rng = random.Random(params.judge.seed)
    judged = []
    for qa_id in tqdm(sorted(by_item), desc="judging", unit="item"):
        group = by_item[qa_id]
        question, answer = group[0]["input"], group[0]["output"]
        candidates = [Candidate(tuple(r["path"]), r["trip_labels"]["en"]) for r in group]
        for i in choose_paths(judge, question, answer, candidates, params.judge.top_paths, rng):
            score = judge.score(question, answer, candidates[i])
            judged.append({**group[i], "judged_by": judge.name, "judged_score": score})
    return judged


def judge_summary(paths: list[dict], kept: list[dict], languages: list[str]) -> dict[str, Any]:
    def count(rows: list[dict], key: str) -> dict[str, int]:
        return dict(sorted(Counter(str(r[key]) for r in rows).items()))

    labelled = {
        lang: sum(not PID_SHOWN.search(r["trip_labels"][lang]) for r in kept) for lang in languages
    }
    return {
        "paths_in": len(paths),
        "paths_kept": len(kept),
        "items_with_kept_paths": len({r["qa_id"] for r in kept}),
        "mined_per_source": count(paths, "source_dataset"),
        "kept_per_source": count(kept, "source_dataset"),
        "mined_per_hops": count(paths, "hops"),
        "kept_per_hops": count(kept, "hops"),
        "kept_with_property_labels_per_language": labelled,
        "score_histogram": count(kept, "judged_score"),
    }


def run(params: KgParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    paths = read_parquet(inputs["paths"])
    rows = paths.to_pylist()
    english = codex.wikidata_property_labels(inputs["multihal"])
    judged = judge_rows(rows, make_judge(params.judge, english), params)
    kept = [r for r in judged if r["judged_score"] >= params.judge.min_score]
    table = pa.Table.from_pylist(kept, schema=multihal_schema(paths.schema))
    validate_multihal(table, paths.schema, params.judge.min_score, "kg.judge output")
    return {"multihal": table, "metrics": judge_summary(rows, kept, params.slice.languages)}


STAGE = Stage(
    name="kg.judge",
    run=run,
    params_key="kg",
    params=("kg.judge", "kg.slice.languages"),
    inputs={"paths": "data/interim/kg/paths.parquet", "multihal": "data/seed/multihal"},
    outputs={
        "multihal": "data/processed/kg/multihal.parquet",
        "metrics": Output.metrics("data/processed/kg/metrics.json"),
    },
    headline="data/processed/kg/metrics.json:paths_kept",
)

"""kg.mine: 1- and 2-hop Wikidata paths for every linked QA item, filtered and labelled.

One row per (QA item, path). For entity answers the reversed pair is mined too (MultiHal
does so for answer type "other"). `trip_labels` holds the path in every slice language;
`path_labels` the same element by element; ids without a label stay ids and are listed in
`unlabelled`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from tasks.core.io import read_parquet
from tasks.core.progress import get_logger
from tasks.core.stage import Output, Stage, StageContext
from tasks.core.telemetry import record_telemetry
from tasks.kg import codex, endpoint
from tasks.kg.labels import fetch_labels, render, render_parts, unlabelled
from tasks.kg.miner import KgPath, PropertyLists, mine_paths
from tasks.kg.params import KgParams
from tasks.kg.path_filter import PathFilter
from tasks.kg.sparql import SparqlClient

log = get_logger("paperline.kg.mine")
Key = tuple[str, str, str]  # (answer type, subject, object)


def property_lists(multihal: Path) -> PropertyLists:
    return PropertyLists(
        frozenset(codex.time_properties(multihal)), frozenset(codex.numerical_properties(multihal))
    )


def item_pairs(row: Mapping[str, Any]) -> list[Key]:
    kind = row["answer_type"]
    pairs = [(kind, s, o) for s in row["subjects"] for o in row["objects"] if s != o]
    if kind == "entity":
        pairs += [(kind, o, s) for _, s, o in list(pairs)]
    return pairs


def paths_for_items(
    client: SparqlClient,
    items: list[dict[str, Any]],
    params: KgParams,
    multihal: Path,
    use_filter: bool = True,
    progress: bool = True,
) -> tuple[list[list[KgPath]], Counter]:
    """Each item's paths (mined, filtered, deduped), and counts before/after the filter."""
    keys = sorted({key for item in items for key in item_pairs(item)})
    mined = mine_paths(
        client,
        keys,
        property_lists(multihal),
        params.mine.max_hops,
        params.mine.stop_at_first_hit,
        progress,
    )
    path_filter = PathFilter.from_resources(multihal, params.mine.removed_properties)
    counts: Counter = Counter()
    result = []
    for item in items:
        paths = [p for key in item_pairs(item) for p in mined.get(key, [])]
        counts["mined"] += len(paths)
        kept = path_filter.apply(paths) if use_filter else list(dict.fromkeys(paths))
        counts["kept"] += len(kept)
        result.append(kept)
    return result, counts


def path_rows(
    items: list[dict[str, Any]], paths: list[list[KgPath]], labels: dict, languages: list[str]
) -> list[dict[str, Any]]:
    rows = []
    for item, item_paths in zip(items, paths, strict=True):
        for n, path in enumerate(sorted(item_paths, key=lambda p: (len(p), p))):
            rows.append(
                {
                    **item,
                    "id": f"{item['id']}-{n:03d}",
                    "qa_id": item["id"],
                    "path": list(path),
                    "hops": len(path) // 2,
                    "responses": " ".join(path),
                    "trip_labels": {lang: render(path, labels, lang) for lang in languages},
                    "path_labels": {lang: render_parts(path, labels, lang) for lang in languages},
                    "unlabelled": unlabelled(path, labels),
                }
            )
    return rows


def paths_schema(qa: pa.Schema, languages: list[str]) -> pa.Schema:
    labels = pa.struct([(lang, pa.string()) for lang in languages])
    parts = pa.struct([(lang, pa.list_(pa.string())) for lang in languages])
    return pa.schema(
        [
            *qa,
            ("qa_id", pa.string()),
            ("path", pa.list_(pa.string())),
            ("hops", pa.int8()),
            ("responses", pa.string()),
            ("trip_labels", labels),
            ("path_labels", parts),
            ("unlabelled", pa.list_(pa.string())),
        ]
    )


def mine_summary(
    rows: list[dict[str, Any]], counts: Counter, items: list[dict], stats: dict
) -> dict:
    per_source: dict[str, Counter] = {}
    for item in items:
        per_source.setdefault(item["source_dataset"], Counter())["items"] += 1
    with_paths = {r["qa_id"] for r in rows}
    for item in items:
        per_source[item["source_dataset"]]["items_with_paths"] += item["id"] in with_paths
    for row in rows:
        per_source[row["source_dataset"]][f"paths_{row['hops']}_hop"] += 1
    return {
        "paths_mined": counts["mined"],
        "paths_after_filter": counts["kept"],
        "per_source": {k: dict(sorted(v.items())) for k, v in sorted(per_source.items())},
        "queries": stats["queries"],  # hits and round trips depend on the cache: telemetry
    }


def run(params: KgParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    qa = read_parquet(inputs["qa"])
    items = qa.to_pylist()
    languages = params.slice.languages
    with endpoint.open_client(params.sparql, ctx.runtime, ctx.root) as client:
        paths, counts = paths_for_items(client, items, params, inputs["multihal"])
        ids = {e for item_paths in paths for p in item_paths for e in p}
        labels = fetch_labels(client, ids, languages)
        stats = client.stats.as_dict()
    rows = path_rows(items, paths, labels, languages)
    table = pa.Table.from_pylist(rows, schema=paths_schema(qa.schema, languages))
    record_telemetry(STAGE.name, stats, ctx.root)
    log.info("kg.mine: %d paths for %d items; queries %s", len(rows), len(items), stats)
    return {"paths": table, "metrics": mine_summary(rows, counts, items, stats)}


STAGE = Stage(
    name="kg.mine",
    run=run,
    params_key="kg",
    params=("kg.mine", "kg.slice.languages", "kg.sparql"),
    inputs={
        "qa": "data/interim/kg/qa.parquet",
        "multihal": "data/seed/multihal",
        "slice": endpoint.SLICE,
    },
    outputs={
        "paths": "data/interim/kg/paths.parquet",
        "metrics": Output.metrics("data/interim/kg/mine_metrics.json"),
    },
    headline="data/interim/kg/mine_metrics.json:paths_mined",
)

"""kg.slice: CoDEx-S → a Wikidata slice in Wikidata's own IRIs, as N-Triples.

`wd:Q… wdt:P… wd:Q…` for every train (and valid) triple, `wdt:P31` from entity2types,
`rdfs:label` / `schema:description` for the properties in every language CoDEx has and for
the type entities (English). Items other than types have no label offline (CoDEx ships
none); downstream code shows their QID and says so.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyoxigraph as ox

from tasks.core import rdf
from tasks.core.stage import Output, Stage, StageContext
from tasks.kg import codex
from tasks.kg.params import SliceParams


def slice_triples(params: SliceParams, codex_dir: Path, multihal_dir: Path) -> list[ox.Triple]:
    files = ["train.txt", "valid.txt"] if params.include_valid else ["train.txt"]
    facts = {t for name in files for t in codex.read_triples(codex_dir / name)}
    items = {s for s, _, _ in facts} | {o for _, _, o in facts}
    types = codex.entity_types(codex_dir)  # covers all of CoDEx: keep the slice's items
    facts |= {(item, rdf.INSTANCE_OF, kind) for item in items for kind in types.get(item, [])}
    used_types = {o for _, p, o in facts if p == rdf.INSTANCE_OF}
    triples = [ox.Triple(rdf.entity(s), rdf.prop(p), rdf.entity(o)) for s, p, o in facts]
    used_props = {p for _, p, _ in facts}
    english = codex.wikidata_property_labels(multihal_dir)
    for language in params.languages:
        terms = codex.property_terms(codex_dir, language)
        for pid in used_props:
            term = terms.get(pid, {})
            label = term.get("label") or (english.get(pid) if language == "en" else None)
            if label:
                triples.append(
                    ox.Triple(rdf.entity(pid), rdf.RDFS_LABEL, rdf.literal(label, language))
                )
            if term.get("description"):
                description = rdf.literal(term["description"], language)
                triples.append(ox.Triple(rdf.entity(pid), rdf.SCHEMA_DESCRIPTION, description))
    for qid, term in codex.type_terms(codex_dir).items():
        if qid not in used_types and qid not in items:
            continue
        node = rdf.entity(qid)
        triples.append(ox.Triple(node, rdf.RDFS_LABEL, rdf.literal(term["label"], "en")))
        if term.get("description"):
            description = rdf.literal(term["description"], "en")
            triples.append(ox.Triple(node, rdf.SCHEMA_DESCRIPTION, description))
    return sorted(set(triples), key=str)


def to_ntriples(triples: list[ox.Triple]) -> bytes:
    buffer = io.BytesIO()
    ox.serialize(triples, buffer, format=ox.RdfFormat.N_TRIPLES)
    return buffer.getvalue()


def slice_summary(triples: list[ox.Triple]) -> dict[str, Any]:
    predicates = Counter(t.predicate.value for t in triples)
    labels = Counter(t.object.language for t in triples if t.predicate == rdf.RDFS_LABEL)
    facts = [t for t in triples if t.predicate.value.startswith(rdf.WDT)]
    items = {t.subject.value for t in facts} | {t.object.value for t in facts}
    return {
        "triples": len(triples),
        "facts": len(facts),
        "items": len(items),
        "properties": sum(1 for p in predicates if p.startswith(rdf.WDT)),
        "labels_per_language": dict(sorted(labels.items())),
    }


def run(params: SliceParams, inputs: Mapping[str, Path], ctx: StageContext) -> dict[str, Any]:
    triples = slice_triples(params, inputs["codex"], inputs["multihal"])
    return {"slice": to_ntriples(triples), "metrics": slice_summary(triples)}


STAGE = Stage(
    name="kg.slice",
    run=run,
    params_key="kg.slice",
    inputs={"codex": "data/seed/codex-s", "multihal": "data/seed/multihal"},
    outputs={
        "slice": "data/interim/kg/wikidata_slice.nt",
        "metrics": Output.metrics("data/interim/kg/slice_metrics.json"),
    },
    headline="data/interim/kg/slice_metrics.json:triples",
)

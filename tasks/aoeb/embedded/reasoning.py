"""EmbeddedMultiHopRetrieval: the fact sheets a two-hop question needs (MuSiQue, FRAMES).

Material: the Wikidata slice (data/interim/kg/wikidata_slice.nt). A document is one entity's
fact sheet ("<entity>: <property> <objects>; …"). A question follows a path
e1 -p1-> e2 -p2-> e3 in which e1 has one p1 and e2 one p2, so the answer is unique:
"What is the <p2> of the <p1> of <e1>?". Answering needs two sheets: e2's holds the answer
(relevance 2), e1's holds the bridge to e2 (relevance 1); nDCG rewards ranking the answer
sheet first, recall needs both. Each e1 asks one question and each bridge e2 serves a few;
splits (train, dev, test) are by bridge entity, and a train question judging any sheet a
dev or test question judges is dropped. Sheets of other entities fill the corpus as distractors.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydantic import Field

from tasks.aoeb.benchmark import RetrievalTask, TaskDeclaration
from tasks.aoeb.embedded.facts import FactGraph, read_facts
from tasks.aoeb.embedded.splits import (
    SplitParams,
    judged_documents,
    sample,
    split_qrels,
    split_query_ids,
)

Path2 = tuple[str, str, str, str, str]  # e1, p1, e2, p2, e3
ANSWER, BRIDGE = 2, 1  # relevance of e2's sheet (holds the answer) and of e1's
PREPOSITIONS = {"by", "of", "at", "after", "in", "to", "from", "with", "for", "on"}
ARTICLES = {"member of": "a "}  # "… is a member of"


class MultiHopTaskParams(SplitParams):
    """The multi-hop task: which paths make questions, and how large the corpus is."""

    max_train_queries: int = Field(default=150, ge=0, description="train questions, at most")
    max_questions_per_bridge: int = Field(default=3, ge=1, description="per middle entity")
    max_objects_per_property: int = Field(default=8, ge=1, description="in a fact sheet")
    max_documents: int = Field(
        default=500, ge=1, description="distractor sheets fill the corpus up to this"
    )
    language: str = Field(default="en", description="of the labels used")


def two_hop_paths(graph: FactGraph) -> list[Path2]:
    """Every e1 -p1-> e2 -p2-> e3 with one p1 on e1, one p2 on e2, and three distinct
    entities (instance-of is no hop); sorted."""
    paths = []
    for e1 in graph.facts:
        for p1, e2s in graph.properties(e1).items():
            if len(e2s) != 1 or e2s[0] == e1 or e2s[0] not in graph.facts:
                continue
            e2 = e2s[0]
            for p2, e3s in graph.properties(e2).items():
                if len(e3s) == 1 and e3s[0] not in (e1, e2):
                    paths.append((e1, p1, e2, p2, e3s[0]))
    return sorted(paths)


def choose_questions(paths: list[Path2], per_bridge: int, seed: int) -> list[Path2]:
    """One path per e1, at most `per_bridge` per e2, picked in a seeded order."""
    chosen: dict[str, Path2] = {}
    per_e2: dict[str, int] = {}
    for i in np.random.default_rng(seed).permutation(len(paths)):
        e1, _, e2, _, _ = paths[i]
        if e1 in chosen or per_e2.get(e2, 0) >= per_bridge:
            continue
        chosen[e1] = paths[i]
        per_e2[e2] = per_e2.get(e2, 0) + 1
    return [chosen[e1] for e1 in sorted(chosen)]


def relational(label: str) -> bool:
    """A label that reads as a relation ("influenced by", "member of"), not a noun."""
    return label.rsplit(" ", 1)[-1] in PREPOSITIONS


def question(graph: FactGraph, path: Path2) -> str:
    """ "What is the <p2> of the <p1> of <e1>?", relations phrased as such: "What is the
    place of burial of the entity Q1 is influenced by?", "What is the country of Q1 a
    member of?"."""
    e1, p1, _, p2, _ = path
    label1, label2 = graph.name(p1), graph.name(p2)
    if relational(label1):
        bridge = f"the entity {graph.name(e1)} is {ARTICLES.get(label1, '')}{label1}"
    else:
        bridge = f"the {label1} of {graph.name(e1)}"
    if relational(label2):
        return f"What is {bridge} {ARTICLES.get(label2, '')}{label2}?"
    return f"What is the {label2} of {bridge}?"


DECLARATION = TaskDeclaration(
    name="EmbeddedMultiHopRetrieval",
    capability="reasoning",
    description="Retrieve the entity fact sheets needed to answer a two-hop question.",
    source="data/interim/kg/wikidata_slice.nt (CoDEx-S facts in Wikidata IRIs)",
    splits=("train", "dev", "test"),
    query_instruction="Given a multi-hop question, retrieve the documents needed to answer it",
)


def reasoning_task(slice_nt: Path, settings: MultiHopTaskParams) -> RetrievalTask:
    """The multi-hop task from the Wikidata slice at `slice_nt`."""
    graph = read_facts(slice_nt, settings.language)
    paths = [  # two relations in a row make no readable question
        path
        for path in two_hop_paths(graph)
        if not (relational(graph.name(path[1])) and relational(graph.name(path[3])))
    ]
    chosen = choose_questions(paths, settings.max_questions_per_bridge, settings.seed)
    by_qid = {f"q:{e1}:{p1}:{p2}": (e1, p1, e2, p2, e3) for e1, p1, e2, p2, e3 in chosen}
    judgments = {qid: {e1: BRIDGE, e2: ANSWER} for qid, (e1, _, e2, _, _) in by_qid.items()}
    group_of = {qid: path[2] for qid, path in by_qid.items()}
    qrels = split_qrels(judgments, group_of, settings, str(slice_nt))
    judged = judged_documents(qrels)
    room = max(0, settings.max_documents - len(judged))
    spare = [e for e in graph.facts if e not in judged and graph.properties(e)]
    entities = sorted(judged | set(sample(spare, room, settings.seed + 2)))
    corpus = {
        e: {
            "title": graph.described(e),
            "text": graph.fact_sheet(e, settings.max_objects_per_property),
        }
        for e in entities
    }
    kept = split_query_ids(qrels)
    queries = {qid: question(graph, by_qid[qid]) for qid in kept}
    return RetrievalTask(DECLARATION, corpus, queries, qrels)

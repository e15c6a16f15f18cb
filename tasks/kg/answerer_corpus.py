"""The answerer's training text and the two strata of held-out questions it is tested on.

Training text comes from the kg area's own data, train-split questions only (the split of
kg.examples, by question): each train item's best path as facts ("Fact: S P O", English
labels, one document per fact) and its question → answer pair, shown with the path as
context (in a sampled label language) for `context_fraction` of the items and without
for the rest, so the model learns both to recall and to read. Reading a few hundred
questions teaches a small LM their answers, not how to read; so `reading_pairs` more
question → answer pairs with their path are templated (as kg.qa templates its questions)
from CoDEx-S train triples and 2-hop chains of them: many distinct answers, each only
reachable through the path. None of them asks a dev or test question or holds a held-out
fact.

The test questions are split by a hash of the question into two strata:
- `seen`: the facts of its best path are added to the training text as facts (never its
  question): a model can answer from memory.
- `held_out`: no fact of any of its paths is in the training text, neither as a fact nor
  inside a train item's path (such train items are dropped): the answer is reachable only
  through the path given as context.
A `seen` question some of whose facts a held-out question shares is `partial` and left out
of both strata.
"""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tasks.kg.splits import question_key

Fact = tuple[str, str, str]  # (subject, property, object) ids or values, as in a path
STRATA = ("seen", "held_out")
FACT, QA, QA_PATH, READING = "fact", "qa", "qa_path", "reading"  # kinds of document
ANSWER_MARK = "Answer:"


def best_paths(rows: list[dict[str, Any]], limit: int | None = None) -> list[dict[str, Any]]:
    """Each QA item's best path (highest judged score, fewest hops, then id), by qa_id."""
    best: dict[str, dict] = {}
    for row in rows:
        current = best.get(row["qa_id"])
        if current is None or (-row["judged_score"], row["hops"], row["id"]) < (
            -current["judged_score"],
            current["hops"],
            current["id"],
        ):
            best[row["qa_id"]] = row
    chosen = [best[k] for k in sorted(best)]
    return chosen[:limit] if limit else chosen


def path_facts(path: Sequence[str]) -> list[Fact]:
    """The triples of a path S P O [P O]."""
    return [(path[i], path[i + 1], path[i + 2]) for i in range(0, len(path) - 2, 2)]


def fact_id(fact: Fact) -> str:
    return " ".join(fact)


def assigned_stratum(question: str, held_out_fraction: float) -> str:
    """`held_out` or `seen` from a hash of the question (salted apart from the split's)."""
    digest = hashlib.sha1(f"answerer:{question_key(question)}".encode()).hexdigest()
    return "held_out" if int(digest[:8], 16) / 0xFFFFFFFF < held_out_fraction else "seen"


def prompt(question: str, context: str | None) -> str:
    """How the answerer is asked: the path as context (or none), the question, "Answer:"."""
    head = f"Path: {' '.join(context.split())}\n" if context else ""
    return f"{head}Question: {' '.join(question.split())}\n{ANSWER_MARK}"


def qa_document(question: str, answer: str, context: str | None) -> str:
    return f"{prompt(question, context)} {' '.join(answer.split())}"


def fact_document(parts: Sequence[str], start: int) -> str:
    return "Fact: " + " ".join(" ".join(p.split()) for p in parts[start : start + 3])


@dataclass(frozen=True)
class Vocabulary:
    """How the slice names things: property labels per language, entity display names."""

    properties: Mapping[str, Mapping[str, str]]  # PID → language → label
    entities: Mapping[str, str]  # QID → name (type labels; other items stay QIDs)

    def entity(self, qid: str) -> str:
        return self.entities.get(qid, qid)

    def prop(self, pid: str, language: str, source: str = "en") -> str:
        labels = self.properties.get(pid, {})
        return labels.get(language) or labels.get(source) or pid


def reading_documents(
    triples: Sequence[Fact],
    vocabulary: Vocabulary,
    count: int,
    excluded: set[Fact],
    asked: set[str],
    languages: Sequence[str],
    rng: random.Random,
) -> list[dict[str, Any]]:
    """`count` templated question → answer pairs with their 1- or 2-hop path as context
    (half each), none asking a question in `asked` or using a fact in `excluded`."""
    usable = [t for t in triples if t not in excluded]
    outgoing: dict[str, list[Fact]] = defaultdict(list)
    for triple in usable:
        outgoing[triple[0]].append(triple)
    documents: list[dict[str, Any]] = []
    attempts = 0
    while usable and len(documents) < count and attempts < 20 * count:
        attempts += 1
        first = rng.choice(usable)
        chain = [first]
        if rng.random() < 0.5 and outgoing[first[2]]:
            second = rng.choice(outgoing[first[2]])
            if second[2] != first[0]:
                chain.append(second)
        props = [vocabulary.prop(t[1], "en") for t in chain]
        question = "What is the " + " of the ".join(reversed(props))
        question += f" of {vocabulary.entity(first[0])}?"
        if question_key(question) in asked:
            continue
        language = rng.choice(list(languages))
        path = [vocabulary.entity(first[0])]
        for triple in chain:
            path += [vocabulary.prop(triple[1], language), vocabulary.entity(triple[2])]
        documents.append(
            {
                "kind": READING,
                "qa_id": "",
                "question": question_key(question),
                "facts": [fact_id(t) for t in chain],
                "text": qa_document(question, path[-1], " ".join(path)),
            }
        )
    return documents


def build_corpus(
    rows: list[dict[str, Any]],
    splits: dict[str, set[str]],
    *,
    held_out_fraction: float,
    context_fraction: float,
    languages: Sequence[str],
    seed: int,
    source_language: str = "en",
    triples: Sequence[Fact] = (),
    vocabulary: Vocabulary | None = None,
    reading_pairs: int = 0,
) -> tuple[list[dict[str, Any]], dict[str, str], dict[str, int]]:
    """(training documents, test question key → stratum, counts). `rows`: kg.judge's
    multihal rows; `splits`: each split's question keys; `triples` (with `vocabulary`):
    the slice's train facts that `reading_pairs` templated reading pairs are drawn from."""
    rng = random.Random(seed)
    by_key: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_key[question_key(row["input"])].append(row)
    test = sorted(k for k in by_key if k in splits["test"])
    assigned = {k: assigned_stratum(k, held_out_fraction) for k in test}
    held_out_facts = {
        f
        for k in test
        if assigned[k] == "held_out"
        for row in by_key[k]
        for f in path_facts(row["path"])
    }
    documents: list[dict[str, Any]] = []
    seen_facts: set[Fact] = set()
    counts: dict[str, int] = defaultdict(int)

    def add_facts(item: dict[str, Any]) -> None:
        parts = item["path_labels"][source_language]
        for n, fact in enumerate(path_facts(item["path"])):
            if fact in held_out_facts or fact in seen_facts:
                continue
            seen_facts.add(fact)
            documents.append(
                {
                    "kind": FACT,
                    "qa_id": item["qa_id"],
                    "question": "",
                    "facts": [fact_id(fact)],
                    "text": fact_document(parts, 2 * n),
                }
            )

    train_rows = [r for k in sorted(by_key) if k in splits["train"] for r in by_key[k]]
    leaking = {
        r["qa_id"] for r in train_rows if any(f in held_out_facts for f in path_facts(r["path"]))
    }
    counts["train_items_dropped_sharing_held_out_facts"] = len(leaking)
    for item in best_paths([r for r in train_rows if r["qa_id"] not in leaking]):
        add_facts(item)
        with_path = rng.random() < context_fraction
        language = rng.choice(list(languages))
        context = item["trip_labels"][language] if with_path else None
        documents.append(
            {
                "kind": QA_PATH if with_path else QA,
                "qa_id": item["qa_id"],
                "question": question_key(item["input"]),
                "facts": [fact_id(f) for f in path_facts(item["path"])] if with_path else [],
                "text": qa_document(item["input"], item["output"], context),
            }
        )
    for key in test:
        if assigned[key] == "seen":
            for item in best_paths(by_key[key]):
                add_facts(item)
    if reading_pairs and vocabulary is not None:
        documents += reading_documents(
            triples,
            vocabulary,
            reading_pairs,
            held_out_facts,
            splits["dev"] | splits["test"],
            languages,
            rng,
        )
    trained = {f for d in documents for f in d["facts"]}
    strata = {}
    for key in test:
        facts = {fact_id(f) for item in best_paths(by_key[key]) for f in path_facts(item["path"])}
        if assigned[key] == "held_out":
            strata[key] = "held_out"
        else:
            strata[key] = "seen" if facts <= trained else "partial"
    for document in documents:
        counts[f"documents_{document['kind']}"] += 1
    for stratum in strata.values():
        counts[f"test_questions_{stratum}"] += 1
    return documents, strata, dict(sorted(counts.items()))

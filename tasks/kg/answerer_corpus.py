"""The answerer's training text and the two strata of held-out questions it is tested on.

Training text comes from the kg area's own data, train-split questions only (the split of
kg.examples, by question): each train item's best path as facts ("Fact: S P O", English
labels, one document per fact) and its question → answer pair, shown with the path as
context (in a sampled label language) for `context_fraction` of the items and without
for the rest, so the model learns both to recall and to read.

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
from collections.abc import Sequence
from typing import Any

from tasks.kg.splits import question_key

Fact = tuple[str, str, str]  # (subject, property, object) ids or values, as in a path
STRATA = ("seen", "held_out")
FACT, QA, QA_PATH = "fact", "qa", "qa_path"  # kinds of training document
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


def build_corpus(
    rows: list[dict[str, Any]],
    splits: dict[str, set[str]],
    *,
    held_out_fraction: float,
    context_fraction: float,
    languages: Sequence[str],
    seed: int,
    source_language: str = "en",
) -> tuple[list[dict[str, Any]], dict[str, str], dict[str, int]]:
    """(training documents, test question key → stratum, counts). `rows`: kg.judge's
    multihal rows; `splits`: each split's question keys."""
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

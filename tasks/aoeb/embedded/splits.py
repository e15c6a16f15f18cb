"""Seeded train/test splits by group: no group, and no relevant document, is in both splits."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
from pydantic import Field

from tasks.core.errors import InputError
from tasks.core.strict_model import StrictModel

Judgments = dict[str, dict[str, int]]  # query id -> corpus id -> relevance


class SplitParams(StrictModel):
    """How an embedded task's queries are split and capped (every builder's settings has it)."""

    seed: int = Field(default=0, description="the split, sampling and phrasing seed")
    test_fraction: float = Field(default=0.4, gt=0, lt=1, description="groups held out")
    max_test_queries: int = Field(default=150, ge=1, description="test queries kept, at most")
    max_train_queries: int = Field(default=200, ge=0, description="train queries, at most")


def assign_groups(groups: Iterable[str], test_fraction: float, seed: int) -> dict[str, str]:
    """Group -> "train" | "test": the sorted groups shuffled by `seed`, the first share tested."""
    ordered = sorted(set(groups))
    order = np.random.default_rng(seed).permutation(len(ordered))
    n_test = min(len(ordered) - 1, max(1, round(len(ordered) * test_fraction)))
    return {ordered[i]: "test" if rank < n_test else "train" for rank, i in enumerate(order)}


def sample(ids: Iterable[str], limit: int, seed: int) -> list[str]:
    """At most `limit` of `ids`, chosen by `seed`, in sorted order."""
    ordered = sorted(ids)
    if len(ordered) <= limit:
        return ordered
    chosen = np.random.default_rng(seed).choice(len(ordered), size=limit, replace=False)
    return sorted(ordered[i] for i in chosen)


def split_qrels(
    judgments: Mapping[str, Mapping[str, int]],
    group_of: Mapping[str, str],
    params: SplitParams,
    source: str,
) -> dict[str, Judgments]:
    """{"train", "test"} qrels: queries split by their group, capped, and the train queries
    that judge a document some test query judges dropped (no test target is trained on)."""
    if len(set(group_of.values())) < 2:
        raise InputError(
            f"{source}: {len(judgments)} usable queries in {len(set(group_of.values()))} "
            "group(s); a train/test split needs at least 2 groups: give it more material"
        )
    split_of = assign_groups(group_of.values(), params.test_fraction, params.seed)
    by_split: dict[str, list[str]] = {"train": [], "test": []}
    for qid in judgments:
        by_split[split_of[group_of[qid]]].append(qid)
    test = sample(by_split["test"], params.max_test_queries, params.seed)
    test_docs = {doc for qid in test for doc in judgments[qid]}
    clean = [qid for qid in by_split["train"] if test_docs.isdisjoint(judgments[qid])]
    train = sample(clean, params.max_train_queries, params.seed + 1)
    return {
        "train": {qid: dict(sorted(judgments[qid].items())) for qid in train},
        "test": {qid: dict(sorted(judgments[qid].items())) for qid in test},
    }


def judged_documents(qrels: Mapping[str, Judgments]) -> set[str]:
    return {doc for judged in qrels.values() for docs in judged.values() for doc in docs}


def judged_queries(qrels: Mapping[str, Judgments]) -> set[str]:
    return {qid for judged in qrels.values() for qid in judged}

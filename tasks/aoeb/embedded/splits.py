"""Seeded train/dev/test splits by group: no group, and no relevant document, is in two
splits. Test is what aoeb.evaluate reports; dev is where choices are made (the fine-tune's
checkpoint); train feeds the fine-tune."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
from pydantic import Field, model_validator

from tasks.core.errors import InputError
from tasks.core.strict_model import StrictModel

Judgments = dict[str, dict[str, int]]  # query id -> corpus id -> relevance
SPLITS = ("train", "dev", "test")


class SplitParams(StrictModel):
    """How an embedded task's queries are split and capped (every builder's settings has it)."""

    seed: int = Field(default=0, description="the split, sampling and phrasing seed")
    test_fraction: float = Field(default=0.4, gt=0, lt=1, description="groups held out for test")
    dev_fraction: float = Field(default=0.2, gt=0, lt=1, description="groups held out for dev")
    max_test_queries: int = Field(default=150, ge=1, description="test queries kept, at most")
    max_dev_queries: int = Field(default=60, ge=1, description="dev queries kept, at most")
    max_train_queries: int = Field(default=200, ge=0, description="train queries, at most")

    @model_validator(mode="after")
    def _room_for_train(self) -> SplitParams:
        if self.test_fraction + self.dev_fraction >= 1:
            raise ValueError(
                f"test_fraction {self.test_fraction} + dev_fraction {self.dev_fraction} "
                "leave no group to train on; keep their sum below 1"
            )
        return self


def assign_groups(
    groups: Iterable[str], test_fraction: float, dev_fraction: float, seed: int
) -> dict[str, str]:
    """Group -> "train" | "dev" | "test": the sorted groups shuffled by `seed`; the first
    share tested, the next share dev, the rest trained on (each split at least one group)."""
    ordered = sorted(set(groups))
    order = np.random.default_rng(seed).permutation(len(ordered))
    n_test = min(len(ordered) - 2, max(1, round(len(ordered) * test_fraction)))
    n_dev = min(len(ordered) - 1 - n_test, max(1, round(len(ordered) * dev_fraction)))
    split_of = {}
    for rank, i in enumerate(order):
        split_of[ordered[i]] = (
            "test" if rank < n_test else "dev" if rank < n_test + n_dev else "train"
        )
    return split_of


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
    """{"train", "dev", "test"} qrels: queries split by their group and capped; a dev query
    judging a test document, and a train query judging a dev or test one, is dropped (no
    held-out target is trained on, and dev never scores a test target)."""
    if len(set(group_of.values())) < 3:
        raise InputError(
            f"{source}: {len(judgments)} usable queries in {len(set(group_of.values()))} "
            "group(s); a train/dev/test split needs at least 3 groups: give it more material"
        )
    split_of = assign_groups(
        group_of.values(), params.test_fraction, params.dev_fraction, params.seed
    )
    by_split: dict[str, list[str]] = {split: [] for split in SPLITS}
    for qid in judgments:
        by_split[split_of[group_of[qid]]].append(qid)
    test = sample(by_split["test"], params.max_test_queries, params.seed)
    held_out = {doc for qid in test for doc in judgments[qid]}
    dev_pool = [qid for qid in by_split["dev"] if held_out.isdisjoint(judgments[qid])]
    dev = sample(dev_pool, params.max_dev_queries, params.seed + 3)
    held_out |= {doc for qid in dev for doc in judgments[qid]}
    clean = [qid for qid in by_split["train"] if held_out.isdisjoint(judgments[qid])]
    train = sample(clean, params.max_train_queries, params.seed + 1)
    chosen = {"train": train, "dev": dev, "test": test}
    return {
        split: {qid: dict(sorted(judgments[qid].items())) for qid in chosen[split]}
        for split in SPLITS
    }


def split_query_ids(qrels: Mapping[str, Judgments]) -> list[str]:
    """Every query judged in some split, sorted."""
    return sorted(judged_queries(qrels))


def judged_documents(qrels: Mapping[str, Judgments]) -> set[str]:
    return {doc for judged in qrels.values() for docs in judged.values() for doc in docs}


def judged_queries(qrels: Mapping[str, Judgments]) -> set[str]:
    return {qid for judged in qrels.values() for qid in judged}

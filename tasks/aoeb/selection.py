"""Choices made on the dev split, never on test: which fine-tune checkpoint is the embedder.

Each candidate encoder ranks the dev queries of every text task exactly as aoeb.evaluate
ranks the test queries (same search, same nDCG@10); the candidate with the best mean over
the tasks wins, the earlier one on a tie (less training for the same score).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from statistics import fmean

from tasks.aoeb.benchmark import RetrievalTask
from tasks.aoeb.encoders import search
from tasks.aoeb.metrics import MAIN_K, retrieval_scores
from tasks.core.text_encoders import Encoder

DEV = "dev"


def split_view(task: RetrievalTask, split: str) -> RetrievalTask:
    """The task as `split` sees it: when every query of the split has a candidate pool, only
    the pooled documents (for a dense encoder, which scores each document on its own, the
    same rankings with fewer documents to embed)."""
    judged = task.qrels.get(split, {})
    if not judged or not all(qid in task.candidates for qid in judged):
        return task
    pooled = {doc for qid in judged for doc in task.candidates[qid]}
    return replace(task, corpus={d: row for d, row in task.corpus.items() if d in pooled})


def text_tasks_with(tasks: Sequence[RetrievalTask], split: str) -> list[RetrievalTask]:
    """The text tasks that judge queries in `split`."""
    return [t for t in tasks if t.declaration.modality == "text" and t.qrels.get(split)]


def split_ndcg(encoder: Encoder, tasks: Sequence[RetrievalTask], split: str) -> dict[str, float]:
    """nDCG@10 of `encoder` on `split` of each text task that has it (nothing cached)."""
    scores = {}
    for task in text_tasks_with(tasks, split):
        view = split_view(task, split)
        run = search(encoder, view, split, MAIN_K, use_cache=False)
        scores[task.declaration.name] = retrieval_scores(view.qrels[split], run, [MAIN_K])[
            "main_score"
        ]
    return scores


def best_candidate(scores: Mapping[int, Mapping[str, float]]) -> int:
    """The candidate (e.g. a step) with the best mean score over the tasks; the smaller
    one on a tie."""
    if not scores:
        raise ValueError("no candidate to choose from")
    return max(sorted(scores), key=lambda step: fmean(scores[step].values()))

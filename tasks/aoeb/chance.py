"""The floor every encoder is measured against: a seeded random ranking of each query's
candidates (the leaderboard's `random` row) and its expectation, the task's chance level.

A query's candidates are its pool when the task has one (memory: the sessions of its own
history), else the whole corpus. Under a uniformly random order each relevant document's
rank is uniform over the n candidates, so by linearity

    E[DCG@k] = Σ_relevant gain · (Σ_{r < min(n, k)} 1 / log2(r + 2)) / n

and E[nDCG@k] = E[DCG@k] / IDCG@k (the ideal is fixed by the qrels). With 7 candidates and
one relevant session that is ≈ 0.52; over a corpus of 450 documents ≈ 0.01.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping

import numpy as np

from tasks.aoeb.benchmark import RetrievalTask
from tasks.aoeb.encoders import Run, top_k


def candidate_ids(task: RetrievalTask, qid: str) -> list[str]:
    """What `qid` is ranked against: its pool (the documents of it in the corpus), else the
    corpus."""
    if qid in task.candidates:
        return [doc for doc in task.candidates[qid] if doc in task.corpus]
    return list(task.corpus)


def expected_random_ndcg(judged: Mapping[str, int], candidates: set[str], k: int) -> float:
    """E[nDCG@k] of a uniformly random order of `candidates`, trec_eval's gains (relevance;
    the ideal from every judged document); NaN when no judged document is relevant."""
    gains = sorted((g for g in judged.values() if g > 0), reverse=True)
    if not gains:
        return math.nan
    ideal = sum(g / math.log2(r + 2) for r, g in enumerate(gains[:k]))
    n = len(candidates)
    found = sum(g for doc, g in judged.items() if g > 0 and doc in candidates)
    reachable = sum(1 / math.log2(r + 2) for r in range(min(n, k)))
    return found * reachable / n / ideal if n else 0.0


def chance_by_query(task: RetrievalTask, split: str, k: int = 10) -> dict[str, float]:
    """Each judged query of `split` with a relevant document → its expected random nDCG@k."""
    chance = {}
    for qid, judged in task.qrels[split].items():
        value = expected_random_ndcg(judged, set(candidate_ids(task, qid)), k)
        if not math.isnan(value):
            chance[qid] = value
    return chance


def random_run(task: RetrievalTask, split: str, k: int, seed: int) -> Run:
    """A seeded random ranking of each query's candidates, top `k` (a run like `search`'s);
    the stream is seeded by `seed` and the task's name, so tasks draw independently."""
    rng = np.random.default_rng([seed, zlib.crc32(task.declaration.name.encode())])
    run: Run = {}
    for qid in task.split_queries(split):
        ids = candidate_ids(task, qid)
        run[qid] = top_k(ids, rng.random(len(ids)), k)
    return run

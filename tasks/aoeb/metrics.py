"""MTEB's retrieval metrics, computed the way pytrec_eval (trec_eval 9) does, without it.

Per query, then averaged over the run's queries that have a relevant document (relevance
> 0) in the qrels: MTEB drops queries without one, and pytrec_eval scores only run queries.

The ranking is trec_eval's: score descending, ties by document id descending (code-point
order, i.e. strcmp on UTF-8). Every measure depends only on where the relevant documents
rank, so no run is sorted by document id: a relevant document's rank is the number of documents
scored above it, plus those tied with it whose id sorts after its own.

- ndcg_at_k: trec_eval's ndcg_cut_k: gain = relevance (a negative one counts 0), discount
  log2(rank + 1), ideal = the query's qrels gains sorted descending.
- map_at_k: map_cut_k, the precisions at each relevant document in the top k, summed,
  over the query's relevant count. recall_at_k: recall_k. precision_at_k: P_k (over k,
  even when the run holds fewer documents).
- mrr_at_k: MTEB's own: 1 / rank of the first relevant document in the top k, else 0.

Values are not rounded (MTEB rounds all but MRR to 5 decimals).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from tasks.core.errors import InputError

DEFAULT_K = (1, 3, 5, 10, 20, 100, 1000)  # MTEB's AbsTaskRetrieval.k_values
MEASURES = ("ndcg", "map", "recall", "precision", "mrr")
MAIN_K = 10  # main_score = ndcg_at_10, as in MTEB's retrieval tasks

Qrels = Mapping[str, Mapping[str, int]]
Run = Mapping[str, Mapping[str, float]]


@dataclass(frozen=True)
class RelevantRanks:
    """Where each query's relevant documents rank: `hit_*` per retrieved relevant document
    (ordered by query, then rank), `gain_*` per relevant document of the qrels."""

    query_ids: list[str]
    hit_query: np.ndarray
    hit_rank: np.ndarray  # 0-based, trec_eval order
    hit_gain: np.ndarray
    gain_query: np.ndarray
    gain: np.ndarray


def parse_k(values: Iterable[int]) -> tuple[int, ...]:
    """Sorted distinct cutoffs; ValueError unless each is a positive integer."""
    given = list(values)
    if not given or any(int(k) != k or k < 1 for k in given):
        raise ValueError(f"k values must be positive integers, got {given}")
    return tuple(sorted({int(k) for k in given}))


def scored_queries(qrels: Qrels, run: Run) -> list[str]:
    """The run's queries, in run order, that have a relevant document in the qrels."""
    return [q for q in run if any(r > 0 for r in qrels.get(q, {}).values())]


def query_coverage(qrels: Qrels, run: Run) -> dict[str, int]:
    """How many queries are scored, and how many each side holds that the other cannot match."""
    scored = scored_queries(qrels, run)
    judged = {q for q, docs in qrels.items() if any(r > 0 for r in docs.values())}
    return {
        "scored": len(scored),
        "run_without_relevant": len(run) - len(scored),
        "relevant_not_in_run": len(judged.difference(run)),
    }


def relevant_ranks(qrels: Qrels, run: Run) -> RelevantRanks:
    """Rank every relevant document in its query's run, ties broken as trec_eval does."""
    query_ids = scored_queries(qrels, run)
    if not query_ids:
        raise InputError(
            "no query of the run has a relevant document in the qrels; "
            "check that the run and the qrels use the same query ids"
        )
    gain_query: list[int] = []
    gain: list[float] = []
    hit_query: list[int] = []
    hit_rank: list[int] = []
    hit_gain: list[float] = []
    for index, query in enumerate(query_ids):
        docs = run[query]
        relevant = [(doc, rel) for doc, rel in qrels[query].items() if rel > 0]
        gain_query.extend([index] * len(relevant))
        gain.extend(rel for _, rel in relevant)
        found = [(doc, rel, float(docs[doc])) for doc, rel in relevant if doc in docs]
        if not found:
            continue
        ranks = _ranks(query, docs, [doc for doc, _, _ in found], [s for _, _, s in found])
        hit_query.extend([index] * len(found))
        hit_rank.extend(ranks)
        hit_gain.extend(rel for _, rel, _ in found)
    hit_query_a = np.array(hit_query, np.int64)
    hit_rank_a = np.array(hit_rank, np.int64)
    order = np.lexsort((hit_rank_a, hit_query_a))
    return RelevantRanks(
        query_ids,
        hit_query_a[order],
        hit_rank_a[order],
        np.array(hit_gain, np.float64)[order],
        np.array(gain_query, np.int64),
        np.array(gain, np.float64),
    )


def _ranks(query: str, docs: Mapping[str, float], wanted: list[str], scores: list[float]):
    """0-based trec_eval ranks of `wanted` (scored `scores`) among `docs`: the documents
    scored higher, plus those tied whose id sorts after (the rare ties are scanned in Python)."""
    ordered = np.sort(np.fromiter(docs.values(), np.float64, len(docs)))
    if np.isnan(ordered[-1]):
        raise InputError(f"run: query {query}: a score is NaN; give every document a number")
    probe = np.array(scores, np.float64)
    below_or_equal = np.searchsorted(ordered, probe, "right")
    ranks = (len(docs) - below_or_equal).tolist()
    tied = np.flatnonzero(below_or_equal - np.searchsorted(ordered, probe, "left") > 1)
    if len(tied):
        levels = {scores[i] for i in tied}
        groups = defaultdict(list)
        for doc, score in docs.items():
            if float(score) in levels:
                groups[float(score)].append(doc)
        for group in groups.values():
            group.sort()
        for i in tied:
            group = groups[scores[i]]
            ranks[i] += len(group) - bisect_right(group, wanted[i])
    return ranks


def per_query_scores(
    qrels: Qrels, run: Run, k_values: Iterable[int] = DEFAULT_K
) -> tuple[list[str], dict[str, np.ndarray]]:
    """Query ids and, per metric key (`ndcg_at_10`, …), one value per query in that order."""
    ks = parse_k(k_values)
    ranks = relevant_ranks(qrels, run)
    count = len(ranks.query_ids)
    hit_query, hit_rank = ranks.hit_query, ranks.hit_rank
    num_rel = np.bincount(ranks.gain_query, minlength=count).astype(np.float64)

    starts = np.searchsorted(hit_query, np.arange(count))
    precision_at_hit = (np.arange(len(hit_query)) - starts[hit_query] + 1) / (hit_rank + 1)
    discounted = ranks.hit_gain / np.log2(hit_rank + 2)
    first = np.full(count, np.inf)
    np.minimum.at(first, hit_query, hit_rank)

    ideal = np.lexsort((-ranks.gain, ranks.gain_query))
    ideal_query, ideal_gain = ranks.gain_query[ideal], ranks.gain[ideal]
    ideal_rank = np.arange(len(ideal)) - np.searchsorted(ideal_query, np.arange(count))[ideal_query]
    ideal_discounted = ideal_gain / np.log2(ideal_rank + 2)

    def total(mask: np.ndarray, query: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
        picked = None if weights is None else weights[mask]
        return np.bincount(query[mask], weights=picked, minlength=count).astype(np.float64)

    out: dict[str, dict[int, np.ndarray]] = {measure: {} for measure in MEASURES}
    for k in ks:
        top = hit_rank < k
        relevant = total(top, hit_query, None)
        idcg = total(ideal_rank < k, ideal_query, ideal_discounted)
        out["ndcg"][k] = total(top, hit_query, discounted) / idcg
        out["map"][k] = total(top, hit_query, precision_at_hit) / num_rel
        out["recall"][k] = relevant / num_rel
        out["precision"][k] = relevant / k
        out["mrr"][k] = np.where(first < k, 1.0 / (first + 1), 0.0)
    values = {f"{m}_at_{k}": v for m, by_k in out.items() for k, v in by_k.items()}
    return ranks.query_ids, values


def retrieval_scores(qrels: Qrels, run: Run, k_values: Iterable[int] = DEFAULT_K) -> dict:
    """MTEB's result dict: ndcg_at_k, map_at_k, recall_at_k, precision_at_k, mrr_at_k per k,
    then main_score (= ndcg_at_10, computed even when 10 is not among the k values)."""
    ks = parse_k(k_values)
    _, per_query = per_query_scores(qrels, run, {*ks, MAIN_K})
    scores = {
        key: float(values.mean())
        for key, values in per_query.items()
        if int(key.rsplit("_", 1)[1]) in ks
    }
    scores["main_score"] = float(per_query[f"ndcg_at_{MAIN_K}"].mean())
    return scores

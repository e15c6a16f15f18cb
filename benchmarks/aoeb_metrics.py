"""AOEB retrieval metrics: tasks/aoeb/metrics.py vs pytrec_eval (trec_eval's C code).

Run: `.venv/bin/python benchmarks/aoeb_metrics.py --queries 10000 --depth 100`.

Both score the same random run and qrels (graded relevance, ties in the scores) for nDCG,
MAP, Recall and Precision at MTEB's k values, in the same run; the script checks that every
averaged value agrees to 1e-6 and reports the wall time of each and their ratio.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MEASURES = {"ndcg_cut": "ndcg_at", "map_cut": "map_at", "recall": "recall_at", "P": "precision_at"}


def random_case(queries: int, depth: int, seed: int) -> tuple[dict, dict]:
    rng = np.random.default_rng(seed)
    qrels, run = {}, {}
    for q in range(queries):
        docs = [f"d{i}" for i in rng.choice(5 * depth, size=depth, replace=False)]
        scores = np.round(rng.normal(size=depth), 2)  # rounding makes ties
        run[f"q{q}"] = {d: float(s) for d, s in zip(docs, scores, strict=True)}
        judged = rng.choice(5 * depth, size=10, replace=False)
        qrels[f"q{q}"] = {f"d{i}": int(rng.integers(0, 3)) for i in judged}
    return qrels, run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10000)
    parser.add_argument("--depth", type=int, default=100)
    args = parser.parse_args()
    import pytrec_eval

    from tasks.aoeb.metrics import DEFAULT_K, retrieval_scores

    qrels, run = random_case(args.queries, args.depth, seed=0)
    judged = {q: d for q, d in qrels.items() if any(v > 0 for v in d.values())}
    started = time.perf_counter()
    ours = retrieval_scores(judged, run, DEFAULT_K)
    ours_seconds = time.perf_counter() - started
    started = time.perf_counter()
    measures = {f"{m}.{','.join(map(str, DEFAULT_K))}" for m in MEASURES}
    per_query = pytrec_eval.RelevanceEvaluator(judged, measures).evaluate(run)
    reference = {
        f"{ours_key}_{k}": float(np.mean([v[f"{m}_{k}"] for v in per_query.values()]))
        for m, ours_key in MEASURES.items()
        for k in DEFAULT_K
    }
    reference_seconds = time.perf_counter() - started
    worst = max(abs(ours[key] - value) for key, value in reference.items())
    assert worst <= 1e-6, f"disagreement {worst}"
    print(
        f"{len(judged)} judged queries x {args.depth} ranked documents, "
        f"{len(reference)} averaged values, largest difference {worst:.1e}"
    )
    print(f"{'scorer':<22}{'seconds':>10}")
    print(f"{'paperline (numpy)':<22}{ours_seconds:>10.2f}")
    print(f"{'pytrec_eval':<22}{reference_seconds:>10.2f}")
    print(f"ratio pytrec_eval/paperline time: {reference_seconds / ours_seconds:.2f}x")


if __name__ == "__main__":
    main()

"""KG path mining: the batched miner vs one query per (subject, object) pair.

Run: `.venv/bin/python benchmarks/kg_mining.py --pairs 1000` (after `dvc repro kg-slice`).

Both sides mine the same pairs (CoDEx-S valid.txt triples, both directions, as kg.mine
does) with MultiHal's templates — 1 hop, then 2 hops for the pairs without a 1-hop path —
against the same local Oxigraph endpoint in the same run, with no response cache:
- (a) naive: MultiHal's way, one SPARQL query per pair and hop count, one at a time;
- (b) batched: `mine_paths` with `pairs_per_query` pairs per VALUES block and
  `concurrency` queries in flight (params.yaml defaults).
Both must return the same paths. Reports round trips and wall time per 1,000 pairs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def naive(client, pairs, lists):
    from tasks.kg.miner import mine_hops

    mined = {}
    for subject, obj in pairs:
        for hops in (1, 2):
            found = mine_hops(client, [(subject, obj)], hops, "entity", lists.for_answer("entity"))
            if found:
                mined[("entity", subject, obj)] = found[(subject, obj)]
                break
    return mined


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from tasks.core import services
    from tasks.core.params import load_params
    from tasks.kg import codex, endpoint
    from tasks.kg.mine import property_lists
    from tasks.kg.miner import mine_paths
    from tasks.kg.sparql import SparqlClient

    params = load_params(ROOT / "params.yaml")
    facts = sorted(codex.read_triples(ROOT / "data/seed/codex-s/valid.txt"))
    pairs = [(s, o) for s, _, o in facts] + [(o, s) for s, _, o in facts]
    pairs = sorted(set(pairs))[: args.pairs]
    lists = property_lists(ROOT / "data/seed/multihal")
    one_per_query = params.kg.sparql.model_copy(update={"pairs_per_query": 1, "concurrency": 1})
    with services.running("oxigraph", params.runtime, ROOT) as state:
        endpoint.load_slice(state.url, ROOT / endpoint.SLICE)
        results = {}
        for name in ("naive", "batched"):
            times = []
            for _ in range(args.repeats):
                sparql = one_per_query if name == "naive" else params.kg.sparql
                client = SparqlClient(f"{state.url}/query", sparql, None)
                started = time.perf_counter()
                if name == "naive":
                    mined = naive(client, pairs, lists)
                else:
                    keys = [("entity", s, o) for s, o in pairs]
                    mined = mine_paths(client, keys, lists)
                times.append(time.perf_counter() - started)
                client.close()
            results[name] = (min(times), client.stats.round_trips, mined)
    assert results["naive"][2] == results["batched"][2], "the two miners disagree"
    scale = 1000 / len(pairs)
    print(
        f"pairs: {len(pairs)}, paths: {sum(len(v) for v in results['batched'][2].values())}, "
        f"best of {args.repeats}; batched: {params.kg.sparql.pairs_per_query} pairs/query, "
        f"{params.kg.sparql.concurrency} in flight"
    )
    print(f"{'miner':<10}{'round trips / 1k pairs':>24}{'seconds / 1k pairs':>20}")
    for name, (seconds, trips, _) in results.items():
        print(f"{name:<10}{trips * scale:>24.0f}{seconds * scale:>20.2f}")
    (naive_s, naive_trips, _), (batch_s, batch_trips, _) = results["naive"], results["batched"]
    print(
        f"ratio naive/batched: round trips {naive_trips / batch_trips:.0f}x, "
        f"wall time {naive_s / batch_s:.1f}x"
    )


if __name__ == "__main__":
    main()

"""mine_paths(): 1-hop then 2-hop KG paths for many (subject, object) pairs, batched.

MultiHal asks one query per pair and hop count; here each query carries
`pairs_per_query` pairs (see `templates`), queries run `concurrency` at a time, and every
answer is cached (see `sparql`). With `stop_at_first_hit` (MultiHal's behaviour) only the
pairs without a 1-hop path are asked for 2-hop paths.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tqdm.auto import tqdm

from tasks.core import rdf
from tasks.kg.sparql import Binding, SparqlClient
from tasks.kg.templates import RANK_PROPERTIES, AnswerType, Pair, path_query

KgPath = tuple[str, ...]  # (Q, P, Q) or (Q, P, Q, P, Q); a literal answer ends in its value


@dataclass(frozen=True)
class PropertyLists:
    """MultiHal's time-based and numerical property lists (res/*.json)."""

    time: frozenset[str]
    numerical: frozenset[str]

    def for_answer(self, answer_type: AnswerType) -> tuple[str, ...]:
        return {
            "entity": (),
            "date": tuple(sorted(self.time)),
            "number": tuple(sorted(self.numerical)),
            "rank": RANK_PROPERTIES,
        }[answer_type]


def _path(row: Binding, hops: int, answer_type: AnswerType) -> KgPath:
    end = rdf.local_id(row["o"]) if answer_type == "entity" else row["value"]
    middle = (rdf.local_id(row["p1"]),)
    if hops == 2:
        middle += (rdf.local_id(row["m"]), rdf.local_id(row["p2"]))
    return (rdf.local_id(row["s"]), *middle, end)


def _pair_of(row: Binding, answer_type: AnswerType) -> Pair:
    return rdf.local_id(row["s"]), rdf.local_id(row["o"]) if answer_type == "entity" else row["o"]


def _batches(pairs: Sequence[Pair], size: int) -> list[list[Pair]]:
    return [list(pairs[i : i + size]) for i in range(0, len(pairs), size)]


def mine_hops(
    client: SparqlClient,
    pairs: Sequence[Pair],
    hops: int,
    answer_type: AnswerType,
    properties: Sequence[str] = (),
    progress: bool = False,
) -> dict[Pair, list[KgPath]]:
    """Every `hops`-hop path of each pair (pairs without one are absent)."""
    batches = _batches(sorted(set(pairs)), client.params.pairs_per_query)
    queries = [path_query(batch, hops, answer_type, properties) for batch in batches]
    found: dict[Pair, list[KgPath]] = defaultdict(list)
    results = client.select_many(queries)
    for rows in tqdm(results, desc=f"{answer_type} {hops}-hop", disable=not progress):
        for row in rows:
            found[_pair_of(row, answer_type)].append(_path(row, hops, answer_type))
    return {pair: sorted(set(paths)) for pair, paths in found.items()}


def mine_paths(
    client: SparqlClient,
    pairs: Iterable[tuple[AnswerType, str, str]],
    property_lists: PropertyLists,
    max_hops: int = 2,
    stop_at_first_hit: bool = True,
    progress: bool = False,
) -> dict[tuple[AnswerType, str, str], list[KgPath]]:
    """(answer type, subject, object) → its paths, shortest first; pairs without any absent."""
    by_type: Mapping[AnswerType, list[Pair]] = defaultdict(list)
    for answer_type, subject, obj in pairs:
        by_type[answer_type].append((subject, obj))
    mined: dict[tuple[AnswerType, str, str], list[KgPath]] = {}
    for answer_type, typed_pairs in sorted(by_type.items()):
        properties = property_lists.for_answer(answer_type)
        remaining = sorted(set(typed_pairs))
        for hops in range(1, max_hops + 1):
            if not remaining:
                break
            found = mine_hops(client, remaining, hops, answer_type, properties, progress)
            for (subject, obj), paths in found.items():
                mined.setdefault((answer_type, subject, obj), []).extend(paths)
            if stop_at_first_hit:
                remaining = [pair for pair in remaining if pair not in found]
    return mined

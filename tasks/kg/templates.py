"""MultiHal's path templates as batched SPARQL: many (subject, object) pairs per query.

One query per (answer type, hop count, batch): the pairs go in a `VALUES (?s ?o)` block,
so the endpoint joins them in one pass instead of one round trip per pair. Only truthy
`wdt:` properties are followed. Literal answers (date, number, rank) end the path in a
value matched as MultiHal does: dates by `CONTAINS(STR(?o), date)` over the time-based
properties, numbers by `isNumeric` and `STR(?o) = value` over the numerical ones, ranks
over P1352. Every term is rendered by `rdf` (escaped), and ORDER BY makes paging stable.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from tasks.core import rdf

AnswerType = Literal["entity", "date", "number", "rank"]
ANSWER_TYPES: tuple[AnswerType, ...] = ("entity", "date", "number", "rank")
RANK_PROPERTIES = ("P1352",)
Pair = tuple[str, str]  # (subject QID, object QID or literal value)

_DIRECT = f'STRSTARTS(STR(?p1), "{rdf.WDT}")'


def _values(pairs: Iterable[Pair], answer_type: AnswerType) -> str:
    def obj(value: str) -> str:
        return rdf.term_text(rdf.entity(value) if answer_type == "entity" else rdf.literal(value))

    rows = " ".join(f"({rdf.term_text(rdf.entity(s))} {obj(o)})" for s, o in pairs)
    return f"VALUES (?s ?o) {{ {rows} }}"


def _in(variable: str, properties: Sequence[str]) -> str:
    return f"?{variable} IN ({', '.join(rdf.term_text(rdf.prop(p)) for p in sorted(properties))})"


def _last_edge(answer_type: AnswerType, properties: Sequence[str], edge: str) -> tuple[str, str]:
    """The path's end variable and the constraint on its last edge `?{edge}`.

    An entity answer is the bound `?o` itself (both ends bound: the endpoint joins from
    either side); a literal answer is `?value`, matched to `?o` by MultiHal's rules.
    """
    if answer_type == "entity":
        return "?o", f'STRSTARTS(STR(?{edge}), "{rdf.WDT}")'
    if answer_type == "date":
        return "?value", f"{_in(edge, properties)} && CONTAINS(STR(?value), STR(?o))"
    return "?value", f"{_in(edge, properties)} && isNumeric(?value) && STR(?value) = STR(?o)"


def path_query(
    pairs: Sequence[Pair], hops: int, answer_type: AnswerType, properties: Sequence[str] = ()
) -> str:
    """SELECT ?s ?o ?p1 [?m ?p2] ?end for every pair's `hops`-hop paths."""
    if answer_type != "entity" and not properties:
        raise ValueError(f"answer type {answer_type}: no properties to search")
    values = _values(pairs, answer_type)
    end, last = _last_edge(answer_type, properties, f"p{hops}")
    select = "?s ?o ?p1" + (" ?m ?p2" if hops == 2 else "") + ("" if end == "?o" else " ?value")
    if hops == 1:
        body = f"?s ?p1 {end} .\n  FILTER({last})"
    elif hops == 2:
        body = (
            f"?s ?p1 ?m .\n  ?m ?p2 {end} .\n"
            f"  FILTER({_DIRECT} && isIRI(?m) && ?m != ?s && ?m != {end})\n  FILTER({last})"
        )
    else:
        raise ValueError(f"hops must be 1 or 2, got {hops}")
    return f"SELECT {select} WHERE {{\n  {values}\n  {body}\n}}\nORDER BY {select}"

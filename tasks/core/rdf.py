"""Wikidata's IRIs and safe RDF terms (pyoxigraph renders and escapes every IRI and literal).

A term always goes into a query through `entity()`, `prop()` or `literal()`: an identifier
that is not `Q<digits>` / `P<digits>` is refused, and a literal's quotes, braces or newlines
are escaped by pyoxigraph's N-Triples writer, so no label can change a query's shape.
"""

from __future__ import annotations

import re

import pyoxigraph as ox

WD = "http://www.wikidata.org/entity/"
WDT = "http://www.wikidata.org/prop/direct/"
RDFS_LABEL = ox.NamedNode("http://www.w3.org/2000/01/rdf-schema#label")
SKOS_ALT_LABEL = ox.NamedNode("http://www.w3.org/2004/02/skos/core#altLabel")
SCHEMA_DESCRIPTION = ox.NamedNode("http://schema.org/description")
INSTANCE_OF = "P31"

_QID, _PID = re.compile(r"Q[1-9][0-9]*"), re.compile(r"P[1-9][0-9]*")


def check_qid(value: str) -> str:
    if not _QID.fullmatch(value):
        raise ValueError(f"{value!r} is not a Wikidata item id (Q followed by digits)")
    return value


def check_pid(value: str) -> str:
    if not _PID.fullmatch(value):
        raise ValueError(f"{value!r} is not a Wikidata property id (P followed by digits)")
    return value


def entity(qid: str) -> ox.NamedNode:
    """wd:Q… (items; properties as entities, which carry the labels, are wd:P… too)."""
    if _PID.fullmatch(qid):
        return ox.NamedNode(WD + qid)
    return ox.NamedNode(WD + check_qid(qid))


def prop(pid: str) -> ox.NamedNode:
    """wdt:P…, the truthy ("direct") property."""
    return ox.NamedNode(WDT + check_pid(pid))


def literal(text: str, language: str | None = None) -> ox.Literal:
    return ox.Literal(text, language=language) if language else ox.Literal(text)


def local_id(term: ox.NamedNode | str) -> str:
    """`http://www.wikidata.org/entity/Q42` → `Q42`; `…/prop/direct/P31` → `P31`."""
    value = term.value if isinstance(term, ox.NamedNode) else term
    return value.rsplit("/", 1)[-1]


def term_text(term: object) -> str:
    """A term as SPARQL/N-Triples source text (pyoxigraph escapes it)."""
    return str(term)

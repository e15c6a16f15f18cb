"""Path labels per language (`trip_labels`), fetched from the endpoint in VALUES batches."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from tasks.core import rdf
from tasks.kg.sparql import SparqlClient

Labels = dict[str, dict[str, str]]  # id (Q… / P…) → language → label


def fetch_labels(client: SparqlClient, ids: Iterable[str], languages: Sequence[str]) -> Labels:
    ids = sorted(set(ids))
    wanted = ", ".join(rdf.term_text(rdf.literal(lang)) for lang in sorted(languages))
    size = client.params.pairs_per_query
    label = rdf.term_text(rdf.RDFS_LABEL)
    queries = []
    for n in range(0, len(ids), size):
        values = " ".join(rdf.term_text(rdf.entity(i)) for i in ids[n : n + size])
        queries.append(
            f"SELECT ?e ?label WHERE {{\n  VALUES ?e {{ {values} }}\n  ?e {label} ?label .\n"
            f"  FILTER(LANG(?label) IN ({wanted}))\n}}\nORDER BY ?e ?label"
        )
    labels: Labels = defaultdict(dict)
    for rows in client.select_many(queries):
        for row in rows:
            labels[rdf.local_id(row["e"])].setdefault(
                row["label_lang"], " ".join(row["label"].split())
            )
    return dict(labels)


def is_item(element: str) -> bool:
    return element[:1] == "Q" and element[1:].isdigit()


def is_property(element: str) -> bool:
    return element[:1] == "P" and element[1:].isdigit()


def render_parts(path: Sequence[str], labels: Labels, language: str) -> list[str]:
    """Each element of the path as its label in `language`; one without a label stays its id."""
    return [
        labels.get(element, {}).get(language, element)
        if is_item(element) or is_property(element)
        else element
        for element in path
    ]


def render(path: Sequence[str], labels: Labels, language: str) -> str:
    """'Q1 P2 Q3' as labels in `language` (see `render_parts`)."""
    return " ".join(render_parts(path, labels, language))


def unlabelled(path: Sequence[str], labels: Labels) -> list[str]:
    """The ids of the path with no label in any language (shown as ids in trip_labels)."""
    return [e for e in path if (is_item(e) or is_property(e)) and not labels.get(e)]

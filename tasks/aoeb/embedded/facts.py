"""The Wikidata slice (kg.slice's N-Triples) as facts, labels and rendered fact sheets.

Facts are `wd:Q… wdt:P… wd:Q…`; labels are the `rdfs:label` literals in one language. The
offline slice labels properties and entity types but not the other items (CoDEx ships no
item labels), so an unlabelled item is named by its QID and described by its types
(`wdt:P31`), e.g. "Q7604 (human)".
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pyoxigraph as ox

from tasks.core import rdf
from tasks.core.errors import InputError

Fact = tuple[str, str, str]  # (subject QID, PID, object QID)


@dataclass(frozen=True)
class FactGraph:
    facts: dict[str, list[tuple[str, str]]]  # subject -> sorted (PID, object), P31 included
    labels: dict[str, str]  # QID or PID -> label

    def name(self, term: str) -> str:
        return self.labels.get(term, term)

    def objects(self, subject: str, pid: str) -> list[str]:
        return [o for p, o in self.facts.get(subject, []) if p == pid]

    def types(self, subject: str) -> list[str]:
        return [self.name(t) for t in self.objects(subject, rdf.INSTANCE_OF)]

    def described(self, subject: str) -> str:
        """Its label, or its QID with its types: "Q7604 (human)"."""
        types = self.types(subject)
        if subject in self.labels or not types:
            return self.name(subject)
        return f"{subject} ({', '.join(types)})"

    def properties(self, subject: str) -> dict[str, list[str]]:
        """PID -> objects, P31 left out (it describes, it is no fact to ask about)."""
        grouped: dict[str, list[str]] = defaultdict(list)
        for pid, obj in self.facts.get(subject, []):
            if pid != rdf.INSTANCE_OF:
                grouped[pid].append(obj)
        return dict(grouped)

    def fact_sheet(self, subject: str, max_objects: int) -> str:
        """ "<entity>: <property> <objects>; …", at most `max_objects` objects per property."""
        parts = []
        for pid, objects in self.properties(subject).items():
            shown = ", ".join(self.name(o) for o in objects[:max_objects])
            more = len(objects) - max_objects
            parts.append(f"{self.name(pid)} {shown}" + (f" and {more} more" if more > 0 else ""))
        return f"{self.described(subject)}: {'; '.join(parts)}."


def read_facts(path: Path, language: str = "en") -> FactGraph:
    """The slice's item-to-item facts and its `language` labels."""
    if not path.exists():
        raise InputError(f"{path}: missing; build the Wikidata slice (`dvc repro kg-slice`)")
    facts: dict[str, set[tuple[str, str]]] = defaultdict(set)
    labels: dict[str, str] = {}
    try:
        for triple in ox.parse(path=str(path), format=ox.RdfFormat.N_TRIPLES):
            subject, predicate, obj = triple.subject, triple.predicate, triple.object
            if not isinstance(subject, ox.NamedNode) or not subject.value.startswith(rdf.WD):
                continue
            if predicate == rdf.RDFS_LABEL and isinstance(obj, ox.Literal):
                if obj.language == language:
                    labels[rdf.local_id(subject)] = obj.value
            elif (
                predicate.value.startswith(rdf.WDT)
                and isinstance(obj, ox.NamedNode)
                and obj.value.startswith(rdf.WD)
            ):
                facts[rdf.local_id(subject)].add((rdf.local_id(predicate), rdf.local_id(obj)))
    except SyntaxError as exc:
        raise InputError(f"{path}: not N-Triples ({exc}); rebuild the slice") from None
    if not facts:
        raise InputError(f"{path}: no wdt: facts between Wikidata items; rebuild the slice")
    return FactGraph({s: sorted(pairs) for s, pairs in sorted(facts.items())}, labels)

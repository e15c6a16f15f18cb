"""Entity linking behind one interface: text → Wikidata QIDs.

- `LabelIndexLinker` (offline): every `rdfs:label` / `skos:altLabel` of an item, read from
  the endpoint; the longest non-overlapping word spans of the text that equal a label
  (case- and accent-insensitive) link to its items. On the shipped slice only type
  entities have labels (CoDEx ships no item labels), so most free-text answers stay unlinked.
- `FalconLinker` (production): Falcon 2.0, as MultiHal calls it (`mode=long&k=3&db=1`).
- `WikidataSearchLinker` (production): Wikidata's `wbsearchentities` for the whole string.
"""

from __future__ import annotations

import unicodedata
from collections import defaultdict
from typing import Any, Protocol

import regex
import requests

from tasks.core import rdf
from tasks.core.errors import ServiceError
from tasks.kg.params import LinkingParams
from tasks.kg.sparql import SparqlClient

_WORD = regex.compile(r"\p{L}[\p{L}\p{M}\p{N}'’-]*|\p{N}+")


class Linker(Protocol):
    name: str

    def link(self, text: str) -> list[str]:
        """QIDs mentioned in `text`, in order of appearance, without repeats."""
        ...


def normalise(text: str) -> str:
    folded = unicodedata.normalize("NFKD", text.casefold())
    return " ".join(_WORD.findall("".join(c for c in folded if not unicodedata.combining(c))))


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


class LabelIndexLinker:
    name = "label-index"

    def __init__(self, labels: dict[str, list[str]], max_ngram: int = 6) -> None:
        self.index = labels  # normalised label → QIDs
        self.max_ngram = max_ngram

    @classmethod
    def from_endpoint(cls, client: SparqlClient, language: str, max_ngram: int) -> LabelIndexLinker:
        query = (
            f"SELECT ?item ?label WHERE {{ ?item {rdf.term_text(rdf.RDFS_LABEL)}"
            f"|{rdf.term_text(rdf.SKOS_ALT_LABEL)} ?label .\n"
            f'  FILTER(STRSTARTS(STR(?item), "{rdf.WD}Q") && LANG(?label) = '
            f"{rdf.term_text(rdf.literal(language))})\n}}\nORDER BY ?item ?label"
        )
        labels: dict[str, list[str]] = defaultdict(list)
        for row in client.select_paged(query):
            if key := normalise(row["label"]):
                labels[key].append(rdf.local_id(row["item"]))
        return cls({k: sorted(set(v)) for k, v in labels.items()}, max_ngram)

    def link(self, text: str) -> list[str]:
        words = normalise(text).split()
        found, start = [], 0
        while start < len(words):
            for size in range(min(self.max_ngram, len(words) - start), 0, -1):
                if hits := self.index.get(" ".join(words[start : start + size])):
                    found += hits
                    start += size
                    break
            else:
                start += 1
        return _unique(found)


class FalconLinker:
    name = "falcon-2.0"

    def __init__(self, params: LinkingParams, user_agent: str) -> None:
        self.url, self.session = params.falcon_url, requests.Session()
        self.session.headers["User-Agent"] = user_agent

    def link(self, text: str) -> list[str]:
        try:
            response = self.session.post(self.url, json={"text": text}, timeout=60)
            response.raise_for_status()
        except requests.RequestException as exc:
            raise ServiceError(
                f"Falcon 2.0 at {self.url}: {exc}; or set kg.linking.backend: index"
            ) from None
        return falcon_qids(response.json())


def falcon_qids(payload: dict[str, Any]) -> list[str]:
    """Falcon's `entities_wikidata`: [[IRI, surface form], …] (or [{"URI": …}, …])."""
    qids = []
    for entry in payload.get("entities_wikidata", []):
        iri = entry[0] if isinstance(entry, list) else entry.get("URI", "")
        qid = rdf.local_id(iri.strip("<>"))
        if qid.startswith("Q"):
            qids.append(qid)
    return _unique(qids)


class WikidataSearchLinker:
    name = "wbsearchentities"

    def __init__(self, params: LinkingParams, user_agent: str) -> None:
        self.url, self.language = params.wikidata_api_url, params.language
        self.session = requests.Session()
        self.session.headers["User-Agent"] = user_agent

    def link(self, text: str) -> list[str]:
        query = {
            "action": "wbsearchentities",
            "search": text,
            "language": self.language,
            "type": "item",
            "limit": 3,
            "format": "json",
        }
        try:
            response = self.session.get(self.url, params=query, timeout=60)
            response.raise_for_status()
        except requests.RequestException as exc:
            raise ServiceError(
                f"wbsearchentities at {self.url}: {exc}; or set kg.linking.backend: index"
            ) from None
        return _unique([hit["id"] for hit in response.json().get("search", [])])


def make_linker(params: LinkingParams, client: SparqlClient) -> Linker:
    if params.backend == "falcon":
        return FalconLinker(params, client.params.user_agent)
    if params.backend == "wikidata_search":
        return WikidataSearchLinker(params, client.params.user_agent)
    return LabelIndexLinker.from_endpoint(client, params.language, params.max_ngram)

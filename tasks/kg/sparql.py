"""A SPARQL client fit for Wikidata's query service and for the local Oxigraph endpoint.

requests-cache keeps every 200 answer in SQLite (key: endpoint, query text and dataset
version), so a re-run sends no query; urllib3's Retry retries connection errors and
429/5xx with exponential backoff and honours `Retry-After`; a thread pool bounds the
queries in flight. Counters say how many queries were asked, how many went over the wire
(round trips, retries included) and how many the cache answered.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import requests_cache
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from tasks.core.errors import ServiceError
from tasks.kg.params import SparqlParams

RESULTS_JSON = "application/sparql-results+json"
RETRIED_STATUSES = (429, 500, 502, 503, 504)
DATASET_HEADER = "X-Paperline-Dataset"  # part of the cache key: a new slice, new answers

Binding = dict[str, str]  # variable → value (IRI or lexical form); `<var>_lang` for tags


def _flat(row: dict[str, dict[str, str]]) -> Binding:
    flat = {name: term["value"] for name, term in row.items()}
    flat.update({f"{n}_lang": t["xml:lang"] for n, t in row.items() if "xml:lang" in t})
    return flat


@dataclass
class QueryStats:
    queries: int = 0  # asked by the caller (pages included)
    round_trips: int = 0  # HTTP exchanges with the endpoint, retries included
    retries: int = 0
    cache_hits: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, round_trips: int, retries: int, cached: bool) -> None:
        with self._lock:
            self.queries += 1
            self.round_trips += round_trips
            self.retries += retries
            self.cache_hits += int(cached)

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in ("queries", "round_trips", "retries", "cache_hits")}


class SparqlClient:
    def __init__(
        self,
        endpoint: str,
        params: SparqlParams,
        cache_path: Path | None,
        dataset_version: str = "",
    ) -> None:
        self.endpoint, self.params = endpoint, params
        self.stats = QueryStats()
        self.session = self._session(cache_path)
        self.session.headers.update(
            {
                "User-Agent": params.user_agent,
                "Accept": RESULTS_JSON,
                DATASET_HEADER: dataset_version,
            }
        )

    def _session(self, cache_path: Path | None) -> requests.Session:
        if cache_path is None:
            session = requests.Session()
        else:
            cache_path.parent.mkdir(parents=True, exist_ok=True)
            session = requests_cache.CachedSession(
                str(cache_path),
                backend="sqlite",
                allowable_methods=("GET", "POST"),
                allowable_codes=(200,),
                expire_after=-1,
                match_headers=[DATASET_HEADER],
            )
        retry = Retry(
            total=self.params.retries,
            backoff_factor=self.params.backoff_seconds,
            backoff_max=self.params.max_backoff_seconds,
            status_forcelist=RETRIED_STATUSES,
            allowed_methods=None,  # a SPARQL POST reads only: safe to repeat
            respect_retry_after_header=True,
            raise_on_status=False,
        )
        adapter = HTTPAdapter(
            max_retries=retry, pool_maxsize=self.params.concurrency, pool_block=True
        )
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        return session

    def select(self, query: str) -> list[Binding]:
        """One SELECT; the bindings as {variable: value}."""
        try:
            response = self.session.post(
                self.endpoint, data={"query": query}, timeout=self.params.timeout_seconds
            )
        except requests.exceptions.RequestException as exc:
            self.stats.add(self.params.retries + 1, self.params.retries, cached=False)
            raise ServiceError(
                f"SPARQL endpoint {self.endpoint}: no answer after {self.params.retries + 1} "
                f"attempts ({type(exc).__name__}); start it (`paperline services up oxigraph`) "
                f"or check kg.sparql in params.yaml; answers so far stay cached"
            ) from None
        cached = bool(getattr(response, "from_cache", False))
        history = () if cached else getattr(getattr(response.raw, "retries", None), "history", ())
        self.stats.add(0 if cached else 1 + len(history), len(history), cached)
        if response.status_code != 200:
            raise ServiceError(
                f"SPARQL endpoint {self.endpoint}: HTTP {response.status_code} "
                f"({response.text[:200].strip()!r}) after {len(history)} retries"
            )
        return [_flat(row) for row in response.json()["results"]["bindings"]]

    def select_paged(self, query: str) -> Iterator[Binding]:
        """All rows of an ORDER BY query, `page_size` at a time (LIMIT / OFFSET)."""
        size, offset = self.params.page_size, 0
        while True:
            rows = self.select(f"{query}\nLIMIT {size} OFFSET {offset}")
            yield from rows
            if len(rows) < size:
                return
            offset += size

    def select_many(self, queries: Iterable[str]) -> list[list[Binding]]:
        """Paged SELECTs, at most `concurrency` in flight; results in the queries' order."""
        with ThreadPoolExecutor(max_workers=self.params.concurrency) as pool:
            return list(pool.map(lambda q: list(self.select_paged(q)), queries))

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> SparqlClient:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

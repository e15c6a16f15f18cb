"""Which SPARQL endpoint a stage queries, and the local Oxigraph one loaded with the slice.

Offline (`kg.sparql.backend: oxigraph`) a stage starts `paperline services up oxigraph`
when it is not running, loads the slice unless the store already holds this exact file
(its sha256 is recorded in a side graph), and stops the server after only if it started it.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import requests

from tasks.core import services
from tasks.core.errors import InputError, ServiceError
from tasks.core.params import RuntimeParams
from tasks.core.paths import repo_root
from tasks.core.progress import get_logger
from tasks.kg.params import SparqlParams
from tasks.kg.sparql import SparqlClient

log = get_logger("paperline.kg.endpoint")
SLICE = "data/interim/kg/wikidata_slice.nt"
META_GRAPH = "urn:paperline:meta"
SLICE_MARK = "<urn:paperline:slice> <urn:paperline:sha256>"
ACCEPT = {"Accept": "application/sparql-results+json"}
NT = {"Content-Type": "application/n-triples"}


@dataclass(frozen=True)
class Endpoint:
    query_url: str
    dataset_version: str  # cache-key part: the slice's sha256, or "wikidata"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_slice(base_url: str, slice_path: Path) -> str:
    """Replace the store's default graph with the slice unless it already holds it."""
    if not slice_path.exists():
        raise InputError(f"{slice_path}: missing; run `dvc repro kg-slice` first")
    digest = file_sha256(slice_path)
    ask = f'ASK {{ GRAPH <{META_GRAPH}> {{ {SLICE_MARK} "{digest}" }} }}'
    answer = requests.post(f"{base_url}/query", data={"query": ask}, headers=ACCEPT, timeout=30)
    answer.raise_for_status()
    if answer.json()["boolean"]:
        return digest
    log.info("loading %s into Oxigraph at %s", slice_path.name, base_url)
    with open(slice_path, "rb") as body:
        loaded = requests.put(f"{base_url}/store?default", data=body, headers=NT, timeout=600)
    mark = f'{SLICE_MARK} "{digest}" .\n'.encode()
    if loaded.ok:
        loaded = requests.put(
            f"{base_url}/store?graph={META_GRAPH}", data=mark, headers=NT, timeout=30
        )
    if not loaded.ok:
        raise ServiceError(f"oxigraph at {base_url}: loading the slice failed: {loaded.text[:200]}")
    return digest


def serve_slice_note(base_url: str, root: Path) -> str:
    """After `paperline services up oxigraph`: load the slice when it has been built."""
    if not (root / SLICE).exists():
        return f"oxigraph: no slice yet ({SLICE}); `dvc repro kg-slice` builds it"
    return f"oxigraph: serving {SLICE} (sha256 {load_slice(base_url, root / SLICE)[:12]})"


@contextlib.contextmanager
def open_endpoint(
    sparql: SparqlParams, runtime: RuntimeParams, root: Path | None = None
) -> Iterator[Endpoint]:
    """The endpoint to query inside the block (Oxigraph started and loaded when local)."""
    root = root or repo_root()
    if sparql.backend == "wikidata":
        yield Endpoint(sparql.wikidata_url, "wikidata")
        return
    with services.running("oxigraph", runtime, root) as state:
        yield Endpoint(f"{state.url}/query", load_slice(state.url, root / SLICE))


@contextlib.contextmanager
def open_client(
    sparql: SparqlParams,
    runtime: RuntimeParams,
    root: Path | None = None,
    endpoint_url: str | None = None,
) -> Iterator[SparqlClient]:
    """A cached client on the configured endpoint, or on `endpoint_url` when given."""
    root = root or repo_root()
    cache = Path(sparql.cache)
    cache = cache if cache.is_absolute() else root / cache
    if endpoint_url:
        with SparqlClient(endpoint_url, sparql, cache, endpoint_url) as client:
            yield client
        return
    with (
        open_endpoint(sparql, runtime, root) as endpoint,
        SparqlClient(endpoint.query_url, sparql, cache, endpoint.dataset_version) as client,
    ):
        yield client
